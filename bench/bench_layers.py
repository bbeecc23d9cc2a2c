"""One-layer ONNX models of the CNN layers issues 24 and 31 found slow: stem convs, pools, SiLU.

Run as a script (it is not a pytest suite):

    PYTHONPATH=. .venv/bin/python bench/bench_layers.py [--runs 15] [--threads 1 2] \\
        [--target host] [layer ...]

Each layer is a one-node (or conv + activation) ONNX model at the shape it has in a
224x224 model: the stem convs of mobilenet_v2 (3 -> 32, 3x3 stride 2 pad 1, relu6),
squeezenet1_1 (3 -> 64, no pad, relu), efficientnet_b0 (3 -> 32 with SiLU) and resnet18
(3 -> 64, 7x7 stride 2 pad 3); squeezenet1_1's three 3x3 stride-2 ceil_mode max pools and
resnet18's padded one; YOLO's spatial pyramid max pools (5x5, 9x9, 13x13, stride 1);
average pools (Inception's 3x3 stride-1 branch pools, DenseNet's 2x2 stride-2
transitions); efficientnet_b0's 1x1 convs with and without SiLU (same conv, so their
ratio is the epilogue's cost); and mobilenet_v2's small-K 1x1 expand convs (16, 24 and 32
input channels, relu6) and its 1x1 convs on 14x14 and 7x7 maps. Per layer and thread count, ours
(``runtime.build(from_onnx(m))``) against onnxruntime (CPU provider, ``intra_op_num_threads``
= ours, one inter-op thread) through ``irkernel.testing.timing.compare``: each side in
blocks of its own after warm-ups, medians. Printed: ms of both sides, ``ratio`` = ours /
onnxruntime (< 1: ours is faster), GFLOP/s (convs: 2 per multiply-add) or GB/s (pools:
one read of the input and one write of the output), and the kernel schedule we chose.
The output is checked against onnxruntime's before timing.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

#: name -> (kind, input shape, spec). conv spec: (out channels, kernel, stride, pad,
#: activation); pool spec: (kernel, stride, pad, ceil_mode); avgpool spec: (kernel,
#: stride, pad, count_include_pad).
LAYERS: dict[str, tuple[str, tuple[int, ...], tuple]] = {
    "stem_mobilenet_v2": ("conv", (1, 3, 224, 224), (32, 3, 2, 1, "relu6")),
    "stem_squeezenet1_1": ("conv", (1, 3, 224, 224), (64, 3, 2, 0, "relu")),
    "stem_efficientnet_b0": ("conv", (1, 3, 224, 224), (32, 3, 2, 1, "silu")),
    "stem_resnet18": ("conv", (1, 3, 224, 224), (64, 7, 2, 3, "relu")),
    "maxpool_squeezenet_1": ("pool", (1, 64, 111, 111), (3, 2, 0, 1)),
    "maxpool_squeezenet_2": ("pool", (1, 128, 55, 55), (3, 2, 0, 1)),
    "maxpool_squeezenet_3": ("pool", (1, 256, 27, 27), (3, 2, 0, 1)),
    "maxpool_resnet18": ("pool", (1, 64, 112, 112), (3, 2, 1, 0)),
    "maxpool_spp_5": ("pool", (1, 192, 13, 13), (5, 1, 2, 0)),
    "maxpool_spp_13": ("pool", (1, 192, 13, 13), (13, 1, 6, 0)),
    "avgpool_inception_28": ("avgpool", (1, 192, 28, 28), (3, 1, 1, 0)),
    "avgpool_inception_14_pad": ("avgpool", (1, 256, 14, 14), (3, 1, 1, 1)),
    "avgpool_densenet_56": ("avgpool", (1, 128, 56, 56), (2, 2, 0, 0)),
    "conv1x1_96_24_56": ("conv", (1, 96, 56, 56), (24, 1, 1, 0, "none")),
    "conv1x1_24_144_56": ("conv", (1, 24, 56, 56), (144, 1, 1, 0, "none")),
    "conv1x1_24_144_56_silu": ("conv", (1, 24, 56, 56), (144, 1, 1, 0, "silu")),
    "conv1x1_40_240_28": ("conv", (1, 40, 28, 28), (240, 1, 1, 0, "none")),
    "conv1x1_40_240_28_silu": ("conv", (1, 40, 28, 28), (240, 1, 1, 0, "silu")),
    "conv1x1_16_96_112_relu6": ("conv", (1, 16, 112, 112), (96, 1, 1, 0, "relu6")),
    "conv1x1_24_144_56_relu6": ("conv", (1, 24, 56, 56), (144, 1, 1, 0, "relu6")),
    "conv1x1_32_192_28_relu6": ("conv", (1, 32, 28, 28), (192, 1, 1, 0, "relu6")),
    # mobilenet_v2's 1x1 convs on 14x14 and 7x7 maps (conv_channels: vectorized over
    # output channels)
    "conv1x1_64_384_14_relu6": ("conv", (1, 64, 14, 14), (384, 1, 1, 0, "relu6")),
    "conv1x1_384_64_14": ("conv", (1, 384, 14, 14), (64, 1, 1, 0, "none")),
    "conv1x1_384_96_14": ("conv", (1, 384, 14, 14), (96, 1, 1, 0, "none")),
    "conv1x1_96_576_14_relu6": ("conv", (1, 96, 14, 14), (576, 1, 1, 0, "relu6")),
    "conv1x1_576_96_14": ("conv", (1, 576, 14, 14), (96, 1, 1, 0, "none")),
    "conv1x1_576_160_7": ("conv", (1, 576, 7, 7), (160, 1, 1, 0, "none")),
    "conv1x1_160_960_7_relu6": ("conv", (1, 160, 7, 7), (960, 1, 1, 0, "relu6")),
    "conv1x1_960_160_7": ("conv", (1, 960, 7, 7), (160, 1, 1, 0, "none")),
    "conv1x1_960_320_7": ("conv", (1, 960, 7, 7), (320, 1, 1, 0, "none")),
    "conv1x1_320_1280_7_relu6": ("conv", (1, 320, 7, 7), (1280, 1, 1, 0, "relu6")),
}


def layer_model(kind: str, shape: tuple[int, ...], spec: tuple):
    """The ONNX model of one layer (weights from seed 0) and its work: FLOPs for a conv,
    bytes moved for a pool."""
    import numpy as np
    import onnx
    from benchutil import onnx_activation
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits = [], []
    if kind == "conv":
        out_c, k, s, p, act = spec
        w = rng.standard_normal((out_c, shape[1], k, k)).astype(np.float32) * 0.2
        b = rng.standard_normal(out_c).astype(np.float32)
        inits += [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
        last = "y" if act == "none" else "c"
        nodes.append(helper.make_node("Conv", ["x", "w", "b"], [last], kernel_shape=[k, k],
                                      strides=[s, s], pads=[p] * 4))
        more_nodes, more_inits = onnx_activation("c", act)
        nodes += more_nodes
        inits += more_inits
        side = (shape[2] + 2 * p - k) // s + 1
        out_shape = (1, out_c, side, side)
        work = 2 * math.prod(out_shape) * shape[1] * k * k
    else:
        k, s, p, flag = spec
        ceil = flag if kind == "pool" else 0
        extra = {"ceil_mode": flag} if kind == "pool" else {"count_include_pad": flag}
        nodes.append(helper.make_node("MaxPool" if kind == "pool" else "AveragePool", ["x"],
                                      ["y"], kernel_shape=[k, k], strides=[s, s],
                                      pads=[p] * 4, **extra))
        span = shape[2] + 2 * p - k
        side = (-(-span // s) if ceil else span // s) + 1
        out_shape = (*shape[:2], side, side)
        work = 4 * (math.prod(shape) + math.prod(out_shape))
    graph = helper.make_graph(
        nodes, "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, work


def bench_layer(name: str, threads: tuple[int, ...], runs: int, warmups: int,
                pause: float) -> list[str]:
    import numpy as np
    import onnxruntime as ort

    import runtime
    from irkernel.frontend.onnx import from_onnx
    from irkernel.testing.timing import compare

    kind, shape, spec = LAYERS[name]
    model, work = layer_model(kind, shape, spec)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    ours = runtime.build(from_onnx(model))
    fn = ours["main"]
    schedules = sorted({r.schedule for r in ours.profile(x, repeat=1).rows} - {""})
    rows = []
    for t in threads:
        runtime.set_num_threads(t)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = t, 1
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        want = sess.run(None, {"x": x})[0]
        got = fn(x)
        got = np.asarray(got[0] if isinstance(got, (list, tuple)) else got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
        c = compare(lambda: fn(x), lambda: sess.run(None, {"x": x}),  # noqa: B023
                    repeat=runs, warmups=warmups, pause=pause)
        a, b = c.ours.median * 1e3, c.ref.median * 1e3
        unit = "GFLOP/s" if kind == "conv" else "GB/s"
        rows.append(f"| {name} | {t} | {a:.3f} | {b:.3f} | {a / b:.2f} | "
                    f"{work / a / 1e6:.1f} / {work / b / 1e6:.1f} {unit} | "
                    f"{', '.join(schedules)} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layers", nargs="*", help=f"layer names (default: all of "
                                                  f"{', '.join(LAYERS)})")
    parser.add_argument("--runs", type=int, default=15, help="timed calls per block")
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--pause", type=float, default=0.3, help="seconds before each block")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--target", default="host",
                        help="CPU target to build for: host, or x86-64-v2/v3/v4")
    args = parser.parse_args(argv)
    unknown = [n for n in args.layers if n not in LAYERS]
    if unknown:
        parser.error(f"unknown layer(s) {unknown}; known: {', '.join(LAYERS)}")
    os.environ.setdefault("IRKERNEL_CACHE_DIR", tempfile.mkdtemp(prefix="irkernel-layers-"))
    import runtime  # noqa: F401 (registers the pass configs, "target" among them)
    from irkernel import transform
    from irkernel.target import cpu_target

    model_name = next((line.split(":", 1)[1].strip() for line in
                       Path("/proc/cpuinfo").read_text().splitlines()
                       if line.startswith("model name")), "unknown CPU")
    print(f"CPU: {model_name}; {cpu_target('host').describe()}")
    print(f"build target: {cpu_target(args.target).describe()}")
    print(f"medians of {2 * args.runs} runs (2 blocks per side) after {args.warmups} warm-ups; "
          "ratio = irkernel / onnxruntime")
    print("\n| layer | threads | irkernel ms | ort ms | ratio | ours / ort | schedule |")
    print("|---|---|---|---|---|---|---|")
    with transform.PassContext(config={"target": args.target}):
        for name in args.layers or LAYERS:
            for row in bench_layer(name, tuple(args.threads), args.runs, args.warmups,
                                   args.pause):
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
