"""Parser of the text format: text to an IRModule of graph Functions.

Owns the grammar below and its error messages; the canonical spelling of
values lives in :mod:`irkernel.text.printer`. Nodes are built through
:class:`irkernel.GraphBuilder`, so the op table checks operands and
attributes and infers types exactly as for Python-built graphs. Imports numpy
and irkernel internals only.

The format
----------
::

    # comments run from '#' to end of line; blank lines are ignored
    @main = graph attrs {global_symbol = "main"} {
      %0 = param x : float32[4]
      %1 = const [0.0, 1.0, 2.0, 3.0] : float32[4]
      %2 = add %0, %1 : float32[4]
      %3 = sum %2 {axis = [0], keepdims = false} : float32[]
      %4 = call_func %2 {callee = "f", dtype = float32, shape = [4]} : float32[4]
      return %3, %4
    }

    @f = graph {
      %a = param a : float32[4]
      %special = const [nan, nan:0x7fc00001, -inf, -0.0] : float32[4]
      %mask = less %a, %special : bool[4]
      %b = where %mask, %a, %special : float32[4]   # %names: any, defined before use
      return %b
    }

The format is line oriented: one statement per line.

- A module is an optional ``module attrs {...}`` line followed by functions,
  each ``@name = graph [attrs {...}] {`` ... ``}``. ``name`` is
  ``[A-Za-z_][A-Za-z0-9_.]*`` or a JSON string (``@"any name"``).
- Function (and module) attribute values: ``"str"`` (JSON escapes), ints,
  floats (``repr`` spelling, ``nan``, ``inf``, ``-inf``), ``true``/``false``,
  ``none``, and flat lists ``[...]`` of those, which parse as tuples. Keys
  are identifiers or JSON strings.
- A node is ``%name = op operands [{attrs}] : type``. Operands are ``%name``
  separated by commas, defined on an earlier line (topological order).
  ``%name`` is any run of letters, digits and ``_``; nodes are numbered by
  order of definition. The printer always prints ``%<node id>``.
- ``%name = param NAME : type`` declares the next parameter of the signature.
- ``%name = const VALUE : type``: a one-element constant (any shape, including
  ``[1, 1]``) is one literal; larger ones are a flat row-major list ``[a, b]``
  (``[]`` for zero elements). Literals: ints, floats, ``nan``, ``inf``,
  ``-inf``, ``nan:0x<raw bits>`` (a NaN other than the dtype's ``np.nan``),
  ``true``/``false`` for bool.
- Node attributes are the op's keywords: ints, floats (``repr`` spelling,
  ``nan``, ``inf``, ``-inf``; read back exactly), ``true``/``false``, ``none``,
  int lists ``[0, 1]``, bare dtype names, ``"str"``. They go through
  ``GraphBuilder.call``, so defaults and checks are the op table's.
- A type is ``dtype[d0, d1, ...]``; ``float32[]`` is a scalar. The declared
  type of an op node must equal the inferred one.
- Symbolic dims: ``dim NAME in [LO, HI]`` (``HI`` may be ``inf``; ``dim NAME``
  alone is ``[1, inf]``) declares a shape variable before its first use; a dim
  of a type, or of a shape attribute (``reshape {shape = [batch, -1]}``), is then
  an expression of variables: sums, products by integers and floor-divisions by
  integers, ``float32[batch, 2*seq + 1, (h + 1) // 2]``. The printer writes the
  declarations first and each expression in its canonical form, so the text
  round-trips exactly (:mod:`irkernel.ir.symbols`). Such lines take the careful
  path.
- ``return %a, %b`` is the last statement of a body.

Speed: the text is scanned as UTF-8 bytes by Numba kernels
(:mod:`irkernel.text.scan`), which classify every line of a body, number its
nodes and resolve every name; node, constant (scalars and lists) and return lines in the
printer's form become whole columns for one ``GraphBuilder.add_nodes`` call per
run of such lines (types inferred by its Numba sweep). Op names, attribute
texts and types are parsed once per distinct text
(:mod:`irkernel.text.fastpath`); constant literals are read by kernels, their
decimal floats converted in one NumPy call (:mod:`irkernel.text.literals`). Any other line, and any run the builder
rejects, goes through a tokenizer that knows exact
columns, so every error is a :class:`~irkernel.ir.errors.ParseError` with a
1-based line and column. Declared types are checked against the inferred ones
in one vectorized comparison when the function ends (and before any later
error is reported, so the first problem in text order wins). Nothing recurses
per node.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.builder import GraphBuilder
from irkernel.ir.errors import ParseError
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES, ENC_BINARY, ENC_PARAM, ENC_UNARY
from irkernel.ir.module import IRModule
from irkernel.text.fastpath import BodyScan, Form, Lines, RunColumns
from irkernel.ir.symdim import DEFAULT_LOWER
from irkernel.text.lexer import (
    INT_LITERAL,
    Cursor,
    Token,
    attr_dict,
    const_array,
    const_literals,
    describe,
    operand_tokens,
    parse_type,
    string_value,
)
from irkernel.text.printer import format_type

# Below this many nodes in a run of fast lines, GraphBuilder.call per node beats one
# add_nodes call.
_SMALL_BATCH = 32

# ---------------------------------------------------------------------------
# functions
# ---------------------------------------------------------------------------

class _FunctionParser:
    """State while one function body is parsed: the builder, names and declared types.

    Design: :class:`~irkernel.text.fastpath.BodyScan` scans the whole body as
    bytes first (kernels): it numbers the nodes, resolves every name and
    marks the lines in the printer's forms whose op, attributes, type and
    literal parse (each distinct text parsed once, by the resolvers below).
    Runs of those lines go to ``GraphBuilder.add_nodes`` as whole columns
    (typed by the builder's Numba sweep) or, for a run too short to pay for
    that call, to ``GraphBuilder.call`` one node at a time. Every other line
    goes through the tokenizer (the careful path), which looks names up in the
    scan's table. When the builder rejects a run, its lines are replayed
    through the careful path, which raises the error with its exact position.
    Alternatives considered: one regex match per line feeding a pending batch
    (the previous design; 50-150k nodes/s, bound by per-line Python).
    """

    def __init__(self, name: str, attrs: dict[str, Any], header_line: int,
                 brace_col: int) -> None:
        self.name = name
        self.bb = GraphBuilder(name, private=True, attrs=attrs)
        self.header_line = header_line
        self.brace_col = brace_col
        self.scan: BodyScan | None = None
        self.late_names: dict[str, int] = {}  # definitions the scan did not record
        self.node_line = array("i")  # line number of each node (errors only)
        self.declared = array("i")  # index into type_code/type_shape_id per node
        self.type_cache: dict[str, int] = {}  # type text -> index
        self.type_code: list[int] = []
        self.type_shape_id: list[int] = []
        self.type_shape: list[tuple[int, ...]] = []
        self.attr_kwargs: dict[int, dict[str, Any]] = {}  # attr_id -> keywords
        self.outputs: list[int] | None = None

    # -- shared by the fast and the careful path ---------------------------
    def type_index(self, key: str, code: int, shape: tuple[int, ...]) -> int:
        idx = self.type_cache.get(key)
        if idx is None:
            idx = self.type_cache[key] = len(self.type_code)
            self.type_code.append(code)
            self.type_shape_id.append(self.bb.intern_shape(shape))
            self.type_shape.append(shape)
        return idx

    def _node_of(self, name: str) -> int:
        """The node of the body's first definition of ``name``, or -1. A name is in scope
        once its node is in the builder (``node < len(self.bb)``)."""
        node = self.scan.lookup(name) if self.scan is not None else -1
        return node if node >= 0 else self.late_names.get(name, -1)

    def define(self, name: str, node: int, type_idx: int, lineno: int) -> None:
        if self._node_of(name) != node:
            self.late_names[name] = node
        self.declared.append(type_idx)
        self.node_line.append(lineno)

    def lookup(self, tok: Token, lineno: int) -> int:
        node = self._node_of(tok[1][1:])
        if not 0 <= node < len(self.bb):
            raise ParseError(f"unknown value {tok[1]} (not defined on an earlier line)",
                             lineno, tok[2])
        return node

    def check_new(self, tok: Token, lineno: int) -> str:
        name = tok[1][1:]
        node = self._node_of(name)
        if 0 <= node < len(self.bb):
            raise ParseError(f"redefinition of {tok[1]} (first defined on line "
                             f"{self.node_line[node]})", lineno, tok[2])
        return name

    # -- resolvers of the fast path (one call per distinct text) -------------
    def _resolve_form(self, op_text: str, attr_text: str | None) -> Form | None:
        """(opcode, encoding, arity, attr_id) of an op with attribute text, or None."""
        try:
            opdef = ops.get_op(op_text)
            if opdef.encoding == ENC_PARAM or opdef.opcode == ops.OP_CONST:
                return None
            kw: dict[str, Any] = {}
            if attr_text is not None:
                cur = Cursor(attr_text, 0)
                cur.expect("{")
                kw = attr_dict(cur, node_attrs=True)
                cur.expect_end()
            attr_id = self.bb.intern_attrs(opdef.opcode, **kw)
        except (ParseError, TypeError, ValueError):
            return None  # the careful path reports it with its position
        self.attr_kwargs[attr_id] = kw
        return opdef.opcode, opdef.encoding, opdef.arity, attr_id

    def _resolve_type(self, text: str) -> int:
        """Type index of a type text, or -1."""
        idx = self.type_cache.get(text)
        if idx is None:
            try:
                cur = Cursor(text, 0)
                code, shape, _ = parse_type(cur)
                cur.expect_end()
                idx = self.type_index(text, code, shape)
            except (ParseError, TypeError, ValueError):
                return -1
        return idx

    # -- the body -------------------------------------------------------------
    def parse_body(self, lines: Lines, start: int) -> int:
        """Parse lines from ``start`` up to the closing ``}``; returns the next line index."""
        try:
            return self._body_loop(lines, start)
        except ParseError as exc:
            error = exc
        # An earlier declared-type mismatch is the first problem in text order.
        mismatch = self.type_mismatch(lines, None)
        raise mismatch or error

    def _body_loop(self, lines: Lines, first: int) -> int:
        scan = self.scan = BodyScan(lines, first, (
            self._resolve_form, self._resolve_type,
            lambda t: (self.type_code[t], self.type_shape[t])))
        pos, m = 0, len(scan.cls)
        for row in [*scan.careful_rows().tolist(), m]:  # one step per careful line
            if self.outputs is None:
                self._take_run(lines, scan, pos, row)
            else:  # after a careful return every line is careful (and an error)
                for r in range(pos, row):
                    self._careful_line(lines, first + r)
            if row < m:
                self._careful_line(lines, first + row)
            pos = row + 1
        if scan.stop < len(lines) and self._statement(lines[scan.stop], scan.stop + 1):
            return scan.stop + 1
        raise ParseError(f"function @{self.name}: '{{' is never closed (end of input reached "
                         "before '}')", self.header_line, self.brace_col)

    def _careful_line(self, lines: Lines, idx: int) -> None:
        line = lines[idx]
        if line and not line.isspace() and self._statement(line, idx + 1):
            raise AssertionError("a line before the body's end closed it")  # scan_body_kernel

    # -- runs of fast lines ---------------------------------------------------
    def _take_run(self, lines: Lines, scan: BodyScan, a: int, b: int) -> None:
        """Add the nodes of fast rows ``a:b`` (and take their return line, if any)."""
        if a >= b:
            return
        cols = scan.run_columns(a, b)
        if len(cols.rows):
            self.declared.frombytes(cols.type_idx.tobytes())
            self.node_line.frombytes((cols.rows + scan.first + 1).astype(np.int32).tobytes())
            try:
                if len(cols.rows) < _SMALL_BATCH:
                    self._add_each(cols)
                else:
                    self._add_bulk(cols)
            except (TypeError, ValueError, OverflowError) as exc:
                self._replay(lines, len(self.bb), scan.first + b, exc)
        if cols.outputs is not None:
            self.outputs = cols.outputs

    def _add_each(self, cols: RunColumns) -> None:
        bb = self.bb
        values: dict[int, Any] = {}
        for at, vals in cols.consts.values():
            values.update(zip(at.tolist(), vals, strict=True))
        for code, (at, lits) in cols.tensors.items():  # one per tensor constant (short runs)
            for j, lit in zip(at.tolist(), lits.tolist(), strict=True):
                shape = self.type_shape[int(self.scan.lit_type[lit])]
                values[j] = self.scan.literal_elements(np.array([lit]), code).reshape(shape)
        extra = cols.extra.tolist()
        for j, (k, x, y, aid) in enumerate(zip(cols.kind.tolist(), cols.a0.tolist(),
                                               cols.a1.tolist(), cols.attr_id.tolist(),
                                               strict=True)):
            if k == ops.OP_CONST:
                bb.const(values[j])
                continue
            enc = ops.get_op(k).encoding
            args = (x, y) if enc == ENC_BINARY else (x,) if enc == ENC_UNARY else extra[x: x + y]
            bb.call(k, *args, **self.attr_kwargs[aid])

    def _add_bulk(self, cols: RunColumns) -> None:
        a0 = cols.a0.copy()
        for code, (at, vals) in cols.consts.items():
            a0[at] = self.bb.add_scalar_consts(vals, code)
        for code, (at, lits) in cols.tensors.items():
            distinct, inverse = np.unique(lits, return_inverse=True)
            shape_ids = np.array(self.type_shape_id, np.int32)[self.scan.lit_type[distinct]]
            a0[at] = self.bb.add_tensor_consts(self.scan.literal_elements(distinct, code), code,
                                               shape_ids)[inverse]
        self.bb.add_nodes(cols.kind, a0, cols.a1, attr_id=cols.attr_id, extra=cols.extra)

    def _replay(self, lines: Lines, first: int, stop: int, error: Exception) -> None:
        """Re-parse the lines of a failed run from node ``first`` on; always raises."""
        start_line = self.node_line[first]
        del self.declared[first:]
        del self.node_line[first:]
        for idx in range(start_line - 1, stop):
            self._careful_line(lines, idx)  # raises at the failing line
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
        if tok[0] == "ident" and tok[1] == "dim":
            self._dim(cur)
            return False
        if tok[0] != "var":
            raise cur.error("expected a statement ('%name = ...', 'dim ...', 'return ...' or "
                            f"'}}'), got {describe(tok)}")
        self._definition(cur)
        return False

    def _dim(self, cur: Cursor) -> None:
        """``dim NAME [in [LO, HI]]``: declare a shape variable (HI may be ``inf``)."""
        cur.take()
        name = cur.expect_kind("ident", "a dim variable name")
        bounds: list[int | None] = [DEFAULT_LOWER, None]
        if cur.accept("in") is not None:
            cur.expect("[", "to open the bounds")
            for k in range(2):
                tok = cur.take()
                if k == 1 and tok[:2] == ("ident", "inf"):
                    bounds[k] = None
                elif tok[0] == "number" and INT_LITERAL.match(tok[1]) and len(tok[1]) <= 18:
                    bounds[k] = int(tok[1])
                else:
                    raise cur.error(f"expected an integer bound{' or inf' if k else ''}, got "
                                    f"{describe(tok)}", tok)
                cur.expect("," if k == 0 else "]", "in the bounds")
        cur.expect_end()
        if self.bb.find_dim(name[1]) is not None:
            raise cur.error(f"redefinition of dim {name[1]}", name)
        try:
            self.bb.dim(name[1], bounds[0], bounds[1])  # type: ignore[arg-type]
        except ValueError as exc:
            raise cur.error(str(exc), name) from None

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
        code, shape, tok = parse_type(cur, self.bb.find_dim)
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
            node = self.bb.const(value, code)
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
        kw: dict[str, Any] = {}
        if cur.accept("{") is not None:
            kw = attr_dict(cur, node_attrs=True, dim_of=self.bb.find_dim)
        _, _, tidx = self._typed_end(cur)
        try:
            node = self.bb.call(op_tok[1], *ids, **kw)
        except (TypeError, ValueError, OverflowError) as exc:
            message = str(exc)
            if not message.startswith(opdef.name):
                message = f"{opdef.name}: {message}"
            raise cur.error(message, op_tok) from None
        self.define(name, node, tidx, lineno)

    # -- finishing ----------------------------------------------------------
    def type_mismatch(self, lines: Lines, func: Function | None) -> ParseError | None:
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
        want = format_type(int(codes[node]), func.shapes.decode(int(sids[node])))
        got = format_type(int(func.dtype[node]), func.shapes.decode(int(func.shape_id[node])))
        return ParseError(f"declared type {want} of {toks[0][1]} differs from the inferred "
                          f"type {got} ({func.op(node).name})", lineno, toks[colon + 1][2])

    def finish(self, lines: Lines) -> Function:
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
    lines = Lines(text)
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


__all__ = ["parse"]
