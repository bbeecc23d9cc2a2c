"""The op table: integrity of the registry and the dtype/shape rules of every op."""

from __future__ import annotations

import re

import numpy as np
import pytest

from irkernel import ops
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.ids import (
    BOOL,
    ENC_BINARY,
    ENC_CONST,
    ENC_PARAM,
    ENC_UNARY,
    ENC_VARIADIC,
    FLOAT32,
    FLOAT64,
    INT32,
    INT64,
)

OPS = ops.all_ops()
OP_NAMES = [op.name for op in OPS]
REQUIRED = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "negative",
            "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs", "where", "equal", "less",
            "greater", "matmul", "sum", "max", "mean", "reshape", "permute_dims", "broadcast_to",
            "astype", "concat", "call_func"]


def _infer(name, types, **attrs):
    op = ops.get_op(name)
    return op.infer(types, dict(op.normalize_attrs(attrs)))


# -- table integrity ----------------------------------------------------------

@pytest.mark.parametrize("name", OP_NAMES)
def test_opcode_constant_matches_registry(name):
    op = ops.get_op(name)
    assert getattr(ops, "OP_" + name.upper()) == op.opcode
    assert ops.get_op(op.opcode) is op
    assert ops.all_ops()[op.opcode] is op  # rows are replaced when passes install templates


def test_required_ops_are_all_registered():
    assert set(REQUIRED) <= set(OP_NAMES)
    assert len(set(OP_NAMES)) == len(OP_NAMES)


def test_op_arrays_columns_have_one_entry_per_op():
    table = ops.op_arrays()
    for col, dtype in (("encoding", np.int8), ("arity", np.int8), ("pattern", np.int8),
                       ("pure", np.bool_), ("commutative", np.bool_)):
        arr = getattr(table, col)
        assert arr.dtype == dtype, col
        assert arr.shape == (ops.num_ops(),), col
        assert not arr.flags.writeable, col
        assert arr.tolist() == [getattr(op, col) for op in OPS], col


@pytest.mark.parametrize("name", OP_NAMES)
def test_every_op_is_documented_and_consistent(name):
    op = ops.get_op(name)
    assert op.doc.strip(), f"{name} has no doc"
    assert op.pattern in ops.PATTERN_NAMES
    want_arity = {ENC_UNARY: {1}, ENC_BINARY: {2}, ENC_PARAM: {0}, ENC_CONST: {0}}
    if op.encoding == ENC_VARIADIC:
        assert op.arity == -1 or op.arity > 2
    else:
        assert op.arity in want_arity[op.encoding]
    has_ref = op.reference is not None
    assert has_ref == (name not in ("param", "const", "call_func", "call_tir"))
    assert len({s.name for s in op.attrs}) == len(op.attrs)


def test_get_op_unknown_name_and_opcode():
    with pytest.raises(ValueError, match="unknown op 'frobnicate'"):
        ops.get_op("frobnicate")
    with pytest.raises(ValueError, match="unknown opcode 999"):
        ops.get_op(999)
    with pytest.raises(ValueError, match="unknown opcode -1"):
        ops.get_op(-1)


def test_register_op_rejects_a_duplicate_name():
    with pytest.raises(ValueError, match="'add' is already registered"):
        ops.register_op(ops.get_op("add"))
    assert ops.num_ops() == len(OPS)


# -- attribute normalization --------------------------------------------------

@pytest.mark.parametrize(("op", "attrs", "canonical"), [
    ("sum", {}, (("axis", None), ("keepdims", False))),
    ("sum", {"axis": 1}, (("axis", (1,)), ("keepdims", False))),
    ("sum", {"axis": np.int64(-1), "keepdims": np.bool_(True)},
     (("axis", (-1,)), ("keepdims", True))),
    ("max", {"axis": [0, 2]}, (("axis", (0, 2)), ("keepdims", False))),
    ("reshape", {"shape": np.array([2, -1])}, (("shape", (2, -1)),)),
    ("astype", {"dtype": np.float64}, (("dtype", "float64"),)),
    ("astype", {"dtype": np.dtype("int32")}, (("dtype", "int32"),)),
    ("concat", {}, (("axis", 0),)),
    ("call_func", {"callee": "f", "dtype": "bool", "shape": [2]},
     (("callee", "f"), ("dtype", "bool"), ("shape", (2,)))),
])
def test_attributes_normalize_to_canonical_records(op, attrs, canonical):
    assert ops.get_op(op).normalize_attrs(attrs) == canonical


