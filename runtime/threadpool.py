"""The thread pool that runs parallel loops: ``irkernel_parallel_launch`` for compiled code.

Compiled kernels call ``irkernel_parallel_launch(body, closure, n)``, whose address is
registered with LLVM's symbol table before any kernel loads. The pool is native code
(LLVM IR below, compiled once per process): the launch never enters Python. Its
predecessor was a ``concurrent.futures`` pool behind a ctypes callback; every launch took
the GIL, built Python objects and woke a worker through a condition variable, which cost
35 us at one thread and 110 us at two (measured on a 16-element loop), more than most
kernels of a small model run.

How a launch runs:

* ``[0, n)`` is split into ``min(n, 8 * threads)`` contiguous chunks (near-equal sizes).
  One 64-bit word publishes a launch: ``generation << 40 | chunks << 20 | next chunk``.
  The launcher stores the body, closure and ``n``, then the word (a new generation);
  every participant takes chunk numbers with one atomic add on the word, so a number
  below the word's chunk count is a chunk of *that* launch, and nothing can mix two
  launches: the next launch is published only after every chunk of this one finished.
  The launcher runs chunks too, then waits for the count of finished chunks, not for
  the workers (a worker the OS has not scheduled finds no chunk left and goes idle).
* Workers spin on the word (``pause``) for ``SPIN`` rounds after their last chunk, then
  sleep on a futex; the launcher wakes sleepers only when there are any. Spinning is
  what makes back-to-back launches cheap (a model's kernels run microseconds apart).
* One launch at a time: a launch that finds the pool busy (a parallel loop inside a
  chunk, or a second Python thread launching concurrently) runs its loop serially on
  its own thread. ``threads == 1`` or ``n == 1`` run serially too, with no atomics.
* Workers are created on demand with ``pthread_create`` (detached) when a launch wants
  more than exist; ``set_num_threads`` only writes the wanted count, so shrinking and
  growing back never re-spawns. After ``fork`` the child has none (a handler resets the
  count, frees the lock and the pool; the child's first launch creates its own). A fault on
  a launching thread (an exception, a KeyboardInterrupt, the thread's death) lands after
  the native launch returned, so it never leaves the pool busy or a chunk behind:
  ``tests/runtime/test_threadpool_faults.py`` checks each.

The thread count defaults to ``IRKERNEL_NUM_THREADS`` or the CPU count, read when first
needed. Linux on x86-64 and AArch64 (the futex and ``pause``/``yield``); elsewhere the
workers only spin and yield.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import warnings

import llvmlite.binding as llvm

from runtime.jit import load_host_ir
from runtime.lower import LAUNCH_SYMBOL
from runtime.target import host

#: Chunks per thread of a parallel loop: a preempted or late thread holds the loop back by
#: at most one chunk (1/8 of a thread's share), since the others take its remaining ones.
CHUNKS_PER_THREAD = 8
#: Rounds a worker spins (``pause``, ~30-60 ns each) for the next launch before it sleeps.
SPIN = 20000
#: Most chunks of one launch (the word's chunk field has 20 bits; stragglers' extra adds
#: must not carry into it).
MAX_CHUNKS = 1 << 19

_GLOBALS = ("irk_pool_threads", "irk_pool_workers", "irk_pool_busy", "irk_pool_sleepers")


def _ir(triple: str) -> str:
    """The pool's LLVM IR for ``triple`` (the relax hint and the futex syscall number)."""
    if triple.startswith("x86_64"):
        relax, futex = "call void @llvm.x86.sse2.pause()", 202
        intrinsic = "declare void @llvm.x86.sse2.pause()"
    elif triple.startswith("aarch64"):
        relax, futex = "call void @llvm.aarch64.hint(i32 1)", 98
        intrinsic = "declare void @llvm.aarch64.hint(i32)"
    else:
        relax, futex, intrinsic = "", 0, ""
    linux = "linux" in triple and futex
    futex_wait = (f"call i64 (i64, ...) @syscall(i64 {futex}, ptr @irk_pool_epoch, i64 128, "
                  "i64 %e64, ptr null)" if linux else "call i32 @sched_yield()")
    futex_wake = (f"call i64 (i64, ...) @syscall(i64 {futex}, ptr @irk_pool_epoch, i64 129, "
                  "i64 2147483647)" if linux else "")
    return f"""
@irk_pool_word = global i64 0, align 64
@irk_pool_done = global i64 0, align 64
@irk_pool_body = global ptr null, align 64
@irk_pool_closure = global ptr null, align 8
@irk_pool_n = global i64 0, align 8
@irk_pool_busy = global i32 0, align 64
@irk_pool_threads = global i64 1, align 64
@irk_pool_workers = global i64 0, align 8
@irk_pool_spawn_failed = global i32 0, align 8
@irk_pool_sleepers = global i32 0, align 64
@irk_pool_epoch = global i32 0, align 64

declare i32 @pthread_create(ptr, ptr, ptr, ptr)
declare i32 @pthread_detach(i64)
declare i64 @syscall(i64, ...)
declare i32 @sched_yield()
{intrinsic}

define internal void @irk_relax() alwaysinline nounwind {{
  {relax}
  ret void
}}

; take and run chunks of the published launch until none is left; the generation seen
define internal i64 @irk_grab() nounwind {{
entry:
  br label %next
next:
  %c = atomicrmw add ptr @irk_pool_word, i64 1 acq_rel
  %idx = and i64 %c, 1048575
  %chs = lshr i64 %c, 20
  %ch = and i64 %chs, 1048575
  %valid = icmp ult i64 %idx, %ch
  br i1 %valid, label %run, label %out
run:
  %body = load ptr, ptr @irk_pool_body, align 8
  %clo = load ptr, ptr @irk_pool_closure, align 8
  %n = load i64, ptr @irk_pool_n, align 8
  %base = udiv i64 %n, %ch
  %extra = urem i64 %n, %ch
  %early = icmp ult i64 %idx, %extra
  %shift = select i1 %early, i64 %idx, i64 %extra
  %lo0 = mul i64 %idx, %base
  %lo = add i64 %lo0, %shift
  %one = zext i1 %early to i64
  %size = add i64 %base, %one
  %hi = add i64 %lo, %size
  call void %body(i64 %lo, i64 %hi, ptr %clo)
  %d = atomicrmw add ptr @irk_pool_done, i64 1 release
  br label %next
out:
  %g = lshr i64 %c, 40
  ret i64 %g
}}

define internal ptr @irk_worker(ptr %arg) nounwind {{
entry:
  %w0 = load atomic i64, ptr @irk_pool_word acquire, align 8
  %g0 = lshr i64 %w0, 40
  br label %idle
idle:
  %g = phi i64 [ %g0, %entry ], [ %gdone, %work ], [ %g, %woke ]
  br label %spin
spin:
  %i = phi i64 [ 0, %idle ], [ %i1, %relax ]
  %w = load atomic i64, ptr @irk_pool_word acquire, align 8
  %wg = lshr i64 %w, 40
  %fresh = icmp ne i64 %wg, %g
  br i1 %fresh, label %work, label %count
count:
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, {SPIN}
  br i1 %more, label %relax, label %sleep
relax:
  call void @irk_relax()
  br label %spin
work:
  %gdone = call i64 @irk_grab()
  br label %idle
sleep:
  %s0 = atomicrmw add ptr @irk_pool_sleepers, i32 1 seq_cst
  %e = load atomic i32, ptr @irk_pool_epoch seq_cst, align 4
  %w2 = load atomic i64, ptr @irk_pool_word seq_cst, align 8
  %wg2 = lshr i64 %w2, 40
  %moved = icmp ne i64 %wg2, %g
  br i1 %moved, label %woke, label %wait
wait:
  %e64 = zext i32 %e to i64
  {futex_wait}
  br label %woke
woke:
  %s1 = atomicrmw sub ptr @irk_pool_sleepers, i32 1 seq_cst
  br label %idle
}}

define void @{LAUNCH_SYMBOL}(ptr %body, ptr %closure, i64 %n) nounwind {{
entry:
  %tid = alloca i64, align 8
  %some = icmp sgt i64 %n, 1
  br i1 %some, label %check, label %serial
check:
  %t = load atomic i64, ptr @irk_pool_threads monotonic, align 8
  %multi = icmp sgt i64 %t, 1
  br i1 %multi, label %lock, label %serial
lock:
  %cx = cmpxchg ptr @irk_pool_busy, i32 0, i32 1 acquire monotonic
  %got = extractvalue {{ i32, i1 }} %cx, 1
  br i1 %got, label %grow, label %serial
serial:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %alone, label %exit
alone:
  call void %body(i64 0, i64 %n, ptr %closure)
  br label %exit
grow:
  %have = load i64, ptr @irk_pool_workers, align 8
  %want = sub i64 %t, 1
  %short = icmp slt i64 %have, %want
  %failed = load i32, ptr @irk_pool_spawn_failed, align 4
  %can = icmp eq i32 %failed, 0
  %spawn_more = and i1 %short, %can
  br i1 %spawn_more, label %spawn, label %publish
spawn:
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @irk_worker, ptr null)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %spawned, label %nospawn
nospawn:
  store i32 1, ptr @irk_pool_spawn_failed, align 4
  br label %publish
spawned:
  %tidv = load i64, ptr %tid, align 8
  %dt = call i32 @pthread_detach(i64 %tidv)
  %have1 = add i64 %have, 1
  store i64 %have1, ptr @irk_pool_workers, align 8
  br label %grow
publish:
  %workers = load i64, ptr @irk_pool_workers, align 8
  %team0 = add i64 %workers, 1
  %fewer = icmp slt i64 %team0, %t
  %team = select i1 %fewer, i64 %team0, i64 %t
  %k8 = mul i64 %team, {CHUNKS_PER_THREAD}
  %small = icmp slt i64 %n, %k8
  %ch0 = select i1 %small, i64 %n, i64 %k8
  %huge = icmp sgt i64 %ch0, {MAX_CHUNKS}
  %ch = select i1 %huge, i64 {MAX_CHUNKS}, i64 %ch0
  store ptr %body, ptr @irk_pool_body, align 8
  store ptr %closure, ptr @irk_pool_closure, align 8
  store i64 %n, ptr @irk_pool_n, align 8
  store atomic i64 0, ptr @irk_pool_done monotonic, align 8
  %old = load atomic i64, ptr @irk_pool_word monotonic, align 8
  %og = lshr i64 %old, 40
  %ng0 = add i64 %og, 1
  %ng = and i64 %ng0, 16777215
  %gbits = shl i64 %ng, 40
  %cbits = shl i64 %ch, 20
  %word = or i64 %gbits, %cbits
  store atomic i64 %word, ptr @irk_pool_word seq_cst, align 8
  %sl = load atomic i32, ptr @irk_pool_sleepers seq_cst, align 4
  %asleep = icmp ne i32 %sl, 0
  br i1 %asleep, label %wake, label %help
wake:
  %ep = atomicrmw add ptr @irk_pool_epoch, i32 1 seq_cst
  {futex_wake}
  br label %help
help:
  %mine = call i64 @irk_grab()
  br label %join
join:
  %j = phi i64 [ 0, %help ], [ %j1, %yield ], [ %j1, %pause ]
  %d = load atomic i64, ptr @irk_pool_done acquire, align 8
  %all = icmp uge i64 %d, %ch
  br i1 %all, label %unlock, label %joinwait
joinwait:
  %j1 = add i64 %j, 1
  %long = icmp ugt i64 %j1, 4096
  br i1 %long, label %yield, label %pause
yield:
  %y = call i32 @sched_yield()
  br label %join
pause:
  call void @irk_relax()
  br label %join
unlock:
  store atomic i32 0, ptr @irk_pool_busy release, align 4
  br label %exit
exit:
  ret void
}}
"""


