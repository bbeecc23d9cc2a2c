"""Register tiles measured on this CPU (``runtime.tune``), which the templates prefer to
their analytic choice.

Why a table: the analytic tile (``conv.conv_tile``) is sized to the register file, which
is right for most shapes but not for all of them: the cache sizes, the number of pixel
tiles a small map leaves for the threads, and the core's load ports move the best tile.
Timing a few candidates per shape finds it; the result is plain data, so it can be stored
and travel to a worker like any config value.

The table is the PassContext config ``topi.tuned_tiles``: a :class:`TileTable` from a
signature key (:func:`conv_key`) to ``(most_rows, vectors)``, the two knobs of
``conv_tile``. Empty by default; ``runtime.build`` fills it from the on-disk cache entry
of the target it builds for, and a user may set it. A template that finds its signature
uses the tuned tile, any other the analytic one; the tile never changes an accumulation
order, so results stay bitwise the same. Imports irkernel.transform only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from irkernel import transform

#: Config: tiles measured by ``runtime.tune`` (a TileTable; empty: the analytic tiles).
TUNED_TILES = "topi.tuned_tiles"


@dataclass(frozen=True)
class TileTable:
    """Signature key -> tile, as sorted pairs (hashable: it is part of template memo keys)."""

    entries: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @classmethod
    def of(cls, mapping: Mapping[str, Iterable[int]]) -> TileTable:
        return cls(tuple(sorted((str(k), tuple(int(v) for v in tile))
                                for k, tile in mapping.items())))

    def get(self, key: str) -> tuple[int, ...] | None:
        for k, tile in self.entries:  # a table holds one entry per distinct conv: a few dozen
            if k == key:
                return tile
        return None

    def merged(self, other: TileTable) -> TileTable:
        """This table with ``other``'s entries added or replacing."""
        return TileTable.of({**dict(self.entries), **dict(other.entries)})

    def __len__(self) -> int:
        return len(self.entries)

    def to_json(self) -> str:
        return json.dumps({k: list(tile) for k, tile in self.entries}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TileTable:
        """Parse :meth:`to_json`'s text; ValueError naming the problem for anything else."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("tuned tiles: expected a JSON object")
        for key, tile in data.items():
            if not (isinstance(tile, list) and len(tile) == 2
                    and all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64
                            for v in tile)):
                raise ValueError(f"tuned tiles: entry {key!r} is not [rows, vectors] "
                                 f"with 1 <= each <= 64: {tile!r}")
        return cls.of(data)


transform.register_pass_config(
    TUNED_TILES, TileTable, TileTable(),
    description="register tiles measured by runtime.tune (signature -> (rows, vectors)); "
                "runtime.build loads the cached ones for its target")


def tuned_tiles() -> TileTable:
    """The current PassContext's tuned tiles."""
    return transform.PassContext.current().get_config(TUNED_TILES)


def conv_key(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int,
             strides: tuple[int, ...], pad_begin: tuple[int, ...], pad_end: tuple[int, ...],
             dilation: tuple[int, ...], dtype: str, bits: int) -> str:
    """The signature a tuned conv tile is stored under: everything ``scheduled_conv``
    specializes on, and the vector width it tiles for."""
    parts = (x_shape, w_shape, (groups,), strides, pad_begin, pad_end, dilation)
    return "conv:" + ";".join(",".join(map(str, p)) for p in parts) + f":{dtype}:{bits}"


__all__ = ["TUNED_TILES", "TileTable", "conv_key", "tuned_tiles"]
