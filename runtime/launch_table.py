"""Build time of a graph executor: the launch table of one lowered graph Function.

A lowered graph Function holds ``param``, ``const``, ``call_tir`` and
``call_func`` nodes. Each ``call_tir`` is one *launch* of a compiled kernel,
whose packed entry takes an ``int64`` slot per parameter and shape var
(``runtime/lower.py``). The table stores each launch argument once, as an
``int32`` index into ``values``, a short ``int64`` array of the distinct values
the arguments take, which the native launcher (``runtime/launcher.py``)
resolves into the kernel's slots as it runs. ``values`` is three runs:

* *dynamic values*, known per call (``[0, n_dynamic)``): the inputs (one per
  parameter, in order), the fresh outputs, and the results of ``call_func`` nodes;
* the distinct arena offsets of intermediates (``[arena_begin, arena_end)``,
  ``runtime/memory_plan.py``), made absolute when an arena is bound;
* static values: the addresses of ``const`` nodes in the module's pool and the
  shape vars of shape-generic kernels (their value, fixed by the call's types).

A binding (one per concurrent call, ``runtime/executor.py``) copies only
``values``; the per-launch arrays (kernel index, argument start, arguments,
node) are shared, so the executor's state is about 4 bytes per argument and 12
per launch, not an int64 slot per argument in the table and again per binding.

Everything is whole-array NumPy over the nodes. Python runs once per kernel
and once per distinct (kernel, operand types) signature, which is where each
call is checked against its kernel (buffer count, dtypes, static extents,
shape vars, layout, only the output written), so the run can use raw
pointers. ``call_func`` nodes split the launches into :class:`Segment` s; the
executor runs the callee in Python between them, with operands that are a
:class:`ConstOperand`, an :class:`ArenaOperand` or a :class:`DynamicOperand`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.call_tir import bind_call_tir
from irkernel.ir.distinct import sorted_distinct
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.ids import DTYPE_NAMES, NUMPY_DTYPES, dtype_code
from irkernel.ir.operands import operand_csr
from irkernel.tir.buffer import Buffer
from irkernel.tir.expr import IntImm, Var
from runtime.abi import CallingConvention
from runtime.launch_values import const_addresses, distinct_ints
from runtime.launcher import HEAD
from runtime.memory_plan import ALIGN, MemoryPlan

# Where a node's buffer lives (a column over the nodes while the table is built).
_NONE, _CONST, _ARENA, _DYNAMIC = 0, 1, 2, 3


class CompiledKernel:
    """What the executor needs of one compiled PrimFunc: its packed entry and convention.

    ``owner`` is whatever keeps the machine code at ``address`` alive (the
    ``runtime.Kernel``, which holds the JIT engine): an executor outliving its
    Executable (``runtime.build(mod)["main"]``) must not call freed code.
    """

    __slots__ = ("address", "convention", "name", "owner")

    def __init__(self, name: str, convention: CallingConvention, address: int,
                 owner: Any = None) -> None:
        self.name, self.convention, self.address = name, convention, address
        self.owner = owner


def _static_dims(buf: Buffer) -> tuple[int, ...] | None:
    if not all(isinstance(d, IntImm) for d in buf.shape):
        return None
    return tuple(int(d.value) for d in buf.shape)  # type: ignore[attr-defined]


def check_kernel_call(fname: str, node: int, kern: CompiledKernel,
                      types: list[tuple[np.dtype | str, tuple[int, ...]]]) -> list[int]:
    """Check that ``kern`` can run with raw pointers to C-contiguous buffers of ``types``.

    ``types`` are the (dtype, shape) of the operands, then of the result (a NumPy dtype or
    an irkernel dtype name: bfloat16 is stored as uint16, so its name must be given). A
    buffer parameter of one dimension accepts any operand of its dtype (it
    sees the operand's C-order flat view: how shape-generic kernels take
    tensors of any rank); otherwise the ranks and static extents must match.
    Shape vars bind to the extents they stand for and must agree.

    Returns
    -------
    list of int
        The value of each shape var of the kernel, in order.

    Raises
    ------
    IRError
        Naming the function, node, callee and parameter.
    """
    conv = kern.convention
    where = f"{fname}: node {node} (call_tir {kern.name!r})"
    if len(conv.params) != len(types):
        raise IRError(f"{where}: the PrimFunc has {len(conv.params)} parameters, expected "
                      f"{len(types)} ({len(types) - 1} operands + the output)")
    env, problem = bind_call_tir(conv.params, [(dt if isinstance(dt, str) else dt.name,
                                                tuple(shape)) for dt, shape in types])
    if problem is not None:
        raise IRError(f"{where}: {problem.describe(quote=True)}")
    for pos, param in enumerate(conv.params):
        if param.strides:
            raise IRError(f"{where}: parameter {pos} ({param.name!r}) declares strides; "
                          "call_tir passes C-contiguous buffers")
        is_output = pos == len(types) - 1
        if (param.name in conv.written) != is_output:
            what = "never writes its output" if is_output else "writes operand"
            raise IRError(f"{where}: the PrimFunc {what} {param.name!r} (destination passing: "
                          "only the last buffer is written)")
    missing = [v.name for v in conv.shape_vars if v.name not in env]
    if missing:
        raise IRError(f"{where}: shape vars {missing} are not the extent of any parameter")
    return [env[v.name] for v in conv.shape_vars]


def _flat_check(kern: CompiledKernel, dtypes: np.ndarray, sizes: np.ndarray
                ) -> np.ndarray | None:
    """The shape-var values of every call of a *flat* kernel (only 1-d buffer parameters,
    as shape-generic kernels), checked with whole-array NumPy; None for any other kernel
    or when a call does not fit (the caller then checks per type, naming the culprit).

    ``dtypes``/``sizes`` are [calls, params]: each call's operands and result.
    """
    conv = kern.convention
    params = conv.params
    if not all(isinstance(p, Buffer) and p.ndim == 1 and not p.strides for p in params):
        return None
    if any((p.name in conv.written) != (k == len(params) - 1) for k, p in enumerate(params)):
        return None
    codes = np.array([dtype_code(p.dtype) for p in params], np.int64)
    if not np.array_equal(dtypes, np.broadcast_to(codes, dtypes.shape)):
        return None
    first: dict[str, int] = {}
    for k, p in enumerate(params):
        dim = p.shape[0]
        if isinstance(dim, IntImm):
            if np.any(sizes[:, k] != dim.value):
                return None
        elif isinstance(dim, Var):
            j = first.setdefault(dim.name, k)
            if j != k and np.any(sizes[:, k] != sizes[:, j]):
                return None
        else:
            return None
    if any(v.name not in first for v in conv.shape_vars):
        return None
    return np.stack([sizes[:, first[v.name]] for v in conv.shape_vars], axis=1) \
        if conv.shape_vars else np.zeros((len(sizes), 0), np.int64)


@dataclass(frozen=True)
class ConstOperand:
    """A ``call_func`` operand that is a constant of the module."""

    value: np.ndarray


@dataclass(frozen=True)
class ArenaOperand:
    """A ``call_func`` operand that is an intermediate: a view of the arena."""

    offset: int
    dtype: np.dtype
    shape: tuple[int, ...]


@dataclass(frozen=True)
class DynamicOperand:
    """A ``call_func`` operand known per call (an input, an output, a call's result)."""

    index: int  # into the call's dynamic values


Operand = ConstOperand | ArenaOperand | DynamicOperand


@dataclass(frozen=True)
class CallFunc:
    """One ``call_func`` between native segments: its operands and result."""

    node: int
    callee: str
    operands: tuple[Operand, ...]
    result: int  # dynamic index of the result


@dataclass(frozen=True)
class Segment:
    """Launches ``[begin, end)`` of the table, then ``call`` (None after the last)."""

    begin: int
    end: int
    call: CallFunc | None


@dataclass(frozen=True)
class FreshOutput:
    """An output a kernel writes: its node, and its index among the dynamic values."""

    node: int
    index: int


@dataclass
class LaunchTable:
    """The launches of one graph Function (see the module docstring)."""

    kernel_ids: np.ndarray  # int32[steps]: each launch's kernel, an index into kernel_names
    fns: np.ndarray  # int64[kernels]: packed entry address of each kernel
    starts: np.ndarray  # int32[steps + 1] (int64 past 2**31 arguments): first argument
    args: np.ndarray  # int32[arguments + HEAD]: each launch's arguments, indices into values
    values: np.ndarray  # int64: dynamic (0 here), arena offsets, static values
    arena_begin: int  # values[arena_begin:arena_end] are arena offsets
    arena_end: int
    width: int  # the most arguments of one launch (a binding's scratch row)
    dyn_align: np.ndarray  # int64[n_dynamic]: alignment every use of a value needs
    segments: list[Segment]
    fresh: list[FreshOutput]
    n_dynamic: int
    keep: list[Any]  # arrays whose addresses are in ``values`` (constants)
    nodes: np.ndarray  # int32[steps]: the call_tir node of each launch (profiles, errors)
    kernel_names: tuple[str, ...]  # the distinct callees, sorted

    @property
    def wide(self) -> bool:
        """Whether ``starts`` is int64 (the launcher's other variant)."""
        return self.starts.dtype == np.int64

    @property
    def nbytes(self) -> int:
        """Bytes of the table's arrays (what every call shares)."""
        return sum(a.nbytes for a in (self.kernel_ids, self.fns, self.starts, self.args,
                                      self.values, self.dyn_align, self.nodes))


def build_table(name: str, func: Function, kernels: dict[str, CompiledKernel],
                plan: MemoryPlan) -> LaunchTable:
    """The launch table of ``func``; IRError when a node cannot run (see the module doc)."""
    kind = func.kind
    n = func.num_nodes
    is_tir = kind == ops.OP_CALL_TIR
    is_func = kind == ops.OP_CALL_FUNC
    bad = np.nonzero(~(is_tir | is_func | (kind == ops.OP_PARAM) | (kind == ops.OP_CONST)))[0]
    if len(bad):
        node = int(bad[0])
        raise IRError(f"{name}: node {node} ({func.op(node).name}) is a graph op the "
                      "executor cannot run; only param, const, call_tir and call_func "
                      "nodes are executable (was LegalizeOps disabled?)")
    # -- where every node's buffer lives ------------------------------------
    src = np.zeros(n, np.int8)
    value = np.zeros(n, np.int64)
    params = func.params.astype(np.int64)
    src[params] = _DYNAMIC
    value[params] = np.arange(len(params))
    src[plan.node_ids] = _ARENA
    value[plan.node_ids] = plan.offsets
    n_dynamic = len(params)
    fresh: list[FreshOutput] = []
    for node in dict.fromkeys(func.outputs.tolist()):  # outputs kernels write, once each
        if is_tir[node]:
            src[node], value[node] = _DYNAMIC, n_dynamic
            fresh.append(FreshOutput(node, n_dynamic))
            n_dynamic += 1
    func_nodes = np.nonzero(is_func)[0]
    src[func_nodes] = _DYNAMIC
    value[func_nodes] = n_dynamic + np.arange(len(func_nodes))
    n_dynamic += len(func_nodes)
    const_nodes = np.nonzero(kind == ops.OP_CONST)[0]
    src[const_nodes] = _CONST

    # -- one launch per call_tir node ----------------------------------------
    records = func.attr_table.records
    callee_of: dict[int, str] = {}
    for aid in sorted_distinct(func.attr_id[is_tir | is_func]).tolist():
        callee = dict(records[aid]).get("callee")
        if not isinstance(callee, str):
            raise IRError(f"{name}: a call node has no callee attribute (attr record {aid})")
        callee_of[aid] = callee
    calls = np.nonzero(is_tir)[0]
    names = sorted({callee_of[a] for a in sorted_distinct(func.attr_id[calls]).tolist()})
    for callee in names:
        if callee not in kernels:
            node = int(calls[[callee_of[int(a)] == callee for a in func.attr_id[calls]]][0])
            raise IRError(f"{name}: node {node} (call_tir): callee {callee!r} is not a "
                          "compiled PrimFunc of the module")
    kid_of_attr = np.full(len(records), -1, np.int64)
    index_of = {callee: k for k, callee in enumerate(names)}  # a dict: O(1) per attr record
    for aid, callee in callee_of.items():
        kid_of_attr[aid] = index_of.get(callee, -1)
    kid = kid_of_attr[func.attr_id[calls]]
    csr = operand_csr(func)
    n_ops_of = (csr.ptr[calls + 1] - csr.ptr[calls]).astype(np.int64)
    convs = [kernels[c].convention for c in names]
    n_params = np.array([len(c.params) for c in convs], np.int64)
    n_vars = np.array([len(c.shape_vars) for c in convs], np.int64)
    if len(calls) and np.any(n_ops_of + 1 != n_params[kid]):
        k = int(np.nonzero(n_ops_of + 1 != n_params[kid])[0][0])
        node, kern = int(calls[k]), kernels[names[int(kid[k])]]
        raise IRError(f"{name}: node {node} (call_tir {kern.name!r}): the PrimFunc has "
                      f"{n_params[kid[k]]} parameters, expected {n_ops_of[k] + 1} "
                      f"({n_ops_of[k]} operands + the output)")
    width = n_params[kid] + n_vars[kid] if len(calls) else np.zeros(0, np.int64)
    starts = np.zeros(len(calls) + 1, np.int64)
    np.cumsum(width, out=starts[1:])
    total = int(starts[-1])
    # slot -> the node whose buffer it holds (-1: a shape var value)
    slot_node = np.full(total, -1, np.int64)
    slot_call = np.repeat(np.arange(len(calls)), width)
    within = np.arange(total, dtype=np.int64) - starts[slot_call]
    is_operand = within < n_ops_of[slot_call]
    slot_node[is_operand] = csr.ids[csr.ptr[calls[slot_call[is_operand]]]
                                    + within[is_operand]]
    is_result = within == n_ops_of[slot_call]
    slot_node[is_result] = calls[slot_call[is_result]]
    del slot_call, within, is_operand, is_result  # the table's build peaks past 500 B/node
    slots = np.zeros(total, np.int64)
    slot_align = np.ones(total, np.int64)

    # -- check each distinct (kernel, types) signature once -------------------
    type_key = (func.dtype.astype(np.int64) << 32) | func.shape_id
    sizes = func.shapes.size[func.shape_id].astype(np.int64)
    # the calls of each kernel, in call order: one stable sort, not a scan per kernel
    by_kernel = np.argsort(kid, kind="stable")
    bounds = np.searchsorted(kid[by_kernel], np.arange(len(names) + 1))
    for k, callee in enumerate(names):
        members = by_kernel[bounds[k]:bounds[k + 1]]
        width_k = int(n_params[k])
        pos = starts[members][:, None] + np.arange(width_k)
        kern = kernels[callee]
        aligns = np.array([p.align if isinstance(p, Buffer) else 1
                           for p in kern.convention.params], np.int64)
        slot_align[pos] = aligns
        nodes = slot_node[pos]
        var_values = _flat_check(kern, func.dtype[nodes], sizes[nodes])
        if var_values is None:  # not a flat kernel, or a call that does not fit: Python per type
            keys = type_key[nodes]
            uniq, first, inverse = np.unique(keys, axis=0, return_index=True,
                                             return_inverse=True)
            per_type = np.zeros((len(uniq), int(n_vars[k])), np.int64)
            for g, row in enumerate(first.tolist()):
                types = [(DTYPE_NAMES[int(func.dtype[j])], func.shapes[int(func.shape_id[j])])
                         for j in nodes[row].tolist()]
                per_type[g] = check_kernel_call(name, int(calls[members[row]]), kern, types)
            var_values = per_type[inverse.reshape(-1)]
        if n_vars[k]:
            var_pos = starts[members][:, None] + width_k + np.arange(int(n_vars[k]))
            slots[var_pos] = var_values

    # -- each argument once: an index into the distinct values -----------------
    del type_key, sizes
    node_src = np.where(slot_node >= 0, src[np.maximum(slot_node, 0)], _NONE).astype(np.int8)
    misaligned = np.flatnonzero((node_src == _ARENA) & (slot_align > ALIGN))
    if len(misaligned):
        k = int(misaligned[0])
        raise IRError(f"{name}: node {int(slot_node[k])}: a kernel needs "
                      f"{int(slot_align[k])}-byte aligned buffers; arena offsets are "
                      f"{ALIGN}-byte aligned")
    dyn_pos = np.nonzero(node_src == _DYNAMIC)[0]
    dyn_index = value[slot_node[dyn_pos]]
    dyn_align = np.full(n_dynamic, 16, np.int64)
    np.maximum.at(dyn_align, dyn_index, slot_align[dyn_pos])
    # distinct values without a sort (linear): arena slots by storage token, constants by
    # node, shape var values (and 0 for nothing) by a dense map of their range
    token_offsets = np.zeros(len(plan.token_bytes), np.int64)
    token_offsets[plan.token] = plan.offsets
    keep: list[Any] = []
    const_pos = np.nonzero(node_src == _CONST)[0]
    const_nodes = np.flatnonzero(np.bincount(slot_node[const_pos], minlength=n))
    const_align = np.ones(n, np.int64)
    np.maximum.at(const_align, slot_node[const_pos], slot_align[const_pos])
    del const_pos, slot_align
    const_values = const_addresses(func, const_nodes, const_align[const_nodes], keep) \
        if len(const_nodes) else np.zeros(0, np.int64)
    other_pos = np.nonzero(node_src == _NONE)[0]  # shape var values; 0 for no buffer
    others, other_of = distinct_ints(slots[other_pos])
    arena_begin = n_dynamic
    const_begin = arena_begin + len(token_offsets)
    other_begin = const_begin + len(const_values)
    values = np.concatenate([np.zeros(n_dynamic, np.int64), token_offsets, const_values,
                             others if len(others) else np.zeros(1, np.int64)])
    if len(values) >= 2**31:
        raise IRError(f"{name}: {len(values):,} distinct launch argument values; the "
                      "launch table indexes them with int32")
    # each node's index among the values; one gather makes the arguments
    index_of = np.zeros(n, np.int32)
    index_of[plan.node_ids] = arena_begin + plan.token
    dynamic = src == _DYNAMIC  # after the arena: an output a kernel writes is dynamic
    index_of[dynamic] = value[dynamic]
    index_of[const_nodes] = const_begin + np.arange(len(const_nodes))
    args = np.zeros(total + HEAD, np.int32)  # the launcher reads HEAD past a launch's start
    np.take(index_of, slot_node, out=args[:total], mode="wrap")  # -1: fixed below
    args[other_pos] = other_begin + other_of
    fns = np.array([kernels[c].address for c in names], np.int64) if names \
        else np.zeros(0, np.int64)
    segments = _segments(func, calls, func_nodes, callee_of, src, value, csr)
    return LaunchTable(kernel_ids=kid.astype(np.int32), fns=fns,
                       starts=starts.astype(np.int32 if total < 2**31 else np.int64),
                       args=args, values=values, arena_begin=arena_begin,
                       arena_end=const_begin, width=max(int(width.max(initial=0)), HEAD),
                       dyn_align=dyn_align, segments=segments, fresh=fresh,
                       n_dynamic=n_dynamic, keep=keep, nodes=calls.astype(np.int32),
                       kernel_names=tuple(names))


def _segments(func: Function, calls: np.ndarray, func_nodes: np.ndarray,
              callee_of: dict[int, str], src: np.ndarray, value: np.ndarray,
              csr: Any) -> list[Segment]:
    """Runs of launches split at ``call_func`` nodes (one Python step per call_func)."""
    if not len(func_nodes):
        return [Segment(0, len(calls), None)]
    split = np.searchsorted(calls, func_nodes).tolist()
    out: list[Segment] = []
    begin = 0
    for node, at in zip(func_nodes.tolist(), split, strict=True):
        operands: list[Operand] = []
        for j in csr.of(node).tolist():
            kind = int(src[j])
            if kind == _CONST:
                operands.append(ConstOperand(func.const_value(j)))
            elif kind == _ARENA:
                operands.append(ArenaOperand(int(value[j]), NUMPY_DTYPES[int(func.dtype[j])],
                                             tuple(func.shapes[int(func.shape_id[j])])))
            else:
                operands.append(DynamicOperand(int(value[j])))
        call = CallFunc(node, callee_of[int(func.attr_id[node])], tuple(operands),
                        int(value[node]))
        out.append(Segment(begin, at, call))
        begin = at
    out.append(Segment(begin, len(calls), None))
    return out


__all__ = ["ArenaOperand", "CallFunc", "CompiledKernel", "ConstOperand", "DynamicOperand",
           "FreshOutput", "LaunchTable", "Operand", "Segment", "build_table",
           "check_kernel_call"]
