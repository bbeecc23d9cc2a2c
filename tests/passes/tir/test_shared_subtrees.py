"""Lowering passes walk shared subtrees once (``MemoMutator``, ``substitute_each``), and the
lowered TIR is the same as without the sharing: depthwise kernels with a fused hard-swish
epilogue (row blocks and the flattened schedule, as in PP-PicoDet) and a dense conv."""
from __future__ import annotations

import pytest

import irkernel as ik
import runtime  # noqa: F401 (registers the passes)
from irkernel import tir, transform
from irkernel.tir.functor import (
    MemoMutator,
    Mutator,
    children,
    free_vars,
    substitute,
    substitute_each,
    used_buffers,
)
from irkernel.tir.function import PrimFunc
import importlib
from passes.tir.vectorize_loop import vectorize_loop
from runtime.build import build_context
from runtime.compile import lower_tir

unroll_module = importlib.import_module("passes.tir.unroll_loop")


def _distinct_nodes(node) -> int:
    """Distinct node objects under ``node`` (a DAG's size, walked once per object)."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if id(n) not in seen:
            seen.add(id(n))
            stack.extend(children(n))
    return len(seen)


def _hardswish_conv(c: int, h: int, w: int, k: int, groups: int) -> ik.IRModule:
    """``conv + bias``, then hard-swish as PP-PicoDet's ONNX spells it (add, max, min,
    multiply, divide; the constants are parameters here)."""
    co = c if groups == c else 8
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (1, c, h, w), "float32")
    wt = bb.param("w", (co, c // groups, k, k), "float32")
    b = bb.param("b", (co, 1, 1), "float32")
    three, lo, hi, six = (bb.param(n, (), "float32") for n in ("three", "lo", "hi", "six"))
    y = bb.add(bb.conv(x, wt, padding=(k // 2,) * 4, groups=groups), b)
    clipped = bb.call("minimum", bb.call("maximum", bb.add(y, three), lo), hi)
    y = bb.call("divide", bb.call("multiply", y, clipped), six)
    return ik.IRModule({"main": bb.finish([y])})


def _lowered_scripts(mod: ik.IRModule) -> dict[str, str]:
    with build_context(None):
        low = transform.make_pipeline("GraphLowering")(mod)
        return {name: lower_tir(name, f).script() for name, f in low.functions.items()
                if isinstance(f, PrimFunc)}


MODELS = {  # channels, height, width, kernel, groups
    "depthwise_rows 5x5": (32, 25, 19, 5, 32),
    "depthwise_flat 3x3": (32, 20, 20, 3, 32),
    "dense 3x3": (4, 12, 12, 3, 1),
}


@pytest.mark.parametrize("case", MODELS)
def test_lowered_tir_is_the_same_without_sharing(case: str, monkeypatch) -> None:
    mod = _hardswish_conv(*MODELS[case])
    shared = _lowered_scripts(mod)
    # the walks as they were: every path visited, every unrolled copy a whole substitute
    monkeypatch.setattr(MemoMutator, "visit", Mutator.visit)
    monkeypatch.setattr(unroll_module, "substitute_each", lambda node, name, values: [
        substitute(node, {name: v}) for v in values])
    assert _lowered_scripts(mod) == shared
    if case.startswith("depthwise"):
        assert case.split()[0] in "".join(shared.values())


def test_substitute_each_shares_what_does_not_use_the_var() -> None:
    i, j = tir.Var("i", "int32"), tir.Var("j", "int32")
    a = tir.Buffer("a", (64,), "float32")
    free = tir.BufferLoad(a, (j * 2,))  # no i
    body = tir.BufferStore(a, tir.BufferLoad(a, (i + j,)) + free * free, (i * 8 + j,))
    values = [tir.const(k, "int32") for k in range(3)]
    copies = substitute_each(body, "i", values)
    for copy, v in zip(copies, values, strict=True):
        assert copy == substitute(body, {"i": v})
        assert copy.value.b is body.value.b  # the var-free product is the same object
    assert all(c is free for c in substitute_each(free, "i", values))


def test_vectorizing_nested_lets_costs_their_distinct_nodes() -> None:
    """Vector lets are inlined: each use gets the value. Nested lets whose vars are used
    twice each make a DAG of 2**depth paths; vectorized, it stays that small DAG."""
    i = tir.Var("i", "int32")
    a, out = tir.Buffer("a", (16,), "float32"), tir.Buffer("out", (16,), "float32")
    depth = 16  # 2**16 paths
    names = [tir.Var(f"v{d}", "float32") for d in range(depth)]
    expr = names[-1] * names[-1]
    for d in range(depth - 1, 0, -1):
        expr = tir.Let(names[d], names[d - 1] + names[d - 1], expr)
    expr = tir.Let(names[0], tir.BufferLoad(a, (i,)), expr)
    loop = tir.For(i, tir.const(0, "int32"), tir.const(16, "int32"), "vectorized",
                   tir.BufferStore(out, expr, (i,)))
    vec = vectorize_loop(PrimFunc((a, out), loop))
    assert isinstance(vec.body, tir.BufferStore) and vec.body.value.dtype == "float32x16"
    assert _distinct_nodes(vec.body) < 10 * depth


def _naive_free(node, bound: frozenset, out: dict) -> None:
    """``free_vars`` as a walk of every path (the reference)."""
    if isinstance(node, tir.Var):
        if node.name not in bound:
            out.setdefault(node.name, node)
    elif isinstance(node, (tir.Let, tir.LetStmt)):
        _naive_free(node.value, bound, out)
        _naive_free(node.body, bound | {node.var.name}, out)
    elif isinstance(node, tir.For):
        for part in (node.min, node.extent):
            _naive_free(part, bound, out)
        _naive_free(node.body, bound | {node.loop_var.name}, out)
    else:
        for child in children(node):
            _naive_free(child, bound, out)


def _naive_buffers(node, allocated: frozenset, out: dict) -> None:
    if isinstance(node, tir.Allocate):
        _naive_buffers(node.body, allocated | {node.buffer.name}, out)
        return
    buf = getattr(node, "buffer", None)
    if isinstance(buf, tir.Buffer) and buf.name not in allocated:
        out.setdefault(buf.name, buf)
    for child in children(node):
        if not isinstance(child, tir.Buffer):
            _naive_buffers(child, allocated, out)


def test_free_vars_and_used_buffers_of_shared_code_are_those_of_every_path() -> None:
    """The walks visit a shared node once per scope; what they find, and its order (the
    parameters of an outlined parallel loop), is what a walk of every path finds."""
    mod = _hardswish_conv(*MODELS["depthwise_flat 3x3"])
    with build_context(None):
        low = transform.make_pipeline("GraphLowering")(mod)
        funcs = [lower_tir(n, f) for n, f in low.functions.items() if isinstance(f, PrimFunc)]
    checked = 0
    for func in funcs:
        loops = [n for n in tir.post_order(func.body) if isinstance(n, tir.For)]
        for node in [func.body, *loops]:
            free, used = {}, {}
            _naive_free(node, frozenset(), free)
            _naive_buffers(node, frozenset(), used)
            assert list(free_vars(node).items()) == list(free.items())
            assert list(used_buffers(node).items()) == list(used.items())
            checked += 1
    assert checked > 3


def _naive_post_order(node):
    for child in children(node):
        yield from _naive_post_order(child)
    yield node


def test_post_order_is_the_recursive_walk() -> None:
    """``post_order`` keeps its own stack; the sequence is the nested generators' one."""
    mod = _hardswish_conv(*MODELS["depthwise_rows 5x5"])
    with build_context(None):
        low = transform.make_pipeline("GraphLowering")(mod)
        funcs = [f for f in low.functions.values() if isinstance(f, PrimFunc)]
        funcs += [lower_tir("f", f) for f in funcs]
    for func in funcs:
        got, want = list(tir.post_order(func.body)), list(_naive_post_order(func.body))
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=True))
