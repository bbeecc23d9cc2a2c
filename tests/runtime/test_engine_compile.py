"""The engine abstraction carries the build's kind of task: LLVM IR text in, object bytes out.

The distributed build (runtime.build(mod, engine=...)) compiles kernel batches
this way; here one batch compiles on a local worker process (forkserver, so
LLVM starts clean there) and its object links here.
"""

from __future__ import annotations

from irkernel import transform
from irkernel.tir import script as T
from runtime.jit import Engine, compile_ir
from runtime.lower import lower
from runtime.target import host


@T.prim_func
def triple(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32")):
    for i in T.serial(16):
        b[i] = a[i] * 3.0


def test_object_bytes_compiled_on_a_worker_process_link_here():
    ir_text = lower(triple, "triple_on_worker", host())
    with transform.open_engine("local", max_workers=1) as eng:
        [compiled] = eng.run(compile_ir, [(ir_text,)])
    assert compiled.obj == compile_ir(ir_text).obj  # same target, same bytes
    engine = Engine()
    engine.add_objects([compiled.obj])
    assert engine.address("triple_on_worker") != 0
