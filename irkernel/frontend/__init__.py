"""Frontends: import models from exchange formats into an :class:`irkernel.IRModule`.

Layer: above ``irkernel.ir`` (and ``irkernel.tir``), on the rung of ``irkernel.transform``;
a frontend never imports transform, instrument, passes or runtime (the ONNX backend,
which runs models, is the exception and sits on the top layer with the CLI; so does
``onnx.dynamic``, which builds a model per binding of its symbolic dims, on a rung of
its own just above runtime). The
third-party parsers (``onnx``) are imported only inside their frontend package, so
``import irkernel`` works without them.

- :mod:`irkernel.frontend.onnx`: ``from_onnx`` (``pip install irkernel[onnx]``).
"""
