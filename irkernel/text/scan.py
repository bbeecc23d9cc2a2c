"""Kernels of the parser's fast path: lines of a function body classified and resolved as bytes.

The text is encoded once (UTF-8, ``uint8``). For one function body these
kernels find the lines in the printer's forms and everything the parser needs
from them as byte spans (name, op or literal, attributes, type, operands), with
no Python per line:

- :func:`line_bounds_kernel` - where each line starts and ends;
- :func:`scan_body_kernel` - the body's extent (up to the first line whose
  first character is ``}``) and one class and one row of spans per line.

Names, operands and distinct texts are resolved from those spans by
:mod:`irkernel.text.names`.

A fast line is a *subset* of the grammar: only ASCII names, ``[ \\t]`` between
tokens, the literal forms the printer writes. Anything else is classified
``DEF`` (a definition the careful path parses) or ``OTHER``; the tokenizer then
reports any error with its exact line and column. Every line whose first
non-blank character is ``%`` defines the next node or is an error, so node ids
can be numbered here for all lines at once.

Compile time: the grammar's pieces are ``helper`` functions (plain calls that
LLVM inlines), not Numba's IR-level ``inline``, which re-types the caller per
inlined call site: with it the scanner took 80-90 s to compile cold (loaded
2-core VM), with helpers about 25 s there; once, then Numba's on-disk cache
loads it in milliseconds. Imports ``irkernel.ir`` only.
"""

from __future__ import annotations

import numpy as np

from irkernel.ir.jit import helper, kernel

# line classes
BLANK, NODE, CONST, RETURN, DEF, OTHER = 0, 1, 2, 3, 4, 5
# columns of a line's span row: (start, length) of the name, the op (a CONST
# line's literal), the attributes with their braces, the type
NAME, OP, ATTR, TYPE = 0, 2, 4, 6
N_SPAN_COLUMNS = 8
# line status from resolve_names_kernel
OK, REDEFINED, UNKNOWN_OPERAND = 0, 1, 2
# rows of the keyword table (``KEYWORDS``)
KW_RETURN, KW_CONST = 5, 6
#: Lines this long or longer are left to the careful path (spans are int32 offsets).
MAX_LINE = 2**31 - 1

_TAB, _SPACE, _HASH, _PERCENT, _COMMA, _COLON, _EQ = 9, 32, 35, 37, 44, 58, 61
_LBRACK, _RBRACK, _LBRACE, _RBRACE, _QUOTE, _BACKSLASH = 91, 93, 123, 125, 34, 92
_MINUS, _DOT = 45, 46


@helper
def _skip_ws(buf, p, e):
    while p < e and (buf[p] == _SPACE or buf[p] == _TAB):
        p += 1
    return p


@helper
def _skip_blank(buf, p, e):
    """Past the tokenizer's whitespace: space, tab, CR, FF, VT."""
    while p < e:
        c = buf[p]
        if not (c == 32 or c == 9 or c == 13 or c == 12 or c == 11):
            break
        p += 1
    return p


@helper
def _word_end(buf, p, e, also_non_ascii):
    """End of the run of ``[A-Za-z0-9_]`` (and bytes >= 128 if asked) starting at ``p``."""
    while p < e:
        c = buf[p]
        if not (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95
                or (also_non_ascii and c >= 128)):
            break
        p += 1
    return p


@helper
def _matches(buf, p, e, words, w):
    """Whether ``buf[p:e]`` starts with keyword ``w`` (row ``w`` of ``words``, 0-padded)."""
    size = 0
    while size < words.shape[1] and words[w, size] != 0:
        size += 1
    if p + size > e:
        return 0
    for j in range(size):
        if buf[p + j] != words[w, j]:
            return 0
    return size


@helper
def _at_line_end(buf, p, e):
    """Only ``[ \\t\\r]`` and an optional comment remain after ``p``."""
    while p < e and (buf[p] == _SPACE or buf[p] == _TAB or buf[p] == 13):
        p += 1
    return p == e or buf[p] == _HASH


@helper
def _var_end(buf, p, e):
    """End of ``%name`` (ASCII name) starting at ``p``, or -1."""
    if p >= e or buf[p] != _PERCENT:
        return -1
    q = _word_end(buf, p + 1, e, False)
    if q == p + 1 or (q < e and buf[q] >= 128):
        return -1
    return q


@helper
def _attrs_end(buf, p, e):
    """End of ``{...}`` at ``p`` (no nested braces, no '#'; strings may escape), or -1."""
    p += 1
    while p < e:
        c = buf[p]
        if c == _RBRACE:
            return p + 1
        if c == _LBRACE or c == _HASH:
            return -1
        if c == _QUOTE:
            p += 1
            while p < e and buf[p] != _QUOTE:
                p += 2 if buf[p] == _BACKSLASH else 1
            if p >= e:
                return -1
        p += 1
    return -1


