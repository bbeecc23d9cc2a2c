"""The one place that calls ``numba.njit``: the ``kernel`` decorator.

Every kernel is compiled with ``cache=True`` (compile time is user time: a
second process loads machine code from Numba's on-disk cache) and
``nogil=True``. Bounds checking stays at Numba's default so that a CI job can
turn it on globally with ``NUMBA_BOUNDSCHECK=1``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])

#: Every kernel defined with :func:`kernel`, for the one-specialization check.
KERNELS: list[Any] = []


def kernel(fn: F) -> F:
    """Compile ``fn`` as a cached, GIL-free Numba kernel (name must end in ``_kernel``)."""
    if not fn.__name__.endswith("_kernel"):
        raise ValueError(f"kernel names end in '_kernel': {fn.__name__}")
    compiled = numba.njit(cache=True, nogil=True)(fn)
    KERNELS.append(compiled)
    return compiled  # type: ignore[no-any-return]
