"""Hand-written PrimFuncs shared by the executor and profiler tests, and a call_tir helper.

Imported by name (pytest's rootdir import mode puts this directory on sys.path);
the module name is unique across the test tree on purpose.
"""

from __future__ import annotations

import irkernel as ik
from irkernel.tir import script as T


@T.prim_func(private=True)
def add4(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32"),
         c: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        c[i] = a[i] + b[i]


@T.prim_func(private=True)
def scale4(a: T.Buffer((4,), "float32"), c: T.Buffer((4,), "float32")):
    for i in T.serial(4):
        c[i] = a[i] * 3.0


@T.prim_func(private=True)
def rowsum(a: T.Buffer((2, 4), "float32"), c: T.Buffer((2,), "float32")):
    for i in T.serial(2):
        c[i] = 0.0
        for j in T.serial(4):
            c[i] = c[i] + a[i, j]


def tir_call(bb: ik.GraphBuilder, callee: str, *operands: int, shape=(4,)) -> int:
    """A float32 ``call_tir`` node of ``callee``."""
    return bb.call("call_tir", *operands, callee=callee, dtype="float32", shape=shape)
