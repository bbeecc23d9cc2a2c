"""The calling convention of compiled PrimFuncs: NumPy arrays in, checked, then a ctypes call.

Destination-passing, as TVM: every buffer is an argument (outputs are
preallocated by the caller and written in place) and the kernel returns
None. Arguments are the PrimFunc's parameters in order (or by keyword):

* a buffer parameter takes a ``numpy.ndarray`` with exactly the declared
  dtype and number of dimensions; constant extents must match, shape vars
  are bound from the first array that uses them and must agree everywhere;
  without declared strides the array must be C-contiguous, with declared
  strides its element strides must equal them; its data pointer must have the
  declared alignment; a buffer the kernel stores to must be writeable;
* a scalar parameter takes a Python/NumPy number of its kind (ints are
  range-checked, bools only for bool);
* buffers passed to the kernel must not overlap when one of them is written
  (the code is compiled with ``noalias``).

Violations raise ``TypeError`` (wrong kind or dtype, wrong argument count)
or ``ValueError`` (shape, layout, alignment, aliasing) naming the argument,
before any native code runs: bad input is never a segfault. Natively every
kernel takes one pointer to an ``int64`` array, one slot per parameter and
then per shape var (``runtime/lower.py``): :meth:`CallingConvention.pack`
builds that array.

That array is all the native code sees, so a kernel bound to another kernel's
code (a stale or misplaced cache entry) would read the wrong slots: garbage
pointers and loop bounds, a crash or a loop that never ends. Every compiled
kernel therefore carries an *ABI record*, a constant ``<symbol>__abi``
(:func:`abi_record`: the slot count and a digest of the slot layout, each
slot's kind and dtype), and the loader compares it with the record of the
kernel it binds (:meth:`CallingConvention.record_problem`) before the kernel
can be called.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.tir import dtype as dt
from irkernel.tir.buffer import Buffer
from irkernel.tir.expr import IntImm, PrimExpr, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import post_order
from irkernel.tir.interp import evaluate
from irkernel.tir.printer import expr_text
from irkernel.tir.stmt import BufferStore
from runtime.objfile import ABI_RECORD_SIZE, ABI_SUFFIX

def _describe(buf: Buffer) -> str:
    return f"{buf.dtype}[{', '.join(expr_text(s) for s in buf.shape)}]"


def _extents(exprs: Sequence[PrimExpr]) -> str:
    """Constant extents as numbers, symbolic ones as ``?`` (names are not part of a
    kernel's identity: structurally equal kernels share code whatever their vars are
    called)."""
    return ",".join(str(e.value) if isinstance(e, IntImm) else "?" for e in exprs)


def slot_layout(params: Sequence[Buffer | Var], shape_vars: Sequence[Var]) -> str:
    """What each packed slot holds: a buffer's dtype, extents and strides
    (``float32[?,4]``), a scalar's dtype, ``shape`` for a shape var. Computed from a
    kernel's parameters before flattening, which the TIR lowering passes keep."""
    kinds = []
    for p in params:
        if isinstance(p, Buffer):
            strides = f"/{_extents(p.strides)}" if p.strides else ""
            kinds.append(f"{p.dtype}[{_extents(p.shape)}{strides}]")
        else:
            kinds.append(str(p.dtype))
    return ";".join([*kinds, *("shape" for _ in shape_vars)])


def abi_record(layout: str) -> bytes:
    """The ABI record of a kernel with slot ``layout``: slot count (int64, little endian)
    and a 16-byte digest of the layout."""
    count = len(layout.split(";")) if layout else 0
    record = count.to_bytes(8, "little") + hashlib.blake2b(layout.encode(),
                                                           digest_size=16).digest()
    assert len(record) == ABI_RECORD_SIZE
    return record


class AbiMismatch(RuntimeError):
    """Native code whose ABI record is not its kernel's (``symbol``: the code's name)."""

    def __init__(self, message: str, symbol: str) -> None:
        super().__init__(message)
        self.symbol = symbol


def empty(shape: int | Sequence[int], dtype: Any = np.float32, align: int = 64) -> np.ndarray:
    """An uninitialized C-contiguous array whose data is ``align``-byte aligned.

    For buffers declared with ``align=``; NumPy itself only guarantees 16 bytes.
    """
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dtype = np.dtype(dtype)
    if align < 1 or align & (align - 1):
        raise ValueError(f"empty: align must be a power of two, got {align}")
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset:offset + nbytes].view(dtype).reshape(shape)


