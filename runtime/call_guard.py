"""The short path of a graph call: the input checks and the launches in one native call.

Why: a one-kernel graph's kernel can run in a microsecond or two, and NumPy's ``a @ b``
costs about one in all. Checking two inputs in Python (type, shape, strides, dtype,
alignment: a dozen attribute reads each), reading three data addresses and calling the
launcher through ctypes with three arguments cost 4-5 us before this; a ctypes call of
one pointer argument costs ~0.25 us, so the checks move into native code too.

A *guard* is compiled once per process (LLVM IR, like the launcher and the thread
pool). Python writes two addresses into a per-binding *guard context*, ``id`` of the
inputs tuple and of the outputs (fresh ones in a list only the caller holds, or the
``out`` arrays as a tuple: immutable while the guard reads them), and calls it once. It
reads the items of the tuple or list (CPython's ``PyTupleObject`` / ``PyListObject``) and
NumPy's ``PyArrayObject`` fields (``numpy/ndarraytypes.h``: part of NumPy's ABI) and, per
array, checks against a *spec* fixed at build time:

* exact type ``numpy.ndarray``, the expected dtype object (``descr``, by identity), rank
  and extents;
* inputs: C-order strides (exactly those ``np.empty`` gives) and alignment;
* outputs: C-contiguous and writeable flags, alignment (unless empty), no byte overlap
  with an earlier object (C-contiguous arrays overlap exactly when their ranges do);

and writes each object's data address into the binding's dynamic values (0 for an empty
output), then runs the launches ``[begin, end)`` with the launcher. It returns 0, or 1
when any check fails, before any launch: the caller then takes the general path, which
checks again and names what is wrong (or copies a strided or misaligned input), so
errors and conversions are exactly the general path's.

The field offsets are checked when this module loads against what NumPy and Python
report for arrays of several kinds and a tuple and a list of them (:func:`layout`); on a NumPy or Python build of another layout
there is no guard and every call takes the general path. The guard reads the objects
with the GIL released (as the ctypes launch always did); the caller holds references to
them for the whole call.
"""

from __future__ import annotations

import ctypes
import functools
import threading

import numpy as np

from runtime.jit import load_host_ir
from runtime.launcher import FIRST_SLICE, launcher_address

SYMBOL = "irkernel_guarded_call"
#: NumPy's flag bits (``NPY_ARRAY_C_CONTIGUOUS``, ``NPY_ARRAY_WRITEABLE``).
C_CONTIGUOUS, WRITEABLE = 0x0001, 0x0400
#: The guard context's fixed fields (int64), then the object addresses, then scratch.
CONTEXT_FIELDS = ("launch_context", "begin", "end", "launcher", "spec", "n_objects",
                  "ndarray_type", "n_inputs", "inputs", "outputs", "tuple_type")
#: Where the caller writes ``id`` of the inputs (a tuple) and of the outputs (a tuple, or
#: a list only the caller holds): two stores per call, whatever the count of arrays.
INPUTS, OUTPUTS = CONTEXT_FIELDS.index("inputs"), CONTEXT_FIELDS.index("outputs")
#: A spec record's header (int64), then the extents, then the strides (rank each).
SPEC_FIELDS = ("value_index", "descr", "align", "flag_mask", "nbytes", "is_output", "ndim",
               "check_strides")

_LOAD = ctypes.c_int64.from_address
_LOAD32 = ctypes.c_int32.from_address


def _offsets() -> dict[str, int]:
    """Byte offsets in ``PyArrayObject_fields``: the object header, then ``data``, ``nd``
    (an int), ``dimensions``, ``strides``, ``base``, ``descr``, ``flags`` (an int)."""
    data = object.__basicsize__
    return {"type": data - 8, "data": data, "nd": data + 8, "dims": data + 16,
            "strides": data + 24, "descr": data + 40, "flags": data + 48,
            # PyTupleObject's items inline, PyListObject's through a pointer (CPython)
            "tuple_items": tuple.__basicsize__, "list_items": data + 8}


