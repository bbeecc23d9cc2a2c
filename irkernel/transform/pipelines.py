"""Named pipelines, registered as passes: O0..O3 and pipelines given as text.

O0..O3 (``get_pass("O2")``): each is a Sequential of registered passes, built
when it is asked for; O3 is O2's passes repeated to a fixed point. A member
that is not registered is an error naming it, never a silently shorter
pipeline (the registry discovers the built-in passes on the first lookup, see
``registry``).

:func:`register_pipeline` names a pipeline written in the text form of
``parse_pipeline`` (the packages that own its passes register it: ``passes``
registers ``GraphLowering`` and ``LowerTIR``, which ``runtime.build`` runs). Its
text is one place to read what runs, and a context can replace it: the config
``pipeline.<name>`` holds another text (``PassContext(config={"pipeline.LowerTIR":
"..."})``), so a user can drop, add or swap a pass of the build without code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from irkernel.transform.config import register_pass_config
from irkernel.transform.context import PassContext
from irkernel.transform.pass_base import Pass, get_pass
from irkernel.transform.pass_kinds import FixedPoint, Sequential
from irkernel.transform.pipeline_text import PipelineParseError, parse_pipeline
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


#: The registered text of each pipeline of :func:`register_pipeline`, by name.
PIPELINE_TEXTS: dict[str, str] = {}


def pipeline_config_key(name: str) -> str:
    """The config key whose (non-empty) value replaces pipeline ``name``'s text."""
    return f"pipeline.{name}"


def register_pipeline(name: str, text: str, *, description: str = "") -> None:
    """Register pipeline ``name`` as a pass (``get_pass(name)``) made from ``text``.

    Also registers the config ``pipeline.<name>`` (str, default ``""``: the
    registered text). The text is parsed when the pipeline is made, not here:
    its passes may register after it.

    Raises
    ------
    ValueError
        When ``name`` is taken (as a pass or a config key) or not a pass name.
    TypeError
        When ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"register_pipeline: text of {name!r} must be a str, "
                        f"got {type(text).__name__}")

    def factory() -> Pass:
        return make_pipeline(name)

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"The {name} pipeline: {text}" + (f" ({description})" if description
                                                        else "")
    register_pass(name, factory)
    PIPELINE_TEXTS[name] = text
    register_pass_config(pipeline_config_key(name), str, "",
                         description=f"replaces the text of the {name} pipeline "
                                     f"(default: {text})")


def pipeline_text_of(name: str, ctx: PassContext | None = None) -> str:
    """The text pipeline ``name`` runs in ``ctx`` (default: the current context): the
    config ``pipeline.<name>`` when set, else the registered text.

    Raises
    ------
    ValueError
        When ``name`` is not a pipeline of :func:`register_pipeline`.
    """
    if name not in PIPELINE_TEXTS:
        get_pass(name)  # discovers the providers (which register their pipelines)
    if name not in PIPELINE_TEXTS:
        known = ", ".join(sorted(PIPELINE_TEXTS)) or "none"
        raise ValueError(f"{name!r} is not a text pipeline (text pipelines: {known})")
    ctx = ctx if ctx is not None else PassContext.current()
    return ctx.get_config(pipeline_config_key(name)) or PIPELINE_TEXTS[name]


def make_pipeline(name: str, ctx: PassContext | None = None,
                  defaults: Mapping[str, Mapping[str, Any]] | None = None) -> Sequential:
    """Pipeline ``name`` as the text of ``ctx`` says (:func:`pipeline_text_of`), one
    Sequential named ``name``.

    ``defaults`` gives options to passes the text names bare at its top level
    (``{"LegalizeOps": {"generic_max_elements": 4096}}``): a caller fills in what
    it knows from its own config, and options written in the text win.

    Raises
    ------
    PipelineParseError
        When the text does not parse; the message names the config key when the
        text came from it.
    """
    ctx = ctx if ctx is not None else PassContext.current()
    text = pipeline_text_of(name, ctx)
    try:
        parsed = parse_pipeline(text)
    except PipelineParseError as exc:
        source = (f"config {pipeline_config_key(name)!r}" if ctx.get_config(
            pipeline_config_key(name)) else "its registered text")
        raise PipelineParseError(f"pipeline {name} ({source}): {exc.message}", text,
                                 exc.position) from None
    bare = defaults or {}
    passes = [get_pass(p._text, **bare[p._text]) if p._text in bare else p
              for p in parsed.passes]
    return Sequential(passes, opt_level=0, name=name)
