"""Small-tensor random graphs: one ``GraphBuilder.call`` per node, every op covered.

Owns ``build_small_function`` (``random_function`` for ``shapes="small"``) and ``base_shape``.
Imports ``irkernel.ir.*`` and the wiring helpers of ``irkernel.testing.bulk``.
"""

# Graphs are small (tests, hypothesis; up to ~1e4 nodes), so this generator is plain
# Python. It never re-implements a type rule: it proposes candidates (an op, operands,
# attributes) and keeps the first one the op table's own ``normalize_attrs``/``infer``
# accepts, then adds it with ``bb.call``.
#
# Shapes come from one random *base* shape of rank ``max_rank`` (dims in ``1..max_dim``):
# parameters and constants take "variants" of it (leading dims dropped, some dims set to
# 1), so elementwise operands usually broadcast, plus a matmul partner
# ``(..., base[-1], d)``. Op results leave the family (``permute_dims``, ``reshape``,
# ``concat``), which keeps the other rules busy.
#
# The wiring follows the scalar generator (``irkernel.testing.bulk``): live op nodes read
# the oldest unread live node they can first (so nothing live is left unread), dead nodes
# read anything, class-C nodes read only constant-derived nodes, duplicates repeat an
# earlier call exactly, and near the end merge steps join the unread nodes into
# ``n_outputs`` sinks. Fractions are met per node when a candidate of the designated kind
# exists; otherwise the node falls back to a plain live node, so measured fractions land
# near the spec.

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from irkernel.ir import narrow, ops
from irkernel.ir.builder import GraphBuilder
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir.function import Function
from irkernel.ir.ids import BOOL, DTYPE_NAMES, INT_DTYPES, UNSIGNED_DTYPES, dtype_code
from irkernel.testing.bulk import choose_outputs, leaf_count, param_lanes

Shape = tuple[int, ...]
MAX_TRIES = 24
_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal",
           "less", "greater", "matmul", "logical_and", "logical_or", "logical_xor",
           "floor_mod", "fmod")
_REDUCE = ("sum", "max", "mean", "min", "prod")


