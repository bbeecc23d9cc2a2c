"""Every built-in op has every part that docs/adding_an_op.md lists, or a stated reason.

One check per (op, part). A part an op does without is listed in ``EXEMPT`` with the
reason, and the exemption is itself checked: an op that has the part after all fails
(the entry is stale and must go). Parts checked here:

``row``        opcode constant ``OP_<NAME>``, one-line doc, known pattern kind
``type rule``  the op's sample (``test_builder.BUILD_CASES``) infers the expected type
``reference``  a NumPy reference giving the inferred dtype and shape on the sample
``scalar``     elementwise ops (pattern elemwise/broadcast): ``scalar_eval_kernel``
               evaluates them, so FoldConstant folds one-element values bit for bit
``template``   a TIR template (``OpDef.legalize``, installed by ``passes.topi``)
``pattern``    the template's ``op_pattern`` (what FuseOps reads) is the row's pattern
``text``       a print/parse round trip (``test_text_print.OP_CASES``)
``interp``     an interpreter test (``test_interp.COVERED``)
``docs``       a line in docs/ops.md naming the op in backticks
``onnx``       some ONNX converter declares it in ``graph_ops``
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_builder import BUILD_CASES
from test_interp import COVERED as INTERP_COVERED
from test_text_print import OP_CASES as TEXT_CASES

import irkernel as ik
import passes  # noqa: F401  (installs the TIR templates into the op table)
from irkernel import ops
from irkernel.ir.ids import dtype_code
from irkernel.ir.ops.scalar import scalar_eval_kernel
from irkernel.tir import PrimFunc

DOCS = Path(__file__).resolve().parents[2] / "docs"
PARTS = ("row", "type rule", "reference", "scalar", "template", "pattern", "text", "interp",
         "docs", "onnx")

_LEAF = "a leaf: the builder makes it, the interpreter and executor read the value directly"
_CALL = "a call: its semantics are the callee's (a graph Function or a tir.PrimFunc)"
_NOT_IMPORTED = "made by passes or the builder, never by an importer"
#: (op, part) -> why the op does without the part.
EXEMPT: dict[tuple[str, str], str] = {
    **{(op, part): _LEAF for op in ("param", "const")
       for part in ("type rule", "reference", "template", "pattern", "text", "interp")},
    **{(op, part): _CALL for op in ("call_func", "call_tir")
       for part in ("reference", "template", "pattern", "interp")},
    **{(op, "onnx"): _NOT_IMPORTED for op in ("param", "const", "call_func", "call_tir")},
    ("call_tir", "text"): "its callee is a PrimFunc, printed as TIR script (docs/tir.md)",
    ("call_func", "text"): "needs a callee Function: test_text_print's "
                           "test_round_trip_call_func_between_functions",
    ("broadcast_to", "scalar"): "a movement op: FoldConstant's sweep moves the one value "
                                "itself (OP_BROADCAST_TO in fold_sweep_kernel)",
    ("concat", "pattern"): "one loop nest per operand (a copy each), not one compute "
                           "FuseOps could inline: the template says opaque",
}
BUILTIN = [op.name for op in ops.BUILTIN_OPS]
CASES = [(name, part) for name in BUILTIN for part in PARTS]


def _sample(name: str) -> tuple[ik.Function, int]:
    specs, attrs, _ = BUILD_CASES[name]
    bb = ik.GraphBuilder("main")
    xs = [bb.param(f"p{k}", shape, dtype) for k, (shape, dtype) in enumerate(specs)]
    node = bb.call(name, *xs, **attrs)
    return bb.finish([node]), node


def _is_elementwise(op: ops.OpDef) -> bool:
    return op.pattern in (ops.ELEMWISE, ops.BROADCAST)


def _template_pattern(name: str) -> int:
    func, _ = _sample(name)
    out = passes.LegalizeOps()(ik.IRModule({"main": func}))
    patterns = {f.attrs.get("op_pattern") for f in out.functions.values()
                if isinstance(f, PrimFunc)}
    assert len(patterns) == 1, f"{name}: PrimFuncs with patterns {patterns}"
    return patterns.pop()


def _declared_by_converters() -> set[str]:
    pytest.importorskip("onnx")
    from irkernel.frontend.onnx import CONVERTERS

    return {name for cls in CONVERTERS.values() for name in cls.graph_ops or ()}


def _has(name: str, part: str) -> bool:  # noqa: C901  (one branch per part of the checklist)
    op = ops.get_op(name)
    if part == "row":
        return (getattr(ops, f"OP_{name.upper()}", None) == op.opcode and bool(op.doc.strip())
                and op.pattern in ops.PATTERN_NAMES)
    if part == "type rule":
        if name not in BUILD_CASES:
            return False
        func, node = _sample(name)
        return func.node_type(node) == BUILD_CASES[name][2]
    if part == "reference":
        if op.reference is None:
            return False
        func, node = _sample(name)
        specs, attrs, (dtype, shape) = BUILD_CASES[name]
        arrays = [np.zeros(s, d) for s, d in specs]
        out = np.asarray(op.reference(arrays, dict(op.normalize_attrs(attrs))))
        return out.dtype == np.dtype(dtype) and out.shape == shape
    if part == "scalar":
        specs, _, (dtype, _) = BUILD_CASES[name]
        operand = specs[1][1] if name == "where" else specs[0][1]
        return bool(scalar_eval_kernel(op.opcode, dtype_code(dtype), dtype_code(operand),
                                       1.0, 1, 1.0, 1, 1.0, 1)[2])
    if part == "template":
        return op.legalize is not None
    if part == "pattern":
        return op.legalize is not None and _template_pattern(name) == op.pattern
    if part == "text":
        return name in TEXT_CASES
    if part == "interp":
        return name in INTERP_COVERED
    if part == "docs":
        return f"`{name}`" in (DOCS / "ops.md").read_text(encoding="utf-8")
    if part == "onnx":
        return name in _declared_by_converters()
    raise AssertionError(f"unknown part {part!r}")


def _applies(name: str, part: str) -> bool:
    return part != "scalar" or _is_elementwise(ops.get_op(name))


@pytest.mark.parametrize(("name", "part"), CASES)
def test_op_has_part_or_a_stated_reason(name: str, part: str) -> None:
    if not _applies(name, part):
        assert (name, part) not in EXEMPT, f"{name}/{part}: exemption for a part that does " \
                                           "not apply"
        return
    has = _has(name, part)
    if (name, part) in EXEMPT:
        assert not has, f"{name} has its {part} now: drop the EXEMPT entry"
    else:
        assert has, f"{name} has no {part} (docs/adding_an_op.md) and no EXEMPT reason"


def test_exemptions_name_known_ops_and_parts() -> None:
    for name, part in EXEMPT:
        assert name in BUILTIN and part in PARTS, (name, part)
        assert EXEMPT[(name, part)].strip()


def test_every_part_is_in_the_checklist_page() -> None:
    """docs/adding_an_op.md lists each part this test checks (by its name in bold)."""
    page = (DOCS / "adding_an_op.md").read_text(encoding="utf-8")
    missing = [part for part in PARTS if f"**{part}**" not in page]
    assert not missing, missing
