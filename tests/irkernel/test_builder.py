"""GraphBuilder incremental API: every op, attributes, bad arguments, constants, growth."""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
from irkernel import ops
from irkernel.ir import builder as builder_module
from irkernel.ir.ids import NONE

# op -> (param (shape, dtype) list, attrs, expected (dtype, shape))
BUILD_CASES = {
    "add": ([((3, 1), "float32"), ((4,), "float32")], {}, ("float32", (3, 4))),
    "subtract": ([((2,), "int32"), ((), "int32")], {}, ("int32", (2,))),
    "multiply": ([((2,), "int64"), ((2,), "int64")], {}, ("int64", (2,))),
    "divide": ([((2,), "float64"), ((2,), "float64")], {}, ("float64", (2,))),
    "maximum": ([((2,), "int32"), ((2,), "int32")], {}, ("int32", (2,))),
    "minimum": ([((2,), "float32"), ((1,), "float32")], {}, ("float32", (2,))),
    "power": ([((2,), "float32"), ((), "float32")], {}, ("float32", (2,))),
    "negative": ([((2,), "int64")], {}, ("int64", (2,))),
    "exp": ([((2,), "float32")], {}, ("float32", (2,))),
    "log": ([((2,), "float64")], {}, ("float64", (2,))),
    "sqrt": ([((2,), "float32")], {}, ("float32", (2,))),
    "tanh": ([((2,), "float32")], {}, ("float32", (2,))),
    "sigmoid": ([((2,), "float64")], {}, ("float64", (2,))),
    "relu": ([((2,), "int32")], {}, ("int32", (2,))),
    "abs": ([((2,), "float32")], {}, ("float32", (2,))),
    "where": ([((2, 1), "bool"), ((3,), "int32"), ((), "int32")], {}, ("int32", (2, 3))),
    "equal": ([((2,), "bool"), ((2,), "bool")], {}, ("bool", (2,))),
    "less": ([((2,), "float32"), ((2,), "float32")], {}, ("bool", (2,))),
    "greater": ([((2,), "int64"), ((2,), "int64")], {}, ("bool", (2,))),
    "matmul": ([((2, 3), "float32"), ((3, 4), "float32")], {}, ("float32", (2, 4))),
    "sum": ([((2, 3), "int32")], {"axis": 1}, ("int32", (2,))),
    "max": ([((2, 3), "float32")], {"axis": 0, "keepdims": True}, ("float32", (1, 3))),
    "mean": ([((2, 3), "float64")], {}, ("float64", ())),
    "reshape": ([((2, 3), "bool")], {"shape": (3, -1)}, ("bool", (3, 2))),
    "permute_dims": ([((2, 3, 4), "float32")], {"axes": (2, 0, 1)}, ("float32", (4, 2, 3))),
    "broadcast_to": ([((3, 1), "int64")], {"shape": (2, 3, 5)}, ("int64", (2, 3, 5))),
    "astype": ([((2,), "float32")], {"dtype": "int64"}, ("int64", (2,))),
    "concat": ([((2,), "int32"), ((3,), "int32"), ((1,), "int32"), ((4,), "int32")], {},
               ("int32", (10,))),
    "call_func": ([((2,), "float32")], {"callee": "f", "dtype": "int32", "shape": (7,)},
                  ("int32", (7,))),
    "call_tir": ([((2,), "float32")], {"callee": "k", "dtype": "float32", "shape": (2,)},
                 ("float32", (2,))),
    "erf": ([((2,), "float32")], {}, ("float32", (2,))),
    "floor": ([((2,), "float64")], {}, ("float64", (2,))),
    "ceil": ([((2,), "float32")], {}, ("float32", (2,))),
    "round": ([((2, 1), "float64")], {}, ("float64", (2, 1))),
    "logical_not": ([((3,), "bool")], {}, ("bool", (3,))),
    "logical_and": ([((3, 1), "bool"), ((2,), "bool")], {}, ("bool", (3, 2))),
    "logical_or": ([((3,), "bool"), ((), "bool")], {}, ("bool", (3,))),
    "logical_xor": ([((3,), "bool"), ((3,), "bool")], {}, ("bool", (3,))),
    "floor_mod": ([((2,), "int32"), ((2,), "int32")], {}, ("int32", (2,))),
    "fmod": ([((2,), "float32"), ((1,), "float32")], {}, ("float32", (2,))),
    "min": ([((2, 3), "int64")], {"axis": -1, "keepdims": True}, ("int64", (2, 1))),
    "prod": ([((2, 3), "float32")], {"axis": (0,)}, ("float32", (3,))),
    "argmax": ([((2, 3, 4), "float32")], {"axis": 1}, ("int64", (2, 4))),
    "argmin": ([((2, 3), "int32")], {"axis": -1, "keepdims": True}, ("int64", (2, 1))),
    "strided_slice": ([((5, 4), "bool")], {"begin": (-1, 0), "end": (-6, 99), "strides": (-2, 3)},
                      ("bool", (3, 2))),
    "take": ([((4, 3), "float64"), ((2, 5), "int32")], {"axis": 1}, ("float64", (4, 2, 5))),
    "pad": ([((2, 3), "int32"), ((), "int32")], {"pad_width": (1, 0, 2, 1), "mode": "edge"},
            ("int32", (5, 4))),
    "scatter_nd": ([((4, 3), "float32"), ((2, 1), "int64"), ((2, 3), "float32")], {},
                   ("float32", (4, 3))),
    "conv": ([((2, 4, 9, 8), "float32"), ((6, 2, 3, 3), "float32")],
             {"strides": (2, 1), "padding": (1, 1, 1, 0), "groups": 2}, ("float32", (2, 6, 5, 7))),
    "conv_transpose": ([((1, 4, 5), "float64"), ((4, 3, 3), "float64")],
                       {"strides": (2,), "padding": (1, 0), "output_padding": (1,)},
                       ("float64", (1, 3, 11))),
    "max_pool": ([((1, 2, 7, 7), "float32")], {"kernel": (3, 3), "strides": (2, 2),
                                               "ceil_mode": True}, ("float32", (1, 2, 3, 3))),
    "avg_pool": ([((1, 2, 6), "float64")], {"kernel": (2,), "padding": (1, 1)},
                 ("float64", (1, 2, 7))),
    "lrn": ([((2, 5, 3, 3), "float32")], {"size": 3, "alpha": 0.5, "beta": 1, "bias": 2.0},
            ("float32", (2, 5, 3, 3))),
    **{op: ([((2, 3), "float64")], {}, ("float64", (2, 3))) for op in ops.TRIG_OPS},
    **{op: ([((2, 3), "int32")], {"axis": -1, "exclusive": True}, ("int32", (2, 3)))
       for op in ("cumsum", "cumprod")},
    "topk_indices": ([((2, 5, 3), "float32")], {"k": 2, "axis": 1, "largest": False},
                     ("int64", (2, 2, 3))),
    "lstm_recurrence": ([((3, 2, 8), "float32"), ((2, 8), "float32"), ((2, 2), "float32"),
                         ((2, 2), "float32"), ((3, 2), "float32")], {"reverse": True},
                        ("float32", (4, 2, 2))),
    "gru_recurrence": ([((3, 2, 6), "float64"), ((2, 6), "float64"), ((2,), "float64"),
                        ((2, 2), "float64")], {"linear_before_reset": True},
                       ("float64", (3, 2, 2))),
}
OP_NAMES = [op.name for op in ops.all_ops() if op.name not in ("param", "const")]


