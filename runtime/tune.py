"""``runtime.tune``: time a few register tiles for each distinct conv on this CPU and keep
the fastest, so later builds on this CPU use them.

Why measure: the analytic tile (``passes.topi.conv.conv_tile``) follows the register
file only. Whether a 7x7 map with 512 channels wants more rows or more pixels per tile
depends on the caches, the load ports and how many tasks the threads share, which no
table in the code knows for every CPU. So each distinct implicit-GEMM conv of the module
(after the build's graph passes before ``LegalizeOps``: the convs the build will compile)
gets the candidates of ``conv_tile_candidates`` compiled together in one build, each
timed round-robin on random inputs at the current thread count (medians; a candidate
whose output differs in a single bit from the analytic tile's is dropped: a tile never
changes an accumulation order, so none should). A candidate replaces the analytic tile
only when it is at least ``MIN_GAIN`` faster: noise must not make churn.

The winners go to the on-disk cache under the target's key (``tuned/<key>``, merged
with earlier runs), and ``runtime.build`` puts that table in the config
``topi.tuned_tiles`` of every build for the same target (``tuned_config``). The default
build never depends on tuning. Imports irkernel, passes and this package's build.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES, NUMPY_DTYPES
from irkernel.ir.module import IRModule
from irkernel.tir.function import PrimFunc
from passes.topi.conv import conv_tile_candidates, scheduled_conv
from passes.topi.nn import implicit_gemm_args
from passes.topi.tuned import TileTable, conv_key
from passes.topi.vector import current_target
from runtime.build import build, graph_pipeline
from runtime.cache import DiskCache
from runtime.threadpool import get_num_threads
from runtime.tuned_store import store_tuned

#: A candidate must beat the analytic tile by this fraction to replace it.
MIN_GAIN = 0.03
#: Seconds each timed sample should last (a tiny conv repeats within one sample).
SAMPLE_SECONDS = 2e-3


@dataclass(frozen=True)
class TunedConv:
    """One distinct conv: its signature, the analytic and the chosen tile (``"8x32"``),
    their median times (ms per call) and how many candidates ran."""

    key: str
    default: str
    best: str
    default_ms: float
    best_ms: float
    candidates: int

    @property
    def speedup(self) -> float:
        return self.default_ms / self.best_ms


@dataclass(frozen=True)
class TuneReport:
    """What :func:`tune` measured and stored."""

    target: str
    threads: int
    rows: tuple[TunedConv, ...]
    table: TileTable
    seconds: float
    stored: bool

    def render(self) -> str:
        lines = [f"tuned {len(self.rows)} conv(s) for {self.target} at {self.threads} "
                 f"thread(s) in {self.seconds:.1f} s"
                 + ("; stored in the cache" if self.stored else "; not stored"),
                 f"{'default':>9} {'ms':>8} {'best':>9} {'ms':>8} {'gain':>6}  conv"]
        for r in self.rows:
            lines.append(f"{r.default:>9} {r.default_ms:8.3f} {r.best:>9} {r.best_ms:8.3f} "
                         f"{r.speedup:5.2f}x  {r.key}")
        return "\n".join(lines)


def conv_signatures(mod: IRModule) -> list[tuple[object, ...]]:
    """``scheduled_conv``'s arguments for each distinct implicit-GEMM conv the build of
    ``mod`` compiles, in first-seen order."""
    pipeline = graph_pipeline()
    before: list[transform.Pass] = []
    for p in pipeline.passes:
        if p.info.name == "LegalizeOps":
            break
        before.append(p)
    mod = transform.Sequential(before)(mod) if before else mod
    conv = ops.get_op("conv").opcode
    found: dict[tuple[object, ...], None] = {}
    for func in mod.functions.values():
        if not isinstance(func, Function):
            continue
        shapes = func.shapes
        for node in np.flatnonzero(func.kind == conv).tolist():  # one step per conv node
            types = tuple((int(func.dtype[o]), shapes[int(func.shape_id[o])])
                          for o in func.operands(node))
            result = (int(func.dtype[node]), shapes[int(func.shape_id[node])])
            args = implicit_gemm_args(types, dict(func.attr_table[int(func.attr_id[node])]),
                                      result)
            if args is not None:
                found.setdefault(args, None)
    return list(found)


def _candidates(args: tuple[object, ...], bits: int) -> dict[str, tuple[tuple[int, ...], PrimFunc]]:
    """Register tile (``"8x32"``) -> (knobs, PrimFunc) of each distinct candidate, the
    analytic tile first (knobs ``()``)."""
    found: dict[str, tuple[tuple[int, ...], PrimFunc]] = {}
    for knobs in [(), *conv_tile_candidates(args[1][0] // args[2], bits)]:
        prim = scheduled_conv(*args, bits=bits, tile=knobs)
        found.setdefault(str(prim.attrs["tile"]), (knobs, prim))
    return found


class _Bench:
    """The candidates of one conv compiled together, their outputs, and a timer."""

    def __init__(self, args: tuple[object, ...], prims: list[PrimFunc],
                 cache: bool | DiskCache) -> None:
        x_shape, w_shape = args[0], args[1]
        out_shape = (x_shape[0], w_shape[0], *args[7])
        dtype = NUMPY_DTYPES[DTYPE_NAMES.index(str(args[8]))]
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal(x_shape).astype(dtype)
        self.w = rng.standard_normal(w_shape).astype(dtype)
        funcs = {f"tile{i}": prim for i, prim in enumerate(prims)}
        ex = build(IRModule(funcs), cache=cache)
        self.kernels = [ex[name] for name in funcs]
        self.outs = [np.empty(out_shape, dtype) for _ in prims]
        for kernel, out in zip(self.kernels, self.outs, strict=True):
            kernel(self.x, self.w, out)
        #: whether each candidate's output is bitwise the analytic tile's
        self.same = [np.array_equal(self.outs[0].view(np.uint8), o.view(np.uint8))
                     for o in self.outs]
        start = time.perf_counter()
        self.kernels[0](self.x, self.w, self.outs[0])
        took = max(time.perf_counter() - start, 1e-7)
        self.inner = max(1, min(100, math.ceil(SAMPLE_SECONDS / took)))

    def medians(self, which: list[int], repeat: int) -> list[float]:
        """Median seconds per call of the candidates ``which``, sampled round-robin (drift
        of the machine hits every candidate alike)."""
        samples: list[list[float]] = [[] for _ in which]
        for _ in range(repeat):
            for slot, i in enumerate(which):
                kernel, out = self.kernels[i], self.outs[i]
                start = time.perf_counter()
                for _ in range(self.inner):
                    kernel(self.x, self.w, out)
                samples[slot].append((time.perf_counter() - start) / self.inner)
        return [float(np.median(s)) for s in samples]


def tune(mod: IRModule, *, repeat: int = 7, cache: bool | DiskCache = True,
         progress: Callable[[int, int], None] | None = None) -> TuneReport:
    """Time the register tiles of every distinct implicit-GEMM conv of ``mod`` on this CPU
    (current target and thread count) and store the winners for later builds.

    Parameters
    ----------
    mod : IRModule
        A graph module (as ``runtime.build`` takes it).
    repeat : int
        Timed samples per candidate (medians).
    cache : bool or DiskCache
        Where the winners go (and the candidates' kernels are cached); False: nowhere,
        the report's ``table`` can be given to a build through ``topi.tuned_tiles``.
    progress : callable, optional
        ``progress(done, total)`` after each conv.
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"tune: expected an IRModule, got {type(mod).__name__}")
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise ValueError(f"tune: repeat must be an int >= 1, got {repeat!r}")
    start = time.perf_counter()
    target = current_target()
    bits = target.vector_bits
    signatures = conv_signatures(mod)
    rows: list[TunedConv] = []
    winners: dict[str, tuple[int, int]] = {}
    for done, args in enumerate(signatures, 1):
        found = _candidates(args, bits)
        names = list(found)
        bench = _Bench(args, [prim for _, prim in found.values()], cache)
        times = bench.medians(list(range(len(names))), repeat)
        best = min((i for i in range(len(names)) if bench.same[i]), key=times.__getitem__)
        if best:  # confirm against the analytic tile in a round of their own
            times[0], times[best] = bench.medians([0, best], 2 * repeat)
        if times[best] > times[0] * (1 - MIN_GAIN):
            best = 0
        key = conv_key(*args[:7], str(args[8]), bits)
        if best:
            winners[key] = found[names[best]][0]
        rows.append(TunedConv(key, names[0], names[best], times[0] * 1e3, times[best] * 1e3,
                              len(names)))
        if progress is not None:
            progress(done, len(signatures))
    table = TileTable.of(winners)
    disk = cache if isinstance(cache, DiskCache) else (DiskCache() if cache else None)
    stored = disk is not None and disk.usable
    if stored:
        store_tuned(disk, target, table, replaced=[r.key for r in rows])
    return TuneReport(target.key, get_num_threads(), tuple(rows), table,
                      time.perf_counter() - start, stored)


__all__ = ["MIN_GAIN", "TuneReport", "TunedConv", "conv_signatures", "tune"]
