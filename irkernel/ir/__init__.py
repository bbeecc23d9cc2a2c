"""IR layer: the struct-of-arrays graph IR and everything that needs nothing above it.

``ids`` (id types, dtype codes, encodings), ``errors``, ``jit`` (the one Numba
decorator), ``hooks`` (slots higher layers fill), the package ``ops`` (the op
table: opcodes, rows, type rules, references, compiled scalar semantics, the
registry), ``pools`` (shape,
attribute and constant tables), ``function`` (Function), ``module``
(IRModule), ``operands`` (the one operand walker), ``checks`` (structure and
type-sweep kernels), ``typecheck``, ``builder`` (GraphBuilder), ``rebuild``
(the one compaction path of passes), ``verify``, ``interp`` (the reference
interpreter) and ``structural`` (equality and hashing).

The bottom layer: imports numpy, numba and llvmlite only, never another
irkernel layer. Where it needs one (printing, running a PrimFunc) it calls a
:class:`~irkernel.ir.hooks.Hook` that the higher layer installs.
"""
