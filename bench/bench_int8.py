"""int8 against onnxruntime (issue 26): quantized matmuls on the integer kernel, and
resnet18 (float32, QDQ, QOperator).

Run with::

    PYTHONPATH=.:tests/frontend:bench .venv/bin/python bench/bench_int8.py \
        [--threads 1] [--runs 15] [--size 224] [--no-models]

Prints the CPU and its ISA (VNNI or not), then, one process, each side in blocks of its
own (``irkernel.testing.timing.compare``: warm-ups, medians, alternating blocks):

- **QLinearMatMul** (uint8 activations, int8 per-column weights) at transformer and
  batch-1 sizes: irkernel's integer kernel (``passes.IntegerKernels``; ``vpdpbusd`` with
  VNNI, ``vpmaddubsw``/``vpmaddwd`` on AVX2), the same model with that pass disabled (the
  exact float32 path), and onnxruntime. Also built for ``target="avx2"`` when the host is
  above it, to show the non-VNNI path on the same machine.
- **resnet18** quantized by onnxruntime (QDQ and QOperator, per-channel), and float32:
  ``bench_narrow.variants``. The QOperator convs run on the integer conv kernel; the QDQ
  form's dequantized convs take the integer kernels by default (config
  ``IntegerKernels.qdq``) and the float path with it off (the last row).

Ratios are irkernel / onnxruntime (< 1: irkernel is faster); the machine may be shared,
so treat them as provisional.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "frontend")]

#: (rows, K, N) of the matmuls: batch-1 and batch-64 linear layers of a BERT-base.
SHAPES = ((1, 768, 768), (1, 768, 3072), (64, 768, 768), (64, 768, 3072), (256, 1024, 1024))


def qlinear_matmul(m: int, k: int, n: int):
    """A QLinearMatMul model: uint8 x [m, k] times int8 per-column weights [k, n]."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = {"xs": np.float32(0.02), "xz": np.uint8(120),
             "w": rng.integers(-127, 128, (k, n)).astype(np.int8),
             "ws": rng.uniform(1e-3, 2e-3, n).astype(np.float32), "wz": np.zeros(n, np.int8),
             "ys": np.float32(4.0), "yz": np.uint8(128)}
    node = helper.make_node("QLinearMatMul", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                            ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [m, n])],
        [numpy_helper.from_array(v, name) for name, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _session(model, threads: int):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _build(model, **config):
    import runtime
    from irkernel import transform
    from irkernel.frontend.onnx import from_onnx
    disabled = config.pop("disabled", [])
    with transform.PassContext(config=config, disabled_pass=disabled):
        return runtime.build(from_onnx(model))["main"]


def matmul_rows(args) -> None:
    import numpy as np

    from irkernel.target import host_target
    from irkernel.testing.timing import compare

    avx2 = host_target().isa == "avx512"
    print("\n| rows x K x N | int kernel ms | float32 path ms | ort ms | int / ort | "
          "float / ort |" + (" AVX2 int / ort |" if avx2 else ""))
    print("|---|---|---|---|---|---|" + ("---|" if avx2 else ""))
    for m, k, n in SHAPES:
        model = qlinear_matmul(m, k, n)
        x = np.random.default_rng(1).integers(0, 256, (m, k)).astype(np.uint8)
        sess = _session(model, args.threads)
        ref = lambda: sess.run(None, {"x": x})  # noqa: E731
        ours = _build(model)
        plain = _build(model, disabled=["IntegerKernels"])
        np.testing.assert_array_equal(ours(x)[0], ref()[0])
        c_int = compare(lambda: ours(x), ref, repeat=args.runs)  # noqa: B023
        c_flt = compare(lambda: plain(x), ref, repeat=args.runs)  # noqa: B023
        cells = [f"{c_int.ours.median * 1e3:.3f}", f"{c_flt.ours.median * 1e3:.3f}",
                 f"{c_int.ref.median * 1e3:.3f}", f"{1 / c_int.ratio:.2f}",
                 f"{1 / c_flt.ratio:.2f}"]
        if avx2:
            low = _build(model, target="avx2")
            c_low = compare(lambda: low(x), ref, repeat=args.runs)  # noqa: B023
            cells.append(f"{1 / c_low.ratio:.2f}")
        print(f"| {m} x {k} x {n} | " + " | ".join(cells) + " |", flush=True)


def model_rows(args) -> None:
    import numpy as np
    from bench_narrow import variants

    from irkernel.testing.timing import compare

    print(f"\n| model ({args.size}x{args.size}) | form | irkernel ms | ort ms | ratio |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        forms = variants("resnet18", args.size, Path(tmp))
        base = {} if args.target == "host" else {"target": args.target}
        rows = [(form, model, dict(base)) for form, model in forms.items() if form != "float16"]
        rows.append(("int8 QDQ, IntegerKernels.qdq off (float)", forms["int8 QDQ"],
                     {**base, "IntegerKernels.qdq": False}))
        for form, model, config in rows:
            info = model.graph.input[0]
            dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
            x = np.random.default_rng(0).standard_normal(dims).astype(np.float32)
            sess = _session(model, args.threads)
            ours = _build(model, **config)
            c = compare(lambda: ours(x), lambda: sess.run(None, {info.name: x}),  # noqa: B023
                        repeat=args.runs)
            print(f"| resnet18 | {form} | {c.ours.median * 1e3:.2f} | "
                  f"{c.ref.median * 1e3:.2f} | {1 / c.ratio:.2f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--no-models", action="store_true")
    parser.add_argument("--target", default="host",
                        help="CPU target of the model builds: host, or x86-64-v2/v3/v4 "
                             "(sse4.2/avx2/avx512); --target avx2 on a VNNI machine measures "
                             "the integer kernels without VNNI")
    args = parser.parse_args(argv)
    os.environ.setdefault("IRKERNEL_CACHE_DIR", tempfile.mkdtemp(prefix="irkernel-bench-int8-"))
    import runtime
    from irkernel.target import host_target

    runtime.set_num_threads(args.threads)
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    print(f"CPU: {cpu}; {host_target().describe()}; models built for {args.target}; "
          f"{args.threads} thread(s); "
          f"ratio = irkernel / onnxruntime (medians of {args.runs})")
    matmul_rows(args)
    if not args.no_models:
        model_rows(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
