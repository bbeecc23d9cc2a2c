"""Scheduled TIR kernels for the runtime benchmarks (``bench_runtime.py``).

Each factory returns a ``@T.prim_func`` written with ``irkernel.tir.script``;
the schedule (parallel chunks, vector width, register tiles, packing) is
written in the TIR itself, as in TVM after scheduling. Nothing here relies on
fast math: reductions keep explicit partial sums (a legitimate reordering we
choose in the schedule, not one LLVM is allowed to invent).

* :func:`elementwise` -- ``out = f(a, b, c)`` over ``n`` floats (a shape
  variable): a parallel loop over 64-wide vector blocks, a serial tail, and
  optionally non-temporal stores (the output of a 40 MB kernel is not read
  again soon, so streaming it saves the read-for-ownership traffic).
* :func:`vsum` -- the sum of ``n`` floats: per parallel task, ``acc``
  independent 16-lane vector accumulators (enough to hide the add latency), then a
  fixed-order combination of the partial sums.
* :func:`matmul` -- ``C = A @ B``: one parallel loop over column blocks of
  C; each task packs its block of B into ``NR``-wide panels, then runs an
  ``MR x NR`` register tile (``T.fma``) over ``KC``-deep slices of it.
"""

from collections.abc import Callable
from typing import Any

from irkernel.tir import script as T

#: Vector block of the elementwise and reduction kernels (4 AVX-512 registers of float32).
BLOCK = 64

_OPS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "add": lambda a, b, c: a + b,
    "exp": lambda a, b, c: T.exp(a),
    "fma": lambda a, b, c: a * b + c,        # two IEEE roundings, like NumPy's a * b + c
}
#: Inputs each elementwise op reads (the rest of a, b, c are not parameters).
ARITY = {"add": 2, "exp": 1, "fma": 3}


def elementwise(op: str, dtype: str = "float32", *, nontemporal: bool = True) -> Any:
    """``out[i] = op(a[i], b[i], c[i])`` for ``i < n``; inputs ``ARITY[op]`` of a, b, c.

    Parameters
    ----------
    op : {"add", "exp", "fma"}
    dtype : str
    nontemporal : bool
        Streaming stores for the vector blocks.
    """
    if op not in _OPS:
        raise ValueError(f"elementwise: unknown op {op!r}; expected one of {sorted(_OPS)}")
    f = _OPS[op]
    n = T.var("int64", name="n")
    names = ("a", "b", "c")[:ARITY[op]]
    ann = {"nontemporal": True} if nontemporal else {}
    buf = T.Buffer((n,), dtype, align=64)

    def emit(ins: tuple[Any, ...], out: Any) -> None:
        args = ins + (None,) * (3 - len(ins))
        blocks = n // BLOCK
        for blk in T.parallel(blocks, annotations=ann):
            for j in T.vectorized(BLOCK):
                k = blk * BLOCK + j
                out[k] = f(*(x[k] if x is not None else None for x in args))
        for t in T.serial(n - blocks * BLOCK):
            k = blocks * BLOCK + t
            out[k] = f(*(x[k] if x is not None else None for x in args))

    # explicit signatures: prim_func reads the parameters' names and annotations
    if len(names) == 1:
        def body(a: buf, out: buf):
            emit((a,), out)
    elif len(names) == 2:
        def body(a: buf, b: buf, out: buf):
            emit((a, b), out)
    else:
        def body(a: buf, b: buf, c: buf, out: buf):
            emit((a, b, c), out)
    return T.prim_func(body, name=f"ew_{op}")


