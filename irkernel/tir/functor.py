"""Generic traversal and rewriting of TIR trees.

``Mutator`` visits every expression and statement field of a node generically
(through the dataclass fields), so a pass overrides only the ``visit_<Class>``
methods it cares about. Rebuilding follows the tinygrad habit: a node whose
children all come back as the same objects is returned itself, so "did the
pass change anything?" is ``out is inp``. Recursion is safe: node
construction caps tree depth at ``expr.MAX_DEPTH``.
Imports the TIR node modules only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import _INIT_FIELDS, FloatImm, IntImm, Let, Node, PrimExpr, Var
from irkernel.tir.stmt import Allocate, For, LetStmt, Stmt


def _fields(node: Node) -> tuple[str, ...]:
    names = _INIT_FIELDS.get(type(node))
    return names if names is not None else type(node)._init_fields()


#: Field values that are never nodes (names, dtypes, lanes, flags): ``Mutator._field`` returns
#: them without the isinstance chain (the traversal is the hot loop of every TIR pass).
_ATOMS = frozenset({str, int, float, bool, type(None)})
#: Node classes without child nodes (exact types; the walkers below skip them outright).
_LEAVES = frozenset({IntImm, FloatImm})


def children(node: Node) -> Iterator[Node]:
    """Direct child nodes of ``node`` (expressions, statements, buffers), in field order."""
    for name in _fields(node):
        value = getattr(node, name)
        if type(value) in _ATOMS:
            continue
        if isinstance(value, Node):
            yield value
        elif isinstance(value, tuple):
            for v in value:
                if isinstance(v, Node):
                    yield v


def post_order(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself last), children before parents."""
    for child in children(node):
        yield from post_order(child)
    yield node


def free_vars(node: Node) -> dict[str, Var]:
    """Vars used in ``node`` but not bound inside it (loop vars, lets), by name, in order."""
    out: dict[str, Var] = {}
    _free(node, frozenset(), out)
    return out


def _free(node: Node, bound: frozenset[str], out: dict[str, Var]) -> None:
    if isinstance(node, Var):
        if node.name not in bound:
            out.setdefault(node.name, node)
        return
    if isinstance(node, (Let, LetStmt)):
        _free(node.value, bound, out)
        _free(node.body, bound | {node.var.name}, out)
        return
    if isinstance(node, For):
        _free(node.min, bound, out)
        _free(node.extent, bound, out)
        _free(node.body, bound | {node.loop_var.name}, out)
        return
    if type(node) in _LEAVES:
        return
    for child in children(node):
        _free(child, bound, out)


def used_buffers(node: Node) -> dict[str, Buffer]:
    """Buffers loaded or stored in ``node`` but not allocated inside it, by name."""
    out: dict[str, Buffer] = {}
    _buffers(node, frozenset(), out)
    return out


def _buffers(node: Node, allocated: frozenset[str], out: dict[str, Buffer]) -> None:
    if type(node) in _LEAVES or type(node) is Var:
        return
    if isinstance(node, Allocate):
        _buffers(node.body, allocated | {node.buffer.name}, out)
        return
    buf = getattr(node, "buffer", None)
    if isinstance(buf, Buffer) and buf.name not in allocated:
        out.setdefault(buf.name, buf)
    for child in children(node):
        if not isinstance(child, Buffer):
            _buffers(child, allocated, out)


class Mutator:
    """Rebuilds a TIR tree bottom-up; override ``visit_<ClassName>(node)`` to rewrite.

    The default for every class visits its expression, statement and buffer
    fields (including tuples of them) and returns the node itself when nothing
    changed. Call ``self.generic(node)`` from an override to recurse.
    """

    def visit(self, node: Any) -> Any:
        cls = type(self)
        # per-class dispatch table (in the class's own __dict__, so subclasses get their own
        # and a table dies with its class): saves building "visit_<Name>" for every node
        table = cls.__dict__.get("_dispatch")
        if table is None:
            table = {}
            cls._dispatch = table  # type: ignore[attr-defined]
        try:
            method = table[type(node)]
        except KeyError:
            method = table[type(node)] = getattr(cls, "visit_" + type(node).__name__, None)
        return method(self, node) if method is not None else self.generic(node)

    def visit_expr(self, expr: PrimExpr) -> PrimExpr:
        return self.visit(expr)

    def visit_stmt(self, stmt: Stmt) -> Stmt:
        return self.visit(stmt)

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        """Buffers are kept as they are (override to rewrite declarations)."""
        return buffer

    def _field(self, value: Any) -> Any:
        if type(value) in _ATOMS:
            return value
        if isinstance(value, Buffer):
            return self.visit_buffer(value)
        if isinstance(value, Node):
            return self.visit(value)
        if isinstance(value, tuple) and value and isinstance(value[0], Node):
            new = tuple(self._field(v) for v in value)
            return value if all(a is b for a, b in zip(new, value, strict=True)) else new
        return value

    def generic(self, node: Node) -> Any:
        changes = {}
        for name in _fields(node):
            old = getattr(node, name)
            new = self._field(old)
            if new is not old:
                changes[name] = new
        # the fields are the node's own and every value changed: skip replace()'s checks
        return node._rebuild(changes) if changes else node


class Substitute(Mutator):
    """Replace vars by expressions (capture-free: the verifier forbids shadowing)."""

    def __init__(self, mapping: Mapping[str, PrimExpr]) -> None:
        self.mapping = mapping
        # id -> (node, result): a subexpression shared by several parents (a DAG, as
        # FuseTIR's inlining makes) is rewritten once, not once per path to it
        self._memo: dict[int, tuple[Any, Any]] = {}

    def visit(self, node: Any) -> Any:
        hit = self._memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        out = super().visit(node)
        self._memo[id(node)] = (node, out)
        return out

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.mapping.get(var.name, var)


def substitute(node: Any, mapping: Mapping[str, PrimExpr] | Mapping[Var, PrimExpr]) -> Any:
    """``node`` with each var (by name, or by Var key) replaced; ``node`` itself if none occurs."""
    by_name = {(k.name if isinstance(k, Var) else k): v for k, v in mapping.items()}
    if not by_name:
        return node
    return Substitute(by_name).visit(node)


def post_order_visit(node: Node, fn: Callable[[Node], None]) -> None:
    """Call ``fn`` on every node under ``node`` (TVM's ``post_order_visit``)."""
    for n in post_order(node):
        fn(n)


def loads(node: Node) -> Iterator[BufferLoad]:
    """Every BufferLoad under ``node``."""
    return (n for n in post_order(node) if isinstance(n, BufferLoad))


__all__ = ["Mutator", "Substitute", "children", "free_vars", "loads", "post_order",
           "post_order_visit", "substitute", "used_buffers"]
