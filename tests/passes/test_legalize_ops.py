"""LegalizeOps: every op of the table becomes call_tir; the interpreter is the oracle.

Exact ops (ints, bools, + - * /, max/min, casts, layout ops) must give bit-identical
results (any NaN matches any NaN); transcendental math and float sums/matmul are
compared within a float tolerance (see irkernel/op_templates.py for why).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from passes_helpers import assert_same_results

import irkernel as ik
import passes
import runtime
from irkernel import ops, transform
from irkernel.ir import narrow
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.rebuild import rebuild
from irkernel.testing import (
    GENERATED_OPS,
    functions_with_inputs,
    random_function,
    random_inputs,
)
from irkernel.tir import PrimFunc, te

INEXACT = {"exp", "erf", "log", "tanh", "sigmoid", "power", "sum", "mean", "matmul", "prod",
           "avg_pool", "conv", "conv_transpose", "lrn", "sin", "cos", "lstm_recurrence", "gru_recurrence"}
#: Ops whose float result may be either signed zero in NumPy (np.max/np.min over {0.0, -0.0}).
EITHER_ZERO = {"max", "min"}
EXACT_OPS = tuple(op for op in GENERATED_OPS if op not in INEXACT | EITHER_ZERO)
#: Operand k of these ops is an index tensor (int64), whatever the case's dtype.
INDEX_OPERAND = {("take", 1), ("scatter_nd", 1)}


def legalize(mod: ik.IRModule | ik.Function) -> ik.IRModule:
    mod = mod if isinstance(mod, ik.IRModule) else ik.IRModule({"main": mod})
    out = passes.LegalizeOps()(mod)
    ik.verify(out)
    for name, f in out.functions.items():
        if isinstance(f, ik.Function):
            left = set(np.unique(f.kind).tolist()) - {ops.OP_PARAM, ops.OP_CONST,
                                                       ops.OP_CALL_FUNC, ops.OP_CALL_TIR}
            assert not left, f"{name}: ops left after LegalizeOps: {left}"
        elif isinstance(f, PrimFunc):  # canonical form, except the scheduled matmul, concats
            desc = te.extract_compute(f)  # of many parts (a copy loop per part), the
            if desc is None:              # copy-then-scatter of scatter_nd, the scans and the
                assert f.attrs["op_name"] in ("matmul", "concat", "scatter_nd",  # scheduled
                                              "conv", "max_pool", "avg_pool",  # float32 2-D
                                              "cumsum",
                                              "cumprod", "topk_indices", "lstm_recurrence",
                                              "gru_recurrence"), f.script(name)
            else:
                assert te.prim_func_from_desc(desc, f.attrs) == f
    return out


#: Tolerance of inexact ops by float dtype (float16/bfloat16: one unit in the last place,
#: as the float32 result may round either way).
FLOAT_TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-12,
             np.dtype(np.float16): 2e-3}
BFLOAT16_TOL = 1.6e-2


def bfloat16_as_float32(values: list[np.ndarray], dtypes: list[str]) -> list[np.ndarray]:
    """The bfloat16 outputs (uint16 bits) as float32 values, so that any NaN matches any
    NaN and tolerances apply; other outputs as given."""
    return [narrow.bfloat16_to_float32(v) if d == "bfloat16" else v
            for v, d in zip(values, dtypes, strict=True)]


def output_dtypes(mod: ik.IRModule) -> list[str]:
    return [mod["main"].node_type(int(o))[0] for o in mod["main"].outputs]


def close(expected: list[np.ndarray], got: list[np.ndarray], exact: bool, what: str = "",
          tol_floor: float = 0.0) -> None:
    if exact:
        assert_same_results(expected, got, what)
        return
    assert len(expected) == len(got)
    for e, g in zip(expected, got, strict=False):
        assert e.dtype == g.dtype and e.shape == g.shape, what
        if e.dtype.kind == "f":
            tol = max(FLOAT_TOL[e.dtype], tol_floor)
            np.testing.assert_allclose(g, e, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(g, e, err_msg=what)


def _operand_dtype(name: str, k: int, dtype: str) -> str:
    if name == "where" and k == 0:
        return "bool"
    return "int64" if (name, k) in INDEX_OPERAND else dtype


def single_op(name: str, dtype: str, shapes: list[tuple[int, ...]], attrs: dict) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    xs = []
    for k, shape in enumerate(shapes):
        dt = _operand_dtype(name, k, dtype)
        xs.append(bb.param(f"p{k}", shape, dt))
    return ik.IRModule({"main": bb.finish([bb.call(name, *xs, **attrs)])})


_SCALAR_SLICE = {"begin": (), "end": (), "strides": ()}


def _case_shapes(op: ops.OpDef) -> list[tuple[list[tuple[int, ...]], dict]]:
    name = op.name
    if name == "where":
        return [([(2, 3), (3,), (2, 1)], {}), ([(), (), ()], {})]
    if name == "matmul":
        return [([(2, 3), (3, 4)], {}), ([(3,), (3, 2)], {}), ([(2, 3), (3,)], {}),
                ([(3,), (3,)], {}), ([(2, 1, 2, 3), (3, 3, 2)], {})]
    if name in ("argmax", "argmin"):
        return [([(2, 3, 4)], {"axis": a, "keepdims": kd, "select_last_index": last})
                for a, kd, last in ((0, False, False), (-1, True, True), (1, False, True))]
    if name == "strided_slice":
        return [([(5, 4)], {"begin": (1, -1), "end": (9, -9), "strides": (2, -1)}),
                ([(3,)], {"begin": (0,), "end": (0,), "strides": (1,)}), ([()], _SCALAR_SLICE)]
    if name == "take":
        return [([(4, 3), (2, 2)], {"axis": 0}), ([(4, 3), (5,)], {"axis": -1}),
                ([(3,), ()], {})]
    if name == "pad":
        return [([(3, 2), ()], {"pad_width": (1, 0, 2, 3), "mode": m})
                for m in ("constant", "reflect", "edge", "wrap")] + [
                    ([(3, 1), ()], {"pad_width": (4, 0, 0, 5), "mode": "reflect"}),
                    ([(2, 3), ()], {"pad_width": (5, 0, 1, 7), "mode": "wrap"})]
    if name == "scatter_nd":
        return [([(4, 3), (5, 1), (5, 3)], {}), ([(4, 3), (2, 2), (2,)], {}),
                ([(2, 2), (3, 0), (3, 2, 2)], {})] + [
                    ([(4, 3), (6, 1), (6, 3)], {"reduction": r}) for r in
                    ("add", "mul", "max", "min")]
    if name in ("cumsum", "cumprod"):
        return [([(3, 4, 2)], {"axis": a, "exclusive": e, "reverse": r})
                for a, e, r in ((0, False, False), (1, True, False), (-1, False, True),
                                (1, True, True))] + [([(5,)], {}), ([(2, 0)], {"axis": 1}),
                                                      ([(1, 3)], {"axis": 0, "exclusive": True})]
    if name == "topk_indices":
        return [([(3, 7, 2)], {"k": k, "axis": 1, "largest": lg, "sorted": so})
                for k, lg, so in ((3, True, True), (7, False, True), (4, True, False),
                                  (1, False, False))] + [([(9,)], {"k": 0}),
                                                         ([(2, 0)], {"k": 0, "axis": -1})]
    if name == "lstm_recurrence":  # batch 5: a block of four rows and one of one
        return [([(3, 5, 12), (3, 12), (5, 3), (5, 3), (3, 3)], {}),
                ([(2, 1, 20), (5, 20), (1, 5), (1, 5), (3, 5)],
                 {"reverse": True, "clip": 1.5, "input_forget": True,
                  "activations": "hard_sigmoid,elu,softsign", "activation_alpha": (0.3, 0.7, 0)})]
    if name == "gru_recurrence":
        return [([(3, 5, 9), (3, 9), (3,), (5, 3)], {}),
                ([(2, 2, 15), (5, 15), (5,), (2, 5)],
                 {"reverse": True, "linear_before_reset": True, "clip": 0.5,
                  "activations": "leaky_relu,scaled_tanh", "activation_beta": (0, 0.5)})]
    if name == "conv":
        return [([(2, 4, 5, 6), (6, 2, 3, 3)], {"strides": (2, 1), "padding": (1, 1, 0, 2),
                                                "dilation": (1, 2), "groups": 2}),
                ([(1, 3, 7), (2, 3, 2)], {}), ([(1, 2, 3, 3, 3), (2, 2, 2, 1, 2)], {})]
    if name == "conv_transpose":
        return [([(2, 4, 3, 3), (4, 1, 3, 2)], {"strides": (2, 1), "padding": (1, 0, 0, 1),
                                                "output_padding": (1, 0), "groups": 2}),
                ([(1, 2, 4), (2, 3, 2)], {"dilation": (2,)})]
    if name == "lrn":
        return [([(2, 5, 3)], {"size": 3}), ([(1, 4, 2, 2)], {"size": 2, "alpha": 0.5,
                                                            "beta": 1.5, "bias": 2.0})]
    if name in ("max_pool", "avg_pool"):
        extra = {"count_include_pad": True} if name == "avg_pool" else {}
        return [([(2, 3, 5, 6)], {"kernel": (3, 2), "strides": (2, 2), "padding": (1, 0, 1, 1),
                                  "ceil_mode": True, **extra}),
                ([(1, 2, 7)], {"kernel": (2,), "dilation": (2,)})]
    if name in ("sum", "max", "mean", "min", "prod"):
        return [([(2, 3, 4)], {"axis": None}), ([(2, 3, 4)], {"axis": -1, "keepdims": True}),
                ([(2, 3, 4)], {"axis": (0, 2)}), ([(2, 3)], {"axis": ()}), ([()], {})]
    if name == "reshape":
        return [([(2, 3, 4)], {"shape": (4, -1)}), ([(6,)], {"shape": (1, 2, 3)}),
                ([()], {"shape": (1, 1)})]
    if name == "permute_dims":
        return [([(2, 3, 4)], {"axes": None}), ([(2, 3, 4)], {"axes": (1, -1, 0)})]
    if name == "broadcast_to":
        return [([(3, 1)], {"shape": (2, 3, 4)}), ([()], {"shape": (2,)})]
    if name == "astype":
        return [([(2, 5)], {"dtype": d}) for d in ik.ids.DTYPE_NAMES]
    if name == "concat":
        return [([(2, 3), (2, 1), (2, 2)], {"axis": -1}), ([(1, 2), (3, 2)], {"axis": 0}),
                ([(2,), (0,), (3,)], {"axis": 0})]
    if op.encoding == ik.ids.ENC_BINARY:  # after the named ops: pad, take, conv are binary
        return [([(2, 3), (3,)], {}), ([(4, 1), (1, 3)], {}), ([(), ()], {}),
                ([(2, 1, 3), (2, 3)], {})]
    return [([(2, 3)], {}), ([()], {})]


def _op_dtype_cases() -> tuple[list, dict[str, int]]:
    """Every (op, dtype, shapes, attrs) case the op's type rule accepts, and per op the
    number it rejects. A rule rejects with TypeInferenceError (a dtype or shape it does not
    take); any other exception is a bug in the case list and fails the collection."""
    cases, rejected = [], {}
    for op in ops.BUILTIN_OPS:
        if op.name in ("param", "const", "call_func", "call_tir"):
            continue
        for dt in ik.ids.DTYPE_NAMES:
            for shapes, attrs in _case_shapes(op):
                dts = [_operand_dtype(op.name, k, dt) for k in range(len(shapes))]
                types = [(ik.ids.dtype_code(d), s) for d, s in zip(dts, shapes, strict=True)]
                try:
                    op.infer(types, dict(op.normalize_attrs(attrs)))
                except TypeInferenceError:
                    rejected[op.name] = rejected.get(op.name, 0) + 1
                    continue
                cases.append(pytest.param(op.name, dt, shapes, attrs,
                                          id=f"{op.name}-{dt}-{len(cases)}"))
    return cases, rejected


OP_DTYPE_CASES, _REJECTED = _op_dtype_cases()


def test_every_op_has_cases_its_rule_accepts() -> None:
    """No op is dropped whole by its type rule (a case list that does not fit the op)."""
    covered = {p.values[0] for p in OP_DTYPE_CASES}
    missing = [op.name for op in ops.BUILTIN_OPS
               if op.name not in covered | {"param", "const", "call_func", "call_tir"}]
    assert not missing, f"ops without an accepted case: {missing} (rejected: {_REJECTED})"


@pytest.mark.parametrize(("name", "dtype", "shapes", "attrs"), OP_DTYPE_CASES)
def test_every_op_and_dtype_matches_the_interpreter(name, dtype, shapes, attrs) -> None:
    mod = single_op(name, dtype, shapes, attrs)
    out = legalize(mod)
    for seed in (0, 1):
        inputs = random_inputs(mod, seed=seed, special_values=True)
        dtypes = output_dtypes(mod)
        expected = bfloat16_as_float32(ik.interpret(mod, *inputs), dtypes)
        got = bfloat16_as_float32(ik.interpret(out, *inputs), dtypes)
        exact = name not in INEXACT or not dtype.startswith(("float", "bfloat"))
        if name in EITHER_ZERO and dtype.startswith("float"):  # np.max: either signed zero
            np.testing.assert_array_equal(got[0], expected[0])
            continue
        close(expected, got, exact, f"{name} {dtype} {shapes} {attrs}",
              BFLOAT16_TOL if dtype == "bfloat16" else 0.0)


def test_every_op_has_a_template() -> None:
    import passes.topi.templates  # noqa: F401  (installs the hooks)

    missing = [op.name for op in ops.all_ops()
               if op.name not in ("param", "const", "call_func", "call_tir")
               and op.opcode < len(ops.BUILTIN_OPS) and op.legalize is None]
    assert not missing


@settings(max_examples=40, deadline=None)
@given(case=functions_with_inputs(module=True, special_values=True, ops=EXACT_OPS,
                                  n_nodes=st.integers(1, 40)))
def test_random_exact_graphs_are_bit_identical(case) -> None:
    mod, inputs = case
    dtypes = output_dtypes(mod)  # bfloat16 outputs compared as values: any NaN is a NaN
    expected = bfloat16_as_float32(ik.interpret(mod, *inputs), dtypes)
    got = bfloat16_as_float32(ik.interpret(legalize(mod), *inputs), dtypes)
    assert_same_results(expected, got, "LegalizeOps")


@settings(max_examples=25, deadline=None)
@given(case=functions_with_inputs(module=False, special_values=False, shapes="small",
                                  dtypes=("float64",), n_nodes=st.integers(1, 30),
                                  ops=("exp", "tanh", "sigmoid", "sum", "mean", "matmul",
                                       "multiply", "maximum", "reshape", "permute_dims",
                                       "broadcast_to", "concat")))
def test_random_float_graphs_are_close(case) -> None:
    func, inputs = case
    expected = ik.interpret(func, *inputs)
    got = ik.interpret(legalize(func), *inputs)
    for e, g in zip(expected, got, strict=False):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12, equal_nan=True)


def test_int_reductions_and_matmul_wrap_exactly() -> None:
    bb = ik.GraphBuilder("main")
    a = bb.param("a", (3, 4), "int32")
    b = bb.param("b", (4, 2), "int32")
    mod = ik.IRModule({"main": bb.finish([bb.call("matmul", a, b), bb.call("sum", a, axis=1),
                                          bb.call("max", a, axis=0, keepdims=True)])})
    x = np.full((3, 4), 2**30, np.int32)
    y = np.full((4, 2), 3, np.int32)
    assert_same_results(ik.interpret(mod, x, y), ik.interpret(legalize(mod), x, y))


def test_prim_funcs_are_deduplicated_and_named() -> None:
    funcs = {}
    for name in ("main", "other"):
        bb = ik.GraphBuilder(name)
        x = bb.param("x", (4, 4), "float32")
        y = bb.add(bb.add(x, x), x)
        funcs[name] = bb.finish([bb.exp(y)])
    out = legalize(ik.IRModule(funcs))
    prims = {n: f for n, f in out.functions.items() if isinstance(f, PrimFunc)}
    assert sorted(prims) == ["add_float32_4x4", "exp_float32_4x4"]
    for f in prims.values():
        assert "global_symbol" not in f.attrs
        assert f.attrs["op_pattern"] in (ops.ELEMWISE, ops.BROADCAST)
    assert prims["add_float32_4x4"].attrs["op_name"] == "add"
    # a PrimFunc already in the module is reused; a name collision gets a suffix
    again = legalize(ik.IRModule({"main": funcs["main"],
                                  "exp_float32_4x4": prims["add_float32_4x4"]}))
    names = sorted(n for n, f in again.functions.items() if isinstance(f, PrimFunc))
    assert names == ["exp_float32_4x4", "exp_float32_4x4_1"]
    # legalizing again changes nothing
    assert passes.LegalizeOps()(out) is out


def test_skip_optimization_functions_are_legalized_too() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "int64")
    f = bb.finish([bb.negative(x)]).with_attr("SkipOptimization", True)
    out = legalize(ik.IRModule({"main": f}))
    assert out["main"].attrs["SkipOptimization"] is True
    x = np.array([1, -2, np.iinfo(np.int64).min])
    assert_same_results(ik.interpret(f, x), ik.interpret(out, x))


def test_runs_under_the_pass_context_and_registry() -> None:
    assert transform.get_pass("LegalizeOps").info.name == "LegalizeOps"
    assert passes.LegalizeOps().info.opt_level == 0
    func = random_function(50, seed=3)
    with transform.PassContext(opt_level=0):
        out = transform.Sequential([passes.LegalizeOps()])(ik.IRModule({"main": func}))
    ik.verify(out)


def test_an_op_without_template_is_a_clear_error(impure_op: str) -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "float32")
    mod = ik.IRModule({"main": bb.finish([bb.call(impure_op, x)])})
    with pytest.raises(ValueError, match=rf"main: node 1 \({impure_op}\).*no TIR template"):
        passes.LegalizeOps()(mod)


def test_user_op_brings_its_own_template(impure_op: str) -> None:
    from passes.topi.templates import TEMPLATES

    ops.set_legalize(impure_op, TEMPLATES["negative"])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "float32")
    mod = ik.IRModule({"main": bb.finish([bb.call(impure_op, x)])})
    x = np.array([1.5, -0.0], np.float32)
    assert_same_results(ik.interpret(mod, x), ik.interpret(legalize(mod), x))


def _legalized_add() -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), "float32")
    return legalize(ik.IRModule({"main": bb.finish([bb.add(x, x)])}))


def test_verify_catches_bad_call_tir() -> None:
    good = _legalized_add()
    prim = good["add_float32_2x3"]
    with pytest.raises(ik.IRError, match=r"main: node 1 \(call_tir\): callee 'add_float32_2x3' "
                                         r"does not exist"):
        ik.verify(good.without("add_float32_2x3"))
    with pytest.raises(ik.IRError, match="is not a tir.PrimFunc"):
        ik.verify(good.with_function("add_float32_2x3", good["main"].without_attr(
            "global_symbol")))
    short = PrimFunc(prim.params[1:], prim.body)
    with pytest.raises(ik.IRError, match=r"2 operands \+ 1 result, but add_float32_2x3 has 2"):
        ik.verify(good.with_function("add_float32_2x3", short))
    from irkernel.tir import Buffer
    wrong = PrimFunc((prim.params[0], prim.params[1], Buffer("out", (3, 2), "float32")),
                     prim.body.replace())
    with pytest.raises(ik.IRError, match=r"parameter 2 \(out\) is float32\[3, 2\], but the "
                                         r"result is float32\[2, 3\]"):
        ik.verify(good.with_function("add_float32_2x3", wrong))


def test_interpret_rejects_a_missing_callee() -> None:
    good = _legalized_add()
    with pytest.raises(ik.IRError, match="call_tir"):
        ik.interpret(good.without("add_float32_2x3"), np.zeros((2, 3), np.float32))


def test_compiled_prim_funcs_match_the_interpreter() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4, 8), "float32")
    y = bb.param("y", (8,), "float32")
    m = bb.param("m", (8, 32), "float32")
    i = bb.param("i", (4, 8), "int32")
    s = bb.call("sum", bb.exp(bb.add(x, y)), axis=-1, keepdims=True)
    outs = [bb.divide(x, s), bb.maximum(x, y), bb.call("matmul", x, m),
            bb.call("concat", x, bb.call("astype", i, dtype="float32"), axis=0),
            bb.divide(i, bb.call("astype", bb.call("sum", i, axis=0), dtype="int32")),
            bb.call("permute_dims", bb.call("reshape", x, shape=(2, -1, 4)))]
    mod = legalize(ik.IRModule({"main": bb.finish(outs)}))
    rng = np.random.default_rng(0)
    args = {"x": rng.standard_normal((4, 8)).astype(np.float32),
            "y": rng.standard_normal(8).astype(np.float32),
            "m": rng.standard_normal((8, 32)).astype(np.float32),
            "i": rng.integers(-5, 5, (4, 8)).astype(np.int32)}
    args["x"][0, 0] = np.nan
    prims = {n: f.with_attr("global_symbol", n) for n, f in mod.functions.items()
             if isinstance(f, PrimFunc)}
    ex = runtime.build(ik.IRModule(prims))
    main = mod["main"]
    values: dict[int, np.ndarray] = {}
    for node in range(main.num_nodes):  # a tiny executor: one kernel per call_tir node
        if main.op(node).name == "param":
            values[node] = args[main.param_names[int(main.a0[node])]]
            continue
        attrs = main.node_attrs(node)
        out = np.empty(attrs["shape"], attrs["dtype"])
        ex[attrs["callee"]](*[values[o] for o in main.operands(node)], out)
        values[node] = out
    expected = ik.interpret(mod, *args.values())
    got = [values[int(o)] for o in main.outputs]
    close(expected, got, exact=False)


def test_every_compiled_template_matches_the_interpreter() -> None:
    """All op x dtype cases above through runtime.build (one build; cached on disk)."""
    from passes_helpers import same_value

    cases, prims = [], {}
    for p in OP_DTYPE_CASES:
        name, dtype, shapes, attrs = p.values
        if dtype in ("float16", "bfloat16"):  # wrapped in casts: test_narrow_floats_compiled
            continue
        mod = single_op(name, dtype, shapes, attrs)
        out = passes.LegalizeOps()(mod)
        callee = out["main"].node_attrs(int(out["main"].outputs[0]))["callee"]
        key = "k" + out[callee].structural_digest().hex()[:16]
        prims[key] = out[callee].with_attr("global_symbol", key)
        cases.append((name, mod, key, out["main"].node_type(int(out["main"].outputs[0]))))
    ex = runtime.build(ik.IRModule(prims))
    for name, mod, key, (dtype, shape) in cases:
        inputs = random_inputs(mod, seed=5, special_values=True)
        (expected,) = ik.interpret(mod, *inputs)
        got = np.empty(shape, ik.ids.NUMPY_DTYPES[ik.ids.dtype_code(dtype)])
        ex[key](*inputs, got)
        if expected.dtype.kind == "f" and name in EITHER_ZERO:  # either signed zero
            np.testing.assert_array_equal(got, expected)
        elif expected.dtype.kind == "f" and name in INEXACT:
            close([expected], [got], exact=False, what=f"{name} {key}")
        else:
            assert same_value(expected, got) is None, (name, expected, got)


def test_narrow_floats_compiled_match_the_interpreter() -> None:
    """Every float16/bfloat16 case above through runtime.build, as whole modules (their ops
    compute in float32 between casts, which FuseOps fuses): one module of all cases."""
    funcs, cases = {}, []
    for p in OP_DTYPE_CASES:
        name, dtype, shapes, attrs = p.values
        if dtype not in ("float16", "bfloat16") or p.marks:
            continue
        if any(0 in shape for shape in shapes):  # runtime.build refuses an empty cumsum
            continue  # output in any dtype ("never writes its output"): not about dtypes
        key = f"c{len(cases)}"
        func = single_op(name, dtype, shapes, attrs)["main"]
        funcs[key] = func.with_attr("global_symbol", key)
        cases.append((key, name, dtype))
    mod = ik.IRModule(funcs)
    ex = runtime.build(mod)
    for key, name, dtype in cases:
        inputs = random_inputs(mod[key], seed=5, special_values=True)
        single = ik.IRModule({"main": mod[key].with_attr("global_symbol", "main")})
        dtypes = output_dtypes(single)
        expected = bfloat16_as_float32(ik.interpret(single, *inputs), dtypes)
        got = bfloat16_as_float32(ex[key](*inputs), dtypes)
        if name in EITHER_ZERO:
            np.testing.assert_array_equal(got[0], expected[0])
        else:
            close(expected, got, name not in INEXACT, f"{name} {dtype} {key}",
                  BFLOAT16_TOL if dtype == "bfloat16" else 0.0)


def test_legalizes_a_1e5_op_graph() -> None:
    # Its throughput is measured in bench/bench_scaling.py (no wall-clock asserts in tests).
    func = random_function(100_000, seed=1)
    out = passes.LegalizeOps()(ik.IRModule({"main": func}))
    n_ops = int(np.count_nonzero(out["main"].kind == ops.OP_CALL_TIR))
    n_graph_ops = int(np.count_nonzero((func.kind != ops.OP_PARAM) & (func.kind != ops.OP_CONST)))
    assert n_ops == n_graph_ops
    ik.verify(out)


def test_float_matmul_uses_the_scheduled_kernel() -> None:
    bb = ik.GraphBuilder("main")
    a = bb.param("a", (16, 24), "float32")
    b = bb.param("b", (24, 32), "float32")
    mod = ik.IRModule({"main": bb.finish([bb.call("matmul", a, b)])})
    out = legalize(mod)
    prim = out["matmul_float32_16x32"]
    assert prim.attrs["op_pattern"] == ops.OUT_EWISE_FUSABLE
    assert te.extract_compute(prim) is None
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 24)).astype(np.float32)
    y = rng.standard_normal((24, 32)).astype(np.float32)
    np.testing.assert_allclose(ik.interpret(out, x, y)[0], x @ y, rtol=1e-5, atol=1e-5)


def test_matmul_epilogue_fuses_bias_and_relu() -> None:
    from irkernel.tir import Buffer, const, select
    from passes.topi.matmul import matmul_with_epilogue

    bias = Buffer("x2", (64,), "float32")
    zero = const(0, "float32")

    def relu_bias(acc, i, j):
        v = acc + bias[j]
        return select(v > zero, v, zero)

    f = matmul_with_epilogue(8, 64, 32, "float32", (bias,), relu_bias)
    f.verify("mm")
    assert [p.name for p in f.params] == ["x0", "x1", "x2", "out"]
    ex = runtime.build(ik.IRModule({"mm": f.with_attr("global_symbol", "mm")}))
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 32)).astype(np.float32)
    b = rng.standard_normal((32, 64)).astype(np.float32)
    c = rng.standard_normal(64).astype(np.float32)
    out = np.empty((8, 64), np.float32)
    ex["mm"](a, b, c, out)
    np.testing.assert_allclose(out, np.maximum(a @ b + c, 0), rtol=1e-5, atol=1e-5)
    # N narrower than a vector tiles with half-width vectors, down to 4 lanes
    assert matmul_with_epilogue(8, 10, 64, "float32", bits=512) is not None
    assert matmul_with_epilogue(8, 3, 64, "float32", bits=512) is None


def test_variadic_ops_group_by_their_operand_types() -> None:
    bb = ik.GraphBuilder("main")
    a = bb.param("a", (2,), "int32")
    b = bb.param("b", (3,), "int32")
    c = bb.param("c", (1,), "int32")
    # 250 operands: the select tree is balanced, so it stays under tir.MAX_DEPTH
    outs = [bb.call("concat", a, b), bb.call("concat", b, a), bb.call("concat", a, b),
            bb.call("concat", *([c] * 250), b), bb.call("concat", *([c] * 250), a)]
    mod = ik.IRModule({"main": bb.finish(outs)})
    out = legalize(mod)
    callees = [out["main"].node_attrs(int(o))["callee"] for o in out["main"].outputs]
    assert callees[0] == callees[2]
    assert len(set(callees)) == 4
    x, y = np.arange(2, dtype=np.int32), np.arange(3, dtype=np.int32) + 10
    z = np.array([7], np.int32)
    expected = ik.interpret(mod, x, y, z)
    small = ik.IRModule({"main": out["main"], **{n: out[n] for n in callees[:2]}})
    assert_same_results(expected[:3], ik.interpret(  # tir.interpret is too slow for 250
        small.with_function("main", _outputs(out["main"], 3)), x, y, z))
    wide = out[callees[3]].with_attr("global_symbol", "wide")
    got = np.empty(253, np.int32)
    runtime.build(wide)["wide"](*([z] * 250), y, got)
    assert_same_results(expected[3:4], [got])


def _outputs(func: ik.Function, n: int) -> ik.Function:
    """``func`` keeping its first ``n`` outputs (and only the nodes they need)."""
    from passes.dead_code import eliminate_dead_nodes

    return eliminate_dead_nodes(rebuild(func, outputs=func.outputs[:n].copy()))
