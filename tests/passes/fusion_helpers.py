"""Hand-written call_tir graphs for the FuseOps/FuseTIR tests (independent of LegalizeOps).

Kernels are canonical-form PrimFuncs written with ``T.prim_func`` over float32[4, 8]
(and [4] for reductions), with the ``op_pattern``/``op_name`` attributes LegalizeOps
sets. ``Graph`` appends call_tir nodes by kernel name, so a test reads like the
graph it builds. Imported by name (unique module name in the test tree).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import irkernel as ik
from irkernel import ops
from irkernel.tir import script as T

M, N = 4, 8
F32 = "float32"


def _attrs(name: str, pattern: int) -> None:
    T.func_attr({"op_name": name, "op_pattern": pattern})


@T.prim_func(private=True)
def k_exp(x: T.Buffer((M, N), F32), out: T.Buffer((M, N), F32)):
    _attrs("exp", ops.ELEMWISE)
    for i0, i1 in T.grid(M, N):
        out[i0, i1] = T.exp(x[i0, i1])


@T.prim_func(private=True)
def k_neg(x: T.Buffer((M, N), F32), out: T.Buffer((M, N), F32)):
    _attrs("negative", ops.ELEMWISE)
    for i0, i1 in T.grid(M, N):
        out[i0, i1] = -x[i0, i1]


@T.prim_func(private=True)
def k_add(x: T.Buffer((M, N), F32), y: T.Buffer((M, N), F32), out: T.Buffer((M, N), F32)):
    _attrs("add", ops.BROADCAST)
    for i0, i1 in T.grid(M, N):
        out[i0, i1] = x[i0, i1] + y[i0, i1]


@T.prim_func(private=True)
def k_bias(x: T.Buffer((M, N), F32), b: T.Buffer((N,), F32), out: T.Buffer((M, N), F32)):
    _attrs("add", ops.BROADCAST)
    for i0, i1 in T.grid(M, N):
        out[i0, i1] = x[i0, i1] + b[i1]


@T.prim_func(private=True)
def k_flip(x: T.Buffer((M, N), F32), out: T.Buffer((M, N), F32)):
    _attrs("flip", ops.INJECTIVE)
    for i0, i1 in T.grid(M, N):
        out[i0, i1] = x[M - 1 - i0, N - 1 - i1]


@T.prim_func(private=True)
def k_rowsum(x: T.Buffer((M, N), F32), out: T.Buffer((M,), F32)):
    _attrs("sum", ops.REDUCE)
    for i0 in T.serial(M):
        out[i0] = T.float32(0.0)
        for k0 in T.serial(N):
            out[i0] = out[i0] + x[i0, k0]


@T.prim_func(private=True)
def k_rowexp(x: T.Buffer((M,), F32), out: T.Buffer((M,), F32)):
    _attrs("exp", ops.ELEMWISE)
    for i0 in T.serial(M):
        out[i0] = T.exp(x[i0])


@T.prim_func(private=True)
def k_rowsub(x: T.Buffer((M, N), F32), r: T.Buffer((M,), F32), out: T.Buffer((M, N), F32)):
    _attrs("subtract", ops.BROADCAST)
    for i0, i1 in T.grid(M, N):
        out[i0, i1] = x[i0, i1] - r[i0]


@T.prim_func(private=True)
def k_matmul(a: T.Buffer((M, N), F32), b: T.Buffer((N, N), F32), out: T.Buffer((M, N), F32)):
    """A scheduled (non-canonical) matmul: k outermost, so FuseTIR cannot read it as a nest."""
    _attrs("matmul", ops.OUT_EWISE_FUSABLE)
    for i0, i1 in T.grid(M, N):
        out[i0, i1] = T.float32(0.0)
    for k in T.serial(N):
        for i0, i1 in T.grid(M, N):
            out[i0, i1] = out[i0, i1] + a[i0, k] * b[k, i1]


@T.prim_func(private=True)
def k_matmul_acc(a: T.Buffer((M, N), F32), b: T.Buffer((N, N), F32),
                 out: T.Buffer((M, N), F32)):
    """A scheduled matmul accumulating a row in scratch and storing it once (never reading
    ``out``), like the register-tiled template: epilogues can go into its stores."""
    _attrs("matmul", ops.OUT_EWISE_FUSABLE)
    for i0 in T.serial(M):
        acc = T.alloc_buffer((N,), F32)
        for j in T.serial(N):
            acc[j] = T.float32(0.0)
        for k in T.serial(N):
            for j in T.serial(N):
                acc[j] = acc[j] + a[i0, k] * b[k, j]
        for j in T.serial(N):
            out[i0, j] = acc[j]


@T.prim_func(private=True)
def k_opaque(x: T.Buffer((M, N), F32), out: T.Buffer((M, N), F32)):
    """No op_pattern attribute: FuseOps must treat it as OPAQUE."""
    for i0, i1 in T.grid(M, N):
        out[i0, i1] = x[i0, i1] * 2.0


KERNELS = {name[2:]: f for name, f in globals().items()
           if name.startswith("k_") and isinstance(f, ik.tir.PrimFunc)}
_RESULT = {"rowsum": (M,), "rowexp": (M,)}


class Graph:
    """A GraphBuilder whose ``call(kernel, *operands)`` adds a call_tir to a kernel above."""

    def __init__(self, name: str = "main", **attrs: Any) -> None:
        self.bb = ik.GraphBuilder(name, attrs=attrs)
        self.used: set[str] = set()

    def param(self, name: str, shape: tuple[int, ...] = (M, N)) -> int:
        return self.bb.param(name, shape, F32)

    def call(self, kernel: str, *operands: int) -> int:
        self.used.add(kernel)
        return self.bb.call("call_tir", *operands, callee=kernel, dtype=F32,
                            shape=_RESULT.get(kernel, (M, N)))

    def module(self, outputs: int | list[int]) -> ik.IRModule:
        return ik.IRModule({"main": self.bb.finish(outputs),
                            **{k: KERNELS[k] for k in sorted(self.used)}})


def inputs_for(mod: ik.IRModule, seed: int = 0, entry: str = "main") -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    func = mod[entry]
    out = []
    for p in func.params.tolist():
        dtype, shape = func.node_type(p)
        out.append((rng.standard_normal(shape) * 2).astype(dtype))
    return out


def primitive_groups(mod: ik.IRModule) -> list[list[str]]:
    """Member op names of each Primitive function, in module order (readable expectations)."""
    out = []
    for f in mod.functions.values():
        if isinstance(f, ik.Function) and f.attrs.get("Primitive", False):
            names = []
            for node in np.nonzero(f.kind == ops.OP_CALL_TIR)[0].tolist():
                callee = mod[f.node_attrs(node)["callee"]]
                names.append(str(callee.attrs.get("op_name", "?")))
            out.append(names)
    return out
