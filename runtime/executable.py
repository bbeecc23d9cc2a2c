"""Executable and Kernel: what ``runtime.build`` returns.

``ex["name"]`` is a :class:`Kernel`, called with NumPy arrays in
destination-passing style (see ``runtime/abi.py``); ``ex.get_source(fmt)``
returns the lowered TIR (``"tir"``), the optimized LLVM IR (``"llvm"``/``"ll"``)
or the host assembly (``"asm"``/``"s"``) of every kernel. Sources of kernels
that came from the on-disk cache are regenerated on demand.

The executable owns the JIT engine; kernels keep a reference to it, so a
kernel stays callable after the executable is dropped. It pickles as a
:class:`SavedExecutable`: the lowered module, the object bytes and where each
kernel's code lives, linked again by ``runtime.build.load_executable``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime import threadpool  # noqa: F401  (the parallel launch symbol, before kernels load)
from runtime.abi import CallingConvention
from runtime.jit import Engine
from runtime.launcher import KERNEL_TYPE

if TYPE_CHECKING:
    from irkernel.ir.module import IRModule
    from runtime.compile import LoweringSettings
    from runtime.executor import GraphExecutor
    from runtime.memory_plan import MemoryPlan
    from runtime.profile import Profile


@dataclass(frozen=True)
class KernelSymbol:
    """Where a kernel's code lives: its symbol in the linked objects, and its LLVM tier."""

    symbol: str
    tier: str


@dataclass(frozen=True)
class SavedObject:
    """One batch object, and a symbol it defines (checked before it is linked again)."""

    obj: bytes
    symbol: str


@dataclass(frozen=True)
class SavedExecutable:
    """The pickled form of an :class:`Executable`: enough to link it again on the same CPU.

    Attributes
    ----------
    module : IRModule
        The lowered module (PrimFuncs, and graph functions when ``has_graphs``).
    kernels : Mapping[str, KernelSymbol]
        Each PrimFunc's symbol and tier, by module name.
    objects : tuple of SavedObject
    settings : LoweringSettings
        How the kernels were lowered (``get_source`` lowers again with them).
    has_graphs : bool
    target_key : str
        The CPU the objects were compiled for (``runtime.target.Target.key``).
    """

    module: IRModule
    kernels: Mapping[str, KernelSymbol]
    objects: tuple[SavedObject, ...]
    settings: LoweringSettings
    has_graphs: bool
    target_key: str


