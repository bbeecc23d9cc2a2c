"""Each ONNX converter's ``graph_ops`` names every graph op it emits.

The declaration is what the up-front check reads (a converter whose graph ops are not
all in the op table counts as unsupported), so an op missing from it would let an
import start and fail half-way. The check runs every node test case that onnx ships
(``onnx.backend.test.loader.load_node_model_tests``: the models and their inputs, in
memory) through ``from_onnx`` and records, per ONNX op type, the graph ops that
``Context.emit`` was asked for, folded at import or not (both need the op in the table).
A model whose shapes or axes come from inputs is imported again with the integer and
scalar inputs bound, as the onnx backend does. Only import runs here (no build).
"""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
loader = pytest.importorskip("onnx.backend.test.loader")

from irkernel import ops  # noqa: E402
from irkernel.frontend.onnx import CONVERTERS, OnnxOpConverter, register  # noqa: E402
from irkernel.frontend.onnx import common, importer  # noqa: E402
from irkernel.frontend.onnx.common import NeedsConstant, ONNXImportError  # noqa: E402
from irkernel.frontend.onnx.common import OpNotImplemented  # noqa: E402

#: Graph ops each ONNX op type was seen to emit, over all node test cases; filled once.
_EMITTED: dict[str, set[str]] = {}


def _bound_inputs(case) -> dict[str, np.ndarray]:
    """The integer, bool and one-element inputs of the case's first data set, by name."""
    inits = {t.name for t in case.model.graph.initializer}
    names = [i.name for i in case.model.graph.input if i.name not in inits]
    return {n: a for n, a in zip(names, case.data_sets[0][0], strict=False)
            if isinstance(a, np.ndarray) and (a.dtype.kind in "iub" or a.size <= 1)}


def _emitted_by_op_type(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, set[str]], int]:
    emitted: dict[str, set[str]] = collections.defaultdict(set)
    current = [""]
    emit, convert_node = common.Context.emit, importer._convert_node

    def recording_emit(self, op, *operands, **attrs):
        emitted[current[0]].add(op)
        return emit(self, op, *operands, **attrs)

    def recording_convert(ctx, env, index, node):
        current[0] = node.op_type
        return convert_node(ctx, env, index, node)

    monkeypatch.setattr(common.Context, "emit", recording_emit)
    monkeypatch.setattr(importer, "_convert_node", recording_convert)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # onnx's case generators warn about overflows
        cases = loader.load_node_model_tests()
    imported = 0
    for case in cases:
        try:
            try:
                importer.from_onnx(case.model)
            except NeedsConstant:
                importer.from_onnx(case.model, const_inputs=_bound_inputs(case))
            imported += 1
        except (OpNotImplemented, ONNXImportError):
            # unsupported ops and dtypes: tests/frontend/test_onnx_backend.py lists why;
            # what was emitted before the error still counts
            pass
    return emitted, imported


@pytest.fixture(scope="module")
def emitted() -> dict[str, set[str]]:
    if not _EMITTED:
        with pytest.MonkeyPatch.context() as mp:
            seen, imported = _emitted_by_op_type(mp)
        assert imported > 500, f"only {imported} node test models imported"
        _EMITTED.update(seen)
    return _EMITTED


def test_every_emitted_graph_op_is_declared(emitted):
    undeclared = {op_type: sorted(ops_seen - set(CONVERTERS[op_type].graph_ops or ()))
                  for op_type, ops_seen in emitted.items() if op_type in CONVERTERS}
    undeclared = {k: v for k, v in undeclared.items() if v}
    assert not undeclared, f"converters emit graph ops they do not declare: {undeclared}"


def test_node_tests_reach_most_converters(emitted):
    """The check above is only as good as its coverage: most converters must have run."""
    silent = {name for name, cls in CONVERTERS.items() if cls.graph_ops == ()}
    reached = set(emitted) | silent
    assert len(reached & set(CONVERTERS)) >= 0.9 * len(CONVERTERS), \
        sorted(set(CONVERTERS) - reached)


@pytest.mark.parametrize("op_type", sorted(CONVERTERS))
def test_declaration_is_sorted_and_names_table_ops(op_type):
    declared = CONVERTERS[op_type].graph_ops
    assert isinstance(declared, tuple)
    assert list(declared) == sorted(set(declared)), f"{op_type}: {declared} not sorted/unique"
    table = {op.name for op in ops.all_ops()}
    assert set(declared) <= table, f"{op_type}: {sorted(set(declared) - table)} not in the table"


def test_register_refuses_a_converter_without_its_own_declaration(monkeypatch):
    monkeypatch.setattr(common, "CONVERTERS", dict(CONVERTERS))

    class Undeclared(OnnxOpConverter):
        pass

    with pytest.raises(TypeError, match="Undeclared of TestOp must declare graph_ops"):
        register("TestOp")(Undeclared)

    class Inherits(CONVERTERS["Add"]):  # Add's declaration is not its own
        pass

    with pytest.raises(TypeError, match="must declare graph_ops"):
        register("TestOp")(Inherits)
