"""Printer of the text format: graph Functions and IRModules to text.

Owns the canonical spelling of every value (types, attributes, constants,
floats) that :mod:`irkernel.text.parser` reads back; the format itself is
documented there. Type strings, attribute strings and constant literals are
formatted once per distinct table entry (tables are small); the node lines are
then written as bytes by the kernels of :mod:`irkernel.text.emit`, so no Python
runs per node. Imports numpy and irkernel internals only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.function import PRINT_FUNCTION, Function
from irkernel.ir import narrow
from irkernel.ir.ids import (
    BOOL,
    DTYPE_NAMES,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    FLOAT_DTYPES,
    NARROW_FLOAT_DTYPES,
    NUMPY_DTYPES,
)
from irkernel.ir.pools import scalar_from_bits
from irkernel.ir.symbols import SymbolTable
from irkernel.ir.symdim import bounds_text
from irkernel.ir.module import PRINT_MODULE, IRModule
from irkernel.ir.validate import validate_function
from irkernel.text.emit import (
    byte_table,
    distinct_rows_kernel,
    int_texts_kernel,
    line_sizes_kernel,
    literal_table_kernel,
    readonly,
    scatter_entries_kernel,
    write_lines_kernel,
)
from irkernel.text.float_text import float_table

_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Bits of the canonical NaN of each float dtype (what ``np.nan`` converts to).
_CANONICAL_NAN_BITS = {
    FLOAT32: int(np.array(np.nan, np.float32).view(np.uint32)),
    FLOAT64: int(np.array(np.nan, np.float64).view(np.uint64)),
}
_UINT_OF = {FLOAT32: np.uint32, FLOAT64: np.uint64}


# ---------------------------------------------------------------------------
# scalars and literals
# ---------------------------------------------------------------------------

def format_float(value: float) -> str:
    """A float64 literal that parses back to the same value (``repr``; nan/inf bare)."""
    return repr(float(value))


def format_name(name: str) -> str:
    """A function name after ``@``: bare when it is a plain dotted identifier, else quoted."""
    if _BARE_NAME.match(name):
        return name
    return json.dumps(name)


def _format_key(key: str) -> str:
    if _BARE_KEY.match(key):
        return key
    return json.dumps(key)


def _format_scalar_attr(key: str, value: Any) -> str:
    """One function-attribute scalar; TypeError naming ``key`` for other types."""
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return format_float(float(value))
    if isinstance(value, str):
        return json.dumps(value)
    raise TypeError(f"function attribute {key!r}: cannot print a value of type "
                    f"{type(value).__name__} ({value!r}); expected str, int, float, bool, "
                    f"None or a list of those")


def format_function_attrs(attrs: Mapping[str, Any]) -> str:
    """``{key = value, ...}`` with keys sorted; TypeError naming a key of unsupported value."""
    parts = []
    for key in sorted(attrs):
        if not isinstance(key, str):
            raise TypeError(f"function attribute key {key!r} is not a str")
        value = attrs[key]
        if isinstance(value, (list, tuple)):
            text = "[" + ", ".join(_format_scalar_attr(key, v) for v in value) + "]"
        else:
            text = _format_scalar_attr(key, value)
        parts.append(f"{_format_key(key)} = {text}")
    return "{" + ", ".join(parts) + "}"


def _format_node_attr(spec: ops.AttrSpec, value: Any) -> str:
    """A normalized node attribute: dtype names bare, strings quoted, tuples as lists,
    floats as ``repr``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):  # A_INTS, A_AXES, A_FLOATS
        return "[" + ", ".join(format_float(v) if isinstance(v, float) else str(int(v))
                               for v in value) + "]"
    if isinstance(value, str):
        return value if spec.kind == ops.A_DTYPE else json.dumps(value)
    if isinstance(value, float):  # A_FLOAT: repr reads back exactly (nan, inf, -inf bare)
        return format_float(value)
    return str(int(value))


