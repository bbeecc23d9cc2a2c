"""1x1 convs on small maps: vectorized over output channels against the implicit GEMM and
onnxruntime, one layer at a time (issue 24, item 4).

Run as a script (it is not a pytest suite):

    PYTHONPATH=. .venv/bin/python bench/bench_conv_channels.py [--runs 15] [--threads 1] \\
        [--target host] [layer ...]

The layers are ``bench_layers.LAYERS``' convs on 14x14 and 7x7 maps (mobilenet_v2's,
with their relu6 where the model has one). Each is built twice in one process: *new*, the
default build (``PackConstantWeights`` swaps the implicit GEMM for ``conv_channels`` when
``conv_channels.channels_worth`` says so), and *old*, the same build with that pass
disabled (the layers hold no matmul, so nothing else changes). Then new against old and
new against onnxruntime (CPU provider, ``intra_op_num_threads`` = ours) through
``irkernel.testing.timing.compare``: each side in blocks of its own, medians. Printed per
layer: ms of the three, new / old, new / ort, and the schedules. Outputs are checked
against onnxruntime's first. Figures are noisy on a shared machine: read ratios.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layers", nargs="*")
    parser.add_argument("--runs", type=int, default=15, help="timed calls per block")
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target", default="host")
    args = parser.parse_args(argv)
    os.environ.setdefault("IRKERNEL_CACHE_DIR", tempfile.mkdtemp(prefix="irkernel-cc-"))
    import runtime
    from benchutil import cpu_name
    from irkernel import transform

    runtime.set_num_threads(args.threads)
    print(f"CPU: {cpu_name()}; target {args.target}; {args.threads} thread(s); medians")
    print("| layer | new ms | old ms | ort ms | new / old | new / ort | schedules new / old |")
    print("|---|---|---|---|---|---|---|")
    with transform.PassContext(opt_level=3, config={"target": args.target}):
        for name in args.layers or small_map_layers():
            print(bench(name, args.threads, args.runs, args.warmups), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
