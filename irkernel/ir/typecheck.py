"""Python driver of ``type_sweep_kernel``: the signature table and its resume loop.

Shared by the builder (assign types to bulk-added nodes) and the verifier
(check the types a Function claims). The caller supplies ``type_of``, which
evaluates an op rule for one node and raises its own error kind.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from irkernel.ir.checks import (
    SIG_WIDTH,
    SWEEP_DONE,
    SWEEP_MISMATCH,
    SWEEP_NEEDS_PYTHON,
    SWEEP_NEW_SIGNATURE,
    SWEEP_TABLE_FULL,
    type_sweep_kernel,
)
from irkernel.ir.ops import op_arrays

# type_of(node_id) -> (dtype code, shape id); shape id -2 means "no such shape".
TypeOf = Callable[[int], tuple[int, int]]


class SignatureTable:
    """Distinct (opcode, attr_id, operand types) keys and their result types."""

    def __init__(self, capacity: int = 256) -> None:
        self.n = 0
        self._alloc(capacity)

    def _alloc(self, capacity: int) -> None:
        old_n = self.n
        keys = np.full((capacity, SIG_WIDTH), -1, np.int32)
        sig_dtype = np.zeros(capacity, np.int8)
        sig_shape = np.zeros(capacity, np.int32)
        if old_n:
            keys[:old_n] = self.keys[:old_n]
            sig_dtype[:old_n] = self.dtype[:old_n]
            sig_shape[:old_n] = self.shape_id[:old_n]
        self.keys, self.dtype, self.shape_id = keys, sig_dtype, sig_shape
        self.slots = np.full(2 * capacity, -1, np.int32)
        # Re-insert old keys by sweeping them as fake nodes is overkill: rebuild in Python
        # (one iteration per distinct signature).
        for s in range(old_n):
            self._insert_slot(s)

    def _insert_slot(self, s: int) -> None:
        h = 14695981039346656037
        for v in self.keys[s].tolist():
            h = ((h ^ (v & 0xFFFFFFFF)) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
        mask = len(self.slots) - 1
        slot = (h >> 17) & mask
        while self.slots[slot] != -1:
            slot = (slot + 1) & mask
        self.slots[slot] = s

    def _forget_pending(self) -> None:
        """Remove the key stored at ``n`` (the latest insertion, so no probe chain passes it)."""
        self.slots[self.slots == self.n] = -1
        self.keys[self.n] = -1

    def sweep(self, kind: np.ndarray, a0: np.ndarray, a1: np.ndarray, extra: np.ndarray,
              attr_id: np.ndarray, dtype: np.ndarray, shape_id: np.ndarray,
              const_dtype: np.ndarray, const_shape_id: np.ndarray, start: int, check: bool,
              type_of: TypeOf) -> int:
        """Assign or check types of nodes ``start..n``; returns the first mismatch or -1.

        ``dtype``/``shape_id`` must be writeable in assign mode. Rule errors come
        from ``type_of``.
        """
        encoding = op_arrays().encoding
        i = start
        while True:
            i, status = type_sweep_kernel(kind, a0, a1, extra, attr_id, dtype, shape_id, encoding,
                                          const_dtype, const_shape_id, i, check, self.keys,
                                          self.slots, self.dtype, self.shape_id, self.n)
            if status == SWEEP_DONE:
                return -1
            if status == SWEEP_TABLE_FULL:
                self._alloc(2 * len(self.keys))
            elif status == SWEEP_NEW_SIGNATURE:
                filled = False
                try:
                    self.dtype[self.n], self.shape_id[self.n] = type_of(i)
                    filled = True
                finally:
                    if not filled:  # the rule raised: forget the key the kernel just stored
                        self._forget_pending()
                self.n += 1
            elif status == SWEEP_NEEDS_PYTHON:
                want = type_of(i)
                if check and (int(dtype[i]), int(shape_id[i])) != want:
                    return i
                if not check:
                    dtype[i], shape_id[i] = want
                i += 1
            else:
                assert status == SWEEP_MISMATCH
                return i
