"""The one place that calls ``numba.njit``: the ``kernel`` and ``parallel_kernel`` decorators.

Every kernel is compiled with ``cache=True`` (compile time is user time: a
second process loads machine code from Numba's on-disk cache), ``nogil=True``
and NumPy's error model (IEEE results, no Python exceptions in kernels). Bounds checking stays at Numba's default so that a CI job can
turn it on globally with ``NUMBA_BOUNDSCHECK=1``.
"""

from __future__ import annotations

import threading

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])

#: Every kernel defined with :func:`kernel`, for the one-specialization check.
KERNELS: list[Any] = []


def kernel(fn: F) -> F:
    """Compile ``fn`` as a cached, GIL-free Numba kernel (name must end in ``_kernel``)."""
    if not fn.__name__.endswith("_kernel"):
        raise ValueError(f"kernel names end in '_kernel': {fn.__name__}")
    # error_model="numpy": float division by zero gives inf/NaN as in NumPy instead of
    # raising ZeroDivisionError inside the kernel (integer division is guarded explicitly).
    compiled = numba.njit(cache=True, nogil=True, error_model="numpy")(fn)
    KERNELS.append(compiled)
    return compiled  # type: ignore[no-any-return]


def parallel_kernel(fn: F) -> F:
    """Like :func:`kernel`, compiled with ``parallel=True``: its ``numba.prange`` loops
    are split across Numba's threads (``numba.set_num_threads``; default: one per core).

    For the sweeps of the graph passes that split into independent pieces (per chunk
    of nodes, then a short serial scan over the chunks). Such a kernel must give the
    same result at any thread count: its loops are over a fixed number of chunks
    (never one per thread) and they combine per-chunk results in chunk order.
    Concurrent calls from several Python threads need a thread-safe Numba threading
    layer (``omp`` or ``tbb``; ``workqueue`` aborts the process on concurrent use).
    """
    if not fn.__name__.endswith("_kernel"):
        raise ValueError(f"kernel names end in '_kernel': {fn.__name__}")
    compiled = numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)(fn)
    KERNELS.append(compiled)
    return compiled  # type: ignore[no-any-return]


#: Sweeps over fewer nodes run serially (starting Numba's threads costs more than a
#: small sweep); larger ones are split into chunks of ``CHUNK_NODES`` nodes. A fixed
#: chunk size, not one chunk per thread, so a result never depends on the thread count.
#: Module attributes read at each call: tests lower both to split small graphs.
#: Off by default (2**62): measured on a 2-core Zen 4, O2 over random graphs ran no faster
#: split than serial (4e5 nodes: 49 ms against 43 ms; 1e7: 1.49 s against 1.26-1.53 s),
#: and Numba's OpenMP workers spinning after each split region took cores from process
#: pools (``map_modules(engine="local")`` fell from 1.30x to 0.40x serial). Lower it to
#: split: the results are the same either way.
PARALLEL_MIN_NODES = 1 << 62
CHUNK_NODES = 1 << 16


_PARALLEL_SWEEP = threading.Lock()


@contextmanager
def parallel_sweep(n_nodes: int) -> Iterator[int]:
    """The chunk size for a parallel sweep over ``n_nodes`` nodes, or 0: sweep serially;
    run the sweep's kernels inside the ``with``.

    One parallel sweep at a time in the process: Numba's ``workqueue`` threading layer
    (what a machine without OpenMP or TBB gets) aborts the process when two Python
    threads run parallel kernels at once. A sweep that finds another one running goes
    serially instead of waiting (it is one of several passes running in parallel
    already: ``map_modules`` on threads, a user's thread pool)."""
    if n_nodes < PARALLEL_MIN_NODES or not _PARALLEL_SWEEP.acquire(blocking=False):
        yield 0
        return
    try:
        yield CHUNK_NODES
    finally:
        _PARALLEL_SWEEP.release()


def _make_prefetch() -> Any:
    """``prefetch(array, index)``: a hint to load ``array[index]`` into cache (llvm.prefetch).

    Hash-table sweeps over 1e7 nodes are bound by cache misses on the table;
    issuing the load for node i+D while node i is processed hides that latency.
    """
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx: Any, arr: Any, idx: Any) -> Any:
        sig = types.void(arr, idx)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            aryty = signature.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]],
                                           wraparound=False)
            i8p = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
            builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
            return context.get_dummy_value()

        return sig, codegen

    return prefetch


prefetch = _make_prefetch()


def helper(fn: F) -> F:
    """Compile a helper function that kernels call (LLVM inlines it where that pays).

    For helpers with branches and loops (the text scanner's grammar): Numba's
    IR-level ``inline="always"`` copies them into every call site before
    typing, which made one scanner kernel take 90 s to compile cold; a plain
    call costs nothing after LLVM's inliner and compiles once.
    """
    return numba.njit(cache=True, nogil=True, error_model="numpy")(fn)  # type: ignore[no-any-return]


def inline(fn: F) -> F:
    """Compile a small helper that Numba inlines into the kernels calling it.

    Used for the few rules kernels share (the operand walker in
    ``irkernel.ir.operands``), so they are written once and cost nothing.
    """
    return numba.njit(cache=True, nogil=True, error_model="numpy",  # type: ignore[no-any-return]
                      inline="always")(fn)
