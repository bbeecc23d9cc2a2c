"""Graph generators for build-time scaling: shapes of graph that stress one build phase each.

Every generator is ``family(n_nodes, seed) -> IRModule`` with about ``n_nodes`` nodes
(params and constants included; ``several_functions`` counts all its functions), made with
``GraphBuilder.add_nodes`` (whole columns: 1e7 nodes in seconds, no Python per node).
Values are never run, only built, so the ops are chosen for their structure, not their
numerics.

* ``wide``: lanes of mixed shapes whose nodes read the previous node of their lane and
  one up to ``reach`` lane steps back, so thousands of values stay alive at once (the
  memory planner's worst case before it became O(n log n)); a few matmuls and concats.
* ``deep``: one chain on (8, 8), a matmul every 16th node (fusion groups end there).
* ``shapes``: many short chains, each on its own shape (n / 20 distinct shapes), ending in
  a sum; the sums add up in a scalar chain. Every shape is its own set of kernels, so
  this family is bound by LLVM: minutes at 1e5 nodes, and ten times that at 1e6.
* ``consts``: a chain on (16,) in which every node reads its own scalar constant.
* ``fanin``: n / 2 values, each a parameter plus its own constant, in one concat.
* ``outputs``: a chain on (4,) whose every other node is an output.
* ``several_functions``: eight helpers (``wide`` bodies, one scalar result each) that
  ``main`` (a ``wide`` body too) calls.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import irkernel as ik
from irkernel.ir import ops
from irkernel.ir.ids import NONE

#: Shape classes of ``wide`` lanes; (16,) and (32,) are joined by concats, (8, 8) by matmuls.
WIDE_SHAPES = ((16,), (4, 16), (8, 8), (32,), (3, 5), (64,), (2, 3, 4))
BINARY = np.array([ops.OP_ADD, ops.OP_MULTIPLY, ops.OP_SUBTRACT, ops.OP_MAXIMUM], np.int16)
UNARY = np.array([ops.OP_TANH, ops.OP_NEGATIVE, ops.OP_RELU], np.int16)


def _lane_ops(rng: np.random.Generator, m: int, unary_frac: float = 0.2) -> np.ndarray:
    """Elementwise opcodes: binary ones, a share ``unary_frac`` of unary ones."""
    kind = BINARY[rng.integers(0, len(BINARY), m)]
    unary = rng.random(m) < unary_frac
    kind[unary] = UNARY[rng.integers(0, len(UNARY), int(unary.sum()))]
    return kind


def _is_unary(kind: np.ndarray) -> np.ndarray:
    return np.isin(kind, UNARY)


def wide_body(bb: ik.GraphBuilder, rng: np.random.Generator, n: int, reach: int,
              prefix: str = "x") -> tuple[list[int], list[int]]:
    """Append about ``n`` nodes of lanes over :data:`WIDE_SHAPES`: (its params, each lane's
    last node).

    Node k of a lane reads node k - 1 (its chain) and node k - r, r uniform in [1, reach]
    (a value that stays alive for up to ``reach`` lane steps). 1% of the (8, 8) nodes are
    matmuls; 2% of the (32,) nodes are concats of two (16,) values.
    """
    heads = [bb.param(f"{prefix}{c}", s, "float32") for c, s in enumerate(WIDE_SHAPES)]
    n_ops = max(n - len(heads), 0)
    start = len(bb)
    cls = rng.integers(0, len(WIDE_SHAPES), n_ops)
    kind = _lane_ops(rng, n_ops)
    a0 = np.empty(n_ops, np.int32)
    a1 = np.empty(n_ops, np.int32)
    ids = np.arange(start, start + n_ops, dtype=np.int32)
    lane_ids = []
    for c, head in enumerate(heads):
        at = np.nonzero(cls == c)[0]
        pos = ids[at]
        lane_ids.append(pos)
        chain = np.concatenate([[head], pos[:-1]]).astype(np.int32)
        back = np.arange(len(pos)) - rng.integers(1, reach + 1, len(pos))
        a0[at] = chain
        a1[at] = np.where(back >= 0, pos[np.maximum(back, 0)], head)
    a1[_is_unary(kind)] = NONE
    mm = (cls == WIDE_SHAPES.index((8, 8))) & (rng.random(n_ops) < 0.01)
    kind[mm] = ops.OP_MATMUL
    a1[mm] = np.where(a1[mm] < 0, a0[mm], a1[mm])
    cat = (cls == WIDE_SHAPES.index((32,))) & (rng.random(n_ops) < 0.02)
    kind[cat] = ops.OP_CONCAT
    # The two (16,) operands: the latest (16,) node before the concat, and one from afar.
    lane16, head16 = lane_ids[WIDE_SHAPES.index((16,))], heads[WIDE_SHAPES.index((16,))]
    before = np.searchsorted(lane16, ids[cat]) - 1
    far = before - rng.integers(0, reach, len(before))
    extra = np.stack([np.where(before >= 0, lane16[np.maximum(before, 0)], head16),
                      np.where(far >= 0, lane16[np.maximum(far, 0)], head16)], axis=1)
    a0[cat] = 2 * np.arange(int(cat.sum()), dtype=np.int32)
    a1[cat] = 2
    attr_id = np.zeros(n_ops, np.int32)
    attr_id[:] = _default_attrs(bb, kind)
    attr_id[cat] = bb.intern_attrs("concat", axis=0)
    bb.add_nodes(kind, a0, a1, attr_id=attr_id, extra=extra.reshape(-1).astype(np.int32))
    return heads, [int(p[-1]) if len(p) else h for p, h in zip(lane_ids, heads, strict=True)]


def _default_attrs(bb: ik.GraphBuilder, kind: np.ndarray) -> np.ndarray:
    """Each node's op's empty attribute set (one interning per distinct opcode)."""
    table = np.zeros(int(kind.max(initial=0)) + 1, np.int32)
    for code in np.unique(kind).tolist():
        if code != ops.OP_CONCAT:
            table[code] = bb.intern_attrs(code)
    return table[kind]


def _scalar_sum(bb: ik.GraphBuilder, values: list[int]) -> int:
    """One scalar: the sum of ``sum(v)`` over ``values`` (a chain of adds)."""
    total = bb.call("sum", values[0])
    for v in values[1:]:
        total = bb.call("add", total, bb.call("sum", v))
    return total


def wide(n: int, seed: int, reach: int = 2000) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    _, tails = wide_body(bb, np.random.default_rng([seed, n, 1]), n, reach)
    return ik.IRModule({"main": bb.finish(tails)})


def deep(n: int, seed: int) -> ik.IRModule:
    rng = np.random.default_rng([seed, n, 2])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (8, 8), "float32")
    w = bb.param("w", (8, 8), "float32")
    m = max(n - 2, 1)
    start = len(bb)
    kind = _lane_ops(rng, m)
    kind[15::16] = ops.OP_MATMUL
    a0 = np.arange(start - 1, start + m - 1, dtype=np.int32)
    a0[0] = x
    a1 = np.full(m, w, np.int32)
    a1[_is_unary(kind)] = NONE
    bb.add_nodes(kind, a0, a1, attr_id=_default_attrs(bb, kind))
    return ik.IRModule({"main": bb.finish([start + m - 1])})


def shapes(n: int, seed: int, steps: int = 20) -> ik.IRModule:
    """n / ``steps`` lanes, lane k on shape (k + 1,): ``steps - 3`` elementwise ops, a sum."""
    rng = np.random.default_rng([seed, n, 3])
    bb = ik.GraphBuilder("main")
    n_lanes = max(n // steps, 1)
    heads = np.array([bb.param(f"a{k}", (k + 1,), "float32") for k in range(n_lanes)], np.int32)
    per = max(steps - 3, 1)  # + param, sum, add per lane
    start = len(bb)
    kind = _lane_ops(rng, n_lanes * per).reshape(n_lanes, per)
    ids = (start + np.arange(n_lanes * per, dtype=np.int32)).reshape(n_lanes, per)
    a0 = np.concatenate([heads[:, None], ids[:, :-1]], axis=1)
    a1 = np.repeat(heads[:, None], per, axis=1)
    a1[_is_unary(kind)] = NONE
    kind = kind.reshape(-1)
    bb.add_nodes(kind, a0.reshape(-1), a1.reshape(-1), attr_id=_default_attrs(bb, kind))
    # the sums, then a scalar chain adding them up
    sums = bb.add_nodes(np.full(n_lanes, ops.OP_SUM, np.int16), ids[:, -1].copy(),
                        attr_id=np.full(n_lanes, bb.intern_attrs("sum"), np.int32))
    total = _chain_sum(bb, sums)
    return ik.IRModule({"main": bb.finish([total])})


def _chain_sum(bb: ik.GraphBuilder, scalars: np.ndarray) -> int:
    """``s0 + s1 + ...`` as a chain of adds (one add node per term after the first)."""
    if len(scalars) == 1:
        return int(scalars[0])
    start = len(bb)
    m = len(scalars) - 1
    a0 = np.arange(start - 1, start + m - 1, dtype=np.int32)
    a0[0] = scalars[0]
    adds = bb.add_nodes(np.full(m, ops.OP_ADD, np.int16), a0, scalars[1:].astype(np.int32))
    return int(adds[-1])


def consts(n: int, seed: int) -> ik.IRModule:
    rng = np.random.default_rng([seed, n, 4])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (16,), "float32")
    m = max((n - 1) // 2, 1)
    cids = bb.add_scalar_consts(1.0 + np.arange(m) * 1e-6, "float32")
    cnodes = bb.add_nodes(np.full(m, ops.OP_CONST, np.int16), cids)
    start = len(bb)
    kind = BINARY[rng.integers(0, len(BINARY), m)]
    a0 = np.arange(start - 1, start + m - 1, dtype=np.int32)
    a0[0] = x
    bb.add_nodes(kind, a0, cnodes, attr_id=_default_attrs(bb, kind))
    return ik.IRModule({"main": bb.finish([start + m - 1])})


def fanin(n: int, seed: int) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    m = max((n - 2) // 2, 1)
    cids = bb.add_scalar_consts(np.arange(m) * 1e-3, "float32")
    cnodes = bb.add_nodes(np.full(m, ops.OP_CONST, np.int16), cids)
    values = bb.add_nodes(np.full(m, ops.OP_ADD, np.int16), np.full(m, x, np.int32), cnodes)
    cat = bb.add_nodes(np.array([ops.OP_CONCAT], np.int16), np.zeros(1, np.int32),
                       np.array([m], np.int32),
                       attr_id=np.array([bb.intern_attrs("concat", axis=0)], np.int32),
                       extra=values)
    return ik.IRModule({"main": bb.finish([int(cat[0])])})


def outputs(n: int, seed: int) -> ik.IRModule:
    rng = np.random.default_rng([seed, n, 6])
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (4,), "float32")
    m = max(n - 1, 1)
    start = len(bb)
    kind = _lane_ops(rng, m)
    a0 = np.arange(start - 1, start + m - 1, dtype=np.int32)
    a0[0] = x
    a1 = np.full(m, x, np.int32)
    a1[_is_unary(kind)] = NONE
    ids = bb.add_nodes(kind, a0, a1, attr_id=_default_attrs(bb, kind))
    return ik.IRModule({"main": bb.finish(ids[::2].tolist() + [int(ids[-1])])})


def several_functions(n: int, seed: int, n_helpers: int = 8,
                      reach: int = 200) -> ik.IRModule:
    rng = np.random.default_rng([seed, n, 7])
    share = max(n // (n_helpers + 1), len(WIDE_SHAPES) + 1)
    funcs = {}
    for h in range(n_helpers):
        hb = ik.GraphBuilder(f"helper{h}")
        funcs[f"helper{h}"] = hb.finish([_scalar_sum(hb, wide_body(hb, rng, share, reach)[1])])
    bb = ik.GraphBuilder("main")
    params, tails = wide_body(bb, rng, share, reach)
    results = [bb.call_func(f"helper{h}", *params, dtype="float32", shape=())
               for h in range(n_helpers)]
    total = _scalar_sum(bb, tails)
    for r in results:
        total = bb.call("add", total, r)
    funcs["main"] = bb.finish([total])
    return ik.IRModule(funcs)


FAMILIES: dict[str, Callable[[int, int], ik.IRModule]] = {
    "wide": wide, "deep": deep, "shapes": shapes, "consts": consts, "fanin": fanin,
    "outputs": outputs, "several_functions": several_functions}
