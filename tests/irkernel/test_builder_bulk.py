"""GraphBuilder bulk API (add_nodes, add_scalar_consts), finish, frozen Functions, interning."""

from __future__ import annotations

import numpy as np
import pytest

import irkernel as ik
from irkernel import ops
from irkernel.ir.ids import FLOAT32, FLOAT64, INT32, NONE

# -- bulk API -----------------------------------------------------------------------

def _bulk_base():
    bb = ik.GraphBuilder("main")
    bb.param("x", (3,), "float32")  # 0
    bb.param("c", (3,), "bool")  # 1
    return bb


def _i16(*v):
    return np.array(v, np.int16)


def _i32(*v):
    return np.array(v, np.int32)


def test_bulk_build_equals_incremental_build():
    # incremental
    bb = _bulk_base()
    one = bb.const(np.float32(1.0))  # 2
    a = bb.add(0, one)  # 3
    e = bb.exp(a)  # 4
    w = bb.where(1, e, 0)  # 5
    cat = bb.concat(w, e, a, 0, axis=0)  # 6
    s = bb.sum(cat, axis=0, keepdims=True)  # 7
    inc = bb.finish([s, w])
    # bulk, in two calls (extra offsets are per call)
    bb = _bulk_base()
    cid = bb.add_scalar_consts(np.array([1.0], np.float32), "float32")
    aid = bb.intern_attrs("sum", axis=0, keepdims=True)
    ids = bb.add_nodes(_i16(ops.OP_CONST, ops.OP_ADD, ops.OP_EXP, ops.OP_WHERE),
                       a0=_i32(cid[0], 0, 3, 0), a1=_i32(NONE, 2, NONE, 3),
                       extra=_i32(1, 4, 0))
    assert ids.dtype == np.int32
    assert ids.tolist() == [2, 3, 4, 5]
    ids = bb.add_nodes(_i16(ops.OP_CONCAT, ops.OP_SUM), a0=_i32(0, 6), a1=_i32(4, NONE),
                       attr_id=_i32(bb.intern_attrs("concat", axis=0), aid),
                       extra=_i32(5, 4, 3, 0))
    assert ids.tolist() == [6, 7]
    bulk = bb.finish([7, 5])
    ik.verify(bulk)
    assert ik.structural_equal(inc, bulk)
    x = np.array([0.0, 1.0, -1.0], np.float32)
    c = np.array([True, False, True])
    for got, want in zip(ik.interpret(bulk, x, c), ik.interpret(inc, x, c), strict=True):
        np.testing.assert_array_equal(got, want)


def test_bulk_given_types_are_checked_and_accepted():
    bb = _bulk_base()
    sid = bb.intern_shape((3,))
    ids = bb.add_nodes(_i16(ops.OP_EXP, ops.OP_LESS), a0=_i32(0, 0), a1=_i32(NONE, 2),
                       dtype=np.array([0, 4], np.int8), shape_id=_i32(sid, sid))
    f = bb.finish([int(ids[-1])])
    assert f.node_type(3) == ("bool", (3,))


def test_bulk_mixes_with_incremental_calls():
    bb = _bulk_base()
    e = bb.exp(0)
    ids = bb.add_nodes(_i16(ops.OP_LOG, ops.OP_CONCAT), a0=_i32(e, 0), a1=_i32(NONE, 2),
                       attr_id=_i32(0, bb.intern_attrs("concat")), extra=_i32(3, e))
    cat2 = bb.concat(int(ids[1]), 0)
    f = bb.finish([cat2])
    ik.verify(f)
    assert f.operands(int(ids[1])) == (3, 2)
    assert f.operands(cat2) == (4, 0)
    assert f.node_type(cat2) == ("float32", (9,))


def test_bulk_scalar_consts_are_interned():
    bb = ik.GraphBuilder("main")
    ids = bb.add_scalar_consts(np.array([1.0, 2.0, 1.0, -0.0, 0.0], np.float64), "float64")
    assert ids.dtype == np.int32
    assert ids[0] == ids[2]
    assert len(set(ids.tolist())) == 4
    c = bb.const(np.float64(2.0))
    ids2 = bb.add_scalar_consts(np.array([2.0, 3.0]), "float64")
    f = bb.finish([c])
    assert f.a0[c] == ids[1] == ids2[0]
    assert len(f.consts) == 5


