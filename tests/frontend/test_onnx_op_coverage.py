"""Issue 26's coverage target: the op types of at least 98% of real exports convert.

The census is onnx/models' published op counts of 2,190 exports (807 models, opsets
16-18; ``data/turnkey_op_sets.json``, made by ``turnkey_op_sets.py``). An entry counts
when every op type it uses has a converter. This checks op types, not every attribute
form: the conversions themselves are tested per op elsewhere (test_onnx_ops*.py, the
onnx node tests in test_onnx_backend.py).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from irkernel.frontend.onnx import CONVERTERS

CENSUS = Path(__file__).resolve().parent / "data" / "turnkey_op_sets.json"
TARGET = 0.98


def _census() -> tuple[int, list[tuple[set[str], int]]]:
    data = json.loads(CENSUS.read_text())
    return data["entries"], [(set(row["ops"]), row["entries"]) for row in data["op_sets"]]


def test_the_census_is_whole() -> None:
    total, rows = _census()
    assert total == sum(n for _, n in rows) >= 2000
    assert all(ops for ops, _ in rows)


def test_the_ops_of_98_percent_of_real_exports_convert() -> None:
    total, rows = _census()
    blocked: Counter[str] = Counter()
    converted = 0
    for ops, n in rows:
        missing = ops - CONVERTERS.keys()
        converted += n * (not missing)
        for op in missing:
            blocked[op] += n
    share = converted / total
    assert share >= TARGET, (f"{share:.1%} of {total} exports convert (target {TARGET:.0%}); "
                             f"blocking op types: {blocked.most_common(10)}")