def vsum(n: int, *, tasks: int = 16, acc: int = 8, dtype: str = "float32") -> Any:
    """``out[0] = sum(a)`` for a constant ``n``.

    ``tasks`` parallel chunks of ``chunk`` elements (a multiple of the vector
    width; more chunks than threads, so a slow thread costs less); per chunk
    ``acc`` 16-lane vector accumulators (``acc * 16`` partial sums: two vector
    adds per cycle with a 3-4 cycle latency need at least 8 in flight), folded
    by a fixed-order tree; then the chunks' partial sums and the tail, serially.
    """
    width = acc * 16
    chunk = n // tasks // width * width
    tail = n - tasks * chunk

    @T.prim_func(name="vsum")
    def kernel(a: T.Buffer((n,), dtype, align=64), out: T.Buffer((1,), dtype)):
        partial = T.alloc_buffer((tasks, 16), dtype)
        for p in T.parallel(tasks):
            s = T.alloc_buffer((width,), dtype)
            for j in T.vectorized(width):
                s[j] = 0.0
            for k in T.serial(chunk // width):
                for j in T.vectorized(width):
                    s[j] = s[j] + a[p * chunk + k * width + j]
            step = width
            while step > 16:                  # a fixed-order tree of vector adds (trace time)
                step //= 2
                for j in T.vectorized(step):
                    s[j] = s[j] + s[j + step]
            for j in T.vectorized(16):
                partial[p, j] = s[j]
        total = T.alloc_buffer((1,), dtype)
        total[0] = 0.0
        for p in T.serial(tasks):
            for j in T.serial(16):
                total[0] = total[0] + partial[p, j]
        for t in T.serial(tail):
            total[0] = total[0] + a[tasks * chunk + t]
        out[0] = total[0]

    return kernel


def matmul(M: int, N: int, K: int, *, MR: int = 4,  # noqa: C901 (one loop nest)
           NR: int = 64, NB: int = 64, KC: int = 256, dtype: str = "float32") -> Any:
    """``C = A @ B`` (constant sizes) with one parallel loop over ``NB``-wide column blocks.

    Each task packs its own ``K x NB`` block of B into ``NR``-wide panels
    (``K * NB * 4`` bytes, on the heap), zeroes its columns of C, then for each
    ``KC`` slice of the packed block (``KC * NB * 4`` bytes: it stays in the
    core's L2) runs the ``MR x NR`` register tile down all rows: ``MR * NR / 16``
    AVX-512 accumulators, one broadcast of A and ``NR / 16`` vector loads of B
    per ``MR * NR / 16`` FMAs. One launch per call and nothing shared between
    tasks but A (read only), which is what lets two cores scale: the first
    schedule (a shared packed B and a launch per ``KC`` slice) streamed a
    1 MB slice through both cores' caches. One thread of this machine (AVX-512,
    thread CPU time) runs the 4x64 and 8x32 tiles at 195-210 GFLOP/s, its FMA
    peak; 4x64 is the default because its TIR is half the size (12 unrolled
    vector statements, not 24), which cuts compile time by ~15%. 16x16 runs at
    half speed (16 broadcasts per 16 FMAs).
    """
    if M % MR or N % NB or NB % NR or K % KC:
        raise ValueError(f"matmul: sizes {(M, N, K)} must be multiples of MR={MR}, "
                         f"NB={NB} (a multiple of NR={NR}), KC={KC}")

    @T.prim_func(name="matmul")
    def kernel(A: T.Buffer((M, K), dtype, align=64),  # noqa: C901 (one loop nest)
               B: T.Buffer((K, N), dtype, align=64), C: T.Buffer((M, N), dtype, align=64)):
        for jb in T.parallel(N // NB):
            Bp = T.alloc_buffer((NB // NR, K, NR), dtype)
            for jo in T.serial(NB // NR):
                for k in T.serial(K):
                    for ji in T.vectorized(NR):
                        Bp[jo, k, ji] = B[k, jb * NB + jo * NR + ji]
            for i in T.serial(M):                      # this task's columns of C start at 0
                for ji in T.vectorized(NB):
                    C[i, jb * NB + ji] = 0.0
            for kb in T.serial(K // KC):
                for io in T.serial(M // MR):
                    for jo in T.serial(NB // NR):
                        acc = T.alloc_buffer((MR, NR), dtype)
                        for ii in T.unroll(MR):
                            for ji in T.vectorized(NR):
                                acc[ii, ji] = C[io * MR + ii, jb * NB + jo * NR + ji]
                        for k in T.serial(KC):
                            for ii in T.unroll(MR):
                                for ji in T.vectorized(NR):
                                    acc[ii, ji] = T.fma(A[io * MR + ii, kb * KC + k],
                                                        Bp[jo, kb * KC + k, ji], acc[ii, ji])
                        for ii in T.unroll(MR):
                            for ji in T.vectorized(NR):
                                C[io * MR + ii, jb * NB + jo * NR + ji] = acc[ii, ji]

    return kernel


__all__ = ["ARITY", "BLOCK", "elementwise", "matmul", "vsum"]