def _agrees(arr: np.ndarray, off: dict[str, int]) -> bool:
    base = id(arr)
    nd = _LOAD32(base + off["nd"]).value
    if (_LOAD(base + off["type"]).value != id(type(arr)) or nd != arr.ndim
            or _LOAD(base + off["descr"]).value != id(arr.dtype)
            or (arr.size and _LOAD(base + off["data"]).value != arr.ctypes.data)):
        return False
    flags = _LOAD32(base + off["flags"]).value
    if bool(flags & C_CONTIGUOUS) != arr.flags.c_contiguous \
            or bool(flags & WRITEABLE) != arr.flags.writeable:
        return False
    dims, strides = _LOAD(base + off["dims"]).value, _LOAD(base + off["strides"]).value
    return all(_LOAD(dims + 8 * d).value == arr.shape[d]
               and _LOAD(strides + 8 * d).value == arr.strides[d] for d in range(nd))


@functools.cache
def layout() -> dict[str, int] | None:
    """The field offsets, or None when this NumPy's arrays do not agree with them."""
    off = _offsets()
    base = np.arange(96, dtype=np.float32).reshape(8, 12)
    frozen = np.zeros(5, np.int16)
    frozen.setflags(write=False)
    probes = (base, base[3:, 1:], base.T, base[::2, ::3], frozen, np.empty(0, np.int64),
              np.zeros((), np.float64), np.ones((2, 1, 3), np.uint8))
    items = [id(a) for a in probes]
    as_list = list(probes)
    list_items = _LOAD(id(as_list) + off["list_items"]).value
    if tuple.__itemsize__ != 8 or items != [
            _LOAD(id(probes) + off["tuple_items"] + 8 * k).value for k in range(len(probes))] \
            or items != [_LOAD(list_items + 8 * k).value for k in range(len(probes))]:
        return None
    return off if all(_agrees(a, off) for a in probes) else None


