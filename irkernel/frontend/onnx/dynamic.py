"""``DynamicModel``: an ONNX model with symbolic dims, imported once and bound per call.

A model that declares ``batch`` or ``seq`` dims is imported ONCE with its dims as shape
variables (``from_onnx(..., symbolic=True)``), and each binding is that module with the
values substituted (``irkernel.ir.binding.specialize``: the shape table and the reshape
targets, no re-import, no per-node Python). The runtime does not build symbolic modules
yet (issue 25), so builds are still per binding, the way XLA does it:

- :class:`DynamicModel` reads the model once (checked, external data loaded) and its
  symbolic dims (:class:`~irkernel.frontend.onnx.dims.SymbolicDims`: shared names are
  one dim, ``?`` dims get a name, expression dims are evaluated, ``shape_dict`` fixes
  dims, ``bounds`` limit them). ``bind(batch=4)`` is the module at that binding: the
  symbolic module (imported on first use, :attr:`DynamicModel.symbolic_module`)
  specialized, or, when the symbolic import failed (an op that can not handle a symbolic
  dim: :attr:`DynamicModel.symbolic_error` says which) or the binding is outside what
  the symbolic module allows (a dim of 0), ``from_onnx`` with every input's shape.
  ``bind_from_inputs(*arrays)`` takes the binding from the arrays' shapes. The last
  ``max_modules`` modules are kept.
- :meth:`DynamicModel.build` returns a :class:`DynamicExecutable`, whose
  ``["main"](*arrays)`` binds the dims from the arrays, builds on the first call at a
  binding (``runtime.build``; the kernel cache makes a binding whose kernels were
  compiled before cheap) and runs. The last ``max_builds`` executables are kept (least
  recently used dropped first), so a server fed many sizes does not grow without bound.

One executable for every size (kernels that take the symbolic extents at run time,
memory planned per binding) is the rest of issue 25; it replaces the per-binding
builds behind the same calls.

Layer: its own rung above ``runtime`` (it builds), below ``irkernel.cli`` and
``irkernel.frontend.onnx.backend``, which use it (``tests/test_layering.py``). The
symbolic dims themselves are in the frontend (``dims.py``), below ``runtime``.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

import runtime
from irkernel.frontend.onnx.dims import SymbolicDims
from irkernel.frontend.onnx.importer import from_onnx, load_model, sanitize_names
from irkernel.frontend.onnx.symbolic import variable_names
from irkernel.ir.binding import specialize
from irkernel.ir.module import IRModule

_V = TypeVar("_V")


class _Recent(Generic[_V]):
    """The values of the last ``size`` keys; the least recently used one is dropped first.
    One lock: two threads asking for one new key make it once."""

    def __init__(self, size: int, what: str) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"{what} must be an int >= 1, got {size!r}")
        self.size = size
        self._items: OrderedDict[Hashable, _V] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: Hashable, make: Callable[[], _V]) -> _V:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            value = make()
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            return value

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._items)


def _shapes_of(arrays: Sequence[Any]) -> list[tuple[int, ...]]:
    return [tuple(a.shape) if hasattr(a, "shape") else np.shape(a) for a in arrays]


class DynamicModel:
    """An ONNX model whose symbolic input dims are bound per call (module doc).

    Parameters
    ----------
    model : onnx.ModelProto, path or bytes
        As for ``from_onnx`` (read and checked once, here).
    shape_dict : mapping, optional
        ``{input: shape}``: an int fixes an axis (and the dim named there, for every input
        that shares it), ``None`` or ``-1`` keeps the model's axis.
    dtype_dict : mapping, optional
        ``{input: dtype}`` overriding input dtypes.
    opset : int, optional
        The opset to convert at (default: the model's).
    bounds : mapping, optional
        ``{dim: (low, high)}``, inclusive, either end ``None``: a binding outside is a
        :class:`~irkernel.frontend.onnx.dims.DimError` naming the dim (and the input).
    const_inputs : mapping, optional
        ``{input: array}`` binding graph inputs to constants, as for ``from_onnx``: they
        are not inputs of ``main`` (silero-vad's sample rate ``sr``, which picks an ``If``
        branch).
    max_modules : int
        How many imported modules :meth:`bind` keeps (each holds the weights).

    Raises
    ------
    ONNXImportError, ValueError
        As ``from_onnx`` for the model; for a ``shape_dict`` or ``bounds`` naming an
        unknown input or dim, or fixing one dim to two values.
    """

    def __init__(self, model: Any, shape_dict: Mapping[str, Sequence[Any]] | None = None,
                 dtype_dict: Mapping[str, Any] | None = None, opset: int | None = None,
                 bounds: Mapping[str, tuple[int | None, int | None]] | None = None, *,
                 const_inputs: Mapping[str, Any] | None = None, max_modules: int = 4) -> None:
        self.model = load_model(model)
        self._import_options = {"dtype_dict": dict(dtype_dict or {}), "opset": opset,
                                "const_inputs": dict(const_inputs or {})}
        inputs = {i.name for i in self.model.graph.input}
        stray = sorted(set(const_inputs or {}) - inputs)
        if stray:
            raise ValueError(f"const_inputs: {', '.join(map(repr, stray))} is not an input of "
                             f"the graph (inputs: {', '.join(sorted(inputs)) or 'none'})")
        constant = {i.name for i in self.model.graph.initializer} | set(const_inputs or {})
        given = {k: v for k, v in (shape_dict or {}).items() if k not in constant}
        self.symbolic = SymbolicDims(self.model.graph, given, bounds, skip=constant)
        self._given, self._bounds = given, dict(bounds or {})
        self._modules: _Recent[IRModule] = _Recent(max_modules, "max_modules")
        self._symbolic_lock = threading.Lock()
        self._symbolic_state: tuple[IRModule | None, Exception | None] | None = None

    @property
    def dims(self) -> tuple[str, ...]:
        """The names of the dims to bind, in order of first appearance."""
        return self.symbolic.dims

    @property
    def fixed(self) -> dict[str, int]:
        """The dims ``shape_dict`` fixed, with their values."""
        return dict(self.symbolic.fixed)

    @property
    def bounds(self) -> dict[str, tuple[int | None, int | None]]:
        return dict(self.symbolic.bounds)

    @property
    def input_names(self) -> tuple[str, ...]:
        """The inputs ``main`` takes, in order (the graph inputs that are not initializers)."""
        return self.symbolic.inputs

    def binding_from_inputs(self, *inputs: Any) -> dict[str, int]:
        """``{dim: value}`` read from the inputs' shapes (arrays, one per input, in order).

        Raises
        ------
        DimError
            Naming the input, the axis and the dim: two inputs that give a dim two values,
            an axis the model fixes to another extent, a value outside its bounds, a wrong
            rank or a wrong number of inputs.
        """
        return self.binding_from_shapes(_shapes_of(inputs))

    def binding_from_shapes(self, shapes: Sequence[Sequence[int]]) -> dict[str, int]:
        """``{dim: value}`` from the inputs' shapes (one per input, in order), checked as
        :meth:`binding_from_inputs` checks them."""
        values = self.symbolic.infer(shapes)
        return {name: values[name] for name in self.dims}

    @property
    def symbolic_module(self) -> IRModule | None:
        """The model imported once with its dims as shape variables (``from_onnx(...,
        symbolic=True)``, on first use), or None when that import failed
        (:attr:`symbolic_error`): bindings are then imported one by one."""
        with self._symbolic_lock:
            if self._symbolic_state is None:
                try:
                    mod = from_onnx(self.model, shape_dict=self._given, symbolic=True,
                                    bounds=self._bounds or None, **self._import_options)
                    self._symbolic_state = (mod, None)
                except (ValueError, NotImplementedError) as exc:  # ONNXImportError and co.
                    self._symbolic_state = (None, exc)
            return self._symbolic_state[0]

    @property
    def symbolic_error(self) -> Exception | None:
        """Why the symbolic import failed (an error naming the node and the dim), or None."""
        _ = self.symbolic_module
        assert self._symbolic_state is not None
        return self._symbolic_state[1]

    def bind(self, **values: int) -> IRModule:
        """The module at this binding (one value per dim; kept for later calls).

        Raises
        ------
        DimError
            For an unknown or missing dim, a value that is not an int, is out of bounds,
            or contradicts ``shape_dict``.
        """
        full = self.symbolic.values(values)
        return self._modules.get(self.symbolic.key(full), lambda: self.module_at(full))

    def bind_from_inputs(self, *inputs: Any) -> IRModule:
        """``bind(**binding_from_inputs(*inputs))``."""
        return self.bind(**self.binding_from_inputs(*inputs))

    def module_at(self, values: Mapping[str, int]) -> IRModule:
        """The module at a full binding (every variable, fixed ones too; not cached): the
        symbolic module specialized to it, else :meth:`import_at` (module doc)."""
        mod = self.symbolic_module
        if mod is None:
            return self.import_at(values)
        func = mod["main"]
        names = variable_names(self.symbolic.dims, sanitize_names)
        by_variable = {names[d]: values[d] for d in self.symbolic.dims}
        try:
            bound = specialize(func, [by_variable[v] for v in func.shapes.symbols.var_names])
        except ValueError:  # outside the variables' bounds (a 0 dim): imported as before
            return self.import_at(values)
        return IRModule({**mod.functions, "main": bound})

    def import_at(self, values: Mapping[str, int]) -> IRModule:
        """``from_onnx`` at a full binding (every variable, fixed ones too; not cached)."""
        shapes = self.symbolic.shapes(values)
        return from_onnx(self.model, shape_dict=shapes, **self._import_options)

    def build(self, *, max_builds: int = 8, **build_options: Any) -> DynamicExecutable:
        """An executable for every binding: built per binding on first use (module doc).

        Parameters
        ----------
        max_builds : int
            How many built bindings are kept (least recently used dropped first).
        **build_options
            Passed to ``runtime.build`` (``opt_level``, ``cache``, ``progress``,
            ``engine``); checked here.
        """
        return DynamicExecutable(self, max_builds, build_options)

    def __repr__(self) -> str:
        fixed = "".join(f", {k}={v}" for k, v in self.symbolic.fixed.items())
        return f"<DynamicModel dims=({', '.join(self.dims)}){fixed}: {self.symbolic.describe()}>"


class DynamicExecutable(Mapping[str, "DynamicGraph"]):
    """``runtime.build`` of a :class:`DynamicModel` per binding of its dims.

    ``ex["main"](*arrays, out=None)`` runs at the binding the arrays give (building it on
    first use); :meth:`profile` and :meth:`executable` reach the executable of one binding
    (its ``memory_plan``, ``get_source``, ...). Which bindings are built: :attr:`bindings`.
    """

    def __init__(self, model: DynamicModel, max_builds: int,
                 build_options: Mapping[str, Any]) -> None:
        try:
            inspect.signature(runtime.build).bind(None, **build_options)
        except TypeError as exc:
            raise TypeError(f"DynamicModel.build: {exc} (the options of runtime.build)"
                            ) from None
        self.model, self._options = model, dict(build_options)
        self._builds: _Recent[runtime.Executable] = _Recent(max_builds, "max_builds")

    def executable(self, **values: int) -> runtime.Executable:
        """The executable at this binding (built now if it is not kept)."""
        full = self.model.symbolic.values(values)
        return self._builds.get(self.model.symbolic.key(full), lambda: runtime.build(
            self.model.module_at(full), **self._options))

    def executable_for(self, *inputs: Any) -> runtime.Executable:
        """The executable at the binding the inputs' shapes give."""
        return self.executable(**self.model.binding_from_inputs(*inputs))

    @property
    def bindings(self) -> list[dict[str, int]]:
        """The built bindings that are kept, least recently used first."""
        return [dict(zip(self.model.dims, key, strict=True)) for key in self._builds.keys()]

    def profile(self, *inputs: Any, repeat: int = 10, function: str = "main") -> Any:
        """``Executable.profile`` at the inputs' binding (``runtime.profile.Profile``)."""
        return self.executable_for(*inputs).profile(*inputs, repeat=repeat, function=function)

    def __getitem__(self, name: str) -> DynamicGraph:
        if name != "main":
            raise KeyError(f"executable has no function {name!r} (functions: main)")
        return DynamicGraph(self, name)

    def __iter__(self) -> Iterator[str]:
        yield "main"

    def __len__(self) -> int:
        return 1

    def __repr__(self) -> str:
        return (f"<DynamicExecutable dims=({', '.join(self.model.dims)}), "
                f"{len(self._builds.keys())} of at most {self._builds.size} bindings built>")


class DynamicGraph:
    """``ex["main"]`` of a :class:`DynamicExecutable`: binds, builds if needed, runs."""

    def __init__(self, owner: DynamicExecutable, name: str) -> None:
        self.owner, self.name = owner, name

    def __call__(self, *inputs: Any, out: Sequence[np.ndarray] | None = None
                 ) -> list[np.ndarray]:
        graph = self.owner.executable_for(*inputs)[self.name]
        return graph(*inputs, out=out)

    def __repr__(self) -> str:
        return f"<DynamicGraph {self.name!r} of {self.owner!r}>"


__all__ = ["DynamicExecutable", "DynamicGraph", "DynamicModel"]