@pytest.mark.parametrize(("values", "dtype"), [
    (np.array([1.0, 1.5]), "int32"), (np.array([np.nan]), "int64"), (np.array([2**40]), "int32"),
    (np.array([3e9]), "int32"), (np.array([2]), "bool"), (np.array([0.5]), "bool"),
])
def test_bulk_scalar_consts_must_be_exactly_representable(values, dtype):
    bb = ik.GraphBuilder("main")
    with pytest.raises(ValueError,
                       match=f"add_scalar_consts: .*not exactly representable as {dtype}"):
        bb.add_scalar_consts(values, dtype)
    ids = bb.add_scalar_consts(np.array([1, 0]), dtype)
    f = bb.finish([int(bb.add_nodes(np.full(2, ops.OP_CONST, np.int16), ids)[0])])
    assert f.const_value(0).tolist() == 1


def test_bulk_scalar_consts_round_floats_to_float32():
    bb = ik.GraphBuilder("main")
    ids = bb.add_scalar_consts(np.array([0.1, 2**24 + 1]), "float32")
    f = bb.finish([int(bb.add_nodes(np.full(2, ops.OP_CONST, np.int16), ids)[-1])])
    assert f.const_value(0) == np.float32(0.1)
    assert f.const_value(1) == np.float32(2**24)


def test_bulk_empty_call_is_a_no_op():
    bb = _bulk_base()
    ids = bb.add_nodes(np.zeros(0, np.int16))
    assert ids.tolist() == []
    assert len(bb) == 2


def _good_args(n=1):
    return {"kind": _i16(*[ops.OP_EXP] * n), "a0": _i32(*[0] * n), "a1": _i32(*[NONE] * n)}


BULK_TYPE_ERRORS = [
    ("kind", np.array([ops.OP_EXP], np.int32)),
    ("kind", [ops.OP_EXP]),
    ("a0", np.array([0], np.int64)),
    ("a1", np.array([NONE], np.int64)),
    ("a0", [0]),
    ("attr_id", np.array([0], np.int64)),
    ("extra", np.array([], np.int64)),
    ("dtype", np.array([0], np.int32)),
    ("shape_id", np.array([1], np.int64)),
]


@pytest.mark.parametrize(("arg", "value"), BULK_TYPE_ERRORS,
                         ids=[f"{a}-{i}" for i, (a, _) in enumerate(BULK_TYPE_ERRORS)])
def test_bulk_wrong_dtype_arrays_raise_type_error_naming_the_argument(arg, value):
    bb = _bulk_base()
    args = _good_args()
    if arg in ("dtype", "shape_id"):
        args["dtype"], args["shape_id"] = np.array([0], np.int8), _i32(1)
    args[arg] = value
    with pytest.raises(TypeError, match=f"add_nodes: {arg} must"):
        bb.add_nodes(**args)
    _assert_still_usable(bb, 2)


@pytest.mark.parametrize("arg", ["kind", "a0", "a1", "attr_id", "extra", "dtype", "shape_id"])
def test_bulk_non_contiguous_arrays_raise_value_error_naming_the_argument(arg):
    bb = _bulk_base()
    args = {**_good_args(2), "dtype": np.array([0, 0], np.int8), "shape_id": _i32(1, 1),
            "attr_id": _i32(0, 0)}
    if arg == "extra":
        args["extra"] = np.zeros(4, np.int32)[::2]
    else:
        args[arg] = np.repeat(args[arg], 2)[::2]
    assert not args[arg].flags.c_contiguous
    with pytest.raises(ValueError, match=f"add_nodes: {arg} must be a 1-D C-contiguous array"):
        bb.add_nodes(**args)
    _assert_still_usable(bb, 2)


def test_bulk_two_dimensional_array_is_rejected():
    bb = _bulk_base()
    with pytest.raises(ValueError, match="add_nodes: a0 must be a 1-D"):
        bb.add_nodes(_i16(ops.OP_EXP), np.zeros((1, 1), np.int32))


