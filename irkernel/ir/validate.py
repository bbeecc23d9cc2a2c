"""Cheap validation of a graph Function before compiled code indexes with its columns.

Every public entry that runs a Numba or LLVM kernel over a Function calls
:func:`validate_function` first: the pass runner (before and after every leaf
pass), ``rebuild``, the interpreter, the printer, structural equality and
hashing, ``runtime.build`` and the graph executor. It checks, with O(n)
whole-array work, the invariants those kernels index with, so that a malformed
Function is an ``IRError`` naming the entry, the function, the node and the
column: never a signal inside a kernel, an IndexError or a gigabyte allocation.

Checked (rules, in order):

1. columns: NumPy arrays of their fixed dtype, 1-D, C-contiguous, equal lengths;
2. tables: a ``ShapeTable`` (whose constructor bounds every shape), an
   ``AttrTable``, and a ``ConstPool`` whose dtype codes and shape ids are in
   range and whose entries lie inside its data;
3. nodes: opcode known; ``a0``/``a1`` as the op's encoding says (operands in
   range and earlier than the node: topological order; const ids, param
   positions, variadic ranges inside ``extra``, fixed arities, unused slots
   NONE); every operand in ``extra`` earlier than its node; dtype codes, shape
   ids and attribute ids inside their tables;
4. params: node ids of PARAM nodes, positions 0..p-1 in order; outputs: at
   least one, each a node id.

Not checked (``ik.verify`` does): the op's dtype and shape rule, that an
attribute set belongs to its op, parameter names, call targets. A Function
that validates but does not verify never crashes a consumer, but what it
computes means nothing; the consumers that evaluate ops one at a time in
Python (the interpreter, FoldConstant's tensor path) check the node's type
rule first and raise IRError.

Cost, paid once per Function: a Function is immutable, so a validated one is
remembered by identity (a WeakSet, like the operand CSR cache) and a later
entry costs one set lookup. ``GraphBuilder.finish``, ``rebuild`` and ``verify``
mark their outputs, so a pipeline over built graphs never runs the sweep at
all. The sweep itself is one branch-free pass over the six node columns (op
classes are bits of 64-bit masks shifted by the opcode: no table gathers, so it
vectorizes) and a second over variadic nodes' operand lists; only when it
finds a break does the precise ``check_structure_kernel`` run, to name the
node and rule. Measured in ``bench/bench_validate.py``.

Alternatives considered: ``ik.verify`` at every entry (its type sweep costs
as much as a pass); ``NUMBA_BOUNDSCHECK`` (every kernel slower, and an
IndexError without node or rule); checking inside each kernel (every kernel
would repeat the rules, and a pass would have to unwind half-written output).
Imports the IR's Function, module, tables and kernels; nothing above ``ir``.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.checks import STRUCTURE_RULES, check_structure_kernel
from irkernel.ir.errors import IRError
from irkernel.ir.function import _COLUMNS, CHECK_LOADED, Function
from irkernel.ir.ids import (
    DTYPE_NAMES,
    ENC_BINARY,
    ENC_CONST,
    ENC_NULLARY,
    ENC_PARAM,
    ENC_UNARY,
    ENC_VARIADIC,
    NUMPY_DTYPES,
)
from irkernel.ir.jit import kernel
from irkernel.ir.module import IRModule
from irkernel.ir.pools import AttrTable, ConstPool, ShapeTable

#: Functions that passed :func:`check_function` (or were built by a path that
#: guarantees it). Weak: an entry goes when its Function goes.
_VALIDATED: weakref.WeakSet[Function] = weakref.WeakSet()

#: The op-class masks hold one bit per opcode; beyond this the precise kernel runs alone.
_MASK_BITS = 128
_N_DTYPES = len(DTYPE_NAMES)  # an immutable int: kernels may read it as a global
_ITEMSIZE = np.array([d.itemsize for d in NUMPY_DTYPES], np.int64)


# ---------------------------------------------------------------------------
# the sweep
# ---------------------------------------------------------------------------

@kernel
def scan_structure_kernel(kind, a0, a1, extra, dtype, shape_id, attr_id, op_masks, op_arity,
                          n_consts, n_params, n_shapes, n_attrs):
    """Whether every node obeys the structural rules (True), as one sweep.

    Arrays: kind int16[n]; a0, a1, shape_id, attr_id int32[n]; dtype int8[n];
    extra int32[m]; op_masks int64[12]: one bit per opcode for (known, operand in
    a0, binary, const, param, variadic), each class two words (opcodes 0-63, 64-127);
    op_arity int8[n_ops]. The first loop
    checks the opcode, both slots as the encoding says and the table ids of every
    node branch-free (the masks are shifted by the opcode: no table gather, so it
    vectorizes); the second visits only variadic nodes' operand lists. It agrees
    with ``check_structure_kernel``, which names the node when this says False.
    """
    n = kind.shape[0]
    m = extra.shape[0]
    known_lo, known_hi, op0_lo, op0_hi = op_masks[0], op_masks[1], op_masks[2], op_masks[3]
    bin_lo, bin_hi, const_lo, const_hi = op_masks[4], op_masks[5], op_masks[6], op_masks[7]
    param_lo, param_hi, var_lo, var_hi = op_masks[8], op_masks[9], op_masks[10], op_masks[11]
    n_dtypes = np.uint32(_N_DTYPES)
    shapes, attrs = np.uint32(n_shapes), np.uint32(n_attrs)
    bad = np.int64(0)
    bad_ids = False
    n_var = np.int64(0)
    for i in range(n):
        k = np.int64(kind[i])
        s = k & 63
        hi = -((k >> 6) & 1)  # all ones for opcodes 64-127: pick each class's high word
        known = (((known_lo & ~hi) | (known_hi & hi)) >> s) & 1 & np.int64((k >= 0)
                                                                         & (k < 128))
        # all ones when the class holds the opcode
        is_op0 = -((((op0_lo & ~hi) | (op0_hi & hi)) >> s) & 1)
        is_bin = -((((bin_lo & ~hi) | (bin_hi & hi)) >> s) & 1)
        is_const = -((((const_lo & ~hi) | (const_hi & hi)) >> s) & 1)
        is_param = -((((param_lo & ~hi) | (param_hi & hi)) >> s) & 1)
        is_var = -((((var_lo & ~hi) | (var_hi & hi)) >> s) & 1)
        is_none0 = ~(is_op0 | is_const | is_param | is_var) & 1  # nullary: a0 is NONE
        # a0 - lo in [0, hi - lo) as one unsigned compare; a NONE slot is [-1, 0)
        hi0 = ((is_op0 & i) | (is_const & n_consts) | (is_param & n_params)
               | (is_var & (m + 1)) | is_none0)
        bad |= np.int64(np.uint64(np.int64(a0[i]) + is_none0) >= np.uint64(hi0))
        is_none1 = ~(is_bin | is_var) & 1
        hi1 = (is_bin & i) | (is_var & (m + 1)) | is_none1
        bad |= np.int64(np.uint64(np.int64(a1[i]) + is_none1) >= np.uint64(hi1))
        bad |= 1 - known
        n_var += is_var & 1
        # 32-bit compares kept apart from the 64-bit ones above (twice the SIMD lanes)
        bad_ids |= ((np.uint32(np.int32(dtype[i])) >= n_dtypes)
                    | (np.uint32(shape_id[i]) >= shapes) | (np.uint32(attr_id[i]) >= attrs))
    if bad != 0 or bad_ids:
        return False
    if n_var:
        for i in range(n):
            k = kind[i]
            if ((var_hi if k >= 64 else var_lo) >> (k & 63)) & 1:
                first, count = a0[i], a1[i]
                if first + count > m or (op_arity[k] >= 0 and count != op_arity[k]):
                    return False
                for t in range(first, first + count):
                    v = extra[t]
                    if v < 0 or v >= i:
                        return False
    return True


def _op_masks() -> np.ndarray | None:
    """int64[12] op-class masks for the sweep (two words a class), or None when opcodes
    exceed 128 bits."""
    encoding = ops.op_arrays().encoding
    if len(encoding) > _MASK_BITS:
        return None
    classes = ((ENC_NULLARY, ENC_UNARY, ENC_BINARY, ENC_CONST, ENC_PARAM, ENC_VARIADIC),
               (ENC_UNARY, ENC_BINARY), (ENC_BINARY,), (ENC_CONST,), (ENC_PARAM,),
               (ENC_VARIADIC,))
    masks = np.zeros(2 * len(classes), np.uint64)
    for j, members in enumerate(classes):
        for code in np.flatnonzero(np.isin(encoding, members)).tolist():  # per opcode
            masks[2 * j + code // 64] |= np.uint64(1) << np.uint64(code % 64)
    out = masks.view(np.int64)
    out.setflags(write=False)
    return out


#: Masks by the op table's encoding column (the table is append-only; tests swap it).
_MASKS_CACHE: dict[bytes, np.ndarray | None] = {}


def _masks() -> np.ndarray | None:
    key = ops.op_arrays().encoding.tobytes()
    if key not in _MASKS_CACHE:
        _MASKS_CACHE[key] = _op_masks()
    return _MASKS_CACHE[key]


# ---------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------

class _Report:
    """Formats one failure: ``where: function: node i (op): column c: what (rule: r)``."""

    def __init__(self, func: Function, fname: str, where: str) -> None:
        self.func, self.fname, self.where = func, fname, where

    def __call__(self, node: int | None, column: str, what: str, rule: str) -> IRError:
        prefix = f"{self.where}: " if self.where else ""
        if node is None:
            at = ""
        else:
            opcode = int(self.func.kind[node])
            name = ops.get_op(opcode).name if 0 <= opcode < ops.num_ops() else "unknown op"
            at = f"node {node} ({name}): "
        return IRError(f"{prefix}{self.fname}: {at}column {column}: {what} (rule: {rule})")


def _check_columns(func: Function, fail: _Report) -> None:
    for col, dtype in _COLUMNS.items():
        arr = getattr(func, col, None)
        if not isinstance(arr, np.ndarray):
            raise fail(None, col, f"is {type(arr).__name__}, not a NumPy array", "column dtypes")
        if arr.dtype != dtype or arr.ndim != 1 or not arr.flags.c_contiguous:
            raise fail(None, col, f"is {arr.dtype}{list(arr.shape)}, expected a C-contiguous "
                       f"1-D {np.dtype(dtype).name} array", "column dtypes")
    n = len(func.kind)
    for col in ("a0", "a1", "dtype", "shape_id", "attr_id"):
        if len(getattr(func, col)) != n:
            raise fail(None, col, f"has length {len(getattr(func, col))}, expected {n} "
                       "(the length of kind)", "column lengths")
    if not isinstance(func.param_names, tuple) or len(func.param_names) != len(func.params):
        raise fail(None, "params", "param_names and params differ in length", "params")


def _check_tables(func: Function, fail: _Report) -> None:
    for field, cls in (("shapes", ShapeTable), ("attr_table", AttrTable), ("consts", ConstPool)):
        if not isinstance(getattr(func, field, None), cls):
            raise fail(None, field, f"is {type(getattr(func, field, None)).__name__}, not a "
                       f"{cls.__name__}", "tables")
    pool, shapes = func.consts, func.shapes
    k = len(pool.dtype)
    if not (len(pool.shape_id) == len(pool.sval) == k and len(pool.offset) == k + 1):
        raise fail(None, "consts", "const pool columns differ in length", "const pool")
    if not k:
        return
    if int(pool.dtype.min()) < 0 or int(pool.dtype.max()) >= len(DTYPE_NAMES):
        raise fail(None, "consts.dtype", "holds a dtype code outside [0, "
                   f"{len(DTYPE_NAMES)})", "const pool")
    if int(pool.shape_id.min()) < 0 or int(pool.shape_id.max()) >= len(shapes):
        raise fail(None, "consts.shape_id", f"holds a shape id outside [0, {len(shapes)})",
                   "const pool")
    # Offsets first (so the sums below can not wrap), then each tensor entry's bytes.
    offset, n_data = pool.offset, len(pool.data)
    if int(offset.min()) < 0 or int(offset.max()) > n_data or np.any(offset[1:] < offset[:-1]):
        raise fail(None, "consts.offset", f"offsets are not increasing inside the data "
                   f"({n_data} bytes)", "const pool")
    size = shapes.size[pool.shape_id]
    nbytes = np.where(size != 1, size * _ITEMSIZE[pool.dtype], 0)  # scalars live in sval
    if pool.external:  # held by reference: no bytes in data (verify checks the arrays)
        ext = np.fromiter(pool.external, np.int64, len(pool.external))
        nbytes[ext[(ext >= 0) & (ext < k)]] = 0
    if np.any(nbytes > offset[1:] - offset[:-1]):
        cid = int(np.argmax(nbytes > offset[1:] - offset[:-1]))
        raise fail(None, "consts.offset", f"constant {cid} needs {int(nbytes[cid])} bytes "
                   f"but its entry holds {int(offset[cid + 1] - offset[cid])}", "const pool")


def _structure_column(func: Function, node: int, rule: int, detail: int) -> str:
    """The column a ``check_structure_kernel`` rule code blames."""
    if rule == 1:
        return "kind"
    enc = int(ops.op_arrays().encoding[int(func.kind[node])])  # a known opcode past rule 1
    if rule in (2, 3):
        if enc == ENC_VARIADIC:
            return "extra"
        return "a0" if int(func.a0[node]) == detail else "a1"
    if rule == 5:
        return "a1" if int(func.a1[node]) == detail and int(func.a1[node]) != -1 else "a0"
    return {1: "kind", 4: "a1", 6: "a0/a1", 7: "a0", 8: "a0", 9: "shape_id", 10: "attr_id",
            11: "dtype"}[rule]


def _structure_message(func: Function, node: int, rule: int, detail: int) -> str:
    n, m = func.num_nodes, len(func.extra)
    k = int(func.kind[node])
    if rule == 1:
        return f"opcode {detail} is not in the op table [0, {ops.num_ops()})"
    if rule == 2:
        return f"operand {detail} is out of range [0, {n})"
    if rule == 3:
        return f"operand {detail} is not earlier than the node"
    if rule == 4:
        return f"has {detail} operands, expected {ops.get_op(k).arity}"
    if rule == 5:
        return f"unused operand slot holds {detail}, not NONE (-1)"
    if rule == 6:
        first, count = int(func.a0[node]), int(func.a1[node])
        return f"operands extra[{first}:{first + count}] lie outside extra (length {m})"
    limits = {7: ("const id", len(func.consts)), 8: ("param position", len(func.params)),
              9: ("shape id", len(func.shapes)), 10: ("attribute id", len(func.attr_table)),
              11: ("dtype code", len(DTYPE_NAMES))}
    what, limit = limits[rule]
    return f"{what} {detail} is not in [0, {limit})"


def _check_nodes(func: Function, fail: _Report) -> None:
    n_shapes, n_attrs = len(func.shapes), len(func.attr_table)
    table = ops.op_arrays()
    masks = _masks()
    if masks is not None and scan_structure_kernel(
            func.kind, func.a0, func.a1, func.extra, func.dtype, func.shape_id, func.attr_id,
            masks, table.arity, len(func.consts), len(func.params), n_shapes, n_attrs):
        return
    # A break (or an op table too large for the masks): the precise kernel names it.
    bad, rule, detail = check_structure_kernel(
        func.kind, func.a0, func.a1, func.extra, func.dtype, func.shape_id, func.attr_id,
        table.encoding, table.arity, len(func.consts), len(func.params), n_shapes, n_attrs, 0)
    if bad < 0:  # the sweep and the precise kernel disagree: trust the precise one
        return
    node, rule, detail = int(bad), int(rule), int(detail)
    raise fail(node, _structure_column(func, node, rule, detail),
               _structure_message(func, node, rule, detail), STRUCTURE_RULES[rule])


def _check_params_outputs(func: Function, fail: _Report) -> None:
    n, params, outputs = func.num_nodes, func.params, func.outputs
    if len(params):
        bad = np.flatnonzero((params < 0) | (params >= n))
        if len(bad):
            raise fail(None, "params", f"params[{int(bad[0])}] = {int(params[bad[0]])} is not "
                       f"a node id in [0, {n})", "params")
        bad = np.flatnonzero(func.kind[params] != ops.OP_PARAM)
        if len(bad):
            raise fail(int(params[bad[0]]), "kind", f"is params[{int(bad[0])}] but not a param "
                       "node", "params")
        bad = np.flatnonzero(func.a0[params] != np.arange(len(params), dtype=np.int32))
        if len(bad):
            node = int(params[bad[0]])
            raise fail(node, "a0", f"has position {int(func.a0[node])}, expected "
                       f"{int(bad[0])}", "param positions")
    if not len(outputs):
        raise fail(None, "outputs", "is empty: a function has at least one output", "outputs")
    bad = np.flatnonzero((outputs < 0) | (outputs >= n))
    if len(bad):
        raise fail(None, "outputs", f"outputs[{int(bad[0])}] = {int(outputs[bad[0]])} is not a "
                   f"node id in [0, {n})", "outputs")


def _function_name(func: Any, name: str | None) -> str:
    if name is not None:
        return name
    attrs = getattr(func, "attrs", None)
    symbol = attrs.get("global_symbol") if hasattr(attrs, "get") else None
    return symbol if isinstance(symbol, str) else "<function>"


def check_function(func: Function, where: str = "", name: str | None = None) -> None:
    """Run every check of the module docstring on ``func`` (no memo); raise on the first break.

    Parameters
    ----------
    func : Function
    where : str
        The entry that asks (a pass name, ``"interpret"``, ...), first in the message.
    name : str, optional
        The function's name in its module (default: its ``global_symbol``).

    Raises
    ------
    IRError
        ``"where: name: node i (op): column c: what (rule: r)"``.
    TypeError
        When ``func`` is not a graph Function.
    """
    if not isinstance(func, Function):
        raise TypeError(f"{where + ': ' if where else ''}expected a graph Function, got "
                        f"{type(func).__name__}")
    fail = _Report(func, _function_name(func, name), where)
    _check_columns(func, fail)
    _check_tables(func, fail)
    _check_nodes(func, fail)
    _check_params_outputs(func, fail)


def validate_function(func: Function, where: str = "", name: str | None = None) -> None:
    """:func:`check_function`, once per Function: a validated Function is remembered.

    The cheap check every entry that runs compiled code calls (see the module
    docstring); a Function marked by :func:`mark_validated` costs one set lookup.
    """
    if func in _VALIDATED:
        return
    check_function(func, where, name)
    _VALIDATED.add(func)


def symbol_problem(name: str | None, func: Function) -> str | None:
    """What is wrong with ``func``'s ``global_symbol`` attribute, or None.

    ``name`` is the function's key in its module (None for a lone Function). The
    symbol is what makes a function public: DeadCodeElimination keeps public
    functions and what they call, and ``runtime.build`` exposes them. So a symbol,
    when present, must be a non-empty str equal to the function's name (TVM's
    well-formed rule; the executable looks functions up by name): ``global_symbol =
    none`` would otherwise pass for public here and private in DeadCodeElimination,
    which would drop the function without a word. (A private ``main`` that nothing
    calls is DeadCodeElimination's error to report: it is fine until then.)
    """
    attrs = func.attrs
    if "global_symbol" not in attrs:
        return None
    symbol = attrs["global_symbol"]
    if not isinstance(symbol, str) or not symbol:
        return (f"global_symbol is {symbol!r}; it must be a non-empty str (leave the "
                "attribute out to make a function private)")
    if name is not None and symbol != name:
        return f"global_symbol {symbol!r} differs from the function's name {name!r}"
    return None


def validate_module(mod: IRModule, where: str = "") -> None:
    """:func:`validate_function` on every graph Function of ``mod``, named by its key,
    and :func:`symbol_problem` on each (O(1) per function)."""
    for name, func in mod.functions.items():
        if isinstance(func, Function):
            if func not in _VALIDATED:
                validate_function(func, where, name)
            problem = symbol_problem(name, func)
            if problem is not None:
                prefix = f"{where}: " if where else ""
                raise IRError(f"{prefix}{name}: {problem} (rule: global_symbol)")


def is_validated(func: object) -> bool:
    """Whether ``func`` is a Function known to pass :func:`check_function`."""
    return isinstance(func, Function) and func in _VALIDATED


def mark_validated(func: Function) -> Function:
    """Record that ``func`` passes :func:`check_function` without running it; returns ``func``.

    Only for constructors that guarantee the invariants by construction
    (``GraphBuilder.finish``, ``rebuild`` of a validated input, ``verify``).
    """
    _VALIDATED.add(func)
    return func


def _check_loaded(func: Function) -> None:
    """An unpickled Function is validated before anyone can use it. The memo is not
    trusted across processes: the columns came from bytes, so the check runs."""
    validate_function(func, where="unpickled")


CHECK_LOADED.install(_check_loaded)


__all__ = ["check_function", "is_validated", "mark_validated", "symbol_problem",
           "validate_function", "validate_module"]
