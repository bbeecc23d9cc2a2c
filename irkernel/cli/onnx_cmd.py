"""ONNX in the ``irkernel`` command: ``import``, and ``.onnx`` files for ``run``/``opt``/``print``.

``irkernel import model.onnx -o model.ir [--shape input=1,3,224,224] [--dim batch=4]
[--opset N]`` writes the imported module as text; the other subcommands read a
``.onnx`` file wherever they read an ``.ir`` file. A model with symbolic input dims
(``batch``, ``seq``) is imported at a binding of them: ``--dim NAME=VALUE`` (repeatable,
or ``--dim batch=4,seq=16``), ``--shape`` fixing whole inputs, or, for ``run --inputs``,
the shapes in the ``.npy`` headers. ``--const NAME=V0,V1,...`` (or ``NAME=file.npy``)
binds an input to a constant, of the type the model declares for it (silero-vad's
``--const sr=16000``, which picks the branch of an ``If``). The model is read through ``DynamicModel``
(``irkernel/frontend/onnx/dynamic.py``), which knows the dims; ``print`` without
``--dim`` prints the dims a symbolic model has instead of the graph.

The frontend, and ``onnx`` with it, is imported only when an ``.onnx`` file is read,
so the command works without the ``onnx`` extra for ``.ir`` files. Import errors
(unsupported ops, symbolic dims without a value, an unknown dim, inputs that
contradict each other, a file that is not ONNX) are ValueErrors with one line of text,
which the command prints without a traceback (exit 1); a malformed ``--shape``,
``--dim`` or ``--const`` is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from irkernel.cli.errors import UsageError
from irkernel.ir.module import IRModule


def parse_shapes(items: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    """``["x=1,3,224,224", "mask=4"]`` -> ``{"x": (1, 3, 224, 224), "mask": (4,)}``."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items or []:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = tuple(int(d) for d in dims.split(",") if d.strip()) if dims else ()
        except ValueError:
            raise UsageError(f"--shape {item!r}: expected NAME=D0,D1,... (e.g. "
                             "input=1,3,224,224)") from None
    return shapes


def parse_dims(items: Sequence[str] | None) -> dict[str, int]:
    """``["batch=4", "seq=16,heads=2"]`` -> ``{"batch": 4, "seq": 16, "heads": 2}``."""
    dims: dict[str, int] = {}
    for item in items or []:
        for part in item.split(","):
            name, sep, value = part.strip().partition("=")
            name = name.strip()
            try:
                if not sep or not name:
                    raise ValueError
                number = int(value)
                if number < 0:
                    raise ValueError
            except ValueError:
                raise UsageError(f"--dim {item!r}: expected NAME=VALUE with VALUE an int >= 0 "
                                 "(e.g. batch=4, or batch=4,seq=16)") from None
            if dims.get(name, number) != number:
                raise UsageError(f"--dim: {name!r} given twice ({dims[name]} and {number})")
            dims[name] = number
    return dims


def parse_consts(items: Sequence[str] | None) -> dict[str, Any]:
    """``["sr=16000", "w=w.npy"]`` -> ``{"sr": array(16000), "w": <w.npy>}``; the model's
    declared type and shape are applied at import (``from_onnx``'s ``const_inputs``)."""
    from irkernel.cli.npy import InputError, read_npy

    consts: dict[str, Any] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name or not text:
            raise UsageError(f"--const {item!r}: expected NAME=V0,V1,... or NAME=FILE.npy "
                             "(e.g. sr=16000)")
        if name in consts:
            raise UsageError(f"--const: {name!r} given twice")
        if text.lower().endswith(".npy"):
            try:
                consts[name] = read_npy(text)
            except InputError as exc:
                raise ValueError(f"--const {name}: {exc}") from None
            continue
        try:
            values = [int(v) for v in text.split(",")]
        except ValueError:
            try:
                values = [float(v) for v in text.split(",")]
            except ValueError:
                raise UsageError(f"--const {item!r}: {text!r} is not a list of numbers "
                                 "(V0,V1,...) or a .npy file") from None
        consts[name] = np.array(values[0] if len(values) == 1 else values)
    return consts


@dataclass(frozen=True)
class OnnxOptions:
    """``--shape``, ``--dim`` and ``--const``, parsed (usage errors before any file is read)."""

    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dims: dict[str, int] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> OnnxOptions:
        return cls(parse_shapes(getattr(args, "shape", None)),
                   parse_dims(getattr(args, "dim", None)),
                   parse_consts(getattr(args, "const", None)))


def open_onnx(path: str, options: OnnxOptions | None = None, opset: int | None = None) -> Any:
    """The model at ``path`` as a ``DynamicModel``; every failure is a one-line ValueError."""
    try:
        from irkernel.frontend.onnx.dynamic import DynamicModel
    except ImportError as exc:
        raise ValueError(f"{path}: reading .onnx files needs the onnx package "
                         f"(pip install irkernel[onnx]): {exc}") from None
    options = options or OnnxOptions()
    with _named(path):
        return DynamicModel(path, shape_dict=options.shapes or None, opset=opset,
                            const_inputs=options.consts or None)


