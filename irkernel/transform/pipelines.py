"""The named pipelines O0..O3, registered as passes (``get_pass("O2")``).

Each is a Sequential of registered passes, built when it is asked for; O3 is
O2's passes repeated to a fixed point. A member that is not registered is an
error naming it, never a silently shorter pipeline (the registry discovers
the built-in passes on the first lookup, see ``registry``).
"""

from __future__ import annotations

from irkernel.transform.pass_base import Pass, get_pass
from irkernel.transform.pass_kinds import FixedPoint, Sequential
from irkernel.transform.registry import PassFactory, register_pass

#: Pass names of each named pipeline.
PIPELINES: dict[str, tuple[str, ...]] = {
    "O0": (),
    "O1": ("FoldConstant", "DeadCodeElimination"),
    "O2": ("FoldConstant", "SimplifyArith", "EliminateCommonSubexpr", "DeadCodeElimination"),
    "O3": ("FoldConstant", "SimplifyArith", "EliminateCommonSubexpr", "DeadCodeElimination"),
}


def _named_pipeline(level: str) -> PassFactory:
    def factory() -> Pass:
        passes: list[Pass] = []
        for name in PIPELINES[level]:
            try:
                passes.append(get_pass(name))
            except ValueError as exc:
                raise ValueError(f"pipeline {level} needs pass {name!r}: {exc}") from None
        if level == "O3":
            passes = [FixedPoint(passes)]
        return Sequential(passes, opt_level=0, name=level)

    factory.__name__ = factory.__qualname__ = level
    factory.__doc__ = (f"The {level} pipeline: "
                       f"{', '.join(PIPELINES[level]) or 'no passes'}"
                       f"{' (to a fixed point)' if level == 'O3' else ''}.")
    return factory


for _level in PIPELINES:
    register_pass(_level, _named_pipeline(_level))