def _ir(off: dict[str, int]) -> str:
    """The guard (see the module doc); loop counters in allocas (a few ns per call)."""
    def field(name: str, ptr: str, k: str) -> str:
        return (f"  %{name}.at = getelementptr inbounds i64, ptr {ptr}, i64 {k}\n"
                f"  %{name} = load i64, ptr %{name}.at")

    def obj_field(name: str, kind: str) -> str:
        return (f"  %{name}.at = getelementptr inbounds i8, ptr %o, i64 {off[kind]}\n"
                f"  %{name} = load i64, ptr %{name}.at")

    spec = "\n".join(field(f"s{j}", "%sp", str(j)) for j in range(len(SPEC_FIELDS)))
    return f"""
define i32 @{SYMBOL}(ptr %g) nounwind {{
entry:
  %k.p = alloca i64
  %p.p = alloca i64
  %d.p = alloca i64
  %j.p = alloca i64
  store i64 0, ptr %k.p
  store i64 0, ptr %p.p
{field("ctx.int", "%g", "0")}
  %ctx = inttoptr i64 %ctx.int to ptr
{field("values.int", "%ctx", "4")}
  %values = inttoptr i64 %values.int to ptr
{field("spec.int", "%g", "4")}
  %spec = inttoptr i64 %spec.int to ptr
{field("n", "%g", "5")}
{field("ndtype", "%g", "6")}
{field("n.in", "%g", "7")}
{field("inputs.int", "%g", str(INPUTS))}
  %inputs = inttoptr i64 %inputs.int to ptr
  %in.items = getelementptr inbounds i8, ptr %inputs, i64 {off["tuple_items"]}
{field("outputs.int", "%g", str(OUTPUTS))}
  %outputs = inttoptr i64 %outputs.int to ptr
{field("ttype", "%g", "10")}
  %out.type.at = getelementptr inbounds i8, ptr %outputs, i64 {off["type"]}
  %out.type = load i64, ptr %out.type.at
  %out.is.tuple = icmp eq i64 %out.type, %ttype
  %ranges = getelementptr inbounds i64, ptr %g, i64 {len(CONTEXT_FIELDS)}
  br label %obj.test
obj.test:
  %k = load i64, ptr %k.p
  %more = icmp slt i64 %k, %n
  br i1 %more, label %obj, label %launch
obj:
  %p = load i64, ptr %p.p
  %sp = getelementptr inbounds i64, ptr %spec, i64 %p
{spec}
  %is.in = icmp slt i64 %k, %n.in
  br i1 %is.in, label %obj.in, label %obj.out
obj.in:
{field("o.in", "%in.items", "%k")}
  br label %obj.got
obj.out:
  %ko = sub nsw i64 %k, %n.in
  br i1 %out.is.tuple, label %obj.tuple, label %obj.list
obj.tuple:
  %out.titems = getelementptr inbounds i8, ptr %outputs, i64 {off["tuple_items"]}
{field("o.tuple", "%out.titems", "%ko")}
  br label %obj.got
obj.list:
  %out.litems.at = getelementptr inbounds i8, ptr %outputs, i64 {off["list_items"]}
  %out.litems = load ptr, ptr %out.litems.at
{field("o.list", "%out.litems", "%ko")}
  br label %obj.got
obj.got:
  %o.int = phi i64 [ %o.in, %obj.in ], [ %o.tuple, %obj.tuple ], [ %o.list, %obj.list ]
  %o = inttoptr i64 %o.int to ptr
{obj_field("type", "type")}
{obj_field("descr", "descr")}
  %nd.at = getelementptr inbounds i8, ptr %o, i64 {off["nd"]}
  %nd32 = load i32, ptr %nd.at
  %nd = sext i32 %nd32 to i64
  %flags.at = getelementptr inbounds i8, ptr %o, i64 {off["flags"]}
  %flags32 = load i32, ptr %flags.at
  %flags = zext i32 %flags32 to i64
  %flags.have = and i64 %flags, %s3
  %c.type = icmp eq i64 %type, %ndtype
  %c.descr = icmp eq i64 %descr, %s1
  %c.nd = icmp eq i64 %nd, %s6
  %c.flags = icmp eq i64 %flags.have, %s3
  %c1 = and i1 %c.type, %c.descr
  %c2 = and i1 %c.nd, %c.flags
  %c.head = and i1 %c1, %c2
  br i1 %c.head, label %dims.init, label %fail
dims.init:
{obj_field("dims.int", "dims")}
  %dims = inttoptr i64 %dims.int to ptr
{obj_field("strides.int", "strides")}
  %strides = inttoptr i64 %strides.int to ptr
  %no.strides = icmp eq i64 %s7, 0
  %sdims = getelementptr inbounds i64, ptr %sp, i64 {len(SPEC_FIELDS)}
  %sstrides = getelementptr inbounds i64, ptr %sdims, i64 %s6
  store i64 0, ptr %d.p
  br label %dims.test
dims.test:
  %d = load i64, ptr %d.p
  %d.more = icmp slt i64 %d, %s6
  br i1 %d.more, label %dims.body, label %dims.done
dims.body:
{field("dim", "%dims", "%d")}
{field("dim.want", "%sdims", "%d")}
  %c.dim = icmp eq i64 %dim, %dim.want
  %skip.stride = select i1 %no.strides, i64 0, i64 %d
{field("stride", "%strides", "%skip.stride")}
{field("stride.want", "%sstrides", "%skip.stride")}
  %c.stride.eq = icmp eq i64 %stride, %stride.want
  %c.stride = or i1 %no.strides, %c.stride.eq
  %c.d = and i1 %c.dim, %c.stride
  %d1 = add nsw i64 %d, 1
  store i64 %d1, ptr %d.p
  br i1 %c.d, label %dims.test, label %fail
dims.done:
{obj_field("data", "data")}
  %is.out = icmp ne i64 %s5, 0
  %is.empty = icmp eq i64 %s4, 0
  %empty.out = and i1 %is.out, %is.empty
  %rem = urem i64 %data, %s2
  %aligned = icmp eq i64 %rem, 0
  %c.align = or i1 %empty.out, %aligned
  br i1 %c.align, label %overlap.init, label %fail
overlap.init:
  store i64 0, ptr %j.p
  %is.full = icmp ne i64 %s4, 0
  %check = and i1 %is.out, %is.full
  %data.end = add i64 %data, %s4
  br i1 %check, label %overlap.test, label %record
overlap.test:
  %j = load i64, ptr %j.p
  %j.more = icmp slt i64 %j, %k
  br i1 %j.more, label %overlap.body, label %record
overlap.body:
  %j2 = shl i64 %j, 1
  %j2b = or i64 %j2, 1
{field("lo", "%ranges", "%j2")}
{field("nb", "%ranges", "%j2b")}
  %hi = add i64 %lo, %nb
  %below = icmp ult i64 %data, %hi
  %above = icmp ult i64 %lo, %data.end
  %full = icmp ne i64 %nb, 0
  %both = and i1 %below, %above
  %hit = and i1 %both, %full
  %j1 = add nsw i64 %j, 1
  store i64 %j1, ptr %j.p
  br i1 %hit, label %fail, label %overlap.test
record:
  %k2 = shl i64 %k, 1
  %k2b = or i64 %k2, 1
  %r.lo = getelementptr inbounds i64, ptr %ranges, i64 %k2
  store i64 %data, ptr %r.lo
  %r.nb = getelementptr inbounds i64, ptr %ranges, i64 %k2b
  store i64 %s4, ptr %r.nb
  %value = select i1 %empty.out, i64 0, i64 %data
  %v.at = getelementptr inbounds i64, ptr %values, i64 %s0
  store i64 %value, ptr %v.at
  %k1 = add nsw i64 %k, 1
  store i64 %k1, ptr %k.p
  %nd2 = shl i64 %s6, 1
  %p.step = add nsw i64 %nd2, {len(SPEC_FIELDS)}
  %p1 = add nsw i64 %p, %p.step
  store i64 %p1, ptr %p.p
  br label %obj.test
launch:
{field("fn.int", "%g", "3")}
  %fn = inttoptr i64 %fn.int to ptr
{field("begin", "%g", "1")}
{field("end", "%g", "2")}
  call void %fn(ptr %ctx, i64 %begin, i64 %end)
  ret i32 0
fail:
  ret i32 1
}}
"""