def format_node_attrs(opdef: ops.OpDef, record: tuple[tuple[str, Any], ...],
                      symbols: SymbolTable | None = None) -> str:
    """`` {name = value, ...}`` of one normalized record (empty string for no attributes);
    with ``symbols``, the symbolic dims of shape attributes (``A_DIMS``) by their names."""
    if not record:
        return ""
    specs = {s.name: s for s in opdef.attrs}
    parts = []
    for name, value in record:
        spec = specs.get(name, ops.AttrSpec(name, ops.A_STR))
        if symbols and spec.kind == ops.A_DIMS and any(d <= -2 for d in value):
            text = "[" + ", ".join(symbols.text(d) if d <= -2 else str(d) for d in value) + "]"
        else:
            text = _format_node_attr(spec, value)
        parts.append(f"{name} = {text}")
    return " {" + ", ".join(parts) + "}"


def format_type(code: int, shape: tuple[Any, ...]) -> str:
    """``dtype[d0, d1, ...]``; ``float32[]`` for a scalar. Dims are ints or symbolic dims
    (``SymDim``, printed in their canonical spelling: ``float32[batch, 2*n + 1]``)."""
    return f"{DTYPE_NAMES[code]}[{', '.join(map(str, shape))}]"


def format_dim_lines(symbols: SymbolTable) -> str:
    """The ``dim NAME in [LO, HI]`` declarations of a function's shape variables."""
    return "".join(
        f"  dim {name} in {bounds_text(int(lo), None if hi < 0 else int(hi))}\n"
        for name, lo, hi in zip(symbols.var_names, symbols.var_lower.tolist(),
                                symbols.var_upper.tolist(), strict=True))


# ---------------------------------------------------------------------------
# constant values
# ---------------------------------------------------------------------------

