"""Transform layer (TVM's ``tvm.transform``): passes, contexts, pipelines, the registry.

The public facade of the pass infrastructure. Modules, bottom up:
``pass_info`` (PassInfo), ``config`` (config registry), ``instrument_protocol``
(how the context recognizes instruments), ``context`` (PassContext; its
docstring has the ordering design note), ``pass_text`` (spelling of a pass
with options), ``registry`` (name -> factory; finds the built-in passes
through entry points), ``pass_base`` (Pass, the runner, ``get_pass``),
``pass_kinds`` (Module/Function/PrimFunc passes, Sequential, FixedPoint),
``decorators``, ``pipelines`` (O0..O3 and pipelines given as text),
``pipeline_text`` (textual pipelines),
``bisect``, ``reduce`` (+ ``reduce_edits``, ``reduce_oracle``: delta debugging of a module), ``pipeline_portable`` (a pipeline as text a worker rebuilds) and
``batch`` (``map_modules``). Where tasks run (engines, their transport and
errors, the warm local pool) is ``irkernel.scaleout``, below this layer; its
public names are re-exported here. May import ``irkernel.ir`` and
``irkernel.scaleout``; never ``instrument``, ``passes`` or ``runtime``.
See docs/pass_infra.md and docs/scale_out.md.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import sys
from typing import TextIO

from irkernel.ir.module import IRModule, is_prim_func
from irkernel.scaleout import (
    RemoteError,
    TaskError,
    WorkerLostError,
    local_executor,
    on_worker_start,
    open_engine,
)
from irkernel.transform.batch import map_modules
from irkernel.transform.bisect import BisectResult, bisect
from irkernel.transform.config import register_pass_config
from irkernel.transform.context import PassContext
from irkernel.transform.decorators import function_pass, module_pass, prim_func_pass
from irkernel.transform.pass_base import Pass, get_pass
from irkernel.transform.pass_info import PassInfo
from irkernel.transform.pass_kinds import (
    FixedPoint,
    FunctionPass,
    ModulePass,
    PrimFuncPass,
    Sequential,
)
from irkernel.transform.pipeline_text import PipelineParseError, parse_pipeline
from irkernel.transform.pipelines import (
    PIPELINE_TEXTS,
    PIPELINES,
    make_pipeline,
    pipeline_config_key,
    pipeline_text_of,
    register_pipeline,
)
from irkernel.transform.reduce import ReduceError, reduce
from irkernel.transform.registry import discover, list_passes, register_pass

# Local worker processes load the registered passes once when they start, not in their
# first task (irkernel.scaleout knows nothing of passes: it sits below this layer).
on_worker_start(discover)


def PrintIR(header: str = "", file: TextIO | None = None) -> ModulePass:
    """A pass that prints the module and returns it unchanged (opt level 0).

    Parameters
    ----------
    header : str
        Printed as ``PrintIR(<header>):`` above the module text.
    file : text stream, optional
        Where to print; defaults to ``sys.stdout`` at the time the pass runs.

    Returns
    -------
    ModulePass
        Named ``"PrintIR"``; also registered (``PrintIR{header=after_fold}``).
    """
    if not isinstance(header, str):
        raise TypeError(f"PrintIR: header must be a str, got {type(header).__name__}")

    def print_ir(mod: IRModule, ctx: PassContext) -> IRModule:
        del ctx
        out = sys.stdout if file is None else file
        out.write(f"PrintIR({header}):\n{mod.script()}\n")
        return mod

    return ModulePass(print_ir, PassInfo(0, "PrintIR"))


register_pass("PrintIR", PrintIR)

__all__ = [
    "PIPELINES",
    "PIPELINE_TEXTS",
    "BisectResult",
    "FixedPoint",
    "FunctionPass",
    "ModulePass",
    "Pass",
    "PassContext",
    "PassInfo",
    "PipelineParseError",
    "PrimFuncPass",
    "PrintIR",
    "ReduceError",
    "RemoteError",
    "Sequential",
    "TaskError",
    "WorkerLostError",
    "bisect",
    "function_pass",
    "get_pass",
    "is_prim_func",
    "list_passes",
    "local_executor",
    "make_pipeline",
    "map_modules",
    "module_pass",
    "open_engine",
    "parse_pipeline",
    "pipeline_config_key",
    "pipeline_text_of",
    "prim_func_pass",
    "reduce",
    "register_pass",
    "register_pass_config",
    "register_pipeline",
]
