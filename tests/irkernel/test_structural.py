"""ik.structural_equal / ik.structural_hash on Functions and IRModules."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import irkernel as ik
from irkernel import ops
from irkernel.ir.pools import ConstPool

ROOT = Path(__file__).resolve().parents[2]

# The reference build, also run in a subprocess by the stability test.
BUILD_SRC = textwrap.dedent('''
    import numpy as np
    import irkernel as ik

    def build(name="main", const=1.5, axis=0, op="exp", out="sum", param="x", dtype="float32",
              order=(), private=False, operands_swapped=False, keepdims=False, extra_attr=None,
              blob_last=11):
        bb = ik.GraphBuilder(name, private=private, attrs=extra_attr)
        for item in order:  # intern unused table entries first: changes every id
            if item == "shape":
                bb.intern_shape((7, 7))
            elif item == "attr":
                bb.intern_attrs("sum", axis=1, keepdims=True)
                bb.intern_attrs("concat", axis=1)
            elif item == "const":
                bb.add_scalar_consts(np.array([9.0, 8.0], dtype), dtype)
        x = bb.param(param, (2, 3), dtype)
        y = bb.param("y", (3,), dtype)
        c = bb.const(np.array(const, dtype))
        a = bb.call(op, bb.add(x, c))
        cat = bb.concat(*((a, x) if not operands_swapped else (x, a)), axis=axis)
        s = bb.sum(cat, axis=axis, keepdims=keepdims)
        blob = np.arange(12, dtype=dtype)
        blob[-1] = blob_last
        m = bb.multiply(bb.reshape(cat, shape=(-1,)), bb.const(blob))
        outs = {"sum": [s, m], "mul": [m, s], "one": [s]}[out]
        return bb.finish(outs)
''')
namespace: dict = {}
exec(BUILD_SRC, namespace)
build = namespace["build"]

BASE = build()

VARIANTS = {
    "const value": dict(const=2.5),
    "const -0.0 vs 0.0": dict(const=-0.0),
    "array const": dict(blob_last=12),
    "attr": dict(axis=1),
    "keepdims": dict(keepdims=True),
    "op": dict(op="tanh"),
    "outputs": dict(out="mul"),
    "output count": dict(out="one"),
    "param name": dict(param="z"),
    "dtype": dict(dtype="float64"),
    "function name": dict(name="other"),
    "private": dict(private=True),
    "function attrs": dict(extra_attr={"SkipOptimization": True}),
    "variadic operand order": dict(operands_swapped=True),
}


def test_identical_builds_are_equal_with_equal_hashes():
    other = build()
    assert other is not BASE
    assert ik.structural_equal(BASE, other)
    assert ik.structural_equal(BASE, BASE)
    assert ik.structural_hash(BASE) == ik.structural_hash(other)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_one_difference_makes_functions_unequal(variant):
    other = build(**VARIANTS[variant])
    ik.verify(other)
    assert not ik.structural_equal(BASE, other)
    assert not ik.structural_equal(other, BASE)
    assert ik.structural_hash(BASE) != ik.structural_hash(other)


@pytest.mark.parametrize("order", [("shape",), ("attr",), ("const",), ("const", "attr", "shape")])
def test_interning_order_does_not_matter(order):
    other = build(order=order)
    if "shape" in order:
        assert other.shape_id.tolist() != BASE.shape_id.tolist()
    if "attr" in order:
        assert other.attr_id.tolist() != BASE.attr_id.tolist()
    if "const" in order:
        assert other.a0[other.kind == ops.OP_CONST].tolist() != \
            BASE.a0[BASE.kind == ops.OP_CONST].tolist()
    assert ik.structural_equal(BASE, other)
    assert ik.structural_hash(BASE) == ik.structural_hash(other)


def test_nan_constants_compare_by_bits():
    nan = np.float64(np.nan)
    other_nan = np.array([0x7FF8000000000001], np.int64).view(np.float64)[0]
    assert ik.structural_equal(build(const=nan, dtype="float64"), build(const=nan, dtype="float64"))
    assert not ik.structural_equal(build(const=nan, dtype="float64"),
                                   build(const=other_nan, dtype="float64"))


def _scalar_graph(values, dtype, shift=False):
    bb = ik.GraphBuilder("main")
    if shift:  # intern the largest value first: every other const id moves up by one
        bb.add_scalar_consts(np.asarray(values, dtype).max(keepdims=True), dtype)
    cids = bb.add_scalar_consts(np.asarray(values, dtype), dtype)
    ids = bb.add_nodes(np.full(len(values), ops.OP_CONST, np.int16), cids)
    blob = bb.const(np.asarray(values[:4], dtype))
    return bb.finish([int(ids[0]), int(ids[-1]), blob])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_scalar_constants_compare_by_value_whatever_their_pool_order(dtype):
    values = np.arange(40) % 7 if dtype != "bool" else np.arange(40) % 2 == 0
    a = _scalar_graph(values, dtype)
    b = _scalar_graph(values, dtype, shift=True)
    assert a.a0.tolist() != b.a0.tolist()
    assert ik.structural_equal(a, b)
    assert ik.structural_hash(a) == ik.structural_hash(b)
    changed = np.array(values, dtype)
    changed[17] = changed[18]
    c = _scalar_graph(changed, dtype)
    assert not ik.structural_equal(a, c)
    assert ik.structural_hash(a) != ik.structural_hash(c)


def test_float32_nan_payloads_differ():
    nans = np.array([0x7FC00000, 0x7FC00001], np.int32).view(np.float32)
    a = _scalar_graph(np.array([nans[0]] * 4), "float32")
    b = _scalar_graph(np.array([nans[1]] * 4), "float32")
    assert ik.structural_equal(a, _scalar_graph(np.array([nans[0]] * 4), "float32"))
    assert not ik.structural_equal(a, b)
    assert ik.structural_hash(a) != ik.structural_hash(b)


@pytest.mark.parametrize(("dtype", "value", "raw"), [
    ("int32", 5, 5 + 2**32), ("bool", True, 7), ("float32", 1.5, None),
])
def test_scalar_constants_compare_by_element_value_not_raw_pool_bits(dtype, value, raw):
    bb = ik.GraphBuilder("main")
    c = bb.const(np.array(value, dtype))
    f = bb.finish([c])
    pool = f.consts
    sval = pool.sval.copy()
    if raw is None:  # a float32 value kept as float64 bits with extra low mantissa bits
        raw = int(np.array([float(np.float32(value)) + 2**-40]).view(np.int64)[0])
    sval[int(f.a0[c])] = raw
    g = ik.Function(**{**_fields(f), "consts": ConstPool(
        pool.dtype, pool.shape_id, sval, pool.offset, pool.data)})
    assert g.const_value(c).tobytes() == f.const_value(c).tobytes()
    assert ik.structural_equal(f, g)
    assert ik.structural_hash(f) == ik.structural_hash(g)


@pytest.mark.slow
def test_many_distinct_constants_compare_and_hash():
    # Timed in bench/bench_scaling.py (no wall-clock asserts in tests).
    values = np.arange(200_000, dtype=np.float64)
    a = _scalar_graph(values, "float64")
    b = _scalar_graph(values, "float64", shift=True)
    assert ik.structural_equal(a, b)
    assert ik.structural_hash(a) == ik.structural_hash(b)
    changed = values.copy()
    changed[123_456] = -1.0
    c = _scalar_graph(changed, "float64")
    assert not ik.structural_equal(a, c)
    assert ik.structural_hash(a) != ik.structural_hash(c)


def _fields(f):
    return {k: getattr(f, k) for k in f.__dataclass_fields__}


def test_extra_layout_does_not_matter():
    """Variadic operand lists are compared by their contents, not their offsets in extra."""
    n_var = int(np.count_nonzero(ops.op_arrays().encoding[BASE.kind] == ik.ids.ENC_VARIADIC))
    assert n_var == 1
    pad = 5
    a0 = BASE.a0.copy()
    var = ops.op_arrays().encoding[BASE.kind] == ik.ids.ENC_VARIADIC
    a0[var] += pad
    extra = np.concatenate([np.full(pad, 0, np.int32), BASE.extra])
    moved = ik.Function(**{**_fields(BASE), "a0": a0, "extra": extra})
    ik.verify(moved)
    assert ik.structural_equal(BASE, moved)
    assert ik.structural_hash(BASE) == ik.structural_hash(moved)


def test_bulk_and_incremental_builds_are_equal():
    def incremental():
        bb = ik.GraphBuilder("main")
        x = bb.param("x", (), "int32")
        prev = x
        for i in range(50):
            prev = bb.add(prev, bb.const(np.int32(i % 3)))
        return bb.finish([prev])

    bb = ik.GraphBuilder("main")
    assert bb.param("x", (), "int32") == 0
    bb.add_scalar_consts(np.array([2], np.int32), "int32")  # another pool order
    cids = bb.add_scalar_consts(np.array([0, 1, 2], np.int32), "int32")
    kind = np.tile(np.array([ops.OP_CONST, ops.OP_ADD], np.int16), 50)
    a0 = np.empty(100, np.int32)
    a1 = np.full(100, ik.NONE, np.int32)
    a0[0::2] = cids[np.arange(50) % 3]  # const i holds i % 3
    a0[1::2] = np.arange(50) * 2  # add i reads the previous add (node 2i), first x (node 0)
    a1[1::2] = np.arange(50) * 2 + 1  # ... and const i (node 2i + 1)
    ids = bb.add_nodes(kind, a0, a1)
    bulk = bb.finish([int(ids[-1])])
    ik.verify(bulk)
    inc = incremental()
    assert bulk.a0[1].tolist() != inc.a0[1].tolist()
    assert ik.structural_equal(inc, bulk)
    assert ik.structural_hash(inc) == ik.structural_hash(bulk)
    np.testing.assert_array_equal(ik.interpret(inc, np.int32(4))[0],
                                  ik.interpret(bulk, np.int32(4))[0])


def test_with_attr_changes_equality_and_hash():
    g = BASE.with_attr("SkipOptimization", True)
    assert not ik.structural_equal(BASE, g)
    assert ik.structural_hash(BASE) != ik.structural_hash(g)
    assert ik.structural_equal(g.without_attr("SkipOptimization"), BASE)


def test_modules_compare_function_by_function():
    helper = build(name="helper", private=True)
    a = ik.IRModule({"main": BASE, "helper": helper})
    b = ik.IRModule({"helper": build(name="helper", private=True), "main": build()})
    assert ik.structural_equal(a, b)
    assert ik.structural_hash(a) == ik.structural_hash(b)
    for other in (ik.IRModule({"main": BASE}),
                  ik.IRModule({"main": BASE, "helper2": helper}),
                  ik.IRModule({"main": BASE, "helper": build(name="helper", private=True,
                                                             const=3.0)}),
                  ik.IRModule({"main": BASE, "helper": helper}, attrs={"version": 2})):
        assert not ik.structural_equal(a, other)
    for other in (ik.IRModule({"main": BASE}),
                  ik.IRModule({"main": BASE, "helper2": helper}),
                  ik.IRModule({"main": BASE, "helper": build(name="helper", private=True,
                                                             const=3.0)})):
        assert ik.structural_hash(a) != ik.structural_hash(other)


def test_mixed_kinds_are_unequal():
    assert not ik.structural_equal(BASE, ik.IRModule({"main": BASE}))
    assert not ik.structural_equal(ik.IRModule({"main": BASE}), BASE)
    assert not ik.structural_equal(BASE, 3)
    assert not ik.structural_equal(None, BASE)


def test_different_sizes_are_unequal():
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), "float32")
    f1 = bb.finish([x])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (2, 3), "float32")
    f2 = bb.finish([bb.exp(x)])
    assert not ik.structural_equal(f1, f2)
    assert not ik.structural_equal(f1, BASE)


def test_hash_is_a_64_bit_int():
    h = ik.structural_hash(BASE)
    assert isinstance(h, int)
    assert 0 <= h < 2**64


def test_hash_is_stable_across_processes():
    script = BUILD_SRC + textwrap.dedent('''
        f = build()
        g = build(const=2.5, order=("shape", "const"))
        print(ik.structural_hash(f), ik.structural_hash(g),
              ik.structural_hash(ik.IRModule({"main": f, "g": g})))
    ''')
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "12345"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            cwd=ROOT, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    g = build(const=2.5, order=("shape", "const"))
    mine = [ik.structural_hash(BASE), ik.structural_hash(g),
            ik.structural_hash(ik.IRModule({"main": BASE, "g": g}))]
    assert [int(v) for v in result.stdout.split()] == mine
