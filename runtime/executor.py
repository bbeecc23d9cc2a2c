"""GraphExecutor: runs one lowered graph Function on NumPy arrays.

A lowered graph Function holds ``param``, ``const``, ``call_tir`` and
``call_func`` nodes (``runtime.build`` guarantees it). The executor checks
every ``call_tir`` against its compiled kernel *once, at build time* (buffer
count, static shapes, dtypes, C-contiguous layout, only the last buffer
written), so a run can call the kernels through raw pointers without the
per-call argument checks of :class:`runtime.Kernel`: the only per-call checks
are on the function's own inputs (count, dtype, shape; misaligned or
non-contiguous inputs are copied).

Memory: intermediates live in one 64-byte aligned arena laid out by
``runtime/memory_plan.py``. The executor keeps one arena and the launch list
bound to it (absolute pointers precomputed); a concurrent call on the same
executor (the arena is busy) binds a private arena instead, so calls are
thread-safe. Outputs are fresh arrays every call (params and constants that
are outputs are copied). ``call_func`` nodes run the callee's executor.

Launch mechanism, decided by measurement (bench/bench_executor.py): a Python
loop of ctypes calls costs ~0.2-0.5 us per kernel here, under the 2 us
target, so there is no generated AOT "main" (it would add an LLVM compile per
build that the on-disk cache could not reuse, since kernel addresses change).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.ids import NUMPY_DTYPES
from irkernel.ir.interp import check_inputs
from irkernel.tir.buffer import Buffer
from irkernel.tir.expr import IntImm
from runtime.abi import CallingConvention, empty
from runtime.memory_plan import ALIGN, MemoryPlan, plan_memory
from runtime.threadpool import take_error

MAX_CALL_DEPTH = 64

# Argument sources in a launch template.
_ARENA, _STATIC, _DYNAMIC = 0, 1, 2
# Step kinds in the launch list.
_RUN, _RUN_DYNAMIC, _CALL = 0, 1, 2


class CompiledKernel:
    """What the executor needs of one compiled PrimFunc: its address and convention.

    ``owner`` is whatever keeps the machine code at ``address`` alive (the
    ``runtime.Kernel``, which holds the JIT engine): an executor outliving its
    Executable (``runtime.build(mod)["main"]``) must not call freed code.
    """

    __slots__ = ("address", "cfunc", "convention", "name", "owner")

    def __init__(self, name: str, convention: CallingConvention, address: int,
                 owner: Any = None) -> None:
        self.name, self.convention, self.address = name, convention, address
        self.owner = owner
        self.cfunc = ctypes.CFUNCTYPE(None, *convention.argtypes)(address)


def _static_dims(buf: Buffer) -> tuple[int, ...] | None:
    if not all(isinstance(d, IntImm) for d in buf.shape):
        return None
    return tuple(int(d.value) for d in buf.shape)  # type: ignore[attr-defined]


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def check_kernel_call(fname: str, node: int, kern: CompiledKernel,
                      types: Sequence[tuple[np.dtype, tuple[int, ...]]]) -> None:
    """Check that ``kern`` can be called with raw pointers to buffers of ``types``.

    ``types`` are the (dtype, shape) of the operands, then of the result.
    Raises IRError naming the function, node, callee and parameter.
    """
    conv = kern.convention
    where = f"{fname}: node {node} (call_tir {kern.name!r})"
    if len(conv.params) != len(types):
        raise IRError(f"{where}: the PrimFunc has {len(conv.params)} parameters, expected "
                      f"{len(types)} ({len(types) - 1} operands + the output)")
    if conv.shape_vars:
        raise IRError(f"{where}: shape vars {[v.name for v in conv.shape_vars]} are not "
                      "allowed (call_tir needs static shapes)")
    for pos, (param, (dtype, shape)) in enumerate(zip(conv.params, types, strict=True)):
        if not isinstance(param, Buffer):
            raise IRError(f"{where}: parameter {pos} ({param.name!r}) is a scalar; call_tir "
                          "passes buffers only")
        dims = _static_dims(param)
        if dims != shape or np.dtype(param.dtype) != dtype:
            raise IRError(f"{where}: parameter {pos} ({param.name!r}) is {param.dtype}"
                          f"{list(dims) if dims is not None else '[symbolic]'}, but the "
                          f"{'result' if pos == len(types) - 1 else 'operand'} is "
                          f"{dtype.name}{list(shape)}")
        if param.strides:
            strides = tuple(int(s.value) if isinstance(s, IntImm) else -1 for s in param.strides)
            if strides != _c_strides(shape):
                raise IRError(f"{where}: parameter {pos} ({param.name!r}) declares strides "
                              f"{strides}; call_tir passes C-contiguous buffers")
        is_output = pos == len(types) - 1
        if (param.name in conv.written) != is_output:
            what = "never writes its output" if is_output else "writes operand"
            raise IRError(f"{where}: the PrimFunc {what} {param.name!r} (destination passing: "
                          "only the last buffer is written)")


class GraphExecutor:
    """Runs one graph Function of a built module: ``ex(*arrays) -> list[np.ndarray]``.

    Parameters
    ----------
    name : str
        The function's name in the module (used in every error message).
    func : Function
        A lowered graph Function (param/const/call_tir/call_func nodes only).
    kernels : Mapping[str, CompiledKernel]
        The compiled PrimFuncs of the module, by name.
    graphs : Mapping[str, GraphExecutor]
        The executors of the module's graph Functions (for ``call_func``); read
        when the executor is first called, so it may be filled afterwards.

    Raises
    ------
    IRError
        When a node is not executable (an op that was not legalized, an unknown
        callee, a kernel whose signature does not match the call).
    """

    def __init__(self, name: str, func: Function, kernels: Mapping[str, CompiledKernel],
                 graphs: Mapping[str, GraphExecutor]) -> None:
        self.name, self.func = name, func
        self._graphs = graphs
        self._kernels = dict(kernels)  # keeps the kernels' machine code alive (see owner)
        self.plan: MemoryPlan = plan_memory(func)
        self._offsets = self.plan.offset_of()
        self._kinds: list[int] = func.kind.tolist()
        self._dtypes = [NUMPY_DTYPES[c] for c in func.dtype.tolist()]
        self._shapes = [func.shapes[s] for s in func.shape_id.tolist()]
        self._slot: dict[int, int] = {}      # node id -> dynamic slot (params, outputs, calls)
        self._align: list[int] = []          # per slot: the alignment its readers need
        self._consts: dict[int, np.ndarray] = {}
        for node in func.params.tolist():   # slots 0..p-1 are the inputs, in order
            self._new_slot(node)
        self._templates = self._compile_steps(kernels)
        self._fresh = [(self._slot[n], self._dtypes[n], self._shapes[n])
                       for n in self._fresh_nodes]
        self._outputs = self._output_plan()
        self._lock = threading.Lock()
        self._bound: tuple[np.ndarray | None, list[tuple[Any, ...]]] | None = None

    # -- build time ---------------------------------------------------------
    def _new_slot(self, node: int) -> int:
        slot = self._slot.get(node)
        if slot is None:
            slot = self._slot[node] = len(self._align)
            self._align.append(16)
        return slot

    def _const(self, node: int, align: int) -> np.ndarray:
        """The constant's array, passed to kernels as is when it is C-contiguous and
        aligned enough (large constants are the pool's zero-copy views: no copy here
        either); otherwise one aligned copy."""
        arr = self._consts.get(node)
        if arr is None or (arr.size and arr.ctypes.data % align):
            value = self.func.const_value(node) if arr is None else arr
            if value.flags.c_contiguous and not (value.size and value.ctypes.data % align):
                arr = value
            else:
                arr = empty(value.shape, value.dtype, align=max(align, ALIGN))
                arr[...] = value
                arr.setflags(write=False)
            self._consts[node] = arr
        return arr

    def _source(self, node: int, align: int) -> tuple[int, Any]:
        if self._kinds[node] == ops.OP_CONST:
            return _STATIC, self._const(node, align)
        offset = self._offsets.get(node)
        if offset is not None:
            if align > ALIGN:
                raise IRError(f"{self.name}: node {node}: a kernel needs {align}-byte aligned "
                              f"buffers; arena offsets are {ALIGN}-byte aligned")
            return _ARENA, offset
        slot = self._slot.get(node)
        if slot is None:
            raise IRError(f"{self.name}: node {node} ({self.func.op(node).name}) is read "
                          "before it is computed")
        self._align[slot] = max(self._align[slot], align)
        return _DYNAMIC, slot

    def _compile_steps(self, kernels: Mapping[str, CompiledKernel]) -> list[tuple[Any, ...]]:
        func, name = self.func, self.name
        kind = func.kind
        is_call = (kind == ops.OP_CALL_TIR) | (kind == ops.OP_CALL_FUNC)
        leaf = (kind == ops.OP_PARAM) | (kind == ops.OP_CONST)
        bad = np.nonzero(~(is_call | leaf))[0]
        if len(bad):
            node = int(bad[0])
            raise IRError(f"{name}: node {node} ({func.op(node).name}) is a graph op the "
                          "executor cannot run; only param, const, call_tir and call_func "
                          "nodes are executable (was LegalizeOps disabled?)")
        outputs = set(func.outputs.tolist())
        self._fresh_nodes: list[int] = []
        templates: list[tuple[Any, ...]] = []
        # Plain lists and per-signature caches: building the launch list of a 1e5-kernel
        # graph is one cheap Python step per node, and each distinct (callee, operand
        # types) pair is checked against its kernel once.
        a0, a1, extra = func.a0.tolist(), func.a1.tolist(), func.extra.tolist()
        attr_ids = func.attr_id.tolist()
        type_key = ((func.dtype.astype(np.int64) << 32) | func.shape_id).tolist()
        callee_of: dict[int, str] = {}
        checked: set[tuple[Any, ...]] = set()
        for node in np.nonzero(is_call)[0].tolist():
            callee = callee_of.get(attr_ids[node])
            if callee is None:
                callee = callee_of[attr_ids[node]] = func.node_attrs(node)["callee"]
            operands = extra[a0[node]:a0[node] + a1[node]]
            if self._kinds[node] == ops.OP_CALL_FUNC:
                args = [(*self._source(j, 16), j) for j in operands]
                templates.append((_CALL, callee, args, self._new_slot(node)))
                continue
            kern = kernels.get(callee)
            if kern is None:
                raise IRError(f"{name}: node {node} (call_tir): callee {callee!r} is not a "
                              "compiled PrimFunc of the module")
            key = (callee, type_key[node], *[type_key[j] for j in operands])
            if key not in checked:
                types = [(self._dtypes[j], self._shapes[j]) for j in (*operands, node)]
                check_kernel_call(name, node, kern, types)
                checked.add(key)
            params = kern.convention.params
            args = [self._source(j, p.align) for j, p in zip(operands, params, strict=False)]
            if node in outputs:
                self._fresh_nodes.append(node)
                slot = self._new_slot(node)
                self._align[slot] = max(self._align[slot], params[-1].align, ALIGN)
                args.append((_DYNAMIC, slot))
            else:
                args.append(self._source(node, params[-1].align))
            templates.append((_RUN, kern.cfunc, args))
        return templates

    def _output_plan(self) -> list[tuple[int, Any]]:
        """Per output: (_DYNAMIC, slot) to return as is, or (_STATIC, source) to copy."""
        seen: set[int] = set()
        plan: list[tuple[int, Any]] = []
        for node in self.func.outputs.tolist():
            kind = int(self.func.kind[node])
            if kind == ops.OP_CONST:
                plan.append((_STATIC, self._const(node, 1)))
            elif node in seen or kind == ops.OP_PARAM:
                plan.append((_STATIC, self._slot[node]))   # a copy of the slot's array
            else:
                plan.append((_DYNAMIC, self._slot[node]))
            seen.add(node)
        return plan

    def _bind(self) -> tuple[np.ndarray | None, list[tuple[Any, ...]]]:
        """A fresh arena and the launch list with its absolute pointers."""
        size = self.plan.planned_bytes
        arena = empty(size, np.uint8, align=ALIGN) if size else None
        base = arena.ctypes.data if arena is not None else 0
        steps: list[tuple[Any, ...]] = []
        for template in self._templates:
            if template[0] == _CALL:
                _, callee, args, slot = template
                sources = []
                for src, value, node in args:
                    if src == _ARENA:
                        assert arena is not None
                        view = arena[value:value + self._nbytes(node)].view(self._dtypes[node])
                        sources.append((view.reshape(self._shapes[node]), -1))
                    elif src == _STATIC:
                        sources.append((value, -1))
                    else:
                        sources.append((None, value))
                steps.append((_CALL, callee, sources, slot))
                continue
            _, cfunc, args = template
            native: list[int] = []
            dynamic: list[tuple[int, int]] = []
            for pos, (src, value) in enumerate(args):
                if src == _ARENA:
                    native.append(base + value)
                elif src == _STATIC:
                    native.append(value.ctypes.data)
                else:
                    native.append(0)
                    dynamic.append((pos, value))
            if dynamic:
                steps.append((_RUN_DYNAMIC, cfunc, native, tuple(dynamic)))
            else:
                steps.append((_RUN, cfunc, tuple(native), None))
        return arena, steps

    def _nbytes(self, node: int) -> int:
        return int(np.prod(self._shapes[node], dtype=np.int64)) * self._dtypes[node].itemsize

    # -- run time -------------------------------------------------------------
    def __call__(self, *inputs: Any) -> list[np.ndarray]:
        """Run the function; one fresh array per output, in order.

        Raises
        ------
        TypeError
            Wrong number of inputs or a wrong dtype (naming the parameter).
        ValueError
            A wrong shape (naming the parameter).
        RuntimeError
            When the thread pool failed to run a parallel loop of a kernel.
        """
        return self.run(check_inputs(self.func, self.name, inputs), 0)

    def run(self, arrays: list[np.ndarray], depth: int) -> list[np.ndarray]:
        """Run on already checked inputs (``call_func`` enters here)."""
        if depth > MAX_CALL_DEPTH:
            raise IRError(f"{self.name}: call_func nesting deeper than {MAX_CALL_DEPTH} "
                          "(recursive calls?)")
        values: list[Any] = [None] * len(self._align)
        ptrs = [0] * len(self._align)
        for slot, arr in enumerate(arrays):
            values[slot], ptrs[slot] = self._usable(arr, self._align[slot])
        for slot, dtype, shape in self._fresh:
            arr = empty(shape, dtype, align=self._align[slot])
            values[slot], ptrs[slot] = arr, arr.ctypes.data
        if self._lock.acquire(blocking=False):
            try:
                if self._bound is None:
                    self._bound = self._bind()
                self._launch(self._bound[1], values, ptrs, depth)
            finally:
                self._lock.release()
        else:  # the cached arena is in use (another thread, or a nested call)
            # Hold the private arena until the kernels are done: the launch list has only
            # raw pointers into it (``self._bind()[1]`` alone let it be freed first).
            arena, steps = self._bind()
            self._launch(steps, values, ptrs, depth)
            del arena
        error = take_error()
        if error is not None:
            raise RuntimeError(f"{self.name}: a parallel loop of a kernel failed to run") \
                from error
        out = []
        for src, value in self._outputs:
            if src == _DYNAMIC:
                out.append(values[value])
            else:
                out.append(np.array(values[value] if isinstance(value, int) else value,
                                    copy=True))
        return out

    @staticmethod
    def _usable(arr: np.ndarray, align: int) -> tuple[np.ndarray, int]:
        """``arr`` or an aligned C-contiguous copy of it, and its data pointer."""
        ptr = arr.ctypes.data
        if not arr.flags.c_contiguous or (arr.size and ptr % align):
            copy = empty(arr.shape, arr.dtype, align=max(align, ALIGN))
            copy[...] = arr
            arr, ptr = copy, copy.ctypes.data
        return arr, ptr

    def _launch(self, steps: list[tuple[Any, ...]], values: list[Any], ptrs: list[int],
                depth: int) -> None:
        for step, fn, args, extra in steps:
            if step == _RUN:
                fn(*args)
            elif step == _RUN_DYNAMIC:
                for pos, slot in extra:
                    args[pos] = ptrs[slot]
                fn(*args)
            else:
                self._sub_call(fn, args, extra, values, ptrs, depth)

    def _sub_call(self, callee: str, sources: list[tuple[Any, int]], slot: int,
                  values: list[Any], ptrs: list[int], depth: int) -> None:
        target = self._graphs.get(callee)
        if target is None:
            raise IRError(f"{self.name}: call_func callee {callee!r} is not a graph function "
                          "of the built module")
        args = [values[s] if arr is None else arr for arr, s in sources]
        result = target.run(args, depth + 1)[0]
        values[slot], ptrs[slot] = self._usable(result, self._align[slot])

    # -- introspection --------------------------------------------------------
    @property
    def num_kernels(self) -> int:
        """Kernel launches per call (call_tir nodes)."""
        return sum(1 for t in self._templates if t[0] == _RUN)

    def __repr__(self) -> str:
        return (f"<GraphExecutor {self.name}: {len(self.func.params)} inputs, "
                f"{self.num_kernels} kernels, arena {self.plan.planned_bytes:,} B>")


def make_kernels(kernels: Mapping[str, Any]) -> dict[str, CompiledKernel]:
    """CompiledKernel views of ``runtime.Kernel`` objects (address and convention)."""
    return {name: CompiledKernel(name, k.convention, k.address, owner=k)
            for name, k in kernels.items()}


__all__ = ["MAX_CALL_DEPTH", "CompiledKernel", "GraphExecutor", "check_kernel_call",
           "make_kernels"]
