"""Reading ``.npy`` inputs for ``irkernel run`` without trusting them.

``np.load`` allocates what a file's header claims before it reads the data: a
144-byte file whose header says ``(100000, 100000)`` asks for 37 GiB, and an
empty file is an EOFError traceback. Here a file is checked before anything
is allocated, with NumPy's own header parser (``numpy.lib.format``):

1. it is a regular file (``O_NONBLOCK`` so a FIFO can not block the open),
   readable, and not empty;
2. the magic string and a version-1.0/2.0 header parse, the dtype holds no
   Python objects (``allow_pickle=False``, as ``np.load`` does);
3. the data the header describes is exactly what the file holds after it
   (``prod(shape) * itemsize`` in Python ints, so nothing wraps);
4. dtype and shape are those of the parameter the file feeds (a non-native
   byte order of the right type is accepted and converted, losslessly);

and only then is the array read. Each failure is an :class:`InputError` whose
one-line message names the file and the problem. Imports numpy only.
"""

from __future__ import annotations

import errno
import math
import os
import stat
import tokenize
from typing import BinaryIO

import numpy as np

#: Largest header NumPy writes for a version-1.0/2.0 file it can read back safely.
_MAX_HEADER = 10_000


class InputError(Exception):
    """A ``.npy`` input that can not be used; the message names the file and why."""


def _open_regular(path: str) -> BinaryIO:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError("no such file") from None
    except IsADirectoryError:
        raise InputError("is a directory, not a .npy file") from None
    except PermissionError:
        raise InputError("permission denied") from None
    except OSError as exc:
        raise InputError(f"can not be opened ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise InputError(f"is {what}, not a .npy file")
    return os.fdopen(fd, "rb")


def _read_header(fh: BinaryIO, size: int) -> tuple[tuple[int, ...], bool, np.dtype]:
    if size == 0:
        raise InputError("is empty, not a .npy file")
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
    except (ValueError, EOFError):
        raise InputError("is not a .npy file (bad magic string)") from None
    readers = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
    if version not in readers:
        raise InputError(f".npy format version {version[0]}.{version[1]} is not supported "
                         "(1.0 and 2.0 are)")
    try:
        shape, fortran_order, dtype = readers[version](fh, max_header_size=_MAX_HEADER)
    except (ValueError, EOFError, SyntaxError, TypeError, OverflowError, RecursionError,
            tokenize.TokenError) as exc:  # what numpy's header parser lets through (fuzzed)
        raise InputError(f"has a malformed .npy header ({' '.join(str(exc).split())})"
                         ) from None
    if dtype.hasobject:
        raise InputError("holds Python objects (pickles are not loaded)")
    return tuple(int(d) for d in shape), bool(fortran_order), dtype


def _type_str(dtype: np.dtype, shape: tuple[int, ...]) -> str:
    return f"{dtype.name}[{', '.join(map(str, shape))}]"


def read_npy(path: str, want: tuple[np.dtype, tuple[int, ...]] | None = None) -> np.ndarray:
    """The array in ``path``, checked as the module docstring says.

    Parameters
    ----------
    path : str
    want : (dtype, shape), optional
        The parameter's type; a file of another dtype or shape is an error.

    Raises
    ------
    InputError
        Naming the problem (the caller adds the file name).
    """
    with _open_regular(path) as fh:
        shape, fortran_order, dtype = _checked_header(fh)
        if want is not None:
            want_dtype, want_shape = np.dtype(want[0]), tuple(want[1])
            if dtype.newbyteorder("=") != want_dtype.newbyteorder("="):
                raise InputError(f"holds {_type_str(dtype, shape)}, but the parameter is "
                                 f"{_type_str(want_dtype, want_shape)} (wrong dtype)")
            if shape != want_shape:
                raise InputError(f"holds {_type_str(dtype, shape)}, but the parameter is "
                                 f"{_type_str(want_dtype, want_shape)} (wrong shape)")
        try:
            flat = np.fromfile(fh, dtype=dtype, count=math.prod(shape))
        except (OSError, ValueError) as exc:
            raise InputError(f"can not be read ({exc})") from None
    if flat.size != math.prod(shape):  # the file changed under us
        raise InputError("was truncated while it was read")
    arr = flat.reshape(shape, order="F" if fortran_order else "C")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return np.ascontiguousarray(arr)


def _checked_header(fh: BinaryIO) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Steps 2 and 3 of the module doc: the header parses and the data fits the file."""
    size = os.fstat(fh.fileno()).st_size
    shape, fortran_order, dtype = _read_header(fh, size)
    data_bytes = math.prod(shape) * dtype.itemsize
    held = size - fh.tell()
    if held != data_bytes:
        what = "truncated" if held < data_bytes else "longer than its header says"
        raise InputError(f"is {what}: its header describes {_type_str(dtype, shape)} "
                         f"({data_bytes} bytes of data), the file holds {held}")
    return shape, fortran_order, dtype


def read_npy_header(path: str) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape of the array in ``path``, checked as :func:`read_npy` checks
    them (steps 1 to 3), without reading the data: what binds a model's symbolic dims
    before its parameters' types are known.

    Raises
    ------
    InputError
        Naming the problem (the caller adds the file name).
    """
    with _open_regular(path) as fh:
        shape, _, dtype = _checked_header(fh)
    return dtype, shape


def describe_os_error(exc: OSError) -> str:
    """A short text for an OSError (``[Errno 2] ...`` without the noise)."""
    if exc.errno == errno.ENOENT:
        return "no such file"
    if exc.errno == errno.EISDIR:
        return "is a directory"
    if exc.errno == errno.EACCES:
        return "permission denied"
    return exc.strerror or str(exc)


__all__ = ["InputError", "describe_os_error", "read_npy", "read_npy_header"]