@helper
def _type_end(buf, p, e):
    """End of ``[a-z0-9]+\\[[0-9, ]*\\]`` at ``p``, or -1."""
    q = p
    while q < e and (97 <= buf[q] <= 122 or (48 <= buf[q] <= 57)):
        q += 1
    if q == p or q >= e or buf[q] != _LBRACK:
        return -1
    q += 1
    while q < e and ((48 <= buf[q] <= 57) or buf[q] == _COMMA or buf[q] == _SPACE):
        q += 1
    if q >= e or buf[q] != _RBRACK:
        return -1
    return q + 1


@helper
def _number_end(buf, p, e):
    """End of ``-?(digits.?digits*|.digits)([eE][-+]?digits)?`` at ``p``, or -1."""
    q = p + 1 if p < e and buf[p] == _MINUS else p
    d0 = q
    while q < e and (48 <= buf[q] <= 57):
        q += 1
    if q > d0:
        if q < e and buf[q] == _DOT:
            q += 1
            while q < e and (48 <= buf[q] <= 57):
                q += 1
    else:
        if q >= e or buf[q] != _DOT or q + 1 >= e or not (48 <= buf[q + 1] <= 57):
            return -1
        q += 1
        while q < e and (48 <= buf[q] <= 57):
            q += 1
    if q < e and (buf[q] == 101 or buf[q] == 69):  # e, E
        r = q + 1
        if r < e and (buf[r] == 43 or buf[r] == _MINUS):
            r += 1
        if r < e and (48 <= buf[r] <= 57):
            while r < e and (48 <= buf[r] <= 57):
                r += 1
            q = r
    return q


@helper
def _element_end(buf, p, e, words):
    """End of one constant element at ``p`` (a number, -inf, inf, nan, true, false or
    ``nan:0x<hex>``), or -1; the tokenizer's lookahead holds: no word character or '.'
    follows (the caller checks what may come next)."""
    size = _matches(buf, p, e, words, 2)  # nan:0x<hex>
    if size and p + size + 3 < e and buf[p + size] == _COLON and buf[p + size + 1] == 48 \
            and buf[p + size + 2] == 120:
        q = p + size + 3
        while q < e and (48 <= buf[q] <= 57 or 97 <= buf[q] <= 102 or 65 <= buf[q] <= 70):
            q += 1
        return q if q > p + size + 3 else -1
    q = _number_end(buf, p, e)
    if q < 0:
        for w in range(KW_RETURN):
            size = _matches(buf, p, e, words, w)
            if size:
                q = p + size
                break
    return q


@helper
def _literal_end(buf, p, e, words):
    """End of a constant's value at ``p``: one element, or ``[e0, e1, ...]`` (``[]``
    included), or -1; what follows must be a blank or ':'."""
    if p < e and buf[p] == _LBRACK:
        q = _skip_ws(buf, p + 1, e)
        if q < e and buf[q] == _RBRACK:
            q += 1
        else:
            while True:
                q = _element_end(buf, q, e, words)
                if q < 0 or q >= e:
                    return -1
                q = _skip_ws(buf, q, e)
                if q < e and buf[q] == _RBRACK:
                    q += 1
                    break
                if q >= e or buf[q] != _COMMA:
                    return -1
                q = _skip_ws(buf, q + 1, e)
    else:
        q = _element_end(buf, p, e, words)
    if q < 0 or (q < e and not (buf[q] == _SPACE or buf[q] == _TAB or buf[q] == _COLON)):
        return -1
    return q


@helper
def _operands(buf, s, p, e, opnd, k):
    """``%a, %b, ...`` at ``p`` on the line starting at ``s``: spans (relative to ``s``)
    appended to ``opnd`` from row ``k``. Returns (position after them, new k), position
    -1 when malformed."""
    while True:
        q = _var_end(buf, p, e)
        if q < 0:
            return -1, k
        opnd[k, 0] = p + 1 - s
        opnd[k, 1] = q - p - 1
        k += 1
        p = _skip_ws(buf, q, e)
        if p >= e or buf[p] != _COMMA:
            return p, k
        p = _skip_ws(buf, p + 1, e)


@kernel
def line_bounds_kernel(buf):
    """Start and end (exclusive, before the newline) of every line.

    Arrays: buf uint8[B] (the UTF-8 text). Returns (start int64[L], end int64[L]),
    L = number of newlines + 1, as ``str.split("\\n")`` counts lines.
    """
    n_lines = 1
    for j in range(buf.shape[0]):
        if buf[j] == 10:
            n_lines += 1
    start = np.empty(n_lines, np.int64)
    end = np.empty(n_lines, np.int64)
    start[0] = 0
    line = 0
    for j in range(buf.shape[0]):
        if buf[j] == 10:
            end[line] = j
            line += 1
            start[line] = j + 1
    end[line] = buf.shape[0]
    return start, end


