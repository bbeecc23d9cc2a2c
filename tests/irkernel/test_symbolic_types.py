"""Type rules over symbolic dims, the errors of undecidable ones, verify, the parser's
errors on symbolic types, and runtime.build's refusal."""

from __future__ import annotations

import dataclasses
import textwrap

import numpy as np
import pytest

import irkernel as ik
from irkernel.ir.errors import ParseError


@pytest.fixture
def bb() -> ik.GraphBuilder:
    return ik.GraphBuilder("main")


def _shape(bb: ik.GraphBuilder, node: int) -> str:
    return ", ".join(map(str, bb.node_type(node)[1]))


def test_elementwise_broadcasting(bb: ik.GraphBuilder) -> None:
    b, s = bb.dim("batch", 1, 64), bb.dim("seq")
    x = bb.param("x", (b, s, 3), "float32")
    assert _shape(bb, bb.add(x, bb.param("y", (1, s, 1), "float32"))) == "batch, seq, 3"
    assert _shape(bb, bb.multiply(x, bb.param("z", (3,), "float32"))) == "batch, seq, 3"
    assert _shape(bb, bb.add(x, x)) == "batch, seq, 3"
    assert _shape(bb, bb.tanh(x)) == "batch, seq, 3"
    assert _shape(bb, bb.astype(x, dtype="float64")) == "batch, seq, 3"
    cond = bb.param("c", (b, 1, 1), "bool")
    assert _shape(bb, bb.where(cond, x, bb.const(np.float32(0)))) == "batch, seq, 3"
    with pytest.raises(ValueError, match="cannot decide whether dims batch and 4 broadcast"):
        bb.add(x, bb.param("w", (4, 1, 1), "float32"))
    with pytest.raises(ValueError, match="cannot decide whether dims batch and seq broadcast"):
        bb.add(x, bb.param("v", (s, 1, 1), "float32"))


def test_matmul_and_batched_matmul(bb: ik.GraphBuilder) -> None:
    b, n = bb.dim("b"), bb.dim("n")
    x = bb.param("x", (b, n, 4), "float32")
    w = bb.const(np.ones((4, 5), np.float32))
    assert _shape(bb, bb.matmul(x, w)) == "b, n, 5"
    xt = bb.permute_dims(x, axes=(0, 2, 1))
    assert _shape(bb, xt) == "b, 4, n"
    assert _shape(bb, bb.matmul(x, xt)) == "b, n, n"
    y = bb.param("y", (b, n, n), "float32")
    assert _shape(bb, bb.matmul(y, x)) == "b, n, 4"  # contracts n with n
    with pytest.raises(ValueError, match="matmul contraction mismatch"):
        bb.matmul(x, y)  # contracts 4 with n: not provably equal


def test_conv_and_pool_output_dims(bb: ik.GraphBuilder) -> None:
    b, h = bb.dim("b", 1, 32), bb.dim("h", 3)
    x = bb.param("x", (b, 3, h, 2 * h), "float32")
    w = bb.const(np.ones((8, 3, 3, 3), np.float32))
    c = bb.conv(x, w, strides=(2, 2), padding=(1, 1, 1, 1))
    assert _shape(bb, c) == "b, 8, (h + 1) // 2, h"
    p = bb.max_pool(c, kernel=(2, 2), strides=(2, 2))
    assert _shape(bb, p) == "b, 8, (h + 1) // 4, h // 2"
    a = bb.avg_pool(x, kernel=(3, 3), padding=(1, 1, 1, 1))
    assert _shape(bb, a) == "b, 3, h, 2*h"


