"""Pass infrastructure (TVM's ``tvm.transform``): passes, contexts, pipelines, the registry.

Public facade; the implementation lives in ``_pass_context`` (PassInfo,
PassContext, config registry; its docstring has the ordering design note),
``_pass_core`` (pass classes and the runner), ``_pass_decorators``,
``_pass_registry`` (registry, O0..O3), ``_pipeline_text`` (textual pipelines)
and ``_bisect``. Never imports ``passes`` or ``runtime``. See docs/pass_infra.md.
"""

from __future__ import annotations

# pyright: reportUnnecessaryIsInstance=false
# (public entry points validate their arguments at run time)
import sys
from typing import TextIO

from irkernel.transform.bisect import BisectResult, bisect
from irkernel.transform.context import PassContext, PassInfo, register_pass_config
from irkernel.transform.pass_base import FixedPoint, FunctionPass, ModulePass, Pass, PrimFuncPass, Sequential, is_prim_func
from irkernel.transform.decorators import function_pass, module_pass, prim_func_pass
from irkernel.transform.registry import PIPELINES, get_pass, list_passes, register_pass
from irkernel.transform.pipeline_text import PipelineParseError, parse_pipeline
from irkernel.ir.module import IRModule


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
    "Sequential",
    "bisect",
    "function_pass",
    "get_pass",
    "is_prim_func",
    "list_passes",
    "module_pass",
    "parse_pipeline",
    "prim_func_pass",
    "register_pass",
    "register_pass_config",
]