@pytest.mark.parametrize(("op", "attrs", "match"), [
    ("sum", {"axis": "0"}, "sum: attribute 'axis' must be None, an int or a sequence of ints"),
    ("sum", {"axis": True}, "attribute 'axis'"),
    ("sum", {"axis": (0.0,)}, "attribute 'axis'"),
    ("sum", {"keepdims": 1}, "sum: attribute 'keepdims' must be a bool"),
    ("reshape", {"shape": (2.0, 3)}, "reshape: attribute 'shape' must be a sequence of ints"),
    ("reshape", {"shape": 6}, "attribute 'shape'"),
    ("astype", {"dtype": "float8"}, "astype: attribute 'dtype' must be a dtype name"),
    ("concat", {"axis": None}, "concat: attribute 'axis' must be an int"),
    ("call_func", {"callee": 3, "dtype": "bool", "shape": ()}, "attribute 'callee' must be a str"),
    ("add", {"axis": 0}, r"add: unknown attribute 'axis' \(valid: none\)"),
    ("sum", {"axes": 0}, r"sum: unknown attribute 'axes' \(valid: axis, keepdims\)"),
    ("reshape", {}, "reshape: missing required attribute 'shape'"),
])
def test_bad_attributes_raise_type_error_naming_the_attribute(op, attrs, match):
    with pytest.raises(TypeError, match=match):
        ops.get_op(op).normalize_attrs(attrs)


# -- rules: accepted types ----------------------------------------------------

F32, F64, I32, I64, B = FLOAT32, FLOAT64, INT32, INT64, BOOL


@pytest.mark.parametrize(("op", "types", "attrs", "want"), [
    ("add", [(F32, (3, 1)), (F32, (4,))], {}, (F32, (3, 4))),
    ("add", [(I64, ()), (I64, (2, 0))], {}, (I64, (2, 0))),
    ("less", [(B, (2,)), (B, (2,))], {}, (B, (2,))),
    ("equal", [(F64, (1, 5)), (F64, (3, 1))], {}, (B, (3, 5))),
    ("where", [(B, (3, 1)), (I32, (4,)), (I32, ())], {}, (I32, (3, 4))),
    ("where", [(B, ()), (B, ()), (B, ())], {}, (B, ())),
    ("matmul", [(F32, (3,)), (F32, (3,))], {}, (F32, ())),
    ("matmul", [(F32, (2, 3)), (F32, (3,))], {}, (F32, (2,))),
    ("matmul", [(I32, (3,)), (I32, (3, 4))], {}, (I32, (4,))),
    ("matmul", [(F64, (2, 1, 2, 3)), (F64, (5, 3, 4))], {}, (F64, (2, 5, 2, 4))),
    ("sum", [(I32, (2, 3, 4))], {}, (I32, ())),
    ("sum", [(I32, (2, 3, 4))], {"axis": -1}, (I32, (2, 3))),
    ("max", [(F32, (2, 3, 4))], {"axis": (0, 2), "keepdims": True}, (F32, (1, 3, 1))),
    ("mean", [(F64, (2, 3))], {"axis": ()}, (F64, (2, 3))),
    ("sum", [(F32, (0, 3))], {"axis": 0}, (F32, (3,))),
    ("reshape", [(B, (2, 3, 4))], {"shape": (6, -1)}, (B, (6, 4))),
    ("reshape", [(F32, (0, 3))], {"shape": (-1, 3)}, (F32, (0, 3))),
    ("reshape", [(F32, (1, 1))], {"shape": ()}, (F32, ())),
    ("permute_dims", [(F32, (2, 3, 4))], {}, (F32, (4, 3, 2))),
    ("permute_dims", [(F32, (2, 3, 4))], {"axes": (-1, 0, 1)}, (F32, (4, 2, 3))),
    ("permute_dims", [(F32, ())], {}, (F32, ())),
    ("broadcast_to", [(I64, (3, 1))], {"shape": (2, 3, 4)}, (I64, (2, 3, 4))),
    ("astype", [(F32, (2,))], {"dtype": "bool"}, (B, (2,))),
    ("concat", [(F32, (2, 3)), (F32, (2, 1))], {"axis": -1}, (F32, (2, 4))),
    ("concat", [(B, (1,))], {}, (B, (1,))),
    ("call_func", [(F32, (2,))], {"callee": "f", "dtype": "int64", "shape": (5,)}, (I64, (5,))),
    ("call_func", [], {"callee": "f", "dtype": "int64", "shape": ()}, (I64, ())),
])
def test_rules_infer_dtype_and_shape(op, types, attrs, want):
    assert _infer(op, types, **attrs) == want


# -- rules: rejections name the shapes/dtypes ---------------------------------

def _esc(*parts):
    return ".*".join(re.escape(p) for p in parts)


