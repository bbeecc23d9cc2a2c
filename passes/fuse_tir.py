"""FuseTIR: each ``Primitive`` graph function (made by FuseOps) becomes one PrimFunc.

The members' PrimFuncs are composed in graph order (TVM's FuseTIR plus
``compute_inline``):

* a member whose callee is in **canonical injective form** (``irkernel.tir.te``:
  a perfect serial nest storing ``out[i0, i1, ...] = value``) is not emitted at
  all; it becomes a *virtual* value ``(axes, value)`` and every load of it in a
  later member is replaced by ``value`` with the axes substituted by the load's
  indices. A chain of elementwise/broadcast/injective ops therefore ends as ONE
  loop nest making one pass over memory;
* any other member (a reduction, a scheduled matmul, a non-canonical kernel)
  is emitted as its own statement, its bound vars and scratch buffers renamed
  to fresh names, its output an ``Allocate``d intermediate (or the function's
  output buffer for the root);
* epilogues: when the root is canonical and reads the one emitted heavy member
  (reduction / matmul) only at its own store indices, that member writes the
  output buffer directly (no scratch) and, if it comes right before the root,
  the epilogue moves into it: appended inside its nest when it is a canonical
  reduction over the output axes, or applied to every stored value when it
  never reads the output back (a register-tiled matmul storing its tile);
  otherwise the epilogue runs as a second, in-place nest over the output.

A virtual value whose expression grows deeper than ``INLINE_DEPTH``, or whose
tree (shared subexpressions counted at every use) grows past ``INLINE_SIZE``
nodes, is materialized into a scratch buffer instead: TIR trees are depth-capped
at ``tir.MAX_DEPTH`` so visitors cannot overflow the stack, and every later walk
(TIR passes, codegen) sees a tree, so a value inlined into several reads at
several levels would double per level (a chain of ``x // x`` through reshapes
took minutes). So is one read with vector indices. A large nest whose outer iterations
provably commute gets a ``parallel`` outer loop (``passes.tir.parallelize``). Identical fused PrimFuncs
are shared (structural digest).
Callers' ``call_func`` nodes to Primitive functions become ``call_tir`` (a
kind/attribute rewrite over the columns) and the Primitive functions go.
Imports irkernel only (never runtime).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.distinct import sorted_distinct
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.module import IRModule
from irkernel.ir.rebuild import rebuild
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import FloatImm, IntImm, Let, PrimExpr, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import Mutator, children, post_order, substitute
from irkernel.tir.stmt import Allocate, BufferStore, For, SeqStmt, Stmt, seq
from passes._fuse_epilogue import (
    fold_into_nest,
    fold_into_stores,
    peel,
    replace_store_value,
    static_extents,
)
from passes._fuse_memo import CalleeInfo, RunCache, callee_info, interned_buffer
from passes.fuse_ops import _group_name, _sanitize
from passes.tir.parallelize import parallelize

#: Deepest inlined expression before a virtual value is materialized (tir.MAX_DEPTH is 200;
#: the margin leaves room for the consumer's own expression around the inlined one).
INLINE_DEPTH = 120
#: Largest inlined expression tree (nodes, each use of a shared subexpression counted)
#: before a virtual value is materialized.
INLINE_SIZE = 2048

Virtual = tuple[tuple[Var, ...], PrimExpr]


def _fail(fname: str, node: int, what: str) -> IRError:
    return IRError(f"FuseTIR: {fname}: node {node}: {what} (rule: Primitive function members)")


class _Rewriter(Mutator):
    """Renames a member's bound vars and buffers and inlines its virtual inputs.

    A virtual input read more than once (at one index tuple) is in ``lets``: its
    value is bound once with a ``Let`` around the store that reads it, instead of
    being copied into every read (templates such as relu/maximum read their
    operand four times; copying would grow a chain's expression exponentially).
    """

    def __init__(self, buffers: dict[str, Buffer], virtuals: dict[str, Virtual],
                 var_names: dict[str, str], lets: dict[str, Var] | None = None) -> None:
        self.buffers = buffers
        self.virtuals = virtuals
        self.var_names = var_names
        self.lets = lets or {}
        self.pending: dict[str, tuple[PrimExpr, ...]] = {}

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        return self.buffers.get(buffer.name, buffer)

    def visit_Var(self, var: Var) -> Var:
        new = self.var_names.get(var.name)
        return var if new is None else Var(new, var.dtype)

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        virtual = self.virtuals.get(load.buffer.name)
        if virtual is None:
            return self.generic(load)
        indices = tuple(self.visit(i) for i in load.indices)
        bound = self.lets.get(load.buffer.name)
        if bound is not None:
            self.pending.setdefault(load.buffer.name, indices)
            return bound
        return _inline(virtual, indices)

    def value(self, expr: PrimExpr) -> PrimExpr:
        """``expr`` rewritten, wrapped in the Lets of the multiply-read inputs it reads."""
        saved, self.pending = self.pending, {}
        out = self.visit(expr)
        bound: set[str] = set()  # params fed by one node share its Var: bind it once
        for name, indices in self.pending.items():
            var = self.lets[name]
            if var.name not in bound:
                bound.add(var.name)
                out = Let(var, _inline(self.virtuals[name], indices), out)
        self.pending = saved
        return out

    def visit_BufferStore(self, store: BufferStore) -> BufferStore:
        value = self.value(store.value)
        indices = tuple(self.visit(i) for i in store.indices)
        return BufferStore(self.visit_buffer(store.buffer), value, indices)


def _inline(virtual: Virtual, indices: tuple[PrimExpr, ...]) -> PrimExpr:
    """The virtual value read at ``indices``.

    Reads at the value's own axes (an elementwise chain: every member loops over
    the same ``i0, i1, ...``) need no substitution; skipping it keeps a chain
    linear instead of re-walking the whole inlined expression at every member.
    """
    axes, value = virtual
    mapping = {a.name: i for a, i in zip(axes, indices, strict=True)
               if not (isinstance(i, Var) and i.name == a.name and i.dtype == a.dtype)}
    return substitute(value, mapping) if mapping else value


def _tree_size(expr: PrimExpr) -> int:
    """Nodes of ``expr`` as a tree (what later walks visit), counted on its DAG: each
    distinct node once (memo by identity), no recursion."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in sizes:
            continue
        kids = list(children(node))
        if expanded or not kids:
            sizes[id(node)] = 1 + sum(sizes[id(k)] for k in kids)
            continue
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in sizes)
    return sizes[id(expr)]


