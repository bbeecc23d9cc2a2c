"""Builds a module against hundreds of hostile cache states; run as a script by
``test_cache_hostile.py`` (in a child process with a timeout: a hang or a crash
fails that test, not the test run).

Every state starts from the entries of one good build (restored each time) and
rearranges them: index payloads permuted among their keys, entries of another
module's cache put in place of this one's, entries re-written by another
irkernel version, index entries forged to name another kernel's code with a
correct object sha256 (only the loader's ABI check can catch those). Each state
then builds and calls every kernel, and checks its results: a bad entry must be
dropped and rebuilt, never bound. Prints ``state <name>`` before each state
(the last one printed names a hang) and ``checked <states> dropped <entries>
abi <entries the loader's ABI check dropped>``.
"""

from __future__ import annotations

import itertools
import logging
import random
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

import runtime
from irkernel.ir.module import IRModule
from irkernel.tir import script as T
from runtime.cache import DiskCache, encode, read_header

n = T.var("int64")


@T.prim_func
def scale(a: T.Buffer((n,), "float32"), out: T.Buffer((n,), "float32")):
    for i in T.serial(n):
        out[i] = a[i] * 2.0


@T.prim_func
def add3(a: T.Buffer((16,), "float32"), b: T.Buffer((16,), "float32"),
         c: T.Buffer((16,), "float32"), out: T.Buffer((16,), "float32")):
    for i in T.serial(16):
        out[i] = a[i] + b[i] + c[i]


@T.prim_func
def fill(out: T.Buffer((8,), "int32"), v: T.int32):
    for i in T.serial(8):
        out[i] = v


@T.prim_func
def neg(a: T.Buffer((4, 4), "float32"), out: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        out[i, j] = 0.0 - a[i, j]


@T.prim_func
def sub(a: T.Buffer((32,), "float32"), b: T.Buffer((32,), "float32"),
        out: T.Buffer((32,), "float32")):
    for i in T.serial(32):
        out[i] = a[i] - b[i]


@T.prim_func
def square(a: T.Buffer((5,), "float64"), out: T.Buffer((5,), "float64")):
    for i in T.serial(5):
        out[i] = a[i] * a[i]


@T.prim_func
def count(out: T.Buffer((3,), "int64")):
    for i in T.serial(3):
        out[i] = out[i] + out[i]


def _scaled(k: int):
    size = 8 * (k + 1)

    @T.prim_func(name=f"scaled{k}")
    def f(a: T.Buffer((size,), "float32"), out: T.Buffer((size,), "float32")):
        for i in T.serial(size):
            out[i] = a[i] * float(k) + 1.0

    return f


SMALL = IRModule({"scale": scale, "add3": add3, "fill": fill, "neg": neg})
OTHER = IRModule({"sub": sub, "square": square, "count": count})
LARGE = IRModule({f"scaled{k}": _scaled(k) for k in range(10)})


def check_small(ex) -> None:
    a = np.arange(16, dtype=np.float32)
    out = np.empty(16, np.float32)
    ex["scale"](a, out)
    np.testing.assert_array_equal(out, 2 * a)
    ex["add3"](a, a + 1, a + 2, out)
    np.testing.assert_array_equal(out, 3 * a + 3)
    ints = np.zeros(8, np.int32)
    ex["fill"](ints, 7)
    np.testing.assert_array_equal(ints, 7)
    m = a.reshape(4, 4)
    res = np.empty((4, 4), np.float32)
    ex["neg"](m, res)
    np.testing.assert_array_equal(res, -m)


def check_other(ex) -> None:
    a = np.arange(32, dtype=np.float32)
    out = np.empty(32, np.float32)
    ex["sub"](a, a / 2, out)
    np.testing.assert_array_equal(out, a / 2)
    d = np.arange(5, dtype=np.float64)
    res = np.empty(5)
    ex["square"](d, res)
    np.testing.assert_array_equal(res, d * d)
    c = np.array([0, 1, 2], np.int64)
    ex["count"](c)
    np.testing.assert_array_equal(c, [0, 2, 4])


def check_large(ex) -> None:
    for k in range(10):
        a = np.arange(8 * (k + 1), dtype=np.float32)
        out = np.empty_like(a)
        ex[f"scaled{k}"](a, out)
        np.testing.assert_array_equal(out, a * np.float32(k) + 1)


Files = dict[Path, bytes]


def entries(root: Path, kind: str) -> Files:
    return {p: p.read_bytes() for p in sorted((root / kind).rglob("*")) if p.is_file()}


def payload(data: bytes) -> bytes:
    header = read_header(data)
    assert header is not None
    return header[2]


class Cache:
    """One module's cache directory, its good entries and its state checks."""

    def __init__(self, root: Path, mod: IRModule, check: Callable[[object], None]) -> None:
        self.root, self.mod, self.check = root, mod, check
        check(runtime.build(mod, cache=DiskCache(root)))
        self.index, self.obj = entries(root, "index"), entries(root, "obj")

    def restore(self) -> None:
        for path, data in {**self.index, **self.obj}.items():
            if path.is_symlink() or not path.is_file() or path.read_bytes() != data:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)

    def fields(self, path: Path) -> list[bytes]:
        """``[key, batch, symbol, sha256]`` of a good index entry."""
        return payload(self.index[path]).split()


