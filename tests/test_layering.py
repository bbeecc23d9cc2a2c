"""Package layering, module size and the one-specialization rule for kernels."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
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


def test_core_does_not_import_onnx():
    """onnx is an optional extra: only irkernel.frontend imports it."""
    out = _run("""
        import json, sys
        import irkernel, passes, runtime, irkernel.cli.main
        print(json.dumps(sorted(m for m in sys.modules
                                if m.split('.')[0] in ('onnx', 'onnxruntime'))))
    """)
    assert json.loads(out) == []


def test_import_passes_does_not_import_runtime():
    out = _run("""
        import json, sys
        import passes
        print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'runtime')))
    """)
    assert json.loads(out) == []


#: The layers, bottom first. A module may import modules of its own package and of
#: lower layers only, deferred imports inside functions included. Packages on one
#: line are siblings: they do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("irkernel.ir", "irkernel.target"),
    ("irkernel.text", "irkernel.tir", "irkernel.testing", "irkernel.scaleout"),
    ("irkernel.transform", "irkernel.frontend", "irkernel.viz"),
    ("irkernel.instrument",),
    ("irkernel",),  # the public facade (irkernel/__init__.py)
    ("passes",),
    ("runtime",),
    ("irkernel.frontend.onnx.dynamic",),  # DynamicModel builds per binding: above runtime
    ("irkernel.cli", "irkernel.frontend.onnx.backend"),
)


def _package_of(module: str) -> str:
    """The layer package a module belongs to (the longest matching prefix)."""
    best = ""
    for layer in LAYERS:
        for pkg in layer:
            if (module == pkg or module.startswith(pkg + ".")) and len(pkg) > len(best):
                best = pkg
    return best


def _rank(module: str) -> int:
    pkg = _package_of(module)
    return next(k for k, layer in enumerate(LAYERS) if pkg in layer)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_files() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in _modules(pkg)}


def _imported_names(module: str, path: Path) -> Iterator[str]:
    """The dotted names one module imports (every import statement, at any depth):
    ``from a.b import c`` gives ``a.b`` and ``a.b.c``; relative imports are resolved."""
    base = _package_name(module, path).split(".")
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            anchor = base[: len(base) - node.level + 1] if node.level else []
            mod = ".".join(anchor + ([node.module] if node.module else []))
            yield mod
            yield from (f"{mod}.{a.name}" for a in node.names)


def _package_name(module: str, path: Path) -> str:
    """The package a module is in (a package's ``__init__`` is in the package itself)."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _import_edges() -> dict[str, set[str]]:
    """module -> the project modules it imports (every import statement, at any depth)."""
    files = _project_files()
    edges: dict[str, set[str]] = {}
    for module, path in files.items():
        targets: set[str] = set()
        for name in _imported_names(module, path):
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != module and not (path.name == "__init__.py"
                                                and name.startswith(module + ".")):
                targets.add(name)
        edges[module] = targets
    return edges


def test_imports_point_down_the_layers():
    """Lower layers never import higher ones, not even lazily, and siblings not each other."""
    bad = []
    for module, targets in _import_edges().items():
        for target in targets:
            same = _package_of(target) == _package_of(module)
            if not same and _rank(target) >= _rank(module):
                bad.append(f"{module} -> {target}")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(bad))


def test_scaleout_imports_no_other_irkernel_layer():
    """The engines know nothing of IR or passes, so both transform and runtime can use them."""
    bad = sorted(f"{module} -> {target}" for module, targets in _import_edges().items()
                 if _package_of(module) == "irkernel.scaleout"
                 for target in targets if _package_of(target) != "irkernel.scaleout")
    assert not bad, "irkernel.scaleout imports other layers:\n" + "\n".join(bad)


def test_transform_and_runtime_open_engines_through_scaleout():
    """One way to name an engine: map_modules and runtime.build both resolve it there."""
    edges = _import_edges()
    assert "irkernel.scaleout.resolve" in edges["irkernel.transform.batch"]
    assert "irkernel.scaleout" in edges["runtime.build"]


