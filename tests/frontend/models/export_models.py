"""Export the PyTorch test models to ONNX with their large weights stripped.

Run OUTSIDE the project's environment (torch is never a dependency of irkernel):

    python3 -m venv /work/export-venv
    /work/export-venv/bin/pip install torch==2.14.1 torchvision==0.29.1 onnx
    /work/export-venv/bin/python tests/frontend/models/export_models.py

Each model is built with torchvision's (or torch.nn's) constructor and its own
random initialization (``torch.manual_seed(0)``, no pretrained weights), put in
eval mode and exported with the TorchScript exporter (``dynamo=False``) at opset
17. Every initializer with more than ``KEEP_ELEMENTS`` elements is then removed
from the file and recorded in the model's ``metadata_props`` under
``irkernel.stripped`` (name, dims, dtype, and the mean and standard deviation of
the exported values); ``tests/frontend/model_weights.py`` regenerates them
from a seed as normal values with those statistics, so a network keeps the
scale of its initialization while the file stays small. Batch-norm statistics
and other small tensors are kept as exported.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper

HERE = Path(__file__).resolve().parent
KEEP_ELEMENTS = 1024
OPSET = 17


class TinyTransformer(torch.nn.Module):
    """A 2-layer nn.TransformerEncoder over [batch, seq, 64] embeddings, with a head."""

    def __init__(self) -> None:
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                                 dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2,
                                                   enable_nested_tensor=False)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x).mean(dim=1))


class TinyLSTM(torch.nn.Module):
    """A 2-layer LSTM (input 16, hidden 32) over 12 steps, with a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(16, 32, num_layers=2, batch_first=False)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        return self.head(y[-1])


def _vit() -> torch.nn.Module:
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                             hidden_dim=64, mlp_dim=128, num_classes=10)


# name -> (constructor, input shape); CNNs at reduced resolution (64x64 or 96x96) so the
# tests run in seconds on naive kernels (the architectures are unchanged).
MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(), (1, 3, 64, 64)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), (1, 3, 64, 64)),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(), (1, 3, 64, 64)),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(), (1, 3, 64, 64)),
    "densenet121": (lambda: torchvision.models.densenet121(), (1, 3, 64, 64)),
    "googlenet": (lambda: torchvision.models.googlenet(aux_logits=False, init_weights=True),
                  (1, 3, 64, 64)),
    "shufflenet_v2_x0_5": (lambda: torchvision.models.shufflenet_v2_x0_5(), (1, 3, 64, 64)),
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(), (1, 3, 64, 64)),
    "convnext_tiny": (lambda: torchvision.models.convnext_tiny(), (1, 3, 64, 64)),
    "vit_tiny": (_vit, (1, 3, 32, 32)),
    "transformer_encoder": (TinyTransformer, (2, 16, 64)),
    "lstm": (TinyLSTM, (12, 2, 16)),
}


def strip(model: onnx.ModelProto) -> onnx.ModelProto:
    records, kept = [], []
    for init in model.graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.size > KEEP_ELEMENTS and arr.dtype.kind == "f":
            records.append({"name": init.name, "dims": list(arr.shape), "dtype": str(arr.dtype),
                            "mean": float(arr.mean()), "std": float(arr.std())})
        else:
            kept.append(init)
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    prop = model.metadata_props.add()
    prop.key, prop.value = "irkernel.stripped", json.dumps(records)
    return model


def export(name: str) -> None:
    make, shape = MODELS[name]
    torch.manual_seed(0)
    net = make().eval()
    x = torch.randn(*shape)
    path = HERE / f"{name}.onnx"
    torch.onnx.export(net, (x,), str(path), opset_version=OPSET, dynamo=False,
                      input_names=["input"], output_names=["output"], do_constant_folding=True)
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    model = strip(model)
    onnx.save(model, str(path))
    print(f"{name}: {path.stat().st_size / 1e3:.1f} kB, {len(model.graph.node)} nodes")


if __name__ == "__main__":
    np.random.seed(0)
    for model_name in sys.argv[1:] or MODELS:
        export(model_name)
