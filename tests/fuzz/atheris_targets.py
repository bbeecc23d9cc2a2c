"""Coverage-guided fuzzing with atheris (long runs; not part of the pytest suite).

Install the optional extra and pick a target::

    .venv/bin/pip install -e '.[test,fuzz]'
    .venv/bin/python tests/fuzz/atheris_targets.py parse -atheris_runs=200000
    .venv/bin/python tests/fuzz/atheris_targets.py columns -max_total_time=3600 corpus/

Targets (each must either work or raise a documented error; anything else,
or a signal, is a finding that atheris reports with the input that caused it):

- ``parse``: the bytes as UTF-8 text through ``ik.parse``, then print + verify;
- ``npy``: the bytes as a ``.npy`` file through ``irkernel.cli.npy.read_npy``;
- ``columns``: the bytes choose a valid module and edits of its raw columns,
  then every graph pass, the interpreter, the printer, hashing and verify;
- ``object``: the bytes as a cached object file through
  ``runtime.objfile.object_problem`` (which must never raise).

Arguments after the target go to libFuzzer (``-help=1`` lists them). A seed
corpus (printed modules, ``.npy`` files, an object file) speeds the start up::

    .venv/bin/python tests/fuzz/atheris_targets.py corpus fuzz-corpus/
    .venv/bin/python tests/fuzz/atheris_targets.py parse fuzz-corpus/parse

See ``docs/fuzzing.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import tempfile
from pathlib import Path

import atheris

#: Modules whose Python is instrumented for coverage: every module of the three packages
#: except those holding Numba kernels (Numba can not compile instrumented bytecode).
KERNEL_MODULES = ["irkernel.ir.checks", "irkernel.ir.jit", "irkernel.ir.operands",
                  "irkernel.ir.rebuild", "irkernel.ir.ops.scalar", "irkernel.ir.validate",
                  "irkernel.testing.bulk_kernels", "passes.cse", "passes.dead_code",
                  "passes.fold_constant", "passes.fuse_ops", "passes.simplify_arith",
                  "runtime.memory_plan"]

with atheris.instrument_imports(include=["irkernel", "passes", "runtime"],
                                exclude=KERNEL_MODULES):
    import numpy as np

    import irkernel as ik
    import passes
    from irkernel.cli.npy import InputError, read_npy
    from irkernel.testing import random_inputs, random_module
    from runtime.objfile import object_problem
    from runtime.target import host

DOCUMENTED = (ik.IRError, TypeError, ValueError)
COLUMNS = ("kind", "a0", "a1", "dtype", "shape_id", "attr_id", "extra", "params", "outputs")
_BASES: list[ik.IRModule] = []


def parse_target(data: bytes) -> None:
    try:
        mod = ik.parse(data.decode("utf-8", "replace"))
        mod.script()
        ik.verify(mod)
    except DOCUMENTED:
        pass


def npy_target(data: bytes) -> None:
    with tempfile.NamedTemporaryFile(suffix=".npy") as fh:
        fh.write(data)
        fh.flush()
        with contextlib.suppress(InputError):
            read_npy(fh.name)


def _bases() -> list[ik.IRModule]:
    if not _BASES:
        _BASES.extend(random_module(30, seed=s, shapes="small" if s % 2 else "scalar",
                                    call_funcs=s == 0, const_fraction=0.3) for s in range(4))
    return _BASES


def columns_target(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    mod = _bases()[fdp.ConsumeIntInRange(0, len(_bases()) - 1)]
    func = mod["main"]
    changes = {}
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        col = COLUMNS[fdp.ConsumeIntInRange(0, len(COLUMNS) - 1)]
        arr = np.array(changes.get(col, getattr(func, col)))
        if not len(arr):
            continue
        info = np.iinfo(arr.dtype)
        arr[fdp.ConsumeIntInRange(0, len(arr) - 1)] = fdp.ConsumeIntInRange(info.min, info.max)
        changes[col] = arr
    try:
        bad = mod.with_functions({"main": dataclasses.replace(func, **changes)})
    except DOCUMENTED:
        return
    inputs = random_inputs(mod, seed=0)
    for consume in (passes.O2(), passes.LegalizeOps(), lambda m: ik.interpret(m, *inputs),
                    lambda m: m.script(), ik.structural_hash, ik.verify):
        with contextlib.suppress(*DOCUMENTED):
            consume(bad)


def object_target(data: bytes) -> None:
    problem = object_problem(data, "kernel", host().triple)
    assert problem is None or isinstance(problem, str)


TARGETS = {"parse": parse_target, "npy": npy_target, "columns": columns_target,
           "object": object_target}


def write_corpus(directory: Path) -> None:
    """Seed inputs for each target under ``directory/<target>/``."""
    import importlib
    import io

    from irkernel.tir import script as T

    for target in TARGETS:
        (directory / target).mkdir(parents=True, exist_ok=True)
    for k, mod in enumerate(_bases()):
        (directory / "parse" / f"module{k}.ir").write_text(mod.script())
    for k, arr in enumerate((np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(3, bool))):
        buf = io.BytesIO()
        np.save(buf, arr)
        (directory / "npy" / f"array{k}.npy").write_bytes(buf.getvalue())
    (directory / "columns" / "zeros").write_bytes(bytes(64))

    @T.prim_func
    def kernel(a: T.Buffer((8,), "float32"), out: T.Buffer((8,), "float32")):
        for i in T.serial(8):
            out[i] = a[i] + 1.0

    compile_module = importlib.import_module("runtime.compile")
    lower_module = importlib.import_module("runtime.lower")
    jit = importlib.import_module("runtime.jit")
    lowered = compile_module.lower_tir("kernel", kernel)
    obj = jit.compile_ir(lower_module.lower(lowered, "kernel", host(), False)).obj
    (directory / "object" / "kernel.o").write_bytes(obj)


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[1] == "corpus":
        write_corpus(Path(argv[2]))
        return
    if len(argv) < 2 or argv[1] not in TARGETS:
        sys.exit(f"usage: {Path(argv[0]).name} {{{','.join(TARGETS)}}} [libFuzzer options]"
                 f" | corpus DIR")
    target = TARGETS[argv[1]]
    atheris.Setup([argv[0], *argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
