"""The converter machinery: values, the conversion context, the converter table.

A converted ONNX tensor is a :class:`Value`: either a graph node of the
function being built or a NumPy constant that is not in the graph yet.
Converters build graph ops through :meth:`Context.emit`; when every operand of
an op is a constant, ``emit`` evaluates the op at import with the op table's
NumPy reference (the interpreter's semantics) and returns a constant, so shape
arithmetic (``Shape -> Gather -> Concat -> Reshape``), weight preprocessing
(BatchNormalization's scale and shift, Gemm's transposed weights) and every
other constant subgraph fold at import, with no per-element Python. A constant
enters the graph once, when a non-constant op first reads it; large ones are
held by reference by the constant pool (no copy).

The table is TVM's: one class per ONNX op with ``_impl_vN`` class methods, the
one with the largest ``N <= opset`` converts (:func:`register`, :func:`lookup`).
Every class declares in ``graph_ops`` each graph op it may emit (:func:`register`
refuses a class without its own declaration, and
``tests/frontend/test_onnx_graph_ops.py`` checks the declarations against what
the converters emit on onnx's node tests); while one of them is not in the op
table the ONNX op counts as unsupported, so the up-front check names it.
Imports numpy, ``irkernel.ir`` and onnx's helpers (no other irkernel layer).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from irkernel.frontend.onnx import dimvalues
from irkernel.ir import ops
from irkernel.ir.builder import GraphBuilder
from irkernel.ir.errors import TypeInferenceError
from irkernel.ir import narrow
from irkernel.ir.ids import BFLOAT16, DTYPE_NAMES, INT64, NUMPY_DTYPES, dtype_code, shape_problem
from irkernel.ir.interp import evaluate_op
from irkernel.ir.symdim import SymDim

Shape = tuple[int, ...]


class OpNotImplemented(NotImplementedError):
    """Operators of the model that the frontend cannot convert (all of them, with counts).

    Attributes
    ----------
    unsupported : dict
        ``{op_type: number of nodes}`` (op types of other domains as ``domain.op_type``).
    """

    def __init__(self, unsupported: dict[str, int], opset: int) -> None:
        self.unsupported = dict(unsupported)
        self.opset = opset
        listed = ", ".join(f"{name} (x{count})" for name, count in sorted(unsupported.items()))
        kinds = len(unsupported)
        super().__init__(f"{kinds} operator type{'s' if kinds != 1 else ''} not supported at "
                         f"opset {opset}: {listed}")


class ONNXImportError(ValueError):
    """A model the frontend cannot import: names the node, input or attribute at fault."""


class NeedsConstant(ONNXImportError):
    """An input that must be a constant (a shape, axes, pads, ...) is computed at run time.

    ``from_onnx(..., const_inputs={name: value})`` binds graph inputs to values, which
    is how the ONNX backend specializes such models on their run-time inputs.
    """


class Value:
    """A converted tensor: a graph node (``node``) or a NumPy constant (``const``).

    ``int4_type`` is ``"int4"`` or ``"uint4"`` for an ONNX 4-bit integer tensor, which
    irkernel holds widened to int8 (uint8): QuantizeLinear saturates to its range, and
    it may not be a graph output (irkernel has no 4-bit dtype to return it in).
    """

    __slots__ = ("const", "dtype", "int4_type", "node", "shape")

    def __init__(self, dtype: int, shape: Shape, node: int | None = None,
                 const: np.ndarray | None = None, int4_type: str | None = None) -> None:
        self.dtype, self.shape, self.node, self.const = dtype, tuple(shape), node, const
        self.int4_type = int4_type

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES[self.dtype]

    def __repr__(self) -> str:
        where = "const" if self.const is not None else f"%{self.node}"
        return f"Value({where}: {self.dtype_name}{list(self.shape)})"


#: ONNX's 4-bit integer types (``ml_dtypes`` arrays from onnx) and the dtype holding them.
_WIDENED_INT4 = {"int4": np.int8, "uint4": np.uint8}

_MOVEMENT = frozenset({"reshape", "permute_dims", "broadcast_to"})
#: Most elements of a constant computed at import (folded, or a uniform constant made
#: real): larger results stay run-time computations of the graph, so a model cannot make
#: the importer allocate what its file does not hold (2**28: 1 GiB of float32).
FOLD_MAX_ELEMENTS = 2**28


def _count(shape: Sequence[int]) -> int:
    count = 1
    for d in shape:
        count *= int(d)
    return count


class Context:
    """What a converter sees: the builder, the opset, and the helpers to emit ops."""

    def __init__(self, bb: GraphBuilder, opset: int) -> None:
        self.bb = bb
        self.opset = opset
        self.where = ""  # "node 3 'conv1' (Conv)": set by the importer for messages
        self.n_outputs = 1  # the current node's output count (Split without 'split' reads it)
        self.other_opsets: dict[str, int] = {}  # {domain: version} of non-default domains
        # converts a subgraph (If's taken branch) in the current node's scope and returns its
        # outputs; set by the importer before each node (converters cannot import it)
        self.inline_graph: Callable[[Any], list[Value]] | None = None
        # uniform constants (ConstantOfShape): zero-stride views until the graph reads them
        self._full: dict[Any, np.ndarray] = {}  # materialized uniform constants (in the module)
        self._uniform: dict[int, tuple[weakref.ref[np.ndarray], np.ndarray]] = {}
        self._const_nodes: dict[int, tuple[np.ndarray, int]] = {}  # id(array) -> (array, node)

    # -- constants --------------------------------------------------------------
    def const(self, value: Any, dtype: Any = None, code: int | None = None) -> Value:
        """A constant value (not in the graph until an op reads it). ``code``: its dtype
        when the array's does not say it (bfloat16 as uint16 bits, ``irkernel.ir.narrow``);
        ``ml_dtypes.bfloat16`` arrays (onnx's) become such bits."""
        arr = np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
        if arr.dtype == object:  # a dim value (symbolic import): int64 once it is static
            arr = dimvalues.normalize(arr)
            if arr.dtype == object:
                return Value(INT64, arr.shape, const=arr)
        if arr.dtype.name in _WIDENED_INT4:  # onnx's ml_dtypes int4/uint4: widened, marked
            wide = np.ascontiguousarray(arr.astype(_WIDENED_INT4[arr.dtype.name]))
            return Value(dtype_code(wide.dtype), wide.shape, const=wide, int4_type=arr.dtype.name)
        if code is None:
            try:
                code = dtype_code(arr.dtype)
            except ValueError:
                raise self.error(f"constant of dtype {arr.dtype} is not supported "
                                 f"({', '.join(DTYPE_NAMES)})") from None
        if code == BFLOAT16:
            arr = narrow.to_storage(arr, code)
        elif self._uniform_value(arr) is not None:  # a view from full(): kept lazy
            return Value(code, arr.shape, const=arr)
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        return Value(code, arr.shape, const=arr)

    def full(self, shape: Sequence[int], value: Any) -> np.ndarray:
        """A uniform constant (ConstantOfShape): a read-only zero-stride view of one value,
        which costs no memory until an op of the graph reads it (:meth:`node` then makes one
        C-contiguous array per distinct shape and value). Reshaping, transposing or
        broadcasting it at import makes another view (see :meth:`emit`), so the light models'
        weights (vgg19: 575 MB) are allocated once, in their final layout."""
        fill = np.asarray(value).reshape(())
        arr = np.broadcast_to(fill, self.check_shape(shape, "the constant's shape"))
        self._uniform[id(arr)] = (weakref.ref(arr), fill)
        return arr

    def _uniform_value(self, arr: np.ndarray) -> np.ndarray | None:
        hit = self._uniform.get(id(arr))
        return hit[1] if hit is not None and hit[0]() is arr else None

    def _materialize(self, arr: np.ndarray) -> np.ndarray:
        fill = self._uniform_value(arr)
        if fill is None:
            return arr
        key = (arr.shape, fill.dtype.str, fill.tobytes())
        out = self._full.get(key)
        if out is None:
            out = np.full(arr.shape, fill, fill.dtype)
            out.setflags(write=False)
            self._full[key] = out
        return out

    def check_shape(self, shape: Sequence[int], what: str,
                    limit: int | None = None) -> tuple[int, ...]:
        """``shape`` as ints when it is within the IR's limits (``ids.shape_problem``) and,
        given ``limit``, has at most that many elements; else this node's error naming
        ``what``. Converters that make a constant of a size read from the model call it
        before allocating."""
        dims = tuple(int(d) for d in shape)
        problem = shape_problem(dims)
        if problem is None and limit is not None and _count(dims) > limit:
            problem = (f"{_count(dims)} elements, more than a constant computed at import "
                       f"may hold ({limit})")
        if problem is not None:
            raise self.error(f"{what} {list(dims)}: {problem}")
        return dims

    def const_shape(self, shape: Sequence[int], what: str) -> tuple[int, ...]:
        """:meth:`check_shape` for a constant the converter computes at import: at most
        :data:`FOLD_MAX_ELEMENTS` elements."""
        return self.check_shape(shape, what, FOLD_MAX_ELEMENTS)

    def scalar(self, value: Any, like: Value) -> Value:
        """A 0-d constant of ``like``'s dtype."""
        return self.const(narrow.to_storage(np.asarray(value), like.dtype), code=like.dtype)

    def node(self, v: Value) -> int:
        """The graph node of ``v`` (a constant is added once, on first use)."""
        if v.node is not None:
            return v.node
        assert v.const is not None
        if v.const.dtype == object:
            raise self.error(f"the value of the symbolic dim {dimvalues.first_symbolic(v.const)} "
                             "is used as run-time data, which a symbolic import does not "
                             "support (bind the dims: DynamicModel imports per binding then)")
        hit = self._const_nodes.get(id(v.const))
        if hit is not None and hit[0] is v.const:
            return hit[1]
        fill = self._uniform_value(v.const)
        if fill is not None and v.const.size > FOLD_MAX_ELEMENTS:  # made at run time instead
            node = self.bb.call("broadcast_to", self.bb.const(fill, DTYPE_NAMES[v.dtype]),
                                shape=v.const.shape)
        else:
            node = self.bb.const(self._materialize(v.const), DTYPE_NAMES[v.dtype])
        self._const_nodes[id(v.const)] = (v.const, node)
        return node

    def const_value(self, v: Value | None, what: str) -> np.ndarray:
        """The NumPy value of an input that must be constant (``what`` names it)."""
        if v is None or v.const is None:
            raise NeedsConstant(f"{self.where}: {what} must be a constant (an initializer or "
                                "computed from constants); a tensor computed at run time is not "
                                "supported (bind the graph input with const_inputs)")
        if v.const.dtype == object:
            raise self.error(f"{what} holds the symbolic dim "
                             f"{dimvalues.first_symbolic(v.const)}, which this op needs as a "
                             "static value")
        return v.const

    def dims_value(self, v: Value | None, what: str) -> list[Any]:
        """The elements of a constant integer input that may hold symbolic dims (a shape
        computed from ``Shape``): ints, or ``SymDim`` in a symbolic import."""
        if v is not None and v.const is not None and v.const.dtype == object:
            return list(v.const.reshape(-1))
        return [int(d) for d in np.asarray(self.const_value(v, what)).reshape(-1)]

    # -- ops --------------------------------------------------------------------
    def emit(self, op: str, *operands: Value, **attrs: Any) -> Value:
        """The graph op ``op`` of ``operands``; evaluated at import when all are constant."""
        opdef = ops.get_op(op)
        if any(isinstance(a, (tuple, list)) and any(isinstance(d, SymDim) for d in a)
               for a in attrs.values()):  # a symbolic target: a graph op (the builder
            return self._emit_node(op, operands, attrs)  # encodes its dims)
        if operands and all(v.const is not None for v in operands) and any(
                v.const.dtype == object for v in operands):
            return self._emit_dims(opdef, operands, attrs)
        if operands and all(v.const is not None for v in operands) and opdef.reference:
            try:
                normalized = dict(opdef.normalize_attrs(attrs))
                code, shape = opdef.infer([(v.dtype, v.shape) for v in operands], normalized)
            except (TypeError, TypeInferenceError) as exc:
                raise self.error(f"{op}: {exc}") from None
            self.check_shape(shape, f"the result of {op}")
            if op in _MOVEMENT and operands[0].const is not None:
                fill = self._uniform_value(operands[0].const)
                if fill is not None:  # moving a uniform constant: no copy of its data
                    return Value(code, shape, const=self.full(shape, fill))
            if max(_count(shape), *(v.const.size for v in operands)) > FOLD_MAX_ELEMENTS:
                # too large to fold (to allocate, or to read): a run-time op
                return self._emit_node(op, operands, attrs)
            out = evaluate_op(opdef, [v.const for v in operands], [v.dtype for v in operands],
                              normalized, code)  # the interpreter's rule for narrow floats
            out = np.ascontiguousarray(np.asarray(out).astype(NUMPY_DTYPES[code], copy=False))
            if out.shape != tuple(shape):
                out = out.reshape(shape)
            return Value(code, shape, const=out)
        return self._emit_node(op, operands, attrs)

    def _emit_dims(self, opdef: ops.OpDef, operands: Sequence[Value],
                   attrs: dict[str, Any]) -> Value:
        """``emit`` of constants one of which holds symbolic dims (``dimvalues``)."""
        try:
            normalized = dict(opdef.normalize_attrs(attrs))
            code, shape = opdef.infer([(v.dtype, v.shape) for v in operands], normalized)
            out = dimvalues.evaluate(opdef.name, [v.const for v in operands],
                                     [v.dtype for v in operands], normalized, code)
        except (TypeError, TypeInferenceError, dimvalues.DimValueError) as exc:
            raise self.error(f"{opdef.name}: {exc}") from None
        if out.dtype != object:
            out = out.astype(NUMPY_DTYPES[code], copy=False)
        return Value(code, shape, const=np.ascontiguousarray(out.reshape(shape)))

    def _emit_node(self, op: str, operands: Sequence[Value], attrs: dict[str, Any]) -> Value:
        nodes = [self.node(v) for v in operands]
        try:
            node = self.bb.call(op, *nodes, **attrs)
        except (TypeError, ValueError) as exc:
            raise self.error(str(exc)) from None
        name, shape = self.bb.node_type(node)
        return Value(dtype_code(name), shape, node=node)

    def error(self, message: str) -> ONNXImportError:
        return ONNXImportError(f"{self.where}: {message}" if self.where else message)

    # -- small helpers used by many converters ------------------------------------
    def astype(self, v: Value, dtype: str) -> Value:
        return v if v.dtype_name == dtype else self.emit("astype", v, dtype=dtype)

    def reshape(self, v: Value, shape: Sequence[Any]) -> Value:
        shape = tuple(d if isinstance(d, SymDim) else int(d) for d in shape)
        return v if v.shape == shape else self.emit("reshape", v, shape=shape)

    def expand_rank(self, v: Value, rank: int, axis: int = 1) -> Value:
        """A per-channel vector (shape [C]) as [C, 1, ..., 1] for broadcasting at ``axis``."""
        if v.rank != 1:
            return v
        return self.reshape(v, (v.shape[0],) + (1,) * (rank - axis - 1))


ConverterFn = Callable[[Context, list["Value | None"], dict[str, Any]], "Value | list[Value]"]


class OnnxOpConverter:
    """Base of the converter classes: ``_impl_vN(ctx, inputs, attrs)`` per opset range.

    ``inputs`` holds one :class:`Value` per ONNX input (None for an omitted optional
    input); ``attrs`` the node's attributes as Python values (ints, floats, strs,
    lists, NumPy arrays for tensors). A converter returns one Value, or a list for
    ops with several outputs.
    """

    #: Every graph op the converter may emit through :meth:`Context.emit` (its helpers'
    #: ops included), sorted; ``()`` for a converter that only makes constants. Each
    #: registered class declares its own: :func:`register` refuses an inherited one.
    graph_ops: ClassVar[tuple[str, ...] | None] = None

    @classmethod
    def versions(cls) -> list[int]:
        return sorted(int(name[len("_impl_v"):]) for name in dir(cls)
                      if name.startswith("_impl_v"))

    @classmethod
    def get_converter(cls, opset: int) -> ConverterFn | None:
        usable = [v for v in cls.versions() if v <= opset]
        return getattr(cls, f"_impl_v{max(usable)}") if usable else None

    @classmethod
    def missing_graph_ops(cls) -> list[str]:
        known = {op.name for op in ops.all_ops()}
        return [name for name in cls.graph_ops or () if name not in known]


#: Converter classes by :func:`op_key`: ``op_type`` in the default domain, else
#: ``domain.op_type`` (``com.microsoft.QLinearAdd``).
CONVERTERS: dict[str, type[OnnxOpConverter]] = {}
#: The names of ONNX's default domain.
DEFAULT_DOMAINS = ("", "ai.onnx")


def op_key(domain: str, op_type: str) -> str:
    """The table key of an op: its type in the default domain, else ``domain.op_type``."""
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}.{op_type}"


