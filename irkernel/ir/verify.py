"""Well-formedness checker for graph Functions and IRModules.

Rules, in the order they are checked (later rules may index with ids the
earlier ones validated, so no kernel ever sees an out-of-range id):

1. columns: dtypes, lengths, C-contiguity, read-only;
2. tables: shape dims non-negative or symbolic dims of the table's expressions (see
   ``irkernel.ir.symbols``), const pool ids consistent, constants of static shapes;
3. structure (one kernel sweep): opcode known, operand ids in range and
   earlier than the node (topological order), arity and unused slots per the
   op's encoding, const/param/shape/attr ids in range;
4. params and outputs: ``params[i]`` is the PARAM node of position i, in
   increasing node order, and every PARAM node is listed; outputs in range;
5. types (the signature sweep): every node's dtype and shape equal what the op
   table's rule gives for its operands and attributes, and every attribute
   set is the op's own normalized record;
6. module: call_func callees exist, are graph Functions, and their signature
   matches the call; call_tir callees are PrimFuncs whose buffers are the
   operands then the result (same dtypes and static shapes); the call graph
   is acyclic.

Every failure raises ``IRError`` naming the function, node id, op and rule.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.call_tir import bind_call_tir
from irkernel.ir.checks import STRUCTURE_RULES, check_structure_kernel
from irkernel.ir.errors import IRError, TypeInferenceError
from irkernel.ir.function import _COLUMNS, Function
from irkernel.ir.ids import DTYPE_NAMES, NUMPY_DTYPES, shape_problem
from irkernel.ir.module import IRModule
from irkernel.ir.operands import operand_list
from irkernel.ir.pools import AttrTable, ConstPool, ShapeTable
from irkernel.ir.symbols import SymbolTable, symbolic_shape_problem
from irkernel.ir.symtypes import lookup_shape, map_dims_attrs, refuse_symbolic
from irkernel.ir.typecheck import SignatureTable
from irkernel.ir.validate import symbol_problem, validate_function


def _fail(fname: str, node: int | None, op: str | None, what: str, rule: str) -> IRError:
    where = f"{fname}: " + (f"node {node} ({op}): " if node is not None else "")
    return IRError(f"{where}{what} (rule: {rule})")


def _type_str(code: int, shape: tuple[Any, ...]) -> str:
    name = DTYPE_NAMES[code] if 0 <= code < len(DTYPE_NAMES) else f"dtype#{code}"
    return f"{name}[{', '.join(map(str, shape))}]"


def _check_columns(fname: str, func: Function) -> None:
    for col, dtype in _COLUMNS.items():
        arr = getattr(func, col)
        if not isinstance(arr, np.ndarray):
            raise _fail(fname, None, None, f"column {col!r} is {type(arr).__name__}, not a "
                        "NumPy array", "column dtypes")
        if arr.dtype != dtype or arr.ndim != 1:
            raise _fail(fname, None, None, f"column {col!r} is {arr.dtype}{list(arr.shape)}, "
                        f"expected 1-D {np.dtype(dtype).name}", "column dtypes")
        if arr.flags.writeable or not arr.flags.c_contiguous:
            raise _fail(fname, None, None, f"column {col!r} is writeable or not contiguous",
                        "finished Functions are read-only")
    n = func.num_nodes
    for col in ("a0", "a1", "dtype", "shape_id", "attr_id"):
        if len(getattr(func, col)) != n:
            raise _fail(fname, None, None, f"column {col!r} has length "
                        f"{len(getattr(func, col))}, expected {n}", "column lengths")


def _check_tables(fname: str, func: Function) -> None:
    for field, cls in (("shapes", ShapeTable), ("attr_table", AttrTable), ("consts", ConstPool)):
        if not isinstance(getattr(func, field), cls):
            raise _fail(fname, None, None, f"{field} is {type(getattr(func, field)).__name__}, "
                        f"not a {cls.__name__}", "tables")
    symbols = func.shapes.symbols
    if not isinstance(symbols, SymbolTable):
        raise _fail(fname, None, None, f"shapes.symbols is {type(symbols).__name__}, not a "
                    "SymbolTable", "tables")
    for sid, shape in enumerate(func.shapes.shapes):  # one step per distinct shape
        if any(d < 0 for d in shape) and not symbols:
            raise _fail(fname, None, None, "shape table holds a negative dimension", "shapes")
        problem = shape_problem(shape) if not symbols else symbolic_shape_problem(shape, symbols)
        if problem is not None:
            raise _fail(fname, None, None, f"shape {sid}: {problem}", "shapes")
    pool = func.consts
    if symbols and len(pool) and np.any(func.shapes.is_symbolic[
            np.clip(pool.shape_id, 0, len(func.shapes) - 1)]):
        raise _fail(fname, None, None, "a constant has a symbolic shape", "const pool")
    if len(pool) and (pool.dtype.min() < 0 or pool.dtype.max() >= len(DTYPE_NAMES)
                      or pool.shape_id.min() < 0 or pool.shape_id.max() >= len(func.shapes)):
        raise _fail(fname, None, None, "const pool has a bad dtype or shape id", "const pool")
    # Offsets inside the data first, so that offset + size below can not wrap.
    offset = pool.offset
    if len(pool) and (offset.min() < 0 or offset.max() > len(pool.data)):
        raise _fail(fname, None, None, "const pool offsets do not cover the data",
                    "const pool")
    sizes = func.shapes.size[pool.shape_id] * np.array([d.itemsize for d in NUMPY_DTYPES],
                                                       np.int64)[pool.dtype]
    big = func.shapes.size[pool.shape_id] != 1
    for cid, arr in pool.external.items():  # one per large constant held by reference
        if not 0 <= cid < len(pool):
            raise _fail(fname, None, None, f"const pool: constant {cid} held by reference is "
                        f"not in [0, {len(pool)})", "const pool")
        want = func.shapes[int(pool.shape_id[cid])]
        if (not big[cid] or arr.dtype != NUMPY_DTYPES[int(pool.dtype[cid])]
                or arr.shape != want or arr.flags.writeable or not arr.flags.c_contiguous):
            raise _fail(fname, None, None, f"const pool: constant {cid} held by reference is "
                        f"{arr.dtype}{list(arr.shape)} (writeable={arr.flags.writeable}), expected "
                        f"read-only {DTYPE_NAMES[int(pool.dtype[cid])]}{list(want)}", "const pool")
        big[cid] = False  # no bytes in data
    ends = offset[:-1] + np.where(big, sizes, 0)
    if np.any(np.diff(offset) < 0) or (len(pool) and (
            ends.max(initial=0) > len(pool.data) or np.any(ends > offset[1:]))):
        raise _fail(fname, None, None, "const pool offsets do not cover the data",
                    "const pool")


def _check_structure(fname: str, func: Function) -> None:
    table = ops.op_arrays()
    bad, rule, detail = check_structure_kernel(
        func.kind, func.a0, func.a1, func.extra, func.dtype, func.shape_id, func.attr_id,
        table.encoding, table.arity, len(func.consts), len(func.params), len(func.shapes),
        len(func.attr_table), 0)
    if bad < 0:
        return
    k = int(func.kind[bad])
    op = ops.get_op(k).name if 0 <= k < len(table.encoding) else f"opcode {k}"
    what = {2: f"operand {detail} is out of range [0, {func.num_nodes})",
            3: f"operand {detail} is not earlier than the node",
            4: f"has {detail} operands"}.get(int(rule), f"bad value {detail}")
    if rule == 4:
        what += f", expected {ops.get_op(k).arity}"
    raise _fail(fname, bad, op, what, STRUCTURE_RULES[rule])


def _check_params_outputs(fname: str, func: Function) -> None:
    params, n = func.params, func.num_nodes
    is_param = func.kind == ops.OP_PARAM
    bad = np.nonzero((params < 0) | (params >= n))[0]
    if len(bad):
        raise _fail(fname, None, None, f"params[{int(bad[0])}] = {int(params[bad[0]])} is not "
                    f"a node id in [0, {n})", "params")
    listed = np.nonzero(is_param)[0]
    if len(listed) != len(params) or np.any(listed != params):
        m = min(len(listed), len(params))
        diff = np.nonzero(listed[:m] != params[:m])[0]
        k = int(diff[0]) if len(diff) else m
        if k < len(params) and not is_param[params[k]]:
            node, what = int(params[k]), f"is params[{k}] but not a PARAM node"
        else:
            node = int(listed[k])
            given = f"node {int(params[k])}" if k < len(params) else "missing"
            what = f"is PARAM node #{k} in node order but params[{k}] is {given}"
        raise _fail(fname, node, ops.get_op(int(func.kind[node])).name, what,
                    "params list every PARAM node in order")
    seen: set[str] = set()
    for pos, pname in enumerate(func.param_names):  # one step per parameter
        if not isinstance(pname, str) or not pname.isidentifier() or pname in seen:
            node = int(params[pos])
            raise _fail(fname, node, "param", f"parameter name {pname!r} is not a unique "
                        "identifier", "param names")
        seen.add(pname)
    bad = np.nonzero(func.a0[params] != np.arange(len(params), dtype=np.int32))[0]
    if len(bad):
        node = int(params[bad[0]])
        raise _fail(fname, node, "param", f"has position {int(func.a0[node])}, expected "
                    f"{int(bad[0])}", "param positions")
    if not len(func.outputs):
        raise _fail(fname, None, None, "no outputs", "outputs")
    bad = np.nonzero((func.outputs < 0) | (func.outputs >= n))[0]
    if len(bad):
        raise _fail(fname, None, None, f"output {int(bad[0])} is node "
                    f"{int(func.outputs[bad[0]])}, not in [0, {n})", "outputs")


class _TypeRule:
    """Evaluates one node's op rule for the type sweep (``type_of``)."""

    def __init__(self, fname: str, func: Function, mod: IRModule | None) -> None:
        self.fname, self.func, self.mod = fname, func, mod

    def operands(self, i: int, opdef: ops.OpDef) -> list[int]:
        f = self.func
        return operand_list(opdef.encoding, int(f.a0[i]), int(f.a1[i]), f.extra)

    def __call__(self, i: int) -> tuple[int, int]:
        f = self.func
        opdef = ops.get_op(int(f.kind[i]))
        record = f.attr_table[int(f.attr_id[i])]
        try:
            normalized = opdef.normalize_attrs(dict(record))
        except TypeError as exc:
            raise _fail(self.fname, i, opdef.name, str(exc), "attributes") from None
        if normalized != record:
            raise _fail(self.fname, i, opdef.name, f"attributes {dict(record)} are not the op's "
                        f"normalized set {dict(normalized)}", "attributes")
        operands = self.operands(i, opdef)
        symbols = f.shapes.symbols
        if symbols:
            types = [(int(f.dtype[v]), f.shapes.decode(int(f.shape_id[v]))) for v in operands]
        else:
            types = [(int(f.dtype[v]), f.shapes[int(f.shape_id[v])]) for v in operands]
        try:
            attrs = dict(record)
            if symbols:
                refuse_symbolic(opdef, types)
                attrs = map_dims_attrs(opdef, attrs, symbols.dim)
            code, shape = opdef.infer(types, attrs)
        except TypeInferenceError as exc:
            args = ", ".join(f"%{v}: {_type_str(*t)}" for v, t in zip(operands, types))
            raise _fail(self.fname, i, opdef.name, f"{exc} (operands {args})",
                        "dtype and shape rule") from None
        if symbols:
            found = lookup_shape(symbols, shape)
            return code, -2 if found is None else f.shapes.index.get(found, -2)
        if opdef.opcode == ops.OP_CALL_FUNC and self.mod is not None:
            self.check_call(i, dict(record), types, (code, shape))
        if opdef.opcode == ops.OP_CALL_TIR and self.mod is not None:
            self.check_call_tir(i, dict(record), types, (code, shape))
        return code, f.shapes.index.get(shape, -2)

    def check_call(self, i: int, attrs: dict[str, Any], types: list[tuple[int, tuple[int, ...]]],
                   result: tuple[int, tuple[int, ...]]) -> None:
        assert self.mod is not None
        callee = attrs["callee"]
        target = self.mod.functions.get(callee)
        if not isinstance(target, Function):
            what = "does not exist" if target is None else "is not a graph Function"
            raise _fail(self.fname, i, "call_func", f"callee {callee!r} {what}", "call targets")
        want = [(int(target.dtype[p]), target.shapes[int(target.shape_id[p])])
                for p in target.params]
        if want != types:
            raise _fail(self.fname, i, "call_func", "arguments (" + ", ".join(
                _type_str(*t) for t in types) + f") do not match {callee}'s params (" + ", ".join(
                _type_str(*t) for t in want) + ")", "call signature")
        outs = [(int(target.dtype[o]), target.shapes[int(target.shape_id[o])])
                for o in target.outputs]
        if outs != [result]:
            raise _fail(self.fname, i, "call_func", f"result {_type_str(*result)} does not match "
                        f"{callee}'s outputs (" + ", ".join(_type_str(*t) for t in outs) + ")",
                        "call signature")


    def check_call_tir(self, i: int, attrs: dict[str, Any],
                       types: list[tuple[int, tuple[int, ...]]],
                       result: tuple[int, tuple[int, ...]]) -> None:
        """The callee is a PrimFunc of the module whose buffers are the operands, then the
        result (static shapes, destination passing)."""
        assert self.mod is not None
        callee = attrs["callee"]
        target = self.mod.functions.get(callee)
        if not getattr(target, "_irkernel_prim_func", False):
            what = "does not exist" if target is None else "is not a tir.PrimFunc"
            raise _fail(self.fname, i, "call_tir", f"callee {callee!r} {what}", "call targets")
        params = target.params  # type: ignore[union-attr]
        if len(params) != len(types) + 1:
            raise _fail(self.fname, i, "call_tir", f"{len(types)} operands + 1 result, but "
                        f"{callee} has {len(params)} parameters", "call_tir signature")
        tensors = [(DTYPE_NAMES[c], tuple(shape)) for c, shape in [*types, result]]
        _, problem = bind_call_tir(params, tensors)
        if problem is not None:
            raise _fail(self.fname, i, "call_tir", f"{callee} {problem.describe()}",
                        "call_tir signature")


