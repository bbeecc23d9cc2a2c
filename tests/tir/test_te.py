"""irkernel.tir.te: compute/placeholder/reductions, the canonical form and its inverse."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from irkernel import ops
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.ids import DTYPE_NAMES, dtype_code
from irkernel.tir import For, PrimFunc, SeqStmt, interpret, te
from irkernel.tir import script as T
from irkernel.tir.testing import WIDE_DTYPES
from passes.topi.templates import TEMPLATES

shapes = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


def test_compute_writes_the_canonical_nest() -> None:
    a = te.placeholder((3, 4), "float32", "x0")
    b = te.placeholder((4,), "float32", "x1")
    c = te.compute((3, 4), lambda i, j: a[i, j] * b[j], "out")
    f = te.create_prim_func([a, b], c, {"op_pattern": ops.BROADCAST})
    f.verify("mul")
    outer = f.body
    assert isinstance(outer, For)
    assert outer.loop_var.name == "i0"
    assert outer.kind == "serial"
    assert isinstance(outer.body, For)
    assert outer.body.loop_var.name == "i1"
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.array([1, -2, 0.5, 3], np.float32)
    out = np.empty((3, 4), np.float32)
    interpret(f, x, y, out)
    np.testing.assert_array_equal(out, x * y)


def test_stages_inline_into_one_store() -> None:
    a = te.placeholder((5,), "int32", "x0")
    b = te.compute((5,), lambda i: a[i] * 2, "b")
    c = te.compute((5,), lambda i: b[4 - i] + 1, "out")
    f = te.create_prim_func([a], c)
    desc = te.extract_compute(f)
    assert desc is not None
    assert desc.value is not None
    assert not desc.is_reduction
    out = np.empty(5, np.int32)
    interpret(f, np.arange(5, dtype=np.int32), out)
    np.testing.assert_array_equal(out, np.arange(5)[::-1] * 2 + 1)


@pytest.mark.parametrize(("kind", "ref"), [("sum", np.sum), ("max", np.max), ("mean", np.mean)])
def test_reductions(kind: str, ref) -> None:
    a = te.placeholder((3, 4, 2), "float64", "x0")
    rk = te.reduce_axes([3, 2])
    c = te.compute((4,), lambda j: getattr(te, kind)(a[rk[0].var, j, rk[1].var], rk), "out")
    f = te.create_prim_func([a], c)
    x = np.random.default_rng(0).standard_normal((3, 4, 2))
    x[0, 1, 1] = np.nan
    out = np.empty(4)
    interpret(f, x, out)
    np.testing.assert_allclose(out, ref(x, axis=(0, 2)), rtol=1e-12, equal_nan=True)
    desc = te.extract_compute(f)
    assert desc is not None
    assert desc.combiner == ("max" if kind == "max" else "sum")
    assert (desc.finish is not None) == (kind == "mean")
    assert [n for _, n in desc.reduce_axes] == [3, 2]
    assert te.prim_func_from_desc(desc, f.attrs) == f


def test_errors_name_the_problem() -> None:
    a = te.placeholder((2,), "float32", "x0")
    rk = te.reduce_axes([2])
    s = te.compute((), lambda: te.sum(a[rk[0].var], rk), "s")
    with pytest.raises(ValueError, match="reduction cannot be read"):
        te.compute((2,), lambda i: s[()] + a[i], "out")
    other = te.placeholder((2,), "float32", "x1")
    with pytest.raises(ValueError, match="reads x1, which is not among the inputs"):
        te.create_prim_func([a], te.compute((2,), lambda i: other[i], "out"))
    with pytest.raises(IndexError, match="2 indices for a 1-d"):
        a[0, 0]
    with pytest.raises(TypeError, match="float sources only"):
        te.mean(te.placeholder((2,), "int32", "x2")[0], rk)
    with pytest.raises(ValueError, match="negative extent"):
        te.placeholder((-1,), "float32", "x3")


def test_non_canonical_prim_funcs_give_none() -> None:
    @T.prim_func(private=True)
    def par(x0: T.Buffer((4,), "float32"), out: T.Buffer((4,), "float32")):
        for i in T.parallel(4):
            out[i] = x0[i]

    @T.prim_func(private=True)
    def two(x0: T.Buffer((4,), "float32"), out: T.Buffer((4,), "float32")):
        for i in T.serial(4):
            out[i] = x0[i]
        for i in T.serial(4):
            out[i] = out[i] + 1.0

    @T.prim_func(private=True)
    def swapped(x0: T.Buffer((2, 2), "float32"), out: T.Buffer((2, 2), "float32")):
        for i, j in T.grid(2, 2):
            out[j, i] = x0[i, j]

    @T.prim_func(private=True)
    def reads_out(x0: T.Buffer((4,), "float32"), out: T.Buffer((4,), "float32")):
        for i in T.serial(4):
            out[i] = out[i] + x0[i]

    for f in (par, two, swapped, reads_out):
        assert te.extract_compute(f) is None
    scheduled = TEMPLATES["matmul"]([(dtype_code("float32"), (32, 32)),
                                     (dtype_code("float32"), (32, 64))], {},
                                    (dtype_code("float32"), (32, 64)))
    assert scheduled.attrs["op_pattern"] == ops.OUT_EWISE_FUSABLE
    assert te.extract_compute(scheduled) is None


#: Templates that are not canonical compute form: scatter_nd copies, then scatters; the
#: scans (cumsum, cumprod) carry a running value along their axis; topk_indices inserts
#: each element into a sorted row.
NOT_CANONICAL = {"scatter_nd", "cumsum", "cumprod", "topk_indices"}
#: Required attributes the strategy below gives. The templates of ops with other required
#: attributes (pad, strided_slice, the pools, lrn) are round-tripped through
#: te.extract_compute for every case of tests/passes/test_legalize_ops.py instead.
GIVEN_ATTRS = {"reshape", "broadcast_to", "astype"}
SAMPLED = sorted(name for name in set(TEMPLATES) - NOT_CANONICAL
                 if name in GIVEN_ATTRS or not any(a.required for a in ops.get_op(name).attrs))


def _template_cases() -> st.SearchStrategy:
    """(op name, operand types, attrs) for random shapes the op accepts."""
    @st.composite
    def draw(d):
        name = d(st.sampled_from(SAMPLED))
        op = ops.get_op(name)
        # narrow floats reach the templates as float32 (LegalizeOps widens them between
        # casts: passes/narrow_floats.py), so the templates are sampled at the wide dtypes
        dtype = d(st.sampled_from(WIDE_DTYPES))
        shape = d(shapes)
        arity = 3 if name == "where" else (op.arity if op.arity > 0 else d(st.integers(1, 3)))
        types = [(dtype_code("bool") if name == "where" and k == 0 else dtype_code(dtype), shape)
                 for k in range(arity)]
        attrs: dict = {}
        if name in ("sum", "max", "mean"):
            attrs = {"axis": d(st.sampled_from([None, 0, -1])), "keepdims": d(st.booleans())}
        elif name == "reshape":
            attrs = {"shape": (-1,)}
        elif name == "broadcast_to":
            attrs = {"shape": (2, *shape)}
        elif name == "astype":
            attrs = {"dtype": d(st.sampled_from(WIDE_DTYPES))}
        elif name == "concat":
            attrs = {"axis": 0}
        return name, types, attrs
    return draw()


@settings(max_examples=150, deadline=None)
@given(case=_template_cases())
def test_extract_inverts_create(case) -> None:
    name, types, attrs = case
    op = ops.get_op(name)
    attrs = dict(op.normalize_attrs(attrs))
    try:
        result = op.infer(types, attrs)
    except TypeInferenceError:
        reject()  # a dtype or shape the op's rule does not take: not a case
    f = TEMPLATES[name](types, attrs, result)
    assert isinstance(f, PrimFunc)
    f.verify(name)
    assert f.attrs["op_name"] == name
    if name == "concat" and f.attrs["op_pattern"] == ops.OPAQUE:
        # two or more non-empty parts: copy loops, opaque on purpose (templates.py says why)
        assert sum(1 for _, s in types if s[0]) > 1
        return
    assert f.attrs["op_pattern"] == op.pattern
    if "schedule" in f.attrs:
        # a scheduled kernel (a 1-pixel conv's dot product, conv_dot) is not compute form
        # by design; the e2e tests check it against the interpreter
        assert name in ("conv", "conv_transpose", "matmul", "max_pool", "avg_pool"), name
        return
    desc = te.extract_compute(f)
    assert desc is not None, f.script(name)
    assert desc.output == f.params[-1]
    assert desc.inputs == f.params[:-1]
    assert desc.extents == result[1]
    assert te.prim_func_from_desc(desc, f.attrs) == f
    if desc.is_reduction:
        assert isinstance(f.body if not desc.axes else _innermost(f.body, len(desc.axes)),
                          SeqStmt)


def _innermost(stmt, depth: int):
    for _ in range(depth):
        stmt = stmt.body
    return stmt
