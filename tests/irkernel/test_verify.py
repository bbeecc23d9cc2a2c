"""ik.verify: accepts what the builder makes, rejects each malformed case by name.

Malformed Functions are made from a valid one by replacing one field:
``ik.Function(**{**fields(f), "a0": patched})``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import irkernel as ik
from irkernel import ops
from irkernel.ir.ids import BOOL, FLOAT64, INT32, MAX_RANK, NONE
from irkernel.ir.pools import AttrTable, ConstPool, ShapeTable


def _base():
    """Node ids are fixed; the malformed cases below patch them."""
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")  # 0
    y = bb.param("y", (3,), "float32")  # 1
    c = bb.const(np.array([1.0, 2.0, 3.0], np.float32))  # 2
    a = bb.add(x, c)  # 3
    e = bb.exp(a)  # 4
    g = bb.greater(e, y)  # 5
    w = bb.where(g, e, y)  # 6
    s = bb.sum(w, axis=0)  # 7
    cat = bb.concat(x, y, s := bb.reshape(s, shape=(1,)))  # 8 reshape, 9 concat
    assert (a, e, g, w, s, cat) == (3, 4, 5, 6, 8, 9)
    return bb.finish([7, cat])


BASE = _base()


def _fields(f):
    return {k: getattr(f, k) for k in f.__dataclass_fields__}


def patched(f=BASE, **changes):
    """A Function equal to ``f`` except for the given fields; a callable value patches a copy."""
    fields = _fields(f)
    for name, change in changes.items():
        if callable(change):
            col = np.array(fields[name])
            change(col)
            fields[name] = col
        else:
            fields[name] = change
    return ik.Function(**fields)


def _set(i, v):
    def patch(col):
        col[i] = v
    return patch


def test_base_is_valid():
    ik.verify(BASE)
    ik.verify(ik.IRModule({"main": BASE}))


# -- accepts ----------------------------------------------------------------------

def _every_op_function():
    bb = ik.GraphBuilder("main")
    f = bb.param("f", (2, 3), "float32")
    i = bb.param("i", (3,), "int64")
    b = bb.param("b", (2, 1), "bool")
    outs = [bb.add(f, f), bb.subtract(i, i), bb.multiply(f, f), bb.divide(i, i),
            bb.maximum(f, f), bb.minimum(i, i), bb.power(f, f), bb.negative(i), bb.exp(f),
            bb.log(f), bb.sqrt(f), bb.tanh(f), bb.sigmoid(f), bb.relu(i), bb.abs(f),
            bb.where(b, f, f), bb.equal(b, b), bb.less(f, f), bb.greater(i, i),
            bb.matmul(f, bb.permute_dims(f)), bb.sum(f, axis=1), bb.max(i, keepdims=True),
            bb.mean(f, axis=(0, 1)), bb.reshape(f, shape=(-1,)),
            bb.broadcast_to(b, shape=(4, 2, 3)), bb.astype(i, dtype="float64"),
            bb.concat(f, f, f, f, f, axis=-1), bb.const(np.array([[True, False]])),
            bb.call_tir(f, callee="kernel", dtype="float32", shape=(2, 3))]
    outs += [bb.erf(f), bb.floor(f), bb.ceil(f), bb.round(f), bb.logical_not(b),
             bb.logical_and(b, b), bb.logical_or(b, b), bb.logical_xor(b, b),
             bb.floor_mod(i, i), bb.fmod(f, f), bb.min(f, axis=0), bb.prod(i),
             bb.argmax(f, axis=1), bb.argmin(i, keepdims=True),
             bb.strided_slice(f, begin=(0, -1), end=(2, -4), strides=(1, -1)),
             bb.take(f, i, axis=1), bb.pad(f, bb.const(np.float32(0)), pad_width=(0, 1, 2, 0)),
             bb.scatter_nd(f, bb.const(np.array([[1]])), bb.param("u", (1, 3), "float32"))]
    img = bb.param("img", (1, 2, 5, 5), "float32")
    outs += [bb.conv(img, bb.param("w", (4, 1, 3, 3), "float32"), groups=2),
             bb.conv_transpose(img, bb.param("wt", (2, 3, 2, 2), "float32"), strides=(2, 2)),
             bb.max_pool(img, kernel=(2, 2)), bb.avg_pool(img, kernel=(3, 3), padding=(1,) * 4),
             bb.lrn(img, size=3, alpha=1e-3, beta=-0.0, bias=float("nan"))]
    outs += [bb.call(op, f) for op in ops.TRIG_OPS]
    outs += [bb.cumsum(i), bb.cumprod(f, axis=1, reverse=True),
             bb.topk_indices(f, k=2, largest=False)]
    seq4, seq3 = bb.param("seq4", (4, 2, 12), "float32"), bb.param("seq3", (4, 2, 9), "float32")
    outs += [bb.lstm_recurrence(seq4, bb.param("rt4", (3, 12), "float32"), f, f,
                                bb.param("p", (3, 3), "float32"), input_forget=True),
             bb.gru_recurrence(seq3, bb.param("rt3", (3, 9), "float32"),
                               bb.param("rbh", (3,), "float32"), f, clip=2.0)]
    return bb.finish(outs)


def test_accepts_every_op_the_builder_makes():
    f = _every_op_function()
    covered = {f.op(i).name for i in range(f.num_nodes)}
    assert covered | {"call_func"} == {op.name for op in ops.all_ops()}
    ik.verify(f)


def test_accepts_bulk_built_functions():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (), "float64")
    cids = bb.add_scalar_consts(np.arange(5, dtype=np.float64), "float64")
    n = 1000
    kind = np.where(np.arange(n) % 2 == 0, ops.OP_CONST, ops.OP_ADD).astype(np.int16)
    a0 = np.where(kind == ops.OP_CONST, cids[np.arange(n) % 5], np.arange(n)).astype(np.int32)
    a0[1] = x
    a1 = np.where(kind == ops.OP_ADD, np.arange(n), NONE).astype(np.int32)
    ids = bb.add_nodes(kind, a0, a1)
    ik.verify(bb.finish([int(ids[-1])]))


def _call_module(**main_call):
    hb = ik.GraphBuilder("helper", private=True)
    p = hb.param("a", (3,), "float32")
    q = hb.param("b", (), "int32")
    helper = hb.finish([hb.add(p, hb.astype(q, dtype="float32"))])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    i = bb.param("i", (), "int32")
    call = {"callee": "helper", "args": (x, i), "dtype": "float32", "shape": (3,), **main_call}
    r = bb.call_func(call["callee"], *call["args"], dtype=call["dtype"], shape=call["shape"])
    return ik.IRModule({"main": bb.finish([r]), "helper": helper})


def test_accepts_a_module_with_call_func():
    ik.verify(_call_module())


def test_accepts_with_attr_and_private_functions():
    ik.verify(BASE.with_attr("SkipOptimization", True))
    bb = ik.GraphBuilder("p", private=True)
    ik.verify(bb.finish([bb.param("x", ())]), name="p")


# -- rejects: one column replaced -------------------------------------------------

def _shape_id(f, shape):
    return f.shapes.index[shape]


MALFORMED = {
    "operand out of range": (dict(a0=_set(4, 99)),
                             r"node 4 \(exp\): operand 99 is out of range \[0, 10\)",
                             "operand out of range"),
    "negative operand": (dict(a1=_set(3, -7)), r"node 3 \(add\): operand -7 is out of range",
                         "operand out of range"),
    "operand not earlier": (dict(a0=_set(3, 4)), r"node 3 \(add\): operand 4 is not earlier",
                            r"operand not earlier \(topological order\)"),
    "operand is the node": (dict(a0=_set(4, 4)), r"node 4 \(exp\): operand 4 is not earlier",
                            "topological order"),
    "variadic operand not earlier": (dict(extra=_set(3, 9)),
                                     r"node 9 \(concat\): operand 9 is not earlier",
                                     "topological order"),
    "variadic operand out of range": (dict(extra=_set(0, 10)),
                                      r"node 6 \(where\): operand 10 is out of range",
                                      "operand out of range"),
    "variadic arity": (dict(a1=_set(6, 2)), r"node 6 \(where\): has 2 operands, expected 3",
                       "wrong arity"),
    "unused slot": (dict(a1=_set(4, 0)), r"node 4 \(exp\): bad value 0",
                    "unused operand slot is not NONE"),
    "const a1": (dict(a1=_set(2, 0)), r"node 2 \(const\)", "unused operand slot is not NONE"),
    "param a1": (dict(a1=_set(0, 1)), r"node 0 \(param\)", "unused operand slot is not NONE"),
    "variadic range": (dict(a0=_set(9, 100)), r"node 9 \(concat\)",
                       "variadic operand range outside extra"),
    "unknown op": (dict(kind=_set(4, 999)), r"node 4 \(opcode 999\)", "unknown opcode"),
    "negative opcode": (dict(kind=_set(4, -1)), r"node 4 \(opcode -1\)", "unknown opcode"),
    "const id": (dict(a0=_set(2, 5)), r"node 2 \(const\): bad value 5", "const id out of range"),
    "param position": (dict(a0=_set(1, 2)), r"node 1 \(param\): bad value 2",
                       "param position out of range"),
    "shape id": (dict(shape_id=_set(4, 50)), r"node 4 \(exp\): bad value 50",
                 "shape id out of range"),
    "attr id": (dict(attr_id=_set(4, 50)), r"node 4 \(exp\): bad value 50",
                "attribute id out of range"),
    "dtype code": (dict(dtype=_set(4, 99)), r"node 4 \(exp\): bad value 99",
                   "dtype code out of range"),
    "shape mismatch": (dict(shape_id=_set(4, 0)),
                       re.escape("node 4 (exp): declared type float32[] differs from the "
                                 "inferred float32[3]"), "dtype and shape rule"),
    "dtype mismatch": (dict(dtype=_set(4, FLOAT64)),
                       re.escape("node 4 (exp): declared type float64[3] differs from the "
                                 "inferred float32[3]"), "dtype and shape rule"),
    "comparison dtype": (dict(dtype=_set(5, INT32)),
                         re.escape("node 5 (greater): declared type int32[3]"),
                         "dtype and shape rule"),
    "reduction shape": (dict(shape_id=_set(7, _shape_id(BASE, (3,)))),
                        re.escape("node 7 (sum): declared type float32[3] differs from the "
                                  "inferred float32[]"), "dtype and shape rule"),
    "shape not in table": (dict(attr_table=AttrTable([
                               r if r != (("shape", (1,)),) else (("shape", (1, 1)),)
                               for r in BASE.attr_table.records])),
                           re.escape("node 8 (reshape): declared type float32[1] differs from "
                                     "the inferred a shape not in the table"),
                           "dtype and shape rule"),
    "const dtype": (dict(dtype=_set(2, FLOAT64)),
                    re.escape("node 2 (const): declared type float64[3] differs from the "
                              "inferred float32[3]"), "dtype and shape rule"),
    "param dtype breaks a rule": (dict(dtype=_set(0, INT32)),
                                  re.escape("node 3 (add): operand dtypes differ (int32, float32)"),
                                  "dtype and shape rule"),
    "where condition": (dict(dtype=_set(5, BOOL), kind=_set(5, ops.OP_ADD)),
                        re.escape("node 5 (add): operand dtype bool") + "|node 5 \\(add\\)",
                        "dtype and shape rule"),
    "attribute set of another op": (dict(attr_id=_set(3, int(BASE.attr_id[7]))),
                                    r"node 3 \(add\): add: unknown attribute 'axis'",
                                    "attributes"),
    "attributes not normalized": (dict(kind=_set(4, ops.OP_SUM)),
                                  r"node 4 \(sum\): attributes \{\} are not the op's normalized",
                                  "attributes"),
    "reshape attrs on concat": (dict(attr_id=_set(9, int(BASE.attr_id[8]))),
                                r"node 9 \(concat\)", "attributes"),
    "bad output id": (dict(outputs=np.array([7, 99], np.int32)),
                      r"output 1 is node 99, not in \[0, 10\)", "outputs"),
    "negative output id": (dict(outputs=np.array([-1], np.int32)), r"output 0 is node -1",
                           "outputs"),
    "no outputs": (dict(outputs=np.zeros(0, np.int32)), r"no outputs", "outputs"),
    "param missing from params": (dict(params=np.array([0], np.int32), param_names=("x",)),
                                  r"node 1 \(param\)", "param position out of range"),
    "param missing, no position clash": (
        dict(params=np.array([1], np.int32), param_names=("y",), a0=_set(1, 0)),
        r"node 0 \(param\): is PARAM node #0 in node order but params\[0\] is node 1",
        "params list every PARAM node in order"),
    "params out of order": (dict(params=np.array([1, 0], np.int32), param_names=("y", "x")),
                            r"node 0 \(param\): is PARAM node #0 in node order but params\[0\] "
                            r"is node 1", "params list every PARAM node in order"),
    "params name a non-param": (dict(params=np.array([0, 3], np.int32)),
                                r"node 3 \(add\): is params\[1\] but not a PARAM node",
                                "params list every PARAM node in order"),
    "params out of range": (dict(params=np.array([0, 50], np.int32)),
                            r"params\[1\] = 50 is not a node id in \[0, 10\)", "params"),
    "duplicate param names": (dict(param_names=("x", "x")),
                              r"node 1 \(param\): parameter name 'x' is not a unique identifier",
                              "param names"),
    "bad param name": (dict(param_names=("x", "1y")), r"node 1 \(param\): parameter name '1y'",
                       "param names"),
    "param positions": (dict(a0=lambda a: a.__setitem__(slice(0, 2), [1, 0])),
                        r"node 0 \(param\): has position 1, expected 0", "param positions"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_rejects_malformed_function(case):
    changes, what, rule = MALFORMED[case]
    bad = patched(**changes)
    pattern = rf"^main: .*(?:{what}).*\(rule: [^)]*{rule}"
    with pytest.raises(ik.IRError, match=pattern):
        ik.verify(bad)
    with pytest.raises(ik.IRError, match=pattern):
        ik.verify(ik.IRModule({"main": bad}))


def test_message_names_the_function():
    bad = patched(a0=_set(4, 99))
    with pytest.raises(ik.IRError, match=r"^helper: node 4 \(exp\)"):
        ik.verify(ik.IRModule({"main": BASE, "helper": bad}))
    with pytest.raises(ik.IRError, match=r"^kern: node 4 \(exp\)"):
        ik.verify(bad, name="kern")


def test_verify_does_not_modify_the_function():
    bad = patched(dtype=_set(4, FLOAT64))
    before = bad.dtype.copy()
    with pytest.raises(ik.IRError):
        ik.verify(bad)
    np.testing.assert_array_equal(bad.dtype, before)


# -- rejects: tables and columns ----------------------------------------------------

def test_rejects_negative_dimension_in_shape_table():
    with pytest.raises(ValueError, match=rf"shape {len(BASE.shapes)} \[-2\]: dimension -2 is "):
        ShapeTable([*BASE.shapes.shapes, (-2,)])
    shapes = ShapeTable(BASE.shapes.shapes)
    shapes.shapes = (*BASE.shapes.shapes, (-2,))  # past the constructor's check
    with pytest.raises(ik.IRError, match=r"main: shape table holds a negative dimension"):
        ik.verify(patched(shapes=shapes))


@pytest.mark.parametrize(("shape", "problem"), [
    ((2**70,), "dimension 1180591620717411303424 exceeds the limit"),
    ((2**40, 2**40), "element count 1208925819614629174706176 exceeds the limit"),
    ((1,) * (MAX_RANK + 1), f"rank {MAX_RANK + 1} exceeds the limit of {MAX_RANK}"),
])
def test_rejects_shapes_too_large_to_address(shape: tuple[int, ...], problem: str):
    with pytest.raises(ValueError, match=problem):
        ShapeTable([(), shape])
    shapes = ShapeTable(BASE.shapes.shapes)
    shapes.shapes = (*BASE.shapes.shapes, shape)
    with pytest.raises(ik.IRError,
                       match=rf"main: shape {len(BASE.shapes)}: {problem}.*\(rule: shapes\)"):
        ik.verify(patched(shapes=shapes))


def test_rejects_const_pool_that_does_not_cover_its_data():
    pool = BASE.consts
    bad = ConstPool(pool.dtype, pool.shape_id, pool.sval, pool.offset, pool.data[:4])
    with pytest.raises(ik.IRError, match=r"main: const pool offsets do not cover the data"):
        ik.verify(patched(consts=bad))
    bad = ConstPool(np.array([99], np.int8), pool.shape_id, pool.sval, pool.offset, pool.data)
    with pytest.raises(ik.IRError, match=r"main: const pool has a bad dtype"):
        ik.verify(patched(consts=bad))


def test_rejects_attribute_value_of_the_wrong_type():
    records = list(BASE.attr_table.records)
    aid = int(BASE.attr_id[7])
    records[aid] = (("axis", (0,)), ("keepdims", 1))
    with pytest.raises(ik.IRError, match=r"main: node 7 \(sum\): .*keepdims.*rule: attributes"):
        ik.verify(patched(attr_table=AttrTable(records)))


def test_rejects_writeable_or_wrongly_typed_columns():
    bad = patched()
    object.__setattr__(bad, "a0", np.array(bad.a0))  # bypass the constructor's freeze
    with pytest.raises(ik.IRError, match=r"main: column 'a0' is writeable.*read-only"):
        ik.verify(bad)
    bad = patched()
    col = bad.kind.astype(np.int32)
    col.flags.writeable = False
    object.__setattr__(bad, "kind", col)
    with pytest.raises(ik.IRError, match=r"main: column 'kind' is int32.*column dtypes"):
        ik.verify(bad)
    bad = patched()
    object.__setattr__(bad, "a1", bad.a1[:5])
    with pytest.raises(ik.IRError, match=r"main: column 'a1' has length 5, expected 10"):
        ik.verify(bad)


def test_rejects_things_that_are_not_functions():
    with pytest.raises(TypeError, match="expected an IRModule, Function or PrimFunc"):
        ik.verify([BASE])
    with pytest.raises(ik.IRError, match="main: int is not a Function or PrimFunc"):
        ik.verify(ik.IRModule({"main": 3}))


# -- rejects: modules ---------------------------------------------------------------

def test_rejects_dangling_call_func():
    mod = _call_module(callee="nowhere")
    with pytest.raises(ik.IRError, match=r"^main: node 2 \(call_func\): callee 'nowhere' does "
                                          r"not exist \(rule: call targets\)"):
        ik.verify(mod)
    ik.verify(mod["main"])  # a lone Function has no module to resolve callees in


def test_rejects_call_func_to_a_non_graph_function():
    mod = _call_module()
    mod = mod.with_function("helper", object())
    with pytest.raises(ik.IRError, match=r"^main: node 2 \(call_func\): callee 'helper' is not "
                                          r"a graph Function \(rule: call targets\)"):
        ik.verify(mod)


@pytest.mark.parametrize(("call", "what"), [
    ({"args": (1, 1)}, re.escape("arguments (int32[], int32[]) do not match helper's params "
                                 "(float32[3], int32[])")),
    ({"args": (0,)}, "arguments \\(float32\\[3\\]\\) do not match"),
    ({"dtype": "float64"}, re.escape("result float64[3] does not match helper's outputs "
                                     "(float32[3])")),
    ({"shape": (1, 3)}, re.escape("result float32[1, 3] does not match")),
])
def test_rejects_call_func_signature_mismatch(call, what):
    mod = _call_module(**call)
    with pytest.raises(ik.IRError, match=rf"^main: node 2 \(call_func\): {what}.*"
                                         r"\(rule: call signature\)"):
        ik.verify(mod)


def _caller(name, callee, private=False):
    bb = ik.GraphBuilder(name, private=private)
    x = bb.param("x", (2,), "int32")
    y = bb.negative(x)
    return bb.finish([bb.call_func(callee, y, dtype="int32", shape=(2,))])


def test_rejects_recursive_call_func_cycle():
    mod = ik.IRModule({"main": _caller("main", "f"), "f": _caller("f", "g", True),
                       "g": _caller("g", "f", True)})
    with pytest.raises(ik.IRError, match=r"^g: node 2 \(call_func\): calls f, closing the "
                                         r"recursive cycle f -> g -> f "
                                         r"\(rule: call graph is acyclic\)"):
        ik.verify(mod)
    mod = ik.IRModule({"main": _caller("main", "main")})
    with pytest.raises(ik.IRError, match=r"^main: node 2 \(call_func\): calls main, closing "
                                         r"the recursive cycle main -> main "
                                         r"\(rule: call graph is acyclic\)"):
        ik.verify(mod)


def test_accepts_a_diamond_call_graph():
    mod = ik.IRModule({"main": _caller("main", "a"), "a": _caller("a", "c", True),
                       "b": _caller("b", "c", True), "c": _caller("c", "leaf", True),
                       "leaf": _every_leaf()})
    ik.verify(mod)


def _every_leaf():
    bb = ik.GraphBuilder("leaf", private=True)
    return bb.finish([bb.abs(bb.param("x", (2,), "int32"))])


# -- scale --------------------------------------------------------------------------

@pytest.mark.slow
def test_verify_a_million_node_chain():
    n = 1_000_000
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    kind = np.full(n, ops.OP_NEGATIVE, np.int16)
    kind[1::3] = ops.OP_EXP
    a0 = np.arange(x, x + n, dtype=np.int32)
    bb.add_nodes(kind, a0)
    f = bb.finish([n])
    ik.verify(ik.IRModule({"main": f}))  # timed in bench/bench_scaling.py
    bad = patched(f, a0=_set(n // 2, n // 2 + 5))
    with pytest.raises(ik.IRError, match=rf"main: node {n // 2} \(\w+\): operand {n // 2 + 5} "
                                         r"is not earlier"):
        ik.verify(bad)