def _check_types(fname: str, func: Function, mod: IRModule | None) -> None:
    rule = _TypeRule(fname, func, mod)
    bad = SignatureTable().sweep(
        func.kind, func.a0, func.a1, func.extra, func.attr_id, func.dtype.copy(),
        func.shape_id.copy(), func.consts.dtype, func.consts.shape_id, 0, True, rule)
    if bad < 0:
        return
    opdef = ops.get_op(int(func.kind[bad]))
    got = _type_str(int(func.dtype[bad]), func.shapes.decode(int(func.shape_id[bad])))
    if opdef.opcode == ops.OP_CONST:
        cid = int(func.a0[bad])
        want = _type_str(int(func.consts.dtype[cid]), func.shapes[int(func.consts.shape_id[cid])])
    else:
        code, sid = rule(bad)
        want = _type_str(code, func.shapes.decode(sid)) if sid >= 0 else "a shape not in the table"
    raise _fail(fname, bad, opdef.name, f"declared type {got} differs from the inferred {want}",
                "dtype and shape rule")


#: Functions known to pass every check that does not depend on their module: verified
#: here, or finished by GraphBuilder (which infers or checks every node's type as it
#: appends it). Functions are immutable, so the fact never goes stale; weak, so it goes
#: with the Function. Functions with call nodes are never in it (their calls are checked
#: against the module each time).
_VERIFIED: weakref.WeakSet[Function] = weakref.WeakSet()