def _foreign_private(package: str, name: str, files: dict[str, Path]) -> bool:
    """Whether importing ``name`` from a module of ``package`` reaches into another
    package's privates: a ``_part`` of the dotted name (dunders are not private) belongs to
    the package holding it, and only that package (not a subpackage) may import it."""
    parts = name.split(".")
    k = next((k for k, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")),
             None)
    if k is None:
        return False
    owner = ".".join(parts[:k])
    if owner in files and files[owner].name != "__init__.py":
        owner = owner.rpartition(".")[0]  # a private name of a plain module: its package's
    return owner != package


def _private_imports() -> list[tuple[str, str]]:
    """(importer, name) for every import of another package's private module or name."""
    files = _project_files()
    return [(module, name) for module, path in files.items()
            for name in _imported_names(module, path)
            if name.split(".")[0] in PACKAGES
            and _foreign_private(_package_name(module, path), name, files)]


def test_no_module_imports_another_packages_private_module():
    """What several packages share is public: ``passes.dead_code`` may import
    ``passes._common``; ``passes.topi.conv`` may not, nor may anything outside ``passes``."""
    bad = sorted({f"{module} -> {name}" for module, name in _private_imports()})
    assert not bad, "imports of another package's private module or name:\n" + "\n".join(bad)


@pytest.mark.parametrize(("package", "name", "foreign"), [
    ("passes", "passes._common", False),
    ("passes", "passes._common.op_pinned", False),
    ("passes", "passes.fuse_ops._group_name", False),
    ("irkernel.tir", "irkernel.tir.expr._depth", False),
    ("passes", "passes.dead_code", False),
    ("passes", "irkernel.ir.ops", False),
    ("passes.topi", "passes._common", True),
    ("passes.topi", "passes._fuse_parallel.PARALLEL_MIN_WORK", True),
    ("runtime", "passes._common.op_pinned", True),
    ("runtime", "passes.fuse_ops._group_name", True),
    ("passes", "passes.topi._helper", True),
])
def test_private_import_rule(package: str, name: str, foreign: bool):
    assert _foreign_private(package, name, _project_files()) is foreign


def test_no_import_cycles():
    edges = _import_edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: list[str] = []
    cycles = []
    for root in sorted(edges):  # Tarjan's SCC, iterative (no recursion limit)
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        on_stack.append(root)
        while work:
            node, it = work[-1]
            child = next(it, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    on_stack.append(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = on_stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    assert not cycles, f"import cycles: {cycles}"


#: What the op table (``irkernel.ir.ops``) may import from irkernel: the op table sits
#: at the bottom of ``ir`` (the builder, verifier and interpreter read it); ``symdim`` (the
#: algebra of symbolic dims, which imports ``errors`` only) is what its rules compute with.
OP_TABLE_IMPORTS = ("irkernel.ir.ids", "irkernel.ir.errors", "irkernel.ir.jit",
                    "irkernel.ir.symdim")


def test_op_table_imports_only_its_modules_and_the_ir_basics():
    """Modules of the op-table package import each other and ids/errors/jit only, and
    never the package itself: its ``__init__`` imports them, so importing one of them
    first must not need the package's names yet."""
    bad = []
    for module, targets in _import_edges().items():
        if not module.startswith("irkernel.ir.ops."):
            continue
        for target in targets:
            inside = target.startswith("irkernel.ir.ops.")
            if not (inside or target in OP_TABLE_IMPORTS):
                bad.append(f"{module} -> {target}")
    assert not bad, "op-table imports:\n" + "\n".join(sorted(bad))


def test_irkernel_has_few_plain_modules():
    """The top of irkernel/ names the layers: the facade and a few modules, the rest in packages."""
    plain = sorted(p.name for p in (ROOT / "irkernel").glob("*.py"))
    assert len(plain) <= 8, plain


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
