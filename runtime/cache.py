"""The on-disk object cache: compiled kernels survive the process.

Two kinds of entries, both content-addressed:

* ``obj/<key>``: an object file; ``key`` hashes the lowered LLVM IR text, the
  target (triple, CPU name, features, libmvec variant, llvmlite/LLVM
  versions) and the irkernel version (STYLE 9.6);
* ``index/<key>``: the ``obj`` key a PrimFunc compiled to; ``key`` hashes the
  PrimFunc's structural digest, its symbol, the lowering configuration, the
  target and the source code of the TIR passes and codegen. A hit skips the
  passes and codegen entirely, which is what makes a warm build a few
  milliseconds in a new process.

Each file is ``MAGIC | payload length (8 bytes, little endian) | sha256 of the
payload | payload``. A file that fails the check (truncated, corrupted, from
another format) is logged, removed and treated as a miss, so it gets rebuilt.
Writes go to a temporary file in the same directory and are moved into place
with ``os.replace`` (atomic on POSIX): concurrent processes never see a
partial entry, and the last writer of identical content wins. The cache is
best effort: an unwritable directory only logs a warning.

Location: ``$IRKERNEL_CACHE_DIR`` if set (read when a cache is created),
else ``~/.cache/irkernel``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from pathlib import Path

logger = logging.getLogger("irkernel.runtime.cache")

MAGIC = b"IRKCACHE1\x00"
_HEADER = len(MAGIC) + 8 + 32
KINDS = ("obj", "index")


def default_directory() -> Path:
    """``$IRKERNEL_CACHE_DIR``, else ``~/.cache/irkernel``."""
    env = os.environ.get("IRKERNEL_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "irkernel"


def digest(*parts: bytes | str) -> str:
    """A hex key over ``parts`` (length-prefixed, so parts can not run together)."""
    h = hashlib.blake2b(digest_size=20)
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def encode(payload: bytes) -> bytes:
    """A cache file: header and payload."""
    return MAGIC + len(payload).to_bytes(8, "little") + hashlib.sha256(payload).digest() + payload


def decode(data: bytes) -> bytes | None:
    """The payload of a cache file, or None when the file is not intact."""
    if len(data) < _HEADER or not data.startswith(MAGIC):
        return None
    size = int.from_bytes(data[len(MAGIC):len(MAGIC) + 8], "little")
    checksum = data[len(MAGIC) + 8:_HEADER]
    payload = data[_HEADER:]
    if len(payload) != size or hashlib.sha256(payload).digest() != checksum:
        return None
    return payload


class DiskCache:
    """Content-addressed files under ``directory`` (see the module docstring).

    Parameters
    ----------
    directory : path, optional
        Defaults to :func:`default_directory`.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()

    def path(self, kind: str, key: str) -> Path:
        if kind not in KINDS or not key.isalnum():
            raise ValueError(f"cache: bad entry {kind}/{key}")
        return self.directory / kind / key[:2] / key

    def get(self, kind: str, key: str) -> bytes | None:
        """The payload stored under ``kind/key``; None on a miss or a corrupt entry."""
        path = self.path(kind, key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        payload = decode(data)
        if payload is None:
            logger.warning("cache entry %s is corrupt; removing it and rebuilding", path)
            with contextlib.suppress(OSError):
                path.unlink()
        return payload

    def put(self, kind: str, key: str, payload: bytes) -> None:
        """Store ``payload`` atomically (temp file + ``os.replace``); failures only log."""
        path = self.path(kind, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key}.", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(encode(payload))
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as exc:
            logger.warning("cannot write cache entry %s: %s", path, exc)


__all__ = ["KINDS", "MAGIC", "DiskCache", "decode", "default_directory", "digest", "encode"]
