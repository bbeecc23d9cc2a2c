"""int8 and float16 models against onnxruntime (issue 26): the same network as float32,
quantized by onnxruntime's own quantizer (QDQ and QOperator, static, per-channel weights)
and converted to float16.

Run with::

    PYTHONPATH=.:tests/frontend .venv/bin/python bench/bench_narrow.py [--size 224] \
        [--runs 15] [resnet18 squeezenet1_1 ...]

Per model and form, in one process: ``from_onnx`` + a cold ``runtime.build`` (fresh cache),
then each side timed in a block of its own after warm-ups with a pause between blocks
(medians; one and two threads: irkernel's pool, onnxruntime's intra-op threads, default
graph optimizations). The quantized models compute in float32 inside irkernel's fused
kernels today (the integer ops convert exactly; docs/onnx.md), so the int8 rows show what
that costs against onnxruntime's integer kernels (VNNI where the CPU has it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests" / "frontend")]

FORMS = ("float32", "int8 QDQ", "int8 QOperator", "float16")
THREADS = (1, 2)


def variants(name: str, size: int, tmp: Path) -> dict[str, object]:
    """The model in each form (quantized with calibration on random inputs)."""
    import onnx
    from bench_onnx import resized
    from bench_onnx_import import _load
    from onnxruntime import quantization
    from test_onnx_float16 import to_float16
    from test_onnx_quant import _Reader, _shared_constants_as_initializers

    model = _shared_constants_as_initializers(_load(name))
    if size:
        model = resized(model, size)
    info = model.graph.input[0]
    dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
    src = tmp / f"{name}.onnx"
    onnx.save(model, str(src))
    out: dict[str, object] = {"float32": model}
    for form, fmt in (("int8 QDQ", quantization.QuantFormat.QDQ),
                      ("int8 QOperator", quantization.QuantFormat.QOperator)):
        dst = tmp / f"{name}-{form.split()[1]}.onnx"
        quantization.quantize_static(str(src), str(dst), _Reader(info.name, dims),
                                     quant_format=fmt, per_channel=True)
        out[form] = onnx.load(str(dst))
    out["float16"] = to_float16(model)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet18", "squeezenet1_1"])
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--warmups", type=int, default=3)
    parser.add_argument("--pause", type=float, default=0.3)
    args = parser.parse_args(argv)
    os.environ["IRKERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="irkernel-bench-narrow-")
    import numpy as np
    from bench_onnx_import import _median_time, ort_time

    import runtime
    from irkernel.frontend.onnx import from_onnx
    from irkernel.target import cpu_target

    model_name = next((line.split(":", 1)[1].strip() for line in
                       Path("/proc/cpuinfo").read_text().splitlines()
                       if line.startswith("model name")), "unknown CPU")
    print(f"CPU: {model_name}; {cpu_target('host').describe()}")
    print(f"{args.size}x{args.size}, batch 1; medians of {args.runs} runs after "
          f"{args.warmups} warm-ups; ratio = irkernel / onnxruntime")
    print("\n| model | form | build s (cold) | " + " | ".join(
        f"{t}T irkernel ms | {t}T ort ms | {t}T ratio" for t in THREADS) + " |")
    print("|---|---|---|" + "---|---|---|" * len(THREADS))
    with tempfile.TemporaryDirectory() as tmp_dir:
        for name in args.models:
            for form, model in variants(name, args.size, Path(tmp_dir)).items():
                info = model.graph.input[0]
                dims = [d.dim_value for d in info.type.tensor_type.shape.dim]
                dtype = np.float16 if form == "float16" else np.float32
                x = np.random.default_rng(0).standard_normal(dims).astype(dtype)
                try:
                    start = time.perf_counter()
                    graph = runtime.build(from_onnx(model))["main"]
                    built = time.perf_counter() - start
                except Exception as exc:  # a row per form, whatever fails
                    print(f"| {name} | {form} | failed: {type(exc).__name__}: "
                          f"{str(exc)[:90]} |", flush=True)
                    continue
                cells = []
                for threads in THREADS:
                    time.sleep(args.pause)
                    runtime.set_num_threads(threads)
                    ours = _median_time(lambda: graph(x), args.runs, args.warmups)  # noqa: B023
                    time.sleep(args.pause)
                    theirs = ort_time(model, {info.name: x}, threads, args.runs, args.warmups)
                    cells.append(f"{ours * 1e3:.2f} | {theirs * 1e3:.2f} | {ours / theirs:.2f}")
                print(f"| {name} | {form} | {built:.2f} | " + " | ".join(cells) + " |",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