def _is_leaf(expr: PrimExpr) -> bool:
    return isinstance(expr, (BufferLoad, Var, IntImm, FloatImm))


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _nest(vars_: list[Var], extents: tuple[int, ...], body: Stmt) -> Stmt:
    for v, n in zip(reversed(vars_), reversed(extents), strict=True):
        body = For(v, IntImm(0, v.dtype), IntImm(n, v.dtype), "serial", body)
    return body


def _same_point(indices: tuple[PrimExpr, ...], axes: tuple[Var, ...], loops: list[For]) -> bool:
    """Whether ``indices`` name the loop nest's own point: each is the axis var, or the
    constant 0 on an axis of extent 1 (how broadcasting templates read a size-1 axis, so
    that a batch-1 conv or matmul still takes its epilogue in place)."""
    for index, axis, loop in zip(indices, axes, loops, strict=True):
        if index == axis:
            continue
        if not (isinstance(index, IntImm) and index.value == 0 and isinstance(loop.extent, IntImm)
                and loop.extent.value == 1):
            return False
    return True


def _loads_of(node: Any, name: str) -> list[BufferLoad]:
    return [n for n in post_order(node) if isinstance(n, BufferLoad) and n.buffer.name == name]


class _Composer:
    """Builds the fused PrimFunc of one Primitive function."""

    def __init__(self, prim: Function, fname: str, mod: IRModule, memo: RunCache) -> None:
        self.prim, self.fname, self.mod = prim, fname, mod
        self.infos, self.checked, self.memo = memo.infos, memo.checked, memo.values
        self.kinds = prim.kind.tolist()
        self.attr_ids = prim.attr_id.tolist()
        self.callee_names: dict[int, str] = {}  # attr id -> callee name
        shapes = prim.shapes
        types = [(DTYPE_NAMES[d], shapes[s]) for d, s in
                 zip(prim.dtype.tolist(), prim.shape_id.tolist(), strict=True)]
        self.types = types  # (dtype, shape) per node
        self.var_taken: set[str] = set()
        self.buf_taken: set[str] = set()
        self.stmts: list[tuple[int, Stmt]] = []  # (member node, statement)
        self.allocs: list[Buffer] = []
        self.value: dict[int, Buffer | Virtual] = {}

    def node_buffer(self, node: int, name: str) -> Buffer:
        dtype, shape = self.types[node]
        self.buf_taken.add(name)
        return interned_buffer(name, tuple(shape), dtype)

    def run(self) -> PrimFunc:
        prim = self.prim
        n = prim.num_nodes
        if len(prim.outputs) != 1 or int(prim.outputs[0]) != n - 1:
            raise _fail(self.fname, n - 1, "a Primitive function has one output, its last node")
        params = [self.node_buffer(int(p), f"p{j}") for j, p in enumerate(prim.params)]
        for p, buf in zip(prim.params.tolist(), params, strict=True):
            self.value[p] = buf
        out = self.node_buffer(n - 1, "out")
        names: list[str] = []
        patterns: list[int] = []
        schedules: list[tuple[Any, Any]] = []  # (schedule, tile) of each member: the profiler shows them
        first = len(prim.params)
        if not np.array_equal(prim.params, np.arange(first)):
            raise _fail(self.fname, 0, "params must be the first nodes")
        for node in range(first, n):
            operands = prim.operands(node)
            callee_name, callee, info = self.callee(node, operands)
            names.append(str(callee.attrs.get("op_name", callee_name)))
            schedules.append((callee.attrs.get("schedule"), callee.attrs.get("tile")))
            pat = callee.attrs.get("op_pattern", ops.OPAQUE)
            patterns.append(pat if isinstance(pat, int) else ops.OPAQUE)
            self.member(node, operands, callee, info, out if node == n - 1 else None)
        self.epilogue(out)
        # Large independent nests run on the thread pool (after the epilogue moved in).
        body: Stmt = seq(*(parallelize(s) for _, s in self.stmts)) if self.stmts \
            else SeqStmt(())
        for buf in reversed(self.allocs):
            body = Allocate(buf, body)
        attrs = {"op_pattern": max(patterns), "op_name": _group_name([_sanitize(n) for n in names])}
        scheduled = [s for s in schedules if isinstance(s[0], str)]
        if scheduled:  # at most one heavy member per group: its template names the kernel
            attrs["schedule"], tile = scheduled[0]
            if isinstance(tile, str):
                attrs["tile"] = tile
        return PrimFunc((*params, out), body, attrs)

    def callee(self, node: int, operands: tuple[int, ...]) -> tuple[str, PrimFunc, CalleeInfo]:
        prim = self.prim
        if self.kinds[node] != ops.OP_CALL_TIR:
            raise _fail(self.fname, node, f"{prim.op(node).name} is not call_tir")
        aid = self.attr_ids[node]
        name = self.callee_names.get(aid)
        if name is None:
            name = self.callee_names[aid] = prim.attr_table.as_dict(aid)["callee"]
        callee = self.mod.functions.get(name)
        if not isinstance(callee, PrimFunc):
            raise _fail(self.fname, node, f"callee {name!r} is not a PrimFunc of the module")
        info = self.infos.get(id(callee))
        if info is None:
            info = self.infos[id(callee)] = callee_info(callee)
        key = (id(callee), *(self.types[v] for v in operands), self.types[node])
        if key in self.checked:
            return name, callee, info
        if len(callee.params) != len(operands) + 1 or not all(
                isinstance(p, Buffer) for p in callee.params):
            raise _fail(self.fname, node, f"callee {name!r} must take {len(operands) + 1} "
                        "buffers (operands, then the output)")
        for pos, (sig, v) in enumerate(zip(info.signature, (*operands, node), strict=True)):
            if sig != self.types[v]:
                dtype, shape = self.types[v]
                raise _fail(self.fname, node, f"callee {name!r} buffer {pos} "
                            f"({callee.params[pos].name}) does not match the value "
                            f"{dtype}{list(shape)}")
        self.checked.add(key)
        return name, callee, info

    # -- members -------------------------------------------------------------
    def member(self, node: int, operands: tuple[int, ...], callee: PrimFunc,
               info: CalleeInfo, out: Buffer | None) -> None:
        inputs, result = callee.params[:-1], callee.params[-1]
        assert isinstance(result, Buffer)
        canonical = info.canonical
        lets: dict[str, Var] = {}
        params_of: dict[int, list[str]] = {}  # operand node -> the params it feeds (x * x: 2)
        for p, v in zip(inputs, operands, strict=True):
            params_of.setdefault(v, []).append(p.name)
        for v, names in params_of.items():
            value = self.value[v]
            if isinstance(value, Buffer):
                continue
            loads = [ld for name in names for ld in info.loads.get(name, [])]
            if any(i.lanes != 1 for ld in loads for i in ld.indices):
                self.materialize(v)
            elif len(loads) > 1 and not _is_leaf(value[1]):
                # Bind once (Let) when every read is at one index tuple of a canonical
                # kernel (reads sit in store values); otherwise compute it once in scratch.
                if canonical is not None and all(ld.indices == loads[0].indices
                                                 for ld in loads):
                    var = Var(_fresh(f"v{v}", self.var_taken), value[1].dtype)
                    lets.update(dict.fromkeys(names, var))
                else:
                    self.materialize(v)
        buffers = {p.name: self.value[v] for p, v in zip(inputs, operands, strict=True)
                   if isinstance(self.value[v], Buffer)}
        virtuals = {p.name: self.value[v] for p, v in zip(inputs, operands, strict=True)
                    if not isinstance(self.value[v], Buffer)}
        if out is None and canonical is not None and canonical.value is not None:
            value = self.inlined(callee, canonical.value, buffers, virtuals, lets)
            self.value[node] = (canonical.axes, value)
            if value._depth > INLINE_DEPTH or _tree_size(value) > INLINE_SIZE:
                self.materialize(node)
            return
        target = out if out is not None else self.node_buffer(node, f"t{node}")
        if out is None:
            self.allocs.append(target)
        buffers[result.name] = target
        var_names = {}
        for v in info.bound:
            if v.name not in var_names:
                var_names[v.name] = _fresh(v.name, self.var_taken)
        for buf in info.allocated:
            buffers[buf.name] = buf.replace(name=_fresh(buf.name, self.buf_taken))
        stmt = _Rewriter(buffers, virtuals, var_names, lets).visit(callee.body)
        self.stmts.append((node, stmt))
        self.value[node] = target

    def inlined(self, callee: PrimFunc, value: PrimExpr, buffers: dict[str, Buffer],
                virtuals: dict[str, Virtual], lets: dict[str, Var]) -> PrimExpr:
        """A canonical member's value with its inputs bound; memoized across groups when
        every input is a buffer (then there are no lets either)."""
        if virtuals:
            return _Rewriter(buffers, virtuals, {}, lets).value(value)
        key = (id(callee), *(id(b) for b in buffers.values()))
        hit = self.memo.get(key)
        if hit is None:
            rewritten = _Rewriter(buffers, {}, {}).value(value)
            hit = self.memo[key] = (tuple(buffers.values()), rewritten)
        return hit[1]

    def materialize(self, node: int) -> None:
        """Store a virtual value into a scratch buffer (one nest) and use the buffer."""
        axes, value = self.value[node]  # type: ignore[misc]
        buf = self.node_buffer(node, f"t{node}")
        self.allocs.append(buf)
        new_vars = [Var(_fresh(a.name, self.var_taken), a.dtype) for a in axes]
        stored = substitute(value, {a.name: v for a, v in zip(axes, new_vars, strict=True)})
        extents = static_extents(buf)
        assert extents is not None
        self.stmts.append((node, _nest(new_vars, extents, BufferStore(buf, stored,
                                                                       tuple(new_vars)))))
        self.value[node] = buf

    # -- epilogue ------------------------------------------------------------
    def epilogue(self, out: Buffer) -> None:
        """Let the heavy member write ``out`` and apply the root's expression in place."""
        if len(self.stmts) < 2 or self.stmts[-1][0] != self.prim.num_nodes - 1:
            return
        root_stmt = self.stmts[-1][1]
        peeled = peel(root_stmt, out.ndim)
        if peeled is None or not isinstance(peeled[1], BufferStore):
            return
        loops, store = peeled
        axes = tuple(f.loop_var for f in loops)
        if store.buffer.name != out.name or store.indices != axes:
            return
        # The one intermediate the root reads exactly at its own indices, and nowhere else.
        for pos in range(len(self.stmts) - 2, -1, -1):
            node = self.stmts[pos][0]
            buf = self.value[node]
            if not isinstance(buf, Buffer) or buf.shape != out.shape:
                continue
            loads = _loads_of(store.value, buf.name)
            if not loads or any(not _same_point(ld.indices, axes, loops) for ld in loads):
                continue
            if any(_loads_of(s, buf.name) for k, (_, s) in enumerate(self.stmts[:-1])
                   if k != pos):
                continue
            if buf.dtype != out.dtype:  # a conversion last (a requantization's astype):
                self.converted_in_stores(pos, buf, out, axes, store)  # into stores or not
                return
            self.in_place(pos, buf, out, axes, store)
            return

    def converted_in_stores(self, pos: int, buf: Buffer, out: Buffer, axes: tuple[Var, ...],
                            store: BufferStore) -> None:
        """The heavy member at ``pos`` writes ``out`` of another dtype than its own
        ``buf``: only when the root's ``store`` goes into each of its stores (the value
        converted there, as an integer matmul's requantization to uint8), else nothing
        changes."""
        if pos != len(self.stmts) - 2:
            return
        node, heavy = self.stmts[pos]
        acc = Var(_fresh(f"v{node}", self.var_taken), buf.dtype)
        fused = fold_into_stores(heavy, buf, axes, store.value, acc, target=out)
        if fused is None:
            return
        self.allocs.remove(buf)
        self.value[node] = out
        self.stmts[pos] = (node, fused)
        del self.stmts[-1]

    def in_place(self, pos: int, buf: Buffer, out: Buffer, axes: tuple[Var, ...],
                 store: BufferStore) -> None:
        """The heavy member at ``pos`` writes ``out``; the root's ``store`` is applied to it
        inside its stores (when it never reads them back) or its nest (a canonical
        reduction), else as a second, in-place nest."""
        rename = _Rewriter({buf.name: out}, {}, {})
        node, heavy = self.stmts[pos]
        heavy = rename.visit(heavy)
        value = rename.visit(store.value)
        self.allocs.remove(buf)
        self.value[node] = out
        if pos == len(self.stmts) - 2:  # nothing the root reads is computed in between
            acc = Var(_fresh(f"v{node}", self.var_taken), out.dtype)
            fused = (fold_into_nest(heavy, out, axes, value)
                     or fold_into_stores(heavy, out, axes, value, acc))
            if fused is not None:
                self.stmts[pos] = (node, fused)
                del self.stmts[-1]
                return
        self.stmts[pos] = (node, heavy)
        root_node, root_stmt = self.stmts[-1]
        self.stmts[-1] = (root_node, replace_store_value(root_stmt, out.ndim, value))


