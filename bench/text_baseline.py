"""The text printer and parser as they were before the byte-level rewrite (commit 174600c).

The baseline of ``bench/bench_text.py``: the previous version, timed in the same
run as the current one. Printer: one f-string per node over ``.tolist()``
columns; parser: one regex match per line into a pending batch of columns.
Copied verbatim except that the printer does not install the IR's print hooks
(the current printer keeps them) and shares the current formatting helpers.
"""

from __future__ import annotations

import re
from array import array
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.builder import GraphBuilder
from irkernel.ir.errors import ParseError
from irkernel.ir.function import Function
from irkernel.ir.ids import (
    DTYPE_NAMES,
    ENC_BINARY,
    ENC_CONST,
    ENC_PARAM,
    ENC_UNARY,
    NONE,
    numpy_dtype,
)
from irkernel.ir.module import IRModule
from irkernel.text.lexer import (
    NOT_FAST,
    Cursor,
    Token,
    attr_dict,
    const_array,
    const_literals,
    describe,
    fast_literal,
    operand_tokens,
    parse_type,
    string_value,
)
from irkernel.text.printer import (
    _const_literals,
    format_function_attrs,
    format_name,
    format_node_attrs,
    format_type,
)

_NAME = r"(\w+)"
_TYPE = r"([a-z0-9]+\[[0-9, ]*\])"
_END = r"[ \t\r]*(?:\#.*)?\Z"
# The printer's node form: %name = op %a, %b [{attrs without nested braces}] : type
_FAST_NODE = re.compile(
    r"[ \t]*%" + _NAME + r"[ \t]*=[ \t]*([^\W\d]\w*)[ \t]+(%\w+(?:[ \t]*,[ \t]*%\w+)*)"
    r"[ \t]*(\{[^{}\"#]*(?:\"(?:[^\"\\]|\\.)*\"[^{}\"#]*)*\})?[ \t]*:[ \t]*" + _TYPE + _END)
# A one-literal constant: %name = const literal : type
_FAST_CONST = re.compile(
    r"[ \t]*%" + _NAME + r"[ \t]*=[ \t]*const[ \t]+"
    r"(-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|-inf|inf|nan|true|false)"
    r"[ \t]*:[ \t]*" + _TYPE + _END)
# Below this many pending nodes, GraphBuilder.call per node beats one add_nodes call.
_SMALL_BATCH = 32

# ---------------------------------------------------------------------------
# functions
# ---------------------------------------------------------------------------

class _Pending:
    """Nodes parsed on the fast path and not yet in the builder (one batch, as columns).

    Arrays are cleared in place so that the hot loop can keep their bound
    ``append`` methods. Constant nodes get their const ids when the batch is
    flushed; ``consts`` holds (position in batch, dtype code, Python value).
    """

    __slots__ = ("a0", "a1", "attr_id", "consts", "extra", "kind")

    def __init__(self) -> None:
        self.kind = array("h")
        self.a0 = array("i")
        self.a1 = array("i")
        self.attr_id = array("i")
        self.extra = array("i")
        self.consts: list[tuple[int, int, Any]] = []

    def clear(self) -> None:
        for col in (self.kind, self.a0, self.a1, self.attr_id, self.extra):
            del col[:]
        self.consts.clear()


