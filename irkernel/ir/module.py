"""IRModule: an immutable mapping from function names to graph Functions and PrimFuncs.

An IRModule pickles as its functions and attributes (each Function pickles
its columns out of band with protocol 5, see ``irkernel.ir.pickling``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from irkernel.ir.hooks import Hook

#: ``print_module(mod) -> str``, installed by the text layer.
PRINT_MODULE = Hook("print an IRModule", "irkernel.text.printer")


def is_prim_func(value: object) -> bool:
    """Whether ``value`` is a TIR PrimFunc.

    ``irkernel.tir.PrimFunc`` sets the class attribute ``_irkernel_prim_func =
    True``; checking the marker keeps this module free of a ``tir`` import.
    """
    return bool(getattr(type(value), "_irkernel_prim_func", False))


class IRModule(Mapping[str, Any]):
    """Functions by name. Immutable: ``with_function``/``without`` return new modules.

    Values are :class:`irkernel.Function` (graph) or ``irkernel.tir.PrimFunc``.
    Equality is identity; use ``structural_equal`` to compare contents.
    """

    __slots__ = ("__weakref__", "_functions", "attrs")

    def __init__(self, functions: Mapping[str, Any] | None = None,
                 attrs: Mapping[str, Any] | None = None) -> None:
        funcs = dict(functions or {})
        for name in funcs:
            if not isinstance(name, str) or not name:
                raise TypeError(f"IRModule: function names must be non-empty str, got {name!r}")
        self._functions = MappingProxyType(funcs)
        self.attrs = MappingProxyType(dict(attrs or {}))

    @property
    def functions(self) -> Mapping[str, Any]:
        return self._functions

    def __getitem__(self, name: str) -> Any:
        try:
            return self._functions[name]
        except KeyError:
            known = ", ".join(self._functions) or "none"
            raise KeyError(f"IRModule has no function {name!r} (functions: {known})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (IRModule, (dict(self._functions), dict(self.attrs)))

    def with_function(self, name: str, func: Any) -> IRModule:
        """A module with ``name`` bound to ``func``; self when it already is."""
        if self._functions.get(name) is func:
            return self
        return IRModule({**self._functions, name: func}, self.attrs)

    def with_functions(self, funcs: Mapping[str, Any]) -> IRModule:
        """A module with these functions replaced or added; self when nothing changes."""
        if all(self._functions.get(k) is v for k, v in funcs.items()):
            return self
        return IRModule({**self._functions, **funcs}, self.attrs)

    def without(self, *names: str) -> IRModule:
        if not any(n in self._functions for n in names):
            return self
        drop = set(names)  # a set: dropping thousands of names is not O(F * len(names))
        return IRModule({k: v for k, v in self._functions.items() if k not in drop}, self.attrs)

    def script(self) -> str:
        return PRINT_MODULE(self)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"<IRModule: {', '.join(self._functions) or 'empty'}>"
