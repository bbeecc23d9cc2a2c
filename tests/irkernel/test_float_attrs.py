"""The ``A_FLOAT`` attribute kind: normalization, interning by bits, text round trip, CSE.

Uses a test op registered into copies of the registry tables (the registry is
append-only; the copies vanish after each test).
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import irkernel as ik
import passes
from irkernel import ops
from irkernel.ir.ops import registry
from irkernel.ir.ops.opdef import FloatAttr
from irkernel.ir.ops.type_rules import elementwise_rule

NAME = "test_scale_by"


@pytest.fixture
def scale_op(monkeypatch: pytest.MonkeyPatch) -> str:
    """``x * alpha + beta`` with float attributes alpha (required) and beta (default 0.5)."""
    monkeypatch.setattr(registry, "_ops", list(registry._ops))
    monkeypatch.setattr(registry, "_by_name", dict(registry._by_name))
    monkeypatch.setattr(registry, "_arrays", [])

    def reference(xs, attrs):
        x = xs[0]
        return (x * x.dtype.type(attrs["alpha"]) + x.dtype.type(attrs["beta"])).astype(x.dtype)

    ops.register_op(ops.OpDef(
        NAME, ik.ids.ENC_UNARY, 1, elementwise_rule(ik.ids.FLOAT_DTYPES), reference,
        ops.ELEMWISE, (ops.AttrSpec("alpha", ops.A_FLOAT),
                       ops.AttrSpec("beta", ops.A_FLOAT, FloatAttr(0.5)))))
    return NAME


def _record(alpha):
    return dict(ops.get_op(NAME).normalize_attrs({"alpha": alpha}))


def test_values_normalize_to_float_attrs(scale_op):
    for given_value, want in ((1, 1.0), (np.int64(3), 3.0), (2.5, 2.5), (-0.0, -0.0),
                              (np.float32(0.1), float(np.float32(0.1))), (math.inf, math.inf)):
        got = _record(given_value)["alpha"]
        assert type(got) is FloatAttr
        assert float(got) == want
        assert math.copysign(1.0, got) == math.copysign(1.0, want)
    assert math.isnan(_record(np.float64("nan"))["alpha"])
    assert _record(1.0)["beta"] == 0.5


@pytest.mark.parametrize("bad", [True, "1.0", None, [1.0], 10**400])
def test_bad_values_raise_type_error_naming_the_attribute(scale_op, bad):
    with pytest.raises(TypeError, match=rf"{NAME}: attribute 'alpha' must be a float"):
        _record(bad)


def test_missing_required_float_attribute(scale_op):
    with pytest.raises(TypeError, match="missing required attribute 'alpha'"):
        ops.get_op(NAME).normalize_attrs({})


def test_equality_and_hash_are_by_bits():
    zero, negzero = FloatAttr(0.0), FloatAttr(-0.0)
    assert zero != negzero
    assert (zero, negzero, zero) == (0.0, -0.0, 0)
    nan1, nan2 = FloatAttr(float("nan")), FloatAttr(-np.float64("nan"))
    assert nan1 == nan2
    assert hash(nan1) == hash(nan2)
    assert nan1 == float("nan")
    assert hash(FloatAttr(1.5)) == hash(1.5)
    assert repr(negzero) == "-0.0"
    assert str(FloatAttr(1e-5)) == "1e-05"
    assert type(FloatAttr(2.0) * 3) is float  # arithmetic gives plain floats
    assert pickle.loads(pickle.dumps(negzero)) == negzero
    assert math.isnan(FloatAttr(float("nan")))


def _module(values):
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (3,), "float32")
    outs = [bb.call(NAME, x, alpha=v) for v in values]
    return ik.IRModule({"main": bb.finish(outs)})


def test_signed_zeros_intern_apart_and_nans_together(scale_op):
    func = _module([0.0, -0.0, 0.0, math.nan, float("nan"), np.float32("nan")])["main"]
    ids = [int(func.attr_id[int(o)]) for o in func.outputs]
    assert ids[0] == ids[2] != ids[1]
    assert ids[3] == ids[4] == ids[5]
    out = ik.interpret(func, np.array([1.0, -2.0, 0.0], np.float32))
    assert np.array_equal(out[0], [0.5, 0.5, 0.5])


def test_text_round_trip_is_exact(scale_op):
    values = [0.1, -0.0, 0.0, 1e-300, 5e-324, 1.7976931348623157e308, math.inf, -math.inf,
              math.nan, 3, float(np.float32(0.1))]
    mod = _module(values)
    text = mod.script()
    for spelled in ("alpha = 0.1,", "alpha = -0.0,", "alpha = 5e-324,", "alpha = inf,",
                    "alpha = -inf,", "alpha = nan,", "alpha = 3.0,", "beta = 0.5}"):
        assert spelled in text, text
    back = ik.parse(text)
    assert ik.structural_equal(back, mod)
    assert ik.structural_hash(back) == ik.structural_hash(mod)
    assert back.script() == text
    func = back["main"]
    got = [func.node_attrs(int(o))["alpha"] for o in func.outputs]
    assert [struct_bits(v) for v in got] == [struct_bits(float(v)) for v in values]


def struct_bits(v: float) -> bytes:
    return b"nan" if math.isnan(v) else np.float64(v).tobytes()


def test_structural_equality_tells_signed_zeros_apart(scale_op):
    a, b = _module([0.0]), _module([-0.0])
    assert not ik.structural_equal(a, b)
    assert ik.structural_hash(a) != ik.structural_hash(b)
    assert ik.structural_equal(_module([math.nan]), _module([float("nan")]))


def test_cse_merges_equal_float_attributes_only(scale_op):
    mod = _module([math.nan, math.nan, 0.0, -0.0, 0.25, 0.25])
    out = passes.EliminateCommonSubexpr()(mod)["main"]
    assert len(set(out.outputs.tolist())) == 4
    x = np.array([1.0, 2.0, -1.0], np.float32)
    assert all(np.array_equal(a, b, equal_nan=True)
               for a, b in zip(ik.interpret(mod, x), ik.interpret(out, x), strict=True))


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_float_survives_print_and_parse(value):
    attr = FloatAttr(value)
    from irkernel.text.lexer import Cursor, attr_value

    parsed = attr_value(Cursor(f"{attr!r}", 1), True)
    assert FloatAttr(parsed) == attr
