"""Export the PyTorch test models to ONNX with their large weights stripped.

Run OUTSIDE the project's environment (torch is never a dependency of irkernel):

    python3 -m venv /work/export-venv
    /work/export-venv/bin/pip install torch==2.13.0+cpu onnx==1.23.2 numpy==2.4.6
    /work/export-venv/bin/pip install --no-deps torchvision==0.28.0 pillow==13.0.0
    /work/export-venv/bin/python tests/frontend/models/export_models.py [name ...]

Each model is built with torchvision's (or torch.nn's) constructor and its own
random initialization (``torch.manual_seed(0)``, no pretrained weights), put in
eval mode and exported with the TorchScript exporter (``dynamo=False``) at opset
17. Every initializer with more than ``KEEP_ELEMENTS`` elements is then removed
from the file and recorded in the model's ``metadata_props`` under
``irkernel.stripped`` (name, dims, dtype, and the mean and standard deviation of
the exported values); ``tests/frontend/model_weights.py`` regenerates them
from a seed as normal values with those statistics, so a network keeps the
scale of its initialization while the file stays small. Batch-norm statistics
and other small tensors are kept as exported (in eval mode the exporter folds a batch
norm that follows a conv into the conv's weights and bias). ``--no-deps`` keeps pip
from replacing the CPU torch with the one torchvision's wheel pins. (The first twelve
files were exported with torch 2.14.1 and torchvision 0.29.1; conv1d_net, regnet_x_400mf,
mlp and the ``*_dynamic`` models with the versions above.)

The ``*_dynamic`` models are exported with ``dynamic_axes``: their batch dim (and the
transformer's sequence dim) is symbolic (``dim_param`` "batch", "seq"), so a test must
fix it through ``from_onnx(model, shape_dict=...)``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper


_SCHEMAS: list[torch.library.Library] = []  # keeps the definitions below registered


def _import_torchvision() -> types.ModuleType:
    """torchvision, importable with a CPU-only torch even when its wheel is the CUDA build.

    That build's C extension needs torch's CUDA libraries and does not load; torchvision's
    import then fails registering fake kernels for its ``nms`` ops. The models here use
    none of its C ops, so the two schemas are defined first when the extension is absent.
    """
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        raise SystemExit("torchvision is not installed in this environment")
    extension = next(Path(spec.origin).parent.glob("_C*.so"), None)
    try:
        if extension is None:
            raise OSError("no _C extension")
        torch.ops.load_library(str(extension))
    except OSError:
        lib = torch.library.Library("torchvision", "DEF")
        for op in ("nms", "qnms"):
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _SCHEMAS.append(lib)
    import torchvision

    return torchvision


torchvision = _import_torchvision()

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


class MaskedEncoderLayer(torch.nn.Module):
    """nn.TransformerEncoderLayer's computation (post-norm, ReLU feed-forward, no dropout)
    written out: nn.MultiheadAttention's TorchScript export bakes the traced sequence
    length into a Reshape (``q.view(tgt_len, bsz * heads, head_dim)``), so its export
    runs at that length only. Every reshape here takes the length from the input."""

    def __init__(self, d_model: int = 64, nhead: int = 4, dim_feedforward: int = 128) -> None:
        super().__init__()
        self.nhead = nhead
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)
        self.out = torch.nn.Linear(d_model, d_model)
        self.norm1 = torch.nn.LayerNorm(d_model)
        self.norm2 = torch.nn.LayerNorm(d_model)
        self.feedforward = torch.nn.Sequential(torch.nn.Linear(d_model, dim_feedforward),
                                               torch.nn.ReLU(),
                                               torch.nn.Linear(dim_feedforward, d_model))

    def forward(self, x: torch.Tensor, key_bias: torch.Tensor) -> torch.Tensor:
        batch, seq, d_model = x.shape
        head_dim = d_model // self.nhead
        q, k, v = self.qkv(x).reshape(batch, seq, 3, self.nhead, head_dim).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / head_dim ** 0.5 + key_bias
        y = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, seq, d_model)
        x = self.norm1(x + self.out(y))
        return self.norm2(x + self.feedforward(x))


class TinyMaskedTransformer(torch.nn.Module):
    """A 2-layer encoder (d_model 64, 4 heads, feed-forward 128) over [batch, seq, 64] with
    an attention mask input: ``mask`` [batch, seq] is 1.0 for a real token and 0.0 for
    padding (as tokenizers give it); padded keys get -1e4 added before the softmax, and
    the pooling averages the real tokens only."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([MaskedEncoderLayer(), MaskedEncoderLayer()])
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        key_bias = ((1.0 - mask) * -1e4)[:, None, None, :]  # [batch, 1, 1, seq]
        for layer in self.layers:
            x = layer(x, key_bias)
        pooled = (x * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)
        return self.head(pooled)


class Conv1dNet(torch.nn.Module):
    """A 1-D conv stack over 1,000 steps of 4 channels: three Conv1d+BatchNorm+ReLU blocks
    (stride 2, stride 2, dilation 2), global average pooling and a linear head."""

    def __init__(self) -> None:
        super().__init__()

        def block(cin: int, cout: int, k: int, stride: int = 1,
                  dilation: int = 1) -> list[torch.nn.Module]:
            return [torch.nn.Conv1d(cin, cout, k, stride=stride, dilation=dilation,
                                    padding=dilation * (k // 2), bias=False),
                    torch.nn.BatchNorm1d(cout), torch.nn.ReLU()]

        self.features = torch.nn.Sequential(*block(4, 32, 7, stride=2),
                                            *block(32, 64, 5, stride=2),
                                            *block(64, 64, 3, dilation=2),
                                            torch.nn.AdaptiveAvgPool1d(1), torch.nn.Flatten())
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))


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
    "conv1d_net": (Conv1dNet, (1, 4, 1000)),
    "regnet_x_400mf": (lambda: torchvision.models.regnet_x_400mf(), (1, 3, 64, 64)),
    "mlp": (_mlp, (1, 784)),
    # dynamic_axes: the input shape is the one traced; its symbolic dims are fixed by the
    # tests (see test_onnx_models.py)
    "resnet18_dynamic": (lambda: torchvision.models.resnet18(), (2, 3, 64, 64)),
    "transformer_encoder_dynamic": (TinyMaskedTransformer, (2, 16, 64)),
}

# name -> {input or output name: {axis: dim_param}} for torch.onnx.export's dynamic_axes
DYNAMIC_AXES = {
    "resnet18_dynamic": {"input": {0: "batch"}, "output": {0: "batch"}},
    "transformer_encoder_dynamic": {"input": {0: "batch", 1: "seq"},
                                    "mask": {0: "batch", 1: "seq"},
                                    "output": {0: "batch"}},
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
    args: tuple[torch.Tensor, ...] = (torch.randn(*shape),)
    input_names = ["input"]
    if isinstance(net, TinyMaskedTransformer):  # the last tokens of the second row padded
        mask = torch.ones(shape[:2])
        mask[1, shape[1] // 2:] = 0.0
        args, input_names = (*args, mask), ["input", "mask"]
    path = HERE / f"{name}.onnx"
    torch.onnx.export(net, args, str(path), opset_version=OPSET, dynamo=False,
                      input_names=input_names, output_names=["output"],
                      dynamic_axes=DYNAMIC_AXES.get(name), do_constant_folding=True)
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    model = strip(model)
    onnx.save(model, str(path))
    print(f"{name}: {path.stat().st_size / 1e3:.1f} kB, {len(model.graph.node)} nodes")


if __name__ == "__main__":
    np.random.seed(0)
    for model_name in sys.argv[1:] or MODELS:
        export(model_name)