def _assert_still_usable(bb, n):
    assert len(bb) == n
    ids = bb.add_nodes(_i16(ops.OP_EXP), _i32(0))
    assert ids.tolist() == [n]
    e = bb.exp(n)
    f = bb.finish([e])
    ik.verify(f)
    assert f.num_nodes == n + 2
    np.testing.assert_allclose(ik.interpret(f, np.zeros(3, np.float32), np.zeros(3, bool))[0],
                               np.exp(np.ones(3, np.float32)), rtol=1e-6)


BULK_VALUE_ERRORS = {
    "wrong length a0": (dict(kind=_i16(ops.OP_EXP, ops.OP_EXP), a0=_i32(0)),
                        r"a0 has length 1, expected 2 \(len\(kind\)\)"),
    "wrong length a1": (dict(kind=_i16(ops.OP_ADD), a0=_i32(0), a1=_i32(0, 0)), "a1 has length 2"),
    "wrong length attr_id": (dict(kind=_i16(ops.OP_EXP), a0=_i32(0), attr_id=_i32(0, 0)),
                             "attr_id has length 2"),
    "wrong length dtype": (dict(kind=_i16(ops.OP_EXP), a0=_i32(0),
                                dtype=np.zeros(2, np.int8), shape_id=_i32(1)),
                           "dtype has length 2"),
    "only dtype": (dict(kind=_i16(ops.OP_EXP), a0=_i32(0), dtype=np.zeros(1, np.int8)),
                   "give both dtype and shape_id"),
    "unknown opcode": (dict(kind=_i16(999), a0=_i32(0)), "unknown opcode"),
    "negative opcode": (dict(kind=_i16(-1), a0=_i32(0)), "unknown opcode"),
    "param kind": (dict(kind=_i16(ops.OP_PARAM), a0=_i32(0)), r"GraphBuilder.param\(\)"),
    "operand not earlier": (dict(kind=_i16(ops.OP_EXP, ops.OP_EXP), a0=_i32(3, 0)),
                            r"node 2 \(exp if valid\): operand not earlier"),
    "operand is itself": (dict(kind=_i16(ops.OP_EXP), a0=_i32(2)), r"node 2 .*not earlier"),
    "operand out of range": (dict(kind=_i16(ops.OP_EXP, ops.OP_EXP), a0=_i32(0, 50)),
                             r"node 3 \(exp if valid\): operand out of range \(50\)"),
    "negative operand": (dict(kind=_i16(ops.OP_ADD), a0=_i32(0), a1=_i32(-1)),
                         "node 2 .*operand out of range"),
    "unused slot": (dict(kind=_i16(ops.OP_EXP), a0=_i32(0), a1=_i32(0)),
                    "node 2 .*unused operand slot is not NONE"),
    "variadic arity": (dict(kind=_i16(ops.OP_WHERE), a0=_i32(0), a1=_i32(2), extra=_i32(1, 0)),
                       r"node 2 \(where if valid\): wrong arity"),
    "variadic outside extra": (dict(kind=_i16(ops.OP_CONCAT), a0=_i32(0), a1=_i32(3),
                                    extra=_i32(0, 0)),
                               r"node 2 \(concat\): operands \[0, 3\) lie outside this call"),
    "variadic not earlier": (dict(kind=_i16(ops.OP_CONCAT), a0=_i32(0), a1=_i32(2),
                                  extra=_i32(0, 2)), "node 2 .*not earlier"),
    "const id": (dict(kind=_i16(ops.OP_CONST), a0=_i32(5)), "node 2 .*const id out of range"),
    "attr id": (dict(kind=_i16(ops.OP_EXP), a0=_i32(0), attr_id=_i32(40)),
                "node 2 .*attribute id out of range"),
    "shape id": (dict(kind=_i16(ops.OP_EXP), a0=_i32(0), dtype=np.zeros(1, np.int8),
                      shape_id=_i32(40)), "node 2 .*shape id out of range"),
    "dtype code": (dict(kind=_i16(ops.OP_EXP), a0=_i32(0), dtype=np.array([99], np.int8),
                        shape_id=_i32(1)), "node 2 .*dtype code out of range"),
    "type rule": (dict(kind=_i16(ops.OP_EXP, ops.OP_ADD), a0=_i32(0, 0), a1=_i32(NONE, 1)),
                  r"node 3: add: operand dtype bool not supported "
                  r".*%0: float32\[3\], %1: bool\[3\]"),
    "given dtype differs": (dict(kind=_i16(ops.OP_EXP), a0=_i32(0), dtype=np.array([1], np.int8),
                                 shape_id=_i32(1)),
                            r"node 2 \(exp\): given type float64\[3\] differs from the inferred"),
    "given shape differs": (dict(kind=_i16(ops.OP_EXP), a0=_i32(0), dtype=np.array([0], np.int8),
                                 shape_id=_i32(0)),
                            r"node 2 \(exp\): given type float32\[\] differs"),
}


