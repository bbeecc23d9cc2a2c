"""A graph Function as a JAX function (one ``jax.numpy`` call per node), and the XLA worker.

Bench-only: JAX is never a dependency of irkernel. ``to_jax(func)`` returns
``f(*params) -> list of outputs`` following irkernel's op semantics
(``irkernel/ir/ops/``): NaN-propagating maximum/minimum/relu/max, true division
for floats and floor division with ``x // 0 == 0`` for ints, sigmoid in the input
dtype, reductions accumulated in the input dtype, mean = sum / count, astype
float -> int truncating with NaN -> 0 and saturation, reshape/broadcast_to to the
node's declared shape. ``call_func``/``call_tir`` are not translated.

Worker (run by ``bench_compile_scale.py`` in a fresh process, ``PYTHONPATH`` = this
tree, ``XLA_FLAGS`` set by the driver)::

    python bench/jax_graph.py --graph G.pkl --out R.json [--save-outputs O.npz]
        [--node-check]

It times ``import jax``, a tiny jit (``init_s``: backend start-up, paid once per
process), ``jax.jit(f).lower(*inputs)`` (``lower_s``: tracing + StableHLO) and
``.compile()`` (``xla_s``); ``compile_s = lower_s + xla_s``. Run time: median of
``compiled(*device_inputs)`` + ``block_until_ready`` after warm-ups (inputs are
put on the device once, as irkernel takes its NumPy inputs without copying).
``--node-check`` evaluates every node eagerly on the reference's own operand
values and compares it with the op table's NumPy reference (no error build-up
along the graph: a mismatch there is a translation bug, not float noise).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_worker import compare, load_graph


def _node_fn(name: str, attrs: dict[str, Any], shape: tuple[int, ...], dt: np.dtype
             ) -> Callable[[Sequence[Any]], Any]:
    """``fn(operands) -> value`` of one op node, in jax.numpy."""
    import jax
    import jax.numpy as jnp

    from irkernel.ir import ops
    from irkernel.ir.ids import NUMPY_DTYPES, dtype_code

    def reduce(fn: Callable[..., Any]) -> Callable[[Sequence[Any]], Any]:
        def run(xs: Sequence[Any]) -> Any:
            x = xs[0]
            axes = ops.normalize_axes(attrs["axis"], x.ndim)
            return fn(x, axis=axes, keepdims=attrs["keepdims"])
        return run

    def divide(xs: Sequence[Any]) -> Any:
        x, y = xs
        if np.dtype(x.dtype).kind == "f":
            return jnp.true_divide(x, y)
        zero = y == 0
        return jnp.where(zero, jnp.zeros((), x.dtype), jnp.floor_divide(x, jnp.where(zero, 1, y)))

    def mean(x: Any, axis: tuple[int, ...], keepdims: bool) -> Any:
        count = int(np.prod([x.shape[a] for a in axis], dtype=np.int64))
        return jnp.true_divide(jnp.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype), count)

    def astype(xs: Sequence[Any]) -> Any:
        x = xs[0]
        to = NUMPY_DTYPES[dtype_code(attrs["dtype"])]
        if np.dtype(x.dtype).kind == "f" and to.kind == "i":
            info = np.iinfo(to)
            hi = float(2 ** (info.bits - 1))
            inside = (x >= -hi) & (x < hi)
            out = jnp.trunc(jnp.where(inside, x, 0)).astype(to)
            out = jnp.where(x >= hi, info.max, out)
            return jnp.where(x < -hi, info.min, out).astype(to)
        return x.astype(to)

    unary = {"negative": jnp.negative, "exp": jnp.exp, "log": jnp.log, "sqrt": jnp.sqrt,
             "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid, "abs": jnp.abs,
             "relu": lambda x: jnp.maximum(x, jnp.zeros((), x.dtype))}
    binary = {"add": jnp.add, "subtract": jnp.subtract, "multiply": jnp.multiply,
              "maximum": jnp.maximum, "minimum": jnp.minimum, "power": jnp.power,
              "equal": jnp.equal, "less": jnp.less, "greater": jnp.greater,
              "matmul": jnp.matmul}
    if name in unary:
        fn1 = unary[name]
        return lambda xs: fn1(xs[0])
    if name in binary:
        fn2 = binary[name]
        return lambda xs: fn2(xs[0], xs[1])
    table: dict[str, Callable[[Sequence[Any]], Any]] = {
        "divide": divide,
        "where": lambda xs: jnp.where(xs[0], xs[1], xs[2]),
        "sum": reduce(lambda x, axis, keepdims: jnp.sum(x, axis=axis, keepdims=keepdims,
                                                        dtype=x.dtype)),
        "max": reduce(jnp.max),
        "mean": reduce(mean),
        "reshape": lambda xs: jnp.reshape(xs[0], shape),
        "permute_dims": lambda xs: jnp.transpose(xs[0], ops.permutation(attrs["axes"],
                                                                        xs[0].ndim)),
        "broadcast_to": lambda xs: jnp.broadcast_to(xs[0], shape),
        "astype": astype,
        "concat": lambda xs: jnp.concatenate(list(xs), axis=attrs["axis"]),
    }
    if name not in table:
        raise NotImplementedError(f"jax_graph: op {name!r} is not translated")
    return table[name]


class _Plan:
    """Per-node data of a Function: kinds, operands, attrs, declared types, constants."""

    def __init__(self, func: Any) -> None:
        from irkernel.ir import ops
        from irkernel.ir.ids import NUMPY_DTYPES
        from irkernel.ir.operands import operand_csr

        self.func = func
        csr = operand_csr(func)
        ptr, ids = csr.ptr.tolist(), csr.ids.tolist()
        self.operands = [ids[ptr[i]: ptr[i + 1]] for i in range(func.num_nodes)]
        self.kinds = func.kind.tolist()
        self.a0 = func.a0.tolist()
        self.names = [ops.get_op(k).name for k in range(max(self.kinds) + 1)]
        attrs_of = [dict(r) for r in func.attr_table.records]
        self.attrs = [attrs_of[a] for a in func.attr_id.tolist()]
        self.shapes = [func.shapes[s] for s in func.shape_id.tolist()]
        self.dtypes = [NUMPY_DTYPES[d] for d in func.dtype.tolist()]
        self.fns: dict[int, Callable[[Sequence[Any]], Any]] = {}
        for i, k in enumerate(self.kinds):
            if k not in (ops.OP_PARAM, ops.OP_CONST):
                self.fns[i] = _node_fn(self.names[k], self.attrs[i], self.shapes[i],
                                       self.dtypes[i])

    def const(self, i: int) -> np.ndarray:
        return self.func.consts.value(self.a0[i], self.func.shapes)

    def fix(self, i: int, value: Any) -> Any:
        return value if value.dtype == self.dtypes[i] else value.astype(self.dtypes[i])


def to_jax(func: Any) -> Callable[..., list[Any]]:
    """``f(*params)``: the graph's outputs, one jax.numpy call per node (trace it with jit)."""
    from irkernel.ir import ops

    plan = _Plan(func)
    consts = {i: plan.const(i) for i, k in enumerate(plan.kinds) if k == ops.OP_CONST}
    outputs = func.outputs.tolist()

    def f(*params: Any) -> list[Any]:
        values: list[Any] = [None] * len(plan.kinds)
        for i, k in enumerate(plan.kinds):
            if k == ops.OP_PARAM:
                values[i] = params[plan.a0[i]]
            elif k == ops.OP_CONST:
                values[i] = consts[i]
            else:
                values[i] = plan.fix(i, plan.fns[i]([values[j] for j in plan.operands[i]]))
        return [values[o] for o in outputs]

    return f


