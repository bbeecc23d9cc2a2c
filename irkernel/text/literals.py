"""Constant literals of the parser's fast path: the values of many literal texts at once.

A fast ``const`` line's value is one element or a list ``[e0, e1, ...]``
(:mod:`irkernel.text.scan` checked the shape of the text). Here every distinct
literal text is read for its declared dtype and element count by
:func:`literal_values_kernel`, which does what :func:`irkernel.text.lexer.literal`
and ``const_array`` do (ints with their range, bools, ``nan``/``inf``/``-inf``,
``nan:0x<bits>``) and leaves only decimal floats undone; those are converted in
one call by :func:`literal_values`, with NumPy's correctly rounded text to
float64 conversion (then rounded to float32, as the careful path does). A
literal any rule rejects is marked bad and left to the careful path, which
reports the error with its line and column. Imports ``irkernel.ir`` only.

Values are raw bits in int64 slots: ints and bools as themselves, float64 as its
bits, float32 as its 32 bits (so NaN payloads never pass through a conversion).
"""

from __future__ import annotations

import warnings

import numpy as np

from irkernel.ir.ids import BOOL, FLOAT32, FLOAT64, INT32, INT64
from irkernel.ir.jit import helper, kernel

_SPACE, _TAB, _COMMA, _LBRACK, _RBRACK, _MINUS = 32, 9, 44, 91, 93, 45
# Bits of the keywords per float dtype: nan (NumPy's), inf, -inf.
_F32_NAN, _F32_INF, _F32_NINF = 0x7FC00000, 0x7F800000, 0xFF800000
_F64_NAN, _F64_INF = 0x7FF8000000000000, 0x7FF0000000000000
_F64_NINF = -0x10000000000000  # 0xFFF0000000000000 as int64
# Smallest magnitude that rounds to inf in float32 (the careful path's OVERFLOW).
_F32_OVERFLOW = float.fromhex("0x1.ffffffp+127")


@helper
def _same(buf, p, e, word):
    """``buf[p:e]`` is exactly ``word`` (a 0-padded keyword row)."""
    size = 0
    while size < word.shape[0] and word[size] != 0:
        size += 1
    if e - p != size:
        return False
    for j in range(size):
        if buf[p + j] != word[j]:
            return False
    return True


@helper
def _int_value(buf, p, e, code):
    """(ok, value) of the decimal ``-?[0-9]+`` at ``buf[p:e]`` within ``code``'s range;
    accumulated as a negative number so that the minimum needs no special case."""
    if e - p > 21:  # the careful path reads at most 21 characters as an int
        return False, 0
    neg = p < e and buf[p] == _MINUS
    if neg:
        p += 1
    if p == e:
        return False, 0
    limit = -(2**31) if code == INT32 else -(2**63)
    if not neg:
        limit += 1
    mult_min = -214748364 if code == INT32 else -922337203685477580  # limit / 10, truncated
    acc = 0
    for j in range(p, e):
        d = buf[j] - 48
        if not 0 <= d <= 9 or acc < mult_min:
            return False, 0
        acc *= 10
        if acc < limit + d:
            return False, 0
        acc -= d
    return True, (acc if neg else -acc)


@helper
def _nan_bits(buf, p, e, code):
    """(ok, bits) of ``nan:0x<hex>`` at ``buf[p:e]``: a NaN pattern of ``code``'s width."""
    p += 6  # "nan:0x"
    width = 32 if code == FLOAT32 else 64
    digits = 0
    bits = np.uint64(0)
    for j in range(p, e):
        c = buf[j]
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        else:
            d = c - 55
        if digits == 0 and d == 0:
            continue  # leading zeros
        digits += 1
        if digits > width // 4:
            return False, 0
        bits = (bits << np.uint64(4)) | np.uint64(d)
    mant = width - (9 if width == 32 else 12)
    exp_mask = ((np.uint64(1) << np.uint64(width - 1 - mant)) - np.uint64(1)) << np.uint64(mant)
    mant_mask = (np.uint64(1) << np.uint64(mant)) - np.uint64(1)
    if (bits & exp_mask) != exp_mask or (bits & mant_mask) == np.uint64(0):
        return False, 0
    return True, np.int64(bits)


@helper
def _element(buf, p, e, code, words):
    """(status, raw) of one element: status 0 bad, 1 done (raw bits), 2 a decimal float
    for the bulk conversion."""
    if code > BOOL:  # the dtypes after bool (float16 ... uint16) take the careful path
        return 0, 0
    if code == BOOL:
        if _same(buf, p, e, words[3]):
            return 1, 1
        if _same(buf, p, e, words[4]):
            return 1, 0
        return 0, 0
    if code == INT32 or code == INT64:
        ok, value = _int_value(buf, p, e, code)
        return (1, value) if ok else (0, 0)
    f32 = code == FLOAT32
    if _same(buf, p, e, words[2]):
        return 1, (_F32_NAN if f32 else _F64_NAN)
    if _same(buf, p, e, words[1]):
        return 1, (_F32_INF if f32 else _F64_INF)
    if _same(buf, p, e, words[0]):
        return 1, (_F32_NINF if f32 else _F64_NINF)
    if e - p > 6 and buf[p] == 110 and buf[p + 3] == 58:  # nan:0x...
        ok, bits = _nan_bits(buf, p, e, code)
        return (1, bits) if ok else (0, 0)
    if 97 <= buf[p] <= 122:  # true, false
        return 0, 0
    return 2, 0


