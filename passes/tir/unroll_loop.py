"""UnrollLoop: replicate loop bodies, explicitly (``T.unroll``) or automatically (TVM's rules).

Configured by the pass-config key ``tir.UnrollLoop``, a mapping with TVM's
fields (missing keys take the defaults):

* ``auto_max_step`` (int, 0): a serial loop with a constant extent, with no
  non-unrolled loop inside it, is auto-unrolled when
  ``extent * steps(body) <= auto_max_step`` (a step is one store/evaluate;
  nested unrolled loops multiply) ...
* ``auto_max_depth`` (int, 8): ... and at most this many unrolled loops nest
  under it ...
* ``auto_max_extent`` (int, 0): ... or when ``extent <= auto_max_extent``.
* ``explicit_unroll`` (bool, True): copy the body (else mark the loop
  ``unrolled`` and leave the copies to LLVM).

Loops of kind ``unrolled`` are always unrolled; a non-constant extent is an
error, as in TVM. Copies substitute the loop var by its value, so Simplify
folds the index arithmetic afterwards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from irkernel import transform
from irkernel.ir.errors import IRError
from irkernel.tir.analysis import const_int
from irkernel.tir.construct import binary
from irkernel.tir.expr import Add as _Add
from irkernel.tir.expr import IntImm, PrimExpr
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import substitute_each
from irkernel.tir.stmt import (
    Allocate,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

CONFIG_KEY = "tir.UnrollLoop"


@dataclasses.dataclass(frozen=True)
class UnrollLoopConfig:
    """The ``tir.UnrollLoop`` options (see the module docstring)."""

    auto_max_step: int = 0
    auto_max_depth: int = 8
    auto_max_extent: int = 0
    explicit_unroll: bool = True

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> UnrollLoopConfig:
        problem = _check(options)
        if problem:
            raise ValueError(f"pass config {CONFIG_KEY!r}: {problem}")
        return cls(**dict(options))


def _check(options: Any) -> str | None:
    fields = {f.name: f.type for f in dataclasses.fields(UnrollLoopConfig)}
    for key, value in options.items():
        if key not in fields:
            return f"unknown option {key!r}; options: {', '.join(fields)}"
        want = bool if fields[key] in (bool, "bool") else int
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            return f"option {key!r} must be {want.__name__}, got {value!r}"
        if want is int and value < 0:
            return f"option {key!r} must be >= 0, got {value}"
    return None


class _Unroller:
    """Post-order rewrite returning ``(stmt, steps, unroll_depth, normal_depth)``."""

    def __init__(self, config: UnrollLoopConfig, name: str) -> None:
        self.config = config
        self.name = name

    def visit(self, s: Stmt) -> tuple[Stmt, int, int, int]:
        if isinstance(s, For):
            return self.loop(s)
        if isinstance(s, SeqStmt):
            parts = [self.visit(x) for x in s.stmts]
            new = tuple(p[0] for p in parts)
            out = s if all(a is b for a, b in zip(new, s.stmts, strict=True)) else SeqStmt(new)
            return (out, sum(p[1] for p in parts), max((p[2] for p in parts), default=0),
                    max((p[3] for p in parts), default=0))
        if isinstance(s, (LetStmt, Allocate)):
            body, steps, ud, nd = self.visit(s.body)
            return s.replace(body=body), steps, ud, nd
        if isinstance(s, IfThenElse):
            then, st, ud, nd = self.visit(s.then_case)
            if s.else_case is None:
                return s.replace(then_case=then), st, ud, nd
            other, se, ue, ne = self.visit(s.else_case)
            return (s.replace(then_case=then, else_case=other), st + se, max(ud, ue),
                    max(nd, ne))
        if isinstance(s, (BufferStore, Evaluate)):
            return s, 1, 0, 0
        return s, 0, 0, 0

    def loop(self, s: For) -> tuple[Stmt, int, int, int]:
        body, steps, unroll_depth, normal_depth = self.visit(s.body)
        s = s.replace(body=body)
        extent = const_int(s.extent)
        cfg = self.config
        auto = (s.kind == "serial" and extent is not None and normal_depth == 0
                and unroll_depth <= cfg.auto_max_depth
                and (extent * steps <= cfg.auto_max_step or extent <= cfg.auto_max_extent))
        if s.kind == "unrolled":
            if extent is None:
                raise IRError(f"{self.name}: for {s.loop_var.name}: cannot unroll a loop with "
                              "a non-constant extent (rule: UnrollLoop)")
            auto = True
        if not auto:
            return s, steps, unroll_depth, normal_depth + 1
        assert extent is not None
        if cfg.explicit_unroll or extent == 0:
            return _unroll(s, extent), steps * extent, unroll_depth + 1, normal_depth
        return s.replace(kind="unrolled"), steps * extent, unroll_depth + 1, normal_depth


def _unroll(s: For, extent: int) -> Stmt:
    values = [IntImm(s.min.value + k, s.min.dtype) if isinstance(s.min, IntImm)
              else binary(_Add, s.min, k) for k in range(extent)]
    return SeqStmt(tuple(substitute_each(s.body, s.loop_var.name, values)))


def unroll_loop(func: PrimFunc, config: UnrollLoopConfig | Mapping[str, Any] | None = None,
                name: str = "main") -> PrimFunc:
    """Unroll ``func``'s loops (see the module docstring); ``func`` itself if none applies.

    Parameters
    ----------
    func : PrimFunc
    config : UnrollLoopConfig or mapping, optional
        Defaults to TVM's defaults (only ``T.unroll`` loops are unrolled).
    name : str
        The function name used in errors.

    Raises
    ------
    IRError
        For an ``unrolled`` loop whose extent is not a constant.
    """
    if config is None:
        config = UnrollLoopConfig()
    elif not isinstance(config, UnrollLoopConfig):
        config = UnrollLoopConfig.from_mapping(config)
    body = _Unroller(config, name).visit(func.body)[0]
    return func.with_body(body)


def UnrollLoop() -> transform.PrimFuncPass:
    """Unroll loops per the ``tir.UnrollLoop`` config (opt level 0)."""

    def run(func: PrimFunc, mod: Any, ctx: transform.PassContext) -> PrimFunc:
        del mod
        options = ctx.get_config(CONFIG_KEY)
        name = func.attrs.get("global_symbol", "main")
        return unroll_loop(func, UnrollLoopConfig.from_mapping(options), name)

    return transform.prim_func_pass(run, opt_level=0, name="UnrollLoop")


transform.register_pass_config(
    CONFIG_KEY, Mapping, MappingProxyType({}), check=_check,
    description="UnrollLoop options: auto_max_step, auto_max_depth, auto_max_extent, "
                "explicit_unroll (TVM's)")
transform.register_pass("UnrollLoop", UnrollLoop)

__all__ = ["CONFIG_KEY", "UnrollLoop", "UnrollLoopConfig", "unroll_loop"]