class _FunctionParser:
    """State while one function body is parsed: the builder, names and declared types.

    Design: lines in the printer's form are matched by one regex each and
    appended to a :class:`_Pending` batch that goes to ``GraphBuilder.add_nodes``
    (typed by the builder's Numba sweep) or, for a batch too small to pay for
    that call, to ``GraphBuilder.call`` one node at a time. Any other line
    first flushes the batch, then goes through the tokenizer. When a flush
    fails, the batch's lines are replayed through the tokenizer path, which
    raises the error with its exact position. Alternatives considered: calling
    ``GraphBuilder.call`` per fast line (simpler, about 2x slower).
    """

    def __init__(self, name: str, attrs: dict[str, Any], header_line: int,
                 brace_col: int) -> None:
        self.name = name
        self.bb = GraphBuilder(name, private=True, attrs=attrs)
        self.header_line = header_line
        self.brace_col = brace_col
        self.names: dict[str, int] = {}
        self.node_line = array("i")  # line number of each node (errors only)
        self.declared = array("i")  # index into type_code/type_shape_id per node
        self.type_cache: dict[str, int] = {}  # type text -> index
        self.type_code: list[int] = []
        self.type_shape_id: list[int] = []
        self.type_shape: list[tuple[int, ...]] = []
        # (op, attribute text or None) -> (opcode, encoding, arity, attr_id); seen ones only
        self.node_forms: dict[tuple[str, str | None], tuple[int, int, int, int]] = {}
        self.attr_kwargs: dict[int, dict[str, Any]] = {}  # attr_id -> keywords
        self.outputs: list[int] | None = None
        self.pending = _Pending()

    # -- shared by the fast and the careful path ---------------------------
    def type_index(self, key: str, code: int, shape: tuple[int, ...]) -> int:
        idx = self.type_cache.get(key)
        if idx is None:
            idx = self.type_cache[key] = len(self.type_code)
            self.type_code.append(code)
            self.type_shape_id.append(self.bb.intern_shape(shape))
            self.type_shape.append(shape)
        return idx

    def define(self, name: str, node: int, type_idx: int, lineno: int) -> None:
        self.names[name] = node
        self.declared.append(type_idx)
        self.node_line.append(lineno)

    def lookup(self, tok: Token, lineno: int) -> int:
        node = self.names.get(tok[1][1:])
        if node is None:
            raise ParseError(f"unknown value {tok[1]} (not defined on an earlier line)",
                             lineno, tok[2])
        return node

    def check_new(self, tok: Token, lineno: int) -> str:
        name = tok[1][1:]
        if name in self.names:
            first = self.node_line[self.names[name]]
            raise ParseError(f"redefinition of {tok[1]} (first defined on line {first})",
                             lineno, tok[2])
        return name

    # -- the hot loop -------------------------------------------------------
    def parse_body(self, lines: list[str], start: int) -> int:
        """Parse lines from ``start`` up to the closing ``}``; returns the next line index."""
        try:
            return self._body_loop(lines, start)
        except ParseError as exc:
            error = exc
        # An earlier declared-type mismatch is the first problem in text order.
        mismatch = self.type_mismatch(lines, None)
        raise mismatch or error

    def _body_loop(self, lines: list[str], i: int) -> int:  # noqa: C901 (the hot loop)
        fast_node, fast_const = _FAST_NODE.match, _FAST_CONST.match
        names, forms, type_cache = self.names, self.node_forms, self.type_cache
        type_code, type_shape = self.type_code, self.type_shape  # appended to in place
        declared, node_line = self.declared.append, self.node_line.append
        p = self.pending
        p_kind, p_a0, p_a1, p_attr = p.kind.append, p.a0.append, p.a1.append, p.attr_id.append
        p_extra, p_consts = p.extra.extend, p.consts.append
        n_nodes, open_body, n_lines = len(self.bb), True, len(lines)
        while i < n_lines:
            line = lines[i]
            i += 1
            m = fast_node(line) if open_body else None
            if m is not None:
                name, op, args, attr_text, type_text = m.groups()
                form = forms.get((op, attr_text))
                tidx = type_cache.get(type_text)
                if form is not None and tidx is not None and name not in names:
                    try:
                        if "," in args:
                            ids = [names[a.strip()[1:]] for a in args.split(",")]
                        else:
                            ids = [names[args[1:]]]
                    except KeyError:
                        ids = None
                    opcode, enc, arity, attr_id = form
                    if ids is not None and (arity < 0 or len(ids) == arity):
                        p_kind(opcode)
                        p_attr(attr_id)
                        if enc == ENC_BINARY:
                            p_a0(ids[0])
                            p_a1(ids[1])
                        elif enc == ENC_UNARY:
                            p_a0(ids[0])
                            p_a1(NONE)
                        else:
                            p_a0(len(p.extra))
                            p_a1(len(ids))
                            p_extra(ids)
                        names[name] = n_nodes
                        n_nodes += 1
                        declared(tidx)
                        node_line(i)
                        continue
            m = fast_const(line) if open_body else None
            if m is not None:
                name, text, type_text = m.groups()
                tidx = type_cache.get(type_text)
                if tidx is not None and name not in names and not type_shape[tidx]:
                    code = type_code[tidx]
                    value = fast_literal(text, code)
                    if value is not NOT_FAST:
                        p_consts((len(p.kind), code, value))
                        p_kind(ops.OP_CONST)
                        p_a0(NONE)
                        p_a1(NONE)
                        p_attr(0)
                        names[name] = n_nodes
                        n_nodes += 1
                        declared(tidx)
                        node_line(i)
                        continue
            if not line or line.isspace():
                continue
            self.flush(lines, i - 1)
            if self._statement(line, i):
                return i
            n_nodes, open_body = len(self.bb), self.outputs is None
        self.flush(lines, n_lines)
        raise ParseError(f"function @{self.name}: '{{' is never closed (end of input reached "
                         "before '}')", self.header_line, self.brace_col)

    # -- batches --------------------------------------------------------------
    def flush(self, lines: list[str], stop: int) -> None:
        """Move the pending batch into the builder; ``stop`` is the index of the next line."""
        p = self.pending
        if not len(p.kind):
            return
        try:
            if len(p.kind) < _SMALL_BATCH:
                self._flush_each(p)
            else:
                self._flush_bulk(p)
        except (TypeError, ValueError, OverflowError) as exc:
            error = exc
        else:
            p.clear()
            return
        p.clear()
        self._replay(lines, len(self.bb), stop, error)

    def _flush_each(self, p: _Pending) -> None:
        bb = self.bb
        consts = {pos: (code, value) for pos, code, value in p.consts}
        extra = p.extra.tolist()
        for j, (k, x, y, aid) in enumerate(zip(p.kind.tolist(), p.a0.tolist(), p.a1.tolist(),
                                               p.attr_id.tolist(), strict=True)):
            if k == ops.OP_CONST:
                code, value = consts[j]
                bb.const(np.array(value, numpy_dtype(code)))
                continue
            enc = ops.get_op(k).encoding
            args = (x, y) if enc == ENC_BINARY else (x,) if enc == ENC_UNARY else extra[x: x + y]
            bb.call(k, *args, **self.attr_kwargs[aid])

    def _flush_bulk(self, p: _Pending) -> None:
        a0 = np.frombuffer(p.a0, np.int32).copy()
        by_code: dict[int, list[tuple[int, Any]]] = {}
        for pos, code, value in p.consts:  # one per scalar constant
            by_code.setdefault(code, []).append((pos, value))
        for code, items in by_code.items():
            values = np.array([v for _, v in items], numpy_dtype(code))
            a0[[pos for pos, _ in items]] = self.bb.add_scalar_consts(values, code)
        self.bb.add_nodes(np.frombuffer(p.kind, np.int16).copy(), a0,
                          np.frombuffer(p.a1, np.int32).copy(),
                          attr_id=np.frombuffer(p.attr_id, np.int32).copy(),
                          extra=np.frombuffer(p.extra, np.int32).copy())

    def _replay(self, lines: list[str], first: int, stop: int, error: Exception) -> None:
        """Re-parse the lines of a failed batch from node ``first`` on; always raises."""
        for name in [k for k, v in self.names.items() if v >= first]:
            del self.names[name]
        start_line = self.node_line[first]
        del self.declared[first:]
        del self.node_line[first:]
        for idx in range(start_line - 1, stop):
            self._statement(lines[idx], idx + 1)  # raises at the failing line
        raise self.type_mismatch(lines, None) or ParseError(str(error), start_line, 1)

    # -- the careful path ---------------------------------------------------
    def _statement(self, line: str, lineno: int) -> bool:
        """Parse one body line with the tokenizer; True when it closed the function."""
        cur = Cursor(line, lineno)
        tok = cur.peek()
        if tok[0] == "eol":
            return False
        if tok == ("punct", "}", tok[2]):
            cur.take()
            cur.expect_end()
            if self.outputs is None:
                raise cur.error(f"function @{self.name} has no return statement", tok)
            return True
        if self.outputs is not None:
            raise cur.error("statement after return (return must be the last statement)")
        if tok[0] == "ident" and tok[1] == "return":
            cur.take()
            args = operand_tokens(cur)
            if not args:
                raise cur.error("return needs at least one value like %0")
            cur.expect_end()
            self.outputs = [self.lookup(a, lineno) for a in args]
            return False
        if tok[0] != "var":
            raise cur.error("expected a statement ('%name = ...', 'return ...' or '}'), "
                            f"got {describe(tok)}")
        self._definition(cur)
        return False

    def _definition(self, cur: Cursor) -> None:
        lineno = cur.lineno
        name = self.check_new(cur.take(), lineno)
        cur.expect("=", f"after %{name}")
        op_tok = cur.expect_kind("ident", "an op name")
        if op_tok[1] == "param":
            self._param(cur, name)
        elif op_tok[1] == "const":
            self._const(cur, name)
        else:
            self._op_node(cur, name, op_tok)

    def _typed_end(self, cur: Cursor) -> tuple[int, tuple[int, ...], int]:
        """``: type`` then end of line; returns (code, shape, type index)."""
        cur.expect(":", "before the type")
        code, shape, tok = parse_type(cur)
        key = cur.slice_from(tok)
        cur.expect_end()
        return code, shape, self.type_index(key, code, shape)

    def _param(self, cur: Cursor, name: str) -> None:
        ptok = cur.expect_kind("ident", "a parameter name")
        code, shape, tidx = self._typed_end(cur)
        try:
            node = self.bb.param(ptok[1], shape, DTYPE_NAMES[code])
        except (TypeError, ValueError) as exc:
            raise cur.error(str(exc), ptok) from None
        self.define(name, node, tidx, cur.lineno)

    def _const(self, cur: Cursor, name: str) -> None:
        lits, is_list = const_literals(cur)
        code, shape, tidx = self._typed_end(cur)
        value = const_array(lits, is_list, code, shape, cur.lineno)
        col = lits[0][2] if lits else cur.toks[0][2]
        try:
            node = self.bb.const(value)
        except (TypeError, ValueError) as exc:  # defensive: the literals were checked
            raise ParseError(str(exc), cur.lineno, col) from None
        self.define(name, node, tidx, cur.lineno)

    def _op_node(self, cur: Cursor, name: str, op_tok: Token) -> None:
        lineno = cur.lineno
        try:
            opdef = ops.get_op(op_tok[1])
        except ValueError:
            raise cur.error(f"unknown op {op_tok[1]!r}", op_tok) from None
        ids = [self.lookup(a, lineno) for a in operand_tokens(cur)]
        attr_key: str | None = None
        kw: dict[str, Any] = {}
        open_tok = cur.accept("{")
        if open_tok is not None:
            kw = attr_dict(cur, node_attrs=True)
            attr_key = cur.slice_from(open_tok)
        _, _, tidx = self._typed_end(cur)
        try:
            node = self.bb.call(op_tok[1], *ids, **kw)
        except (TypeError, ValueError, OverflowError) as exc:
            message = str(exc)
            if not message.startswith(opdef.name):
                message = f"{opdef.name}: {message}"
            raise cur.error(message, op_tok) from None
        self.define(name, node, tidx, lineno)
        if (opdef.name, attr_key) not in self.node_forms:  # teach the fast path this form
            attr_id = self.bb.intern_attrs(opdef.opcode, **kw)
            self.attr_kwargs[attr_id] = kw
            self.node_forms[(opdef.name, attr_key)] = (opdef.opcode, opdef.encoding,
                                                       opdef.arity, attr_id)

    # -- finishing ----------------------------------------------------------
    def type_mismatch(self, lines: list[str], func: Function | None) -> ParseError | None:
        """The error for the first node whose declared type differs from the inferred one."""
        if func is None:
            if not len(self.bb):
                return None
            func = self.bb.finish([0])  # freezes the nodes so far (error path only)
        n = min(func.num_nodes, len(self.declared))
        declared = np.frombuffer(self.declared, np.int32)[:n]
        codes = np.array(self.type_code, np.int8)[declared]
        sids = np.array(self.type_shape_id, np.int32)[declared]
        bad = np.flatnonzero((codes != func.dtype[:n]) | (sids != func.shape_id[:n]))
        del declared  # release the buffer export of self.declared
        if not len(bad):
            return None
        node = int(bad[0])
        lineno = self.node_line[node]
        toks = Cursor(lines[lineno - 1], lineno).toks
        colon = max(j for j, t in enumerate(toks) if t[:2] == ("punct", ":"))
        want = format_type(int(codes[node]), func.shapes[int(sids[node])])
        got = format_type(int(func.dtype[node]), func.shapes[int(func.shape_id[node])])
        return ParseError(f"declared type {want} of {toks[0][1]} differs from the inferred "
                          f"type {got} ({func.op(node).name})", lineno, toks[colon + 1][2])

    def finish(self, lines: list[str]) -> Function:
        """The finished Function; ParseError when a declared type was wrong."""
        assert self.outputs is not None
        func = self.bb.finish(self.outputs)
        mismatch = self.type_mismatch(lines, func)
        if mismatch is not None:
            raise mismatch
        return func