def binding(model: Any, path: str, dims: dict[str, int] | None,
            inputs: Sequence[str] | None = None) -> dict[str, int]:
    """The values of the model's dims: ``--dim``, else the ``.npy`` inputs' shapes."""
    if dims or not model.dims:
        return dict(dims or {})
    if not inputs:
        example = " ".join(f"--dim {name}=N" for name in model.dims)
        raise ValueError(f"{path}: symbolic dims {', '.join(model.dims)} "
                         f"({model.symbolic.describe()}); give them with {example} (or the "
                         "inputs' shapes with --shape NAME=D0,D1,...)")
    from irkernel.cli.npy import InputError, read_npy_header

    shapes = []
    for pos, file in enumerate(inputs):
        try:
            shapes.append(read_npy_header(file)[1])
        except InputError as exc:
            raise ValueError(f"cannot read input {file!r} (input {pos}): {exc}") from None
    with _named(path, "the --inputs do not fit the model's dims: "):
        return model.binding_from_shapes(shapes)


def dims_header(model: Any, values: dict[str, int]) -> str:
    """``# symbolic dims: batch=4, seq=16 (input ...)``: a comment line, or nothing."""
    if not model.dims:
        return ""
    bound = ", ".join(f"{name}={values[name]}" for name in model.dims)
    return f"# symbolic dims: {bound} ({model.symbolic.describe()})\n"


def read_onnx(path: str, options: OnnxOptions | None = None, opset: int | None = None,
              inputs: Sequence[str] | None = None) -> IRModule:
    """Import an ONNX file at the binding :func:`binding` finds; failures as open_onnx's."""
    options = options or OnnxOptions()
    model = open_onnx(path, options, opset)
    return bind_model(model, path, binding(model, path, options.dims, inputs))


def bind_model(model: Any, path: str, values: dict[str, int]) -> IRModule:
    """``model.bind(**values)``; an unknown or missing dim is a one-line ValueError."""
    with _named(path):
        return model.bind(**values)


@contextmanager
def _named(path: str, what: str = "") -> Iterator[None]:
    """Frontend errors as one line naming the file."""
    from irkernel.frontend.onnx import OpNotImplemented

    try:
        yield
    except (OpNotImplemented, ValueError) as exc:
        text = str(exc).replace("in shape_dict", "with --shape NAME=D0,D1,...")
        if "no value for dim" in text:
            text += "; give them with --dim NAME=VALUE"
        if "const_inputs" in text:
            text += " (on the command line: --const NAME=VALUE)"
        raise ValueError(text if text.startswith(path) else f"{path}: {what}{text}") from None


def is_onnx(path: str) -> bool:
    return path.lower().endswith(".onnx")


def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    if args.opset is not None and args.opset < 1:
        raise UsageError(f"--opset must be >= 1, got {args.opset}")
    options = OnnxOptions.from_args(args)
    model = open_onnx(args.file, options, args.opset)
    values = binding(model, args.file, options.dims)
    mod = bind_model(model, args.file, values)
    text = dims_header(model, values) + mod.script()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
        f = mod["main"]
        print(f"{args.file}: {f.num_nodes:,} nodes, {len(f.params)} inputs, "
              f"{len(f.outputs)} outputs -> {args.output}", file=out)
    else:
        out.write(text)
    return 0


def add_import_parser(sub: argparse._SubParsersAction,  # type: ignore[type-arg]
                      parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    imp = sub.add_parser("import", parents=list(parents),
                         help="import an ONNX model and write it as .ir text")
    imp.add_argument("file", help="model.onnx")
    imp.add_argument("-o", "--output", help="write the module here instead of stdout")
    add_shape_option(imp)
    imp.add_argument("--opset", type=int, default=None,
                     help="convert at this opset (default: the model's)")
    imp.set_defaults(run=cmd_import)


def add_shape_option(parser: argparse.ArgumentParser) -> None:
    """``--shape``, ``--dim`` and ``--const``: an ONNX model's symbolic input dims, and
    inputs bound to constants."""
    parser.add_argument("--shape", action="append", metavar="NAME=D0,D1,...",
                        help="fix the shape of an ONNX input (and the dims it names); "
                             "repeatable")
    parser.add_argument("--dim", action="append", metavar="NAME=VALUE",
                        help="bind a symbolic dim of an ONNX model (batch=4, or "
                             "batch=4,seq=16); repeatable")
    parser.add_argument("--const", action="append", metavar="NAME=V0,V1,...",
                        help="bind an ONNX input to a constant (sr=16000, or NAME=FILE.npy): "
                             "it is no longer an input; repeatable")
