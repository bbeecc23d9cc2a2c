"""Crash and miscompile reproducers: one self-contained ``.ir`` file per failing pass.

When a pass raises under a ``PassContext(reproducer_dir=DIR)`` (a crash, an
IRError, or an instrument's check such as ``CheckSemantics`` failing after it),
the runner calls :func:`write_reproducer` for the innermost failing leaf pass.
The file is the text format, so it parses, prints and diffs like any module;
what is needed to replay sits in a header of ``#`` comment lines the parser
skips, one ``# key: value`` per line (values of ``config`` and ``instruments``
are JSON)::

    # irkernel reproducer: replay with `irkernel opt --run-reproducer FILE`
    # pass: FoldConstant{max_elements=1024}
    # pipeline: O2
    # opt_level: 2
    # config: {"irkernel.fixpoint_max_iterations": 4}
    # instruments: ["CheckSemantics"]
    # error: PassCheckError: pass 'FoldConstant': output 0 differs ...
    @main = graph ...

PrimFuncs are not part of the text format: each one's TVMScript follows the graph
functions as comment lines starting ``#| `` (so the file still parses as text),
and reading the file runs that script with ``T = irkernel.tir.script``, as
docs/tir.md rebuilds a PrimFunc. A reproducer is Python you run, like a test
case: replay only files you trust.

The module is the failing pass's *input*, so replaying runs that one pass (the
``pipeline`` line is the outermost pipeline it ran in, for the reader). Text
rather than JSON: the module stays readable and ``irkernel reduce`` takes the
file as it is. Config values that have no JSON form (a ``target`` object) are
left out and named in a ``# config-dropped:`` line. Imports ``irkernel.ir`` and
``irkernel.text`` and ``irkernel.tir`` (to read a file back).
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Any

from irkernel.ir.module import IRModule, is_prim_func

HEADER = "# irkernel reproducer: replay with `irkernel opt --run-reproducer FILE`"
#: Instruments a reproducer re-creates on replay (by class name, default arguments).
REPLAYED_INSTRUMENTS = ("VerifyEach", "CheckSemantics", "CheckImmutable")
PRIM_FUNCS = "# PrimFuncs (TVMScript, run with T = irkernel.tir.script when read):"
_counter = itertools.count()


@dataclass(frozen=True)
class Reproducer:
    """What a reproducer file holds (:func:`read_reproducer`)."""

    pass_text: str
    pipeline: str
    opt_level: int
    config: dict[str, Any]
    instruments: tuple[str, ...]
    error: str
    module: IRModule
    dropped: tuple[str, ...] = field(default=())


def _one_line(text: str) -> str:
    return " ".join(text.split())


def write_reproducer(directory: str, pass_text: str, pipeline: str, ctx: Any, mod: IRModule,
                     exc: BaseException) -> str:
    """Write the reproducer of ``exc`` raised by pass ``pass_text`` on ``mod``; its path."""
    config, dropped = {}, []
    for key, value in dict(ctx.config).items():
        try:
            json.dumps(value)
            config[key] = value
        except TypeError:
            dropped.append(key)
    instruments = [type(i).__name__ for i in ctx.instruments
                   if type(i).__name__ in REPLAYED_INSTRUMENTS]
    lines = [HEADER, f"# pass: {pass_text}", f"# pipeline: {_one_line(pipeline)}",
             f"# opt_level: {ctx.opt_level}", f"# config: {json.dumps(config, sort_keys=True)}",
             f"# instruments: {json.dumps(instruments)}",
             f"# error: {type(exc).__name__}: {_one_line(str(exc))}"]
    if dropped:
        lines.append(f"# config-dropped: {', '.join(dropped)}")
    os.makedirs(directory, exist_ok=True)
    name = "".join(c if c.isalnum() else "_" for c in pass_text.split("{")[0])[:40]
    path = os.path.join(directory, f"reproducer-{name}-{os.getpid()}-{next(_counter)}.ir")
    graphs = IRModule({k: v for k, v in mod.functions.items() if not is_prim_func(v)})
    prims = [v.script(k) for k, v in mod.functions.items() if is_prim_func(v)]
    body = graphs.script() if len(graphs) else ""
    if prims:
        body += "\n" + PRIM_FUNCS + "\n" + "\n".join(
            "#| " + line for line in "\n\n".join(prims).splitlines()) + "\n"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n" + body)
    return path


def _prim_funcs(text: str) -> dict[str, Any]:
    """The PrimFuncs of the ``#| `` lines, by name (their script, run with ``T``)."""
    from irkernel.tir import script as T
    from irkernel.tir.function import PrimFunc

    source = "\n".join(line[3:] for line in text.splitlines() if line.startswith("#| "))
    if not source:
        return {}
    scope: dict[str, Any] = {"T": T}
    exec(compile(source, "<reproducer PrimFuncs>", "exec"), scope)  # noqa: S102 - see above
    return {k: v for k, v in scope.items() if isinstance(v, PrimFunc)}


def read_reproducer(text: str) -> Reproducer:
    """The reproducer in ``text``; ValueError naming what is missing or malformed."""
    from irkernel.text.parser import parse

    if not text.startswith(HEADER):
        raise ValueError("not an irkernel reproducer (the first line must be "
                         f"{HEADER!r})")
    fields: dict[str, str] = {}
    for line in text.splitlines()[1:]:
        if not line.startswith("# "):
            break
        key, sep, value = line[2:].partition(": ")
        if sep:
            fields[key] = value
    missing = [k for k in ("pass", "pipeline", "opt_level", "config", "instruments", "error")
               if k not in fields]
    if missing:
        raise ValueError(f"reproducer header lacks {', '.join(missing)}")
    try:
        config = json.loads(fields["config"])
        instruments = tuple(json.loads(fields["instruments"]))
        opt_level = int(fields["opt_level"])
    except ValueError as exc:
        raise ValueError(f"reproducer header: {exc}") from exc
    unknown = [i for i in instruments if i not in REPLAYED_INSTRUMENTS]
    if unknown or not isinstance(config, dict):
        raise ValueError(f"reproducer header: bad instruments {unknown} or config")
    dropped = tuple(k.strip() for k in fields.get("config-dropped", "").split(",") if k.strip())
    graphs = parse(text).functions if "\n@" in text else {}
    module = IRModule({**graphs, **_prim_funcs(text)})
    return Reproducer(fields["pass"], fields["pipeline"], opt_level, config, instruments,
                      fields["error"], module, dropped)


__all__ = ["HEADER", "REPLAYED_INSTRUMENTS", "Reproducer", "read_reproducer",
           "write_reproducer"]