def _with_overrides(strs: np.ndarray, overrides: dict[int, str]) -> np.ndarray:
    """``strs`` (NumPy fixed-width str) with a few elements replaced, widened to fit them."""
    if not overrides:
        return strs
    width = max(strs.dtype.itemsize // 4, *map(len, overrides.values()))
    strs = strs.astype(f"<U{width}")
    for i, text in overrides.items():  # rare: one per fixed-up element
        strs[i] = text
    return strs


def _nan_overrides(values: np.ndarray, code: int, overrides: dict[int, str]) -> None:
    """Spell non-canonical NaNs as ``nan:0x<bits>`` so their bits round-trip."""
    nan_idx = np.flatnonzero(np.isnan(values))
    if not len(nan_idx):
        return
    bits = values.view(_UINT_OF[code])
    canonical = _CANONICAL_NAN_BITS[code]
    width = values.dtype.itemsize * 2
    for i, b in zip(nan_idx.tolist(), bits[nan_idx].tolist(), strict=True):  # one per NaN element
        overrides[i] = "nan" if b == canonical else f"nan:0x{b:0{width}x}"


def _wide_strs(values: np.ndarray, code: int) -> np.ndarray:
    """Shortest float32/float64 literals (NumPy's, which are Python's ``repr`` for float64),
    checked to parse back (via float64, the parser's path) to the same bits."""
    strs = values.astype(str)
    finite = np.isfinite(values)
    uint = _UINT_OF[code]
    with np.errstate(all="ignore"):
        back = strs.astype(np.float64).astype(values.dtype)
    bad = np.flatnonzero(finite & (back.view(uint) != values.view(uint)))
    # rare: double rounding through float64 changed the value
    overrides = {i: repr(float(values[i])) for i in bad.tolist()}
    _nan_overrides(values, code, overrides)
    return _with_overrides(strs, overrides)


def _narrow_strs(values: np.ndarray, code: int) -> np.ndarray:
    """Literals of float16/bfloat16 storage: the shortest float16 text (NumPy's), the
    shortest float32 text of a bfloat16's value; each checked to read back (float64,
    then float32, then the dtype: the parser's path) to the same bits, else the exact
    decimal of the value. NaNs other than the canonical one are ``nan:0x<4 hex digits>``."""
    wide = narrow.widen(values, code)
    strs = values.astype(str) if code == FLOAT16 else wide.astype(str)
    with np.errstate(all="ignore"):
        back = narrow.narrow(strs.astype(np.float64), code)
    bits = values.view(np.uint16)
    nan = np.isnan(wide)
    bad = np.flatnonzero(~nan & (back.view(np.uint16) != bits))
    # rare: double rounding changed the value
    overrides = {i: repr(float(wide[i])) for i in bad.tolist()}
    canonical = int(narrow.narrow(np.array([np.nan]), code).view(np.uint16)[0])
    for i in np.flatnonzero(nan).tolist():  # one per NaN element
        b = int(bits[i])
        overrides[i] = "nan" if b == canonical else f"nan:0x{b:04x}"
    return _with_overrides(strs, overrides)


def _float_strs(values: np.ndarray, code: int) -> np.ndarray:
    """The literals of a flat float array as NumPy fixed-width str."""
    if code in NARROW_FLOAT_DTYPES:
        return _narrow_strs(values, code)
    return _wide_strs(values, code)


def _ascii_table(strs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ASCII fixed-width str as a byte table (``emit.byte_table``'s form) with whole-array
    NumPy: each code point is one byte and the padding is trailing zeros, so the nonzero
    code points in row order are the entries back to back."""
    width = strs.dtype.itemsize // 4
    codes = strs.view(np.uint32).reshape(len(strs), width)
    ptr = np.zeros(len(strs) + 1, np.int64)
    np.cumsum(np.count_nonzero(codes, axis=1), out=ptr[1:])
    return readonly(codes[codes != 0].astype(np.uint8)), readonly(ptr)


def format_values(values: np.ndarray, code: int) -> list[str]:
    """Literals of a flat array of dtype ``code``, one string per element."""
    if code == BOOL:
        return ["true" if v else "false" for v in values.tolist()]
    if code in FLOAT_DTYPES:
        return _float_strs(values, code).tolist()
    return list(map(str, values.tolist()))


def _element_values(func: Function, code: int, const_ptr: np.ndarray, size: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(element index, value) of every element of the constants of dtype ``code``, gathered
    with whole-array NumPy (a Python step only per constant held by reference)."""
    pool, dt = func.consts, NUMPY_DTYPES[code]
    of_code = pool.dtype == code
    scalars = np.flatnonzero(of_code & (size == 1))
    raw = pool.sval[scalars]
    at = [const_ptr[scalars]]
    vals = [scalar_from_bits(raw, code)]
    held = np.zeros(len(pool), bool)
    held[list(pool.external)] = True
    tensors = np.flatnonzero(of_code & (size > 1) & ~held)
    if len(tensors):
        counts = size[tensors]
        within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        at.append(np.repeat(const_ptr[tensors], counts) + within)
        byte_pos = np.repeat(pool.offset[tensors], counts) + within * dt.itemsize
        vals.append(pool.data[byte_pos[:, None] + np.arange(dt.itemsize)].view(dt).ravel())
    for cid in np.flatnonzero(of_code & held).tolist():  # one per constant held by reference
        at.append(const_ptr[cid] + np.arange(int(size[cid])))
        vals.append(pool.external[cid].ravel())
    return np.concatenate(at), np.concatenate(vals)


def _literal_table(func: Function) -> tuple[np.ndarray, np.ndarray]:
    """The literal of every constant in the pool as a byte table (``emit.byte_table``).

    Elements are formatted per dtype in bulk: ints and bools by a kernel, float32 and
    float64 by the kernel of :mod:`irkernel.text.float_text` (NumPy's text, NumPy for
    what it cannot prove), float16/bfloat16 by :func:`format_values`; kernels then place them and
    add the brackets of lists.
    """
    pool = func.consts
    size = func.shapes.size[pool.shape_id].astype(np.int64)
    const_ptr = np.zeros(len(pool) + 1, np.int64)
    np.cumsum(size, out=const_ptr[1:])
    sizes = np.zeros(int(const_ptr[-1]), np.int64)
    parts_bytes, parts_ptr, parts_at, base = [], [], [], 0
    for code in np.unique(pool.dtype).tolist():
        at, values = _element_values(func, code, const_ptr, size)
        if code in _CANONICAL_NAN_BITS:  # float32, float64
            data, ptr = float_table(values, code, _CANONICAL_NAN_BITS[code],
                                    lambda undone, c=code: _ascii_table(_wide_strs(undone, c)))
        elif code in FLOAT_DTYPES:
            data, ptr = _ascii_table(_float_strs(values, code))
        else:
            data, ptr = int_texts_kernel(readonly(values.astype(np.int64)), code == BOOL)
        sizes[at] = np.diff(ptr)
        parts_bytes.append(data)
        parts_ptr.append(ptr[:-1] + base)
        parts_at.append(at)
        base += len(data)
    parts_ptr.append(np.array([base], np.int64))
    elem_bytes, elem_ptr = scatter_entries_kernel(
        readonly(sizes), readonly(np.concatenate(parts_bytes or [np.zeros(0, np.uint8)])),
        readonly(np.concatenate(parts_ptr)),
        readonly(np.concatenate(parts_at or [np.zeros(0, np.int64)]).astype(np.int64)))
    data, ptr = literal_table_kernel(readonly(elem_bytes), readonly(elem_ptr),
                                     readonly(const_ptr), readonly(size != 1))
    return readonly(data), readonly(ptr)


def _const_literals(func: Function) -> list[str]:
    """The literal of every constant in the pool, as str (for callers outside the kernels)."""
    data, ptr = _literal_table(func)
    text = data.tobytes().decode("utf-8")
    return [text[a:b] for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist(), strict=True)]


# ---------------------------------------------------------------------------
# functions and modules
# ---------------------------------------------------------------------------

def _tails(func: Function) -> tuple[np.ndarray, list[str]]:
    """`` {attrs} : type`` of every distinct (op, attrs, type), and each node's index in it."""
    tail_of, first = distinct_rows_kernel(func.kind, func.attr_id, func.shape_id, func.dtype)
    texts = []
    attr_cache: dict[tuple[int, int], str] = {}
    for kind, attr_id, shape_id, code in zip(func.kind[first].tolist(),
                                             func.attr_id[first].tolist(),
                                             func.shape_id[first].tolist(),
                                             func.dtype[first].tolist(), strict=True):
        attrs = attr_cache.get((kind, attr_id))  # one per distinct tail
        if attrs is None:
            attrs = attr_cache[(kind, attr_id)] = format_node_attrs(
                ops.get_op(kind), func.attr_table[attr_id], func.shapes.symbols)
        texts.append(f"{attrs} : {DTYPE_NAMES[code]}[{func.shapes.shape_text(shape_id)}]")
    tail_of.flags.writeable = False
    return tail_of, texts


def _function_text(func: Function, head: str, foot: str) -> str:
    """``head``, the lines of all nodes in node-id order, then ``foot``, as one str.

    Everything distinct is formatted once here; :mod:`irkernel.text.emit` writes
    the lines from the columns and these byte tables into one buffer (no Python
    per node, and no copy of the text but the final decode).
    """
    all_ops = ops.all_ops()
    tail_of, tails = _tails(func)
    op_bytes, op_ptr = byte_table([op.name for op in all_ops])
    tail_bytes, tail_ptr = byte_table(tails)
    lit_bytes, lit_ptr = _literal_table(func) if len(func.consts) else byte_table([])
    name_bytes, name_ptr = byte_table(list(func.param_names))
    head_bytes, foot_bytes = byte_table([head])[0], byte_table([foot])[0]
    encoding = ops.op_arrays().encoding
    if len(encoding) != len(all_ops):  # an op registered in between: take a fresh table
        encoding = np.array([op.encoding for op in all_ops], np.int8)
        encoding.flags.writeable = False
    offsets = line_sizes_kernel(func.kind, func.a0, func.a1, func.extra, tail_of, encoding,
                                op_ptr, tail_ptr, lit_ptr, name_ptr, len(head_bytes))
    offsets.flags.writeable = False
    buf = write_lines_kernel(func.kind, func.a0, func.a1, func.extra, tail_of, encoding,
                             offsets, op_bytes, op_ptr, tail_bytes, tail_ptr, lit_bytes, lit_ptr,
                             name_bytes, name_ptr, head_bytes, foot_bytes)
    return str(memoryview(buf), "utf-8")


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
    IRError
        A malformed Function (``irkernel.ir.validate``).
    """
    validate_function(func, "script", name)  # every id indexes its table below
    attrs = f"attrs {format_function_attrs(func.attrs)} " if func.attrs else ""
    outputs = ", ".join(f"%{o}" for o in func.outputs.tolist())
    dims = format_dim_lines(func.shapes.symbols) if func.shapes.symbols else ""
    return _function_text(func, f"@{format_name(name)} = graph {attrs}{{\n{dims}",
                          f"  return {outputs}\n}}\n")


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
    parts: list[str] = []
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
    return parts[0] if len(parts) == 1 else "\n".join(parts)  # no copy of a lone function


PRINT_FUNCTION.install(print_function)
PRINT_MODULE.install(print_module)

__all__ = ["format_float", "format_type", "format_values", "print_function", "print_module"]