def main(work: Path) -> int:
    dropped, bound = [0], [0]

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            dropped[0] += "removing it and rebuilding" in record.getMessage()
            bound[0] += "is bound to code" in record.getMessage()  # the loader's ABI check

    logging.getLogger("irkernel.runtime.cache").addHandler(Count())
    logging.getLogger("irkernel.runtime.cache").propagate = False
    small = Cache(work / "small", SMALL, check_small)
    other = Cache(work / "other", OTHER, check_other)
    large = Cache(work / "large", LARGE, check_large)
    rng = random.Random(28)
    checked = 0

    def state(name: str, cache: Cache, mutate: Callable[[], None]) -> None:
        nonlocal checked
        print("state", name, flush=True)
        cache.restore()
        mutate()
        cache.check(runtime.build(cache.mod, cache=DiskCache(cache.root)))
        checked += 1

    def write(files: dict[Path, bytes]) -> Callable[[], None]:
        def mutate() -> None:
            for path, data in files.items():
                path.write_bytes(data)
        return mutate

    def permuted(cache: Cache, order: list[int]) -> dict[Path, bytes]:
        paths = list(cache.index)
        return {p: cache.index[paths[k]] for p, k in zip(paths, order, strict=True)}

    for order in itertools.permutations(range(len(small.index))):
        state(f"small permutation {order}", small, write(permuted(small, list(order))))
    for k in range(80):
        order = list(range(len(large.index)))
        rng.shuffle(order)
        state(f"large permutation {k}", large, write(permuted(large, order)))

    small_paths, other_payloads = list(small.index), list(other.index.values())
    (small_obj, small_obj_data), = small.obj.items()
    (other_obj, other_obj_data), = other.obj.items()
    for k, path in enumerate(small_paths):
        state(f"foreign index entry in {k}", small, write({path: other_payloads[k % 3]}))
    every = {p: other_payloads[k % 3] for k, p in enumerate(small_paths)}
    state("foreign index entries", small, write(every))
    state("foreign object", small, write({small_obj: other_obj_data}))
    state("foreign object and index", small, write({**every, small_obj: other_obj_data}))
    for k, path in enumerate(small_paths):
        for j, large_data in enumerate(list(large.index.values())[:3]):
            state(f"large module's entry {j} in {k}", small, write({path: large_data}))

    def forged(path: Path, fields: list[bytes]) -> bytes:
        return encode(b" ".join([small.fields(path)[0], *fields[1:]]))

    for k, path in enumerate(small_paths):
        for j, theirs in enumerate(other.index):
            state(f"forged: {k} names the other module's {j}", small, write({
                path: forged(path, other.fields(theirs)), other_obj: other_obj_data}))
        for j, mine in enumerate(small_paths):
            if j != k:
                state(f"forged: {k} names kernel {j}", small,
                      write({path: forged(path, small.fields(mine))}))

    old = "0.0.0+another-irkernel"
    files = [*small_paths, small_obj]
    for mask in range(1, 1 << len(files)):
        chosen = [p for b, p in enumerate(files) if mask >> b & 1]
        state(f"another version in {mask:05b}", small, write({
            p: encode(payload({**small.index, **small.obj}[p]), old) for p in chosen}))

    for k in range(40):
        order = list(range(len(small_paths)))
        rng.shuffle(order)
        files_k = permuted(small, order)
        for path in rng.sample(small_paths, rng.randint(0, 2)):
            files_k[path] = encode(payload(files_k[path]), old)
        if rng.random() < 0.3:
            files_k[small_obj] = rng.choice([other_obj_data, encode(b"\x7fELF" + bytes(64))])
        state(f"mixed {k}", small, write(files_k))

    print(f"checked {checked} dropped {dropped[0]} abi {bound[0]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
