"""Scalar-mode random graphs at NumPy speed: the form table, constants and the driver.

Owns ``build_scalar_function`` (``random_function`` for ``shapes="scalar"``) and the wiring
helpers ``small`` shares. Imports ``irkernel.ir.*`` and ``irkernel.testing.bulk_kernels``.
"""

# Python builds a *form table* (every (op, operand dtypes, attributes) combination that the
# op table's own ``infer`` accepts on scalars and whose result dtype is allowed) and the
# constant pool (``add_scalar_consts``, a few hundred distinct values per dtype); one
# kernel sweep (``bulk_kernels.wire_kernel``, see there why a kernel) then decides every
# node; ``GraphBuilder.add_nodes`` infers and checks all types in bulk.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.ir import narrow, ops
from irkernel.ir.builder import GraphBuilder
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.function import Function
from irkernel.ir.ids import (
    BOOL,
    DTYPE_NAMES,
    ENC_VARIADIC,
    INT_DTYPES,
    NUMPY_DTYPES,
    UNSIGNED_DTYPES,
    dtype_code,
)
from irkernel.testing.bulk_kernels import (
    STATUS_EXTRA_FULL,
    STATUS_NO_FORM,
    STATUS_OUTPUTS_FULL,
    wire_kernel,
)

N_LANES = len(DTYPE_NAMES)
MAX_WINDOW = 64

# Scalar attribute variants per op (anything else uses the op's defaults).
_SCALAR_ATTRS: dict[str, tuple[dict[str, Any], ...]] = {
    "sum": ({}, {"keepdims": True}),
    "max": ({}, {"keepdims": True}),
    "mean": ({}, {"keepdims": True}),
    "min": ({}, {"keepdims": True}),
    "prod": ({}, {"keepdims": True}),
    "strided_slice": ({"begin": (), "end": (), "strides": ()},),
    "reshape": ({"shape": ()},),
    "permute_dims": ({}, {"axes": ()}),
    "broadcast_to": ({"shape": ()},),
}


class Helper:
    """A callee for ``call_func`` forms: name, param dtype codes (<= 3), result dtype code."""

    __slots__ = ("callee", "out", "params")

    def __init__(self, callee: str, params: Sequence[int], out: int) -> None:
        self.callee, self.params, self.out = callee, tuple(params), out


