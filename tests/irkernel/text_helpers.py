"""Shared helpers of the text-format tests: round_trip, the golden module, fast-path batch texts."""

from __future__ import annotations

import numpy as np

import irkernel as ik
from irkernel.text.parser import parse


def round_trip(mod: ik.IRModule) -> str:
    """Print, parse, compare structurally, and check the text is a fixed point."""
    text = mod.script()
    back = parse(text)
    assert ik.structural_equal(back, mod), text
    assert back.script() == text
    return text


GOLDEN = """\
@main = graph attrs {global_symbol = "main"} {
  %0 = param x : float32[4]
  %1 = const [0.0, 1.0, 2.0, 3.0] : float32[4]
  %2 = add %0, %1 : float32[4]
  %3 = sum %2 {axis = [0], keepdims = false} : float32[]
  %4 = call_func %2 {callee = "f", dtype = float32, shape = [4]} : float32[4]
  %5 = const nan:0x7fc00001 : float32[]
  %6 = less %4, %5 : bool[4]
  %7 = where %6, %4, %5 : float32[4]
  return %3, %4
}

@f = graph attrs {SkipOptimization = true, note = "a \\"quoted\\" note", tags = [1, 2.5, none]} {
  %0 = param a : float32[4]
  %1 = reshape %0 {shape = [2, -1]} : float32[2, 2]
  %2 = permute_dims %1 {axes = none} : float32[2, 2]
  %3 = const 0.1 : float32[]
  %4 = multiply %2, %3 : float32[2, 2]
  %5 = reshape %4 {shape = [4]} : float32[4]
  return %5
}
"""


def build_golden() -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    c = bb.const(np.arange(4, dtype=np.float32))
    y = bb.add(x, c)
    s = bb.sum(y, axis=0)
    z = bb.call_func("f", y, dtype="float32", shape=(4,))
    nan = bb.const(np.array([0x7FC00001], np.uint32).view(np.float32).reshape(()))
    less = bb.less(z, nan)
    bb.where(less, z, nan)
    main = bb.finish([s, z])
    fb = ik.GraphBuilder("f", private=True,
                         attrs={"SkipOptimization": True, "note": 'a "quoted" note',
                                "tags": (1, 2.5, None)})
    a = fb.param("a", (4,), "float32")
    r = fb.reshape(a, shape=(2, -1))
    t = fb.permute_dims(r)
    m = fb.multiply(t, fb.const(np.float32(0.1)))
    f = fb.finish([fb.reshape(m, shape=(4,))])
    return ik.IRModule({"main": main, "f": f})


def _batch_text(n_before: int, bad: str, n_after: int, tail: str = "") -> tuple[str, int]:
    """A body whose fast-path lines surround ``bad``; returns (text, line of bad)."""
    head = ["@main = graph {", "  %0 = param x : float32[4]", "  %1 = param k : int32[4]",
            "  %2 = param p : float32[3]", "  %3 = exp %0 : float32[4]",
            "  %4 = add %3, %0 : float32[4]"]
    body = [f"  %{i} = {'exp' if i % 2 else 'add'} %{i - 1}{'' if i % 2 else ', %0'}"
            " : float32[4]" for i in range(5, 5 + n_before)]
    last = 4 + n_before
    after = [f"  %{i} = exp %{i - 1} : float32[4]" for i in range(last + 2, last + 2 + n_after)]
    end = after[-1].split()[0] if after else f"%{last}"
    lines = [*head, *body, bad.format(prev=last, me=last + 1), *after, tail,
             f"  return {end}", "}", ""]
    return "\n".join(line for line in lines if line), len(head) + len(body) + 1
