"""Does LLVM compile independent kernel batches faster on several threads?

Usage::

    PYTHONPATH=. .venv/bin/python bench/bench_llvm_threads.py                 # shapes 1e5
    PYTHONPATH=. .venv/bin/python bench/bench_llvm_threads.py --size 3e5 --batches 4

The question behind option (a) of issue 27: ``runtime.build`` compiles its batches on one
LLVM thread (``runtime/jit.py`` serializes LLVM with a lock, since every module is parsed
into llvmlite's global context). Batches are independent LLVM modules; parsed into a
private context each, with a private TargetMachine, they could compile on a pool of
threads (llvmlite's ctypes calls release the GIL). This script takes the full-tier
kernels of the ``shapes`` family (``graph_families.py``) *without* the sharing pass (so
there are many), lowers them into ``--batches`` LLVM modules, and times, in alternating
rounds in one process: ``runtime.jit.compile_ir`` serially (today), private contexts
serially, and private contexts on one thread per batch. It prints wall and process CPU
seconds (CPU / wall above 1: the threads ran at once) and whether every variant emitted
byte-identical objects. Figures are only meaningful on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

import llvmlite.binding as llvm  # noqa: E402

import passes  # noqa: E402,F401  (registers the passes)
from graph_families import FAMILIES  # noqa: E402
from irkernel import transform  # noqa: E402
from runtime.build import graph_pipeline  # noqa: E402
from runtime.compile import lower_tir, tier_of  # noqa: E402
from runtime.jit import compile_ir  # noqa: E402
from runtime.lower import lower_batch  # noqa: E402
from runtime.target import PIPELINE, host  # noqa: E402


def batch_texts(size: int, batches: int, kernels: int) -> list[str]:
    """LLVM IR of ``kernels`` full-tier kernels of the shapes family, in ``batches``."""
    mod = FAMILIES["shapes"](size, 0)
    with transform.PassContext(disabled_pass=["ShareElementwiseKernels"]):
        low = graph_pipeline()(mod)
        items = [(lower_tir(name, f), f"k{i}") for i, (name, f) in enumerate(low.functions.items())
                 if transform.is_prim_func(f) and tier_of(f, 4096) == "full"][:kernels]
    if len(items) < batches:
        raise SystemExit(f"the shapes family of {size} nodes has {len(items)} full-tier "
                         f"kernels, fewer than {batches} batches (its lanes above 4096 "
                         "elements specialize: use --size 1e5 or more)")
    return [lower_batch(items[b::batches], host(), f"b{b}", False) for b in range(batches)]


def compile_private(text: str) -> bytes:
    """The full tier of ``runtime.jit`` on a private context and TargetMachine."""
    module = llvm.parse_assembly(text, context=llvm.create_context())
    machine = host().new_machine()
    pto = llvm.create_pipeline_tuning_options(speed_level=PIPELINE["speed_level"])
    for key in ("loop_vectorization", "slp_vectorization", "loop_interleaving",
                "loop_unrolling"):
        setattr(pto, key, PIPELINE[key])
    builder = llvm.create_pass_builder(machine, pto)
    builder.getModulePassManager().run(module, builder)
    return bytes(machine.emit_object(module))


def threaded(texts: list[str]) -> list[bytes]:
    out: list[bytes] = [b""] * len(texts)

    def work(k: int) -> None:
        out[k] = compile_private(texts[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="1e5", help="nodes of the shapes graph")
    p.add_argument("--batches", type=int, default=2, help="LLVM modules (and threads)")
    p.add_argument("--kernels", type=int, default=128, help="kernels in all")
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args(argv)
    texts = batch_texts(int(float(args.size)), args.batches, args.kernels)
    variants: dict[str, Callable[[list[str]], list[bytes]]] = {
        "serial (compile_ir)": lambda ts: [compile_ir(t).obj for t in ts],
        "serial, private contexts": lambda ts: [compile_private(t) for t in ts],
        "threads, private contexts": threaded,
    }
    wall: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    objects: dict[str, list[bytes]] = {}
    for r in range(args.rounds):
        for name in (list(variants) if r % 2 == 0 else list(reversed(variants))):
            c, w = time.process_time(), time.perf_counter()
            objects[name] = variants[name](texts)
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
    print(f"{args.kernels} kernels in {args.batches} batches, medians of {args.rounds} rounds")
    for name in variants:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(f"  {name:26s} wall {w:6.2f} s  cpu {c:6.2f} s  cpu/wall {c / w:4.2f}")
    same = len({tuple(o) for o in objects.values()}) == 1
    print(f"  objects byte-identical across variants: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
