"""Lowering a (flattened) PrimFunc to ``llvmlite.ir``: one ``Lowerer`` per PrimFunc.

Every kernel is exported with one signature, the *packed* calling
convention (see ``runtime/abi.py``)::

    void @<symbol>(ptr %args)          ; args: i64[n], one slot per parameter

Slot ``k`` holds parameter ``k`` of ``params + shape_vars``: a buffer's data
pointer, an int's value, a bool as 0/1, a float as the bits of a float64.
One signature for every kernel is what lets a native launcher run a table of
kernels (``runtime/launcher.py``) and what makes kernels of any arity
callable (ctypes stops at 1,024 arguments; a concat of 5,000 tensors does
not). The entry unpacks the slots and calls the body, an internal function
with the natural signature::

    void @<symbol>__body(ptr noalias align(A) %buf..., <scalar params>..., <shape vars>...)

Buffer parameters are ``noalias`` (the ABI rejects overlapping arguments of
which one is written) and carry their declared alignment; the body is
``noinline`` (inlined, every noalias parameter would become alias-scope
metadata on every access: quadratic in the buffer count). Bool scalars are passed as ``i8``. Several kernels can be lowered
into one module (:func:`lower_batch`), so LLVM's per-module costs are paid
once per batch.

Loops are the canonical header/body/latch shape with an ``nsw`` increment.
A ``parallel`` loop is outlined (as TVM's ``CodeGenCPU::CreateParallelLaunch``
does): its body becomes ``<symbol>__par<k>_impl(begin, end, lo, bufs...,
vars...)`` (noalias buffers again, ``noinline`` so the attributes survive),
reached through a trampoline ``<symbol>__par<k>(begin, end, closure)`` that
unpacks a stack struct of the captured values; the parent calls
``irkernel_parallel_launch(trampoline, closure, extent)``, which the runtime's
thread pool provides (``runtime/threadpool.py``). ``Allocate`` is a 64-byte
aligned ``alloca`` in the entry block when its size is a constant up to
``STACK_LIMIT`` bytes, else ``aligned_alloc``/``free`` around its body.
A loop annotated ``{"nontemporal": True}`` makes its contiguous vector stores
streaming stores (``!nontemporal``; LLVM keeps plain stores where the
alignment is not provable), then fences them (``sfence``) after the loop.
"""

from __future__ import annotations

from llvmlite import ir

from irkernel.tir import dtype as dt
from irkernel.tir.analysis import const_int
from irkernel.tir.buffer import Buffer, BufferLoad
from irkernel.tir.expr import Add, IntImm, Var
from irkernel.tir.function import PrimFunc
from irkernel.tir.functor import free_vars, used_buffers
from irkernel.tir.stmt import (
    Allocate,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)
from passes.tir.flatten_buffer import flatten_buffer
from runtime.abi import ABI_SUFFIX, abi_record, slot_layout
from runtime.codegen_expr import ExprCodegen
from runtime.llvm_types import I8, I32, I64, PTR, memory_type, value_type
from runtime.int_dot import dot_paths, lower_dot4
from runtime.target import Target

#: Constant-size allocations up to this many bytes live on the stack.
STACK_LIMIT = 64 * 1024
#: Alignment of allocations (a cache line; enough for any vector).
ALLOC_ALIGN = 64
LAUNCH_SYMBOL = "irkernel_parallel_launch"
#: Loop annotation: contiguous vector stores inside the loop are non-temporal (streaming,
#: bypassing the cache; for large outputs not read again soon), followed by a fence.
NONTEMPORAL = "nontemporal"


def param_type(param: Buffer | Var) -> ir.Type:
    """The LLVM type a parameter is passed as."""
    if isinstance(param, Buffer):
        return PTR
    return I8 if param.dtype == "bool" else value_type(param.dtype)


def _opaque_alloca(builder: ir.IRBuilder, entry: ir.Block, typ: ir.Type,
                   name: str) -> ir.Value:
    """An ``alloca`` at the start of ``entry`` (hoisted: LLVM promotes entry-block allocas),
    typed as an opaque ``ptr`` (llvmlite types allocas as typed pointers, which its
    store/GEP checks then reject next to opaque pointers). Uses the one builder:
    a second builder on the same block would leave the first one's anchor stale."""
    block = builder.block
    builder.position_at_start(entry)
    slot = builder.alloca(typ, name=name)
    builder.position_at_end(block)
    slot.align = ALLOC_ALIGN
    slot.type = PTR
    return slot


class _FnState:
    """Per-LLVM-function lowering state (saved while outlining a parallel body)."""

    def __init__(self, fn: ir.Function) -> None:
        self.fn = fn
        self.entry = fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(self.entry)
        self.values: dict[str, ir.Value] = {}
        self.buffers: dict[str, tuple[ir.Value, Buffer]] = {}


