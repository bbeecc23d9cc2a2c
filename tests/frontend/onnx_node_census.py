"""Count onnx's node test cases that irkernel passes, with no exclusion list.

The issue's target (issue 26: at least 1,150 of the 1,884 cases pass, 0 wrong) is
measured here, not in ``test_onnx_backend.py``, whose exclusion lists skip what is
documented as unsupported. Every case that ``onnx.backend.test.loader`` generates runs
through ``irkernel.frontend.onnx.backend`` (``runtime.build`` by default, or the
interpreter with ``--mode interpret``) and lands in one bucket:

- ``pass``: every output as close as onnx's runner asks (the case's rtol and atol);
- ``wrong``: the outputs came back and differ (a bug: the target is 0);
- ``unsupported``: the import refused the model (``OpNotImplemented`` or an
  ``ONNXImportError`` naming what is not supported);
- ``error``: anything else raised (a build or run failure).

Run from the repository root (about 10 minutes built, 3 interpreted, on one core)::

    python tests/frontend/onnx_node_census.py [--mode interpret] [-k REGEX] [--json out.json]

It prints the counts, then the largest groups of non-passing cases by op type and
reason, which is where cheap coverage is.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test import loader
from onnx.backend.test.runner import Runner

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's irkernel
from irkernel.frontend.onnx.backend import IrkernelBackend  # noqa: E402
from irkernel.frontend.onnx.common import ONNXImportError, OpNotImplemented  # noqa: E402


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OpNotImplemented):
        return "no converter: " + ", ".join(sorted(exc.unsupported))
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    text = re.sub(r"^node \d+ (?:'[^']*' )?", "", text)  # the node's index and name vary
    return f"{type(exc).__name__}: {text}"[:160]


def run_case(case, mode: str) -> tuple[str, str]:
    """(bucket, reason) of one node test case."""
    inputs, outputs = ([numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) else t
                        for t in ts] for ts in case.data_sets[0])  # as onnx's runner does
    try:
        rep = IrkernelBackend.prepare(case.model, "CPU", mode=mode)
        got = rep.run(inputs)
    except (OpNotImplemented, ONNXImportError) as exc:
        return "unsupported", _reason(exc)
    except Exception as exc:  # NOTE: the census sorts failures, it does not stop at one
        return "error", _reason(exc)
    try:
        Runner.assert_similar_outputs(list(outputs), list(got), rtol=case.rtol, atol=case.atol)
    except AssertionError as exc:
        return "wrong", str(exc).strip().splitlines()[0][:160] if str(exc).strip() else "differ"
    return "pass", ""


def _op_type(case) -> str:
    types = [n.op_type for n in case.model.graph.node]
    return types[0] if len(set(types)) == 1 else "+".join(sorted(set(types)))[:60]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("build", "interpret"), default="build")
    parser.add_argument("-k", default="", help="only cases whose name matches this regex")
    parser.add_argument("--json", help="write {case: [bucket, reason]} here")
    parser.add_argument("--top", type=int, default=40, help="groups of failures to list")
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # onnx's case generators warn about overflows
        cases = loader.load_node_model_tests()
    total = len(cases)
    cases = [c for c in cases if re.search(args.k, c.name)]
    results: dict[str, tuple[str, str]] = {}
    groups: collections.Counter[tuple[str, str, str]] = collections.Counter()
    np.seterr(all="ignore")
    for k, case in enumerate(sorted(cases, key=lambda c: c.name)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bucket, reason = run_case(case, args.mode)
        results[case.name] = (bucket, reason)
        if bucket != "pass":
            groups[(bucket, _op_type(case), reason)] += 1
        if (k + 1) % 100 == 0:
            print(f"  {k + 1}/{len(cases)}", file=sys.stderr, flush=True)
    counts = collections.Counter(b for b, _ in results.values())
    print(f"{len(cases)} of {total} node test cases ({args.mode}): "
          + ", ".join(f"{counts[b]} {b}" for b in ("pass", "wrong", "unsupported", "error")))
    for name, (bucket, reason) in sorted(results.items()):
        if bucket == "wrong":
            print(f"  WRONG {name}: {reason}")
    by_op = collections.Counter()
    for (bucket, op, _), n in groups.items():
        by_op[(bucket, op)] += n
    print("largest groups by op type:")
    for (bucket, op), n in by_op.most_common(args.top):
        print(f"  {n:4d} {bucket:11s} {op}")
    print("largest groups by reason:")
    for (bucket, op, reason), n in groups.most_common(args.top):
        print(f"  {n:4d} {bucket:11s} {op}: {reason}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=0, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