@kernel
def literal_values_kernel(buf, pos, size, code, count, words):
    """Read ``k`` literal texts, each for its dtype and element count.

    Arrays: buf uint8[B] (the text); pos int64[k], size int32[k] (each literal's span);
    code int8[k], count int64[k] (dtype code and element count of its declared type);
    words uint8[7, 8] (``scan.keyword_table``). Returns (ok bool[k]; ptr int64[k + 1]:
    literal d owns slots ptr[d]:ptr[d + 1] = its count; raw int64[n]: element bits;
    todo int64[t]: slots still to convert, with their text spans todo_pos int64[t],
    todo_len int32[t]).
    """
    k = pos.shape[0]
    ptr = np.zeros(k + 1, np.int64)
    for d in range(k):
        ptr[d + 1] = ptr[d] + count[d]
    ok = np.zeros(k, np.bool_)
    raw = np.zeros(ptr[k], np.int64)
    todo = np.empty(ptr[k], np.int64)
    todo_pos = np.empty(ptr[k], np.int64)
    todo_len = np.empty(ptr[k], np.int32)
    t = 0
    for d in range(k):
        p = pos[d]
        e = p + size[d]
        is_list = buf[p] == _LBRACK
        if is_list:
            p += 1
            e -= 1
        elif count[d] != 1:
            continue
        n = 0
        good = True
        t0 = t
        while good:
            while p < e and (buf[p] == _SPACE or buf[p] == _TAB):
                p += 1
            if p == e:
                break
            q = p
            while q < e and not (buf[q] == _COMMA or buf[q] == _SPACE or buf[q] == _TAB):
                q += 1
            if n == count[d]:
                good = False
                break
            status, value = _element(buf, p, q, code[d], words)
            slot = ptr[d] + n
            if status == 0:
                good = False
            elif status == 1:
                raw[slot] = value
            else:
                todo[t] = slot
                todo_pos[t] = p
                todo_len[t] = q - p
                t += 1
            n += 1
            while q < e and (buf[q] == _SPACE or buf[q] == _TAB):
                q += 1
            p = q + 1 if q < e and buf[q] == _COMMA else q
        if good and n == count[d]:
            ok[d] = True
        else:
            t = t0  # drop this literal's conversions
    return ok, ptr, raw, todo[:t].copy(), todo_pos[:t].copy(), todo_len[:t].copy()


@kernel
def join_spans_kernel(buf, pos, size):
    """The spans ``buf[pos[i]:pos[i] + size[i]]`` joined by spaces (uint8)."""
    n = pos.shape[0]
    total = n
    for i in range(n):
        total += size[i]
    out = np.full(total, _SPACE, np.uint8)
    at = 0
    for i in range(n):
        for j in range(size[i]):
            out[at + j] = buf[pos[i] + j]
        at += size[i] + 1
    return out


def _readonly(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    views = tuple(a.view() for a in arrays)
    for v in views:
        v.flags.writeable = False
    return views


def literal_values(buf: np.ndarray, pos: np.ndarray, size: np.ndarray, code: np.ndarray,
                   count: np.ndarray, words: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok bool[k], ptr int64[k + 1], raw int64[n]) of ``k`` literal texts (see
    :func:`literal_values_kernel`), decimal floats converted: a float64 that
    overflows its dtype (a float32 beyond ``0x1.ffffffp+127``, a float64 to inf) marks
    its literal bad, as the careful path would reject it."""
    ok, ptr, raw, todo, todo_pos, todo_len = literal_values_kernel(
        buf, *_readonly(pos.astype(np.int64), size.astype(np.int32), code.astype(np.int8),
                        count.astype(np.int64)), words)
    if len(todo):
        text = join_spans_kernel(buf, *_readonly(todo_pos, todo_len)).tobytes()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a short read must not pass silently
            values = np.fromstring(text, np.float64, sep=" ")  # correctly rounded
        if len(values) != len(todo):
            raise AssertionError("literal_values: the scanned numbers did not all convert")
        owner = np.searchsorted(ptr, todo, side="right") - 1
        is32 = code[owner] == FLOAT32
        limit = np.where(is32, _F32_OVERFLOW, np.inf)
        ok[owner[np.abs(values) >= limit]] = False
        with np.errstate(over="ignore"):
            bits32 = values.astype(np.float32).view(np.uint32).astype(np.int64)
        raw[todo] = np.where(is32, bits32, values.view(np.int64))
    return ok, ptr, raw


def element_arrays(raw: np.ndarray, code: int) -> np.ndarray:
    """The slots ``raw`` (int64 bits) as an array of dtype ``code``."""
    if code == FLOAT32:
        return raw.astype(np.uint32).view(np.float32)
    if code == FLOAT64:
        return raw.view(np.float64)
    if code == BOOL:
        return raw != 0
    return raw.astype(np.int32 if code == INT32 else np.int64)


__all__ = ["element_arrays", "join_spans_kernel", "literal_values", "literal_values_kernel"]
