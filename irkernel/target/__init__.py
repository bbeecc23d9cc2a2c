"""The CPU kernels are scheduled and compiled for (:class:`CPUTarget`); bottom rung, like
``irkernel.ir``: it imports no other layer, and ``passes`` (templates) and ``runtime``
(code generation) read the same value."""

from irkernel.target.cpu import ALIASES, LEVELS, CPUTarget, cpu_target, host_target

__all__ = ["ALIASES", "LEVELS", "CPUTarget", "cpu_target", "host_target"]
