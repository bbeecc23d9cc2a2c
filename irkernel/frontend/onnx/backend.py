"""``onnx.backend`` API over irkernel: ``prepare`` imports and builds, ``run`` executes.

Layer: the top rung (with ``irkernel.cli``): it imports the frontend, ``passes`` and
``runtime``. ``IrkernelBackend.prepare(model, device="CPU", mode="build")`` imports
the model with :func:`~irkernel.frontend.onnx.from_onnx` and compiles it with
``runtime.build`` (``mode="interpret"`` runs it with the reference interpreter
instead, for quick checks). Inputs are matched to ``main``'s parameters in order;
inputs given for initializers (old models list those as graph inputs too) are
skipped, as onnx's test runner expects. A model with symbolic input dims is prepared
as a :class:`~irkernel.frontend.onnx.dynamic.DynamicModel`: ``run`` binds the dims from
the inputs' shapes and builds once per binding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

import runtime
from irkernel.frontend.onnx.common import NeedsConstant
from irkernel.frontend.onnx.dims import SymbolicDimsError
from irkernel.frontend.onnx.dynamic import DynamicModel
from irkernel.frontend.onnx.importer import from_onnx
from irkernel.ir.interp import interpret
from irkernel.ir.module import IRModule


def _shape_like(a: np.ndarray) -> bool:
    """A short float vector (Resize's scales or roi): bound as a constant when the model
    needs one; binding a data input too only folds it, the results are the same."""
    return a.ndim == 1 and a.size <= 16


_BFLOAT16 = onnx.helper.tensor_dtype_to_np_dtype(onnx.TensorProto.BFLOAT16)


class IrkernelRep(BackendRep):
    """A prepared model: ``run(inputs)`` returns the outputs in graph order.

    A model that computes a shape, axes or pads from a graph input (onnx's node tests
    feed ``Expand``'s shape or ``Range``'s bounds as inputs) cannot be compiled before
    the input is known: it is imported and built at ``run`` for the values given,
    binding the integer, bool and one-element inputs as constants, once per distinct set of values.
    A model with symbolic input dims is imported and built per binding of its dims
    (``DynamicModel``), which the inputs' shapes give.
    """

    def __init__(self, model: onnx.ModelProto, kwargs: dict[str, Any], mode: str) -> None:
        initializers = {i.name for i in model.graph.initializer}
        self._all_inputs = [i.name for i in model.graph.input]
        self.input_names = [n for n in self._all_inputs if n not in initializers]
        self._model, self._kwargs, self.mode = model, kwargs, mode
        self._bind_all = False  # set once a model needs every input bound (NonZero of floats)
        self._bfloat16 = {i.name for i in model.graph.input
                          if i.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16}
        self._specialized: dict[bytes, tuple[IRModule, Any, list[str]]] = {}
        self.dynamic: DynamicModel | None = None
        try:
            self.module: IRModule | None = from_onnx(model, **kwargs)
        except SymbolicDimsError:
            self.module, self._run = None, None
            self.dynamic = DynamicModel(model, **kwargs)
            self._dynamic_run = self.dynamic.build() if mode == "build" else None
        except NeedsConstant:
            self.module = None  # built at run time, for the given values
            self._run = None
        else:
            self._run = self._build(self.module)

    def _build(self, mod: IRModule) -> Any:
        return runtime.build(mod)["main"] if self.mode == "build" else None

    def _call(self, mod: IRModule, run: Any, arrays: list[np.ndarray]) -> list[np.ndarray]:
        params = mod["main"]
        fixed = []
        for a, node in zip(arrays, params.params.tolist(), strict=False):
            shape = params.shapes[int(params.shape_id[node])]
            # onnxruntime accepts a (1,) array for a declared scalar, and so does this
            fixed.append(a.reshape(shape) if a.shape != shape and a.size == int(
                np.prod(shape, dtype=np.int64)) else a)
        outs = list(run(*fixed)) if run is not None else interpret(mod, *fixed)
        # bfloat16 travels as uint16 bits (irkernel.ir.narrow); onnx hands out and expects
        # ml_dtypes.bfloat16 arrays (onnx's own dependency, reached through onnx's helper)
        return [o.view(_BFLOAT16) if params.node_type(int(node))[0] == "bfloat16" else o
                for o, node in zip(outs, params.outputs.tolist(), strict=True)]

    def _specialize(self, arrays: list[np.ndarray]) -> tuple[IRModule, Any, list[np.ndarray]]:
        """Import for these values, binding the integer, bool, one-element and short
        inputs; a model that still needs a constant (NonZero or Unique of float data) is
        imported with every input bound."""
        named = list(zip(self.input_names, arrays, strict=True))
        while True:
            bound = dict(named) if self._bind_all else {
                n: a for n, a in named if a.dtype.kind in "iub" or a.size <= 1 or _shape_like(a)}
            key = b"|".join(n.encode() + b"=" + a.dtype.str.encode() + repr(a.shape).encode()
                            + a.tobytes() for n, a in bound.items())
            hit = self._specialized.get(key)
            if hit is not None:
                break
            try:
                mod = from_onnx(self._model, const_inputs=self._typed(bound), **self._kwargs)
            except NeedsConstant:
                if self._bind_all:
                    raise
                self._bind_all = True
                continue
            hit = self._specialized[key] = (mod, self._build(mod), list(bound))
            break
        mod, run, names = hit
        rest = [a for n, a in zip(self.input_names, arrays, strict=True) if n not in names]
        return mod, run, rest

    def _typed(self, bound: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Bound bfloat16 inputs as bfloat16 again (they travel as uint16 bits)."""
        return {n: a.view(_BFLOAT16) if n in self._bfloat16 and a.dtype == np.uint16 else a
                for n, a in bound.items()}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise ValueError(f"missing inputs {missing} (the model takes "
                                 f"{self.input_names})")
            arrays = [inputs[n] for n in self.input_names]
        else:
            arrays = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            if len(arrays) == len(self._all_inputs) != len(self.input_names):
                keep = set(self.input_names)
                arrays = [a for a, n in zip(arrays, self._all_inputs, strict=True) if n in keep]
        arrays = [np.ascontiguousarray(a) for a in arrays]
        arrays = [a.view(np.uint16) if a.dtype == _BFLOAT16 else a for a in arrays]
        if self.module is not None:
            return tuple(self._call(self.module, self._run, arrays))
        if self.dynamic is not None:
            mod = self.dynamic.bind_from_inputs(*arrays)
            run = None if self._dynamic_run is None else self._dynamic_run["main"]
            return tuple(self._call(mod, run, arrays))
        mod, run, rest = self._specialize(arrays)
        return tuple(self._call(mod, run, rest))


class IrkernelBackend(Backend):
    """The irkernel ONNX backend (CPU only)."""

    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> IrkernelRep:
        if not cls.supports_device(device):
            raise ValueError(f"device {device!r} is not supported (CPU only)")
        mode = kwargs.pop("mode", "build")
        if mode not in ("build", "interpret"):
            raise ValueError(f"mode must be 'build' or 'interpret', got {mode!r}")
        super().prepare(model, device, **kwargs)
        options = {k: kwargs[k] for k in ("shape_dict", "dtype_dict", "opset") if k in kwargs}
        return IrkernelRep(model, options, mode)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Any = None, **kwargs: Any) -> tuple[np.ndarray, ...]:
        raise NotImplementedError("run_node: wrap the node in a model (onnx.helper) and use "
                                  "run_model")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper() == "CPU"


prepare = IrkernelBackend.prepare
run_model = IrkernelBackend.run_model
supports_device = IrkernelBackend.supports_device

__all__ = ["IrkernelBackend", "IrkernelRep", "prepare", "run_model", "supports_device"]
