"""The ONNX converter table, one module per kind of op (importing this package fills
``irkernel.frontend.onnx.common.CONVERTERS``)."""

from irkernel.frontend.onnx.converters import (
    constant_only,
    einsum,
    elementwise,
    extra,
    indexing,
    loss,
    nn,
    qlinear,
    qlinear_float,
    quant,
    reduce,
    resize,
    sampling,
    sequence,
    shape,
    signal,
    transformer,
    trig,
)

__all__ = ["constant_only", "einsum", "elementwise", "extra", "indexing", "loss", "nn",
           "qlinear", "qlinear_float", "quant", "reduce", "resize", "sampling", "sequence", "shape", "signal",
           "transformer", "trig"]
