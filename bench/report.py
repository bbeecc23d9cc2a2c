"""Print a table from a pytest-benchmark JSON file (median, rounds, extra_info).

Usage::

    python -m pytest bench --benchmark-enable --benchmark-json=bench.json
    python bench/report.py bench.json
"""

from __future__ import annotations

import json
import sys


def _fmt_seconds(s: float) -> str:
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.2f} µs"


def main(path: str) -> int:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    rows = []
    for bench in data["benchmarks"]:
        stats = bench["stats"]
        extra = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in sorted(bench.get("extra_info", {}).items()))
        rows.append((bench["fullname"].split("::")[-1], _fmt_seconds(stats["median"]),
                     str(stats["rounds"]), extra))
    widths = [max(len(r[i]) for r in rows + [("benchmark", "median", "rounds", "")])
              for i in range(3)]
    print(f"| {'benchmark':<{widths[0]}} | {'median':>{widths[1]}} | {'rounds':>{widths[2]}} | extra |")
    print(f"|{'-' * (widths[0] + 2)}|{'-' * (widths[1] + 2)}|{'-' * (widths[2] + 2)}|-------|")
    for name, median, rounds, extra in rows:
        print(f"| {name:<{widths[0]}} | {median:>{widths[1]}} | {rounds:>{widths[2]}} | {extra} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench.json"))
