"""What FuseTIR computes once per callee and run, not once per group.

Why: a 1e5-node generated graph gives ~11.7k distinct Primitive functions
(FuseOps already shares identical groups), but they call the same few hundred
legalized callees on the same few parameter buffers. Analysing a callee,
checking its signature, building a ``Buffer`` (every field validated) and
rewriting a member whose inputs are all buffers are therefore done once and
reused across groups (``passes.fuse_tir``). Imports irkernel.tir only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import Let, PrimExpr, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import post_order
from irkernel.tir.stmt import Allocate, For, LetStmt
from irkernel.tir.te import extract_compute
from passes._fuse_epilogue import static_extents


@lru_cache(maxsize=4096)
def interned_buffer(name: str, shape: tuple[int, ...], dtype: str) -> Buffer:
    """Buffers are immutable: the same parameter buffer (``p0`` float32[3]) recurs in
    thousands of groups of a generated graph, and building one validates every field."""
    return Buffer(name, shape, dtype)


@dataclass(frozen=True)
class CalleeInfo:
    """What composing needs of one callee, computed once per callee and pass run."""

    canonical: Any  # extract_compute's ComputeDesc, or None
    loads: dict[str, list[BufferLoad]]  # reads of each buffer
    bound: tuple[Var, ...]  # loop / let vars, in order
    allocated: tuple[Buffer, ...]
    signature: tuple[tuple[str, tuple[int, ...] | None], ...]  # per buffer param


def callee_info(callee: PrimFunc) -> CalleeInfo:
    loads: dict[str, list[BufferLoad]] = {}
    bound: list[Var] = []
    allocated: list[Buffer] = []
    for node in post_order(callee.body):
        if isinstance(node, BufferLoad):
            loads.setdefault(node.buffer.name, []).append(node)
        elif isinstance(node, For):
            bound.append(node.loop_var)
        elif isinstance(node, (LetStmt, Let)):
            bound.append(node.var)
        elif isinstance(node, Allocate):
            allocated.append(node.buffer)
    by_name: dict[str, Buffer] = {}
    for buf in allocated:  # composing renames scratch by name: one name, one buffer
        seen = by_name.setdefault(buf.name, buf)
        if (seen.shape, seen.dtype) != (buf.shape, buf.dtype):
            raise ValueError(f"callee {callee.attrs.get('op_name', '?')!r} allocates two "
                             f"different buffers named {buf.name!r} ({seen.dtype}"
                             f"{static_extents(seen)} and {buf.dtype}{static_extents(buf)}); "
                             f"FuseTIR tells scratch buffers apart by name")
    signature = tuple((p.dtype, static_extents(p)) if isinstance(p, Buffer) else ("", None)
                      for p in callee.params)
    return CalleeInfo(extract_compute(callee), loads, tuple(dict.fromkeys(bound)),
                      tuple(allocated), signature)


@dataclass
class RunCache:
    """Memo shared by every Primitive function of one FuseTIR run.

    A generated graph has thousands of distinct groups but calls the same few
    hundred callees on the same interned parameter buffers (``interned_buffer``), so:
    the analysis of each callee (``infos``, by identity: the module holds the
    callees during the run), the signature checks already passed (``checked``)
    and the rewritten value of a canonical member whose inputs are all buffers
    (``values``: keyed by callee and buffer identities; the buffers are kept
    alive in the value so an id is never reused).
    """

    infos: dict[int, CalleeInfo]
    checked: set[tuple[Any, ...]]
    values: dict[tuple[int, ...], tuple[tuple[Buffer, ...], PrimExpr]]


__all__ = ["CalleeInfo", "RunCache", "callee_info", "interned_buffer"]
