"""PrimFunc: a TIR function (parameters, body, attributes) and its module-level protocol.

A PrimFunc's parameters are buffers and scalar vars; vars that appear only in
buffer shapes or strides are *shape vars*, bound from the arguments' shapes
when the kernel is called. It follows destination-passing style (TVM's):
outputs are buffers the caller allocates, and the function returns nothing.

The class implements what ``IRModule``, ``ik.verify``, ``ik.structural_hash``
and the pass infrastructure expect of a non-graph function: the
``_irkernel_prim_func`` marker, ``script(name)``, ``verify(name)``,
``structural_digest()``, structural ``==``/``hash``, ``attrs`` and ``callees()``.
``script`` and ``verify`` call the ``PRINT`` / ``VERIFY`` hooks that ``irkernel.tir.printer``
and ``irkernel.tir.verify`` install. Imports the TIR node modules and ``irkernel.ir.hooks``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from irkernel.ir.hooks import Hook
from irkernel.tir.buffer import Buffer
from irkernel.tir.expr import Node, Var, _depth, _set
from irkernel.tir.functor import free_vars
from irkernel.tir.stmt import Stmt

#: ``script(func, name) -> str``: the TVMScript-like text (``irkernel.tir.printer.script``).
PRINT = Hook("print a PrimFunc", "irkernel.tir.printer")
#: ``verify(func, name)``: raise IRError on a broken rule (``irkernel.tir.verify``).
VERIFY = Hook("verify a PrimFunc", "irkernel.tir.verify")


class Attrs(Mapping[str, Any]):
    """An immutable, hashable str-keyed mapping (function attributes)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        items = dict(items or {})
        for key, value in items.items():
            if not isinstance(key, str):
                raise TypeError(f"attribute names must be str, got {key!r}")
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"attribute {key!r}: value must be hashable (use a tuple), "
                                f"got {type(value).__name__}") from None
        self._items = tuple(sorted(items.items()))

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return f"Attrs({dict(self._items)!r})"


@dataclass(frozen=True, slots=True)
class PrimFunc(Node):
    """A TIR function.

    Parameters
    ----------
    params : tuple of Buffer or Var
        The signature, in call order: buffers (arrays) and scalar vars.
    body : Stmt
    attrs : mapping, optional
        Function attributes (hashable values), e.g. ``global_symbol``.

    Examples
    --------
    >>> from irkernel import tir
    >>> a = tir.Buffer("a", (4,), "float32")
    >>> i = tir.Var("i")
    >>> f = tir.PrimFunc((a,), tir.For(i, 0, 4, "serial", tir.BufferStore(a, a[i] * 2.0, (i,))))
    >>> f.verify("double")
    """

    params: tuple[Buffer | Var, ...]
    body: Stmt
    attrs: Attrs = Attrs()  # noqa: RUF009 (immutable and hashable)

    _irkernel_prim_func: ClassVar[bool] = True

    def __post_init__(self) -> None:
        params = tuple(self.params)
        names: set[str] = set()
        for p in params:
            if not isinstance(p, (Buffer, Var)):
                raise TypeError(f"PrimFunc: parameters must be Buffers or Vars, got {p!r}")
            if p.name in names:
                raise ValueError(f"PrimFunc: duplicate parameter name {p.name!r}")
            names.add(p.name)
        if not isinstance(self.body, Stmt):
            raise TypeError(f"PrimFunc: body must be a Stmt, got {type(self.body).__name__}")
        _set(self, "params", params)
        _set(self, "attrs", self.attrs if isinstance(self.attrs, Attrs) else Attrs(self.attrs))
        _depth(self, *params, self.body)

    # -- signature ---------------------------------------------------------
    @property
    def buffer_params(self) -> tuple[Buffer, ...]:
        return tuple(p for p in self.params if isinstance(p, Buffer))

    @property
    def shape_vars(self) -> tuple[Var, ...]:
        """Vars used in parameter buffer shapes/strides that are not parameters, in order."""
        declared = {p.name for p in self.params if isinstance(p, Var)}
        out: dict[str, Var] = {}
        for buf in self.buffer_params:
            for e in (*buf.shape, *buf.strides):
                for v in free_vars(e).values():
                    if v.name not in declared:
                        out.setdefault(v.name, v)
        return tuple(out.values())

    # -- attributes ----------------------------------------------------------
    def with_attr(self, key: str, value: Any) -> PrimFunc:
        """A copy with attribute ``key`` set (``self`` when it already has that value)."""
        if key in self.attrs and self.attrs[key] == value:
            return self
        return self.replace(attrs=Attrs({**self.attrs, key: value}))

    def with_body(self, body: Stmt) -> PrimFunc:
        """A copy with ``body`` (``self`` when ``body`` is the current body)."""
        return self.replace(body=body)

    # -- module protocol ---------------------------------------------------
    def script(self, name: str | None = None) -> str:
        """TVMScript-like text (see :mod:`irkernel.tir.printer`)."""
        return PRINT(self, name if name is not None else self.attrs.get("global_symbol", "main"))

    def verify(self, name: str = "main") -> None:
        """Raise :class:`irkernel.IRError` naming ``name`` and the broken rule."""
        VERIFY(self, name)

    def structural_digest(self) -> bytes:
        """A 16-byte digest, equal for structurally equal PrimFuncs, stable across processes."""
        return hashlib.blake2b(repr(self).encode(), digest_size=16).digest()

    def callees(self) -> tuple[str, ...]:
        """Functions this PrimFunc calls: none (TIR calls only math intrinsics)."""
        return ()

    def __str__(self) -> str:
        return self.script()


__all__ = ["Attrs", "PrimFunc"]
