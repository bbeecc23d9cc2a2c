"""The ONNX frontend: ``from_onnx(model) -> IRModule`` (needs ``pip install irkernel[onnx]``).

Layer: ``irkernel.frontend`` (imports ``irkernel.ir`` and ``onnx``; never transform,
passes or runtime). Two modules build and run models and so sit above ``runtime``, and
are not imported here: ``irkernel.frontend.onnx.dynamic`` (``DynamicModel``: a model with
symbolic dims, imported and built per binding of its dims) and
``irkernel.frontend.onnx.backend`` (the ``onnx.backend`` API, on the top layer).

Modules: ``common`` (values, context, converter table, errors), ``dims`` (the symbolic
dims of a model's inputs and their binding), ``symbolic`` (them as shape variables, for
``from_onnx(symbolic=True)``), ``dimvalues`` (shape arithmetic on symbolic dims at
import), ``importer`` (``from_onnx``),
``converters/`` (one converter class per ONNX op, grouped by kind). See ``docs/onnx.md``.
"""

from irkernel.frontend.onnx.common import (
    CONVERTERS,
    ONNXImportError,
    OnnxOpConverter,
    OpNotImplemented,
    register,
)
from irkernel.frontend.onnx.dims import DimError, SymbolicDims, SymbolicDimsError
from irkernel.frontend.onnx.importer import (
    from_onnx,
    load_model,
    sanitize_names,
    unsupported_ops,
)

__all__ = ["CONVERTERS", "DimError", "ONNXImportError", "OnnxOpConverter", "OpNotImplemented",
           "SymbolicDims", "SymbolicDimsError", "from_onnx", "load_model", "register",
           "sanitize_names", "unsupported_ops"]
