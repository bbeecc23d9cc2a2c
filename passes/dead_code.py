"""DeadCodeElimination: unused nodes inside functions, unreachable functions in the module.

Per function: one reverse sweep marks what the outputs (and pinned nodes:
params, impure ops) depend on, then ``irkernel.ir.rebuild`` compacts. Per
module: functions not reachable from the entries through call_func/call_tir
edges are removed (entries default to functions with ``global_symbol``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from irkernel import transform
from irkernel.ir import ops
from irkernel.ir.distinct import sorted_distinct
from irkernel.ir.errors import IRError
from irkernel.ir.function import Function
from irkernel.ir.jit import kernel
from irkernel.ir.module import IRModule
from irkernel.ir.operands import operand_at, operand_count
from irkernel.ir.rebuild import rebuild
from passes._common import op_pinned


@kernel
def mark_live_kernel(kind, a0, a1, extra, op_encoding, op_pinned, outputs):
    """Reverse sweep marking every node an output or pinned node depends on.

    Arrays: kind int16[n]; a0, a1 int32[n]; extra int32[m]; op_encoding int8[n_ops];
    op_pinned bool[n_ops]; outputs int32[r]. Returns (live bool[n], n_live).
    Relies on topological order (operands < node id).
    """
    n = kind.shape[0]
    live = np.zeros(n, np.bool_)
    for j in range(outputs.shape[0]):
        live[outputs[j]] = True
    n_live = 0
    for i in range(n - 1, -1, -1):
        k = kind[i]
        if not live[i]:
            if not op_pinned[k]:
                continue
            live[i] = True
        n_live += 1
        enc = op_encoding[k]
        for j in range(operand_count(enc, a1[i])):
            live[operand_at(enc, a0[i], a1[i], extra, j)] = True
    return live, n_live


def eliminate_dead_nodes(func: Function) -> Function:
    """The function without nodes that nothing live reads; ``func`` itself if none."""
    live, n_live = mark_live_kernel(func.kind, func.a0, func.a1, func.extra,
                                    ops.op_arrays().encoding, op_pinned(), func.outputs)
    if n_live == func.num_nodes:
        return func
    return rebuild(func, keep=live, pass_name="DeadCodeElimination")


def callees(func: object) -> set[str]:
    """Names a function calls through call_func / call_tir (one lookup per attribute set)."""
    if not isinstance(func, Function):
        return set(getattr(func, "callees", lambda: ())())
    is_call = (func.kind == ops.OP_CALL_FUNC) | (func.kind == ops.OP_CALL_TIR)
    found = set()
    for a in sorted_distinct(func.attr_id[is_call]).tolist():  # one per call attribute set
        callee = func.attr_table.as_dict(a).get("callee")
        if not isinstance(callee, str):
            node = int(np.flatnonzero(is_call & (func.attr_id == a))[0])
            raise IRError(f"DeadCodeElimination: node {node} ({func.op(node).name}): attribute "
                          f"set {a} names no callee (rule: attributes)")
        found.add(callee)
    return found


def reachable_functions(mod: IRModule, entries: Sequence[str]) -> set[str]:
    seen: set[str] = set()
    stack = [e for e in entries if e in mod.functions]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        stack.extend(c for c in callees(mod.functions[name]) if c in mod.functions)
    return seen


def _check_main_is_kept(mod: IRModule, reachable: set[str]) -> None:
    """A private ``main`` that no public function calls would vanish: refuse instead.

    ``main`` is the entry ``interpret``, ``irkernel run`` and users reach for; dropping
    it because its ``global_symbol`` is missing turns a typo into a KeyError much later.
    """
    if "main" in mod.functions and "main" not in reachable:
        raise IRError("DeadCodeElimination: function 'main' is private (it has no "
                      "global_symbol) and no public function calls it, so it would be "
                      "removed; give it global_symbol = \"main\" (GraphBuilder's default) or "
                      "name the roots with entry_functions (rule: global_symbol)")


def _dce_module(mod: IRModule, ctx: transform.PassContext,
                entries: tuple[str, ...] | None) -> IRModule:
    changed: dict[str, object] = {}
    removed_nodes = 0
    for name, func in mod.functions.items():
        if isinstance(func, Function) and not func.attrs.get("SkipOptimization", False):
            out = eliminate_dead_nodes(func)
            if out is not func:
                changed[name] = out
                removed_nodes += func.num_nodes - out.num_nodes
    mod = mod.with_functions(changed)
    if entries is None:
        roots = [name for name, f in mod.functions.items()
                 if getattr(f, "attrs", {}).get("global_symbol") is not None]
    else:
        missing = [e for e in entries if e not in mod.functions]
        if missing:
            raise ValueError(f"DeadCodeElimination: entry functions {missing} are not in the "
                             f"module (functions: {', '.join(mod.functions)})")
        roots = list(entries)
    reachable = reachable_functions(mod, roots)  # once: not per function (O(F^2) before)
    if entries is None:
        _check_main_is_kept(mod, reachable)
    unreachable = [name for name in mod.functions if name not in reachable]
    if removed_nodes:
        ctx.stat("nodes_removed", removed_nodes)
    if unreachable:
        ctx.stat("functions_removed", len(unreachable))
    return mod.without(*unreachable)


def DeadCodeElimination(entry_functions: Sequence[str] | None = None) -> transform.ModulePass:
    """Remove unused nodes and functions unreachable from the entries (opt level 1).

    Parameters
    ----------
    entry_functions : sequence of str, optional
        Roots of the call graph. Default: every function with a
        ``global_symbol`` attribute. Parameters are never removed.

    Returns
    -------
    ModulePass
        Reports ``nodes_removed`` and ``functions_removed``.
    """
    if entry_functions is not None:
        if isinstance(entry_functions, str) or not all(
                isinstance(e, str) for e in entry_functions):
            raise TypeError("DeadCodeElimination: entry_functions must be a sequence of "
                            f"function names, got {entry_functions!r}")
        entries: tuple[str, ...] | None = tuple(entry_functions)
    else:
        entries = None

    def dead_code_elimination(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        return _dce_module(mod, ctx, entries)

    return transform.module_pass(dead_code_elimination, opt_level=1,
                                 name="DeadCodeElimination")


transform.register_pass("DeadCodeElimination", DeadCodeElimination)