BAD_RULES = [
    ("add", [(F32, (3,)), (F32, (4,))], {}, _esc("shapes (3,), (4,) do not broadcast")),
    ("multiply", [(F32, (2, 3)), (F32, (3, 2))], {}, _esc("(2, 3), (3, 2)", "broadcast")),
    ("add", [(F32, (3,)), (F64, (3,))], {}, _esc("dtypes differ (float32, float64)")),
    ("subtract", [(B, (3,)), (B, (3,))], {}, _esc("dtype bool not supported")),
    ("exp", [(I32, (3,))], {}, _esc("dtype int32 not supported")),
    ("power", [(I64, ()), (I64, ())], {}, _esc("dtype int64 not supported")),
    ("negative", [(B, ())], {}, _esc("dtype bool not supported")),
    ("where", [(F32, (3,)), (F32, (3,)), (F32, (3,))], {}, "condition must be bool, got float32"),
    ("where", [(B, (3,)), (F32, (3,)), (I32, (3,))], {}, _esc("(float32, int32)")),
    ("where", [(B, (2,)), (F32, (3,)), (F32, (3,))], {}, _esc("(2,), (3,), (3,) do not broadcast")),
    ("matmul", [(F32, (3, 4)), (F32, (5, 6))], {}, _esc("(3, 4) @ (5, 6)")),
    ("matmul", [(F32, ()), (F32, (3,))], {}, _esc("rank >= 1, got () and (3,)")),
    ("matmul", [(F32, (2, 3, 4)), (F32, (3, 4, 5))], {}, _esc("(2,), (3,) do not broadcast")),
    ("matmul", [(B, (2, 2)), (B, (2, 2))], {}, "dtype bool not supported"),
    ("sum", [(F32, (2, 3))], {"axis": 2}, "axis 2 out of range for rank 2"),
    ("sum", [(F32, (2, 3))], {"axis": -3}, "axis -3 out of range for rank 2"),
    ("sum", [(F32, ())], {"axis": 0}, "axis 0 out of range for rank 0"),
    ("max", [(F32, (2, 3))], {"axis": (1, -1)}, "repeated axis"),
    ("max", [(F32, (0, 3))], {"axis": 0}, _esc("empty axis of shape (0, 3)")),
    ("mean", [(I32, (3,))], {}, "dtype int32 not supported"),
    ("sum", [(B, (3,))], {}, "dtype bool not supported"),
    ("reshape", [(F32, (2, 3))], {"shape": (4,)}, _esc("cannot reshape (2, 3) to (4,)")),
    ("reshape", [(F32, (2, 3))], {"shape": (4, -1)}, _esc("cannot reshape (2, 3) to (4, -1)")),
    ("reshape", [(F32, (2, 3))], {"shape": (-1, -1)}, _esc("bad reshape target (-1, -1)")),
    ("reshape", [(F32, (2, 3))], {"shape": (-2, -3)}, _esc("bad reshape target (-2, -3)")),
    ("reshape", [(F32, (0, 3))], {"shape": (0, -1)}, _esc("cannot reshape (0, 3) to (0, -1)")),
    ("permute_dims", [(F32, (2, 3))], {"axes": (0, 0)}, "not a permutation of rank 2"),
    ("permute_dims", [(F32, (2, 3))], {"axes": (0, -3)}, "not a permutation of rank 2"),
    ("permute_dims", [(F32, (2, 3))], {"axes": (0, 1, 2)}, "not a permutation of rank 2"),
    ("broadcast_to", [(F32, (3,))], {"shape": (4,)}, _esc("(3,)", "(4,)")),
    ("broadcast_to", [(F32, (2, 3))], {"shape": (3,)}, _esc("cannot broadcast (2, 3) to (3,)")),
    ("broadcast_to", [(F32, (1,))], {"shape": (-1,)}, _esc("cannot broadcast (1,) to (-1,)")),
    ("concat", [(F32, (2,)), (F32, (2, 3))], {}, _esc("one rank >= 1, got (2,), (2, 3)")),
    ("concat", [(F32, ()), (F32, ())], {}, _esc("got (), ()")),
    ("concat", [(F32, (2, 3)), (F32, (3, 3))], {"axis": 1}, _esc("off the axis: (2, 3), (3, 3)")),
    ("concat", [(F32, (2,)), (I32, (2,))], {}, _esc("(float32, int32)")),
    ("concat", [(F32, (2,))], {"axis": 1}, "axis 1 out of range for rank 1"),
    ("concat", [], {}, "at least one operand"),
    ("call_func", [], {"callee": "f", "dtype": "bool", "shape": (-1,)},
     _esc("bad result shape (-1,)")),
    ("param", [], {}, "carry their own type"),
    ("const", [], {}, "carry their own type"),
]


@pytest.mark.parametrize(("op", "types", "attrs", "match"), BAD_RULES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_RULES)])
def test_rules_reject_bad_types_naming_the_shapes(op, types, attrs, match):
    with pytest.raises(TypeInferenceError, match=match):
        _infer(op, types, **attrs)


def test_type_inference_error_is_a_value_error():
    assert issubclass(TypeInferenceError, ValueError)


@pytest.mark.parametrize(("shapes", "want"), [
    ([(), ()], ()),
    ([(3, 1), (4,)], (3, 4)),
    ([(1,), (0,)], (0,)),
    ([(2, 1, 3), (5, 1), ()], (2, 5, 3)),
])
def test_broadcast_shapes_follows_numpy(shapes, want):
    assert ops.broadcast_shapes(*shapes) == want == np.broadcast_shapes(*shapes)