def is_verified(func: Function) -> bool:
    """Whether ``func`` is known to pass the module-independent checks."""
    return func in _VERIFIED


def mark_verified(func: Function) -> None:
    """Record that ``func`` passes the module-independent checks (see ``_VERIFIED``)."""
    kind = func.kind
    if not np.any((kind == ops.OP_CALL_FUNC) | (kind == ops.OP_CALL_TIR)):
        _VERIFIED.add(func)


def check_node_type(func: Function, node: int, name: str = "main", where: str = "") -> None:
    """The dtype and shape rule of one node (rule 5 of the module docstring), alone.

    For code that evaluates or lowers one node at a time from its attributes and
    types (FoldConstant's tensor path, LegalizeOps per signature) on a Function
    that passed the cheap validation but may not verify: its attribute set must be
    its op's own normalized record and its declared type the rule's result, else
    an IRError naming ``where``, the function, the node and the rule (never a
    KeyError from an attribute the op expects). ``func`` must be validated.
    """
    rule = _TypeRule(name, func, None)
    try:
        code, sid = rule(node)
    except IRError as exc:
        raise IRError(f"{where}: {exc}" if where else str(exc)) from None
    if code != int(func.dtype[node]) or sid != int(func.shape_id[node]):
        opdef = ops.get_op(int(func.kind[node]))
        got = _type_str(int(func.dtype[node]), func.shapes[int(func.shape_id[node])])
        want = _type_str(code, func.shapes[sid]) if sid >= 0 else "a shape not in the table"
        exc = _fail(name, node, opdef.name, f"declared type {got} differs from the inferred "
                    f"{want}", "dtype and shape rule")
        raise IRError(f"{where}: {exc}" if where else str(exc))