def _header(cur: Cursor) -> tuple[str, Token, dict[str, Any], Token]:
    """``@name = graph [attrs {...}] {`` -> (name, name token, attrs, brace token)."""
    tok = cur.take()
    text = tok[1][1:]
    name = string_value(cur, (tok[0], text, tok[2] + 1)) if text.startswith('"') else text
    if not name:
        raise cur.error("function name must not be empty", tok)
    cur.expect("=", f"after @{name}")
    kind = cur.peek()
    if kind[1] != "graph":
        raise cur.error(f"expected 'graph' (the only function kind the parser reads), "
                        f"got {describe(kind)}")
    cur.take()
    attrs: dict[str, Any] = {}
    if cur.accept("attrs") is not None:
        cur.expect("{", "after 'attrs'")
        attrs = attr_dict(cur, node_attrs=False)
    brace = cur.expect("{", "to open the function body")
    cur.expect_end()
    return name, tok, attrs, brace


def parse(text: str) -> IRModule:
    """Parse the text format into an :class:`~irkernel.ir.module.IRModule`.

    Parameters
    ----------
    text : str
        A module as printed by ``mod.script()`` or written by hand (see the
        module docstring for the grammar).

    Returns
    -------
    IRModule
        The functions in text order; structurally equal to the printed module.

    Raises
    ------
    ParseError
        For any malformed input, with the 1-based ``line`` and ``column`` of the
        problem and a message naming it.

    Examples
    --------
    >>> mod = parse("@main = graph {\\n  %0 = param x : float32[]\\n  return %0\\n}\\n")
    >>> mod["main"].num_nodes
    1
    """
    if not isinstance(text, str):
        raise TypeError(f"parse: text must be a str, got {type(text).__name__}")
    lines = text.split("\n")
    functions: dict[str, Function] = {}
    module_attrs: dict[str, Any] | None = None
    i = 0
    while i < len(lines):
        cur = Cursor(lines[i], i + 1)
        i += 1
        tok = cur.peek()
        if tok[0] == "eol":
            continue
        if tok[0] == "glob" and tok[1].startswith("@T.prim_func"):
            raise cur.error("PrimFuncs (@T.prim_func) are not part of the text format: "
                            "ik.parse reads graph functions only; rebuild a PrimFunc by "
                            "running its printed script with T = irkernel.tir.script "
                            "(see docs/tir.md)", tok)
        if tok[0] == "glob":
            name, name_tok, attrs, brace = _header(cur)
            if name in functions:
                raise cur.error(f"redefinition of function @{name}", name_tok)
            body = _FunctionParser(name, attrs, i, brace[2])
            i = body.parse_body(lines, i)
            functions[name] = body.finish(lines)
        elif tok[1] == "module" and tok[0] == "ident":
            if module_attrs is not None or functions:
                raise cur.error("'module attrs' must come once, before the functions")
            cur.take()
            cur.expect("attrs", "after 'module'")
            cur.expect("{", "after 'attrs'")
            module_attrs = attr_dict(cur, node_attrs=False)
            cur.expect_end()
        else:
            raise cur.error(f"expected a function ('@name = graph {{') or 'module attrs', "
                            f"got {describe(tok)}")
    return IRModule(functions, module_attrs)


