"""Package layering, module size and the one-specialization rule for kernels."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("irkernel", "passes", "runtime")
MAX_CODE_LINES = 900


def _run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    return result.stdout


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_import_irkernel_does_not_import_passes_or_runtime():
    out = _run("""
        import json, sys
        import irkernel
        print(json.dumps(sorted(m for m in sys.modules
                                if m.split('.')[0] in ('passes', 'runtime'))))
    """)
    assert json.loads(out) == []


def test_import_passes_does_not_import_runtime():
    if not (ROOT / "passes" / "__init__.py").exists():
        pytest.skip("no passes package yet")
    out = _run("""
        import json, sys
        import passes
        print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'runtime')))
    """)
    assert json.loads(out) == []


def _imported_roots(tree: ast.AST, module_level_only: bool) -> set[str]:
    nodes = tree.body if module_level_only else list(ast.walk(tree))  # type: ignore[attr-defined]
    roots = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize(("package", "banned", "module_level_only"), [
    ("irkernel", {"passes", "runtime"}, True),  # the CLI may import lazily
    ("passes", {"runtime"}, False),  # never, not even lazily
])
def test_imports_point_one_way(package, banned, module_level_only):
    bad = []
    for path in _modules(package):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        hit = _imported_roots(tree, module_level_only) & banned
        if hit:
            bad.append(f"{path.relative_to(ROOT)} imports {sorted(hit)}")
    assert not bad, bad


def _code_lines(path: Path) -> int:
    """Lines that are neither blank nor comments."""
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines()
               if line.strip() and not line.strip().startswith("#"))


def test_module_files_stay_small():
    sizes = {str(p.relative_to(ROOT)): _code_lines(p) for pkg in PACKAGES for p in _modules(pkg)}
    for package in PACKAGES:
        total = sum(n for name, n in sizes.items() if name.startswith(package + "/"))
        print(f"{package}: {total} code lines")
    too_big = {name: n for name, n in sizes.items() if n > MAX_CODE_LINES}
    assert not too_big, f"modules above {MAX_CODE_LINES} code lines: {too_big}"


def test_each_kernel_compiles_one_specialization():
    """Builder (incremental and bulk, assign and check modes), verify and interpret share
    one compiled signature per kernel: column arrays are always passed read-only."""
    out = _run("""
        import json
        import numpy as np
        import irkernel as ik
        from irkernel import ops
        from irkernel.ir.jit import KERNELS

        bb = ik.GraphBuilder("main")
        x = bb.param("x", (3,), "float32")
        c = bb.const(np.float32(2.0))
        y = bb.exp(bb.add(x, c))
        cid = bb.add_scalar_consts(np.array([1.0, 2.0], np.float32), "float32")
        ids = bb.add_nodes(np.array([ops.OP_CONST, ops.OP_MULTIPLY, ops.OP_LOG], np.int16),
                           np.array([cid[0], y, y + 2], np.int32),
                           np.array([-1, y + 1, -1], np.int32))
        sid = bb.intern_shape((3,))
        more = bb.add_nodes(np.array([ops.OP_TANH], np.int16), np.array([ids[-1]], np.int32),
                            dtype=np.zeros(1, np.int8), shape_id=np.array([sid], np.int32))
        try:
            bb.add_nodes(np.array([ops.OP_EXP], np.int16), np.array([99], np.int32))
        except ValueError:
            pass
        out = bb.concat(int(more[0]), x, x, y)
        f = bb.finish([out])
        hb = ik.GraphBuilder("helper", private=True)
        h = hb.finish([hb.negative(hb.param("a", (12,), "float32"))])
        bb = ik.GraphBuilder("caller")
        g = bb.finish([bb.call_func("helper", bb.param("a", (12,), "float32"),
                                    dtype="float32", shape=(12,))])
        mod = ik.IRModule({"main": f, "helper": h, "caller": g})
        ik.verify(mod)
        ik.verify(f)
        ik.interpret(mod, np.ones(3, np.float32))
        print(json.dumps({k.__name__: [str(s) for s in k.signatures] for k in KERNELS}))
    """)
    sigs = json.loads(out)
    assert sigs, "no kernels registered"
    assert sigs["check_structure_kernel"]
    assert sigs["type_sweep_kernel"]
    many = {name: s for name, s in sigs.items() if len(s) > 1}
    assert not many, f"kernels with more than one specialization: {many}"
