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

from collections.abc import Callable, Iterable, Iterator, Mapping
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
    """Every node under ``node`` (itself last), children before parents.

    A walk with its own stack: nested generators (``yield from`` per level) pass every
    node up through each of its ancestors, O(nodes x depth).
    """
    stack = [(node, children(node))]
    while stack:
        child = next(stack[-1][1], None)
        if child is None:
            yield stack.pop()[0]
        elif type(child) in _LEAVES or type(child) is Var:
            yield child
        else:
            stack.append((child, children(child)))


def free_vars(node: Node) -> dict[str, Var]:
    """Vars used in ``node`` but not bound inside it (loop vars, lets), by name, in order."""
    out: dict[str, Var] = {}
    bound: frozenset[str] = frozenset()
    _free(node, bound, out, set(), [bound])
    return out


# The walks below visit a shared node once per scope, not once per path to it: unrolled,
# vectorized and inlined code is a DAG whose paths outnumber its nodes by orders of
# magnitude. ``seen`` holds (node id, scope id); ``scopes`` keeps every scope set alive,
# so a scope's id is not reused by another one during the walk.

def _free(node: Node, bound: frozenset[str], out: dict[str, Var],
          seen: set[tuple[int, int]], scopes: list[frozenset[str]]) -> None:
    if isinstance(node, Var):
        if node.name not in bound:
            out.setdefault(node.name, node)
        return
    if type(node) in _LEAVES:
        return
    key = (id(node), id(bound))
    if key in seen:
        return
    seen.add(key)
    if isinstance(node, (Let, LetStmt, For)):
        var = node.var if isinstance(node, (Let, LetStmt)) else node.loop_var
        for part in (node.value,) if isinstance(node, (Let, LetStmt)) else (node.min,
                                                                              node.extent):
            _free(part, bound, out, seen, scopes)
        inner = bound | {var.name}
        scopes.append(inner)
        _free(node.body, inner, out, seen, scopes)
        return
    for child in children(node):
        _free(child, bound, out, seen, scopes)


def used_buffers(node: Node) -> dict[str, Buffer]:
    """Buffers loaded or stored in ``node`` but not allocated inside it, by name."""
    out: dict[str, Buffer] = {}
    allocated: frozenset[str] = frozenset()
    _buffers(node, allocated, out, set(), [allocated])
    return out


def _buffers(node: Node, allocated: frozenset[str], out: dict[str, Buffer],
             seen: set[tuple[int, int]], scopes: list[frozenset[str]]) -> None:
    if type(node) in _LEAVES or type(node) is Var:
        return
    key = (id(node), id(allocated))
    if key in seen:
        return
    seen.add(key)
    if isinstance(node, Allocate):
        inner = allocated | {node.buffer.name}
        scopes.append(inner)
        _buffers(node.body, inner, out, seen, scopes)
        return
    buf = getattr(node, "buffer", None)
    if isinstance(buf, Buffer) and buf.name not in allocated:
        out.setdefault(buf.name, buf)
    for child in children(node):
        if not isinstance(child, Buffer):
            _buffers(child, allocated, out, seen, scopes)


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


class MemoMutator(Mutator):
    """A Mutator whose result for a node depends on the node alone (no scope, no state
    the walk changes): each node object is rewritten once and its result reused.

    Why: unrolled copies, inlined lets and fused epilogues share subtrees (a DAG);
    without the memo a walk costs the tree's paths, and the copies it builds are
    distinct objects that every later pass walks again. Entries keep the node itself,
    so an id is never matched by a different, later object.
    """

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, Any]] = {}

    def visit(self, node: Any) -> Any:
        key = id(node)
        hit = self._memo.get(key)
        if hit is not None and hit[0] is node:
            return hit[1]
        out = Mutator.visit(self, node)
        self._memo[key] = (node, out)
        return out


class Substitute(MemoMutator):
    """Replace vars by expressions (capture-free: the verifier forbids shadowing)."""

    def __init__(self, mapping: Mapping[str, PrimExpr]) -> None:
        super().__init__()
        self.mapping = mapping

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.mapping.get(var.name, var)


def substitute(node: Any, mapping: Mapping[str, PrimExpr] | Mapping[Var, PrimExpr]) -> Any:
    """``node`` with each var (by name, or by Var key) replaced; ``node`` itself if none occurs."""
    by_name = {(k.name if isinstance(k, Var) else k): v for k, v in mapping.items()}
    if not by_name:
        return node
    return Substitute(by_name).visit(node)


class _SubstituteWithin(Substitute):
    """Substitute that returns the nodes outside ``dependent`` (ids) without walking them."""

    def __init__(self, mapping: Mapping[str, PrimExpr], dependent: set[int]) -> None:
        super().__init__(mapping)
        self.dependent = dependent

    def visit(self, node: Any) -> Any:
        return super().visit(node) if id(node) in self.dependent else node


def _using(node: Node, name: str) -> set[int]:
    """Ids of the nodes under ``node`` (itself included) that use a var named ``name``."""
    out: set[int] = set()
    seen: set[int] = set()

    def walk(n: Node) -> None:
        seen.add(id(n))
        if type(n) is Var:
            if n.name == name:
                out.add(id(n))
            return
        if type(n) in _LEAVES:
            return
        for child in children(n):
            if id(child) not in seen:
                walk(child)
            if id(child) in out:
                out.add(id(n))

    walk(node)
    return out


def substitute_each(node: Any, name: str, values: Iterable[PrimExpr]) -> list[Any]:
    """``node`` with the var ``name`` replaced by each of ``values``, one copy each.

    Why: an unrolled loop's copies differ only where the loop var occurs; the parts
    that do not use it are found once and shared by every copy, not walked per copy.
    Each copy is what ``substitute(node, {name: value})`` returns.
    """
    dependent = _using(node, name)
    return [_SubstituteWithin({name: v}, dependent).visit(node) for v in values]


def post_order_visit(node: Node, fn: Callable[[Node], None]) -> None:
    """Call ``fn`` on every node under ``node`` (TVM's ``post_order_visit``)."""
    for n in post_order(node):
        fn(n)


def loads(node: Node) -> Iterator[BufferLoad]:
    """Every BufferLoad under ``node``."""
    return (n for n in post_order(node) if isinstance(n, BufferLoad))


__all__ = ["MemoMutator", "Mutator", "Substitute", "children", "free_vars", "loads", "post_order",
           "post_order_visit", "substitute", "substitute_each", "used_buffers"]