def test_conv_that_cannot_decide_names_the_dim(bb: ik.GraphBuilder) -> None:
    h = bb.dim("h", 1)  # h = 1 or 2 leaves no room for a 3-wide window
    x = bb.param("x", (1, 3, h, h), "float32")
    w = bb.const(np.ones((8, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match=r"conv: cannot decide whether h < 3 for every "
                                         r"value of h in \[1, inf\]"):
        bb.conv(x, w)
    x2 = bb.param("x2", (1, 3, h, h), "float32")
    with pytest.raises(ValueError, match="max_pool: cannot decide whether"):
        bb.max_pool(x2, kernel=(2, 2), strides=(2, 2), ceil_mode=True)


@pytest.mark.parametrize(("target", "want"), [
    ((-1, 12), "b, 12"),
    ((12, -1), "12, b"),
    (("b", 2, 6), "b, 2, 6"),
    (("b", -1), "b, 12"),
    ((-1,), "12*b"),
])
def test_reshape_with_symbols(bb: ik.GraphBuilder, target: tuple[object, ...],
                              want: str) -> None:
    b = bb.dim("b")
    x = bb.param("x", (b, 3, 4), "float32")
    assert _shape(bb, bb.reshape(x, shape=target)) == want


@pytest.mark.parametrize(("shape", "target", "match"), [
    (("b // 2", "s"), (-1,), "floor-division"),
    (("b", "s"), ("b * s", 2), "sizes are not provably equal"),
    (("b", 4), ("s", 4), "symbolic factor s is not one of the input's"),
    (("b", 3), (-1, 2), "cannot decide the -1"),
    (("b", 4), ("b", 2), "sizes are not provably equal"),
])
def test_reshape_that_cannot_decide(bb: ik.GraphBuilder, shape: tuple[object, ...],
                                    target: tuple[object, ...], match: str) -> None:
    names = {"b": bb.dim("b"), "s": bb.dim("s")}

    def dims(spec: tuple[object, ...]) -> tuple[object, ...]:
        return tuple(eval(d, {}, names) if isinstance(d, str) else d for d in spec)

    x = bb.param("x", dims(shape), "float32")
    with pytest.raises(ValueError, match=match):
        bb.reshape(x, shape=dims(target))


def test_concat_transpose_and_reductions(bb: ik.GraphBuilder) -> None:
    b, s = bb.dim("b"), bb.dim("s", 0, 10)
    x = bb.param("x", (b, s), "float32")
    y = bb.param("y", (2 * b, s), "float32")
    assert _shape(bb, bb.concat(x, y, x, axis=0)) == "4*b, s"
    assert _shape(bb, bb.concat(x, x, axis=1)) == "b, 2*s"
    with pytest.raises(ValueError, match="concat shapes differ off the axis"):
        bb.concat(x, y, axis=1)
    assert _shape(bb, bb.permute_dims(x)) == "s, b"
    assert _shape(bb, bb.call("sum", x, axis=1)) == "b"
    assert _shape(bb, bb.call("mean", x, axis=0, keepdims=True)) == "1, s"
    assert _shape(bb, bb.call("max", x, axis=0)) == "s"  # b >= 1
    assert _shape(bb, bb.argmax(x, axis=0)) == "s"
    with pytest.raises(ValueError, match=r"cannot decide whether s >= 1 .* s in \[0, 10\]"):
        bb.call("max", x, axis=1)  # s may be 0: max over an empty axis


@pytest.mark.parametrize(("begin", "end", "strides", "want"), [
    ((1, 0), (2, 2**63 - 1), (1, 1), "1, s"),  # to the end of a symbolic axis
    ((0, 1), (3, -1), (1, 2), "3, (s + 1) // 2 - 1"),
    ((0, -1), (3, 2**63 - 1), (1, 1), "3, 1"),  # the last element: s >= 2
    ((0, 0), (3, 1), (1, 1), "3, 1"),
])
def test_strided_slice_on_symbolic_axes(bb: ik.GraphBuilder, begin, end, strides,
                                        want: str) -> None:
    """NumPy's clamping decided from the bounds; checked against the interpreter."""
    x = bb.param("x", (3, bb.dim("s", 2, None)), "float32")
    y = bb.strided_slice(x, begin=begin, end=end, strides=strides)
    assert _shape(bb, y) == want
    mod = ik.IRModule({"main": bb.finish([y])})
    for s in (2, 7):
        arr = np.arange(3 * s, dtype=np.float32).reshape(3, s)
        (got,) = ik.interpret(mod, arr)
        index = tuple(slice(b, e, k) for b, e, k in zip(begin, end, strides, strict=True))
        np.testing.assert_array_equal(got, arr[index])


def test_strided_slice_that_cannot_decide(bb: ik.GraphBuilder) -> None:
    x = bb.param("x", (bb.dim("s"),), "float32")
    with pytest.raises(ValueError, match="negative stride slices the symbolic dim s"):
        bb.strided_slice(x, begin=(-1,), end=(-(2**63),), strides=(-1,))
    with pytest.raises(ValueError, match=r"cannot decide whether .*s in \[1, inf\]"):
        bb.strided_slice(x, begin=(0,), end=(4,), strides=(1,))  # s may be below 4


@pytest.mark.parametrize("call", [
    lambda bb, x: bb.take(x, bb.const(np.array([0], np.int64)), axis=0),
    lambda bb, x: bb.cumsum(x, axis=0),
    lambda bb, x: bb.topk_indices(x, k=1, axis=0),
    lambda bb, x: bb.pad(x, bb.const(np.float32(0)), pad_width=(1, 1, 1, 1)),
])
def test_ops_without_symbolic_rules_refuse_naming_the_dim(bb: ik.GraphBuilder, call) -> None:
    x = bb.param("x", (bb.dim("batch"), 3), "float32")
    with pytest.raises(ValueError, match=r"does not support symbolic dims: dim batch "
                                         r"\(axis 0 of operand 0\)"):
        call(bb, x)


def test_builder_declares_names_and_refuses_foreign_dims(bb: ik.GraphBuilder) -> None:
    x = bb.param("x", ("n", 2), "float32")  # a name declares the variable (bounds [1, inf])
    assert _shape(bb, x) == "n, 2"
    other = ik.GraphBuilder("g").dim("n")
    with pytest.raises(ValueError, match="another function's variables"):
        bb.param("y", (other,), "float32")
    with pytest.raises(ValueError, match="undeclared dim variable 'm'"):
        bb.reshape(x, shape=("m", -1))


def test_verify_checks_symbolic_types() -> None:
    bb = ik.GraphBuilder("main")
    b = bb.dim("b")
    x = bb.param("x", (b, 3), "float32")
    y = bb.concat(x, x, axis=0)
    f = bb.finish([y])
    ik.verify(dataclasses.replace(f))  # a copy the builder did not vouch for
    wrong = f.shape_id.copy()
    wrong[y] = wrong[x]
    bad = dataclasses.replace(f, shape_id=wrong)
    with pytest.raises(ik.IRError, match=r"node 1 \(concat\): declared type float32\[b, 3\] "
                                         r"differs from the inferred float32\[2\*b, 3\]"):
        ik.verify(bad)


def test_runtime_build_refuses_symbolic_modules() -> None:
    import runtime

    bb = ik.GraphBuilder("main")
    f = bb.finish([bb.exp(bb.param("x", (bb.dim("batch"), 3), "float32"))])
    with pytest.raises(NotImplementedError, match=r"function 'main' has symbolic dims "
                                                  r"\(batch\).* not built yet"):
        runtime.build(ik.IRModule({"main": f}))


_HEAD = "@main = graph {\n"


@pytest.mark.parametrize(("body", "line", "column", "match"), [
    ("  %0 = param x : float32[b, 3]\n", 2, 26, "unknown dim variable 'b'"),
    ("  dim h\n  dim n\n  %0 = param x : float32[(h // 2) * n]\n", 4, 35, "product"),
    ("  dim h\n  dim h in [1, 4]\n", 3, 7, "redefinition of dim h"),
    ("  dim h in [5, 2]\n", 2, 7, "upper bound 2 must be"),
    ("  dim h in [1, x]\n", 2, 16, "expected an integer bound or inf"),
    ("  dim h\n  %0 = param x : float32[h // h]\n", 3, 31,
     "expected a constant divisor"),
    ("  dim h\n  %0 = param x : float32[h]\n  %1 = exp %0 : float32[h + 1]\n", 4, 17,
     r"declared type float32\[h \+ 1\] of %1 differs from the inferred type float32\[h\]"),
    ("  dim h\n  %0 = param x : float32[h]\n  %1 = reshape %0 {shape = [g]} : float32[h]\n",
     4, 29, "unknown dim variable 'g'"),
])
def test_symbolic_parse_errors(body: str, line: int, column: int, match: str) -> None:
    with pytest.raises(ParseError, match=match) as info:
        ik.parse(_HEAD + body + "  return %0\n}\n")
    assert (info.value.line, info.value.column) == (line, column)


def test_hand_written_symbolic_text() -> None:
    text = textwrap.dedent("""\
        @main = graph {
          dim batch in [1, 8]
          dim seq
          %x = param x : float32[batch, seq, 4]
          %r = reshape %x {shape = [batch, -1]} : float32[batch, 4*seq]
          %c = concat %r, %r {axis = 1} : float32[batch, 8*seq]
          %s = sum %c {axis = [1]} : float32[batch]
          return %s
        }
        """)
    f = ik.parse(text)["main"]
    (out,) = ik.interpret(f, np.ones((2, 3, 4), np.float32))
    np.testing.assert_array_equal(out, np.full(2, 24, np.float32))
    assert "dim seq in [1, inf]" in f.script()


def test_non_canonical_text_prints_canonically_and_then_round_trips() -> None:
    text = textwrap.dedent("""\
        @main = graph {
          dim h in [3, inf]
          %x = param x : float32[1, 2, h, (h - 1) // 2 + 1 + h - h]
          %w = const [1.0, 2.0, 3.0, 4.0, 5.0, 6.0] : float32[1, 2, 3, 1]
          %c = conv %x, %w {padding = [1, 0, 1, 0]} : float32[1, 1, h, (2*h+2)//4 + 0]
          return %c
        }
        """)
    f = ik.parse(text)["main"]
    printed = f.script()
    assert "float32[1, 2, h, (h + 1) // 2]" in printed
    assert "float32[1, 1, h, (h + 1) // 2]" in printed
    assert ik.parse(printed).script() == printed
