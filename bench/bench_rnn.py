"""Recurrent models against onnxruntime: time per call, within one run (issue 31, item 4).

Run as a script (it is not a pytest suite):

    PYTHONPATH=.:tests/frontend .venv/bin/python bench/bench_rnn.py [--rounds 31] [--calls 50]

Cases: the exported 2-layer LSTM of ``tests/frontend/models`` (weights restored from seed
0), and single LSTM/GRU nodes built with onnx.helper at a few sizes (``--cases`` picks by
name). Per case, in one process, one thread on both sides (``runtime.set_num_threads(1)``;
onnxruntime ``intra_op_num_threads=1``, inter-op 1): after warm-ups, ``--rounds`` rounds
each time ``--calls`` irkernel calls, then ``--calls`` onnxruntime calls, interleaved so
that the machine's load hits both sides alike. Printed: the median ms per call of each
side, ``ratio`` = irkernel / onnxruntime (< 1: irkernel is faster) and irkernel's kernel
launches per call (from ``Executable.profile``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "frontend")]

import numpy as np  # noqa: E402


def _node_model(op: str, seq: int, batch: int, n_in: int, hidden: int, direction: str):
    from onnx import helper
    from onnx_helpers import model

    rng = np.random.default_rng(0)
    gates = 4 if op == "LSTM" else 3
    n_dir = 2 if direction == "bidirectional" else 1
    inits = {"w": rng.standard_normal((n_dir, gates * hidden, n_in)).astype(np.float32) * 0.1,
             "r": rng.standard_normal((n_dir, gates * hidden, hidden)).astype(np.float32) * 0.1,
             "b": rng.standard_normal((n_dir, 2 * gates * hidden)).astype(np.float32) * 0.1}
    outputs = ["y", "yh", "yc"] if op == "LSTM" else ["y", "yh"]
    node = helper.make_node(op, ["x", "w", "r", "b"], outputs, hidden_size=hidden,
                            direction=direction)
    x = rng.standard_normal((seq, batch, n_in)).astype(np.float32)
    return model([node], {"x": x}, outputs, inits, opset=14), {"x": x}


def cases() -> dict:
    from model_weights import load
    from onnx_helpers import model_inputs

    def exported():
        m = load("lstm")
        return m, model_inputs(m)
    return {
        "lstm_model": exported,
        "lstm_t12_b2_h32": lambda: _node_model("LSTM", 12, 2, 16, 32, "forward"),
        "lstm_t50_b1_h128_bi": lambda: _node_model("LSTM", 50, 1, 64, 128, "bidirectional"),
        "lstm_t20_b16_h256": lambda: _node_model("LSTM", 20, 16, 128, 256, "forward"),
        "gru_t12_b2_h32": lambda: _node_model("GRU", 12, 2, 16, 32, "forward"),
        "gru_t50_b4_h128_bi": lambda: _node_model("GRU", 50, 4, 64, 128, "bidirectional"),
    }


def _per_call(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def measure(name: str, make, rounds: int, calls: int) -> None:
    import onnxruntime as ort

    import runtime
    from irkernel.frontend.onnx import from_onnx

    m, inputs = make()
    runtime.set_num_threads(1)
    ex = runtime.build(from_onnx(m))
    args = list(inputs.values())
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ours, theirs = (lambda: ex["main"](*args)), (lambda: sess.run(None, inputs))
    launches = sum(row.calls for row in ex.profile(*args, repeat=3).rows)
    for _ in range(3):
        ours(), theirs()
    a, b = [], []
    for _ in range(rounds):
        a.append(_per_call(ours, calls))
        b.append(_per_call(theirs, calls))
    mine, ref = statistics.median(a) * 1e3, statistics.median(b) * 1e3
    print(f"| {name} | {mine:.3f} | {ref:.3f} | {mine / ref:.2f} | {launches} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--cases", nargs="*", default=None)
    args = parser.parse_args()
    table = cases()
    print("| case | irkernel ms | onnxruntime ms | ratio | launches |")
    print("|---|---|---|---|---|")
    for name in args.cases or table:
        measure(name, table[name], args.rounds, args.calls)


if __name__ == "__main__":
    main()