class Kernel:
    """A compiled PrimFunc: ``kernel(*arrays)`` checks the arguments and runs it (returns None).

    Attributes
    ----------
    name : str
    signature : str
        The expected arguments, e.g. ``add(a: float32[n], c: float32[n] (written))``.
    """

    def __init__(self, name: str, convention: CallingConvention, address: int,
                 engine: Engine) -> None:
        self.name = name
        self.address = address
        self._convention = convention
        self._engine = engine  # keeps the machine code alive
        self._cfunc = KERNEL_TYPE(address)

    @property
    def signature(self) -> str:
        return self._convention.signature

    @property
    def convention(self) -> CallingConvention:
        """The argument checks and native types (the graph executor calls unchecked)."""
        return self._convention

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Run the kernel on ``args`` (checked first; see ``runtime/abi.py``).

        Raises
        ------
        TypeError, ValueError
            For a bad argument, naming it; nothing runs in that case.
        """
        slots = self._convention.pack(args, kwargs)
        self._cfunc(slots.ctypes.data)

    def __repr__(self) -> str:
        return f"<Kernel {self.signature}>"


class Executable(Mapping[str, "Kernel | GraphExecutor"]):
    """The compiled functions of a module, by name.

    A PrimFunc's entry is a :class:`Kernel` (destination passing); a graph
    Function's entry is a :class:`runtime.executor.GraphExecutor`
    (``ex["main"](*arrays) -> list[np.ndarray]``). The graph executors are
    listed first; ``ex.memory_plan(name)`` describes a graph's arena.
    """

    def __init__(self, kernels: dict[str, Kernel], sources: dict[str, Callable[[str], str]],
                 engine: Engine, graphs: dict[str, GraphExecutor] | None = None,
                 lowered: IRModule | None = None, *, saved: SavedExecutable | None = None,
                 loader: Callable[[SavedExecutable], Executable] | None = None) -> None:
        self._kernels = kernels
        self._saved, self._loader = saved, loader  # what pickles, and what loads it
        self._sources = sources
        self._engine = engine
        self._graphs = graphs or {}
        self._memo: dict[tuple[str, str], str] = {}
        #: The module after the lowering pipeline (None for a module of PrimFuncs only).
        self.lowered_module = lowered

    def __reduce__(self) -> tuple[Callable[[SavedExecutable], Executable],
                                  tuple[SavedExecutable]]:
        """Pickles as its :class:`SavedExecutable`; loading links the objects again in
        the loading process (same CPU only: ``runtime.build.load_executable``)."""
        if self._saved is None or self._loader is None:
            raise TypeError("this Executable was not made by runtime.build and cannot pickle")
        return self._loader, (self._saved,)

    def __getitem__(self, name: str) -> Kernel | GraphExecutor:
        found = self._graphs.get(name) or self._kernels.get(name)
        if found is None:
            known = ", ".join(self) or "none"
            raise KeyError(f"executable has no function {name!r} (functions: {known})")
        return found

    def __iter__(self) -> Iterator[str]:
        yield from self._graphs
        yield from self._kernels

    def __len__(self) -> int:
        return len(self._graphs) + len(self._kernels)

    def memory_plan(self, name: str = "main") -> MemoryPlan:
        """The memory plan of graph function ``name`` (``naive_bytes``, ``planned_bytes``...).

        Raises
        ------
        KeyError
            When ``name`` is not a graph function of the executable.
        """
        graph = self._graphs.get(name)
        if graph is None:
            known = ", ".join(self._graphs) or "none"
            raise KeyError(f"executable has no graph function {name!r} (graph functions: "
                           f"{known})")
        return graph.plan

    def profile(self, *inputs: Any, repeat: int = 10, function: str = "main") -> Profile:
        """Run graph function ``function`` ``repeat`` times with every kernel launch timed.

        The same kernels run in the same order as in ``ex[function](*inputs)`` (one
        launch at a time instead of one native loop per segment), so the outputs are
        the same (``profile.outputs``: the last run's). See ``runtime/profile.py``.

        Returns
        -------
        runtime.profile.Profile
            ``.rows`` (one :class:`runtime.profile.KernelRow` per kernel, slowest
            first), ``.render()``, ``.to_chrome_trace(path)``, ``.run_time``.

        Raises
        ------
        KeyError
            When ``function`` is not a graph function of the executable.
        ValueError
            When ``repeat`` is not an int >= 1; TypeError/ValueError for bad inputs.
        """
        from runtime.profile import profile_graph  # the profiler loads only when used

        graph = self._graphs.get(function)
        if graph is None:
            known = ", ".join(self._graphs) or "none"
            raise KeyError(f"executable has no graph function {function!r} (graph "
                           f"functions: {known})")
        return profile_graph(graph, self.lowered_module, inputs, repeat)

    def get_source(self, fmt: str = "llvm") -> str:
        """The generated code of every kernel, in module order.

        Parameters
        ----------
        fmt : {"llvm", "ll", "asm", "s", "tir"}
            Optimized LLVM IR, host assembly, or the lowered TIR script.

        Raises
        ------
        ValueError
            For another format.
        """
        kind = {"llvm": "llvm", "ll": "llvm", "asm": "asm", "s": "asm", "tir": "tir"}.get(fmt)
        if kind is None:
            raise ValueError(f"get_source: unknown format {fmt!r}; use 'llvm', 'asm' or 'tir'")
        parts = []
        for name, source in self._sources.items():
            key = (name, kind)
            if key not in self._memo:
                self._memo[key] = source(kind)
            parts.append(self._memo[key])
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"<Executable: {', '.join(self) or 'empty'}>"


__all__ = ["Executable", "Kernel", "KernelSymbol", "SavedExecutable", "SavedObject"]
