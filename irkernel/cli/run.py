"""``irkernel run FILE --inputs a.npy ... | --random``: read, ``runtime.build``, run, summarize.

FILE is an ``.ir`` file or an ``.onnx`` model (imported by the frontend); ``--random``
runs on random inputs of the parameters' types, ``--repeat N`` reports the median time
per run of N runs.

Imported lazily by ``irkernel/cli.py`` (runtime and numpy load only when the
subcommand runs). User errors (missing or unreadable files, wrong input
count/dtype/shape, unknown entry, IR that does not verify) print one line
``irkernel run: error: ...`` on stderr and return exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule


class RunError(Exception):
    """A user error of ``irkernel run`` (printed without a traceback)."""


def _load_inputs(paths: Sequence[str]) -> list[Any]:
    import numpy as np

    arrays = []
    for path in paths:
        try:
            arrays.append(np.load(path, allow_pickle=False))
        except (OSError, ValueError) as exc:
            raise RunError(f"cannot read input {path!r}: {exc}") from exc
    return arrays


def _describe(arr: Any) -> str:
    import numpy as np

    text = f"{arr.dtype.name}{list(arr.shape)}"
    if not arr.size:
        return text
    if arr.dtype == np.bool_:
        return f"{text}  true {int(arr.sum())} of {arr.size}"
    return (f"{text}  min {arr.min():.6g}  max {arr.max():.6g}  "
            f"mean {arr.astype(np.float64).mean():.6g}")


def run_file(args: argparse.Namespace, out: TextIO,
             read_module: Callable[[str], IRModule]) -> int:
    """The ``run`` subcommand; returns the exit code (0, or 2 on a user error)."""
    try:
        return _run(args, out, read_module)
    except (RunError, IRError, OSError, ValueError, TypeError) as exc:
        print(f"irkernel run: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, out: TextIO, read_module: Callable[[str], IRModule]) -> int:
    import numpy as np

    import runtime
    from irkernel import instrument, transform

    mod = read_module(args.file)
    if not isinstance(mod.functions.get(args.entry), Function):
        graphs = [n for n, f in mod.functions.items() if isinstance(f, Function)]
        raise RunError(f"{args.file}: no graph function {args.entry!r} to run "
                       f"(graph functions: {', '.join(graphs) or 'none'})")
    if getattr(args, "random", False):
        if args.inputs:
            raise RunError("give --inputs or --random, not both")
        from irkernel.testing import random_inputs

        inputs = random_inputs(mod[args.entry], seed=0, special_values=False)
    else:
        inputs = _load_inputs(args.inputs or [])
    timing = instrument.PassTimingInstrument() if args.time_passes else None
    start = time.perf_counter()
    with transform.PassContext(instruments=[timing] if timing is not None else None):
        ex = runtime.build(mod, opt_level=args.opt_level)
    built = time.perf_counter()
    graph = ex[args.entry]
    results = graph(*inputs)
    times = [time.perf_counter() - built]
    for _ in range(max(getattr(args, "repeat", 1), 1) - 1):  # --repeat N: the median of N runs
        t0 = time.perf_counter()
        graph(*inputs)
        times.append(time.perf_counter() - t0)
    per_run = sorted(times)[len(times) // 2]
    runs = f" (median of {len(times)} runs)" if len(times) > 1 else ""
    print(f"{args.file}: {args.entry} built in {(built - start) * 1e3:.1f} ms "
          f"({graph.num_kernels} kernel launches), ran in {per_run * 1e3:.3f} ms per run{runs}",
          file=out)
    print(f"  memory plan: {ex.memory_plan(args.entry).summary()}", file=out)
    for k, arr in enumerate(results):
        print(f"  output {k}: {_describe(arr)}", file=out)
    if args.output:
        np.savez(args.output, **{f"output{k}": arr for k, arr in enumerate(results)})
        print(f"  wrote {len(results)} output(s) to {args.output}", file=out)
    if timing is not None:
        print(timing.render(), file=sys.stderr)
    return 0


__all__ = ["RunError", "run_file"]