_GUARD_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
_LOCK = threading.Lock()


@functools.cache
def _guard() -> tuple[object, ctypes._CFuncPtr] | None:
    off = layout()
    if off is None:
        return None
    with _LOCK:
        engine = load_host_ir(_ir(off))
        return engine, _GUARD_TYPE(engine.address(SYMBOL))


class Guard:
    """The guarded call of one graph function: its spec (shared by the calls) and how to
    make a binding's guard context. ``run(address) -> 0 | 1`` is the native guard.

    ``objects``: per input then per output, (dtype, shape, alignment, dynamic value
    index); the inputs are dynamic values ``0..n_inputs-1``.
    """

    __slots__ = ("_engine", "begin", "end", "n_inputs", "n_objects", "run", "sliced", "spec")

    def __init__(self, inputs: list[tuple[np.dtype, tuple[int, ...], int, int]],
                 outputs: list[tuple[np.dtype, tuple[int, ...], int, int]],
                 begin: int, end: int) -> None:
        self._engine, self.run = _guard()  # type: ignore[misc]
        self.begin, self.end = begin, end
        #: A long table runs in slices (``runtime/launcher.py``: Ctrl-C stops it), by the
        #: caller after the guard, which then only checks and binds.
        self.sliced = end - begin > FIRST_SLICE
        self.n_inputs, self.n_objects = len(inputs), len(inputs) + len(outputs)
        rows: list[int] = []
        for is_output, group in ((0, inputs), (1, outputs)):
            for dtype, shape, align, index in group:
                strides = np.empty(shape, dtype).strides  # C order (no memory for empty dims)
                nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                mask = C_CONTIGUOUS | WRITEABLE if is_output else 0
                rows += [index, id(dtype), max(int(align), 1), mask, nbytes, is_output,
                         len(shape), 1 - is_output, *shape, *strides]
        self.spec = np.array(rows or [0], np.int64)

    @property
    def context_nbytes(self) -> int:
        """Bytes of one binding's guard context."""
        return 8 * (len(CONTEXT_FIELDS) + 2 * self.n_objects)

    def context(self, launch_context: int, wide: bool) -> np.ndarray:
        """A binding's guard context (:data:`CONTEXT_FIELDS`, the objects, scratch);
        ``wide``: the table's ``starts`` are int64 (the launcher's other variant)."""
        end = self.begin if self.sliced else self.end
        return np.array([launch_context, self.begin, end, launcher_address(wide),
                         self.spec.ctypes.data, self.n_objects, id(np.ndarray), self.n_inputs,
                         0, 0, id(tuple)] + [0] * (2 * self.n_objects), np.int64)


def available() -> bool:
    """Whether guarded calls exist in this process (NumPy's layout agrees)."""
    return _guard() is not None


__all__ = ["INPUTS", "OUTPUTS", "Guard", "available", "layout"]