def _params(bb, specs):
    return [bb.param(f"p{i}", shape, dtype) for i, (shape, dtype) in enumerate(specs)]


def test_every_op_has_a_build_case():
    assert set(OP_NAMES) == set(BUILD_CASES)


@pytest.mark.parametrize("name", OP_NAMES)
def test_incremental_build_of_each_op(name):
    specs, attrs, want = BUILD_CASES[name]
    bb = ik.GraphBuilder("main")
    xs = _params(bb, specs)
    node = bb.call(name, *xs, **attrs)
    assert node == len(xs)
    assert isinstance(node, int)
    f = bb.finish([node])
    ik.verify(f)
    op = ops.get_op(name)
    assert int(f.kind[node]) == op.opcode
    assert f.operands(node) == tuple(xs)
    assert f.node_type(node) == want
    assert f.node_attrs(node) == dict(op.normalize_attrs(attrs))
    if op.encoding == ik.ids.ENC_UNARY:
        assert int(f.a1[node]) == NONE
    if op.encoding == ik.ids.ENC_VARIADIC:
        assert int(f.a1[node]) == len(xs)
        assert f.extra[int(f.a0[node]):].tolist() == xs


@pytest.mark.parametrize("name", OP_NAMES)
def test_shortcut_method_equals_call(name):
    specs, attrs, _ = BUILD_CASES[name]
    built = []
    for shortcut in (False, True):
        bb = ik.GraphBuilder("main")
        xs = _params(bb, specs)
        if not shortcut:
            node = bb.call(name, *xs, **attrs)
        elif name == "call_func":  # its own method: callee first, like the contract's bb.call_func
            node = bb.call_func(attrs["callee"], *xs, dtype=attrs["dtype"], shape=attrs["shape"])
        else:
            node = getattr(bb, name)(*xs, **attrs)
        built.append(bb.finish([node]))
    assert ik.structural_equal(*built)


