"""The cheap validation before compiled code (``irkernel.ir.validate``) and issue 14's
reproducers 1, 2, 6-9: each ends in a documented exception naming what is wrong."""

from __future__ import annotations

import dataclasses
import gc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import irkernel as ik
import passes
from irkernel import ops
from irkernel.ir import validate
from irkernel.ir.checks import check_structure_kernel
from irkernel.ir.ids import MAX_ELEMENTS, MAX_RANK
from irkernel.ir.pools import ConstPool
from irkernel.ir.rebuild import rebuild
from irkernel.testing import random_function


def small() -> ik.Function:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    y = bb.add(bb.exp(x), bb.const(np.arange(4, dtype=np.float32)))
    return bb.finish([bb.call("concat", y, x)])  # node 4: a variadic node


def _set(arr: np.ndarray, index: int, value: int) -> np.ndarray:
    out = np.array(arr)
    out[index] = value
    return out


PASSES = {"DeadCodeElimination": passes.DeadCodeElimination, "FoldConstant": passes.FoldConstant,
          "EliminateCommonSubexpr": passes.EliminateCommonSubexpr, "O2": passes.O2}


@pytest.mark.parametrize("name", sorted(PASSES))
def test_reproducer_1_passes_on_an_out_of_range_operand(name: str) -> None:
    f = small()
    bad = dataclasses.replace(f, a0=_set(f.a0, 3, 1_000_000))
    first = "FoldConstant" if name == "O2" else name  # O2's first pass meets it
    with pytest.raises(ik.IRError, match=rf"^{first}: main: node 3 \(add\): column a0: "
                                         r"operand 1000000 is out of range \[0, 5\) "
                                         r"\(rule: operand out of range\)$"):
        PASSES[name]()(ik.IRModule({"main": bad}))


def test_reproducer_2_interpret_script_and_hash() -> None:
    f = small()
    bad_out = dataclasses.replace(f, outputs=np.array([2**31 - 1], np.int32))
    with pytest.raises(ik.IRError, match=r"^interpret: main: output 0 is node 2147483647"):
        ik.interpret(bad_out, np.ones(4, np.float32))  # was 65 s and 16 GB, then IndexError
    bad_shape = dataclasses.replace(f, shape_id=_set(f.shape_id, 2, 99))
    for call, where in ((lambda: ik.IRModule({"main": bad_shape}).script(), "script"),
                        (lambda: ik.structural_hash(bad_shape), "structural_hash"),
                        (lambda: ik.structural_equal(bad_shape, f), "structural_equal")):
        with pytest.raises(ik.IRError, match=rf"^{where}: main: node 2 \(const\): column "
                                             r"shape_id: shape id 99 is not in \[0, 3\)"):
            call()


@pytest.mark.parametrize(("column", "index", "value", "message"), [
    ("kind", 1, 999, r"node 1 \(unknown op\): column kind: opcode 999 is not in the op table"),
    ("kind", 1, ops.OP_ADD, r"node 1 \(add\): column a1: operand -1 is out of range"),
    ("a0", 1, 1, r"node 1 \(exp\): column a0: operand 1 is not earlier than the node"),
    ("a1", 1, 0, r"node 1 \(exp\): column a1: unused operand slot holds 0, not NONE"),
    ("a0", 2, 5, r"node 2 \(const\): column a0: const id 5 is not in \[0, 1\)"),
    ("a0", 0, 1, r"node 0 \(param\): column a0: param position 1 is not in \[0, 1\)"),
    ("a0", 4, 3, r"node 4 \(concat\): column a0/a1: operands extra\[3:5\] lie outside extra"),
    ("extra", 1, 4, r"node 4 \(concat\): column extra: operand 4 is not earlier"),
    ("dtype", 3, 99, r"node 3 \(add\): column dtype: dtype code 99 is not in \[0, 11\)"),
    ("attr_id", 4, 7, r"node 4 \(concat\): column attr_id: attribute id 7 is not in"),
    ("params", 0, 1, r"node 1 \(exp\): column kind: is params\[0\] but not a param node"),
    ("outputs", 0, -1, r"column outputs: outputs\[0\] = -1 is not a node id in \[0, 5\)"),
])
def test_each_rule_names_function_node_and_column(column: str, index: int, value: int,
                                                  message: str) -> None:
    f = small()
    bad = dataclasses.replace(f, **{column: _set(getattr(f, column), index, value)})
    with pytest.raises(ik.IRError, match=rf"^here: main: {message}"):
        validate.check_function(bad, "here")


