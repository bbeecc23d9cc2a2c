"""Trigonometric and hyperbolic ONNX ops (Sin ... Atanh): one graph op each, of the same
meaning (libm's functions; NaN outside the domain, as onnxruntime). Imports the converter
machinery only."""

from __future__ import annotations

from irkernel.frontend.onnx.converters.elementwise import unary_converter

for _name in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
              "Atanh"):
    unary_converter(_name, _name.lower())

__all__: list[str] = []