@pytest.mark.parametrize("case", list(BULK_VALUE_ERRORS))
def test_bulk_bad_values_raise_value_error_and_leave_the_builder_usable(case):
    args, match = BULK_VALUE_ERRORS[case]
    bb = _bulk_base()
    bb.intern_shape((3,))
    with pytest.raises(ValueError, match="add_nodes: .*" + match):
        bb.add_nodes(**args)
    _assert_still_usable(bb, 2)


@pytest.mark.parametrize(("a0", "a1", "extra"), [(-1, 2, [0]), (0, 2, []), (1, 2, [0, 0]),
                                            (0, -1, [0])])
def test_bulk_variadic_range_must_lie_in_this_calls_extra(a0, a1, extra):
    bb = _bulk_base()
    bb.concat(0, 0)  # node 2: the builder's extra is no longer empty
    with pytest.raises(ValueError, match=r"add_nodes: node 3 \(concat\): .*outside this call's "
                                         rf"extra \(length {len(extra)}\)"):
        bb.add_nodes(_i16(ops.OP_CONCAT), _i32(a0), _i32(a1), extra=_i32(*extra),
                     attr_id=_i32(bb.intern_attrs("concat")))
    _assert_still_usable(bb, 3)


def test_bulk_zero_operand_variadic_nodes():
    bb = _bulk_base()
    bb.concat(0, 0)
    aid = bb.intern_attrs("call_func", callee="f", dtype="int32", shape=(2,))
    ids = bb.add_nodes(_i16(ops.OP_CALL_FUNC), _i32(0), _i32(0), attr_id=_i32(aid))
    f = bb.finish([int(ids[0])])
    ik.verify(f)
    assert f.operands(3) == ()
    assert f.node_type(3) == ("int32", (2,))


def test_bulk_attribute_set_of_another_op_is_rejected():
    bb = _bulk_base()
    aid = bb.intern_attrs("sum", axis=0)
    with pytest.raises((ValueError, TypeError), match=r"node 2 .*add|add.*axis"):
        bb.add_nodes(_i16(ops.OP_ADD), _i32(0), _i32(0), attr_id=_i32(aid))
    _assert_still_usable(bb, 2)
    bb = _bulk_base()
    aid = bb.intern_attrs("reshape", shape=(3,))
    with pytest.raises(ValueError, match=r"node 2 \(sum\): attribute set"):
        bb.add_nodes(_i16(ops.OP_SUM), _i32(0), attr_id=_i32(aid))
    _assert_still_usable(bb, 2)


