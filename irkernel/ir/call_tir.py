"""The binding rule of ``call_tir``: how a call's tensors meet the PrimFunc's buffers.

``call_tir`` passes its operands, then a fresh result, as C-contiguous
buffers to the callee's parameters, in order. A parameter matches a tensor
when the dtypes are equal and:

* the parameter has one dimension: it sees the tensor's C-order flat view
  (this is how a shape-generic kernel takes tensors of any rank), its extent
  being the element count; or
* the ranks are equal and every extent matches.

An extent is a constant or a shape var; a shape var binds to the first extent
it meets and must equal it everywhere else. The verifier, the reference
interpreter and the graph executor all apply this one rule. PrimFunc
parameters are read by duck typing (``dtype``, ``shape``; a constant extent
has ``value``, a shape var has ``name``), so this layer needs no TIR import.
Imports nothing from irkernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

TensorType = tuple[str, tuple[int, ...]]  # (dtype name, shape)


class Mismatch(NamedTuple):
    """Why a parameter does not take its tensor (callers phrase the message)."""

    position: int
    name: str  # the parameter's name
    declared: str  # e.g. ``float32[4]`` or ``scalar int64``
    role: str  # "operand" or "result"
    actual: str  # e.g. ``float64[4]``

    def describe(self, quote: bool = False) -> str:
        name = repr(self.name) if quote else self.name
        if self.declared.startswith("scalar"):
            return (f"parameter {self.position} ({name}) is a {self.declared}; call_tir "
                    "passes buffers only")
        return (f"parameter {self.position} ({name}) is {self.declared}, but the {self.role} "
                f"is {self.actual}")


def bind_call_tir(params: Sequence[Any], types: Sequence[TensorType]
                  ) -> tuple[dict[str, int], Mismatch | None]:
    """Bind a call's tensor types (operands, then the result) to a PrimFunc's parameters.

    The counts must already agree. Returns the shape-var values and None, or
    the first parameter that does not take its tensor.
    """
    env: dict[str, int] = {}
    last = len(types) - 1
    for k, (param, (dtype, shape)) in enumerate(zip(params, types, strict=True)):
        role = "result" if k == last else "operand"
        dims = getattr(param, "shape", None)
        if dims is None:
            return env, Mismatch(k, param.name, f"scalar {param.dtype}", role,
                                 _text(dtype, shape))
        extents = shape if len(dims) != 1 else (int(np.prod(shape, dtype=np.int64)),)
        fits = param.dtype == dtype and len(dims) == len(extents)
        for dim, extent in zip(dims, extents, strict=False):
            if not fits:
                break
            value = getattr(dim, "value", None)
            if value is not None:
                fits = value == extent
            else:
                fits = env.setdefault(dim.name, extent) == extent
        if not fits:
            shown = ", ".join(str(getattr(d, "value", getattr(d, "name", "?"))) for d in dims)
            return env, Mismatch(k, param.name, f"{param.dtype}[{shown}]", role,
                                 _text(dtype, shape))
    return env, None


def _text(dtype: str, shape: tuple[int, ...]) -> str:
    return f"{dtype}[{', '.join(map(str, shape))}]"


__all__ = ["Mismatch", "bind_call_tir"]
