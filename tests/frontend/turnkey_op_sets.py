"""Regenerate ``data/turnkey_op_sets.json``: the op types of every real export that
onnx/models publishes (the ``onnx_ops_counter`` of its ``turnkey_stats.yaml`` files:
2,190 entries, 807 models, opsets 16-18), as distinct op sets with their entry counts.

    python tests/frontend/turnkey_op_sets.py /path/to/onnx-models-checkout

Needs git and PyYAML (not a test dependency: the JSON is committed).
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "turnkey_op_sets.json"


def op_sets(repo: str) -> collections.Counter[tuple[str, ...]]:
    import yaml

    listing = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.split()
    counts: collections.Counter[tuple[str, ...]] = collections.Counter()
    for path in listing:
        if path.endswith("turnkey_stats.yaml"):
            text = subprocess.run(["git", "-C", repo, "show", f"HEAD:{path}"],
                                  capture_output=True, text=True, check=True).stdout
            ops = yaml.safe_load(text).get("onnx_ops_counter") or {}
            counts[tuple(sorted(ops))] += 1
    return counts


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    counts = op_sets(argv[0])
    rows = [{"ops": list(ops), "entries": n}
            for ops, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    OUT.write_text(json.dumps({"source": "onnx/models, onnx_ops_counter of every "
                               "turnkey_stats.yaml", "entries": sum(counts.values()),
                               "op_sets": rows}, separators=(",", ":")) + "\n")
    print(f"{OUT}: {len(rows)} op sets, {sum(counts.values())} entries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
