"""Shared helpers of the end-to-end tests: build + run, and the dtype-aware oracle check.

Imported by name (pytest's rootdir import mode puts this directory on sys.path);
the module name is unique across the test tree on purpose.

Why a taint analysis instead of one tolerance: most ops compile to code that is
bit-identical to the interpreter (ints, bools, + - * /, sqrt, max/min, casts,
layout ops), and a tolerance there would hide real bugs (a wrong signed zero, a
NaN turned into a number). Only values downstream of an *inexact* op (libm vs
LLVM math, sequential vs pairwise float sums, tiled vs BLAS matmul) are
compared within a tolerance, and only where the value is a float.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import irkernel as ik
import runtime
from irkernel import ops
from irkernel.ir import narrow

#: Ops whose float results may differ from the interpreter by rounding.
INEXACT_OPS = frozenset({"exp", "log", "tanh", "sigmoid", "power", "sum", "mean", "matmul",
                         "erf", "prod", "conv", "conv_transpose", "lrn", *ops.TRIG_OPS,
                         # avg_pool_rows sums each window's columns, then the columns
                         "avg_pool",
                         # np.max over {0.0, -0.0} may return either zero; the kernel is
                         # deterministic, so only the sign of a zero may differ
                         "max", "min"})
#: Relative/absolute tolerance by float dtype for values downstream of an inexact op.
#: float16/bfloat16: a float32 result within 2e-4 may round to the neighbouring narrow value.
TOLERANCE = {"float32": 2e-4, "float64": 1e-9, "float16": 2e-3, "bfloat16": 1.6e-2}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).reshape((*a.shape, a.dtype.itemsize))


def _inexact_functions(mod: ik.IRModule) -> dict[str, float]:
    """Per graph function: the tolerance its result needs (0.0 when exact), through call_func."""
    tol: dict[str, float] = {}
    calls: dict[str, set[str]] = {}
    for name, func in mod.functions.items():
        if not isinstance(func, ik.Function):
            continue
        tol[name] = float(inexact_nodes(func, {}).max(initial=0.0))
        calls[name] = {func.node_attrs(n)["callee"] for n in range(func.num_nodes)
                       if int(func.kind[n]) == ops.OP_CALL_FUNC}
    changed = True
    while changed:  # tiny modules: a fixed point over the call graph
        changed = False
        for name, callees in calls.items():
            need = max([tol[name], *(tol.get(c, 0.0) for c in callees)])
            if need > tol[name]:
                tol[name], changed = need, True
    return tol


def _tol(dtype_name: str) -> float:
    return TOLERANCE.get(dtype_name, 0.0)


def inexact_nodes(func: ik.Function, callee_tol: dict[str, float]) -> np.ndarray:
    """Per node: the relative tolerance its value needs, 0.0 when it must be bit-exact.

    A forward sweep: an inexact op on float operands needs the tolerance of the
    least precise float involved (a float32 sum cast to float64 stays float32-close),
    and everything downstream inherits the largest tolerance of its operands.
    """
    need = np.zeros(func.num_nodes)
    for n in range(func.num_nodes):  # test helper on small graphs; not a hot path
        op = func.op(n)
        deps = func.operands(n)
        inherited = max((need[d] for d in deps), default=0.0)
        if op.name in INEXACT_OPS:
            float_in = [_tol(func.node_type(d)[0]) for d in deps]
            if any(float_in):
                inherited = max(inherited, *float_in, _tol(func.node_type(n)[0]))
        elif op.name == "call_func":
            inherited = max(inherited, callee_tol.get(func.node_attrs(n)["callee"], 0.0))
        need[n] = inherited
    return need


def output_tolerances(mod: ik.IRModule | ik.Function, entry: str = "main") -> list[float]:
    """Per output of ``entry``: 0.0 when the compiled value must equal the oracle bit for
    bit, else the relative/absolute tolerance it needs."""
    mod = mod if isinstance(mod, ik.IRModule) else ik.IRModule({entry: mod})
    func = mod[entry]
    need = inexact_nodes(func, _inexact_functions(mod))
    return [float(need[int(o)]) for o in func.outputs]


def compare(expected: np.ndarray, got: np.ndarray, tol: float, what: str,
            dtype_name: str | None = None) -> None:
    """One output. ``tol == 0``: bitwise (any NaN matches any NaN). Else within ``tol``
    (at least the output dtype's own); NaN and +-inf positions must agree; non-float
    values must be equal either way. ``dtype_name`` "bfloat16": the uint16 arrays are
    compared as the float32 values they hold."""
    assert isinstance(got, np.ndarray), f"{what}: got {type(got).__name__}, not an ndarray"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    floor = TOLERANCE.get(dtype_name or expected.dtype.name, 0.0)
    if dtype_name == "bfloat16":
        expected, got = narrow.bfloat16_to_float32(expected), narrow.bfloat16_to_float32(got)
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    nan_e, nan_g = np.isnan(expected), np.isnan(got)
    if not tol:
        assert np.array_equal(nan_e, nan_g), f"{what}: NaN positions differ\n{expected}\n{got}"
        assert np.array_equal(_bits(expected[~nan_e]), _bits(got[~nan_g])), (
            f"{what}: values differ bitwise\nexpected {expected!r}\ngot      {got!r}")
        return
    tol = max(tol, floor)
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, equal_nan=True,
                               err_msg=what)


def assert_close_to_interpreter(mod: ik.IRModule | ik.Function, inputs: Sequence[np.ndarray],
                                got: Sequence[np.ndarray], what: str = "",
                                entry: str = "main") -> None:
    """``got`` (compiled results) equals ``ik.interpret(mod, *inputs)``: bit-exact for outputs
    that only exact ops produced, within a dtype-aware tolerance downstream of inexact ops."""
    mod = mod if isinstance(mod, ik.IRModule) else ik.IRModule({entry: mod})
    expected = ik.interpret(mod, *inputs, entry=entry)
    assert len(got) == len(expected), f"{what}: {len(got)} outputs, expected {len(expected)}"
    func = mod[entry]
    dtypes = [func.node_type(int(o))[0] for o in func.outputs]
    for k, (e, g, tol, d) in enumerate(zip(expected, got, output_tolerances(mod, entry), dtypes,
                                           strict=True)):
        compare(np.asarray(e), g, tol, f"{what}: output {k}", d)


def build_and_run(mod: ik.IRModule | ik.Function, inputs: Sequence[np.ndarray],
                  **build_kw: object) -> list[np.ndarray]:
    """``runtime.build(mod)["main"](*inputs)``; the inputs are checked not to be modified."""
    mod = mod if isinstance(mod, ik.IRModule) else ik.IRModule({"main": mod})
    before = [a.copy() for a in inputs]
    got = runtime.build(mod, **build_kw)["main"](*inputs)
    for k, (b, a) in enumerate(zip(before, inputs, strict=True)):
        assert np.array_equal(_bits(b), _bits(a)), f"input {k} was modified by the executable"
    return got


def assert_scheduled_and_exact(mod: ik.IRModule, config: dict, schedule: str,
                               seed: int = 0, special: bool = True) -> None:
    """Build ``mod`` under PassContext ``config`` (the shape-generic small kernels off),
    check it against the interpreter on random inputs, and that a kernel has the
    ``schedule`` attr (its TIR names it)."""
    from irkernel import transform
    from irkernel.testing import random_inputs

    inputs = random_inputs(mod, seed=seed, special_values=special)
    with transform.PassContext(config={"runtime.generic_max_elements": 0, **config}):
        ex = runtime.build(mod)
    assert_close_to_interpreter(mod, inputs, ex["main"](*inputs), schedule)
    assert schedule in ex.get_source("tir"), f"no {schedule} kernel"
