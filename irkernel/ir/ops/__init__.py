"""The op table: the single source of truth for every graph op (``ik.ops``).

Passes read the table's integer columns (:func:`op_arrays`) and the ``OP_<NAME>``
opcodes; they never compare op names as strings. The package is cut by idea,
each module importing only the ones listed before it:

``opcodes``        the built-in op names and their fixed ``OP_<NAME>`` numbers
``opdef``          one row (:class:`OpDef`), typed attributes (:class:`AttrSpec`,
                   ``A_*`` kinds, :class:`FloatAttr`), fusion pattern kinds
``scalar``         compiled scalar semantics of the elementwise ops (FoldConstant and
                   the interpreter share them, so their results agree bit for bit)
``type_rules``     dtype and shape rules (``OpDef.infer``); ``nn_rules`` those of the NN ops
``references``     NumPy semantics (``OpDef.reference``); ``nn_references`` the NN ops'
``registry``       the append-only registry: register, look up, columns for kernels
``table``          the built-in rows, registered when the package is imported

This ``__init__`` only re-exports the public names; code inside the package
imports the modules above, never the package, so that importing any of them
first still loads the table in order. Adding an op: ``docs/adding_an_op.md``.
"""

from __future__ import annotations

from irkernel.ir.ops.opcodes import *  # noqa: F403  (the OP_<NAME> constants)
from irkernel.ir.ops.opcodes import BUILTIN_OP_NAMES
from irkernel.ir.ops.opdef import (
    A_AXES,
    A_BOOL,
    A_DIMS,
    A_DTYPE,
    A_FLOAT,
    A_FLOATS,
    A_INT,
    A_INTS,
    A_STR,
    BROADCAST,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OUT_EWISE_FUSABLE,
    PATTERN_NAMES,
    REDUCE,
    AttrSpec,
    FloatAttr,
    OpDef,
    Shape,
    TensorType,
    normalize_attr,
)
from irkernel.ir.ops.references import astype_reference
from irkernel.ir.ops.registry import (
    OpArrays,
    all_ops,
    get_op,
    num_ops,
    op_arrays,
    register_op,
    set_legalize,
)
from irkernel.ir.ops.table import BUILTIN_OPS
from irkernel.ir.ops.type_rules import broadcast_shapes, normalize_axes, permutation

__all__ = [  # the op-table names and the OP_<NAME> constants
    "A_AXES", "A_BOOL", "A_DIMS", "A_DTYPE", "A_FLOAT", "A_FLOATS", "A_INT", "A_INTS", "A_STR",
    "BROADCAST",
    "BUILTIN_OPS", "ELEMWISE", "INJECTIVE", "OPAQUE", "OUT_EWISE_FUSABLE", "PATTERN_NAMES",
    "REDUCE", "AttrSpec", "FloatAttr", "OpArrays", "OpDef", "Shape", "TensorType", "all_ops",
    "astype_reference", "broadcast_shapes", "get_op", "normalize_attr", "normalize_axes",
    "num_ops", "op_arrays", "permutation", "register_op", "set_legalize",
    *(f"OP_{name.upper()}" for name in BUILTIN_OP_NAMES),
]
