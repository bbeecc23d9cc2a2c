"""float32/float64 literals: the printer's kernel against NumPy's formatting, and what it buys.

Run with::

    PYTHONPATH=. .venv/bin/python bench/bench_float_text.py [nodes]   # prints the table

Two figures, each side timed in blocks of its own (``benchutil.fair``, medians):
per element, ``float_text.float_table`` (the kernel, NumPy for what it leaves
undone) against the NumPy path it replaces (``astype(str)``, the read-back check,
the byte table), on random normals scaled over 10^-5..10^5 and on random bit
patterns, float32 and float64; and printing ``bench_text``'s ``consts`` graph
with the kernel against the same print with every float sent down the NumPy
path. Also reports the share of elements the kernel leaves to NumPy. No targets: the print target is
``bench_text``'s (consts >= 2 M nodes/s).
"""

from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

import numpy as np

from irkernel.ir.ids import FLOAT32, FLOAT64
from irkernel.text import printer
from irkernel.text.float_text import _bits, float_table, float_texts_kernel, positional_form

sys.path.insert(0, str(Path(__file__).parent))
from bench_text import consts_graph
from benchutil import fair

_DTYPES = {FLOAT32: np.float32, FLOAT64: np.float64}


def _inputs(n: int, code: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    normals = rng.standard_normal(n) * 10.0 ** rng.integers(-5, 6, n)
    if code == FLOAT32:
        bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    else:
        bits = rng.integers(0, 2**64, n, dtype=np.uint64)
    return {"normals": normals.astype(_DTYPES[code]), "bit patterns": bits.view(_DTYPES[code])}


def _numpy_path(values: np.ndarray, code: int):
    return printer._ascii_table(printer._wide_strs(values, code))


def _all_numpy(values, code, canonical_nan, fallback):
    return fallback(values)


def main(nodes: int = 200_000, elements: int = 200_000) -> None:
    print(f"float literals, kernel vs NumPy (same run; {elements:,} elements)")
    for code in (FLOAT32, FLOAT64):
        canonical = printer._CANONICAL_NAN_BITS[code]
        start, below = positional_form(code)
        for name, values in _inputs(elements, code).items():
            sizes = float_texts_kernel(_bits(values, code), 23 if code == FLOAT32 else 52,
                                       np.uint64(start), np.uint64(below),
                                       np.uint64(canonical))[1]
            f = fair(lambda v=values, c=code: float_table(
                         v, c, printer._CANONICAL_NAN_BITS[c], lambda u: _numpy_path(u, c)),
                     lambda v=values, c=code: _numpy_path(v, c), repeat=3)
            print(f"  {_DTYPES[code].__name__} {name:<12}: kernel "
                  f"{f.ours_s / elements * 1e9:6.1f} ns/element, NumPy "
                  f"{f.ref_s / elements * 1e9:6.1f} ns/element: {f.ratio:5.1f}x; left to "
                  f"NumPy: {np.mean(sizes == 0):.2e}", flush=True)
    mod = consts_graph(nodes)
    n = sum(func.num_nodes for func in mod.functions.values())
    text = printer.print_module(mod)

    def without_kernel() -> str:
        with mock.patch.object(printer, "float_table", _all_numpy):
            return printer.print_module(mod)

    assert without_kernel() == text
    f = fair(lambda: printer.print_module(mod), without_kernel, repeat=3)
    print(f"print consts {n:,} nodes: {f.ours_s * 1e3:.1f} ms ({n / f.ours_s / 1e6:.2f} M "
          f"nodes/s) vs NumPy floats {f.ref_s * 1e3:.1f} ms ({n / f.ref_s / 1e6:.2f} M "
          f"nodes/s): {f.ratio:.2f}x")


if __name__ == "__main__":
    main(*(int(float(a)) for a in sys.argv[1:]))
