"""Model inference time of irkernel against onnxruntime at 1 and 2 threads (issue 16).

Run as a script (it is not a pytest suite):

    PYTHONPATH=.:tests/frontend .venv/bin/python bench/bench_onnx.py \\
        [--runs 15] [--size 224] [model ...]

Models: the PyTorch exports of ``tests/frontend/models`` (weights regenerated from seed 0
by ``tests/frontend/model_weights.py``, input sizes as in the tests) and ``light:<name>``
models of the onnx wheel. Per model, in one process: ``from_onnx``; a cold
``runtime.build`` (the on-disk kernel cache is a fresh directory for the whole run; a
model may still reuse kernels that an earlier model of the run compiled); a second
``runtime.build`` of a fresh import (every kernel from the on-disk cache: the "cached
build"); then, for each thread count, irkernel's runs and
onnxruntime's runs, each side in a block of its own after ``--warmups`` runs, with a
``--pause`` between blocks. Times are medians. irkernel's threads are
``runtime.set_num_threads``, onnxruntime's ``intra_op_num_threads`` (inter-op 1, CPU
provider, default graph optimizations). ``ratio`` = irkernel ms / onnxruntime ms
(< 1: irkernel is faster).

``--conv`` adds the conv throughput figures of the issue: a 3x3 conv 64 -> 64 channels on
56x56 (batch 1, pad 1) against the scheduled matmul kernel of the same FLOP count
(``64 x 576 @ 576 x 3136``), GFLOP/s at 1 and 2 threads; and a depthwise 3x3 conv's
GB/s against NumPy copying the same bytes. The GFLOP column of the model table counts
the convs and matmuls (2 per multiply-add).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "frontend"), str(ROOT / "bench")]

DEFAULT_MODELS = ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_1",
                  "transformer_encoder", "googlenet", "shufflenet_v2_x0_5", "densenet121",
                  "regnet_x_400mf", "conv1d_net", "mlp"]
THREADS = (1, 2)


def resized(model, size: int):
    """``model`` with the spatial dims of its 4-d image input set to ``size`` (the test
    models are exported at 64x64; their graphs are size-agnostic: global pooling, then
    flatten). Shape annotations of intermediate values are dropped, to be re-inferred."""
    out = type(model)()
    out.CopyFrom(model)
    inits = {i.name for i in out.graph.initializer}
    for info in out.graph.input:
        dims = info.type.tensor_type.shape.dim
        if info.name not in inits and len(dims) == 4:
            dims[2].dim_value = dims[3].dim_value = size
    del out.graph.value_info[:]
    for info in out.graph.output:
        for d in info.type.tensor_type.shape.dim:
            d.dim_param = "d"
    return out


def model_flops(mod) -> int:
    """Floating-point operations of the convs and matmuls of ``mod["main"]`` (2 per
    multiply-add; the rest of a CNN or transformer is a few percent): the GFLOP/s column."""
    func = mod["main"]
    total = 0
    for node in range(func.num_nodes):  # a bench, not a pass: a Python loop is fine here
        name = func.op(node).name
        if name not in ("conv", "matmul"):
            continue
        out = func.shapes[int(func.shape_id[node])]
        first, second = (func.shapes[int(func.shape_id[o])] for o in func.operands(node)[:2])
        if name == "matmul":
            total += 2 * math.prod(out) * first[-1]
        else:  # weight (O, C / groups, *kernel): each output reads C/groups * kernel taps
            total += 2 * math.prod(out) * math.prod(second[1:])
    return total


def bench_model(name: str, runs: int, warmups: int, pause: float,
                size: int = 0) -> dict[str, object]:
    from bench_onnx_import import _load, _median_time, ort_time
    from onnx_helpers import model_inputs as _inputs

    import runtime
    from irkernel.frontend.onnx import from_onnx

    model = _load(name)
    if size:
        model = resized(model, size)
    inputs = _inputs(model)
    args = list(inputs.values())
    start = time.perf_counter()
    mod = from_onnx(model)
    t_import = time.perf_counter() - start
    start = time.perf_counter()
    graph = runtime.build(mod)["main"]
    t_cold = time.perf_counter() - start
    start = time.perf_counter()
    runtime.build(from_onnx(model))
    t_cached = time.perf_counter() - start - t_import  # the import is not the build
    row: dict[str, object] = {"model": name, "import_s": t_import, "build_s": t_cold,
                              "gflop": model_flops(mod) / 1e9,
                              "cached_build_s": t_cached,
                              "input": "x".join(str(d) for d in args[0].shape)}
    for threads in THREADS:
        time.sleep(pause)
        runtime.set_num_threads(threads)
        ours = _median_time(lambda: graph(*args), runs, warmups)
        time.sleep(pause)
        theirs = ort_time(model, inputs, threads, runs, warmups)
        row[f"ours_ms_{threads}"] = ours * 1e3
        row[f"ort_ms_{threads}"] = theirs * 1e3
        row[f"ratio_{threads}"] = ours / theirs
    return row


def bench_conv(runs: int, warmups: int, pause: float) -> dict[str, float]:
    """GFLOP/s of the 3x3 64 -> 64 conv at 56x56 and of the matmul of the same FLOPs."""
    import numpy as np
    from bench_onnx_import import _median_time

    import irkernel as ik
    import runtime

    rng = np.random.default_rng(0)
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", (1, 64, 56, 56), "float32"), bb.param("w", (64, 64, 3, 3), "float32")
    conv = runtime.build(ik.IRModule({"main": bb.finish([bb.conv(x, w, padding=[1] * 4)])}))
    bb = ik.GraphBuilder("main")
    a, b = bb.param("a", (64, 576), "float32"), bb.param("b", (576, 3136), "float32")
    mm = runtime.build(ik.IRModule({"main": bb.finish([bb.matmul(a, b)])}))
    conv_args = [rng.standard_normal((1, 64, 56, 56)).astype(np.float32),
                 rng.standard_normal((64, 64, 3, 3)).astype(np.float32)]
    mm_args = [rng.standard_normal((64, 576)).astype(np.float32),
               rng.standard_normal((576, 3136)).astype(np.float32)]
    flops = 2 * 64 * 576 * 3136
    out: dict[str, float] = {}
    for threads in THREADS:
        runtime.set_num_threads(threads)
        time.sleep(pause)
        out[f"conv_gflops_{threads}"] = flops / _median_time(
            lambda: conv["main"](*conv_args), runs, warmups) / 1e9
        time.sleep(pause)
        out[f"matmul_gflops_{threads}"] = flops / _median_time(
            lambda: mm["main"](*mm_args), runs, warmups) / 1e9
    out.update(bench_depthwise(runs, warmups, pause))
    return out


def bench_depthwise(runs: int, warmups: int, pause: float) -> dict[str, float]:
    """GB/s of a depthwise 3x3 conv (144 channels, 56x56, pad 1: mobilenet_v2's shape
    class) counting one read of the image and one write of the output, against NumPy
    copying the same bytes (``np.copyto``: the memory bandwidth one call reaches)."""
    import numpy as np
    from bench_onnx_import import _median_time

    import irkernel as ik
    import runtime

    shape = (1, 144, 56, 56)
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", shape, "float32"), bb.param("w", (144, 1, 3, 3), "float32")
    dw = runtime.build(ik.IRModule({"main": bb.finish(
        [bb.conv(x, w, padding=[1] * 4, groups=144)])}))["main"]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(shape).astype(np.float32),
            rng.standard_normal((144, 1, 3, 3)).astype(np.float32)]
    nbytes = 2 * args[0].nbytes
    src, dst = args[0], np.empty_like(args[0])
    out: dict[str, float] = {}
    for threads in THREADS:
        runtime.set_num_threads(threads)
        time.sleep(pause)
        out[f"depthwise_gbs_{threads}"] = nbytes / _median_time(
            lambda: dw(*args), runs, warmups) / 1e9
    time.sleep(pause)
    out["copy_gbs"] = nbytes / _median_time(lambda: np.copyto(dst, src), runs, warmups) / 1e9
    return out


def fma_peak(threads: int = 1, iterations: int = 1 << 20) -> float:
    """The core's measured float32 FMA peak (GFLOP/s): a kernel of independent vector fma
    chains (as many accumulators as the register file holds beside the operands), no memory
    traffic; the best of several runs. Measuring it replaces guessing the clock (turbo,
    a VM's steal) and the FMA units per cycle."""
    import time

    import numpy as np

    import runtime
    from irkernel.target import host_target
    from irkernel.tir import script as T

    target = host_target()
    lanes, chains = target.lanes("float32"), target.vector_registers - 4

    @T.prim_func
    def peak(out: T.Buffer((threads, chains, lanes), "float32")):
        for t in T.parallel(threads):
            acc = T.alloc_buffer((chains, lanes), "float32")
            for a in T.unroll(chains):
                for j in T.vectorized(lanes):  # distinct starts: equal chains would be merged
                    acc[a, j] = T.cast("float32", a * lanes + j)
            for _ in T.serial(iterations):
                for a in T.unroll(chains):
                    for j in T.vectorized(lanes):
                        acc[a, j] = T.fma(acc[a, j], 0.9999999, 1e-7)
            for a in T.unroll(chains):
                for j in T.vectorized(lanes):
                    out[t, a, j] = acc[a, j]

    runtime.set_num_threads(threads)
    fn = runtime.build(peak.with_attr("global_symbol", "peak"))["peak"]
    out = np.empty((threads, chains, lanes), np.float32)
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        fn(out)
        best = min(best, time.perf_counter() - start)
    return 2 * threads * chains * lanes * iterations / best / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"model names (default: {DEFAULT_MODELS})")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between blocks")
    parser.add_argument("--conv", action="store_true", help="also the conv GFLOP/s figure")
    parser.add_argument("--no-models", action="store_true")
    parser.add_argument("--target", default="host",
                        help="CPU target to build for: host, or x86-64-v2/v3/v4 (sse4.2/avx2/"
                             "avx512): on an AVX-512 machine, --target avx2 measures what an "
                             "AVX2 machine would run")
    parser.add_argument("--size", type=int, default=0,
                        help="image side for the CNNs (default: the test models' 64)")
    args = parser.parse_args(argv)
    os.environ["IRKERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="irkernel-bench-onnx-")
    from irkernel import transform
    from irkernel.target import cpu_target

    model_name = next((line.split(":", 1)[1].strip() for line in
                       Path("/proc/cpuinfo").read_text().splitlines()
                       if line.startswith("model name")), "unknown CPU")
    print(f"CPU: {model_name}; {cpu_target('host').describe()}")
    print(f"build target: {cpu_target(args.target).describe()}")
    print("measured fp32 FMA peak: " + ", ".join(f"{t} thread(s) {fma_peak(t):.1f} GFLOP/s"
                                                 for t in THREADS))
    print(f"medians of {args.runs} runs after {args.warmups} warm-ups; ratio = irkernel / ort")
    context = transform.PassContext(config={"target": args.target})
    context.__enter__()
    if args.conv:
        c = bench_conv(args.runs, args.warmups, args.pause)
        for t in THREADS:
            conv, mm = c[f"conv_gflops_{t}"], c[f"matmul_gflops_{t}"]
            print(f"conv 3x3 64->64 56x56, {t} thread(s): {conv:.1f} GFLOP/s; matmul "
                  f"64x576x3136: {mm:.1f} GFLOP/s; conv / matmul = {conv / mm:.2f}")
        for t in THREADS:
            print(f"depthwise 3x3 144 ch 56x56, {t} thread(s): "
                  f"{c[f'depthwise_gbs_{t}']:.1f} GB/s (image + output); NumPy copy of the "
                  f"same bytes: {c['copy_gbs']:.1f} GB/s")
    if args.no_models:
        return 0
    print("\n| model | input | GFLOP | build s (cold) | build s (cached) "
          "| 1T irkernel ms | 1T ort ms | 1T ratio | 1T GFLOP/s ours / ort "
          "| 2T irkernel ms | 2T ort ms | 2T ratio | 2T GFLOP/s ours / ort |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios: dict[int, list[float]] = {t: [] for t in THREADS}
    for name in args.models or DEFAULT_MODELS:
        try:
            r = bench_model(name, args.runs, args.warmups, args.pause, args.size)
        except Exception as exc:  # a table row per model, whatever fails
            print(f"| {name} | failed: {type(exc).__name__}: {str(exc)[:100]} |", flush=True)
            continue
        for t in THREADS:
            ratios[t].append(float(r[f"ratio_{t}"]))  # type: ignore[arg-type]
        gflop = float(r["gflop"])  # type: ignore[arg-type]
        print(f"| {name} | {r['input']} | {gflop:.3f} | {r['build_s']:.2f} | "
              f"{r['cached_build_s']:.2f} | "
              + " | ".join(f"{r[f'ours_ms_{t}']:.2f} | {r[f'ort_ms_{t}']:.2f} | "
                           f"{r[f'ratio_{t}']:.2f} | "
                           f"{gflop / (float(r[f'ours_ms_{t}']) / 1e3):.1f} / "  # type: ignore[arg-type]
                           f"{gflop / (float(r[f'ort_ms_{t}']) / 1e3):.1f}"  # type: ignore[arg-type]
                           for t in THREADS) + " |", flush=True)
    for t in THREADS:
        if ratios[t]:
            geo = math.exp(sum(math.log(v) for v in ratios[t]) / len(ratios[t]))
            print(f"{t} thread(s): geometric mean of irkernel / ort = {geo:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