def test_shortcut_for_unknown_name_is_attribute_error():
    bb = ik.GraphBuilder("main")
    with pytest.raises(AttributeError, match="no attribute or op 'frobnicate'"):
        bb.frobnicate  # noqa: B018
    with pytest.raises(AttributeError):
        bb._private  # noqa: B018


def test_call_accepts_an_opcode_and_numpy_integer_operands():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "float32")
    y = bb.call(ops.OP_EXP, np.int32(x))
    z = bb.call("add", np.int64(x), y)
    f = bb.finish(np.int32(z))
    assert f.operands(z) == (x, y)
    assert f.outputs.tolist() == [z]


def test_attributes_by_keyword_with_defaults_filled():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), "float32")
    s0 = bb.sum(x)
    s1 = bb.sum(x, axis=[0, 1], keepdims=False)
    s2 = bb.sum(x, keepdims=True, axis=-1)
    f = bb.finish([s0, s1, s2])
    assert f.node_attrs(s0) == {"axis": None, "keepdims": False}
    assert f.node_attrs(s1) == {"axis": (0, 1), "keepdims": False}
    assert f.node_attrs(s2) == {"axis": (-1,), "keepdims": True}
    assert f.node_type(s2) == ("float32", (2, 1))
    # equal attribute sets are interned once
    assert bb.intern_attrs("sum") == int(f.attr_id[s0])
    assert len(f.attr_table) == 4  # (), and the three distinct sets


# -- bad arguments to the incremental API ---------------------------------------

