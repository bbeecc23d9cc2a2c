"""Shared-memory transport of packed tasks and results between local processes.

A process pool sends its tasks through a pipe: the buffers of a packed task
are copied into a pickle stream, through the kernel and out again, which
costs far more than the copy itself (measured on the 2-core VM: 40-75 ms to
send 8 MB to a worker, 1.5 ms to copy it). For a pool of local processes the
engine instead writes the buffers once into a file under ``/dev/shm`` (RAM)
at 64-byte aligned offsets and sends only the small pickle header and the
file's name (:class:`Shared`). The receiver maps the file read-only, wraps
the buffers without copying (``np.frombuffer`` on the map) and unlinks the
file at once: the memory lives as long as the arrays that use it. A worker
answers the same way, with a file beside the task's.

Every file lives in one directory per engine, removed when the engine closes,
so files of cancelled or uncollected tasks do not outlive it. Where there is
no ``/dev/shm`` (macOS, Windows) or a write fails (the RAM disk is full), the
task travels in the pipe as before. Only the engine of a
``ProcessPoolExecutor`` uses this (it knows its workers share the machine).
Imports the standard library and NumPy.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import tempfile
from typing import Any

import numpy as np

_RAM_DIR = "/dev/shm"
_ALIGN = 64
#: Payloads whose buffers hold fewer bytes travel in the pipe (a file costs ~0.1 ms).
MIN_SHARED_BYTES = 1 << 16


class Shared:
    """A packed value whose buffers wait in a file under ``/dev/shm`` (see the module notes)."""

    __slots__ = ("header", "path", "spans")

    def __init__(self, header: bytes, path: str, spans: list[tuple[int, int]]) -> None:
        self.header, self.path, self.spans = header, path, spans

    def buffers(self) -> list[np.ndarray]:
        """Map the file, unlink it, and return its buffers as read-only uint8 arrays."""
        with open(self.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            mapped = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ) if size else b""
        os.unlink(self.path)
        return [np.frombuffer(mapped, np.uint8, count=n, offset=start) if n
                else np.zeros(0, np.uint8) for start, n in self.spans]


def ram_directory() -> str | None:
    """A fresh private directory under ``/dev/shm``, or None where there is none."""
    if not os.path.isdir(_RAM_DIR) or not os.access(_RAM_DIR, os.W_OK):
        return None
    return tempfile.mkdtemp(prefix="irkernel-", dir=_RAM_DIR)


def remove_directory(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def write_shared(header: bytes, buffers: list[Any], path: str) -> Shared | None:
    """Write ``buffers`` into ``path``; None when they are small or the write fails."""
    if sum(b.nbytes for b in buffers) < MIN_SHARED_BYTES:
        return None
    spans: list[tuple[int, int]] = []
    offset = 0
    for buf in buffers:
        spans.append((offset, buf.nbytes))
        offset += -(-buf.nbytes // _ALIGN) * _ALIGN
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, offset)
            for (start, n), buf in zip(spans, buffers, strict=True):
                view = memoryview(buf).cast("B")
                while n:  # pwrite may write less than asked
                    done = os.pwrite(fd, view[len(view) - n:], start + len(view) - n)
                    n -= done
        finally:
            os.close(fd)
    except OSError:  # NOTE: e.g. /dev/shm full: the caller sends the payload in the pipe
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    return Shared(header, path, spans)


__all__ = ["MIN_SHARED_BYTES", "Shared", "ram_directory", "remove_directory", "write_shared"]