class FormTable:
    """Every scalar (op, operand lanes, attributes) the op rules accept, grouped by op."""

    def __init__(self, bb: GraphBuilder, weights: Sequence[tuple[str, float]],
                 lanes: Sequence[int], helpers: Sequence[Helper] = (),
                 call_weight: float = 0.0) -> None:
        # (mix index, kind, result lane, operand lanes, attr id)
        self.rows: list[tuple[int, int, int, tuple[int, ...], int]] = []
        self.mix: list[tuple[str, float]] = []
        lane_set = set(lanes)
        for name, weight in weights:
            found = self._op_forms(bb, name, lanes, lane_set)
            if found and weight > 0:
                self._add(name, weight, found)
        calls = [(h.out, h.params, bb.intern_attrs("call_func", callee=h.callee,
                                                     dtype=DTYPE_NAMES[h.out], shape=()))
                 for h in helpers if h.out in lane_set and set(h.params) <= lane_set]
        if calls and call_weight > 0:
            self._add("call_func", call_weight,
                      [(ops.OP_CALL_FUNC, out, slots, aid) for out, slots, aid in calls])

    @staticmethod
    def _op_forms(bb: GraphBuilder, name: str, lanes: Sequence[int],
                  lane_set: set[int]) -> list[tuple[int, int, tuple[int, ...], int]]:
        opdef = ops.get_op(name)
        if name == "where":
            patterns = [(BOOL, ln, ln) for ln in lanes] if BOOL in lane_set else []
        elif opdef.arity in (1, 2) and opdef.encoding != ENC_VARIADIC:
            patterns = [(ln,) * opdef.arity for ln in lanes]
        else:  # concat and the calls never apply to scalars
            patterns = []
        variants = (tuple({"dtype": DTYPE_NAMES[ln]} for ln in lanes) if name == "astype"
                    else _SCALAR_ATTRS.get(name, ({},)))
        found = []
        for attrs in variants:
            try:
                record = dict(opdef.normalize_attrs(attrs))
            except TypeError:  # an op whose required attributes we cannot invent: not made
                continue
            for pat in patterns:
                try:
                    out, shape = opdef.infer([(ln, ()) for ln in pat], record)
                except TypeInferenceError:
                    continue
                if shape == () and out in lane_set:
                    found.append((opdef.opcode, out, pat, bb.intern_attrs(name, **attrs)))
        return found

    def _add(self, name: str, weight: float, found: Sequence[tuple[int, int, tuple[int, ...], int]]
             ) -> None:
        idx = len(self.mix)
        self.mix.append((name, weight))
        self.rows.extend((idx, kind, out, slots, aid) for kind, out, slots, aid in found)

    def consumed_lanes(self) -> list[int]:
        return sorted({ln for row in self.rows for ln in row[3]})

    def prefix_lanes(self, rng: np.random.Generator, lanes: Sequence[int], k: int) -> list[int]:
        """Lanes of the first ``k`` constants: every consumed lane, self-sufficient ones first
        (a lane whose own values feed some form), so that few leaves still reach ops."""
        consumed = self.consumed_lanes() or list(lanes)
        order = [int(x) for x in rng.permutation(consumed)]
        own = {ln: sum(set(row[3]) == {ln} for row in self.rows) for ln in order}
        return sorted(order, key=lambda ln: own[ln] == 0)[:k]

    def prune(self, leaf_lanes: set[int]) -> None:
        """Keep the forms whose operand lanes can ever be produced from these leaves."""
        reach = set(leaf_lanes)
        while True:
            grown = reach | {row[2] for row in self.rows if set(row[3]) <= reach}
            if grown == reach:
                break
            reach = grown
        rows = [row for row in self.rows if set(row[3]) <= reach]
        used = sorted({row[0] for row in rows})
        remap = {old: new for new, old in enumerate(used)}
        self.mix = [self.mix[old] for old in used]
        self.rows = [(remap[row[0]], *row[1:]) for row in rows]

    def arrays(self) -> dict[str, np.ndarray]:
        rows = sorted(self.rows, key=lambda r: r[0])  # stable: forms of one op are contiguous
        n_forms, n_mix = len(rows), len(self.mix)
        mix_idx = np.array([r[0] for r in rows], np.int64)
        slot = np.full((n_forms, 3), -1, np.int8)
        for f, r in enumerate(rows):
            slot[f, : len(r[3])] = r[3]
        lane_lists = [[[f for f, r in enumerate(rows) if r[0] == o and ln in r[3]]
                       for ln in range(N_LANES)] for o in range(n_mix)]
        width = max([1] + [len(x) for per in lane_lists for x in per])
        lane_forms = np.zeros((n_mix, N_LANES, width), np.int32)
        lane_count = np.zeros((n_mix, N_LANES), np.int32)
        for o, per in enumerate(lane_lists):
            for ln, fs in enumerate(per):
                lane_forms[o, ln, : len(fs)] = fs
                lane_count[o, ln] = len(fs)
        counts = np.bincount(mix_idx, minlength=n_mix)
        return {
            **alias_table([w for _, w in self.mix]),
            "op_form_start": np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64),
            "op_form_count": counts.astype(np.int64),
            "op_lane_forms": lane_forms, "op_lane_count": lane_count,
            "form_kind": np.array([r[1] for r in rows], np.int16),
            "form_out": np.array([r[2] for r in rows], np.int8),
            "form_nslots": np.array([len(r[3]) for r in rows], np.int8),
            "form_slot": slot,
            "form_attr": np.array([r[4] for r in rows], np.int32),
            "form_variadic": np.array([r[1] in (ops.OP_WHERE, ops.OP_CALL_FUNC) for r in rows]),
        }


