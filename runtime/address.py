"""The data pointer of a NumPy array, read without ``ndarray.ctypes`` (1-2 us a call).

Why: a call of a one-kernel graph needs the address of every input and output, and
``arr.ctypes.data`` (or ``arr.__array_interface__``) builds a helper object or a dict
each time: three addresses cost more than the rest of the call together. The address is
the ``data`` field of NumPy's ``PyArrayObject``, the first field after the object
header (``numpy/ndarraytypes.h``: part of NumPy's ABI, which compiled extensions rely
on), read here with one ``ctypes`` load (~0.1 us).

The layout is checked once, when this module loads, against ``ctypes.data`` on arrays
of several kinds (fresh, a view at an offset, empty); if it disagrees (a NumPy or a
Python build of another layout), :func:`data_address` is ``ctypes.data`` itself.
Imports NumPy and ctypes only.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np

#: Offset of ``PyArrayObject.data``: right after ``PyObject_HEAD``.
_DATA_OFFSET = object.__basicsize__
_LOAD = ctypes.c_void_p.from_address


def _read_field(arr: np.ndarray) -> int:
    return _LOAD(id(arr) + _DATA_OFFSET).value or 0


def _via_ctypes(arr: np.ndarray) -> int:
    return arr.ctypes.data


def _pick() -> Callable[[np.ndarray], int]:
    base = np.arange(64, dtype=np.float32).reshape(8, 8)
    probes = (base, base[3:, 1:], base.T, np.empty(0, np.int64), np.zeros((), np.float64))
    if all(_read_field(a) == a.ctypes.data for a in probes if a.size):
        return _read_field
    return _via_ctypes


#: ``data_address(arr) -> int``: the address of ``arr``'s first element (``arr`` must be
#: an ``np.ndarray``; meaningless for an empty one, as ``ctypes.data`` is).
data_address: Callable[[np.ndarray], int] = _pick()

__all__ = ["data_address"]