class _Pool:
    """The compiled pool and typed views of its globals."""

    def __init__(self) -> None:
        self.engine = load_host_ir(_ir(host().triple))
        self.launch_address = self.engine.address(LAUNCH_SYMBOL)
        addr = {name: self.engine.data_address(name) for name in _GLOBALS}
        self.threads = ctypes.c_int64.from_address(addr["irk_pool_threads"])
        self.workers = ctypes.c_int64.from_address(addr["irk_pool_workers"])
        self.busy = ctypes.c_int32.from_address(addr["irk_pool_busy"])
        self.sleepers = ctypes.c_int32.from_address(addr["irk_pool_sleepers"])


_LOCK = threading.Lock()
_state: dict[str, int | None] = {"threads": None}


@functools.cache
def _pool() -> _Pool:
    pool = _Pool()
    llvm.add_symbol(LAUNCH_SYMBOL, pool.launch_address)
    return pool


def _after_fork() -> None:
    """The child of a fork has none of the parent's workers (and no launch in flight:
    the parent's may have been mid-launch on another thread, holding ``busy``), and a
    free lock (held across the fork, so no other thread held it then)."""
    global _LOCK
    _LOCK = threading.Lock()
    pool = _pool()
    pool.workers.value = 0
    pool.busy.value = 0
    pool.sleepers.value = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=lambda: _LOCK.acquire(), after_in_parent=lambda: _LOCK.release(),
                        after_in_child=_after_fork)


