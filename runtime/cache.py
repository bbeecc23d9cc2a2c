"""The on-disk object cache: compiled kernels survive the process.

Three kinds of entries:

* ``obj/<key>``: an object file; ``key`` hashes the lowered LLVM IR text, the
  target (triple, CPU name, features, libmvec variant, llvmlite/LLVM
  versions) and the irkernel version (STYLE 9.6);
* ``index/<key>``: where the kernel of ``key`` lives; ``key`` hashes the
  PrimFunc's structural digest, its symbol, the lowering configuration, the
  target and the source code of the TIR passes and codegen. A hit skips the
  passes and codegen entirely, which is what makes a warm build a few
  milliseconds in a new process;
* ``tuned/<key>``: the register tiles ``runtime.tune`` measured for one target
  (``key`` hashes the target key; the JSON payload names its target too, and
  ``runtime.tune`` refuses one that names another).

Each file is ``MAGIC | version length (1 byte) | version | payload length (8
bytes, little endian) | sha256 of the payload | payload``, where ``version`` is
the irkernel version that wrote it. A file that fails the check (truncated,
corrupted, from another format or version) is logged, removed and treated as
a miss, so it gets rebuilt.

An index entry's payload is ``<key> <object key> <symbol> <sha256 of the
object>``: callers put and get ``b"<object key> <symbol>"``, and the cache adds
and checks the rest. An entry is only trusted for the key it names (a valid
entry moved under another key, by a copy, a restore or a bug, would bind a
kernel to another kernel's code), and only with the object it was written
for: ``get("obj", k)`` after an index entry named ``k`` refuses an object whose
sha256 is not the one the entry recorded. A mismatch is a corrupt entry:
logged, removed, rebuilt. The loader then checks each cached symbol's ABI
record against its kernel (``runtime/abi.py``), which no cache state can
forge by accident.
Writes go to a temporary file in the same directory and are moved into place
with ``os.replace`` (atomic on POSIX): concurrent processes never see a
partial entry, and the last writer of identical content wins. The cache is
best effort: an unwritable directory only logs a warning.

Faults the cache survives (``docs/cache.md`` has the threat model: the cache
trusts its owner, like Numba's, and guards against accidents, not attackers):

* *Not a regular file*: entries are opened with ``O_NOFOLLOW | O_NONBLOCK``
  and checked with ``fstat``; a symlink, FIFO, socket or device in place of an
  entry is removed (a directory is ignored) with a warning, never read, so a
  FIFO can not block a build.
* *A payload that is not what it claims*: ``get(kind, key, check=...)`` runs
  the caller's check on the payload (``runtime.objfile.object_problem`` for
  objects: ELF magic, class, machine, sections, the expected symbol) and
  treats a failure like a corrupt entry.
* *A payload that crashes the loader anyway*: the build loads cached objects
  inside ``with cache.loading("obj", *keys)``, which writes a marker file per
  entry first (``<entry>.loading-<pid>``, holding the process's pid and start
  time) and removes it after. A marker whose process is gone means that
  process died while loading: the next ``get`` of that entry moves it to
  ``quarantine/`` (kept for a post-mortem) and reports a miss, so it is
  rebuilt. One bad entry kills at most one process.
* *A directory it should not trust*: the directory is created ``0700``; one
  owned by another user is refused with a warning and the build runs without
  a cache (``usable`` is False).

Location: ``$IRKERNEL_CACHE_DIR`` if set (read when a cache is created),
else ``~/.cache/irkernel``.
"""

from __future__ import annotations

import contextlib
import errno
import re
import hashlib
import logging
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import irkernel

logger = logging.getLogger("irkernel.runtime.cache")

MAGIC = b"IRKCACHE2\x00"
#: The version written in every entry's header; entries of other versions are misses.
VERSION = irkernel.__version__
KINDS = ("obj", "index", "tuned")
_MARKER = ".loading-"
_DIR_MODE = 0o700