@pytest.fixture
def bb():
    b = ik.GraphBuilder("main")
    b.param("x", (3,), "float32")  # node 0
    b.param("y", (4,), "float32")  # node 1
    b.param("i", (3,), "int32")  # node 2
    return b


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda b: b.call("frobnicate", 0), ValueError, "unknown op 'frobnicate'"),
    (lambda b: b.call(999, 0), ValueError, "unknown opcode 999"),
    (lambda b: b.sum(0, axis="0"), TypeError, "sum: attribute 'axis' must be"),
    (lambda b: b.sum(0, keepdims=1), TypeError, "attribute 'keepdims' must be a bool"),
    (lambda b: b.reshape(0, shape=(3.0,)), TypeError, "attribute 'shape'"),
    (lambda b: b.astype(0, dtype="complex64"), TypeError, "attribute 'dtype'"),
    (lambda b: b.add(0, 0, axis=0), TypeError, "add: unknown attribute 'axis'"),
    (lambda b: b.reshape(0), TypeError, "reshape: missing required attribute 'shape'"),
    (lambda b: b.add(0, 1), ValueError,
     r"add: shapes \(3,\), \(4,\) do not broadcast "
     r"\(operands %0: float32\[3\], %1: float32\[4\]\)"),
    (lambda b: b.add(0, 2), ValueError, r"add: operand dtypes differ \(float32, int32\)"),
    (lambda b: b.matmul(0, 1), ValueError, r"matmul: .*\(3,\) @ \(4,\)"),
    (lambda b: b.exp(2), ValueError, "exp: operand dtype int32 not supported"),
    (lambda b: b.reshape(0, shape=(2, 2)), ValueError,
     r"reshape: cannot reshape \(3,\) to \(2, 2\)"),
    (lambda b: b.add(0), TypeError, "add takes 2 operands, got 1"),
    (lambda b: b.exp(0, 0), TypeError, "exp takes 1 operands, got 2"),
    (lambda b: b.exp(), TypeError, "exp takes 1 operands, got 0"),
    (lambda b: b.where(0, 0), TypeError, "where takes 3 operands, got 2"),
    (lambda b: b.concat(), ValueError, "concat: concat needs at least one operand"),
    (lambda b: b.exp(99), ValueError, r"exp: operand 0 must be a node id in \[0, 3\), got 99"),
    (lambda b: b.add(0, 3), ValueError, r"add: operand 1 must be a node id in \[0, 3\), got 3"),
    (lambda b: b.exp(-1), ValueError, "operand 0 must be a node id"),
    (lambda b: b.exp(True), ValueError, "got True"),
    (lambda b: b.exp(0.0), ValueError, "got 0.0"),
    (lambda b: b.exp("x"), ValueError, "got 'x'"),
    (lambda b: b.concat(0, 0, 7), ValueError, "operand 2 must be a node id"),
    (lambda b: b.call("param"), ValueError, r"param: use GraphBuilder.param\(\)"),
    (lambda b: b.call("const"), ValueError, r"const: use GraphBuilder.const\(\)"),
    (lambda b: b.param("x", (2,)), ValueError, "duplicate parameter name 'x'"),
    (lambda b: b.param("not a name", (2,)), ValueError, "must be an identifier"),
    (lambda b: b.param("z", (2,), "float8"), ValueError, "unsupported dtype 'float8'"),
    (lambda b: b.param("z", (-1,)), ValueError, "negative dimension"),
    (lambda b: b.param("z", (2.5,)), TypeError, "shape"),
    (lambda b: b.param("z", (True,)), TypeError, "shape"),
    (lambda b: b.const(np.complex64(1)), ValueError, "const: unsupported dtype"),
    (lambda b: b.const(np.zeros(3, np.uint32)), ValueError, "const: unsupported dtype"),
    (lambda b: b.const(1.0, dtype="float8"), ValueError, "const: unsupported dtype"),
    (lambda b: b.const(-1, dtype="uint8"), ValueError, "not exactly representable as uint8"),
    (lambda b: b.const(128, dtype="int8"), ValueError, "not exactly representable as int8"),
    (lambda b: b.const(1.5, dtype="int32"), ValueError, "not exactly representable as int32"),
    (lambda b: b.const([1.0, np.nan], dtype="int64"), ValueError, "not exactly representable"),
    (lambda b: b.const(np.inf, dtype="int32"), ValueError, "not exactly representable"),
    (lambda b: b.const(0.5, dtype="bool"), ValueError, "not exactly representable as bool"),
    (lambda b: b.const(1e20, dtype="int32"), ValueError, "not exactly representable as int32"),
    (lambda b: b.const(3e9, dtype="int32"), ValueError, "not exactly representable as int32"),
    (lambda b: b.const(np.array([2**40]), dtype="int32"), ValueError,
     "not exactly representable as int32"),
    (lambda b: b.const(2**31, dtype="int32"), (ValueError, OverflowError), "int32"),
    (lambda b: b.const(2, dtype="bool"), ValueError, "not exactly representable as bool"),
    (lambda b: b.finish([]), ValueError, "'main' needs at least one output"),
    (lambda b: b.finish([3]), ValueError, r"output 3 is not a node id in \[0, 3\)"),
    (lambda b: b.finish([True]), ValueError, "output True"),
])
def test_bad_arguments_raise_clear_errors(bb, call, exc, match):
    with pytest.raises(exc, match=match):
        call(bb)
    assert len(bb) == 3
    node = bb.add(0, 0)  # still usable
    ik.verify(bb.finish([node]))


