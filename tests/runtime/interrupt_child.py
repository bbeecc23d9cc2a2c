"""A child process for tests/runtime/test_interrupt.py and bench/bench_interrupt.py.

``python interrupt_child.py build N`` generates a random graph of N nodes, prints
``ready``, builds it; ``python interrupt_child.py run N`` builds a chain of N adds
on a large tensor at opt_level 0 (one launch per add), prints ``ready`` and runs it
in a loop. Every pass prints ``phase <name>`` as it starts, so the parent knows
which phase a signal landed in. Run with ``IRKERNEL_CACHE_DIR`` set to a test folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import irkernel as ik
import runtime
from irkernel import transform
from irkernel.instrument import PassInstrument
from irkernel.testing import GraphSpec, random_function

#: Elements of the tensor the run chain adds (16 MiB of float32: a launch takes ms).
RUN_ELEMENTS = 1 << 22


class ShowPhase(PassInstrument):
    """Prints ``phase <outer>/<inner>`` as each pass starts (the two outermost levels)."""

    def __init__(self) -> None:
        self.stack: list[str] = []

    def run_before_pass(self, mod: ik.IRModule, info: transform.PassInfo) -> None:
        self.stack.append(info.name)
        print(f"phase {'/'.join(self.stack[:2])}", flush=True)

    def run_after_pass(self, mod: ik.IRModule, info: transform.PassInfo) -> None:
        self.stack.pop()


def chain(n: int) -> ik.IRModule:
    bb = ik.GraphBuilder("main")
    x = bb.param("x", (RUN_ELEMENTS,), "float32")
    y = x
    for _ in range(n):
        y = bb.call("add", y, x)
    return ik.IRModule({"main": bb.finish([y])})


def main(mode: str, n: int) -> None:
    if mode == "build":
        mod = ik.IRModule({"main": random_function(GraphSpec(n_nodes=n))})
        print("ready", flush=True)
        with transform.PassContext(instruments=[ShowPhase()]):
            runtime.build(mod)
        print("built", flush=True)
        return
    ex = runtime.build(chain(n), opt_level=0)
    x = np.ones(RUN_ELEMENTS, np.float32)
    print("ready", flush=True)
    while True:
        ex["main"](x)
        print("phase run", flush=True)


@dataclass(frozen=True)
class Interrupted:
    """What became of a child sent SIGINT: the phase it was in, the seconds from the
    signal to its exit, its exit code and its stderr."""

    phase: str
    latency: float
    returncode: int
    stderr: str

    @property
    def by_keyboard_interrupt(self) -> bool:
        """Ended by the uncaught KeyboardInterrupt (CPython then dies by SIGINT)."""
        return (self.returncode == -signal.SIGINT
                and self.stderr.rstrip().endswith("KeyboardInterrupt"))


def interrupt(mode: str, n: int, delay: float | None, cache_dir: str | Path,
              timeout: float = 120.0) -> Interrupted:
    """Start a child (``mode``, ``n``), send SIGINT ``delay`` seconds after it is ready
    (None: no signal; ``latency`` is then the time from ready to exit)."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, IRKERNEL_CACHE_DIR=str(cache_dir), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, __file__, mode, str(n)], cwd=root, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        phase = "start"
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "ready":
                break
        if delay is not None:
            time.sleep(delay)
        sent = time.perf_counter()
        if delay is not None:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
        latency = time.perf_counter() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    phases = [line[6:] for line in out.splitlines() if line.startswith("phase ")]
    if phases:
        phase = phases[-1]
    if "built" in out.split():
        phase = "done"
    return Interrupted(phase, latency, proc.returncode, err)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