class Lowerer(ExprCodegen):
    """Builds the LLVM module of one PrimFunc.

    Parameters
    ----------
    func : PrimFunc
        Verified; flattened here if it is not yet.
    symbol : str
        The exported function name.
    target : Target
    fast_math : bool
        Put ``fast`` flags on float operations.
    """

    def __init__(self, func: PrimFunc, symbol: str, target: Target,
                 fast_math: bool = False, module: ir.Module | None = None) -> None:
        self.func = flatten_buffer(func)
        self.abi = abi_record(slot_layout(func.params, func.shape_vars))  # before flattening
        self.symbol = symbol
        self.fast_math = fast_math
        self.mvec = target.mvec
        self.fused = target.fma
        self.scalef = target.has_feature("avx512f") and target.has_feature("avx512vl")
        self.module = module if module is not None else new_module(symbol, target)
        self.n_outlined = 0
        self.in_parallel = False
        self.nontemporal = False
        self.x86 = target.triple.startswith("x86_64")
        #: native integer dot-product path per accumulator width (``runtime/int_dot.py``)
        self.dot_paths = dot_paths(target.cpu, target.has_feature) if self.x86 else {}
        # graph-lowered kernels (templates, FuseTIR): their float reductions are documented
        # to agree with the interpreter within rounding, so accumulations may reassociate
        self.reassociate = "op_name" in func.attrs
        self.state: _FnState

    # the ExprCodegen state lives on the current function's state
    @property  # type: ignore[override]
    def builder(self) -> ir.IRBuilder:
        return self.state.builder

    @property  # type: ignore[override]
    def values(self) -> dict[str, ir.Value]:
        return self.state.values

    @property  # type: ignore[override]
    def buffers(self) -> dict[str, tuple[ir.Value, Buffer]]:
        return self.state.buffers

    def int_dot(self, acc: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return lower_dot4(self.builder, lambda name, ret, args: self.intrinsic(
            name, ret, args, []), self.dot_paths, acc, a, b)

    def lower(self) -> ir.Module:
        """The module with the kernel ``symbol`` (its packed entry, body and outlined
        parallel bodies)."""
        func = self.func
        params = [*func.params, *func.shape_vars]
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(),
                                                      [param_type(p) for p in params]),
                         f"{self.symbol}__body")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        # NOTE: not inlined into the entry. Inlining turns each noalias parameter into a
        # scope that every memory access then lists: quadratic metadata (a concat of 1,000
        # buffers took 5 s of LLVM time, against 0.2 s for 100). Kept as a function, the
        # body keeps its noalias parameters as attributes; the extra call costs a few ns.
        fn.attributes.add("noinline")
        self.state = _FnState(fn)
        for param, arg in zip(params, fn.args, strict=True):
            arg.name = param.name
            if isinstance(param, Buffer):
                arg.add_attribute("noalias")
                arg.attributes.align = param.align
                self.buffers[param.name] = (arg, param)
            elif param.dtype == "bool":
                self.values[param.name] = self.builder.icmp_unsigned("!=", arg, I8(0))
            else:
                self.values[param.name] = arg
        self.stmt(func.body)
        self.builder.ret_void()
        self.packed_entry(fn, params)
        self.abi_constant()
        return self.module

    def abi_constant(self) -> None:
        """``@<symbol>__abi``: the kernel's ABI record, which the loader checks against the
        kernel it binds this code to (``runtime/abi.py``)."""
        typ = ir.ArrayType(I8, len(self.abi))
        var = ir.GlobalVariable(self.module, typ, self.symbol + ABI_SUFFIX)
        var.global_constant = True
        var.initializer = ir.Constant(typ, bytearray(self.abi))
        var.align = 8

    def packed_entry(self, body: ir.Function, params: list[Buffer | Var]) -> None:
        """``void @<symbol>(ptr %args)``: unpack one i64 slot per parameter, call the body."""
        entry = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR]), self.symbol)
        entry.attributes.add("nounwind")
        bld = ir.IRBuilder(entry.append_basic_block("entry"))
        values = []
        for k, (param, typ) in enumerate(zip(params, body.function_type.args, strict=True)):
            slot = bld.load(bld.gep(entry.args[0], [I64(k)], inbounds=True, source_etype=I64),
                            typ=I64)
            if isinstance(param, Buffer):
                values.append(bld.inttoptr(slot, PTR))
            elif dt.is_float(param.dtype):  # narrow floats: float32 registers
                as_double = bld.bitcast(slot, ir.DoubleType())
                values.append(as_double if typ == ir.DoubleType() else bld.fptrunc(as_double, typ))
            else:
                values.append(slot if typ == I64 else bld.trunc(slot, typ))
        bld.call(body, values)
        bld.ret_void()

    # -- statements --------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, BufferStore):
            index = s.indices[0] if s.indices else IntImm(0)
            value = self.accumulation(s) if self.reassociate else None
            self.store(s.buffer, index, self.expr(s.value) if value is None else value,
                       s.value.lanes)
        elif isinstance(s, For):
            streaming = bool(dict(s.annotations).get(NONTEMPORAL, False)) and not self.nontemporal
            self.nontemporal |= streaming
            if s.kind == "parallel" and not self.in_parallel:
                self.parallel(s)
            else:
                self.serial(s.loop_var, self.expr(s.min), self.expr(s.extent), s.body)
            if streaming:
                self.nontemporal = False
                self.fence()
        elif isinstance(s, LetStmt):
            self.values[s.var.name] = self.expr(s.value)
            self.stmt(s.body)
            del self.values[s.var.name]
        elif isinstance(s, IfThenElse):
            self.branch(s)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, Evaluate):
            self.expr(s.value)
        else:
            raise TypeError(f"codegen: unsupported statement {type(s).__name__}")

    def accumulation(self, s: BufferStore) -> ir.Value | None:
        """``buf[i] + v`` of a store ``buf[i] = buf[i] + v`` (float, scalar) as an fadd
        marked ``reassoc``, else None: LLVM's loop vectorizer then splits the sum into
        vector lanes (a global average pool ran at 1 ns an element, one add per add's
        latency). Only in graph-lowered kernels (``self.reassociate``)."""
        v = s.value
        if not isinstance(v, Add) or v.lanes != 1 or not dt.is_float(v.dtype):
            return None
        for acc, other in ((v.a, v.b), (v.b, v.a)):
            if isinstance(acc, BufferLoad) and acc.buffer.name == s.buffer.name \
                    and acc.indices == s.indices:
                return self.builder.fadd(self.expr(acc), self.expr(other),
                                         flags=("reassoc", *self._fm))
        return None

    def serial(self, var: Var, lo: ir.Value, extent: ir.Value, body: Stmt) -> None:
        bld, fn = self.builder, self.state.fn
        end = bld.add(lo, extent)
        pre = bld.block
        header = fn.append_basic_block(f"for.{var.name}")
        body_bb = fn.append_basic_block(f"for.{var.name}.body")
        exit_bb = fn.append_basic_block(f"for.{var.name}.end")
        bld.branch(header)
        bld.position_at_end(header)
        i = bld.phi(lo.type, name=var.name)
        i.add_incoming(lo, pre)
        bld.cbranch(bld.icmp_signed("<", i, end), body_bb, exit_bb)
        bld.position_at_end(body_bb)
        self.values[var.name] = i
        self.stmt(body)
        del self.values[var.name]
        nxt = bld.add(i, ir.Constant(lo.type, 1), flags=("nsw",))  # i < end: no overflow
        i.add_incoming(nxt, bld.block)
        bld.branch(header)
        bld.position_at_end(exit_bb)

    def fence(self) -> None:
        """Order streaming stores before anything that follows (``sfence`` on x86)."""
        if self.x86:
            sfence = self.declare("llvm.x86.sse.sfence", ir.VoidType(), [])
            self.builder.call(sfence, [])

    def branch(self, s: IfThenElse) -> None:
        cond = self.expr(s.condition)
        if s.else_case is None:
            with self.builder.if_then(cond):
                self.stmt(s.then_case)
            return
        with self.builder.if_else(cond) as (then, other):
            with then:
                self.stmt(s.then_case)
            with other:
                self.stmt(s.else_case)

    def allocate(self, s: Allocate) -> None:
        buf = s.buffer
        elem = memory_type(buf.dtype)
        count = const_int(buf.shape[0]) if buf.ndim == 1 else None
        nbytes = None if count is None else count * dt.ELEMENT_BYTES[buf.dtype]
        decl = buf.replace(align=max(buf.align, ALLOC_ALIGN))
        heap = None
        if nbytes is not None and nbytes <= STACK_LIMIT:
            ptr = _opaque_alloca(self.builder, self.state.entry,
                                 ir.ArrayType(elem, max(count or 0, 1)), buf.name)
        else:
            size = self.builder.mul(self.index64(self.expr(buf.shape[0])),
                                    I64(dt.ELEMENT_BYTES[buf.dtype]))
            size = self.builder.and_(self.builder.add(size, I64(ALLOC_ALIGN - 1)),
                                     I64(-ALLOC_ALIGN))  # aligned_alloc needs a multiple
            alloc = self.declare("aligned_alloc", PTR, [I64, I64])
            ptr = heap = self.builder.call(alloc, [I64(ALLOC_ALIGN), size], name=buf.name)
        self.buffers[buf.name] = (ptr, decl)
        self.stmt(s.body)
        del self.buffers[buf.name]
        if heap is not None:
            self.builder.call(self.declare("free", ir.VoidType(), [PTR]), [heap])

    # -- parallel loops ------------------------------------------------------
    def parallel(self, s: For) -> None:
        """Outline ``s``'s body and launch it on the thread pool (see the module notes)."""
        var = s.loop_var
        names = [n for n in free_vars(s.body) if n != var.name]
        captured_vars = [(n, self.values[n]) for n in names]
        captured_bufs = [self.buffers[n] for n in used_buffers(s.body)]
        k = self.n_outlined
        self.n_outlined += 1
        lo = self.expr(s.min)
        impl = self.outline_impl(f"{self.symbol}__par{k}_impl", s, captured_bufs,
                                 captured_vars, lo.type)
        tramp = self.trampoline(f"{self.symbol}__par{k}", impl, captured_bufs, captured_vars,
                                lo.type)
        # the closure: a stack struct of everything the body uses
        fields = [PTR] * len(captured_bufs) + [v.type for _, v in captured_vars] + [lo.type]
        struct = ir.LiteralStructType(fields)
        closure = _opaque_alloca(self.builder, self.state.entry, struct, f"closure{k}")
        values = [p for p, _ in captured_bufs] + [v for _, v in captured_vars] + [lo]
        for n, value in enumerate(values):
            slot = self.builder.gep(closure, [I32(0), I32(n)], inbounds=True,
                                    source_etype=struct)
            self.builder.store(value, slot)
        launch = self.declare(LAUNCH_SYMBOL, ir.VoidType(), [PTR, PTR, I64])
        extent = self.index64(self.expr(s.extent))
        self.builder.call(launch, [tramp, closure, extent])

    def outline_impl(self, name: str, s: For, bufs: list[tuple[ir.Value, Buffer]],
                     captured: list[tuple[str, ir.Value]], lo_type: ir.Type) -> ir.Function:
        args = [I64, I64, lo_type] + [PTR] * len(bufs) + [v.type for _, v in captured]
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), args), name)
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        fn.attributes.add("noinline")
        parent, self.state = self.state, _FnState(fn)
        self.in_parallel = True
        try:
            begin, end, lo = fn.args[0], fn.args[1], fn.args[2]
            for arg, (_, decl) in zip(fn.args[3:], bufs, strict=False):
                arg.name = decl.name
                arg.add_attribute("noalias")
                arg.attributes.align = decl.align
                self.buffers[decl.name] = (arg, decl)
            for arg, (vname, _) in zip(fn.args[3 + len(bufs):], captured, strict=True):
                arg.name = vname
                self.values[vname] = arg
            first = self.builder.add(lo, self._as(begin, lo_type))
            count = self.builder.sub(self._as(end, lo_type), self._as(begin, lo_type))
            self.serial(s.loop_var, first, count, s.body)
            if self.nontemporal:
                self.fence()
            self.builder.ret_void()
        finally:
            self.state = parent
            self.in_parallel = False
        return fn

    def _as(self, v: ir.Value, typ: ir.Type) -> ir.Value:
        return v if v.type == typ else self.builder.trunc(v, typ)

    def trampoline(self, name: str, impl: ir.Function, bufs: list[tuple[ir.Value, Buffer]],
                   captured: list[tuple[str, ir.Value]], lo_type: ir.Type) -> ir.Function:
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [I64, I64, PTR]), name)
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        bld = ir.IRBuilder(fn.append_basic_block("entry"))
        fields = [PTR] * len(bufs) + [v.type for _, v in captured] + [lo_type]
        struct = ir.LiteralStructType(fields)
        loaded = [bld.load(bld.gep(fn.args[2], [I32(0), I32(n)], inbounds=True,
                                   source_etype=struct), typ=t)
                  for n, t in enumerate(fields)]
        bld.call(impl, [fn.args[0], fn.args[1], loaded[-1], *loaded[:-1]])
        bld.ret_void()
        return fn


def new_module(name: str, target: Target) -> ir.Module:
    module = ir.Module(name=name)
    module.triple = target.triple
    module.data_layout = target.data_layout
    return module


def lower(func: PrimFunc, symbol: str, target: Target, fast_math: bool = False) -> str:
    """The LLVM IR text of ``func`` as the kernel ``symbol``."""
    return str(Lowerer(func, symbol, target, fast_math).lower())


def lower_batch(items: list[tuple[PrimFunc, str]], target: Target, name: str,
                fast_math: bool = False) -> str:
    """The LLVM IR text of one module holding every ``(func, symbol)`` kernel of ``items``."""
    module = new_module(name, target)
    for func, symbol in items:
        Lowerer(func, symbol, target, fast_math, module).lower()
    return str(module)


__all__ = ["ALLOC_ALIGN", "LAUNCH_SYMBOL", "NONTEMPORAL", "STACK_LIMIT", "Lowerer", "lower",
           "lower_batch", "new_module", "param_type"]