class _Gen:
    """State of one small-mode generation (node metadata, pools, unread nodes)."""

    def __init__(self, spec: Any, bb: GraphBuilder, helpers: Mapping[str, Function],
                 call_weight: float, base: Shape | None = None) -> None:
        self.spec, self.bb = spec, bb
        self.rng = np.random.default_rng([spec.seed, 0x5A11])
        self.lanes = [dtype_code(d) for d in spec.dtypes]
        self.types: list[tuple[int, Shape]] = []
        self.cls: list[int] = []
        self.dead: list[int] = []
        self.calls: list[tuple[str, tuple[int, ...], dict[str, Any]] | None] = []
        self.pools: dict[tuple[int, int, int], list[int]] = {}  # (dtype, cls, dead) -> ids
        self.unread: dict[int, None] = {}  # live op nodes nobody live reads (ordered)
        self.sources: dict[tuple[int, int], list[int]] = {}  # (cls, dead) -> non-dup op nodes
        names = [name for name, _ in spec.ops]
        weights = [w for _, w in spec.ops]
        self.helpers = {name: ([_node_type(h, int(p)) for p in h.params],
                               _node_type(h, int(h.outputs[0]))) for name, h in helpers.items()}
        if self.helpers and call_weight > 0:
            names.append("call_func")
            weights.append(call_weight)
        self.op_names = names
        self.op_p = np.asarray(weights, np.float64) / np.sum(weights)
        self.base = base_shape(spec) if base is None else tuple(base)
        self.family = self._family()

    # -- shapes -------------------------------------------------------------
    def _family(self) -> list[Shape]:
        base = self.base
        out = {base, ()}
        for _ in range(12):
            out.add(self._variant(base))
        if base:
            d = int(self.rng.integers(1, self.spec.max_dim + 1))
            partner = (*base[:-2], base[-1], d) if len(base) >= 2 else (base[0], d)
            out.update({partner, partner[-2:], (base[-1],)})
        return sorted((s for s in out if len(s) <= self.spec.max_rank),
                      key=lambda s: (len(s), s))

    def _variant(self, shape: Shape) -> Shape:
        keep = int(self.rng.integers(0, len(shape) + 1))
        tail = shape[len(shape) - keep:]
        return tuple(1 if self.rng.random() < 0.3 else d for d in tail)

    # -- bookkeeping --------------------------------------------------------
    def add_node(self, node: int, dtype: int, shape: Shape, cls: int, dead: int, call: Any,
                 live_op: bool, dup: bool = False) -> None:
        assert node == len(self.types)
        self.types.append((dtype, tuple(shape)))
        self.cls.append(cls)
        self.dead.append(dead)
        self.calls.append(call)
        self.pools.setdefault((int(dtype), cls, dead), []).append(node)
        if live_op:
            self.unread[node] = None
        if call is not None and not dup:
            self.sources.setdefault((cls, dead), []).append(node)

    def pick(self, dtype: int | None, want: int, dead: int,
             pred: Callable[[int], bool] | None = None, tries: int = 12) -> int | None:
        """An earlier node of ``dtype`` (None: any) and class ``want`` satisfying ``pred``.

        Live nodes (``dead == 0``) first take the oldest unread node that fits, as
        the scalar generator does; otherwise a random node, mostly a recent one.
        """
        if not dead:
            for k, v in enumerate(self.unread):
                if k >= 16:
                    break
                if ((dtype is None or self.types[v][0] == dtype)
                        and (want == 2 or self.cls[v] == want) and (pred is None or pred(v))):
                    return v
        keys = [k for k in self.pools
                if (dtype is None or k[0] == dtype) and (want == 2 or k[1] == want)
                and (dead or k[2] == 0)]
        if not keys:
            return None
        keys.sort()
        for _ in range(tries):
            pool = self.pools[keys[int(self.rng.integers(len(keys)))]]
            if self.rng.random() < 0.8:
                back = 1 + int(len(pool) * self.rng.random() ** 3)
                v = pool[len(pool) - min(back, len(pool))]
            else:
                v = pool[int(self.rng.integers(len(pool)))]
            if pred is None or pred(v):
                return v
        return None

    def oldest_unread(self, want: int) -> int | None:
        for v in self.unread:
            if want == 2 or self.cls[v] == want:
                return v
        return None

    # -- candidates ---------------------------------------------------------
    def infer(self, op: str, operands: Sequence[int], attrs: Mapping[str, Any]
              ) -> tuple[int, Shape] | None:
        """The op table's rule on these operands, or None when it rejects them."""
        opdef = ops.get_op(op)
        try:
            record = dict(opdef.normalize_attrs(attrs))
            code, shape = opdef.infer([self.types[v] for v in operands], record)
        except (TypeInferenceError, TypeError):
            return None
        if code not in self.lanes or len(shape) > self.spec.max_rank or any(
                d > self.spec.max_dim or d < 1 for d in shape):  # (a slice may be empty)
            return None
        return code, tuple(shape)

    def candidate(self, op: str, x: int, want: int, dead: int
                  ) -> tuple[list[int], dict[str, Any]] | None:
        """Operands (``x`` among them) and attributes for ``op``, or None."""
        if op in _BINARY or op == "where":
            return self.multi_candidate(op, x, want, dead)
        if op == "concat":
            return self.concat_candidate(x, want, dead)
        if op == "call_func":
            return self.call_candidate(x, want, dead)
        return [x], self.unary_attrs(op, self.types[x][1])

    def multi_candidate(self, op: str, x: int, want: int, dead: int
                        ) -> tuple[list[int], dict[str, Any]] | None:
        """matmul, the elementwise binary ops and where: partners that broadcast with ``x``."""
        dt, shape = self.types[x]
        rng = self.rng

        def broadcasts(v: int) -> bool:
            try:
                ops.broadcast_shapes(shape, self.types[v][1])
            except TypeInferenceError:
                return False
            return True

        if op == "matmul":
            if not shape:
                return None
            k = shape[-1]
            y = self.pick(dt, want, dead, lambda v: self._contracts(v, k))
            return None if y is None else ([x, y], {})
        if op in _BINARY:
            y = self.pick(dt, want, dead, broadcasts)
            if y is None:
                return None
            return ([x, y] if rng.random() < 0.5 else [y, x]), {}
        if dt == BOOL and rng.random() < 0.5:  # x as the condition
            vdt = self.lanes[int(rng.integers(len(self.lanes)))]
            a = self.pick(vdt, want, dead, broadcasts)
            b = None if a is None else self.pick(vdt, want, dead, broadcasts)
            return None if b is None else ([x, a, b], {})
        cond = self.pick(BOOL, want, dead, broadcasts)
        y = self.pick(dt, want, dead, broadcasts)
        if cond is None or y is None:
            return None
        return ([cond, x, y] if rng.random() < 0.5 else [cond, y, x]), {}

    def _contracts(self, v: int, k: int) -> bool:
        s = self.types[v][1]
        return bool(s) and (s[-2] == k if len(s) >= 2 else s[0] == k)

    def unary_attrs(self, op: str, shape: Shape) -> dict[str, Any]:
        """Random attributes of a one-operand op (reductions, layout ops, astype)."""
        rng = self.rng
        rank = len(shape)
        if op in _REDUCE:
            roll = rng.random()
            attrs: dict[str, Any] = {"keepdims": bool(rng.random() < 0.4)}
            if rank and roll < 0.4:
                attrs["axis"] = int(rng.integers(-rank, rank))
            elif rank and roll < 0.7:
                axes = rng.permutation(rank)[: int(rng.integers(1, rank + 1))]
                attrs["axis"] = tuple(int(a) - (rank if rng.random() < 0.3 else 0) for a in axes)
            return attrs
        if op == "reshape":
            return {"shape": self.reshape_target(shape)}
        if op == "permute_dims":
            if rng.random() < 0.3:
                return {}
            perm = rng.permutation(rank)
            return {"axes": tuple(int(a) - (rank if rng.random() < 0.2 else 0) for a in perm)}
        if op == "broadcast_to":
            target = [int(rng.integers(1, self.spec.max_dim + 1)) if d == 1 else d for d in shape]
            while len(target) < self.spec.max_rank and rng.random() < 0.5:
                target.insert(0, int(rng.integers(1, self.spec.max_dim + 1)))
            return {"shape": tuple(target)}
        if op == "astype":
            return {"dtype": DTYPE_NAMES[self.lanes[int(rng.integers(len(self.lanes)))]]}
        if op in ("argmax", "argmin"):
            return {"axis": int(rng.integers(-rank, rank)) if rank else 0,
                    "keepdims": bool(rng.random() < 0.4),
                    "select_last_index": bool(rng.random() < 0.4)}
        if op == "strided_slice":
            return self.slice_attrs(shape)
        return {}  # unary elementwise

    def slice_attrs(self, shape: Shape) -> dict[str, Any]:
        """Random non-empty NumPy slices: negative and out-of-range bounds, negative strides."""
        rng = self.rng
        begin, end, strides = [], [], []
        for d in shape:
            step = int(rng.choice([1, 1, 2, 3, -1, -2]))
            first = int(rng.integers(0, d))  # an element the slice keeps
            b = first - d if rng.random() < 0.3 else first
            if step > 0:
                e = int(rng.integers(first + 1, d + 3))
            else:
                e = int(rng.integers(-d - 3, first)) if rng.random() < 0.5 else first - 1 - d - 2
            begin.append(b)
            end.append(e)
            strides.append(step)
        return {"begin": tuple(begin), "end": tuple(end), "strides": tuple(strides)}

    def reshape_target(self, shape: Shape) -> tuple[int, ...]:
        size = int(np.prod(shape, dtype=np.int64))
        primes, m = [], size
        for p in (2, 3, 5, 7, 11, 13):
            while m % p == 0:
                primes.append(p)
                m //= p
        if m > 1:
            primes.append(m)
        rng = self.rng
        target: tuple[int, ...] = tuple(reversed(shape))
        for _ in range(5):
            rank = int(rng.integers(0 if size == 1 else 1, self.spec.max_rank + 1))
            if rank == 0:
                target = ()
                break
            dims = [1] * rank
            for p in primes:
                dims[int(rng.integers(rank))] *= p
            if max(dims) <= self.spec.max_dim:
                target = tuple(dims)
                break
        if target and rng.random() < 0.3:
            k = int(rng.integers(len(target)))
            target = (*target[:k], -1, *target[k + 1:])
        return target

    def concat_candidate(self, x: int, want: int, dead: int
                         ) -> tuple[list[int], dict[str, Any]] | None:
        dt, shape = self.types[x]
        if not shape:
            return None
        rank = len(shape)
        axis = int(self.rng.integers(rank))
        parts, total = [x], shape[axis]
        for _ in range(int(self.rng.integers(1, 3))):
            room = self.spec.max_dim - total
            y = self.pick(dt, want, dead,
                          lambda v, room=room: self._fits_concat(v, shape, axis, room))
            if y is None:
                break
            parts.append(y)
            total += self.types[y][1][axis]
        if len(parts) == 1 and 2 * shape[axis] > self.spec.max_dim:
            return None
        if len(parts) == 1:
            parts.append(x)
        self.rng.shuffle(parts)
        return parts, {"axis": axis - (rank if self.rng.random() < 0.3 else 0)}

    def _fits_concat(self, v: int, shape: Shape, axis: int, room: int) -> bool:
        s = self.types[v][1]
        return (len(s) == len(shape) and s[axis] <= room
                and all(a == b for k, (a, b) in enumerate(zip(s, shape, strict=True)) if k != axis))

    def call_candidate(self, x: int, want: int, dead: int
                       ) -> tuple[list[int], dict[str, Any]] | None:
        """A call of a helper: ``x`` for a parameter of its type when one fits, others by type."""
        names = sorted(self.helpers)
        fits = [n for n in names if self.types[x] in self.helpers[n][0]]
        pool = fits or names
        name = pool[int(self.rng.integers(len(pool)))]
        params, (out_dt, out_shape) = self.helpers[name]
        args: list[int] = []
        used_x = False
        for t in params:
            if t == self.types[x] and not used_x:
                args.append(x)
                used_x = True
                continue
            v = self.pick(t[0], want, dead, lambda v, t=t: self.types[v] == t, tries=32)
            if v is None:
                return None
            args.append(v)
        return args, {"callee": name, "dtype": DTYPE_NAMES[out_dt], "shape": out_shape}

    # -- nodes --------------------------------------------------------------
    def emit(self, op: str, operands: list[int], attrs: dict[str, Any], dead: int,
             dup: bool = False) -> int:
        result = self.infer(op, operands, attrs)
        assert result is not None
        node = self.bb.call(op, *operands, **attrs)
        cls = 1 if all(self.cls[v] == 1 for v in operands) else 0
        if not dead:
            for v in operands:
                self.unread.pop(v, None)
        self.add_node(node, result[0], result[1], cls, dead, (op, tuple(operands), attrs),
                      live_op=not dead, dup=dup)
        return node

    def op_node(self, cls: int, dead: int, dup: bool) -> None:
        if dup:
            src = self.sources.get((cls, dead), []) + (self.sources.get((cls, 0), [])
                                                         if dead else [])
            if src:
                back = 1 + int(min(len(src), 64) * self.rng.random())
                op, operands, attrs = self.calls[src[-back] if back <= len(src) else src[0]]
                self.emit(op, list(operands), attrs, dead, dup=True)
                return
        for attempt in range(MAX_TRIES):
            want_x = cls if attempt < MAX_TRIES // 2 else 2
            x = None if dead or attempt % 3 == 2 else self.oldest_unread(want_x)
            if x is None:
                x = self.pick(None, want_x, dead)
            if x is None:
                continue
            if not dead and len(self.unread) > 4 and attempt < 4 and self.rng.random() < 0.5:
                pair = self.pair_candidate(x, 1 if want_x == 1 else 2)
                if pair is not None:  # reads two unread nodes: keeps their number small
                    self.emit(*pair, dead=0)
                    return
            op = self.op_names[int(self.rng.choice(len(self.op_names), p=self.op_p))]
            # x is the anchor (class N for N nodes); the other operands may be C unless
            # the node must be constant-derived
            found = self.candidate(op, x, 1 if want_x == 1 else 2, dead)
            if found is not None and self.infer(op, found[0], found[1]) is not None:
                self.emit(op, found[0], found[1], dead)
                return
        self.fallback(dead)

    def pair_candidate(self, x: int, want: int) -> tuple[str, list[int], dict[str, Any]] | None:
        """A binary op of the mix on ``x`` and another unread node, or None."""
        binary = [op for op in self.op_names if op in _BINARY and op != "matmul"]
        if not binary:
            return None
        dt = self.types[x][0]
        for k, y in enumerate(self.unread):
            if k >= 16:
                break
            if y == x or self.types[y][0] != dt or (want == 1 and self.cls[y] != 1):
                continue
            for j in self.rng.permutation(len(binary))[:3]:
                operands = [x, y] if self.rng.random() < 0.5 else [y, x]
                if self.infer(binary[j], operands, {}) is not None:
                    return binary[j], operands, {}
        return None

    def fallback(self, dead: int) -> None:
        """A node that always type-checks: an identity reshape or broadcast of a recent node."""
        x = self.oldest_unread(2) if not dead else None
        if x is None:
            x = self.pick(None, 2, dead)
        assert x is not None
        for op, attrs in (("reshape", {"shape": self.types[x][1]}),
                          ("broadcast_to", {"shape": self.types[x][1]}),
                          ("permute_dims", {"axes": tuple(range(len(self.types[x][1])))}),
                          ("astype", {"dtype": DTYPE_NAMES[self.types[x][0]]})):
            if op in self.op_names and self.infer(op, [x], attrs) is not None:
                self.emit(op, [x], attrs, dead)
                return
        for _ in range(200):  # any op of the mix on any node
            x = self.pick(None, 2, dead)
            op = self.op_names[int(self.rng.choice(len(self.op_names), p=self.op_p))]
            found = None if x is None else self.candidate(op, x, 2, dead)
            if found is not None and self.infer(op, found[0], found[1]) is not None:
                self.emit(op, found[0], found[1], dead)
                return
        raise ValueError(f"ops: no op of {self.op_names} applies to the generated values "
                         f"(dtypes {list(self.spec.dtypes)}, max_rank {self.spec.max_rank})")

    def merge_step(self) -> bool:
        """One node that folds a late unread node into the oldest one (or prepares to).

        Folding ``p`` into ``t`` is a binary op of the mix on both; when their
        types do not allow one, ``p`` is first reduced to a scalar (after an
        ``astype`` to a numeric dtype if it is bool) and cast to ``t``'s dtype.
        Each step reads ``p``, so a fold never takes more than four nodes.
        """
        unread = list(self.unread)
        for t in unread[:4]:
            for p in reversed(unread):
                if p != t:
                    step = self.fold_step(p, t)
                    if step is not None:
                        self.emit(*step, dead=0)
                        return True
        return False

    def fold_step(self, p: int, t: int) -> tuple[str, list[int], dict[str, Any]] | None:
        binary = [op for op in self.op_names if op in _BINARY]
        for k in self.rng.permutation(len(binary)):
            if self.infer(binary[k], [t, p], {}) is not None:
                return binary[k], [t, p], {}
        (dt_p, shape_p), dt_t = self.types[p], self.types[t][0]
        steps: list[tuple[str, list[int], dict[str, Any]]] = []
        if shape_p != ():
            steps += [(op, [p], {}) for op in _REDUCE if op in self.op_names]
            numeric = [ln for ln in self.lanes if ln != BOOL]
            if dt_p == BOOL and numeric and "astype" in self.op_names:
                target = dt_t if dt_t != BOOL else numeric[0]
                steps.append(("astype", [p], {"dtype": DTYPE_NAMES[target]}))
        elif dt_p != dt_t and "astype" in self.op_names:
            steps.append(("astype", [p], {"dtype": DTYPE_NAMES[dt_t]}))
        for step in steps:
            if self.infer(*step) is not None:
                return step
        return None