def _default_threads() -> int:
    """``IRKERNEL_NUM_THREADS``, else the CPU count (with a warning naming a bad value)."""
    env = os.environ.get("IRKERNEL_NUM_THREADS", "")
    if env.isdigit() and int(env) >= 1:
        return int(env)
    if env:
        warnings.warn(f"IRKERNEL_NUM_THREADS must be a positive integer, got {env!r}; "
                      "using the CPU count", RuntimeWarning, stacklevel=3)
    return os.cpu_count() or 1


def get_num_threads() -> int:
    """The number of threads parallel loops use."""
    with _LOCK:
        if _state["threads"] is None:
            _state["threads"] = _default_threads()
            _pool().threads.value = _state["threads"]
        return int(_state["threads"])


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for parallel loops from now on (1 runs them serially).

    Cheap: it writes the wanted count; workers are created by the first launch that
    wants more than exist and are kept when ``n`` shrinks.

    Raises
    ------
    ValueError
        When ``n`` is not a positive int.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads: n must be a positive int, got {n!r}")
    with _LOCK:
        _state["threads"] = n
        _pool().threads.value = n


def worker_count() -> int:
    """Worker threads the pool has created in this process (not counting callers)."""
    return int(_pool().workers.value)


get_num_threads()  # compiles the pool and registers its launch symbol before kernels load
LAUNCH_ADDRESS = _pool().launch_address

__all__ = ["CHUNKS_PER_THREAD", "LAUNCH_ADDRESS", "MAX_CHUNKS", "SPIN", "get_num_threads",
           "set_num_threads", "worker_count"]
