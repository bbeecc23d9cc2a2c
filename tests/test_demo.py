"""``irkernel demo`` end to end at a small size: all three parts run and check themselves."""

from __future__ import annotations

import io
import re

from irkernel.cli import main


def test_demo_optimizes_compiles_verifies_and_points_to_the_docs() -> None:
    out = io.StringIO()
    code = main(["demo", "--nodes", "20000", "--chain-elements", "4096", "--hidden", "64"],
                out=out)
    text = out.getvalue()
    assert code == 0
    assert "1. Optimize a generated 20,000-node graph" in text
    for name in ("FoldConstant", "SimplifyArith", "EliminateCommonSubexpr",
                 "DeadCodeElimination"):
        assert re.search(rf"^  {name} +[0-9.]+ +[0-9.]+ +[0-9,]+ +[0-9,]+$", text, re.M), name
    # part 2 asserts its results against the interpreter and NumPy before printing this
    assert text.count("matches the interpreter and NumPy") == 2
    assert re.search(r"Chain of 8 elementwise ops.*?kernels launched per call \(after fusion\) +1",
                     text, re.S)
    assert "speed vs NumPy" in text
    assert "3. Read more" in text
    assert "docs/lowering.md" in text