# ---------------------------------------------------------------------------
# module rewrite
# ---------------------------------------------------------------------------

def fuse_primitive(prim: Function, fname: str, mod: IRModule,
                   cache: RunCache | None = None) -> PrimFunc:
    """The PrimFunc computing Primitive graph function ``prim`` (named ``fname``) of ``mod``.

    ``cache`` (optional, one per module and run: ``RunCache({}, set(), {})``)
    memoizes what recurs across the module's Primitive functions.
    """
    return _Composer(prim, fname, mod, cache or RunCache({}, set(), {})).run()


def _redirect_calls(func: Function, fname: str, target: dict[str, str]) -> Function:
    """call_func nodes to Primitive functions become call_tir to their PrimFuncs."""
    is_call = func.kind == ops.OP_CALL_FUNC
    if not np.any(is_call):
        return func
    records = func.attr_table.records
    new_records: list[tuple[tuple[str, Any], ...]] = []
    touched: list[int] = []
    for aid in sorted_distinct(func.attr_id[is_call]).tolist():  # distinct records, not nodes
        attrs = dict(records[aid])
        if attrs.get("callee") in target:
            attrs["callee"] = target[attrs["callee"]]
            new_records.append(ops.get_op("call_tir").normalize_attrs(attrs))
            touched.append(aid)
    if not touched:
        return func
    table, ids = func.attr_table.extended(new_records)
    attr_map = np.arange(len(table), dtype=np.int32)
    attr_map[touched] = ids
    is_target = np.zeros(len(table), np.bool_)
    is_target[touched] = True
    redirect = is_call & is_target[func.attr_id]
    kind = np.where(redirect, ops.OP_CALL_TIR, func.kind).astype(np.int16)
    attr_id = np.where(redirect, attr_map[func.attr_id], func.attr_id).astype(np.int32)
    return rebuild(func, kind=kind, attr_id=attr_id, attr_table=table,
                   pass_name=f"FuseTIR ({fname})")


