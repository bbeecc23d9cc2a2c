"""GraphExecutor: runs one lowered graph Function on NumPy arrays.

Build time (``runtime/launch_table.py``) turns the function into a table of
kernel launches, checking every ``call_tir`` against its kernel once, so a
run needs no per-kernel checks. A call of a function without ``call_func`` nodes
whose outputs kernels write (the common case) first tries the *short path*: it
allocates the fresh outputs (``np.empty``), writes the ``id`` of the input and
output tuples into its binding's guard context and makes one ctypes call of one argument,
the native guard (``runtime/call_guard.py``), which checks every array against a
spec fixed at build time (exact ndarray, dtype, shape, C-order strides or flags,
alignment, no overlap of an ``out`` array), binds the addresses and runs the
launches. About 1.5 us for a one-kernel graph where the Python checks, address reads
and three-argument ctypes launch cost 4-5 us. Whatever the guard declines (nothing
has run then) takes the general path, which does, in order:

1. check the inputs (count, dtype, shape; a non-contiguous or misaligned input
   is copied) and, when given, the preallocated outputs ``out=[...]``, raising
   with a message naming what is wrong;
2. take a *binding* (an arena for the intermediates, laid out by
   ``runtime/memory_plan.py``, a private copy of the table's short array of
   distinct argument values with the arena's addresses filled in, and a scratch
   row the launcher resolves each launch's arguments into) from the executor's
   free list, or make one;
3. write the call's dynamic addresses (inputs, outputs) into the values, one
   store each, and run the launches with the native launcher
   (``runtime/launcher.py``), one ctypes call per segment (``call_func``
   nodes split segments and run their callee in between);
   a profiled call (``profiled_call``, ``runtime/profile.py``) runs the same
   launches one at a time through a timer instead; the unprofiled path has no
   timer calls, only the one ``timer is None`` test per segment;
4. return the outputs: fresh arrays (``np.empty``, first touched by the
   kernel that writes them), or the ``out`` arrays.

A binding serves one call at a time, and concurrent calls take different
ones, so an executor is thread-safe and calls on different threads run in
parallel (the ctypes call releases the GIL).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from irkernel.ir import ops
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.ids import NUMPY_DTYPES
from irkernel.ir.interp import check_inputs
from irkernel.ir.validate import validate_function
from runtime.launch_table import (
    ArenaOperand,
    CallFunc,
    CompiledKernel,
    ConstOperand,
    LaunchTable,
    build_table,
    check_kernel_call,
)
from runtime.address import data_address
from runtime.call_guard import INPUTS, OUTPUTS, Guard
from runtime.call_guard import available as guard_available
from runtime.launcher import run_steps
from runtime.memory_plan import ALIGN, MemoryPlan, plan_memory

if TYPE_CHECKING:
    from runtime.profile import LaunchTimer

MAX_CALL_DEPTH = 64


def _aligned_empty(shape: tuple[int, ...], dtype: np.dtype, align: int) -> np.ndarray:
    """``np.empty``, over-allocated and sliced only when NumPy's 16 bytes are not enough."""
    if align <= 16:
        return np.empty(shape, dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def _fresh_outputs(outputs: list[tuple[np.dtype, tuple[int, ...], int, int]]
                   ) -> Callable[[], list[np.ndarray]]:
    """A function making a call's fresh outputs (``np.empty``: 16-byte aligned, unless a
    kernel wants more); one output, the common case, without a loop."""
    if len(outputs) == 1 and outputs[0][2] <= 16:
        empty, (dtype, shape, _, _) = np.empty, outputs[0]
        return lambda: [empty(shape, dtype)]
    allocs = [functools.partial(np.empty, shape, dtype) if align <= 16
              else functools.partial(_aligned_empty, shape, dtype, align)
              for dtype, shape, align, _ in outputs]
    return lambda: [alloc() for alloc in allocs]


class _Binding:
    """An arena and the table's values bound to it (one call at a time), the launcher's
    scratch row and context (``runtime/launcher.py``); ``view``: the values as a
    memoryview, whose item assignment costs a third of an ndarray's; ``guard_view`` /
    ``guard_address``: the guard context of the short path (``runtime/call_guard.py``),
    or None."""

    __slots__ = ("arena", "context", "context_address", "guard_address", "guard_context",
                 "guard_view", "scratch", "values", "view")

    def __init__(self, table: LaunchTable, arena: np.ndarray | None, values: np.ndarray,
                 guard: Guard | None, wide: bool) -> None:
        self.arena, self.values = arena, values
        self.scratch = np.zeros(table.width, np.int64)
        self.context = np.array([a.ctypes.data for a in (
            table.kernel_ids, table.fns, table.starts, table.args, values, self.scratch)],
            np.int64)
        self.context_address = self.context.ctypes.data
        self.view = memoryview(values)
        self.guard_context = self.guard_view = self.guard_address = None
        if guard is not None:
            self.guard_context = guard.context(self.context_address, wide)
            self.guard_view = memoryview(self.guard_context)
            self.guard_address = self.guard_context.ctypes.data


class GraphExecutor:
    """Runs one graph Function of a built module: ``ex(*arrays, out=None) -> list[np.ndarray]``.

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
        validate_function(func, "GraphExecutor", name)  # ids below index Python lists
        self.name, self.func = name, func
        self._graphs = graphs
        plan = plan_memory(func)
        self._table = build_table(name, func, kernels, plan)
        # the plan's offsets are in the table's values now: keep its size
        self.planned_bytes = plan.planned_bytes
        # keeps the machine code of the kernels this function launches alive (see owner);
        # only those: a copy of the module's whole dict per function is O(functions x K)
        self._kernels = {k: kernels[k] for k in self._table.kernel_names}
        self._n_params = len(func.params)
        self._out_types = [(NUMPY_DTYPES[int(func.dtype[o])], func.shapes[int(func.shape_id[o])])
                           for o in func.outputs.tolist()]
        self._outputs = self._output_plan()
        self._free: list[_Binding] = []
        self._wide = self._table.wide
        # (dtype, shape) per parameter: the common case of a call is checked against these
        # without building messages; anything else goes through check_inputs
        self._param_types = [
            (NUMPY_DTYPES[int(func.dtype[p])], func.shapes[int(func.shape_id[p])])
            for p in func.params.tolist()]
        self._fresh: Callable[[], list[np.ndarray]] | None = None
        self._guard = self._guard_plan()

    @property
    def plan(self) -> MemoryPlan:
        """The memory plan of the intermediates, made again: the executor keeps only its
        size (``plan_memory`` is deterministic, so this is the plan the table uses)."""
        return plan_memory(self.func)

    @property
    def state_nbytes(self) -> tuple[int, int]:
        """(launch table, one binding without its arena) in bytes: the executor's own
        state, beside the lowered function, the constants and the arenas it shares or
        allocates. A run holds one binding; concurrent runs hold one each. The guard's
        spec counts with the table, its context with the binding."""
        t, guard = self._table, self._guard
        spec, context = (0, 0) if guard is None else (guard.spec.nbytes, guard.context_nbytes)
        return t.nbytes + spec, t.values.nbytes + 8 * (t.width + 6) + context

    def _guard_plan(self) -> Guard | None:
        """The short path's guard (``runtime/call_guard.py``), or None when it does not
        apply: a function with ``call_func`` nodes or outputs no kernel writes (distinct
        fresh arrays), or a NumPy whose array layout the guard does not know."""
        table = self._table
        if any(seg.call is not None for seg in table.segments) or not table.segments \
                or not all(fresh for fresh, _ in self._outputs) or not guard_available():
            return None
        align = table.dyn_align.tolist()
        params = [(dtype, tuple(shape), align[k], k)  # parameter k is dynamic value k
                  for k, (dtype, shape) in enumerate(self._param_types)]
        outputs = [(dtype, tuple(shape), align[index], index)
                   for (dtype, shape), (_, index) in zip(self._out_types, self._outputs,
                                                         strict=True)]
        self._fresh = _fresh_outputs(outputs)
        return Guard(params, outputs, table.segments[0].begin, table.segments[-1].end)

    def _output_plan(self) -> list[tuple[bool, Any]]:
        """Per output: (True, dynamic index) when a kernel writes it, else (False, what to
        copy: a dynamic index (a parameter, a call_func result, a repeated output) or an
        array (a constant))."""
        fresh = {f.node: f.index for f in self._table.fresh}
        seen: set[int] = set()
        plan: list[tuple[bool, Any]] = []
        params = {int(p): k for k, p in enumerate(self.func.params.tolist())}
        func_results = {seg.call.node: seg.call.result for seg in self._table.segments
                        if seg.call is not None}
        for node in self.func.outputs.tolist():
            kind = int(self.func.kind[node])
            if node in fresh and node not in seen:
                plan.append((True, fresh[node]))
            elif kind == ops.OP_CONST:
                plan.append((False, self.func.const_value(node)))
            elif node in fresh:
                plan.append((False, fresh[node]))
            elif node in params:
                plan.append((False, params[node]))
            else:
                plan.append((False, func_results[node]))
            seen.add(node)
        return plan

    # -- run time -------------------------------------------------------------
    def __call__(self, *inputs: Any, out: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        """Run the function; one array per output, in order.

        Parameters
        ----------
        *inputs : numpy.ndarray
            One per parameter, of exactly its dtype and shape.
        out : sequence of numpy.ndarray, optional
            Preallocated outputs, one per output: exactly the output's dtype and
            shape, C-contiguous, writeable, not overlapping an input or another
            output. They are filled and returned (the list holds these objects).

        Raises
        ------
        TypeError
            Wrong number of inputs or outputs, or a wrong dtype (naming it).
        ValueError
            A wrong shape, layout or overlap (naming the input or output).
        """
        guard = self._guard
        if guard is not None and len(inputs) == guard.n_inputs:
            # the short path: the guard checks everything natively and declines (1) what
            # is not plainly right; the general path below then checks and names it
            if out is None:
                outs = self._fresh()  # a list nobody else holds
            elif type(out) is tuple:
                outs = out
            elif type(out) is list:
                outs = tuple(out)  # the guard reads it with the GIL released
            else:
                outs = None
            if outs is not None and len(outs) + len(inputs) == guard.n_objects:
                free = self._free
                try:
                    binding = free.pop()  # self._take(), inlined (a method call is 0.1 us)
                except IndexError:
                    binding = self._bind()
                try:
                    view = binding.guard_view
                    view[INPUTS] = id(inputs)
                    view[OUTPUTS] = id(outs)
                    declined = guard.run(binding.guard_address)
                    if not declined and guard.sliced:
                        run_steps(binding.context_address, guard.begin, guard.end,
                                  self._wide)
                finally:
                    free.append(binding)
                if not declined:
                    return outs if out is None else list(out)
        arrays = self._checked(inputs)
        outs = None if out is None else self._check_out(out, arrays)
        return self.run(arrays, 0, outs)

    def profiled_call(self, timer: LaunchTimer, *inputs: Any) -> list[np.ndarray]:
        """``self(*inputs)`` with every launch (here and in ``call_func`` callees) run
        alone through ``timer.launch`` (``runtime/profile.py``): the same kernels in the
        same order on the same slots, so the same results."""
        return self.run(self._checked(inputs), 0, None, timer)

    def _checked(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        types = self._param_types
        if len(inputs) == len(types) and all(
                type(x) is np.ndarray and x.dtype == dtype and x.shape == shape
                for x, (dtype, shape) in zip(inputs, types, strict=True)):
            return list(inputs)
        return check_inputs(self.func, self.name, inputs)

    def _check_out(self, out: Sequence[np.ndarray], inputs: list[np.ndarray]) -> list[np.ndarray]:
        if isinstance(out, np.ndarray) or not isinstance(out, (list, tuple)):
            raise TypeError(f"{self.name}: out must be a list or tuple of numpy arrays, one "
                            f"per output, got {type(out).__name__}")
        if len(out) != len(self._out_types):
            raise TypeError(f"{self.name}: out has {len(out)} arrays, the function has "
                            f"{len(self._out_types)} outputs")
        align = self._table.dyn_align
        for k, (arr, (dtype, shape)) in enumerate(zip(out, self._out_types, strict=True)):
            what = f"{self.name}: out[{k}]"
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"{what} must be a numpy.ndarray, got {type(arr).__name__}")
            if arr.dtype != dtype:
                raise TypeError(f"{what} has dtype {arr.dtype}, expected {dtype}")
            if arr.shape != tuple(shape):
                raise ValueError(f"{what} has shape {arr.shape}, expected {tuple(shape)}")
            if not arr.flags.c_contiguous or not arr.flags.writeable:
                raise ValueError(f"{what} must be C-contiguous and writeable")
            fresh, index = self._outputs[k]
            need = int(align[index]) if fresh else 1
            if arr.size and arr.ctypes.data % need:
                raise ValueError(f"{what} data is not {need}-byte aligned (allocate it with "
                                 f"runtime.empty(shape, dtype, align={need}))")
            for j, x in enumerate(inputs):
                if np.may_share_memory(arr, x):
                    raise ValueError(f"{what} overlaps input {j}")
            for j in range(k):
                if np.may_share_memory(arr, out[j]):
                    raise ValueError(f"{what} overlaps out[{j}]")
        return list(out)

    def run(self, arrays: list[np.ndarray], depth: int,
            out: list[np.ndarray] | None = None,
            timer: LaunchTimer | None = None) -> list[np.ndarray]:
        """Run on already checked inputs (``call_func`` enters here); ``timer``: profile."""
        if depth > MAX_CALL_DEPTH:
            raise IRError(f"{self.name}: call_func nesting deeper than {MAX_CALL_DEPTH} "
                          "(recursive calls?)")
        table = self._table
        values: list[Any] = [None] * table.n_dynamic
        ptrs = np.zeros(table.n_dynamic, np.int64)
        align = table.dyn_align
        for k in range(self._n_params):
            values[k], ptrs[k] = _usable(arrays[k], int(align[k]))
        for k, (fresh, index) in enumerate(self._outputs):
            if fresh:
                if out is not None:
                    arr = out[k]
                else:
                    dtype, shape = self._out_types[k]
                    arr = _aligned_empty(shape, dtype, int(align[index]))
                values[index] = arr
                ptrs[index] = data_address(arr) if arr.size else 0
        binding = self._take()
        try:
            binding.values[:table.n_dynamic] = ptrs
            context, wide = binding.context_address, self._wide
            for seg in table.segments:
                if timer is None:
                    run_steps(context, seg.begin, seg.end, wide)
                else:
                    timer.launch(self, context, seg.begin, seg.end, wide)
                if seg.call is not None:
                    self._call_func(seg.call, binding, values, ptrs, depth, timer)
        finally:
            self._free.append(binding)
        results = []
        for k, (fresh, source) in enumerate(self._outputs):
            if fresh:
                results.append(values[source])
                continue
            src = values[source] if isinstance(source, int) else source
            if out is not None:
                np.copyto(out[k], src)
                results.append(out[k])
            else:
                results.append(np.array(src, copy=True))
        return results

    def _take(self) -> _Binding:
        try:
            return self._free.pop()  # atomic: two threads never get the same binding
        except IndexError:
            return self._bind()

    def _bind(self) -> _Binding:
        table = self._table
        size = self.planned_bytes
        arena = _aligned_empty((size,), np.dtype(np.uint8), ALIGN) if size else None
        values = table.values.copy()
        if arena is not None:
            values[table.arena_begin:table.arena_end] += arena.ctypes.data
        return _Binding(table, arena, values, self._guard, self._wide)

    def _call_func(self, call: CallFunc, binding: _Binding, values: list[Any],
                   ptrs: np.ndarray, depth: int, timer: LaunchTimer | None) -> None:
        target = self._graphs.get(call.callee)
        if target is None:
            raise IRError(f"{self.name}: call_func callee {call.callee!r} is not a graph "
                          "function of the built module")
        args = []
        for operand in call.operands:
            if isinstance(operand, ConstOperand):
                args.append(operand.value)
            elif isinstance(operand, ArenaOperand):
                assert binding.arena is not None
                dtype, offset = operand.dtype, operand.offset
                nbytes = int(np.prod(operand.shape, dtype=np.int64)) * dtype.itemsize
                args.append(binding.arena[offset:offset + nbytes].view(dtype)
                            .reshape(operand.shape))
            else:
                args.append(values[operand.index])
        result = target.run(args, depth + 1, None, timer)[0]
        index = call.result
        values[index], ptrs[index] = _usable(result, int(self._table.dyn_align[index]))
        binding.values[index] = ptrs[index]

    # -- introspection --------------------------------------------------------
    @property
    def launch_table(self) -> LaunchTable:
        """The launches of a call (read it, never write it: calls share it)."""
        return self._table

    @property
    def num_kernels(self) -> int:
        """Kernel launches per call (call_tir nodes)."""
        return len(self._table.kernel_ids)

    def __repr__(self) -> str:
        return (f"<GraphExecutor {self.name}: {self._n_params} inputs, "
                f"{self.num_kernels} kernels, arena {self.planned_bytes:,} B>")


def _usable(arr: np.ndarray, align: int) -> tuple[np.ndarray, int]:
    """``arr`` or an aligned C-contiguous copy of it, and its data pointer."""
    ptr = data_address(arr)
    if not arr.flags.c_contiguous or (arr.size and ptr % align):
        copy = _aligned_empty(arr.shape, arr.dtype, max(align, ALIGN))
        copy[...] = arr
        arr, ptr = copy, data_address(copy)
    return arr, ptr


def make_kernels(kernels: Mapping[str, Any]) -> dict[str, CompiledKernel]:
    """CompiledKernel views of ``runtime.Kernel`` objects (address and convention)."""
    return {name: CompiledKernel(name, k.convention, k.address, owner=k)
            for name, k in kernels.items()}


__all__ = ["MAX_CALL_DEPTH", "CompiledKernel", "GraphExecutor", "check_kernel_call",
           "make_kernels"]
