"""The parser's fast path: the printer-form lines of a function body, taken as columns.

:class:`Lines` holds the text once as UTF-8 bytes with its line bounds (a
line's ``str`` is decoded only when the careful path needs it).
:class:`BodyScan` runs the kernels of :mod:`irkernel.text.scan` over one
function body and decides, with whole-array NumPy, which lines the fast path
takes: each *distinct* op name, attribute text, type text and literal is parsed
once by the parser's own rules (the resolvers it passes in), and a line is
fast when its names resolve, its form and type parsed, its operand count fits
the op and (constants) its literal is valid for its scalar type. A run of fast
lines becomes whole columns (:meth:`BodyScan.run_columns`) for
``GraphBuilder.add_nodes``; every other line is left to the careful path,
which owns every error message. Imports ``irkernel.ir`` and ``irkernel.text.scan``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.ids import ENC_BINARY, ENC_VARIADIC, NONE
from irkernel.text.literals import element_arrays, literal_values
from irkernel.text.scan import (
    ATTR,
    BLANK,
    CONST,
    NODE,
    OK,
    OP,
    RETURN,
    TYPE,
    keyword_table,
    line_bounds_kernel,
    scan_body_kernel,
)
from irkernel.text.names import (
    canonical_names_kernel,
    distinct_keys_kernel,
    intern_spans_kernel,
    lookup_name_kernel,
    resolve_names_kernel,
)

_WORDS = keyword_table()

#: (opcode, encoding, arity, attr_id) of a node form, or None when it does not parse.
Form = tuple[int, int, int, int]
#: Resolvers the parser passes in: form of (op text, attribute text or None); type
#: index of a type text (-1 when bad); (dtype code, shape) of a type index.
Resolvers = tuple[Callable[[str, str | None], Form | None], Callable[[str], int],
                  Callable[[int], tuple[int, tuple[int, ...]]]]


def _frozen(*arrays: np.ndarray) -> None:
    for arr in arrays:
        arr.flags.writeable = False


class Lines:
    """The text as UTF-8 bytes and line bounds; ``lines[i]`` is line ``i`` (0-based) as
    ``text.split("\\n")[i]`` would give it, decoded on demand."""

    __slots__ = ("_ascii", "buf", "end", "start", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._ascii = text.isascii()
        self.buf = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
        self.start, self.end = line_bounds_kernel(self.buf)
        _frozen(self.start, self.end)

    def __len__(self) -> int:
        return len(self.start)

    def __getitem__(self, i: int) -> str:
        return self.decode(int(self.start[i]), int(self.end[i]))

    def decode(self, start: int, stop: int) -> str:
        """The text of bytes ``start:stop`` (character offsets when the text is ASCII)."""
        if self._ascii:
            return self.text[start:stop]
        return self.buf[start:stop].tobytes().decode("utf-8", "surrogatepass")


@dataclass
class RunColumns:
    """The nodes of a run of fast lines, ready for ``GraphBuilder.add_nodes``."""

    rows: np.ndarray  # body rows of the nodes (int64)
    kind: np.ndarray  # int16
    a0: np.ndarray  # int32; CONST rows: index into their dtype's ``values``
    a1: np.ndarray  # int32
    attr_id: np.ndarray  # int32
    extra: np.ndarray  # int32
    type_idx: np.ndarray  # int32, the declared type of each node
    consts: dict[int, tuple[np.ndarray, np.ndarray]]  # code -> (positions, scalar values)
    # code -> (positions, distinct literal of each): constants of a shape other than ()
    tensors: dict[int, tuple[np.ndarray, np.ndarray]]
    outputs: list[int] | None  # set when the run ends with a return line


class BodyScan:
    """One function body scanned and classified (see the module docstring).

    ``first`` is the index of the body's first line; ``stop`` the index of the
    line that closes it (or ``len(lines)``). Row ``i`` is line ``first + i``.
    """

    def __init__(self, lines: Lines, first: int, resolvers: Resolvers) -> None:
        self.lines, self.first = lines, first
        stop, cls, span, opnd_ptr, opnd = scan_body_kernel(lines.buf, lines.start, lines.end,
                                                           first, _WORDS)
        _frozen(cls, span, opnd_ptr, opnd)
        self.stop, self.cls, self.opnd_ptr = int(stop), cls, opnd_ptr
        self.canonical, self.def_node, self.status, self.ids = canonical_names_kernel(
            lines.buf, lines.start, np.int64(first), cls, span, opnd_ptr, opnd)
        self.n_defs = int(np.count_nonzero(self.def_node >= 0))
        self._table: tuple[np.ndarray, ...] = ()
        if not self.canonical:  # hand-written names: a hash table of the definitions
            (self.def_node, self.status, self.ids, *table) = resolve_names_kernel(
                lines.buf, lines.start, np.int64(first), cls, span, opnd_ptr, opnd)
            _frozen(*table)
            self._table = tuple(table)
        # operand ids with two NONE after them: a row with fewer operands reads those
        self._ids_padded = np.append(self.ids, np.array([NONE, NONE], np.int32))
        self.fast = self._classify(span, resolvers)

    # -- names ----------------------------------------------------------------
    def lookup(self, name: str) -> int:
        """The node the body's first definition of ``name`` makes, or -1."""
        if self.canonical:  # definition k is named "k"
            if name.isascii() and name.isdigit() and (name == "0" or name[0] != "0") \
                    and len(name) <= 10 and int(name) < self.n_defs:
                return int(name)
            return -1
        query = np.frombuffer(name.encode("utf-8", "surrogatepass"), np.uint8)
        return int(lookup_name_kernel(self.lines.buf, *self._table, query))

    # -- which lines are fast ----------------------------------------------------
    def _classify(self, span: np.ndarray, resolvers: Resolvers) -> np.ndarray:
        """bool[m]: the lines the fast path takes (the rest but blanks go careful)."""
        resolve_form, resolve_type, type_of = resolvers
        cls, m = self.cls, len(self.cls)
        ok = self.status == OK
        typed = ((cls == NODE) | (cls == CONST)) & ok
        line_start = self.lines.start[self.first: self.first + m]
        pos = np.concatenate([line_start + span[:, col] for col in (OP, ATTR, TYPE)])
        size = np.concatenate([np.where(typed, span[:, col + 1], 0) for col in (OP, ATTR, TYPE)])
        _frozen(pos, size)
        sym, first = intern_spans_kernel(self.lines.buf, pos, size.astype(np.int32))
        n_texts = len(first)

        def text(s: int) -> str:  # decoded only for op names, attributes and types
            p = int(pos[first[s]])
            return self.lines.decode(p, p + int(size[first[s]]))

        op_sym, attr_sym, type_sym = sym[:m], sym[m: 2 * m], sym[2 * m:]

        # types: one resolution per distinct type text
        type_by_sym = np.full(n_texts + 1, -1, np.int32)
        for s in np.unique(type_sym[typed]).tolist():
            type_by_sym[s] = resolve_type(text(s))
        self.type_idx = type_by_sym[type_sym]  # -1 (last entry) for untyped rows
        typed &= self.type_idx >= 0
        types = [type_of(t) for t in range(int(type_by_sym.max()) + 1)]
        codes = np.array([code for code, _ in types] or [0], np.int8)
        self.type_scalar = np.array([not shape for _, shape in types] or [False])
        counts = np.array([int(np.prod(shape, dtype=np.int64)) for _, shape in types] or [0],
                          np.int64)

        # node forms: one resolution per distinct (op, attributes)
        is_node = typed & (cls == NODE)
        node_rows = np.flatnonzero(is_node)
        key = op_sym[node_rows].astype(np.int64) * (n_texts + 1) + attr_sym[node_rows] + 1
        _frozen(key)
        form_of, form_first = distinct_keys_kernel(key)
        n_forms = len(form_first)
        self.form = np.zeros((n_forms + 1, 4), np.int32)  # opcode, encoding, arity, attr_id
        form_ok = np.zeros(n_forms + 1, bool)
        for f, row in enumerate(node_rows[form_first].tolist()):
            a = int(attr_sym[row])
            form = resolve_form(text(op_sym[row]), text(a) if a >= 0 else None)
            if form is not None:
                self.form[f], form_ok[f] = form, True
        self.form_of = np.full(m, n_forms, np.int32)
        self.form_of[node_rows] = form_of
        arity = self.form[self.form_of, 2]
        count = np.diff(self.opnd_ptr)
        fast = is_node & form_ok[self.form_of] & ((arity < 0) | (count == arity))

        # constants: the values of every distinct (literal, type), read by kernels
        const_rows = np.flatnonzero(typed & (cls == CONST))
        fast[const_rows] = self._constants(const_rows, line_start + span[:, OP],
                                           span[:, OP + 1], op_sym, codes, counts)
        fast |= (cls == RETURN) & ok
        returns = np.flatnonzero(fast & (cls == RETURN))
        if len(returns):  # after a return, every line is the careful path's
            fast[returns[0] + 1:] = False
        return fast

    def _constants(self, rows: np.ndarray, lit_pos: np.ndarray, lit_size: np.ndarray,
                   op_sym: np.ndarray, codes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Read the literals of CONST ``rows``, each distinct (literal, type) once
        (:func:`irkernel.text.literals.literal_values`); bool per row: fast. Sets
        ``const_lit`` (row -> distinct literal) and the literals' ``lit_*`` columns."""
        self.const_lit = np.zeros(len(self.cls), np.int32)
        types = self.type_idx[rows]
        key = op_sym[rows].astype(np.int64) * (len(counts) + 1) + types
        _frozen(key)
        lit_of, lit_first = distinct_keys_kernel(key)
        first_rows = rows[lit_first]
        self.lit_type = self.type_idx[first_rows]
        self.lit_code = codes[self.lit_type]
        ok, self.lit_ptr, self.lit_raw = literal_values(
            self.lines.buf, lit_pos[first_rows], lit_size[first_rows], self.lit_code,
            counts[self.lit_type], _WORDS)
        self.const_lit[rows] = lit_of
        return ok[lit_of]

    def literal_elements(self, lits: np.ndarray, code: int) -> np.ndarray:
        """The elements of distinct literals ``lits`` (all of dtype ``code``), back to back."""
        start, stop = self.lit_ptr[lits], self.lit_ptr[lits + 1]
        counts = stop - start
        within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        return element_arrays(self.lit_raw[np.repeat(start, counts) + within], code)

    # -- runs --------------------------------------------------------------------
    def run_columns(self, a: int, b: int) -> RunColumns:
        """The nodes of rows ``a:b`` (fast or blank lines) as columns."""
        cls = self.cls[a:b]
        rows = np.flatnonzero((cls == NODE) | (cls == CONST)) + a
        form = self.form[self.form_of[rows]]
        is_const = self.cls[rows] == CONST
        kind = np.where(is_const, ops.OP_CONST, form[:, 0]).astype(np.int16)
        enc = form[:, 1]
        ptr = self.opnd_ptr[rows]
        count = self.opnd_ptr[rows + 1] - ptr
        first_id, second_id = self._ids_padded[ptr], self._ids_padded[ptr + 1]
        variadic = (enc == ENC_VARIADIC) & ~is_const
        v_count = np.where(variadic, count, 0)
        v_start = np.cumsum(v_count) - v_count
        within = np.arange(int(v_count.sum()), dtype=np.int64) - np.repeat(v_start, v_count)
        extra = self.ids[np.repeat(ptr, v_count) + within]
        a0 = np.where(variadic, v_start, first_id)
        a0 = np.where(is_const, 0, a0).astype(np.int32)
        a1 = np.where(variadic, count, np.where(enc == ENC_BINARY, second_id, NONE))
        a1 = np.where(is_const, NONE, a1).astype(np.int32)
        consts, tensors = {}, {}
        lit = self.const_lit[rows] if len(self.cls) else np.zeros(0, np.int32)
        scalar = is_const & self.type_scalar[self.type_idx[rows]]
        for code in np.unique(self.lit_code[lit[is_const]]).tolist():
            of_code = is_const & (self.lit_code[lit] == code)
            at = np.flatnonzero(of_code & scalar)
            if len(at):
                consts[code] = (at, self.literal_elements(lit[at], code))
            at = np.flatnonzero(of_code & ~scalar)
            if len(at):
                tensors[code] = (at, lit[at])
        outputs = None
        ret = np.flatnonzero(cls == RETURN)
        if len(ret):
            r = int(ret[0]) + a
            outputs = self.ids[self.opnd_ptr[r]: self.opnd_ptr[r + 1]].tolist()
        return RunColumns(rows, kind, a0, a1, np.where(is_const, 0, form[:, 3]).astype(np.int32),
                          extra.astype(np.int32), self.type_idx[rows].astype(np.int32), consts,
                          tensors, outputs)

    def careful_rows(self) -> np.ndarray:
        """Rows the careful path parses: neither fast nor blank."""
        return np.flatnonzero(~self.fast & (self.cls != BLANK))


__all__ = ["BodyScan", "Lines", "RunColumns"]