@pytest.mark.parametrize(("value", "dtype", "want"), [
    (3.0, "int32", 3), (-2.0, "int64", -2), (1.0, "bool", True), (0, "bool", False),
    (np.array([1, 2]), "int32", [1, 2]), (0.1, "float32", np.float32(0.1)),
    (2**31 - 1, "int32", 2**31 - 1), (np.int64(-(2**31)), "int32", -(2**31)),
    (2**24 + 1, "float32", 2.0**24), (-0.0, "int32", 0),
])
def test_const_with_explicit_dtype_converts_representable_values(value, dtype, want):
    bb = ik.GraphBuilder("main")
    c = bb.const(value, dtype=dtype)
    f = bb.finish([c])
    got = f.const_value(c)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("value", "dtype"), [
    (1.5, "float64"), (np.float32(1.5), "float32"), (7, "int64"), (np.int32(7), "int32"),
    (True, "bool"), (np.arange(6, dtype=np.float32).reshape(2, 3), "float32"),
    (np.array([[True], [False]]), "bool"), (np.array([-1, 2**40], np.int64), "int64"),
    (np.array([1, -2, 3], np.int32), "int32"), (np.array([np.nan, -0.0, np.inf]), "float64"),
    (np.zeros((0, 3), np.float32), "float32"), (np.ones((1, 1), np.int32), "int32"),
])
def test_const_values_round_trip_through_the_pool(value, dtype):
    bb = ik.GraphBuilder("main")
    c = bb.const(value)
    f = bb.finish([c])
    got = f.const_value(c)
    assert got.dtype == np.dtype(dtype)
    assert f.node_type(c) == (dtype, np.shape(value))
    assert got.tobytes() == np.asarray(value).tobytes()
    assert not got.flags.writeable
    assert np.all(f.consts.offset % 16 == 0)


def test_param_shapes_accept_numpy_integers():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", np.array([2, 3]), np.float64)
    y = bb.param("y", (np.int64(2), 3), "float64")
    f = bb.finish([bb.add(x, y)])
    assert f.shape_id[x] == f.shape_id[y]
    assert f.node_type(x) == ("float64", (2, 3))


def test_max_nodes_limit_is_named(monkeypatch):
    monkeypatch.setattr(builder_module, "MAX_NODES", 3)
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float32")
    bb.exp(x)
    bb.exp(x)
    with pytest.raises(OverflowError, match="at most 3 nodes"):
        bb.exp(x)
    with pytest.raises(OverflowError, match="at most 3 nodes"):
        bb.add_nodes(np.array([ops.OP_EXP], np.int16), np.array([0], np.int32))


def test_incremental_growth_keeps_every_column():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float64")
    prev = x
    for i in range(5000):
        prev = bb.add(prev, bb.const(float(i % 7))) if i % 2 else bb.negative(prev)
    f = bb.finish([prev])
    assert f.num_nodes == 1 + 2500 * 3
    assert len(f.consts) == 7
    ik.verify(f)