def test_const_pool_and_tables() -> None:
    f = small()
    pool = f.consts
    short = ConstPool(pool.dtype, pool.shape_id, pool.sval, pool.offset, pool.data[:8])
    with pytest.raises(ik.IRError, match=r"column consts.offset: offsets are not increasing "
                                         r"inside the data \(8 bytes\)"):
        validate.check_function(dataclasses.replace(f, consts=short))
    with pytest.raises(ik.IRError, match=r"column consts.shape_id: holds a shape id outside"):
        validate.check_function(dataclasses.replace(f, consts=ConstPool(
            pool.dtype, np.array([7], np.int32), pool.sval, pool.offset, pool.data)))
    with pytest.raises(ik.IRError, match=r"column shapes: is dict, not a ShapeTable"):
        validate.check_function(dataclasses.replace(f, shapes={}))
    with pytest.raises(TypeError, match="expected a graph Function, got str"):
        validate.check_function("main")  # type: ignore[arg-type]


def test_built_and_rebuilt_functions_are_marked_and_checked_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = validate.check_function

    def counting(func: ik.Function, where: str = "", name: str | None = None) -> None:
        calls.append(where)
        real(func, where, name)

    monkeypatch.setattr(validate, "check_function", counting)
    built = random_function(2000, seed=4)
    assert validate.is_validated(built)
    mod = ik.IRModule({"main": built})
    out = passes.O2()(mod)  # FoldConstant's rewritten columns are checked inside rebuild
    assert out["main"] is not built
    assert validate.is_validated(out["main"])
    assert calls == []  # rebuild checks through its own import, never at a pass entry
    replaced = dataclasses.replace(built)
    assert not validate.is_validated(replaced)
    passes.O2()(ik.IRModule({"main": replaced}))
    assert calls == ["FoldConstant"]  # once, at the first entry; the other passes look it up
    assert validate.is_validated(replaced)
    del replaced
    gc.collect()
    assert len(validate._VALIDATED) < 10_000  # weak: entries go with their Functions


def test_rebuild_checks_rewritten_columns_and_patch_rows() -> None:
    f = small()
    with pytest.raises(ik.IRError, match=r"^Bad \(rewritten columns\): main: node 3 \(add\): "
                                         r"column a1: operand 9 is out of range"):
        rebuild(f, a1=_set(f.a1, 3, 9), pass_name="Bad")
    patch = (np.array([3], np.int32), np.array([ops.OP_ADD], np.int16),
             np.array([1], np.int32), np.array([4], np.int32), np.array([0], np.int32))
    with pytest.raises(ik.IRError, match=r"^Bad: patch of node 3: operand not earlier "
                                         r"\(topological order\) \(4\)"):
        rebuild(f, patch=patch, pass_name="Bad")
    param_patch = (np.array([0], np.int32), np.array([ops.OP_EXP], np.int16),
                   np.array([-1], np.int32), np.array([-1], np.int32), np.array([0], np.int32))
    with pytest.raises(ik.IRError, match="a param row may not be rewritten"):
        rebuild(f, patch=param_patch, pass_name="Bad")
    keep = np.ones(f.num_nodes, np.bool_)
    out = rebuild(f, keep=keep, a1=f.a1.copy(), pass_name="Fine")
    assert validate.is_validated(out)


@st.composite
def corrupted_columns(draw: st.DrawFn) -> ik.Function:
    f = random_function(draw(st.integers(5, 80)), seed=draw(st.integers(0, 50)),
                        shapes=draw(st.sampled_from(["scalar", "small"])))
    col = draw(st.sampled_from(["kind", "a0", "a1", "extra", "dtype", "shape_id", "attr_id"]))
    arr = getattr(f, col)
    if not len(arr):
        return f
    lo, hi = (-5, ops.num_ops() + 3) if col == "kind" else (-3, f.num_nodes + 3)
    return dataclasses.replace(f, **{col: _set(arr, draw(st.integers(0, len(arr) - 1)),
                                               draw(st.integers(lo, hi)))})


@given(corrupted_columns())
def test_the_sweep_agrees_with_the_precise_kernel(func: ik.Function) -> None:
    """The vectorized sweep says a Function is fine iff the precise kernel finds no node."""
    table = ops.op_arrays()
    masks = validate._masks()
    assert masks is not None
    ok = validate.scan_structure_kernel(
        func.kind, func.a0, func.a1, func.extra, func.dtype, func.shape_id, func.attr_id,
        masks, table.arity, len(func.consts), len(func.params), len(func.shapes),
        len(func.attr_table))
    bad, _, _ = check_structure_kernel(
        func.kind, func.a0, func.a1, func.extra, func.dtype, func.shape_id, func.attr_id,
        table.encoding, table.arity, len(func.consts), len(func.params), len(func.shapes),
        len(func.attr_table), 0)
    assert ok == (bad < 0)