def base_shape(spec: Any) -> Shape:
    """The base shape of a spec's graphs: rank ``max_rank``, dims in ``1..max_dim``."""
    rng = np.random.default_rng([spec.seed, 0xBA5E])
    return tuple(int(d) for d in rng.integers(1, spec.max_dim + 1, spec.max_rank))


def build_small_function(spec: Any, name: str = "main", private: bool = False,
                         helpers: Mapping[str, Function] | None = None,
                         call_weight: float = 0.0, base: Shape | None = None,
                         helper: bool = False) -> Function:
    """The small-tensor Function for a validated ``GraphSpec`` (see the module docstring).

    ``helpers`` (name -> Function with one output) become ``call_func``
    candidates of weight ``call_weight``; ``base`` overrides the base shape
    (helpers share main's, so that their signatures match main's values);
    ``helper`` makes every parameter after the first a scalar, for the same reason.
    """
    bb = GraphBuilder(name, private=private)
    gen = _Gen(spec, bb, helpers or {}, call_weight, base)
    rng = gen.rng
    n = spec.n_nodes
    n_params = min(spec.n_params, n)
    for p, lane in enumerate(param_lanes(gen.lanes, n_params)):
        shape = gen.base if p == 0 else (
            () if helper else gen.family[int(rng.integers(len(gen.family)))])
        gen.add_node(bb.param(f"p{p}", shape, DTYPE_NAMES[lane]), lane, shape, 0, 0, None, False)
    n_const = leaf_count(spec, n, n_params)
    prefix = [int(v) for v in rng.permutation(gen.lanes)[:n_const]]
    m = n - n_params - n_const
    window = min(64, (m + 3) // 4)
    m0 = m - window

    def designate(frac: float) -> np.ndarray:
        flags = np.zeros(m, bool)
        flags[rng.permutation(m0)[: min(round(frac * m), m0)]] = True
        return flags

    dead, csub, dup = (designate(spec.dead_fraction), designate(spec.const_subgraph_fraction),
                       designate(spec.duplicate_fraction))
    is_const = np.zeros(n - n_params, bool)
    is_const[: len(prefix)] = True
    rest = n - n_params - len(prefix)
    is_const[len(prefix) + rng.permutation(rest)[: n_const - len(prefix)]] = True
    t = 0
    if m and n_params + n_const == 0:
        raise ValueError("n_params: a graph with op nodes needs parameters or constants "
                         "(const_fraction > 0)")
    for b in range(n - n_params):
        if is_const[b]:
            lane = prefix[b] if b < len(prefix) else gen.lanes[int(rng.integers(len(gen.lanes)))]
            value = _const_value(gen, lane)
            gen.add_node(bb.const(value, DTYPE_NAMES[lane]), lane, value.shape, 1, 0, None, False)
            continue
        remaining = m - t
        excess = len(gen.unread) - spec.n_outputs
        if t >= m0 and excess >= 0 and remaining <= 4 * excess + 4 and gen.merge_step():
            t += 1
            continue
        gen.op_node(int(csub[t]), int(dead[t]), bool(dup[t]))
        t += 1
    sinks = list(gen.unread)
    live_ops = [v for v, c in enumerate(gen.calls)
                if c is not None and v not in gen.unread and not gen.dead[v]]
    spare = [live_ops[int(k)] for k in rng.permutation(len(live_ops))[: spec.n_outputs]]
    return bb.finish(choose_outputs(sinks + spare, len(sinks), spec.n_outputs, n))


def _node_type(func: Function, node: int) -> tuple[int, Shape]:
    return int(func.dtype[node]), func.shapes[int(func.shape_id[node])]


def _const_value(gen: _Gen, lane: int) -> np.ndarray:
    rng = gen.rng
    shape = () if rng.random() < 0.4 else gen.family[int(rng.integers(len(gen.family)))]
    size = int(np.prod(shape, dtype=np.int64))
    if lane == BOOL:
        values = rng.random(size) < 0.5
    elif lane in UNSIGNED_DTYPES:
        values = rng.integers(0, 17, size)
    elif lane in INT_DTYPES:
        values = rng.integers(-8, 9, size)
    else:  # k / 8 with |k| <= 255 or so: exact in float16 and bfloat16 too
        values = np.round(rng.standard_normal(size) * 16) / 8
    return narrow.to_storage(values, lane).reshape(shape)
