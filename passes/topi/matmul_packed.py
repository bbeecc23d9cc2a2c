"""The matmul's constant B, packed at build time into the panels its tile reads.

Why: the panel schedule (``matmul.py``) copies each ``K x NR`` column panel of B into
scratch before its row blocks read it, on every call. With many rows that copy is
amortized; with few (a transformer's 16-row linear layers, convnext's stage 3 and 4 at
64x64, a batch-1 classifier) it is a read and a write of all of B per call, as much
traffic as the matmul. And reading B unpacked with fewer rows than a tile (the
streamed-rows schedule) walks B's rows ``N`` floats apart. When B is a constant, which it
is for every linear layer, ``PackConstantWeights`` (``passes/pack_weights.py``) stores it
once in the tile's order, :func:`pack_b`:

* ``N // NR`` panels of ``K x NR`` (panel ``p``, row ``k``: ``B[k, p*NR : (p+1)*NR]``),
* then the ``N % NR`` tail columns as ``K x tpad``, zero-padded to whole vectors
  (``matmul_tiles.tail_width``),

all in one 1-d constant, and the call reads it through :func:`packed_matmul`: no packing
phase, and each task reads its panel sequentially (the hardware prefetchers' best case).
With up to ``matmul.PACKED_MAX_ROWS`` rows the tile holds every row
(:func:`passes.topi.matmul.packed_tile`), so B is read once per call: FMA-bound when it
fits in cache, bandwidth-bound when not. Results equal the unpacked schedules' bit for bit
where those accumulate in K order (each output element: one chain of exact fmas in K
order, whatever the thread count). Imports numpy, irkernel and passes.topi only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.tir.function import PrimFunc
from passes.topi.matmul import MATMUL_B, packed_matmul
from passes.topi.matmul_tiles import packed_length, packed_tile, tail_width
from passes.topi.packing import Packer, register_packer
from passes.topi.vector import current_target


def _problem(key: tuple[Any, ...]) -> tuple[int, int, int, str]:
    """(rows, K, N, dtype) of a ``packable`` key ``(a_shape, b_shape, dtype, a_t)``."""
    a_shape, b_shape, dtype, a_t = key
    k, n = b_shape
    rows = int(np.prod(a_shape[:-2], dtype=np.int64)) * (a_shape[-1] if a_t else a_shape[-2])
    return rows, k, n, dtype


def pack_b(value: np.ndarray, key: tuple[Any, ...]) -> np.ndarray:
    """B ``(K, N)`` in the order the packed tile reads it (the module docstring)."""
    rows, k, n, dtype = _problem(key)
    if value.shape != (k, n):
        raise ValueError(f"pack_b: B has shape {value.shape}, the matmul reads ({k}, {n})")
    tile = packed_tile(rows, n, k, dtype, current_target())
    if tile is None:
        raise ValueError(f"pack_b: no packed tile for {rows} x {k} x {n}")
    _, nr, lanes = tile
    full, tail = divmod(n, nr)
    tpad = tail_width(tail, lanes)
    out = np.empty(packed_length(n, k, nr, lanes), value.dtype)  # one copy of B, in place
    out[:full * k * nr].reshape(full, k, nr)[...] = \
        value[:, :full * nr].reshape(k, full, nr).transpose(1, 0, 2)
    rest = out[full * k * nr:].reshape(k, tpad)
    rest[:, :tail] = value[:, full * nr:]
    rest[:, tail:] = 0
    return out


def _variant(key: tuple[Any, ...]) -> PrimFunc:
    a_shape, b_shape, dtype, a_t = key
    prim = packed_matmul(tuple(a_shape), tuple(b_shape), dtype, a_t)
    if prim is None:
        raise ValueError(f"packed matmul declined {a_shape} @ {b_shape}")
    return prim


register_packer(MATMUL_B, Packer(pack_b, _variant))

__all__ = ["pack_b"]