#: FormTable.arrays() keys in wire_kernel's argument order.
TABLE_KEYS = ("op_prob", "op_alias", "op_form_start", "op_form_count", "op_lane_forms",
              "op_lane_count", "form_kind", "form_out", "form_nslots", "form_slot", "form_attr",
              "form_variadic")


def alias_table(weights: Sequence[float]) -> dict[str, np.ndarray]:
    """Walker's alias table: pick k uniformly, keep it with probability prob[k], else alias[k]."""
    w = np.asarray(weights, np.float64)
    k = len(w)
    scaled = w * (k / w.sum())
    prob = np.ones(k)
    alias = np.arange(k, dtype=np.int64)
    small = [i for i in range(k) if scaled[i] < 1.0]
    large = [i for i in range(k) if scaled[i] >= 1.0]
    while small and large:  # one step per op of the mix
        s, g = small.pop(), large.pop()
        prob[s], alias[s] = scaled[s], g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return {"op_prob": prob, "op_alias": alias}


def param_lanes(lanes: Sequence[int], n_params: int) -> list[int]:
    """Round-robin over the allowed dtypes, bool last (bool is easily derived by compares)."""
    order = [ln for ln in lanes if ln != BOOL] + [ln for ln in lanes if ln == BOOL]
    return [order[p % len(order)] for p in range(n_params)]


def const_values(rng: np.random.Generator, lane: int) -> np.ndarray:
    """A few dozen distinct scalars: small, exactly representable, some special (-0.0, 0, 1)."""
    if lane == BOOL:
        return np.array([False, True])
    if lane in UNSIGNED_DTYPES:
        return np.arange(0, 17, dtype=NUMPY_DTYPES[lane])
    if lane in INT_DTYPES:
        return np.arange(-8, 9, dtype=NUMPY_DTYPES[lane])
    grid = np.concatenate([[0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0],
                           rng.integers(-24, 25, 40) / 8.0])
    return narrow.to_storage(grid, lane)  # exact in every float dtype (k / 8, |k| <= 24)


