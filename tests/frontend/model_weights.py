"""Regenerate the stripped weights of the exported test models (see export_models.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

HERE = Path(__file__).resolve().parent / "models"
_ALL_NAMES = sorted(p.stem for p in HERE.glob("*.onnx"))
# exported with dynamic_axes: symbolic dims, run through DynamicModel (test_onnx_dynamic.py)
DYNAMIC_MODEL_NAMES = [n for n in _ALL_NAMES if n.endswith("_dynamic")]
MODEL_NAMES = [n for n in _ALL_NAMES if n not in DYNAMIC_MODEL_NAMES]  # every dim fixed


def restore(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of ``model`` with every stripped initializer regenerated from ``seed``
    (normal values with the recorded mean and standard deviation)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    props = {p.key: p.value for p in out.metadata_props}
    records = json.loads(props.get("irkernel.stripped", "[]"))
    rng = np.random.default_rng(seed)
    for rec in records:
        arr = rng.standard_normal(rec["dims"]).astype(rec["dtype"])
        arr = arr * np.asarray(rec["std"], rec["dtype"]) + np.asarray(rec["mean"], rec["dtype"])
        out.graph.initializer.append(numpy_helper.from_array(arr, rec["name"]))
    return out


def load(name: str, seed: int = 0) -> onnx.ModelProto:
    return restore(onnx.load(str(HERE / f"{name}.onnx")), seed)
