"""The ONNX frontend: ``from_onnx(model) -> IRModule`` (needs ``pip install irkernel[onnx]``).

Layer: ``irkernel.frontend`` (imports ``irkernel.ir`` and ``onnx``; never transform,
passes or runtime). ``irkernel.frontend.onnx.backend`` (the ``onnx.backend`` API, which
builds and runs models) is the exception on the top layer and is not imported here.

Modules: ``common`` (values, context, converter table, errors), ``importer``
(``from_onnx``), ``converters/`` (one converter class per ONNX op, grouped by kind).
See ``docs/onnx.md``.
"""

from irkernel.frontend.onnx.common import (
    CONVERTERS,
    ONNXImportError,
    OnnxOpConverter,
    OpNotImplemented,
    register,
)
from irkernel.frontend.onnx.importer import from_onnx, sanitize_names, unsupported_ops

__all__ = ["CONVERTERS", "ONNXImportError", "OnnxOpConverter", "OpNotImplemented", "from_onnx",
           "register", "sanitize_names", "unsupported_ops"]
