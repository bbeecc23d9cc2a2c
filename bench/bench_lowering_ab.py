"""Per-pass ``LowerTIR`` time of a model's kernels: this checkout against a git revision.

Usage::

    PYTHONPATH=.:tests/frontend:bench .venv/bin/python bench/bench_lowering_ab.py \\
        --base REV resnet18 /path/to/model.onnx [--blocks 3] [--size 224] [--build]

Why: compile time is user time, and the machine these numbers come from is shared, so
old and new run in ONE process, in alternating blocks, and the report gives medians and
their ratio. The old passes are the files of ``--base`` (``git show REV:path``) for the
modules listed in ``AB_FILES`` that differ from this checkout, loaded as modules of their
own and registered as ``<Pass>Old``; the old pipeline is ``LOWER_TIR`` with those names.
Every distinct PrimFunc of each model (after ``GraphLowering``) is lowered by both, pass
by pass, and the two results must print the same TIR (``script()``): the script exits
non-zero and names the kernel otherwise.

``--build`` times whole cold builds instead (``runtime.build(mod, cache=False)``), old
against new in alternating blocks: the old one runs the old ``LowerTIR`` (the config
``pipeline.LowerTIR``), the old ``free_vars``/``used_buffers`` in ``runtime.lower`` and
codegen without its per-statement memo (``ExprCodegen.expr`` as ``_lower_expr``), and
the report gives the build and its ``LowerTIR``, ``CompileKernels`` and LLVM seconds.

A model argument is a path to an ``.onnx`` file or a name ``bench_onnx_import._load``
knows (the stripped test models, resized to ``--size`` as ``bench_onnx.py`` does).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from typing import Any

import runtime  # noqa: F401 (registers the passes)
from irkernel import transform
from irkernel.ir.module import IRModule
from irkernel.tir.function import PrimFunc
from passes.pipelines import LOWER_TIR
from runtime.build import build_context

#: Modules whose old version replaces the new one in the old pipeline (when they differ),
#: with the passes they register.
AB_FILES = {
    "irkernel/tir/functor.py": (),
    "passes/tir/simplify.py": ("Simplify",),
    "passes/tir/vectorize_loop.py": ("VectorizeLoop",),
    "passes/tir/unroll_loop.py": ("UnrollLoop",),
    "passes/tir/flatten_buffer.py": ("FlattenBuffer",),
}


def _old_modules(rev: str) -> tuple[set[str], dict[str, types.ModuleType]]:
    """Load the old versions that differ: the pass names now registered as Old, and the
    old modules by their dotted names."""
    renamed: set[str] = set()
    modules: dict[str, types.ModuleType] = {}
    loaded: dict[str, str] = {}  # dotted name -> old module's name
    for path, passes in AB_FILES.items():
        old = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True,
                             check=True).stdout
        with open(path) as f:
            if f.read() == old:
                continue
        dotted = path[:-3].replace("/", ".")
        for name, alias in loaded.items():
            old = old.replace(f"from {name} import", f"from {alias} import")
        for p in passes:
            old = old.replace(f'register_pass("{p}", {p})', f'register_pass("{p}Old", {p})')
            renamed.add(p)
        alias = f"{dotted}_abold"
        module = types.ModuleType(alias)
        module.__file__ = f"{rev}:{path}"
        sys.modules[alias] = module
        old = old.replace("transform.register_pass_config(", "_ab_known_config(")
        module.__dict__["_ab_known_config"] = lambda *a, **k: None  # registered by the new
        exec(compile(old, module.__file__, "exec"), module.__dict__)  # noqa: S102 (a bench)
        loaded[dotted] = alias
        modules[dotted] = module
    return renamed, modules


def _load_model(arg: str, size: int) -> IRModule:
    from irkernel.frontend.onnx import from_onnx
    if arg.endswith(".onnx"):
        return from_onnx(arg)
    from bench_onnx import resized
    from bench_onnx_import import _load
    return from_onnx(resized(_load(arg), size))


def _kernels(mod: IRModule) -> list[tuple[str, PrimFunc]]:
    low = transform.make_pipeline("GraphLowering")(mod)
    seen, out = set(), []
    for name, f in low.functions.items():
        if isinstance(f, PrimFunc) and "generic_name" not in f.attrs:
            digest = f.structural_digest()
            if digest not in seen:
                seen.add(digest)
                out.append((name, f))
    return out


def _lower(passes: list[tuple[str, transform.Pass]], name: str, func: PrimFunc,
           times: dict[str, float]) -> PrimFunc:
    mod = IRModule({name: func})
    for label, p in passes:
        t = time.perf_counter()
        mod = p(mod)
        times[label] = times.get(label, 0.0) + time.perf_counter() - t
    return mod[name]


def _build_ab(model: str, mod: IRModule, old_text: str, old_functor: Any, blocks: int) -> None:
    import runtime
    from irkernel.instrument import PassTimingInstrument
    from runtime import lower as lower_module
    from runtime.codegen_expr import ExprCodegen
    new_patch = (ExprCodegen.expr, lower_module.free_vars, lower_module.used_buffers)
    old_patch = (ExprCodegen._lower_expr,
                 *(getattr(old_functor, n) for n in ("free_vars", "used_buffers"))
                 ) if old_functor is not None else (ExprCodegen._lower_expr, *new_patch[1:])
    rows: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for _ in range(blocks):
        for variant in ("old", "new"):
            patch = old_patch if variant == "old" else new_patch
            ExprCodegen.expr, lower_module.free_vars, lower_module.used_buffers = patch
            config = {"pipeline.LowerTIR": old_text} if variant == "old" else {}
            timing = PassTimingInstrument()
            try:
                with transform.PassContext(config=config, instruments=[timing]):
                    t = time.perf_counter()
                    runtime.build(mod, cache=False)
                    total = time.perf_counter() - t
            finally:
                ExprCodegen.expr, lower_module.free_vars, lower_module.used_buffers = new_patch
            phases = _phase_seconds(timing.render())
            for label, value in (("build", total), *phases.items()):
                rows[variant].setdefault(label, []).append(value)
    print(f"{model}: cold build, {blocks} blocks, median s")
    print(f"  {'phase':16s} {'old':>8s} {'new':>8s} {'new/old':>8s}")
    for label in rows["new"]:
        old = statistics.median(rows["old"][label])
        new = statistics.median(rows["new"][label])
        print(f"  {label:16s} {old:8.3f} {new:8.3f} {new / old if old else 0:8.2f}")


def _phase_seconds(report: str) -> dict[str, float]:
    """``LowerTIR`` and ``CompileKernels`` totals and ``llvm_s`` from a timing report."""
    out: dict[str, float] = {}
    for line in report.splitlines():
        parts = line.split()
        if parts and parts[0] in ("LowerTIR", "CompileKernels"):
            out[parts[0]] = float(parts[2]) / 1000
            for part in parts:
                if part.startswith("llvm_s="):
                    out["llvm"] = float(part[7:])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--base", required=True, help="git revision of the old passes")
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--build", action="store_true", help="time whole cold builds")
    args = ap.parse_args()
    renamed, old_modules = _old_modules(args.base)
    names = LOWER_TIR.split(",")
    pipelines = {
        "old": [(n, transform.parse_pipeline(n + "Old" if n in renamed else n)) for n in names],
        "new": [(n, transform.parse_pipeline(n)) for n in names],
    }
    status = 0
    if args.build:
        old_text = ",".join(n + "Old" if n in renamed else n for n in names)
        for model in args.models:
            _build_ab(model, _load_model(model, args.size), old_text,
                      old_modules.get("irkernel.tir.functor"), args.blocks)
        return status
    with build_context(None):
        for model in args.models:
            kernels = _kernels(_load_model(model, args.size))
            for name, f in kernels:  # warm-up, and the same TIR either way
                a = _lower(pipelines["old"], name, f, {}).script()
                b = _lower(pipelines["new"], name, f, {}).script()
                if a != b:
                    print(f"{model}: {name}: the lowered TIR differs", file=sys.stderr)
                    status = 1
            blocks: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
            for _ in range(args.blocks):
                for variant in ("old", "new"):
                    times: dict[str, float] = {}
                    for name, f in kernels:
                        _lower(pipelines[variant], name, f, times)
                    times["total"] = sum(times.values())
                    blocks[variant].append(times)
            print(f"{model}: {len(kernels)} kernels, {args.blocks} blocks, median s per block")
            print(f"  {'pass':16s} {'old':>8s} {'new':>8s} {'new/old':>8s}")
            for label in [*dict.fromkeys(names), "total"]:
                old = statistics.median(b[label] for b in blocks["old"])
                new = statistics.median(b[label] for b in blocks["new"])
                print(f"  {label:16s} {old:8.3f} {new:8.3f} {new / old if old else 0:8.2f}")
    return status


if __name__ == "__main__":
    sys.exit(main())