def test_reproducer_6_sizes_that_do_not_fit_int64() -> None:
    bb = ik.GraphBuilder("main")
    with pytest.raises(ValueError, match=r"param 'x': shape \(1180591620717411303424,\): "
                                         "dimension 1180591620717411303424 exceeds the limit"):
        bb.param("x", (2**70,), "float32")
    with pytest.raises(ValueError, match=r"element count .* exceeds the limit"):
        bb.param("y", (2**40, 2**40), "float32")
    x = bb.param("z", (4,), "float32")
    with pytest.raises(ValueError, match=r"broadcast_to: result shape .* exceeds the limit"):
        bb.call("broadcast_to", x, shape=(2**30, 2**30, 4))
    big = bb.param("w", (MAX_ELEMENTS,), "float64")  # the largest shape is usable...
    f = bb.finish([big])
    assert int(f.shapes.size[f.shape_id[big]]) == MAX_ELEMENTS  # ... and its size exact


def test_memory_plan_refuses_intermediates_beyond_the_address_space() -> None:
    from runtime.memory_plan import plan_memory

    bb = ik.GraphBuilder("main")
    x = bb.param("x", (MAX_ELEMENTS,), "float64")
    a = bb.call("call_tir", x, callee="k", dtype="float64", shape=(MAX_ELEMENTS,))
    b = bb.call("call_tir", x, callee="k", dtype="float64", shape=(MAX_ELEMENTS,))
    out = bb.call("call_tir", a, b, callee="k2", dtype="float64", shape=(MAX_ELEMENTS,))
    with pytest.raises(ValueError, match="more than a 64-bit address space"):
        plan_memory(bb.finish([out]))


@pytest.mark.parametrize("line", [
    "  %c = const 1.0 : float32[" + ", ".join(["1"] * (MAX_RANK + 1)) + "]",
    "  %c = param x : float32[" + ", ".join(["1"] * (MAX_RANK + 1)) + "]",
])
def test_reproducer_7_rank_above_numpy_is_a_parse_error(line: str) -> None:
    text = f"@main = graph {{\n{line}\n  return %c\n}}\n"
    with pytest.raises(ik.ParseError, match=rf"^2:\d+: type float32\[\.\.\. {MAX_RANK + 1} "
                                            rf"dims\]: rank {MAX_RANK + 1} exceeds the limit"):
        ik.parse(text)


def test_reproducer_8_global_symbol_is_validated() -> None:
    f = small()
    none = ik.IRModule({"main": f.with_attr("global_symbol", None)})
    with pytest.raises(ik.IRError, match=r"^main: global_symbol is None; it must be a non-empty "
                                         r"str .*\(rule: global_symbol\)$"):
        ik.verify(none)
    with pytest.raises(ik.IRError, match=r"^FoldConstant: main: global_symbol is None"):
        passes.O2()(none)
    other = ik.IRModule({"main": f.with_attr("global_symbol", "other")})
    with pytest.raises(ik.IRError, match="global_symbol 'other' differs from the function's "
                                         "name 'main'"):
        passes.DeadCodeElimination()(other)
    private = ik.IRModule({"main": f.without_attr("global_symbol")})
    ik.verify(private)  # a private main is well-formed ...
    with pytest.raises(ik.IRError, match=r"^DeadCodeElimination: function 'main' is private"):
        passes.O2()(private)  # ... but dropping it silently is not
    kept = passes.DeadCodeElimination(entry_functions=["main"])(private)
    assert "main" in kept
    import runtime

    with pytest.raises(ik.IRError, match="global_symbol is None"):
        runtime.build(none, cache=False)


def test_reproducer_9_functions_own_their_buffers() -> None:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    f = bb.finish([bb.exp(x)])
    held = [getattr(bb, name) for name in ("_kind", "_a0", "_a1", "_dtype", "_shape_id",
                                           "_attr_id", "_extra")]
    for col in ("kind", "a0", "a1", "dtype", "shape_id", "attr_id", "extra"):
        arr = getattr(f, col)
        assert not arr.flags.writeable
        base = arr.base
        while isinstance(base, np.ndarray):
            base = base.base
        assert all(base is not buf for buf in held), col  # the builder let go of it
    assert len(bb) == 2
    with pytest.raises(RuntimeError, match="is finished"):
        bb.exp(x)