# ---------------------------------------------------------------------------
# the printer
# ---------------------------------------------------------------------------

def _tails(func: Function) -> list[str]:
    """Per node: `` {attrs} : type``, computed once per distinct (op, attrs, type)."""
    n_ops, n_shapes = ops.num_ops(), max(len(func.shapes), 1)
    n_attrs = max(len(func.attr_table), 1)
    if n_attrs * n_ops * n_shapes * len(DTYPE_NAMES) < 2**62:
        key = ((func.attr_id.astype(np.int64) * n_ops + func.kind) * n_shapes
               + func.shape_id) * len(DTYPE_NAMES) + func.dtype
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    else:  # astronomically large tables: unique rows instead of one packed key
        cols = np.stack([func.attr_id, func.kind, func.shape_id, func.dtype]).T.astype(np.int64)
        _, first, inverse = np.unique(cols, axis=0, return_index=True, return_inverse=True)
    texts = []
    attr_cache: dict[tuple[int, int], str] = {}
    for i in first.tolist():  # one per distinct tail
        kind, attr_id = int(func.kind[i]), int(func.attr_id[i])
        attrs = attr_cache.get((kind, attr_id))
        if attrs is None:
            attrs = attr_cache[(kind, attr_id)] = format_node_attrs(
                ops.get_op(kind), func.attr_table[attr_id])
        texts.append(attrs + " : " + format_type(int(func.dtype[i]),
                                                 func.shapes[int(func.shape_id[i])]))
    return np.array(texts, dtype=object)[inverse.ravel()].tolist()