def verify_function(func: Function, name: str = "main", mod: IRModule | None = None) -> None:
    """Check one graph Function; ``mod`` enables the call_func checks."""
    if not isinstance(func, Function):
        raise IRError(f"{name}: expected a graph Function, got {type(func).__name__}")
    if func not in _VERIFIED:
        _check_columns(name, func)
        _check_tables(name, func)
        _check_structure(name, func)
        _check_params_outputs(name, func)
        # The cheap check of every entry (a subset of the above, so it rarely speaks here);
        # it also remembers the Function, so passes and the interpreter skip it afterwards.
        validate_function(func, "", name)
        _check_types(name, func, mod)
        mark_verified(func)
    _check_symbol(name, func, mod)  # depends on the name the module gives it: every time


def _check_symbol(name: str, func: Function, mod: IRModule | None) -> None:
    """``global_symbol``: absent, or a str naming the function; ``main`` has one."""
    problem = symbol_problem(name if mod is not None else None, func)
    if problem is not None:
        raise _fail(name, None, None, problem, "global_symbol")


def _check_call_graph(mod: IRModule) -> None:
    """The call_func graph is acyclic (iterative DFS over functions, not nodes)."""
    edges: dict[str, list[str]] = {}
    first_call: dict[tuple[str, str], int] = {}  # (caller, callee) -> first call node
    for name, func in mod.functions.items():
        if isinstance(func, Function):
            nodes = np.nonzero(func.kind == ops.OP_CALL_FUNC)[0]
            ids, first = np.unique(func.attr_id[nodes], return_index=True)
            callees = set()
            for a, i in zip(ids.tolist(), first.tolist(), strict=True):  # per call attr set
                key = (name, func.attr_table.as_dict(a)["callee"])
                node = int(nodes[i])
                if node < first_call.get(key, node + 1):
                    first_call[key] = node
                callees.add(key[1])
            edges[name] = sorted(callees)
    state: dict[str, int] = {}
    for root in edges:
        if state.get(root):
            continue
        stack = [(root, iter(edges[root]))]
        path = [root]
        state[root] = 1
        while stack:
            fname, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[fname] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                cycle = " -> ".join([*path[path.index(nxt):], nxt])
                raise _fail(fname, first_call[fname, nxt], "call_func",
                            f"calls {nxt}, closing the recursive cycle {cycle}",
                            "call graph is acyclic")
            elif not state.get(nxt) and nxt in edges:
                state[nxt] = 1
                stack.append((nxt, iter(edges[nxt])))
                path.append(nxt)


def verify(obj: IRModule | Function | Any, name: str = "main") -> None:
    """Check every invariant of a module, a lone Function or a lone tir.PrimFunc; raise
    IRError on the first break.

    Parameters
    ----------
    obj : IRModule, Function or tir.PrimFunc
    name : str
        The name used in messages for a lone Function or PrimFunc.

    Raises
    ------
    IRError
        Naming the function, node id, op and rule that failed.
    """
    if isinstance(obj, Function):
        verify_function(obj, name)
        return
    if getattr(obj, "_irkernel_prim_func", False):
        obj.verify(str(obj.attrs.get("global_symbol", name)))
        return
    if not isinstance(obj, IRModule):
        raise TypeError("verify: expected an IRModule, Function or PrimFunc, got "
                        f"{type(obj).__name__}")
    for fname, func in obj.functions.items():
        if isinstance(func, Function):
            verify_function(func, fname, obj)
        elif hasattr(func, "verify"):
            func.verify(fname)
        else:
            raise IRError(f"{fname}: {type(func).__name__} is not a Function or PrimFunc")
    _check_call_graph(obj)

