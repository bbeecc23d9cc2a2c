"""Build time and run time of the NN op templates on the conv/pool shapes of ResNet-18.

Usage::

    PYTHONPATH=. .venv/bin/python bench/nn_ops.py [--repeat 5]   # prints a table and JSON

What is measured (float32, batch 1, 224x224 input, every distinct conv of ResNet-18
with its bias add + relu epilogue, the stem max pool and a 7x7 average pool):

* ``build``: ``runtime.build`` of a module holding that one op (LegalizeOps, FuseOps,
  FuseTIR, the TIR passes, LLVM O3) in a fresh on-disk cache directory: the cost per
  distinct shape that a model import pays once. The first build of the process also
  pays the JIT's one-time initialisation, so a tiny kernel is built first.
* ``ours`` / ``ort``: median seconds per call of the compiled kernel and of
  onnxruntime's CPU provider on the same op (``intra_op_num_threads=1``; our kernels
  run their outer loop in parallel only where FuseTIR proves it safe, and a batch-1
  conv's outer loop has one iteration, so they run on one thread too). Each side is
  timed in a block of its own after two warm-up calls, with a 0.2 s pause between
  blocks; ``ratio`` = ours / ort.

The templates are the correct, fusable baselines (canonical te reductions); speed is a
later task, and the ratio column is the figure it will move.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np

os.environ.setdefault("IRKERNEL_CACHE_DIR", tempfile.mkdtemp(prefix="irkernel-nn-bench-"))

import irkernel as ik
import runtime

#: (name, input shape, weight shape, stride, pad) of every distinct conv of ResNet-18.
CONVS = [
    ("conv1 7x7/2", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3),
    ("l1 3x3", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("l2 3x3/2", (1, 64, 56, 56), (128, 64, 3, 3), 2, 1),
    ("l2 3x3", (1, 128, 28, 28), (128, 128, 3, 3), 1, 1),
    ("l2 down 1x1/2", (1, 64, 56, 56), (128, 64, 1, 1), 2, 0),
    ("l3 3x3/2", (1, 128, 28, 28), (256, 128, 3, 3), 2, 1),
    ("l3 3x3", (1, 256, 14, 14), (256, 256, 3, 3), 1, 1),
    ("l3 down 1x1/2", (1, 128, 28, 28), (256, 128, 1, 1), 2, 0),
    ("l4 3x3/2", (1, 256, 14, 14), (512, 256, 3, 3), 2, 1),
    ("l4 3x3", (1, 512, 7, 7), (512, 512, 3, 3), 1, 1),
    ("l4 down 1x1/2", (1, 256, 14, 14), (512, 256, 1, 1), 2, 0),
]


def _conv_module(xs, ws, stride, pad):
    bb = ik.GraphBuilder("main")
    x, w = bb.param("x", xs, "float32"), bb.param("w", ws, "float32")
    b = bb.param("b", (ws[0], 1, 1), "float32")
    y = bb.relu(bb.add(bb.conv(x, w, strides=[stride] * 2, padding=[pad] * 4), b))
    return ik.IRModule({"main": bb.finish([y])})


def _pool_module(op, xs, **attrs):
    bb = ik.GraphBuilder("main")
    return ik.IRModule({"main": bb.finish([bb.call(op, bb.param("x", xs, "float32"),
                                                   **attrs)])})


def _ort_session(op_type, inputs, **attrs):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    names = [f"in{k}" for k in range(len(inputs))]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["out"], **attrs)], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
         for n, a in zip(names, inputs, strict=True)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feed = dict(zip(names, inputs, strict=True))
    return lambda: session.run(None, feed)


def _median_seconds(fn, repeat: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _case(name, mod, ort_fn, args, repeat):
    t0 = time.perf_counter()
    ex = runtime.build(mod)
    build = time.perf_counter() - t0
    run = ex["main"]
    ours = _median_seconds(lambda: run(*args), repeat)
    time.sleep(0.2)
    theirs = _median_seconds(ort_fn, repeat) if ort_fn is not None else float("nan")
    time.sleep(0.2)
    return {"name": name, "build_s": build, "ours_s": ours, "ort_s": theirs,
            "ratio": ours / theirs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    runtime.build(_pool_module("max_pool", (1, 1, 4, 4), kernel=[2, 2]))  # JIT start-up
    rows = []
    for name, xs, ws, stride, pad in CONVS:
        x = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal(ws) * 0.05).astype(np.float32)
        b = rng.standard_normal((ws[0], 1, 1)).astype(np.float32)
        ort_fn = _ort_session("Conv", [x, w], kernel_shape=list(ws[2:]), strides=[stride] * 2,
                              pads=[pad] * 4)  # the bias epilogue is ours only: a bound
        rows.append(_case(name, _conv_module(xs, ws, stride, pad), ort_fn, (x, w, b),
                          args.repeat))
    x = rng.standard_normal((1, 64, 112, 112)).astype(np.float32)
    rows.append(_case("max_pool 3x3/2", _pool_module(
        "max_pool", x.shape, kernel=[3, 3], strides=[2, 2], padding=[1] * 4),
        _ort_session("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
        (x,), args.repeat))
    x = rng.standard_normal((1, 512, 7, 7)).astype(np.float32)
    rows.append(_case("avg_pool 7x7", _pool_module("avg_pool", x.shape, kernel=[7, 7]),
                      _ort_session("AveragePool", [x], kernel_shape=[7, 7]), (x,), args.repeat))
    print(f"{'op':18} {'build s':>8} {'ours ms':>9} {'ort ms':>8} {'ours/ort':>9}")
    for r in rows:
        print(f"{r['name']:18} {r['build_s']:8.2f} {r['ours_s'] * 1e3:9.2f} "
              f"{r['ort_s'] * 1e3:8.2f} {r['ratio']:9.1f}")
    total = sum(r["build_s"] for r in rows)
    print(f"total build {total:.2f} s for {len(rows)} distinct shapes; load "
          f"{os.getloadavg()[0]:.1f}")
    print(json.dumps({"rows": rows, "total_build_s": total}))


if __name__ == "__main__":
    main()
