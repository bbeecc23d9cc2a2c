"""The code version in every kernel key: a digest of the source that lowering runs.

A cached object is reused when its key matches, so the key must change when
any code that shapes the object changes. A list of folders went stale (a TIR
helper of ``passes`` outside them changed lowering and old objects were still
served), so the digest follows the imports instead: from the modules that
lower a PrimFunc to an object (``runtime.compile``, ``runtime.lower``,
``runtime.jit``) and the modules of the passes the lowering pipeline names,
every module named by an ``import`` or ``from`` statement anywhere in them
(functions included: lazy imports count), transitively, within the packages
``irkernel``, ``passes`` and ``runtime``, is read and hashed. Only the import
statements are parsed (``ast``), once per process and pipeline text. A parent
package's ``__init__`` counts only when it is itself imported; a docstring line
that reads as an import may add a module (the digest errs towards changing).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
from pathlib import Path
from typing import Any

import irkernel
from irkernel import transform
from irkernel.transform.registry import lookup

#: The packages whose modules the digest follows (the repository's own code).
PACKAGES = ("irkernel", "passes", "runtime")
#: Where lowering starts: the kernel path from a PrimFunc to object bytes.
LOWERING_ROOTS = ("runtime.compile", "runtime.lower", "runtime.jit")
ROOT = Path(__file__).resolve().parents[1]


def module_path(name: str) -> Path | None:
    """The source file of module ``name`` of :data:`PACKAGES` (a package's ``__init__``),
    or None when ``name`` is not one (a name imported from a module, a third party)."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _read(path: Path) -> bytes:
    """The bytes of a source file (one place, so a test can change what lowering runs)."""
    return path.read_bytes()


#: An import statement at the start of a line (indented ones too: lazy imports), its
#: parenthesized names across lines. Only these are parsed: parsing whole modules took
#: half a second per process, the statements take milliseconds.
_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)"
                     rb"|import[ \t]+[^\n]*)", re.M)


def _statements(path: Path, source: bytes) -> list[ast.stmt]:
    """The import statements of ``source``; a match that does not parse (prose in a
    docstring that starts like one) is skipped."""
    found: list[ast.stmt] = []
    for match in _IMPORT.finditer(source):
        try:
            found.extend(ast.parse(match.group().strip(), filename=str(path)).body)
        except SyntaxError:
            continue
    return found


def _imported(name: str, path: Path, source: bytes) -> list[str]:
    """Modules named by the import statements of ``source`` (module ``name`` at ``path``):
    for ``from m import x``, ``m.x`` when it is a submodule, else ``m``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[str] = []
    for node in _statements(path, source):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            before = len(found)
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            subs = [f"{module}.{alias.name}" for alias in node.names]
            found.extend(sub for sub in subs if module_path(sub) is not None)
            if len(found) - before < len(subs):  # some names are defined in ``module``
                found.append(module)
    return found


def import_closure(roots: tuple[str, ...]) -> dict[Path, bytes]:
    """Every module of :data:`PACKAGES` that ``roots`` import, transitively (roots
    included), with its source; a worklist over module names, sorted by path."""
    sources: dict[Path, bytes] = {}
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_path(name)
        if path is None or path in sources:
            continue
        sources[path] = _read(path)
        todo.extend(_imported(name, path, sources[path]))
    return dict(sorted(sources.items()))


def pass_modules(pipeline_text: str) -> tuple[str, ...]:
    """The modules whose factories make the passes ``pipeline_text`` names (a plugin's
    too), nested pipelines included."""
    parsed = transform.parse_pipeline(pipeline_text)
    modules: set[str] = set()
    todo: list[Any] = list(parsed.passes)
    while todo:
        p = todo.pop()
        todo.extend(getattr(p, "passes", ()))
        factory = lookup(str(p).split("{")[0])
        if factory is not None:
            modules.add(factory.__module__)
    return tuple(sorted(modules))


@functools.cache
def code_version(pipeline_text: str) -> str:
    """A digest of the code that turns TIR into objects with lowering pipeline
    ``pipeline_text`` (the version, the text, the import closure's sources)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(irkernel.__version__.encode())
    h.update(pipeline_text.encode())
    for path, source in import_closure(LOWERING_ROOTS + pass_modules(pipeline_text)).items():
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(len(source).to_bytes(8, "little"))
        h.update(source)
    return h.hexdigest()


__all__ = ["LOWERING_ROOTS", "PACKAGES", "code_version", "import_closure", "module_path",
           "pass_modules"]
