"""ONNX in the ``irkernel`` command: ``import``, and ``.onnx`` files for ``run``/``opt``/``print``.

``irkernel import model.onnx -o model.ir [--shape input=1,3,224,224] [--opset N]`` writes
the imported module as text; the other subcommands read a ``.onnx`` file wherever they
read an ``.ir`` file (``--shape`` fixes symbolic input dims there too). The frontend,
and ``onnx`` with it, is imported only when an ``.onnx`` file is read, so the command
works without the ``onnx`` extra for ``.ir`` files. Import errors (unsupported ops,
symbolic dims without ``--shape``, a file that is not ONNX) are ValueErrors with one
line of text, which the command prints without a traceback (exit 1); a malformed
``--shape`` is a usage error (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TextIO

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


def read_onnx(path: str, shapes: dict[str, tuple[int, ...]] | None = None,
              opset: int | None = None) -> IRModule:
    """Import an ONNX file; every failure is a one-line ValueError naming the file."""
    try:
        from irkernel.frontend.onnx import OpNotImplemented, from_onnx
    except ImportError as exc:
        raise ValueError(f"{path}: reading .onnx files needs the onnx package "
                         f"(pip install irkernel[onnx]): {exc}") from None
    try:
        return from_onnx(path, shape_dict=shapes or None, opset=opset)
    except (OpNotImplemented, ValueError) as exc:
        text = str(exc).replace("in shape_dict", "with --shape NAME=D0,D1,...")
        raise ValueError(text if text.startswith(path) else f"{path}: {text}") from None


def is_onnx(path: str) -> bool:
    return path.lower().endswith(".onnx")


def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    if args.opset is not None and args.opset < 1:
        raise UsageError(f"--opset must be >= 1, got {args.opset}")
    mod = read_onnx(args.file, parse_shapes(args.shape), args.opset)
    text = mod.script()
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
    parser.add_argument("--shape", action="append", metavar="NAME=D0,D1,...",
                        help="fix the shape of an ONNX input (symbolic dims need it); "
                             "repeatable")
