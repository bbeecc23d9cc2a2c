"""Constant matmul weights packed at build time against the same build without it (issue 24
item 2, issue 31 item 2).

    PYTHONPATH=. .venv/bin/python bench/bench_packed_weights.py \\
        [--shapes 16x384x1536,4x768x3072,1x1280x1000] [--threads 1,2] [--repeat 15] \\
        [--models convnext_tiny,mlp,vit_tiny]

Per case, in one process: ``runtime.build`` with ``PackConstantWeights`` (the default
pipeline) and with it in ``disabled_pass`` (B packed per call, or streamed by rows), each
timed in a block of its own after warm-ups (``irkernel.testing.timing.compare``), and
against NumPy's ``a @ w`` (BLAS threads limited alike) or, for ``--models``, onnxruntime
(``intra_op_num_threads`` alike). Printed: ms of the packed build, unpacked / packed (> 1:
packing helps), and packed / the reference (NumPy's or onnxruntime's time; < 1: faster).
Shapes are ``MxKxN`` of ``a[M, K] @ w[K, N]`` with ``w`` a constant (a linear layer).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "frontend"), str(ROOT / "bench")]

import irkernel as ik  # noqa: E402
import runtime  # noqa: E402
from irkernel import transform  # noqa: E402
from irkernel.target import host_target  # noqa: E402
from irkernel.testing.timing import compare, limit_blas  # noqa: E402

DEFAULT_SHAPES = "16x384x1536,16x1536x384,4x768x3072,4x3072x768,1x1280x1000,1x512x1000"
UNPACKED = {"disabled_pass": ["PackConstantWeights"]}


def _builds(mod: ik.IRModule):
    packed = runtime.build(mod)["main"]
    with transform.PassContext(**UNPACKED):
        unpacked = runtime.build(mod)["main"]
    return packed, unpacked


def _report(label: str, threads: int, packed, unpacked, ref, repeat: int) -> None:
    a_b = compare(packed, unpacked, repeat=repeat, pause=0.2)
    vs = compare(packed, ref, repeat=repeat, pause=0.2)
    print(f"{label:22s} t={threads}  packed {a_b.ours.median * 1e3:8.3f} ms  "
          f"unpacked/packed {a_b.ref.median / a_b.ours.median:5.2f}  "
          f"packed/ref {vs.ours.median / vs.ref.median:5.2f}", flush=True)


def bench_shape(m: int, k: int, n: int, threads: list[int], repeat: int) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((k, n)).astype(np.float32)
    a = rng.standard_normal((m, k)).astype(np.float32)
    bb = ik.GraphBuilder("main")
    mod = ik.IRModule({"main": bb.finish([bb.matmul(bb.param("a", (m, k), "float32"),
                                                    bb.const(w))])})
    packed, unpacked = _builds(mod)
    np.testing.assert_array_equal(packed(a)[0], unpacked(a)[0])
    for t in threads:
        runtime.set_num_threads(t)
        with limit_blas(t):
            _report(f"{m}x{k}x{n}", t, lambda: packed(a), lambda: unpacked(a),
                    lambda: a @ w, repeat)


def bench_model(name: str, threads: list[int], repeat: int) -> None:
    import onnxruntime as ort
    from bench_onnx_import import _load
    from onnx_helpers import model_inputs

    from irkernel.frontend.onnx import from_onnx

    model = _load(name)
    inputs = model_inputs(model)
    args = list(inputs.values())
    packed, unpacked = _builds(from_onnx(model))
    np.testing.assert_allclose(packed(*args)[0], unpacked(*args)[0], rtol=1e-4, atol=1e-4)
    for t in threads:
        runtime.set_num_threads(t)
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = t, 1
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        _report(name, t, lambda: packed(*args), lambda: unpacked(*args),
                lambda: session.run(None, inputs), repeat)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxKxN,... ('' for none)")
    ap.add_argument("--models", default="", help="model names of tests/frontend/models")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    print(f"CPU: {host_target().describe()}; ref = NumPy (shapes) / onnxruntime (models)")
    for shape in filter(None, args.shapes.split(",")):
        bench_shape(*map(int, shape.split("x")), threads, args.repeat)
    for name in filter(None, args.models.split(",")):
        bench_model(name, threads, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