@helper
def _classify(buf, s, e, row, opnd, k, words):
    """Class of the line ``buf[s:e]``; fills its span row and operand rows from ``k``
    (positions relative to ``s``). Returns (class, new k)."""
    p = _skip_ws(buf, s, e)
    q = _skip_blank(buf, p, e)
    plain = q == p  # only spaces and tabs before the first token (the fast forms)
    p = q
    if p == e or buf[p] == _HASH:
        return BLANK, k
    if buf[p] != _PERCENT:
        size = _matches(buf, p, e, words, KW_RETURN)
        if plain and size and e - s < MAX_LINE:
            q = _skip_ws(buf, p + size, e)
            if q > p + size:
                q, k2 = _operands(buf, s, q, e, opnd, k)
                if q >= 0 and _at_line_end(buf, q, e):
                    return RETURN, k2
        return OTHER, k
    if e - s >= MAX_LINE:
        return DEF, k  # spans are int32 offsets in the line; the careful path reads it
    q = _word_end(buf, p + 1, e, True)  # what the tokenizer may read as the name
    ascii_name = _word_end(buf, p + 1, e, False) == q
    row[NAME] = p + 1 - s
    row[NAME + 1] = q - p - 1
    if not plain or not ascii_name or q == p + 1:
        return DEF, k
    q = _skip_ws(buf, q, e)
    if q >= e or buf[q] != _EQ:
        return DEF, k
    q = _skip_ws(buf, q + 1, e)
    if q >= e or not (65 <= buf[q] <= 90 or 97 <= buf[q] <= 122 or buf[q] == 95):
        return DEF, k  # an op name starts with a letter or '_'
    op_end = _word_end(buf, q, e, False)
    row[OP] = q - s
    row[OP + 1] = op_end - q
    r = _skip_ws(buf, op_end, e)
    if r == op_end:
        return DEF, k
    cls = NODE
    if _matches(buf, q, e, words, KW_CONST) == op_end - q:
        cls = CONST
        q = _literal_end(buf, r, e, words)
        if q < 0:
            return DEF, k
        row[OP] = r - s
        row[OP + 1] = q - r
    else:
        q, k = _operands(buf, s, r, e, opnd, k)
    if q < 0:
        return DEF, k
    q = _skip_ws(buf, q, e)
    if cls == NODE and q < e and buf[q] == _LBRACE:
        a = _attrs_end(buf, q, e)
        if a < 0:
            return DEF, k
        row[ATTR] = q - s
        row[ATTR + 1] = a - q
        q = _skip_ws(buf, a, e)
    if q >= e or buf[q] != _COLON:
        return DEF, k
    q = _skip_ws(buf, q + 1, e)
    t = _type_end(buf, q, e)
    if t < 0 or not _at_line_end(buf, t, e):
        return DEF, k
    row[TYPE] = q - s
    row[TYPE + 1] = t - q
    return cls, k


@kernel
def scan_body_kernel(buf, start, end, first, words):
    """Classify the lines of a function body, from line ``first`` to the line before the
    first one whose first non-blank character is ``}`` (or to the end of the text).

    Arrays: buf uint8[B]; start, end int64[L] (:func:`line_bounds_kernel`); words
    uint8[7, 8], the keywords -inf, inf, nan, true, false, return, const (0-padded).
    Returns (stop: the index of the closing line or L; cls int8[m]; span int32[m, 8]:
    the (start, length) pairs of NAME, OP, ATTR and TYPE relative to the line's start;
    opnd_ptr int64[m + 1]; opnd int32[k, 2]: the operand spans of NODE and RETURN lines,
    line i owning rows opnd_ptr[i]:opnd_ptr[i + 1]), with m = stop - first.
    """
    n_lines = start.shape[0]
    stop = first
    n_percent = 0
    while stop < n_lines:
        p = start[stop]
        e = end[stop]
        p = _skip_blank(buf, p, e)
        if p < e and buf[p] == _RBRACE:
            break
        for j in range(p, e):
            if buf[j] == _PERCENT:
                n_percent += 1
        stop += 1
    m = stop - first
    cls = np.zeros(m, np.int8)
    span = np.zeros((m, N_SPAN_COLUMNS), np.int32)
    opnd_ptr = np.zeros(m + 1, np.int64)
    opnd = np.empty((n_percent, 2), np.int32)
    k = 0
    for i in range(m):
        c, k = _classify(buf, start[first + i], end[first + i], span[i], opnd, k, words)
        cls[i] = c
        opnd_ptr[i + 1] = k
    return stop, cls, span, opnd_ptr, opnd[:k].copy()


def keyword_table() -> np.ndarray:
    """The ``words`` argument of :func:`scan_body_kernel` (read-only)."""
    words = np.zeros((7, 8), np.uint8)
    for row, word in enumerate((b"-inf", b"inf", b"nan", b"true", b"false", b"return",
                                b"const")):
        words[row, :len(word)] = np.frombuffer(word, np.uint8)
    words.flags.writeable = False
    return words
