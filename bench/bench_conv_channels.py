"""1x1 convs on small maps: vectorized over output channels against the implicit GEMM and
onnxruntime, one layer at a time (issue 24, item 4).

Run as a script (it is not a pytest suite):

    PYTHONPATH=. .venv/bin/python bench/bench_conv_channels.py [--runs 15] [--threads 1] \\
        [--target host] [layer ...]
    PYTHONPATH=. .venv/bin/python bench/bench_conv_channels.py --model mobilenet_v2

The layers are ``bench_layers.LAYERS``' convs on 14x14 and 7x7 maps (mobilenet_v2's,
with their relu6 where the model has one). Each is built twice in one process: *new*, the
default build (``PackConstantWeights`` swaps the implicit GEMM for ``conv_channels`` when
``conv_channels.channels_worth`` says so), and *old*, the same build with that pass
disabled (the layers hold no matmul, so nothing else changes). Then new against old and
new against onnxruntime (CPU provider, ``intra_op_num_threads`` = ours) through
``irkernel.testing.timing.compare``: each side in blocks of its own, medians. Printed per
layer: ms of the three, new / old, new / ort, and the schedules. Outputs are checked
against onnxruntime's first. With ``--model``, a whole model at 224x224 is built twice
(old: ``conv_channels.channels_worth`` patched to say no, the memos cleared) and profiled
in alternating blocks: the kernels whose schedule changed, new / old, then whole runs
against old and onnxruntime. Figures are noisy on a shared machine: read ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "frontend")]


def small_map_layers() -> list[str]:
    from bench_layers import LAYERS
    return [n for n, (kind, shape, _) in LAYERS.items() if kind == "conv" and shape[2] <= 16]


def bench(name: str, threads: int, runs: int, warmups: int) -> str:
    import numpy as np
    import onnxruntime as ort
    from bench_layers import LAYERS, layer_model

    import runtime
    from irkernel import transform
    from irkernel.frontend.onnx import from_onnx
    from irkernel.testing.timing import compare

    kind, shape, spec = LAYERS[name]
    model, _ = layer_model(kind, shape, spec)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    new = runtime.build(from_onnx(model), cache=False)
    with transform.PassContext(opt_level=3, disabled_pass=["PackConstantWeights"],
                               config=dict(transform.PassContext.current().config)):
        old = runtime.build(from_onnx(model), cache=False)
    schedules = [",".join(sorted({r.schedule for r in e.profile(x, repeat=1).rows} - {""}))
                 for e in (new, old)]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    f_new, f_old = new["main"], old["main"]
    for f in (f_new, f_old):
        got = f(x)
        got = np.asarray(got[0] if isinstance(got, (list, tuple)) else got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    vs_old = compare(lambda: f_new(x), lambda: f_old(x), repeat=runs, warmups=warmups)
    vs_ort = compare(lambda: f_new(x), lambda: sess.run(None, {"x": x}), repeat=runs,
                     warmups=warmups)
    a, b, c = vs_old.ours.median * 1e3, vs_old.ref.median * 1e3, vs_ort.ref.median * 1e3
    a2 = vs_ort.ours.median * 1e3
    return (f"| {name} | {a:.3f} | {b:.3f} | {c:.3f} | {a / b:.2f} | {a2 / c:.2f} | "
            f"{schedules[0]} / {schedules[1]} |")


def build_model_both(model):
    """(new, old) executables of an ONNX model: the second with ``channels_worth`` off
    (the templates and LegalizeOps memoize per signature: cleared around it)."""
    import passes.legalize_ops as legalize
    import passes.topi.conv as conv
    import passes.topi.conv_channels as cc
    import passes.topi.templates as templates
    import runtime
    from irkernel.frontend.onnx import from_onnx

    def forget() -> None:
        for memo in (conv._conv, cc.conv_channels, legalize._digested,
                     templates._legalize_cached):
            memo.cache_clear()

    new = runtime.build(from_onnx(model), cache=False)
    saved = cc.channels_worth
    cc.channels_worth = lambda *a: False
    forget()
    try:
        old = runtime.build(from_onnx(model), cache=False)
    finally:
        cc.channels_worth = saved
        forget()
    if "'schedule': 'conv_channels'" in old.get_source("tir"):
        raise RuntimeError("the old build has conv_channels kernels: a memo was not cleared")
    return new, old


def bench_model(name: str, threads: int, runs: int, rounds: int) -> None:
    """Per-kernel profile of new and old in alternating blocks (the kernels whose
    schedule differs), then whole runs of new, old and onnxruntime."""
    import statistics

    import onnxruntime as ort
    from bench_onnx import resized
    from bench_onnx_import import _load
    from onnx_helpers import model_inputs

    from irkernel.testing.timing import compare

    model = resized(_load(name), 224)
    feeds = model_inputs(model)
    inputs = list(feeds.values())
    new, old = build_model_both(model)
    times: dict[str, dict[str, list[float]]] = {"new": {}, "old": {}}
    schedule: dict[str, dict[str, str]] = {"new": {}, "old": {}}
    for r in range(rounds):
        for side in (("new", "old") if r % 2 == 0 else ("old", "new")):
            for row in (new if side == "new" else old).profile(*inputs, repeat=runs).rows:
                times[side].setdefault(row.kernel, []).append(row.time * 1e3)
                schedule[side][row.kernel] = row.schedule
    med = statistics.median
    changed = [k for k in times["new"] if schedule["new"][k] != schedule["old"].get(k)]
    a = sum(med(times["new"][k]) for k in changed)
    b = sum(med(times["old"][k]) for k in changed)
    print(f"{name} 224x224, {threads} thread(s): {len(changed)} kernels changed schedule: "
          f"new {a:.3f} ms, old {b:.3f} ms, new / old {a / max(b, 1e-9):.3f}")
    for k in sorted(changed, key=lambda k: -med(times["old"][k])):
        x, y = med(times["new"][k]), med(times["old"][k])
        print(f"  {k:44} {schedule['new'][k]:24} {x:7.3f} {y:7.3f} {x / y:5.2f}")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    f_new, f_old = new["main"], old["main"]
    vs_old = compare(lambda: f_new(*inputs), lambda: f_old(*inputs), repeat=runs,
                     warmups=3, rounds=rounds)
    vs_ort = compare(lambda: f_new(*inputs), lambda: sess.run(None, feeds), repeat=runs,
                     warmups=3, rounds=rounds)
    print(f"whole run: new / old {vs_old.ours.median / vs_old.ref.median:.3f}, "
          f"new / onnxruntime {vs_ort.ours.median / vs_ort.ref.median:.3f} "
          f"(new {vs_ort.ours.median * 1e3:.2f} ms, onnxruntime "
          f"{vs_ort.ref.median * 1e3:.2f} ms)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layers", nargs="*")
    parser.add_argument("--runs", type=int, default=15, help="timed calls per block")
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target", default="host")
    parser.add_argument("--model", help="a model of tests/frontend/models at 224x224 "
                                        "instead of the layers: per-kernel new / old")
    parser.add_argument("--rounds", type=int, default=4, help="blocks per side (--model)")
    args = parser.parse_args(argv)
    os.environ.setdefault("IRKERNEL_CACHE_DIR", tempfile.mkdtemp(prefix="irkernel-cc-"))
    import runtime
    from benchutil import cpu_name
    from irkernel import transform

    runtime.set_num_threads(args.threads)
    print(f"CPU: {cpu_name()}; target {args.target}; {args.threads} thread(s); medians")
    if args.model:
        with transform.PassContext(opt_level=3, config={"target": args.target}):
            bench_model(args.model, args.threads, args.runs, args.rounds)
        return 0
    print("| layer | new ms | old ms | ort ms | new / old | new / ort | schedules new / old |")
    print("|---|---|---|---|---|---|---|")
    with transform.PassContext(opt_level=3, config={"target": args.target}):
        for name in args.layers or small_map_layers():
            print(bench(name, args.threads, args.runs, args.warmups), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
