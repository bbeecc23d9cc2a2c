"""Well-formedness of PrimFuncs (``PrimFunc.verify`` and ``ik.verify``).

Types are checked when nodes are built (an ill-typed tree can not exist), so
the verifier checks what construction can not see, in one walk:

1. scope: every var is a parameter, a shape var, or bound by an enclosing
   loop / let, and no binding shadows a var already in scope (names identify
   bindings, see ``expr``'s notes);
2. buffers: every load/store names a parameter buffer or an enclosing
   ``Allocate``, and matches its declaration (after ``FlattenBuffer``, the
   1-d view of it: same dtype, one index); allocations do not reuse names;
3. static bounds: an access outside any branch whose indices are affine in
   loop vars with constant ranges, into a constant extent, must be in bounds.
   The extremes of an affine form over independent ranges are exact, so an
   error is never a false positive; accesses under ``IfThenElse``/``Select``
   are skipped (the guard may exclude the bad iterations).

Errors are ``IRError("<func>: <where>: <what> (rule: <rule>)")``.
Imports the TIR node modules and ``irkernel.ir.errors``; installs ``function.VERIFY``.
"""

from __future__ import annotations

from irkernel.ir.errors import IRError
from irkernel.tir import dtype as dt
from irkernel.tir.analysis import LANE, Interval, const_int, linear_extremes, linear_form
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import Let, Node, PrimExpr, Select, Var
from irkernel.tir.function import VERIFY, PrimFunc
from irkernel.tir.functor import children
from irkernel.tir.printer import expr_text
from irkernel.tir.stmt import Allocate, BufferStore, For, IfThenElse, LetStmt


class _Verifier:
    def __init__(self, func: PrimFunc, name: str) -> None:
        self.func = func
        self.name = name
        self.flat = bool(func.attrs.get("tir.flattened", False))
        self.where: list[str] = []

    def fail(self, what: str, rule: str) -> IRError:
        where = f"{self.where[-1]}: " if self.where else ""
        return IRError(f"{self.name}: {where}{what} (rule: {rule})")

    def run(self) -> None:
        scope: dict[str, Var] = {}
        buffers: dict[str, Buffer] = {}
        for p in self.func.params:
            if isinstance(p, Var):
                scope[p.name] = p
            else:
                buffers[p.name] = p
        for v in self.func.shape_vars:
            scope[v.name] = v
        self.visit(self.func.body, scope, buffers, {}, guarded=False)

    # ------------------------------------------------------------------
    def bind(self, var: Var, scope: dict[str, Var]) -> dict[str, Var]:
        if var.name in scope:
            raise self.fail(f"var {var.name!r} is bound again while already in scope",
                            "no shadowing")
        return {**scope, var.name: var}

    def visit(self, node: Node, scope: dict[str, Var], buffers: dict[str, Buffer],
              ranges: dict[str, Interval], guarded: bool) -> None:
        if isinstance(node, Var):
            if scope.get(node.name) != node:
                raise self.fail(f"var {node.name!r} ({node.dtype}) is used outside its scope",
                                "vars in scope")
            return
        if isinstance(node, (BufferLoad, BufferStore)):
            self.access(node, scope, buffers, ranges, guarded)
        if isinstance(node, For):
            self.loop(node, scope, buffers, ranges, guarded)
            return
        if isinstance(node, (LetStmt, Let)):
            self.visit(node.value, scope, buffers, ranges, guarded)
            self.visit(node.body, self.bind(node.var, scope), buffers, ranges, guarded)
            return
        if isinstance(node, Allocate):
            self.allocate(node, scope, buffers, ranges, guarded)
            return
        if isinstance(node, IfThenElse):
            self.visit(node.condition, scope, buffers, ranges, guarded)
            self.visit(node.then_case, scope, buffers, ranges, True)
            if node.else_case is not None:
                self.visit(node.else_case, scope, buffers, ranges, True)
            return
        guarded = guarded or isinstance(node, Select)
        for child in children(node):
            if not isinstance(child, Buffer):
                self.visit(child, scope, buffers, ranges, guarded)

    def loop(self, node: For, scope: dict[str, Var], buffers: dict[str, Buffer],
             ranges: dict[str, Interval], guarded: bool) -> None:
        self.visit(node.min, scope, buffers, ranges, guarded)
        self.visit(node.extent, scope, buffers, ranges, guarded)
        lo, ext = const_int(node.min), const_int(node.extent)
        inner = dict(ranges)
        if lo is not None and ext is not None:
            if ext <= 0:
                return  # the body never runs
            inner[node.loop_var.name] = (lo, lo + ext - 1)
        self.where.append(f"for {node.loop_var.name}")
        self.visit(node.body, self.bind(node.loop_var, scope), buffers, inner, guarded)
        self.where.pop()

    def allocate(self, node: Allocate, scope: dict[str, Var], buffers: dict[str, Buffer],
                 ranges: dict[str, Interval], guarded: bool) -> None:
        buf = node.buffer
        if buf.name in buffers:
            raise self.fail(f"allocation {buf.name!r} reuses the name of a buffer in scope",
                            "unique buffer names")
        for e in buf.shape:
            self.visit(e, scope, buffers, ranges, guarded)
        self.visit(node.body, scope, {**buffers, buf.name: buf}, ranges, guarded)

    def access(self, node: BufferLoad | BufferStore, scope: dict[str, Var],
               buffers: dict[str, Buffer], ranges: dict[str, Interval],
               guarded: bool) -> None:
        buf = node.buffer
        kind = "load" if isinstance(node, BufferLoad) else "store"
        decl = buffers.get(buf.name)
        if decl is None:
            raise self.fail(f"{kind} of buffer {buf.name!r}, which is neither a parameter nor "
                            "allocated here", "buffers declared")
        if buf != decl and not (self.flat and buf.ndim == 1 and buf.dtype == decl.dtype):
            raise self.fail(f"{kind} of buffer {buf.name!r} does not match its declaration "
                            f"({_sig(buf)} vs {_sig(decl)})", "buffers declared")
        if guarded:
            return
        for axis, (index, extent) in enumerate(zip(node.indices, buf.shape, strict=True)):
            self.check_bounds(kind, buf, axis, index, extent, ranges)

    def check_bounds(self, kind: str, buf: Buffer, axis: int, index: PrimExpr,
                     extent: PrimExpr, ranges: dict[str, Interval]) -> None:
        n = const_int(extent)
        form = linear_form(index)
        if n is None or form is None:
            return
        env = dict(ranges)
        env[LANE] = (0, index.lanes - 1)
        span = linear_extremes(form, env)
        if span is None or (span[0] >= 0 and span[1] < n):
            return
        bad = span[0] if span[0] < 0 else span[1]
        raise self.fail(f"{kind} {buf.name}: the index {expr_text(index)} on axis {axis} "
                        f"reaches {bad}, outside [0, {n})", "static bounds")


def _sig(buf: Buffer) -> str:
    shape = ", ".join(expr_text(s) for s in buf.shape)
    return f"{buf.dtype}[{shape}]" + (f" align {buf.align}" if buf.align > dt.ELEMENT_BYTES[
        buf.dtype] else "")


def verify_prim_func(func: PrimFunc, name: str = "main") -> None:
    """Check ``func``'s scoping, buffer and static-bounds rules.

    Raises
    ------
    IRError
        ``"<name>: <where>: <problem> (rule: <rule>)"``.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"verify_prim_func: expected a PrimFunc, got {type(func).__name__}")
    _Verifier(func, name).run()


VERIFY.install(verify_prim_func)

__all__ = ["verify_prim_func"]