#: A payload check: the problem with ``payload`` as text, or None when it is usable.
PayloadCheck = Callable[[bytes], "str | None"]


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


def encode(payload: bytes, version: str = VERSION) -> bytes:
    """A cache file: header (written by ``version``) and payload."""
    tag = version.encode()
    if len(tag) > 255:
        raise ValueError(f"cache: version string of {len(tag)} bytes (at most 255)")
    return (MAGIC + bytes([len(tag)]) + tag + len(payload).to_bytes(8, "little")
            + hashlib.sha256(payload).digest() + payload)


def read_header(data: bytes) -> tuple[str, bytes, bytes] | None:
    """(version, sha256, payload) of an intact cache file, else None."""
    if len(data) < len(MAGIC) + 1 or not data.startswith(MAGIC):
        return None
    at = len(MAGIC) + 1
    end = at + data[len(MAGIC)]
    size_at, sum_at = end, end + 8
    if len(data) < sum_at + 32:
        return None
    size = int.from_bytes(data[size_at:sum_at], "little")
    checksum, payload = data[sum_at:sum_at + 32], data[sum_at + 32:]
    if len(payload) != size or hashlib.sha256(payload).digest() != checksum:
        return None
    return data[at:end].decode(errors="replace"), checksum, payload


def decode(data: bytes) -> bytes | None:
    """The payload of an intact cache file (of any version), or None."""
    header = read_header(data)
    return None if header is None else header[2]


#: An index payload as stored: key, object key, symbol, sha256 of the object (hex).
_INDEX = re.compile(rb"([0-9a-z]+) ([0-9a-z]+) ([A-Za-z0-9_]+) ([0-9a-f]{64})")


def _start_time(pid: int) -> str:
    """The kernel's start time of process ``pid`` (Linux ``/proc``), or "" if unknown.

    With the pid it tells a live process from a new one that reused the pid.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[-1].split()
        return fields[19].decode()  # field 22 of stat(5), counted after "(comm)"
    except (OSError, IndexError, UnicodeDecodeError):
        return ""


def _alive(pid: int, started: str) -> bool:
    """Whether the process that wrote a marker (pid, start time) is still running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OverflowError:
        return False
    return not started or _start_time(pid) in ("", started)