def register(*op_types: str, domain: str = ""
             ) -> Callable[[type[OnnxOpConverter]], type[OnnxOpConverter]]:
    """Class decorator: the converter of these ONNX op types of ``domain`` (default: the
    default domain; a converter of another domain is chosen by that domain's opset).

    Raises TypeError when the class does not declare its own ``graph_ops`` (a tuple of
    graph-op names), ValueError when an op type already has a converter.
    """
    def wrap(cls: type[OnnxOpConverter]) -> type[OnnxOpConverter]:
        declared = cls.__dict__.get("graph_ops")
        if not (isinstance(declared, tuple) and all(isinstance(n, str) for n in declared)):
            raise TypeError(f"converter {cls.__name__} of {', '.join(op_types)} must declare "
                            "graph_ops: a tuple of the graph ops it emits (() for none)")
        for op_type in op_types:
            key = op_key(domain, op_type)
            if key in CONVERTERS:
                raise ValueError(f"ONNX op {key!r} has two converters")
            CONVERTERS[key] = cls
        return cls
    return wrap


def lookup(op_type: str, opset: int) -> ConverterFn | None:
    """The converter of ``op_type`` (an :func:`op_key`) at ``opset`` (its domain's); None
    when unsupported (no class, no version at this opset, or a graph op it needs is not
    in the op table)."""
    cls = CONVERTERS.get(op_type)
    if cls is None or cls.missing_graph_ops():
        return None
    return cls.get_converter(opset)


# ---------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------

def norm_axis(ctx: Context, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ctx.error(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def norm_axes(ctx: Context, axes: Sequence[int], rank: int, what: str = "axes") -> tuple[int, ...]:
    out = tuple(norm_axis(ctx, int(a), rank, what) for a in axes)
    if len(set(out)) != len(out):
        raise ctx.error(f"{what} {list(axes)} repeat an axis")
    return out


def same_dtype(ctx: Context, values: Sequence[Value], op_type: str) -> None:
    if len({v.dtype for v in values}) > 1:
        types = ", ".join(v.dtype_name for v in values)
        raise ctx.error(f"{op_type} inputs have different dtypes ({types})")


def ints_attr(attrs: dict[str, Any], name: str, default: Sequence[int] | None = None
              ) -> list[int] | None:
    value = attrs.get(name, default)
    return None if value is None else [int(v) for v in value]
