"""The ``module_pass`` / ``function_pass`` / ``prim_func_pass`` decorators (function and class).

As in TVM: decorating a function returns a pass object; decorating a class
returns a Pass *class* whose constructor takes the user class's arguments and
whose instances fall through to the user instance's attributes. A missing
``opt_level`` is a ValueError; anything but a function or a class is a
TypeError saying so at once (TVM raises AttributeError, or ValueError once
``name=`` is given); the name defaults to the function or class name.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, cast

from irkernel.transform.pass_info import PassInfo
from irkernel.transform.pass_kinds import FunctionPass, ModulePass, PrimFuncPass

_Base = type[ModulePass] | type[FunctionPass]


def _wrap_class(base: _Base, pass_cls: type[Any], info: PassInfo, method: str) -> type[Any]:
    """A subclass of ``base`` whose instances wrap an instance of ``pass_cls``."""
    if not callable(getattr(pass_cls, method, None)):
        raise TypeError(f"{pass_cls.__name__}: a pass class must define {method}()")

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        inst = pass_cls(*args, **kwargs)
        # Bind the method, not self: the pass holds the user instance, never a cycle.
        base.__init__(self, getattr(inst, method), info)
        self._inst = inst

    def __getattr__(self: Any, name: str) -> Any:
        # Only called when normal lookup fails: fall through to the user instance.
        if name == "_inst" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._inst, name)

    functools.update_wrapper(__init__, pass_cls.__init__)
    namespace = {"__init__": __init__, "__getattr__": __getattr__, "__doc__": pass_cls.__doc__,
                 "__module__": pass_cls.__module__, "__qualname__": pass_cls.__qualname__}
    return type(pass_cls.__name__, (base,), namespace)


def _decorator(kind: str, base: _Base, method: str, pass_func: Any, opt_level: int | None,
               name: str | None, required: Sequence[str] | None) -> Any:
    if opt_level is None:
        raise ValueError(f"{kind}: please provide opt_level for the pass")
    if required is not None and not isinstance(required, (list, tuple)):
        raise TypeError(f"{kind}: required must be a list or tuple of pass names, "
                        f"got {type(required).__name__}")

    def create(arg: Any) -> Any:
        # What is decorated is checked before its name: asking for name= for an int
        # would send the user to fix the wrong argument.
        if not isinstance(arg, type) and not callable(arg):
            raise TypeError(f"{kind}: expected a function or a class to make a pass from, "
                            f"got {type(arg).__name__} ({arg!r})")
        pass_name = name if name is not None else getattr(arg, "__name__", None)
        if pass_name is None:
            raise TypeError(f"{kind}: name= is required for {type(arg).__name__} objects")
        info = PassInfo(opt_level, pass_name, list(required) if required is not None else None)
        if isinstance(arg, type):
            return _wrap_class(base, arg, info, method)
        return base(cast(Any, arg), info)

    if pass_func is not None:
        return create(pass_func)
    return create


def module_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                required: Sequence[str] | None = None) -> Any:
    """Make a :class:`ModulePass` from ``f(mod, ctx) -> IRModule`` or a class.

    Parameters
    ----------
    pass_func : callable or class, optional
        The transformation, or a class with ``transform_module(self, mod, ctx)``.
        Without it, returns a decorator.
    opt_level : int
        Required (ValueError otherwise).
    name : str, optional
        Defaults to the function or class name.
    required : list or tuple of str, optional
        Registered passes to run first.

    Returns
    -------
    ModulePass, or a ModulePass subclass for the class form, or a decorator.

    Raises
    ------
    ValueError
        When ``opt_level`` is missing.
    TypeError
        When ``pass_func`` is neither a function nor a class, or is a callable
        without ``__name__`` and ``name`` is not given.

    Examples
    --------
    >>> @module_pass(opt_level=1)
    ... def Identity(mod, ctx):
    ...     return mod
    >>> Identity.info.name
    'Identity'
    """
    return _decorator("module_pass", ModulePass, "transform_module", pass_func, opt_level, name,
                      required)


def function_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                  required: Sequence[str] | None = None) -> Any:
    """Make a :class:`FunctionPass` from ``f(func, mod, ctx) -> Function`` or a class.

    The class form defines ``transform_function(self, func, mod, ctx)``. The
    pass visits every graph Function except those with ``SkipOptimization``,
    and cannot add or remove functions. Parameters as :func:`module_pass`.

    Examples
    --------
    >>> @function_pass(opt_level=0)
    ... def Untouched(func, mod, ctx):
    ...     return func
    """
    return _decorator("function_pass", FunctionPass, "transform_function", pass_func, opt_level,
                      name, required)


def prim_func_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                   required: Sequence[str] | None = None) -> Any:
    """Make a :class:`PrimFuncPass` from ``f(prim_func, mod, ctx) -> PrimFunc`` or a class.

    Like :func:`function_pass`, for TIR PrimFuncs (class form:
    ``transform_function(self, prim_func, mod, ctx)``).
    """
    return _decorator("prim_func_pass", PrimFuncPass, "transform_function", pass_func, opt_level,
                      name, required)
