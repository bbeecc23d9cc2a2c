"""Depthwise convs of mobilenet_v2, efficientnet_b0 and convnext_tiny against onnxruntime
and against a NumPy copy of the same bytes (issue 24, item 4).

Run as a script (it is not a pytest suite):

    PYTHONPATH=. .venv/bin/python bench/bench_depthwise.py [--runs 15] [--threads 1 2] \\
        [--model mobilenet_v2] [--layer 384x14]

Each layer of ``LAYERS`` (the distinct depthwise convs of the three models at 224x224,
batch 1: channels, input map, kernel, stride, the model's activation) is a one-node ONNX
model: ``Conv`` with a bias (the folded batch norm), then the model's activation (relu6 as
``Clip(0, 6)``, SiLU as ``x * Sigmoid(x)``, none for convnext, whose LayerNorm follows).
For each thread count, ``runtime.build(from_onnx(m))`` and an onnxruntime session (CPU
provider, default graph optimizations, ``intra_op_num_threads`` equal to ours) are timed
with ``irkernel.testing.timing.compare`` (each side in blocks of its own, medians); the
copy is ``np.copyto`` of an array as large as input + output + weights, timed the same
way against ours. Both sides' times include their call overhead (a few microseconds).

Columns: ``ours`` and ``ort`` ms, ``ratio`` = ours / ort (< 1: we are faster), ``GB/s``
ours (input + output + weights, each moved once), ``%copy`` = the copy's time / ours
(the issue's target: >= 70%).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

#: (model, channels, input side, kernel, stride, activation): the distinct depthwise
#: convs of each model at 224x224 (padding kernel // 2 on every side).
LAYERS = [
    ("mobilenet_v2", 32, 112, 3, 1, "relu6"),
    ("mobilenet_v2", 96, 112, 3, 2, "relu6"),
    ("mobilenet_v2", 144, 56, 3, 1, "relu6"),
    ("mobilenet_v2", 144, 56, 3, 2, "relu6"),
    ("mobilenet_v2", 192, 28, 3, 1, "relu6"),
    ("mobilenet_v2", 192, 28, 3, 2, "relu6"),
    ("mobilenet_v2", 384, 14, 3, 1, "relu6"),
    ("mobilenet_v2", 576, 14, 3, 1, "relu6"),
    ("mobilenet_v2", 576, 14, 3, 2, "relu6"),
    ("mobilenet_v2", 960, 7, 3, 1, "relu6"),
    ("efficientnet_b0", 32, 112, 3, 1, "silu"),
    ("efficientnet_b0", 96, 112, 3, 2, "silu"),
    ("efficientnet_b0", 144, 56, 3, 1, "silu"),
    ("efficientnet_b0", 144, 56, 5, 2, "silu"),
    ("efficientnet_b0", 240, 28, 5, 1, "silu"),
    ("efficientnet_b0", 240, 28, 3, 2, "silu"),
    ("efficientnet_b0", 480, 14, 3, 1, "silu"),
    ("efficientnet_b0", 480, 14, 5, 1, "silu"),
    ("efficientnet_b0", 672, 14, 5, 1, "silu"),
    ("efficientnet_b0", 672, 14, 5, 2, "silu"),
    ("efficientnet_b0", 1152, 7, 5, 1, "silu"),
    ("efficientnet_b0", 1152, 7, 3, 1, "silu"),
    ("convnext_tiny", 96, 56, 7, 1, "none"),
    ("convnext_tiny", 192, 28, 7, 1, "none"),
    ("convnext_tiny", 384, 14, 7, 1, "none"),
    ("convnext_tiny", 768, 7, 7, 1, "none"),
]


def layer_model(channels: int, side: int, kernel: int, stride: int, act: str):
    """The one-node ONNX model of a depthwise layer: Conv(+bias), then the activation."""
    import numpy as np
    import onnx
    from benchutil import onnx_activation
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    pad = kernel // 2
    out_side = (side + 2 * pad - kernel) // stride + 1
    w = (rng.standard_normal((channels, 1, kernel, kernel)) / kernel).astype(np.float32)
    b = rng.standard_normal(channels).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv" if act != "none" else "y"],
                              group=channels, kernel_shape=[kernel, kernel],
                              pads=[pad] * 4, strides=[stride] * 2)]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    more_nodes, more_inits = onnx_activation("conv", act)
    nodes += more_nodes
    inits += more_inits
    graph = helper.make_graph(
        nodes, "depthwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, side, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       [1, channels, out_side, out_side])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, (channels * kernel * kernel + channels) * 4, out_side


def bench_layer(layer, threads: tuple[int, ...], runs: int, warmups: int, pause: float
                ) -> list[dict[str, object]]:
    import numpy as np
    import onnxruntime as ort

    import runtime
    from irkernel.frontend.onnx import from_onnx
    from irkernel.testing.timing import compare

    model_name, channels, side, kernel, stride, act = layer
    model, weight_bytes, out_side = layer_model(channels, side, kernel, stride, act)
    x = np.random.default_rng(1).standard_normal((1, channels, side, side)).astype(np.float32)
    ours = runtime.build(from_onnx(model))["main"]
    nbytes = x.nbytes + channels * out_side * out_side * 4 + weight_bytes
    src, dst = np.ones(nbytes // 4, np.float32), np.empty(nbytes // 4, np.float32)
    rows = []
    for t in threads:
        runtime.set_num_threads(t)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = t, 1
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        got, want = ours(x), sess.run(None, {"x": x})[0]
        got = got[0] if isinstance(got, (list, tuple)) else got
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
        vs_ort = compare(lambda: ours(x), lambda: sess.run(None, {"x": x}),  # noqa: B023
                         repeat=runs, warmups=warmups, pause=pause)
        vs_copy = compare(lambda: ours(x), lambda: np.copyto(dst, src),
                          repeat=runs, warmups=warmups, pause=pause)
        ours_s = vs_ort.ours.median
        rows.append({"model": model_name, "layer": f"{channels}x{side} k{kernel} s{stride}",
                     "threads": t, "ours_ms": ours_s * 1e3, "ort_ms": vs_ort.ref.median * 1e3,
                     "ratio": 1 / vs_ort.ratio, "gbs": nbytes / ours_s / 1e9,
                     "copy_pct": 100 * vs_copy.ratio})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed calls per block")
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--pause", type=float, default=0.1, help="seconds before each block")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--model", action="append", help="only this model's layers")
    parser.add_argument("--layer", action="append",
                        help="only layers of this CHANNELSxSIDE (e.g. 384x14)")
    parser.add_argument("--target", default="host", help="CPU target to build for")
    args = parser.parse_args(argv)
    os.environ.setdefault("IRKERNEL_CACHE_DIR", tempfile.mkdtemp(prefix="irkernel-bench-dw-"))
    import runtime  # noqa: F401 (registers the target config)
    from irkernel import transform
    from irkernel.target import cpu_target

    from benchutil import cpu_name

    print(f"CPU: {cpu_name()}; {cpu_target('host').describe()}")
    print(f"build target: {cpu_target(args.target).describe()}")
    print(f"medians of 2 blocks x {args.runs} runs after {args.warmups} warm-ups; "
          "ratio = ours / ort; %copy = np.copyto time of the same bytes / ours")
    layers = [row for row in LAYERS if (not args.model or row[0] in args.model)
              and (not args.layer or f"{row[1]}x{row[2]}" in args.layer)]
    print(f"{'model':16} {'layer':18} {'thr':>3} {'ours ms':>8} {'ort ms':>8} {'ratio':>6} "
          f"{'GB/s':>6} {'%copy':>6}")
    with transform.PassContext(config={"target": args.target}):
        for layer in layers:
            for r in bench_layer(layer, tuple(args.threads), args.runs, args.warmups,
                                 args.pause):
                print(f"{r['model']:16} {r['layer']:18} {r['threads']:>3} "
                      f"{r['ours_ms']:8.4f} {r['ort_ms']:8.4f} {r['ratio']:6.2f} "
                      f"{r['gbs']:6.1f} {r['copy_pct']:5.0f}%", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