def node_check(func: Any, inputs: list[np.ndarray]) -> dict[str, Any]:
    """Every op node in JAX (eagerly) against the op table's NumPy reference, each fed the
    reference values of its operands; counts per op of nodes that differ."""
    import jax.numpy as jnp

    from irkernel.ir import ops

    plan = _Plan(func)
    values: list[Any] = [None] * len(plan.kinds)
    bad: dict[str, int] = {}
    first = None
    checked = 0
    for i, k in enumerate(plan.kinds):
        if k == ops.OP_PARAM:
            values[i] = inputs[plan.a0[i]]
            continue
        if k == ops.OP_CONST:
            values[i] = plan.const(i)
            continue
        args = [values[j] for j in plan.operands[i]]
        ref = np.asarray(ops.get_op(k).reference(args, plan.attrs[i]))
        ref = ref.astype(plan.dtypes[i]) if ref.dtype != plan.dtypes[i] else ref
        got = np.asarray(plan.fix(i, plan.fns[i]([jnp.asarray(a) for a in args])))
        cmp = compare([ref], [got])
        checked += 1
        if not cmp["ok"]:
            bad[plan.names[k]] = bad.get(plan.names[k], 0) + 1
            first = first or f"node {i} ({plan.names[k]}): {cmp['first_bad']}"
        values[i] = ref
    return {"ok": not bad, "nodes": checked, "bad_by_op": bad, "first_bad": first}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    res: dict[str, Any] = {"pid": os.getpid(), "load_before": os.getloadavg()[0],
                           "xla_flags": os.environ.get("XLA_FLAGS", "")}
    start = time.perf_counter()
    import jax
    import jax.numpy as jnp

    res["import_s"] = time.perf_counter() - start
    res["jax_version"] = jax.__version__
    func, inputs, _meta = load_graph(Path(args.graph))
    from irkernel.ir.ids import NUMPY_DTYPES

    if any(NUMPY_DTYPES[int(c)].itemsize == 8 for c in np.unique(func.dtype)):
        jax.config.update("jax_enable_x64", True)  # 64-bit dtypes need it; float32 does not
    res["nodes"] = int(func.num_nodes)
    start = time.perf_counter()
    x0 = np.ones((5, 3), np.float32)
    tiny = jax.jit(lambda x: jnp.exp(x) * x + 1.0).lower(x0).compile()
    jax.block_until_ready(tiny(x0))
    res["init_s"] = time.perf_counter() - start

    start = time.perf_counter()
    f = to_jax(func)
    res["translate_s"] = time.perf_counter() - start
    start = time.perf_counter()
    lowered = jax.jit(f).lower(*inputs)
    res["lower_s"] = time.perf_counter() - start
    start = time.perf_counter()
    compiled = lowered.compile()
    res["xla_s"] = time.perf_counter() - start
    res["compile_s"] = res["lower_s"] + res["xla_s"]
    res["rss_after_compile_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20

    dev = [jax.device_put(x) for x in inputs]
    start = time.perf_counter()
    outs = jax.block_until_ready(compiled(*dev))
    res["first_call_s"] = time.perf_counter() - start
    for _ in range(2):
        jax.block_until_ready(compiled(*dev))
    times: list[float] = []
    while len(times) < 2000 and (len(times) < 5 or sum(times) < args.min_time):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*dev))
        times.append(time.perf_counter() - start)
    res["run_s"], res["run_calls"] = statistics.median(times), len(times)
    res["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if args.save_outputs:
        np.savez(args.save_outputs, *[np.asarray(o) for o in outs])
    if args.node_check:
        start = time.perf_counter()
        from irkernel.testing import random_inputs  # NaN, inf and -0.0 among them

        res["node_check"] = node_check(func, random_inputs(func, seed=1))
        res["node_check_s"] = time.perf_counter() - start
    res["load_after"] = os.getloadavg()[0]
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="XLA compile and run time of a saved graph")
    p.add_argument("--graph", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--save-outputs", default="")
    p.add_argument("--node-check", action="store_true")
    p.add_argument("--min-time", type=float, default=1.0)
    args = p.parse_args(argv)
    Path(args.out).write_text(json.dumps(measure(args), indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