def _fuse_tir_module(mod: IRModule, ctx: transform.PassContext) -> IRModule:
    prims = {name: f for name, f in mod.functions.items()
             if isinstance(f, Function) and f.attrs.get("Primitive", False)}
    if not prims:
        return mod
    target: dict[str, str] = {}
    by_digest: dict[bytes, str] = {}
    fused: dict[str, PrimFunc] = {}
    cache = RunCache({}, set(), {})
    for name, prim in prims.items():
        pf = fuse_primitive(prim, name, mod, cache)
        digest = pf.structural_digest()
        first = by_digest.setdefault(digest, name)
        target[name] = first
        if first == name:
            fused[name] = pf
    out: dict[str, Any] = {}
    for name, f in mod.functions.items():
        if name in prims:
            if name in fused:
                out[name] = fused[name]
        elif isinstance(f, Function):
            out[name] = _redirect_calls(f, name, target)
        else:
            out[name] = f
    ctx.stat("prim_funcs_created", len(fused))
    return IRModule(out, mod.attrs)


def FuseTIR() -> transform.ModulePass:
    """Turn every ``Primitive`` graph function into one PrimFunc (opt level 0).

    Opt level 0 because it is a lowering step: a Primitive function left in the
    module could not be compiled. Members in canonical injective form are
    inlined into their consumers (one loop nest per elementwise chain); a
    reduction or matmul keeps its own loops and its elementwise epilogue is
    applied in place on the output. Callers' ``call_func`` nodes become
    ``call_tir``; the Primitive functions are removed; identical fused
    PrimFuncs are shared. Requires nothing (run after FuseOps).

    Returns
    -------
    ModulePass
        Reports ``prim_funcs_created``.
    """
    def fuse_tir(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        return _fuse_tir_module(mod, ctx)

    return transform.module_pass(fuse_tir, opt_level=0, name="FuseTIR")


transform.register_pass("FuseTIR", FuseTIR)

__all__ = ["FuseTIR", "fuse_primitive"]