def _read_regular(path: Path) -> tuple[bytes | None, str | None]:
    """(contents, None), or (None, problem) when ``path`` is not a readable regular file.

    ``O_NOFOLLOW`` refuses a symlink in the last component and ``O_NONBLOCK`` keeps
    a FIFO from blocking the open; ``fstat`` on the open descriptor then decides.
    (None, None) when the entry does not exist.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, "is a symbolic link"
        return None, f"can not be opened ({exc.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a directory" if stat.S_ISDIR(info.st_mode) else
                    "a FIFO" if stat.S_ISFIFO(info.st_mode) else
                    "a socket" if stat.S_ISSOCK(info.st_mode) else "a device or special file")
            return None, f"is {kind}, not a regular file"
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks), None
    except OSError as exc:
        return None, f"can not be read ({exc.strerror})"
    finally:
        os.close(fd)


class DiskCache:
    """Content-addressed files under ``directory`` (see the module docstring).

    Parameters
    ----------
    directory : path, optional
        Defaults to :func:`default_directory`.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None,
                 version: str = VERSION) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()
        self.version = version
        self._usable: bool | None = None
        #: object key -> sha256 of the object, as read, written, or named by an index entry
        self._objects: dict[str, bytes] = {}

    # -- the directory --------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        """Whether the directory may be used: absent (it is created ``0700`` on the first
        write), or a directory owned by this user. Decided once per cache object."""
        if self._usable is None:
            self._usable = self._check_directory()
        return self._usable

    def _check_directory(self) -> bool:
        try:
            info = os.stat(self.directory)
        except FileNotFoundError:
            return True
        except OSError as exc:
            logger.warning("cache directory %s is not usable (%s); building without a cache",
                           self.directory, exc.strerror)
            return False
        if not stat.S_ISDIR(info.st_mode):
            logger.warning("cache directory %s is not a directory; building without a cache",
                           self.directory)
            return False
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            logger.warning("cache directory %s is owned by another user (uid %d); refusing "
                           "it and building without a cache", self.directory, info.st_uid)
            return False
        return True

    def _make_dirs(self, path: Path) -> None:
        """Create ``path`` (inside the cache directory): the cache directory and every
        new directory in it ``0700``; missing ancestors of the cache directory as usual."""
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        missing = []
        for parent in (path, *path.parents):
            if parent == self.directory.parent or parent.is_dir():
                break
            missing.append(parent)
        for parent in reversed(missing):
            with contextlib.suppress(FileExistsError):
                parent.mkdir(mode=_DIR_MODE)

    def path(self, kind: str, key: str) -> Path:
        if kind not in KINDS or not key.isalnum():
            raise ValueError(f"cache: bad entry {kind}/{key}")
        return self.directory / kind / key[:2] / key

    # -- entries --------------------------------------------------------------------------
    def get(self, kind: str, key: str, check: PayloadCheck | None = None) -> bytes | None:
        """The payload stored under ``kind/key``; None on a miss or a bad entry.

        Parameters
        ----------
        kind, key : str
        check : callable, optional
            ``check(payload) -> problem or None``; a problem makes the entry bad.

        A bad entry (corrupt, not a regular file, failing ``check``) is logged and
        removed; one that a process died loading is quarantined (module docstring).
        """
        if not self.usable:
            return None
        path = self.path(kind, key)
        if self._died_loading(path):
            return None
        data, problem = _read_regular(path)
        if data is None:
            if problem is not None:
                self._discard(path, problem)
            return None
        payload, problem = self._open(kind, key, data)
        if payload is not None and check is not None:
            problem = check(payload)
            if problem is not None:
                problem = f"holds a bad payload ({problem})"
        if problem is not None:
            self._discard(path, problem)
            return None
        return payload

    def _open(self, kind: str, key: str, data: bytes) -> tuple[bytes | None, str | None]:
        """(payload, None) of an intact entry of this version that belongs where it was
        found, else (None, what is wrong)."""
        header = read_header(data)
        if header is None:
            return None, "is corrupt"
        version, checksum, payload = header
        if version != self.version:
            return None, f"was written by irkernel {version!r}, this is {self.version!r}"
        if kind == "obj":
            named = self._objects.setdefault(key, checksum)
            if named != checksum:
                return None, "is not the object its index entries name (sha256 differs)"
            return payload, None
        if kind != "index":  # the caller's check binds the payload to its key
            return payload, None
        entry = _INDEX.fullmatch(payload)
        if entry is None:
            return None, "does not hold an object key and a symbol"
        owner, obj, symbol, obj_sum = entry.groups()
        if owner.decode() != key:
            return None, f"was written for key {owner.decode()}, not for this one"
        known = self._objects.setdefault(obj.decode(), bytes.fromhex(obj_sum.decode()))
        if known.hex() != obj_sum.decode():
            return None, "names another version of its object (sha256 differs)"
        return obj + b" " + symbol, None

    def put(self, kind: str, key: str, payload: bytes) -> None:
        """Store ``payload`` atomically (temp file + ``os.replace``); failures only log."""
        if not self.usable:
            return
        path = self.path(kind, key)
        if kind == "obj":
            self._objects[key] = hashlib.sha256(payload).digest()
        elif kind == "index":
            payload = self._index_payload(key, payload)
            if payload is None:
                return
        try:
            self._make_dirs(path.parent)
            fd, tmp = tempfile.mkstemp(prefix=f".{key}.", dir=path.parent)  # mode 0600
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(encode(payload, self.version))
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as exc:
            logger.warning("cannot write cache entry %s: %s", path, exc)

    def _index_payload(self, key: str, payload: bytes) -> bytes | None:
        """The stored form of ``index/key`` = ``b"<object key> <symbol>"``: the key and
        the object's sha256 added (None, logged, when the object is not known)."""
        parts = payload.split()
        obj = parts[0].decode(errors="replace") if len(parts) == 2 else ""
        checksum = self._objects.get(obj) if obj.isalnum() else None
        if checksum is None:
            data, _ = _read_regular(self.path("obj", obj)) if obj.isalnum() else (None, None)
            header = read_header(data) if data is not None else None
            if header is None:
                logger.warning("cache: index entry %s names object %r, which is not in the "
                               "cache; not writing it", key, obj)
                return None
            checksum = self._objects[obj] = header[1]
        entry = key.encode() + b" " + payload + b" " + checksum.hex().encode()
        if _INDEX.fullmatch(entry) is None:
            raise ValueError(f"cache: bad index payload {payload!r} for {key}")
        return entry

    def discard(self, kind: str, key: str, problem: str) -> None:
        """Remove ``kind/key`` (logged with ``problem``): an entry its user found bad."""
        if self.usable:
            self._discard(self.path(kind, key), problem)

    def _discard(self, path: Path, problem: str) -> None:
        logger.warning("cache entry %s %s; removing it and rebuilding", path, problem)
        with contextlib.suppress(OSError):
            path.unlink()  # a FIFO, socket, device or symlink goes too (never followed)

    # -- crash-safe loading ---------------------------------------------------------------
    @contextlib.contextmanager
    def loading(self, kind: str, *keys: str) -> Iterator[None]:
        """Mark ``kind/key`` entries as being loaded into this process for the body.

        Wrap the code that hands cached payloads to native code (the JIT linker).
        If the process dies inside, the markers stay, and the next :meth:`get` of
        those entries quarantines them instead of crashing again.
        """
        markers = []
        if self.usable:
            stamp = f"{os.getpid()} {_start_time(os.getpid())}\n".encode()
            for key in keys:
                marker = self.path(kind, key).with_name(f"{key}{_MARKER}{os.getpid()}")
                try:
                    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                                 | getattr(os, "O_NOFOLLOW", 0), 0o600)
                    try:
                        os.write(fd, stamp)
                    finally:
                        os.close(fd)
                    markers.append(marker)
                except OSError as exc:  # best effort, like every write of the cache
                    logger.warning("cannot write cache marker %s: %s", marker, exc)
        try:
            yield
        finally:
            for marker in markers:
                with contextlib.suppress(OSError):
                    marker.unlink()

    def _died_loading(self, path: Path) -> bool:
        """Quarantine ``path`` if a process died while loading it; True when it did."""
        prefix = path.name + _MARKER
        try:
            names = [n for n in os.listdir(path.parent) if n.startswith(prefix)]
        except OSError:
            return False
        dead = []
        for name in names:  # one per process loading this entry right now (usually none)
            marker = path.with_name(name)
            data, _ = _read_regular(marker)
            fields = (data or b"").split()
            try:
                pid = int(fields[0]) if fields else int(name[len(prefix):])
            except ValueError:
                pid = -1
            started = fields[1].decode(errors="replace") if len(fields) > 1 else ""
            if pid <= 0 or not _alive(pid, started):
                dead.append(marker)
        if not dead:
            return False
        quarantine = self.directory / "quarantine"
        try:
            self._make_dirs(quarantine)
            os.replace(path, quarantine / f"{path.parent.parent.name}-{path.name}")
            logger.warning("a process died while loading cache entry %s; moved it to %s and "
                           "rebuilding", path, quarantine)
        except FileNotFoundError:
            pass  # another process got there first
        except OSError as exc:
            logger.warning("a process died while loading cache entry %s; removing it (%s)",
                           path, exc)
            with contextlib.suppress(OSError):
                path.unlink()
        for marker in dead:
            with contextlib.suppress(OSError):
                marker.unlink()
        return True


__all__ = ["KINDS", "MAGIC", "VERSION", "DiskCache", "decode", "default_directory", "digest",
           "encode", "read_header"]
