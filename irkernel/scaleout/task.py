"""How a task travels and runs on a worker: :func:`pack`/:func:`unpack` and :func:`call_task`.

Tasks and results cross process boundaries packed (pickle protocol 5,
buffers out of band as uint8 arrays; through ``/dev/shm`` files for local
pools, see ``shared_files``), so that a value that fails to pickle or to load
(a Function that does not validate) is that task's :class:`TaskError`
instead of a broken pool. Imports the standard library, NumPy, ``errors``
and ``shared_files``.
"""

from __future__ import annotations

import pickle
import traceback
from typing import Any

import numpy as np

from irkernel.scaleout.errors import portable, worker_name
from irkernel.scaleout.shared_files import Shared, write_shared


class Packed:
    """A value pickled with protocol 5: a small header and its buffers as uint8 arrays.

    Tasks and results travel packed (:func:`pack`), so that loading them
    (which validates Functions) happens inside :func:`call_task` on the
    worker and inside the engine's collection on the caller, where a failure
    is that task's error. Left to the engine, a failed load kills a process
    pool's worker or its result thread and breaks the pool. The buffers stay
    out of band when the engine pickles with protocol 5 (Dask, Ray); a
    process pool copies them into its stream (protocol 4), as it would the
    unpacked value.
    """

    __slots__ = ("buffers", "header")

    def __init__(self, header: bytes, buffers: list[Any]) -> None:
        self.header, self.buffers = header, buffers

    @property
    def nbytes(self) -> int:
        """Bytes of the header and the buffers (what travels)."""
        return len(self.header) + sum(b.nbytes for b in self.buffers)


def pack(value: Any) -> Packed:
    """``value`` pickled with protocol 5, its buffers out of band (no copy)."""
    raw: list[pickle.PickleBuffer] = []
    header = pickle.dumps(value, protocol=5, buffer_callback=raw.append)
    return Packed(header, [np.frombuffer(b.raw(), np.uint8) for b in raw])


def unpack(packed: Packed | Shared) -> Any:
    """The value of :func:`pack` (its arrays wrap the buffers, also when shared)."""
    if isinstance(packed, Shared):
        return pickle.loads(packed.header, buffers=packed.buffers())
    return pickle.loads(packed.header, buffers=packed.buffers)


def _reply(value: Any, payload: Any) -> Packed | Shared:
    """The packed result; in a file beside the task's when the task came in one."""
    packed = pack(value)
    if isinstance(payload, Shared):
        shared = write_shared(packed.header, packed.buffers, payload.path + ".out")
        if shared is not None:
            return shared
    return packed


def call_task(payload: Any, remote: bool) -> tuple[bool, Any]:
    """Run a task on the worker: ``(True, result)`` or ``(False, (exc, tb, worker))``.

    ``payload`` is ``(fn, args)``, packed when ``remote`` (and the result is
    packed back, shared through ``/dev/shm`` when the task was, see
    :mod:`~irkernel.scaleout.shared_files`). Exceptions are caught here so
    that every engine reports them the same way, with the worker's traceback
    text; ``remote`` makes them picklable.
    """
    try:
        fn, args = unpack(payload) if remote else payload
        value = fn(*args)
        return True, (_reply(value, payload) if remote else value)
    except Exception as exc:  # NOTE: the task's failure is data for the caller
        text = traceback.format_exc()
        return False, (portable(exc) if remote else exc, text, worker_name())


__all__ = ["Packed", "call_task", "pack", "unpack"]
