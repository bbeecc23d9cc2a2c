"""``irkernel run FILE --inputs a.npy ... | --random``: read, ``runtime.build``, run, summarize.

FILE is an ``.ir`` file or an ``.onnx`` model (imported by the frontend); ``--random``
runs on random inputs of the parameters' types, ``--repeat N`` reports the median time
per run of N runs. ``--profile`` then runs N more times with every kernel timed and
prints a table per kernel (``runtime/profile.py``); ``--profile-json FILE`` also writes
those runs as a Chrome trace.

Imported lazily by ``irkernel/cli/main.py`` (runtime and numpy load only when
the subcommand runs). Inputs are checked before anything is built or
allocated (``irkernel.cli.npy``: regular file, magic, header against the file
size, dtype and shape against the parameter). User errors (missing or
unreadable files, a bad ``.npy``, a wrong input count, an unknown entry, IR
that does not verify) raise :class:`RunError`, which ``main`` prints as one
line ``irkernel run: error: ...`` naming the file, with exit code 1; options it
can not use (``--repeat 0``, ``--inputs`` with ``--random``) exit 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from irkernel.cli.errors import CLIError, UsageError
from irkernel.ir.function import Function
from irkernel.ir.module import IRModule


class RunError(CLIError):
    """A user error of ``irkernel run`` (printed without a traceback, exit code 1)."""


def _load_inputs(source: str, func: Function, entry: str, paths: Sequence[str]) -> list[Any]:
    """One checked array per parameter of ``func`` (``irkernel.cli.npy``)."""
    from irkernel.cli.npy import InputError, read_npy
    from irkernel.ir.ids import NUMPY_DTYPES

    if len(paths) != len(func.params):
        raise RunError(f"{source}: {entry} takes {len(func.params)} inputs "
                       f"({', '.join(func.param_names)}), got {len(paths)}")
    arrays = []
    for pos, (path, node) in enumerate(zip(paths, func.params.tolist(), strict=True)):
        want = (NUMPY_DTYPES[int(func.dtype[node])], func.shapes[int(func.shape_id[node])])
        try:
            arrays.append(read_npy(path, want))
        except InputError as exc:
            raise RunError(f"cannot read input {path!r} (parameter {pos}, "
                           f"{func.param_names[pos]!r}): {exc}") from None
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
    """The ``run`` subcommand; returns 0, or raises a CLIError/IRError (``main`` prints it)."""
    import numpy as np

    import runtime
    from irkernel import instrument, transform
    from irkernel.ir.errors import IRError

    repeat = getattr(args, "repeat", 1)
    if repeat < 1:
        raise UsageError(f"--repeat must be >= 1, got {repeat}")
    if getattr(args, "random", False) and args.inputs:
        raise UsageError("give --inputs or --random, not both")
    mod = read_module(args.file)
    func = mod.functions.get(args.entry)
    if not isinstance(func, Function):
        graphs = [n for n, f in mod.functions.items() if isinstance(f, Function)]
        raise RunError(f"{args.file}: no graph function {args.entry!r} to run "
                       f"(graph functions: {', '.join(graphs) or 'none'})")
    if getattr(args, "random", False):
        from irkernel.testing import random_inputs

        inputs = random_inputs(mod[args.entry], seed=0, special_values=False)
    else:
        inputs = _load_inputs(args.file, func, args.entry, args.inputs or [])
    timing = instrument.PassTimingInstrument() if args.time_passes else None
    start = time.perf_counter()
    try:
        with transform.PassContext(instruments=[timing] if timing is not None else None):
            ex = runtime.build(mod, opt_level=args.opt_level)
    except IRError as exc:
        raise RunError(f"{args.file}: {exc}") from exc
    built = time.perf_counter()
    if args.entry not in set(ex):
        raise RunError(f"{args.file}: function {args.entry!r} is private (no global_symbol) "
                       "and no public function calls it, so the build removed it; give it "
                       f"attrs {{global_symbol = \"{args.entry}\"}}")
    graph = ex[args.entry]
    results = graph(*inputs)
    times = [time.perf_counter() - built]
    for _ in range(repeat - 1):  # --repeat N: the median of N runs
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
    profile_json = getattr(args, "profile_json", None)
    if getattr(args, "profile", False) or profile_json:
        profile = ex.profile(*inputs, repeat=repeat, function=args.entry)
        print(profile.render(), file=out)
        if profile_json:
            try:
                profile.to_chrome_trace(profile_json)
            except OSError as exc:
                raise RunError(f"cannot write the profile to {profile_json!r}: "
                               f"{exc.strerror or exc}") from None
            print(f"  wrote the kernel profile to {profile_json} (Chrome trace)", file=out)
    return 0


__all__ = ["RunError", "run_file"]
