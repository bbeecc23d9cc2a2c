"""Reference interpreter: evaluates a graph Function node by node with NumPy.

It is the semantic oracle that every pass and the runtime are checked against,
so it favours obviousness over speed: one Python step per node (the only
per-node Python loop allowed outside tests), each op evaluated by the op
table's NumPy reference. Values are freed after their last use so that long
chains run in bounded memory. Imports numpy and irkernel internals only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from irkernel.ir import narrow, ops
from irkernel.ir.binding import bind_dims, concrete_shapes
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.hooks import Hook
from irkernel.ir.ids import NUMPY_DTYPES, dtype_code
from irkernel.ir.module import IRModule, is_prim_func
from irkernel.ir.operands import operand_csr, use_counts
from irkernel.ir.symbols import expr_of
from irkernel.ir.symtypes import map_dims_attrs
from irkernel.ir.verify import verify, verify_function

#: ``run(prim_func, *arrays)``: the TIR reference interpreter, installed by ``irkernel.tir``.
RUN_PRIM_FUNC = Hook("interpret a tir.PrimFunc", "irkernel.tir.interp")

MAX_CALL_DEPTH = 64


def check_inputs(func: Function, name: str, inputs: Sequence[Any]) -> list[np.ndarray]:
    """``inputs`` as arrays of exactly the parameters' dtypes and shapes, or a clear error.

    Shared by the interpreter and ``runtime``'s graph executor, so both accept and reject
    the same inputs. No conversion of dtype: a float64 array for a float32 parameter is
    an error, not a silent cast; a masked array is refused (``np.asarray`` would drop
    its mask).

    Raises
    ------
    TypeError
        Wrong count, dtype, or a value that is not an array (ragged lists, masked arrays).
    ValueError
        Wrong shape. Both name ``name``, the position and the parameter.
    """
    if len(inputs) != len(func.params):
        raise TypeError(f"{name} takes {len(func.params)} inputs "
                        f"({', '.join(func.param_names)}), got {len(inputs)}")
    arrays = []
    for pos, (value, pname) in enumerate(zip(inputs, func.param_names, strict=True)):
        node = int(func.params[pos])
        want_dtype = NUMPY_DTYPES[int(func.dtype[node])]
        want_shape = func.shapes[int(func.shape_id[node])]
        if isinstance(value, np.ma.MaskedArray):
            raise TypeError(f"{name}: input {pos} ({pname!r}) is a masked array; "
                            "pass a plain ndarray (np.ma.filled(...))")
        try:
            arr = value if isinstance(value, np.ndarray) else np.asarray(value)
        except (TypeError, ValueError) as exc:  # ragged nested lists and the like
            raise TypeError(f"{name}: input {pos} ({pname!r}) is not convertible "
                            f"to an array: {exc}") from exc
        if arr.dtype != want_dtype:
            raise TypeError(f"{name}: input {pos} ({pname!r}) must have dtype {want_dtype.name}, "
                            f"got {arr.dtype}")
        if arr.shape != want_shape and not _fits_symbolic(arr.shape, want_shape, func):
            shown = (want_shape if not func.shapes.symbols else
                     "(" + func.shapes.shape_text(int(func.shape_id[node])) + ")")
            raise ValueError(f"{name}: input {pos} ({pname!r}) must have shape {shown}, "
                             f"got {arr.shape}")
        arrays.append(arr)
    return arrays


def _fits_symbolic(got: tuple[int, ...], want: tuple[int, ...], func: Function) -> bool:
    """Same rank and the same static dims (the symbolic ones are bound afterwards)."""
    return bool(func.shapes.symbols) and len(got) == len(want) and all(
        w < 0 or g == w for g, w in zip(got, want, strict=True))


def _run(mod: IRModule | None, func: Function, name: str, inputs: list[np.ndarray],
         depth: int) -> list[np.ndarray]:
    if depth > MAX_CALL_DEPTH:
        raise IRError(f"{name}: call_func nesting deeper than {MAX_CALL_DEPTH} (recursive calls?)")
    remaining = use_counts(func).tolist()
    csr = operand_csr(func)
    ptr, operand_ids = csr.ptr.tolist(), csr.ids.tolist()
    kinds, a0s = func.kind.tolist(), func.a0.tolist()
    dtypes, shape_ids, attr_ids = func.dtype.tolist(), func.shape_id.tolist(), func.attr_id.tolist()
    all_ops = ops.all_ops()
    attrs_of = [dict(r) for r in func.attr_table.records]
    values: list[Any] = [None] * func.num_nodes
    # symbolic dims take their values from the inputs' shapes (irkernel.ir.binding)
    shapes = func.shapes.shapes
    if func.shapes.symbols:
        binding = bind_dims(func, name, inputs)
        shapes = concrete_shapes(func, binding)
        dim_values = func.shapes.symbols.values(binding)
        attrs_of = [dict(r) for r in func.attr_table.records]
        for k, a in set(zip(kinds, attr_ids, strict=True)):  # shape attributes: their values
            map_dims_attrs(all_ops[k], attrs_of[a], lambda d: dim_values[expr_of(d)])
    for i, k in enumerate(kinds):
        if k == ops.OP_PARAM:
            out = inputs[a0s[i]]
        elif k == ops.OP_CONST:
            out = func.consts.value(a0s[i], func.shapes)
        else:
            opdef = all_ops[k]
            ids = operand_ids[ptr[i]: ptr[i + 1]]
            args = [values[j] for j in ids]
            for j in ids:
                remaining[j] -= 1
                if remaining[j] == 0:
                    values[j] = None
            attrs = attrs_of[attr_ids[i]]
            if k == ops.OP_CALL_FUNC:
                out = _call_func(mod, name, i, attrs["callee"], args, depth)
            elif k == ops.OP_CALL_TIR:
                out = _call_tir(mod, name, i, attrs, args)
            elif opdef.reference is None:
                raise IRError(f"{name}: node {i} ({opdef.name}): the interpreter cannot "
                              f"evaluate this op")
            else:
                out = evaluate_op(opdef, args, [dtypes[j] for j in ids], attrs, dtypes[i])
            out = np.asarray(out)
            want = NUMPY_DTYPES[dtypes[i]]
            if out.dtype != want:
                out = out.astype(want)
            if out.shape != shapes[shape_ids[i]]:
                raise IRError(f"{name}: node {i} ({opdef.name}): result shape {out.shape} differs "
                              f"from the declared {shapes[shape_ids[i]]}")
        values[i] = out
    return [np.array(values[int(o)], copy=True) for o in func.outputs]


def evaluate_op(opdef: ops.OpDef, args: list[np.ndarray], codes: list[int],
                attrs: dict[str, Any], result_code: int) -> np.ndarray:
    """One op by its NumPy reference, with the narrow-float rule (``irkernel.ir.narrow``):
    float16/bfloat16 operands are widened to float32 and a float16/bfloat16 result is
    rounded once. Shared by the interpreter and FoldConstant, so both give the same bits."""
    if any(narrow.is_narrow(c) for c in codes):
        args = [narrow.widen(a, c) for a, c in zip(args, codes, strict=True)]
    out = opdef.reference(args, attrs)  # type: ignore[misc]
    if narrow.is_narrow(result_code):
        return narrow.narrow(out, result_code)
    return np.asarray(out)


def _call_func(mod: IRModule | None, name: str, node: int, callee: str, args: list[np.ndarray],
               depth: int) -> np.ndarray:
    target = None if mod is None else mod.functions.get(callee)
    if not isinstance(target, Function):
        raise IRError(f"{name}: node {node} (call_func): callee {callee!r} is not a graph "
                      f"function of the module")
    results = _run(mod, target, callee, check_inputs(target, callee, args), depth + 1)
    return results[0]


def _call_tir(mod: IRModule | None, name: str, node: int, attrs: dict[str, Any],
              args: list[np.ndarray]) -> np.ndarray:
    """Run the callee PrimFunc with the TIR interpreter on a fresh output array."""
    callee = attrs["callee"]
    target = None if mod is None else mod.functions.get(callee)
    if not is_prim_func(target):
        raise IRError(f"{name}: node {node} (call_tir): callee {callee!r} is not a PrimFunc "
                      f"of the module")
    out = np.empty(attrs["shape"], dtype=NUMPY_DTYPES[dtype_code(attrs["dtype"])])
    arrays = [a if a.flags.c_contiguous else a.copy() for a in (*args, out)]
    # call_tir's binding rule (irkernel.ir.call_tir): a 1-d parameter sees the flat view
    views = [a.reshape(-1) if len(getattr(p, "shape", ())) == 1 and a.ndim != 1 else a
             for p, a in zip(target.params, arrays, strict=False)]  # type: ignore[union-attr]
    RUN_PRIM_FUNC(target, *views)
    return out


def interpret(mod: IRModule | Function, *inputs: Any, entry: str = "main") -> list[np.ndarray]:
    """Evaluate ``entry`` of ``mod`` (or a lone Function) on NumPy inputs.

    Parameters
    ----------
    mod : IRModule or Function
        The program. A lone Function cannot use ``call_func``.
    *inputs : array_like
        One array per parameter, of exactly the parameter's dtype and shape. A
        function with symbolic dims binds its shape variables from the inputs'
        shapes first (``irkernel.ir.binding``: consistent across inputs, within
        each variable's bounds).
    entry : str
        Name of the function to run.

    Returns
    -------
    list of np.ndarray
        One fresh array per output, in order.

    Raises
    ------
    TypeError, ValueError
        Wrong number, dtype or shape of inputs (naming the parameter), or shapes
        that contradict a symbolic dim or its bounds (naming the input, axis and
        variable).
    IRError
        The program does not verify (``ik.verify``: checked before anything runs), or
        it cannot be evaluated (an op without a NumPy reference).
    """
    if isinstance(mod, Function):
        symbol = mod.attrs.get("global_symbol", entry)
        func, module, name = mod, None, symbol if isinstance(symbol, str) else entry
    elif isinstance(mod, IRModule):
        if entry not in mod.functions:
            raise ValueError(f"interpret: module has no function {entry!r} "
                             f"(functions: {', '.join(mod.functions) or 'none'})")
        func, module, name = mod.functions[entry], mod, entry
        if not isinstance(func, Function):
            raise TypeError(f"interpret: {entry!r} is not a graph Function")
    else:
        raise TypeError(f"interpret: expected an IRModule or Function, got {type(mod).__name__}")
    # The oracle evaluates one op at a time with the op table's NumPy reference, which
    # trusts the node's type and attributes: the whole program is verified first (cheap
    # next to the per-node evaluation), so a malformed one is an IRError, not an
    # IndexError from deep inside NumPy or an allocation the size of a bad id.
    try:
        if module is None:
            verify_function(func, name)
        else:
            verify(module)
    except IRError as exc:
        raise IRError(f"interpret: {exc}") from exc
    return _run(module, func, name, check_inputs(func, name, inputs), 0)