class CallingConvention:
    """Argument checking and packing for one PrimFunc (built from its *unlowered* params).

    Parameters
    ----------
    func : PrimFunc
    name : str
        Used in every error message.
    """

    def __init__(self, func: PrimFunc, name: str) -> None:
        self.name = name
        self.params = func.params
        self.shape_vars = func.shape_vars
        self.written = frozenset(n.buffer.name for n in post_order(func.body)
                                 if isinstance(n, BufferStore))
        #: Number of int64 slots of the packed argument array (params, then shape vars).
        self.n_slots = len(self.params) + len(self.shape_vars)
        self.positions = {p.name: k for k, p in enumerate(self.params)}
        self.layout = slot_layout(self.params, self.shape_vars)

    def check_record(self, record: bytes, symbol: str) -> None:
        """Raise :class:`AbiMismatch` unless native code ``symbol`` with ABI ``record``
        fits this kernel (the loader calls it before a kernel can be called)."""
        problem = self.record_problem(record)
        if problem is not None:
            raise AbiMismatch(f"kernel {self.name!r} is bound to code {symbol!r}, but "
                              f"{problem}", symbol)

    def record_problem(self, record: bytes) -> str | None:
        """What makes native code with ABI ``record`` unfit to be this kernel, or None."""
        if record == abi_record(self.layout):
            return None
        if not record:
            return "its code has no ABI record"
        slots = int.from_bytes(record[:8], "little") if len(record) >= 8 else -1
        if slots != self.n_slots:
            return f"its code takes {slots} argument slots, {self.signature} has {self.n_slots}"
        return f"its code's argument layout is not {self.layout} ({self.signature})"

    @property
    def signature(self) -> str:
        """``name(a: float32[n], out: float32[n] (written), k: int64)``."""
        parts = []
        for p in self.params:
            if isinstance(p, Buffer):
                parts.append(f"{p.name}: {_describe(p)}"
                             + (" (written)" if p.name in self.written else ""))
            else:
                parts.append(f"{p.name}: {p.dtype}")
        return f"{self.name}({', '.join(parts)})"

    def _arguments(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Any]:
        n = len(self.params)
        if len(args) > n:
            raise TypeError(f"{self.signature} takes {n} arguments, got {len(args)}")
        out: list[Any] = list(args) + [_MISSING] * (n - len(args))
        for key, value in kwargs.items():
            pos = self.positions.get(key)
            if pos is None:
                raise TypeError(f"{self.signature}: unknown argument {key!r}")
            if out[pos] is not _MISSING:
                raise TypeError(f"{self.signature}: argument {key!r} given twice")
            out[pos] = value
        missing = [p.name for p, v in zip(self.params, out, strict=True) if v is _MISSING]
        if missing:
            raise TypeError(f"{self.signature}: missing argument(s) {', '.join(missing)} "
                            f"(got {len(args) + len(kwargs)} of {n})")
        return out

    def pack(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> np.ndarray:
        """Check every argument and return the packed argument slots (``int64[n_slots]``).

        Raises
        ------
        TypeError, ValueError
            Naming the argument and what is wrong with it.
        """
        values = self._arguments(args, kwargs)
        env: dict[str, int] = {}
        deferred: list[tuple[str, PrimExpr, int]] = []
        native: list[Any] = []
        arrays: list[tuple[str, np.ndarray]] = []
        for param, value in zip(self.params, values, strict=True):
            if isinstance(param, Var):
                native.append(self._scalar(param, value))
                continue
            arr = self._array(param, value, env, deferred)
            arrays.append((param.name, arr))
            native.append(arr.ctypes.data)
        for what, expr, actual in deferred:
            want = int(evaluate(expr, env)[0])
            if want != actual:
                raise ValueError(f"{self.name}: {what} is {actual}, expected "
                                 f"{expr_text(expr)} = {want}")
        self._check_aliasing(arrays)
        native.extend(env[v.name] for v in self.shape_vars)
        return np.array(native, dtype=np.int64)

    def _bind(self, what: str, expr: PrimExpr, actual: int, env: dict[str, int],
              deferred: list[tuple[str, PrimExpr, int]]) -> None:
        if isinstance(expr, IntImm):
            if actual != expr.value:
                raise ValueError(f"{self.name}: {what} is {actual}, expected {expr.value}")
        elif isinstance(expr, Var):
            bound = env.setdefault(expr.name, actual)
            if bound != actual:
                raise ValueError(f"{self.name}: {what} is {actual}, but {expr.name} = {bound} "
                                 "from an earlier argument")
        else:
            deferred.append((what, expr, actual))

    def _array(self, param: Buffer, value: Any, env: dict[str, int],
               deferred: list[tuple[str, PrimExpr, int]]) -> np.ndarray:
        arg = f"argument {param.name!r}"
        if not isinstance(value, np.ndarray):
            raise TypeError(f"{self.name}: {arg} must be a numpy.ndarray ({_describe(param)}), "
                            f"got {type(value).__name__}")
        if value.dtype != dt.numpy_dtype(param.dtype):  # bfloat16: uint16 bits
            raise TypeError(f"{self.name}: {arg} has dtype {value.dtype}, expected "
                            f"{param.dtype}")
        if value.ndim != param.ndim:
            raise ValueError(f"{self.name}: {arg} has {value.ndim} dimension(s) "
                             f"{value.shape}, expected {param.ndim} ({_describe(param)})")
        for k, (dim, n) in enumerate(zip(param.shape, value.shape, strict=True)):
            self._bind(f"{arg} dimension {k}", dim, n, env, deferred)
        if not param.strides:
            if not value.flags.c_contiguous:
                raise ValueError(f"{self.name}: {arg} is not C-contiguous (strides "
                                 f"{value.strides}); pass numpy.ascontiguousarray(...)")
        else:
            for k, (stride, nbytes) in enumerate(zip(param.strides, value.strides,
                                                     strict=True)):
                if nbytes % value.itemsize or nbytes < 0:
                    raise ValueError(f"{self.name}: {arg} has byte stride {nbytes} in "
                                     f"dimension {k}, not a non-negative element multiple")
                self._bind(f"{arg} stride {k}", stride, nbytes // value.itemsize, env,
                           deferred)
        address = value.ctypes.data
        if value.size and address % param.align:
            raise ValueError(f"{self.name}: {arg} data address {address:#x} is not "
                             f"{param.align}-byte aligned (allocate it with "
                             f"runtime.empty(shape, dtype, align={param.align}))")
        if param.name in self.written and not value.flags.writeable:
            raise ValueError(f"{self.name}: {arg} is read-only, but the kernel writes it")
        return value

    def _scalar(self, param: Var, value: Any) -> Any:
        arg = f"argument {param.name!r}"
        elem = param.dtype
        if elem == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{self.name}: {arg} must be a bool, got {value!r}")
            return int(bool(value))
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"{self.name}: {arg} must be a {elem} number, got {value!r}")
        if dt.is_int(elem):
            if not isinstance(value, numbers.Integral):
                raise TypeError(f"{self.name}: {arg} must be an int ({elem}), got {value!r}")
            lo, hi = dt.int_range(elem)
            if not lo <= int(value) <= hi:
                raise ValueError(f"{self.name}: {arg} = {value} does not fit {elem}")
            return int(value)
        return int(np.float64(value).view(np.int64))  # a float travels as float64 bits

    def _check_aliasing(self, arrays: list[tuple[str, np.ndarray]]) -> None:
        """No written buffer may overlap another buffer argument (by byte range).

        One sort of the ranges, then a sweep that remembers the range reaching
        furthest so far and the written range reaching furthest: any
        overlapping pair with a written member meets one of them. O(n log n),
        so a kernel of thousands of buffers (a concat of many tensors) checks
        as fast as a small one.
        """
        spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes, name)
                       for name, a in arrays if a.size)
        reach_any: tuple[int, int, str] | None = None
        reach_written: tuple[int, int, str] | None = None
        for span in spans:
            lo, hi, name = span
            written = name in self.written
            hit = reach_written if reach_written is not None and lo < reach_written[1] else None
            if hit is None and written and reach_any is not None and lo < reach_any[1]:
                hit = reach_any
            if hit is not None:
                first, second = sorted((hit[2], name), key=lambda n: self.positions[n])
                raise ValueError(f"{self.name}: arguments {first!r} and {second!r} "
                                 "overlap in memory, and the kernel writes one of them "
                                 "(buffers are noalias; pass a copy)")
            if reach_any is None or hi > reach_any[1]:
                reach_any = span
            if written and (reach_written is None or hi > reach_written[1]):
                reach_written = span


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()

__all__ = ["ABI_RECORD_SIZE", "ABI_SUFFIX", "AbiMismatch", "CallingConvention", "abi_record",
           "empty", "slot_layout"]