def build_scalar_function(spec: Any, name: str = "main", private: bool = False,
                          helpers: Mapping[str, Function] | None = None,
                          call_weight: float = 0.0) -> Function:
    """The scalar-mode Function for a validated ``GraphSpec`` (see the module docstring).

    ``helpers`` (name -> scalar Function with 1..3 params and one output) become
    ``call_func`` forms of weight ``call_weight``.
    """
    n = spec.n_nodes
    lanes = [dtype_code(d) for d in spec.dtypes]
    callees = [Helper(hname, [int(h.dtype[p]) for p in h.params], int(h.dtype[h.outputs[0]]))
               for hname, h in (helpers or {}).items()]
    rng = np.random.default_rng([spec.seed, 0x5CA1A2])
    bb = GraphBuilder(name, private=private)
    n_params = min(spec.n_params, n)
    p_lanes = param_lanes(lanes, n_params)
    for p, ln in enumerate(p_lanes):
        bb.param(f"p{p}", (), DTYPE_NAMES[ln])
    n_const = leaf_count(spec, n, n_params)
    forms = FormTable(bb, spec.ops, lanes, callees, call_weight)
    prefix = forms.prefix_lanes(rng, lanes, n_const)
    forms.prune(set(p_lanes) | set(prefix))
    body = n - n_params
    if not forms.rows and body > n_const:
        raise ValueError(f"ops: no op of {[k for k, _ in spec.ops]} applies to scalar "
                         f"values of dtypes {list(spec.dtypes)} built from the available leaves")
    if not n_params + n_const and body:
        raise ValueError("n_params: a graph with op nodes needs parameters or constants "
                         "(const_fraction > 0)")
    const_lanes = forms.consumed_lanes() or prefix or lanes
    values = {ln: const_values(rng, ln) for ln in sorted(set(const_lanes) | set(prefix))}
    ptr = np.zeros(N_LANES + 1, np.int64)
    ids = []
    for ln in range(N_LANES):
        cids = bb.add_scalar_consts(values[ln], DTYPE_NAMES[ln]) if ln in values else []
        ids.append(np.asarray(cids, np.int32))
        ptr[ln + 1] = ptr[ln] + len(ids[-1])
    m = body - n_const
    window = min(MAX_WINDOW, (m + 3) // 4)
    m0 = m - window

    def count(frac: float) -> int:
        return min(round(frac * m), m0)

    table = forms.arrays() if forms.rows else _empty_form_arrays()
    variadic_share = (sum(w for (nm, w) in forms.mix if nm in ("where", "call_func"))
                      / max(sum(w for _, w in forms.mix), 1e-300))
    extra_cap = 3 * (int(variadic_share * m * 1.25) + window + 64)
    out_cap = spec.n_outputs + 16
    kind = np.empty(body, np.int16)
    a0 = np.empty(body, np.int32)
    a1 = np.empty(body, np.int32)
    attr = np.empty(body, np.int32)
    kernel_seed = int(np.random.SeedSequence([spec.seed, 0x9E37]).generate_state(1, np.uint64)[0])
    kind_variadic = ops.op_arrays().encoding == ENC_VARIADIC
    while True:
        extra = np.empty(extra_cap, np.int32)
        outputs = np.empty(out_cap, np.int32)
        status, n_extra, n_sinks, n_out = wire_kernel(
            np.uint64(kernel_seed), np.array(p_lanes, np.int8), np.array(prefix, np.int8),
            body - len(prefix), n_const - len(prefix), np.array(const_lanes, np.int8), ptr,
            np.concatenate(ids).astype(np.int32), count(spec.dead_fraction),
            count(spec.const_subgraph_fraction), count(spec.duplicate_fraction), window,
            spec.n_outputs, *(table[key] for key in TABLE_KEYS), kind_variadic, ops.OP_CONST,
            kind, a0, a1, attr, extra,
            outputs)
        if status == STATUS_EXTRA_FULL:
            extra_cap *= 2
        elif status == STATUS_OUTPUTS_FULL:
            out_cap = n_sinks + spec.n_outputs + 16
        elif status == STATUS_NO_FORM:  # pragma: no cover - the pruned table prevents it
            raise RuntimeError(f"random_function: no applicable form for {spec}")
        else:
            break
    if body:
        bb.add_nodes(kind, a0, a1, attr_id=attr, extra=extra[:n_extra].copy())
    return bb.finish(choose_outputs(outputs[:n_out].tolist(), n_sinks, spec.n_outputs, n))


def leaf_count(spec: Any, n: int, n_params: int) -> int:
    """Constants in an ``n``-node graph: the spec's share (at least one when the graph has
    no parameter but room for ops and constants are allowed)."""
    n_const = min(int(spec.const_fraction * n + 0.5), n - n_params)
    if n_params == 0 and n_const == 0 and spec.const_fraction > 0:
        n_const = 1
    return n_const


def choose_outputs(candidates: list[int], n_sinks: int, n_outputs: int, n: int) -> list[int]:
    """Every sink, then spare live nodes, then the last nodes, up to ``n_outputs``."""
    outs = candidates[: max(n_sinks, n_outputs)]
    taken = set(outs)
    node = n - 1
    while len(outs) < n_outputs and node >= 0:
        if node not in taken:
            outs.append(node)
            taken.add(node)
        node -= 1
    while len(outs) < n_outputs:  # fewer nodes than outputs: repeat
        outs.append(outs[len(outs) % max(len(taken), 1)])
    return outs


def _empty_form_arrays() -> dict[str, np.ndarray]:
    return {**alias_table([1.0]), "op_form_start": np.zeros(1, np.int64),
            "op_form_count": np.zeros(1, np.int64),
            "op_lane_forms": np.zeros((1, N_LANES, 1), np.int32),
            "op_lane_count": np.zeros((1, N_LANES), np.int32),
            "form_kind": np.zeros(0, np.int16), "form_out": np.zeros(0, np.int8),
            "form_nslots": np.zeros(0, np.int8), "form_slot": np.zeros((0, 3), np.int8),
            "form_attr": np.zeros(0, np.int32), "form_variadic": np.zeros(0, np.bool_)}
