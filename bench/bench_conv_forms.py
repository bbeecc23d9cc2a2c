"""Every conv form of issue 31 (part 3) against onnxruntime, one single-op ONNX model each.

    PYTHONPATH=. .venv/bin/python bench/bench_conv_forms.py [--repeat 21] [--rounds 2]
        [--threads 1 2] [--only grouped]

Why single ops: the issue's network figures (a Conv1d network 45x, RegNet-X's grouped
3x3 convs 16x onnxruntime's time) come from convs that took the canonical template; a
per-op figure says which form still has a cliff. Each form is an ONNX model of one
``Conv`` (or ``ConvTranspose``) node, weights as an initializer (a constant, as in a
network), built with ``onnx.helper``, imported with ``from_onnx`` and built with
``runtime.build``; onnxruntime runs the same model (CPU provider, default graph
optimizations, ``threads`` intra-op threads). The two sides are timed in blocks of their
own after warm-ups (``irkernel.testing.timing.compare``: ours, ref, ref, ours, ...),
at each thread count. Reported per form: medians in ms, the speed ratio onnxruntime time
/ ours (the issue's target: >= 0.7) and the template LegalizeOps chose. The CPU model and
its AVX2 / AVX-512F flags are printed first: the register tile follows the vector width.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: name -> (op, input shape, weight shape, attributes). Weights are [O, C/g, *K] for Conv,
#: [C, O/g, *K] for ConvTranspose.
FORMS: dict[str, tuple[str, tuple[int, ...], tuple[int, ...], dict[str, list[int] | int]]] = {
    "grouped 3x3 64->64 g4 56x56": ("Conv", (1, 64, 56, 56), (64, 16, 3, 3),
                                    {"group": 4, "pads": [1, 1, 1, 1]}),
    "grouped 3x3 160->160 g10 14x14": ("Conv", (1, 160, 14, 14), (160, 16, 3, 3),
                                       {"group": 10, "pads": [1, 1, 1, 1]}),
    "grouped 3x3 s2 128->128 g8 28x28": ("Conv", (1, 128, 28, 28), (128, 16, 3, 3),
                                         {"group": 8, "pads": [1, 1, 1, 1],
                                          "strides": [2, 2]}),
    "grouped 3x3 400->400 g25 2x2": ("Conv", (1, 400, 2, 2), (400, 16, 3, 3),
                                     {"group": 25, "pads": [1, 1, 1, 1]}),
    "1x1 400->400 2x2": ("Conv", (1, 400, 2, 2), (400, 400, 1, 1), {}),
    "conv1d 64->64 k3 1000 steps": ("Conv", (1, 64, 1000), (64, 64, 3), {"pads": [1, 1]}),
    "dilated 3x3 d2 64->64 28x28": ("Conv", (1, 64, 28, 28), (64, 64, 3, 3),
                                    {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    "asymmetric pad 3x3 64->64 28x28": ("Conv", (1, 64, 28, 28), (64, 64, 3, 3),
                                        {"pads": [0, 0, 1, 1]}),
    "odd channels 3x3 3->17 112x112": ("Conv", (1, 3, 112, 112), (17, 3, 3, 3),
                                       {"pads": [1, 1, 1, 1]}),
    "conv3d 3x3x3 16->16 8x28x28": ("Conv", (1, 16, 8, 28, 28), (16, 16, 3, 3, 3),
                                    {"pads": [1, 1, 1, 1, 1, 1]}),
    "convtranspose 2x2 s2 64->32 28x28": ("ConvTranspose", (1, 64, 28, 28), (64, 32, 2, 2),
                                          {"strides": [2, 2]}),
}


def cpu_line() -> str:
    """The CPU model and whether it has AVX2 / AVX-512F (from /proc/cpuinfo)."""
    model, flags = platform.processor() or "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    isa = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in ("avx2", "avx512f"))
    return f"CPU: {model} ({isa})"


def single_op_model(op: str, x_shape, w_shape, attrs):
    """An ONNX model of one ``op`` node: input ``x``, weight initializer ``w``, output ``y``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = (rng.standard_normal(w_shape) / np.sqrt(np.prod(w_shape[1:]))).astype(np.float32)
    node = helper.make_node(op, ["x", "w"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "single_op", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)


def template_of(mod) -> str:
    """Which conv template LegalizeOps chose for the model's one conv node."""
    import irkernel as ik
    import passes

    legal = passes.LegalizeOps()(mod)
    scripts = [f.script() for f in legal.functions.values() if isinstance(f, ik.tir.PrimFunc)
               and str(f.attrs.get("op_name", "")).startswith("conv")]
    script = scripts[0] if scripts else ""
    if "acci = T.alloc_buffer" in script:
        return "implicit GEMM"
    if "lanes" in script:
        return "dot products"
    return "plane window" if "xpad" in script else "canonical"


def bench_form(name: str, threads: list[int], repeat: int, rounds: int,
               warmups: int) -> list[dict[str, object]]:
    import onnxruntime as ort

    import runtime
    from irkernel.frontend.onnx import from_onnx
    from irkernel.testing.timing import compare

    op, x_shape, w_shape, attrs = FORMS[name]
    model = single_op_model(op, x_shape, w_shape, attrs)
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    mod = from_onnx(model)
    fn = runtime.build(mod)["main"]
    want = None
    rows = []
    for t in threads:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = t
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        if want is None:  # a wrong kernel must not look fast
            want = sess.run(None, {"x": x})[0]
            np.testing.assert_allclose(fn(x)[0], want, rtol=1e-3, atol=1e-3)
        runtime.set_num_threads(t)
        cmp = compare(lambda: fn(x), lambda: sess.run(None, {"x": x}),  # noqa: B023
                      repeat=repeat, warmups=warmups, rounds=rounds)
        rows.append({"form": name, "threads": t, "ours_ms": cmp.ours.median * 1e3,
                     "ort_ms": cmp.ref.median * 1e3, "speed": cmp.ratio,
                     "template": template_of(mod)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=21, help="timed calls per block")
    parser.add_argument("--rounds", type=int, default=2, help="blocks per side")
    parser.add_argument("--warmups", type=int, default=3, help="untimed calls per block")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--only", default="", help="run the forms whose name contains this")
    args = parser.parse_args()
    print(cpu_line())
    print(f"{'form':36} {'thr':>3} {'ours ms':>9} {'ort ms':>9} {'ort/ours':>8}  template")
    for name in FORMS:
        if args.only not in name:
            continue
        for row in bench_form(name, args.threads, args.repeat, args.rounds, args.warmups):
            flag = "" if row["speed"] >= 0.7 else "  (below 0.7)"
            print(f"{name:36} {row['threads']:>3} {row['ours_ms']:9.3f} {row['ort_ms']:9.3f} "
                  f"{row['speed']:8.2f}  {row['template']}{flag}", flush=True)


if __name__ == "__main__":
    main()