def _node_lines(func: Function) -> list[str]:
    """One line per node, in node-id order."""
    op_names = [op.name for op in ops.all_ops()]
    encodings = [op.encoding for op in ops.all_ops()]
    tails = _tails(func)
    consts = _const_literals(func) if len(func.consts) else []
    names = func.param_names
    extra = func.extra.tolist()
    lines = []
    append = lines.append
    for i, (k, x, y, tail) in enumerate(zip(func.kind.tolist(), func.a0.tolist(),
                                            func.a1.tolist(), tails, strict=True)):
        enc = encodings[k]
        if enc == ENC_UNARY:
            append(f"  %{i} = {op_names[k]} %{x}{tail}")
        elif enc == ENC_BINARY:
            append(f"  %{i} = {op_names[k]} %{x}, %{y}{tail}")
        elif enc == ENC_CONST:
            append(f"  %{i} = const {consts[x]}{tail}")
        elif enc == ENC_PARAM:
            append(f"  %{i} = param {names[x]}{tail}")
        else:  # variadic
            args = ", ".join(f"%{v}" for v in extra[x: x + y])
            append(f"  %{i} = {op_names[k]}{' ' if args else ''}{args}{tail}")
    return lines


def print_function(func: Function, name: str) -> str:
    """The text of one graph function as ``@name = graph ... { ... }``.

    Parameters
    ----------
    func : Function
        The function to print.
    name : str
        Its name in the module (printed after ``@``).

    Returns
    -------
    str
        The function's text, ending with a newline.

    Raises
    ------
    TypeError
        A function attribute value that the format cannot spell (the message names
        the attribute).
    """
    attrs = f"attrs {format_function_attrs(func.attrs)} " if func.attrs else ""
    lines = [f"@{format_name(name)} = graph {attrs}{{"]
    lines.extend(_node_lines(func))
    lines.append("  return " + ", ".join(f"%{o}" for o in func.outputs.tolist()))
    lines.append("}")
    lines.append("")
    return "\n".join(lines)


def print_module(mod: IRModule) -> str:
    """The text of a module: its functions in order, separated by blank lines.

    A module with attributes starts with a ``module attrs {...}`` line. Values
    that are not graph Functions print through their own ``script(name)``.

    Raises
    ------
    TypeError
        A value with no ``script`` method (naming the function), or an
        unprintable attribute value (naming the attribute).
    """
    parts = []
    if mod.attrs:
        parts.append(f"module attrs {format_function_attrs(mod.attrs)}\n")
    for name, value in mod.functions.items():
        if isinstance(value, Function):
            parts.append(print_function(value, name))
        elif callable(getattr(value, "script", None)):
            parts.append(value.script(name).rstrip("\n") + "\n")
        else:
            raise TypeError(f"cannot print function {name!r}: {type(value).__name__} "
                            f"has no script(name) method")
    return "\n".join(parts)
