"""Window functions (BlackmanWindow, HammingWindow, HannWindow): constants at import.

A window depends only on its length, an input that must be a constant (``NeedsConstant``
otherwise; onnx's node tests feed it as an input, which the backend binds). The values
follow ``onnx.reference``'s formulas and arithmetic (Hamming and Hann in the output
dtype, Blackman in float64), ``periodic`` 1 (default: divide by N) or 0 (by N - 1).
The length is limited like every constant computed at import (``FOLD_MAX_ELEMENTS``).
Imports the converter machinery only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import Context, OnnxOpConverter, Value, register
from irkernel.frontend.onnx.converters.shape import ONNX_TO_NUMPY
from irkernel.ir import narrow
from irkernel.ir.ids import dtype_code

Args = list["Value | None"]


class _Window(OnnxOpConverter):
    @classmethod
    def _values(cls, n: np.ndarray, span: int) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def _impl_v17(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        size = int(np.asarray(ctx.const_value(args[0] if args else None,
                                              "input 'size'")).reshape(-1)[0])
        name = ONNX_TO_NUMPY.get(int(attrs.get("output_datatype", 1)))
        if name not in ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8",
                        "uint8", "int16", "uint16"):
            raise ctx.error(f"output_datatype {attrs.get('output_datatype')} is not supported")
        ctx.const_shape((max(size, 0),), "the window's length")
        span = size if int(attrs.get("periodic", 1)) else size - 1
        work = np.float32 if name in ("float16", "bfloat16") else \
            (np.dtype(name) if name.startswith("float") else np.float64)
        values = cls._values(np.arange(max(size, 0), dtype=work), span)
        code = dtype_code(name)
        return ctx.const(narrow.to_storage(values, code), code=code)


@register("BlackmanWindow")
class BlackmanWindow(_Window):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _values(cls, n: np.ndarray, span: int) -> np.ndarray:
        n = n.astype(np.float64)
        return np.cos(n * (np.pi * 2) / span) * -0.5 + np.cos(n * (np.pi * 4) / span) * 0.08 \
            + 0.42


@register("HammingWindow")
class HammingWindow(_Window):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _values(cls, n: np.ndarray, span: int) -> np.ndarray:
        alpha = 25.0 / 46.0
        return alpha - np.cos(n * np.pi * 2 / span) * (1 - alpha)


@register("HannWindow")
class HannWindow(_Window):
    graph_ops = ()  # constants only: computed at import

    @classmethod
    def _values(cls, n: np.ndarray, span: int) -> np.ndarray:
        return np.sin(n * np.pi / span) ** 2
