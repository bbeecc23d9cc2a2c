"""Where the tiles of ``runtime.tune`` live between processes: one cache entry per target.

Why its own module: ``runtime.build`` reads the table on every build and ``runtime.tune``
writes it, and the tuner builds its candidates with ``runtime.build``. The entry
``tuned/<digest of the target key>`` holds ``{"target": key, "tiles": {signature:
[rows, vectors]}}``; an entry naming another target or holding anything else is a bad
entry (logged, removed, a miss), as the cache does for its other kinds. Imports irkernel,
passes and runtime.cache.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from irkernel import transform
from irkernel.target import CPUTarget
from passes.topi.tuned import TUNED_TILES, TileTable
from passes.topi.vector import current_target
from runtime.cache import DiskCache, digest


def cache_key(target: CPUTarget) -> str:
    return digest("tuned", target.key)


def _table_problem(target: CPUTarget) -> Callable[[bytes], str | None]:
    def problem(payload: bytes) -> str | None:
        try:
            data = json.loads(payload)
            if not isinstance(data, dict) or data.get("target") != target.key:
                return "written for another target"
            TileTable.from_json(json.dumps(data.get("tiles")))
        except (ValueError, TypeError, RecursionError) as exc:
            return str(exc) or type(exc).__name__
        return None
    return problem


def load_tuned(disk: DiskCache, target: CPUTarget) -> TileTable:
    """The tiles stored for ``target`` (empty when none, or when the entry is bad)."""
    payload = disk.get("tuned", cache_key(target), check=_table_problem(target))
    if payload is None:
        return TileTable()
    return TileTable.from_json(json.dumps(json.loads(payload)["tiles"]))


def store_tuned(disk: DiskCache, target: CPUTarget, table: TileTable,
                replaced: Iterable[str] = ()) -> None:
    """Merge ``table`` into the stored tiles of ``target``, first dropping the entries of
    the ``replaced`` keys (measured again, the analytic tile won)."""
    dropped = set(replaced)
    kept = TileTable.of({k: t for k, t in load_tuned(disk, target).entries if k not in dropped})
    merged = kept.merged(table)
    payload = {"target": target.key, "tiles": json.loads(merged.to_json())}
    disk.put("tuned", cache_key(target), json.dumps(payload, sort_keys=True).encode())


def tuned_config(disk: DiskCache | None) -> dict[str, TileTable]:
    """The config a build adds for the current context: the stored tiles of its target,
    unless the context sets ``topi.tuned_tiles`` itself or nothing is stored."""
    ctx = transform.PassContext.current()
    if disk is None or not disk.usable or TUNED_TILES in ctx.config:
        return {}
    table = load_tuned(disk, current_target())
    return {TUNED_TILES: table} if len(table) else {}

__all__ = ["cache_key", "load_tuned", "store_tuned", "tuned_config"]