def test_bulk_repeated_failure_is_still_rejected():
    """A failed sweep must not leave a half-made signature that a retry then trusts."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    y = bb.param("y", (4,), "float32")
    for _ in range(3):
        with pytest.raises(ValueError, match=r"\(3,\), \(4,\) do not broadcast"):
            bb.add_nodes(_i16(ops.OP_ADD), _i32(x), _i32(y))
        assert len(bb) == 2
    with pytest.raises(ValueError, match="do not broadcast"):
        bb.add(x, y)
    ids = bb.add_nodes(_i16(ops.OP_ADD), _i32(x), _i32(x))
    f = bb.finish([int(ids[0])])
    ik.verify(f)
    assert f.node_type(2) == ("float32", (3,))


def test_bulk_failure_in_a_later_node_rolls_back_the_whole_call():
    bb = _bulk_base()
    extra_before = len(bb._extra)
    with pytest.raises(ValueError, match="node 4"):
        bb.add_nodes(_i16(ops.OP_EXP, ops.OP_CONCAT, ops.OP_LOG), a0=_i32(0, 0, 1),
                     a1=_i32(NONE, 2, NONE), attr_id=_i32(0, bb.intern_attrs("concat"), 0),
                     extra=_i32(2, 0))
    assert len(bb) == 2
    assert len(bb._extra) == extra_before
    _assert_still_usable(bb, 2)


# -- finish ---------------------------------------------------------------------------

SPEC_DTYPES = {"kind": np.int16, "a0": np.int32, "a1": np.int32, "dtype": np.int8,
               "shape_id": np.int32, "attr_id": np.int32, "extra": np.int32,
               "params": np.int32, "outputs": np.int32}


def _sample_function():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2,), "float32")
    c = bb.const(np.array([1.0, 2.0], np.float32))
    cat = bb.concat(x, c, x)
    return bb, bb.finish([bb.sum(cat), cat])


def test_finish_freezes_columns_with_the_spec_dtypes():
    _, f = _sample_function()
    for col, dtype in SPEC_DTYPES.items():
        arr = getattr(f, col)
        assert arr.dtype == dtype, col
        assert arr.ndim == 1, col
        assert arr.flags.c_contiguous, col
        assert not arr.flags.writeable, col
        with pytest.raises(ValueError, match="read-only"):
            arr[:1] = 0
    for arr in (f.consts.dtype, f.consts.shape_id, f.consts.sval, f.consts.offset, f.consts.data):
        assert not arr.flags.writeable
    assert f.params.tolist() == [0]
    assert f.outputs.tolist() == [3, 2]
    assert f.param_names == ("x",)
    assert f.num_nodes == len(f) == 4


def test_function_is_frozen():
    _, f = _sample_function()
    with pytest.raises(AttributeError):
        f.kind = np.zeros(4, np.int16)
    with pytest.raises(TypeError):
        f.attrs["global_symbol"] = "other"


def test_builder_is_unusable_after_finish():
    bb, _ = _sample_function()
    for call in (lambda: bb.param("z", (1,)), lambda: bb.const(1.0), lambda: bb.exp(0),
                 lambda: bb.call("add", 0, 0), lambda: bb.finish([0]),
                 lambda: bb.add_nodes(_i16(ops.OP_EXP), _i32(0)),
                 lambda: bb.add_scalar_consts(np.ones(1), "float64")):
        with pytest.raises(RuntimeError, match=r"GraphBuilder\('main'\) is finished"):
            call()


def test_finish_accepts_a_single_output_id():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "int32")
    f = bb.finish(x)
    assert f.outputs.tolist() == [x]


def test_constants_are_interned():
    bb = ik.GraphBuilder("main")
    c = [bb.const(np.float32(1.5)), bb.const(np.float32(1.5)),  # shared
         bb.const(np.float64(1.5)),  # other dtype
         bb.const(np.array([1.5], np.float32)),  # other shape
         bb.const(np.float32(0.0)), bb.const(np.float32(-0.0)),  # distinct bits
         bb.const(np.array([1, 2, 3], np.int32)), bb.const([1, 2, 3], dtype="int32"),  # shared
         bb.const(np.array([1, 2, 3], np.int64))]
    nan_a = np.array([0x7FF8000000000001], np.int64).view(np.float64)[0]
    nan_b = np.array([0x7FF8000000000002], np.int64).view(np.float64)[0]
    c += [bb.const(nan_a), bb.const(nan_b), bb.const(nan_a)]
    f = bb.finish(c)
    cid = f.a0[c].tolist()
    assert cid[0] == cid[1]
    assert cid[6] == cid[7]
    assert cid[9] == cid[11]
    distinct = [cid[i] for i in (0, 2, 3, 4, 5, 6, 8, 9, 10)]
    assert len(set(distinct)) == len(distinct) == len(f.consts)
    assert f.const_value(c[5]).tobytes() == np.float32(-0.0).tobytes()
    assert f.const_value(c[10]).tobytes() == nan_b.tobytes()
    assert f.const_value(c[9]).tobytes() == nan_a.tobytes()


def test_float32_nan_payloads_are_distinct():
    bb = ik.GraphBuilder("main")
    a = np.array([0x7FC00001], np.int32).view(np.float32)
    b = np.array([0x7FC00002], np.int32).view(np.float32)
    ca, cb = bb.const(a[0]), bb.const(b[0])
    f = bb.finish([ca, cb])
    assert f.a0[ca] != f.a0[cb]
    assert f.const_value(ca).tobytes() == a.tobytes()


def test_global_symbol_is_set_unless_private():
    bb = ik.GraphBuilder("main")
    f = bb.finish([bb.param("x", ())])
    assert dict(f.attrs) == {"global_symbol": "main"}
    bb = ik.GraphBuilder("helper", private=True)
    f = bb.finish([bb.param("x", ())])
    assert "global_symbol" not in f.attrs
    bb = ik.GraphBuilder("k", attrs={"SkipOptimization": True})
    f = bb.finish([bb.param("x", ())])
    assert dict(f.attrs) == {"global_symbol": "k", "SkipOptimization": True}


@pytest.mark.parametrize("name", ["", None, 3])
def test_builder_name_must_be_a_non_empty_str(name):
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        ik.GraphBuilder(name)


def test_with_attr_returns_a_new_function_sharing_arrays():
    _, f = _sample_function()
    g = f.with_attr("SkipOptimization", True)
    assert g is not f
    assert dict(f.attrs) == {"global_symbol": "main"}
    assert dict(g.attrs) == {"global_symbol": "main", "SkipOptimization": True}
    for col in SPEC_DTYPES:
        assert getattr(g, col) is getattr(f, col), col
    assert g.shapes is f.shapes
    assert g.consts is f.consts
    assert g.attr_table is f.attr_table
    assert g.with_attr("SkipOptimization", True) is g
    h = g.without_attr("SkipOptimization")
    assert dict(h.attrs) == dict(f.attrs)
    assert h.kind is f.kind


def test_function_constructor_checks_columns():
    _, f = _sample_function()
    fields = {k: getattr(f, k) for k in f.__dataclass_fields__}
    with pytest.raises(TypeError, match="column 'a0' must be int32, got int64"):
        ik.Function(**{**fields, "a0": f.a0.astype(np.int64)})
    with pytest.raises(ValueError, match="column 'a1' has length 3, expected 4"):
        ik.Function(**{**fields, "a1": f.a1[:3]})
    with pytest.raises(ValueError, match="param_names and params differ"):
        ik.Function(**{**fields, "param_names": ("x", "y")})
    a0 = f.a0.copy()
    g = ik.Function(**{**fields, "a0": a0})
    assert not g.a0.flags.writeable
    a0[0] = 5  # the Function never aliases a writeable array
    assert g.a0[0] == f.a0[0]


def test_intern_shape_reserves_zero_for_scalars():
    bb = ik.GraphBuilder("main")
    assert bb.intern_shape(()) == 0
    sid = bb.intern_shape([2, 3])
    assert bb.intern_shape((2, 3)) == sid == bb.intern_shape(np.array([2, 3]))
    assert bb.intern_shape((3, 2)) != sid


def test_column_types_of_dtype_constants():
    assert (FLOAT32, FLOAT64, INT32) == (0, 1, 2)


def test_a_failed_add_nodes_leaves_the_builder_usable_after_a_view_cycle() -> None:
    """Views of the columns caught in a reference cycle block every later append until the
    garbage collector runs (an intermittent BufferError after a failed add_nodes): the
    failed call collects them before it shrinks the columns."""
    import gc

    import numpy as np

    import irkernel as ik
    from irkernel import ops

    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    gc.disable()
    try:
        cycle: list = [np.frombuffer(bb._kind, np.int16)]
        cycle.append(cycle)  # unreachable once deleted, freed only by a collection
        del cycle
        with pytest.raises(ValueError):
            bb.add_nodes(np.array([ops.OP_EXP, ops.OP_EXP], np.int16),
                         np.array([x, 99], np.int32))
        y = bb.exp(x)
    finally:
        gc.enable()
    np.testing.assert_allclose(ik.interpret(ik.IRModule({"main": bb.finish([y])}),
                                            np.ones(3, np.float32))[0], np.exp(np.ones(3)))
