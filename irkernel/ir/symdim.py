"""Symbolic dims: the canonical algebra of shape variables that type rules compute with.

A symbolic dim is a sum of *atoms* with integer coefficients plus a constant; an atom is
a shape variable, a *monomial* (a product of two or more variables, ``batch*seq``), or
``floor(e / k)`` of an expression ``e`` and a constant ``k >= 2``. That covers what
conv and pool output sizes, concat, pad and reshape need (``2*batch``, ``seq + 1``,
``(h - 1) // 2 + 1``) and the flattening reshapes of transformers (``(b, s, h*d) <->
(b*s, h*d)``). A product of two dims multiplies out when neither holds a floor-div
(``(b + 1) * s`` is ``b*s + s``); a product with a floor-div is refused
(:class:`UndecidableDim`).

Canonical form (why): equal keys mean equal values for every binding, so the type
rules can compare dims with ``==`` and the tables intern one entry per expression.
(With floor-divs the converse can fail, ``h // 2 + (h + 1) // 2`` is ``h``: such dims
compare unequal and a rule reports it cannot decide, never a wrong answer.) A key is
``(terms, const)``, ``terms`` a sorted tuple of ``(atom, coefficient)`` with non-zero
coefficients; a variable atom is ``(0, index)``, a monomial ``(2, indices)`` (sorted,
repeats for powers, at least two) and a floor-div atom ``(1, k, inner key)`` whose inner
coefficients and constant lie in ``[0, k)`` with no common factor
with ``k`` (multiples of ``k`` are pulled out: ``(h - 1) // 2 + 1`` and ``(h + 1) // 2``
are one key; nested floor-divs merge: ``(h // 2 + 3) // 5`` is ``(h + 6) // 10``). A
polynomial in the monomial basis is unique, so keys stay canonical. A dim whose key has
no term is a plain Python int: constants never become objects.

Semantics of the operators on :class:`SymDim` (the "never a wrong static answer"
rule): ``==`` is equality of keys, i.e. *provably* equal for every binding; ``<``,
``<=``, ``>``, ``>=`` and ``bool`` are decided from the variables' bounds (interval
arithmetic; variables are never negative, so a monomial's interval is the product of
its variables') or raise :class:`UndecidableDim`; ``int()`` and ``index()`` always
raise. So a rule written for ints either computes the right symbolic answer or
stops with an error naming the dim. Imports ``irkernel.ir.errors`` only.

Alternatives considered: a general SymPy-style algebra (rational functions, products
with floor-divs, factoring): far more than the listed ops need, slower to canonicalize,
and its equality is harder to decide; polynomials plus floor-div atoms keep every
comparison an interval test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from irkernel.ir.errors import TypeInferenceError

Key = tuple[tuple[tuple[Any, int], ...], int]  # (terms, const)
#: The default lower bound of a variable: a size of at least one element.
DEFAULT_LOWER = 1


class UndecidableDim(TypeInferenceError):
    """A question about a symbolic dim that its bounds do not answer (or an expression
    outside the algebra, such as ``batch * (h // 2)``)."""


class DimVars:
    """The shape variables one function's dims range over: names and inclusive bounds
    (``upper`` None is unbounded). Append-only while a builder or parser runs; the
    frozen form is ``irkernel.ir.symbols.SymbolTable``, which holds one of these."""

    __slots__ = ("index", "lower", "names", "upper")

    def __init__(self, names: Sequence[str] = (), lower: Sequence[int] = (),
                 upper: Sequence[int | None] = ()) -> None:
        self.names: list[str] = []
        self.lower: list[int] = []
        self.upper: list[int | None] = []
        self.index: dict[str, int] = {}
        for name, lo, hi in zip(names, lower, upper, strict=True):
            self.add(name, lo, hi)

    def __len__(self) -> int:
        return len(self.names)

    def add(self, name: str, lower: int = DEFAULT_LOWER, upper: int | None = None) -> int:
        """Declare a variable; returns its index. ValueError for a bad name or bounds or
        a name declared already with other bounds."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"dim variable name must be an identifier, got {name!r}")
        if isinstance(lower, bool) or not isinstance(lower, int) or lower < 0:
            raise ValueError(f"dim variable {name!r}: lower bound {lower!r} must be an int >= 0")
        if upper is not None and (isinstance(upper, bool) or not isinstance(upper, int)
                                  or upper < lower):
            raise ValueError(f"dim variable {name!r}: upper bound {upper!r} must be an int "
                             f">= the lower bound {lower} (or None: unbounded)")
        i = self.index.get(name)
        if i is not None:
            if (self.lower[i], self.upper[i]) != (lower, upper):
                raise ValueError(f"dim variable {name!r} is declared twice, with bounds "
                                 f"{bounds_text(self.lower[i], self.upper[i])} and "
                                 f"{bounds_text(lower, upper)}")
            return i
        self.index[name] = len(self.names)
        self.names.append(name)
        self.lower.append(lower)
        self.upper.append(upper)
        return len(self.names) - 1

    def var(self, name: str) -> SymDim:
        """The dim of a declared variable."""
        i = self.index.get(name)
        if i is None:
            raise ValueError(f"unknown dim variable {name!r}")
        return SymDim(self, (((0, i), 1),), 0)


def bounds_text(lower: int, upper: int | None) -> str:
    """``[1, 64]``, ``[1, inf]``: how messages and the text format spell bounds."""
    return f"[{lower}, {'inf' if upper is None else upper}]"


# ---------------------------------------------------------------------------
# keys: canonical affine forms
# ---------------------------------------------------------------------------

def _combine(terms: dict[Any, int], more: tuple[tuple[Any, int], ...], scale: int) -> None:
    for atom, c in more:
        v = terms.get(atom, 0) + c * scale
        if v:
            terms[atom] = v
        else:
            terms.pop(atom, None)


def add_keys(a: Key, b: Key, scale_b: int = 1) -> Key:
    """The key of ``a + scale_b * b``."""
    terms = dict(a[0])
    _combine(terms, b[0], scale_b)
    return tuple(sorted(terms.items())), a[1] + scale_b * b[1]


def scale_key(a: Key, c: int) -> Key:
    if c == 0:
        return (), 0
    return tuple((atom, k * c) for atom, k in a[0]), a[1] * c


def _monomial(atom: Any) -> tuple[int, ...]:
    """The variables an atom multiplies (a variable or a monomial); UndecidableDim for a
    floor-div, which products do not expand."""
    if atom[0] == 0:
        return (atom[1],)
    if atom[0] == 2:
        return atom[1]
    raise UndecidableDim("a product with a floor-division of symbolic dims is not supported")


def _monomial_atom(variables: tuple[int, ...]) -> Any:
    return (0, variables[0]) if len(variables) == 1 else (2, variables)


def mul_keys(a: Key, b: Key) -> Key:
    """The key of ``a * b``, multiplied out in the monomial basis (module doc)."""
    if not a[0]:
        return scale_key(b, a[1])
    if not b[0]:
        return scale_key(a, b[1])
    parts_a = [(_monomial(atom), c) for atom, c in a[0]] + [((), a[1])]
    parts_b = [(_monomial(atom), c) for atom, c in b[0]] + [((), b[1])]
    terms: dict[Any, int] = {}
    const = 0
    for ma, ca in parts_a:
        for mb, cb in parts_b:
            c = ca * cb
            if not c:
                continue
            if not ma and not mb:
                const += c
                continue
            atom = _monomial_atom(tuple(sorted(ma + mb)))
            v = terms.get(atom, 0) + c
            if v:
                terms[atom] = v
            else:
                terms.pop(atom)
    return tuple(sorted(terms.items())), const


def floordiv_key(a: Key, d: int) -> Key:
    """The key of ``a // d`` for an int ``d >= 1`` (see the module docstring)."""
    if d == 1:
        return a
    outer: dict[Any, int] = {}
    inner: list[tuple[Any, int]] = []
    for atom, c in a[0]:
        q, r = divmod(c, d)
        if q:
            outer[atom] = q
        if r:
            inner.append((atom, r))
    q0, r0 = divmod(a[1], d)
    if not inner:  # r0 // d == 0
        return tuple(sorted(outer.items())), q0
    if len(inner) == 1 and inner[0][1] == 1 and inner[0][0][0] == 1:
        _, k, e = inner[0][0]  # floor((floor(e / k) + r0) / d) = floor((e + r0*k) / (k*d))
        nested = floordiv_key(add_keys(e, ((), r0 * k)), k * d)
        return add_keys((tuple(sorted(outer.items())), q0), nested)
    g = math.gcd(d, r0, *(c for _, c in inner))  # < d: every inner coefficient is in (0, d)
    d, r0 = d // g, r0 // g
    atom: Any = (1, d, (tuple((a, c // g) for a, c in inner), r0))
    outer[atom] = outer.get(atom, 0) + 1
    return tuple(sorted(outer.items())), q0


def key_interval(key: Key, dims: DimVars) -> tuple[float, float]:
    """(lowest, highest) value of ``key`` over the variables' bounds (``inf`` unbounded).

    Two sound estimates, intersected: interval arithmetic over the atoms, and the same
    after writing each ``e // k`` as ``(e - r) / k`` with ``r`` in ``[0, k - 1]``, which
    lets ``2*(h // 2) - h`` cancel to ``-r`` (so ``2*(h // 2) <= h`` is decided)."""
    lo, hi = _atom_sum_interval(key, dims)
    coeffs: dict[Any, Fraction] = {}
    rests: list[tuple[Fraction, int]] = []
    const = _expand(key, Fraction(1), coeffs, rests)
    elo = ehi = const
    for atom, c in coeffs.items():
        if not c:
            continue  # cancelled (and 0 * inf would be nan)
        alo, ahi = _product_interval(atom, dims)
        vlo, vhi = Fraction(int(alo)), (ahi if math.isinf(ahi) else Fraction(int(ahi)))
        elo, ehi = (elo + c * vlo, ehi + c * vhi) if c > 0 else (elo + c * vhi, ehi + c * vlo)
    for c, k in rests:  # c * r with r in [0, k - 1]
        elo, ehi = (elo, ehi + c * (k - 1)) if c > 0 else (elo + c * (k - 1), ehi)
    # the value is an integer: round the expanded bounds inward
    lo = max(lo, math.ceil(elo) if math.isfinite(elo) else elo)
    hi = min(hi, math.floor(ehi) if math.isfinite(ehi) else ehi)
    return lo, hi


def _expand(key: Key, scale: Fraction, coeffs: dict[int, Fraction],
            rests: list[tuple[Fraction, int]]) -> Fraction:
    """Add ``scale * key`` to ``coeffs`` (per variable or monomial atom) and ``rests``
    (each floor-div's remainder), floor-divs written as ``(e - r) / k``; returns the
    constant part."""
    const = scale * key[1]
    for atom, c in key[0]:
        if atom[0] != 1:
            coeffs[atom] = coeffs.get(atom, Fraction(0)) + scale * c
        else:
            part = scale * c / atom[1]
            const += _expand(atom[2], part, coeffs, rests)
            rests.append((-part, atom[1]))
    return const


def _atom_sum_interval(key: Key, dims: DimVars) -> tuple[float, float]:
    lo = hi = float(key[1])
    for atom, c in key[0]:
        alo, ahi = _atom_interval(atom, dims)
        if c > 0:
            lo, hi = lo + c * alo, hi + c * ahi
        else:
            lo, hi = lo + c * ahi, hi + c * alo
    return lo, hi


def _product_interval(atom: Any, dims: DimVars) -> tuple[float, float]:
    """The interval of a variable or a monomial (variables are never negative)."""
    lo, hi = 1, 1
    for v in _monomial(atom):
        lo *= dims.lower[v]
        upper = dims.upper[v]
        if hi != 0:
            hi = 0 if upper == 0 else math.inf if upper is None or math.isinf(hi) else hi * upper
    return lo, hi


def _atom_interval(atom: Any, dims: DimVars) -> tuple[float, float]:
    if atom[0] != 1:
        return _product_interval(atom, dims)
    lo, hi = key_interval(atom[2], dims)
    k = atom[1]
    return (lo // k if math.isfinite(lo) else lo), (hi // k if math.isfinite(hi) else hi)


def key_text(key: Key, names: Sequence[str]) -> str:
    """The canonical spelling (the text format's): ``2*batch + seq - 1``, ``(h + 1) // 2``."""
    parts: list[str] = []
    for atom, c in key[0]:
        body = (names[atom[1]] if atom[0] == 0 else "*".join(names[v] for v in atom[1])
                if atom[0] == 2 else f"{_operand_text(atom[2], names)} // {atom[1]}")
        mag = abs(c)
        if atom[0] == 1 and (mag != 1 or (c < 0 and not parts)):
            body = f"({body})"  # ``2*((h + 1) // 2)``: ``*`` and ``//`` group to the left
        term = body if mag == 1 else f"{mag}*{body}"
        parts.append(("-" if c < 0 else "") + term if not parts else
                     (" - " if c < 0 else " + ") + term)
    if key[1] or not parts:
        parts.append(str(key[1]) if not parts else
                     (" - " if key[1] < 0 else " + ") + str(abs(key[1])))
    return "".join(parts)


def _operand_text(key: Key, names: Sequence[str]) -> str:
    """The dividend of a floor-div: bare when it is one variable, else in parentheses."""
    terms, const = key
    if not const and len(terms) == 1 and terms[0][1] == 1 and terms[0][0][0] == 0:
        return names[terms[0][0][1]]
    return f"({key_text(key, names)})"


def key_value(key: Key, values: Sequence[int]) -> int:
    """The value of ``key`` when variable ``i`` is ``values[i]``."""
    total = key[1]
    for atom, c in key[0]:
        if atom[0] == 0:
            total += c * values[atom[1]]
        elif atom[0] == 2:
            total += c * math.prod(values[v] for v in atom[1])
        else:
            total += c * (key_value(atom[2], values) // atom[1])
    return total


def key_vars(key: Key) -> set[int]:
    """The indices of the variables ``key`` mentions."""
    out: set[int] = set()
    for atom, _ in key[0]:
        if atom[0] == 0:
            out.add(atom[1])
        elif atom[0] == 2:
            out.update(atom[1])
        else:
            out |= key_vars(atom[2])
    return out


# ---------------------------------------------------------------------------
# the dim object the type rules see
# ---------------------------------------------------------------------------

Dim = Any  # int | SymDim


def make_dim(dims: DimVars, key: Key) -> Dim:
    """A plain int when ``key`` is constant, else a :class:`SymDim`."""
    return key[1] if not key[0] else SymDim(dims, key[0], key[1])


class SymDim:
    """A symbolic dim of one :class:`DimVars` (see the module docstring for what its
    operators decide). Built by ``DimVars.var`` and by arithmetic; never constant."""

    __slots__ = ("const", "dims", "terms")

    def __init__(self, dims: DimVars, terms: tuple[tuple[Any, int], ...], const: int) -> None:
        self.dims, self.terms, self.const = dims, terms, const

    @property
    def key(self) -> Key:
        return self.terms, self.const

    # -- arithmetic ------------------------------------------------------------
    def _other(self, other: object) -> Key | None:
        if isinstance(other, SymDim):
            if other.dims is not self.dims:
                raise ValueError(f"dims {self} and {other} belong to different functions")
            return other.key
        if isinstance(other, int) and not isinstance(other, bool):
            return (), other
        if hasattr(other, "__index__") and not isinstance(other, (bool, float)):
            return (), other.__index__()  # type: ignore[attr-defined]
        return None

    def __add__(self, other: object) -> Dim:
        k = self._other(other)
        return NotImplemented if k is None else make_dim(self.dims, add_keys(self.key, k))

    __radd__ = __add__

    def __sub__(self, other: object) -> Dim:
        k = self._other(other)
        return NotImplemented if k is None else make_dim(self.dims, add_keys(self.key, k, -1))

    def __rsub__(self, other: object) -> Dim:
        k = self._other(other)
        return NotImplemented if k is None else make_dim(self.dims, add_keys(k, self.key, -1))

    def __neg__(self) -> Dim:
        return make_dim(self.dims, scale_key(self.key, -1))

    def __mul__(self, other: object) -> Dim:
        k = self._other(other)
        if k is None:
            if isinstance(other, float):  # Resize's scales: no exact dim to give back
                raise UndecidableDim(f"({self}) * {other!r}: a symbolic dim scales by ints "
                                     "only (a float scale of a symbolic axis is not supported)")
            return NotImplemented
        try:
            return make_dim(self.dims, mul_keys(self.key, k))
        except UndecidableDim:
            raise UndecidableDim(f"the product ({self}) * ({make_dim(self.dims, k)}) is not "
                                 "supported: products of symbolic dims multiply out only "
                                 "without floor-divisions") from None

    __rmul__ = __mul__

    def _divisor(self, other: object, op: str) -> int:
        k = self._other(other)
        if k is None or k[0] or k[1] < 1:
            raise UndecidableDim(f"{self} {op} {other}: symbolic dims divide only by a "
                                 "constant >= 1")
        return k[1]

    def __floordiv__(self, other: object) -> Dim:
        return make_dim(self.dims, floordiv_key(self.key, self._divisor(other, "//")))

    def __mod__(self, other: object) -> Dim:
        d = self._divisor(other, "%")
        return make_dim(self.dims, add_keys(self.key, floordiv_key(self.key, d), -d))

    def __rfloordiv__(self, other: object) -> Dim:
        raise UndecidableDim(f"{other} // {self}: division by a symbolic dim is not supported")

    __rmod__ = __rtruediv__ = __truediv__ = __rfloordiv__

    # -- decisions -------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, SymDim):
            return self.dims is other.dims and self.key == other.key
        return False  # a SymDim is never a constant (constants are ints)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.key)

    def sign_range(self, other: object) -> tuple[float, float]:
        """Interval of ``self - other`` over the bounds."""
        k = self._other(other)
        if k is None:
            raise TypeError(f"cannot compare a dim with {other!r}")
        return key_interval(add_keys(self.key, k, -1), self.dims)

    def _decide(self, other: object, op: str, true_if: Any, false_if: Any) -> bool:
        lo, hi = self.sign_range(other)
        if true_if(lo, hi):
            return True
        if false_if(lo, hi):
            return False
        raise UndecidableDim(f"cannot decide whether {self} {op} {other} for every value "
                             f"of {self.describe_vars(other)}")

    def __lt__(self, other: object) -> bool:
        return self._decide(other, "<", lambda lo, hi: hi < 0, lambda lo, hi: lo >= 0)

    def __le__(self, other: object) -> bool:
        return self._decide(other, "<=", lambda lo, hi: hi <= 0, lambda lo, hi: lo > 0)

    def __gt__(self, other: object) -> bool:
        return self._decide(other, ">", lambda lo, hi: lo > 0, lambda lo, hi: hi <= 0)

    def __ge__(self, other: object) -> bool:
        return self._decide(other, ">=", lambda lo, hi: lo >= 0, lambda lo, hi: hi < 0)

    def __bool__(self) -> bool:
        return self._decide(0, "!=", lambda lo, hi: lo > 0 or hi < 0,
                            lambda lo, hi: lo == hi == 0)

    def __index__(self) -> int:
        raise UndecidableDim(f"the symbolic dim {self} has no static value here")

    __int__ = __index__

    # -- factors ---------------------------------------------------------------
    def factors(self) -> tuple[int, list[SymDim]]:
        """``self`` as a constant times symbolic factors: the common factor of the
        coefficients, the variables every term shares (``2*b*s + 2*s`` is 2 x ``s`` x
        ``b + 1``), and what is left as one factor. A reshape compares the factors of
        its input and target as multisets."""
        g = math.gcd(self.const, *(c for _, c in self.terms))
        key = (tuple((a, c // g) for a, c in self.terms), self.const // g)
        out: list[SymDim] = []
        if not key[1] and all(a[0] != 1 for a, _ in key[0]):
            common = list(_monomial(key[0][0][0]))
            for atom, _ in key[0][1:]:
                rest = list(_monomial(atom))
                common = [v for v in common if v in rest and not rest.remove(v)]
            for v in common:
                out.append(SymDim(self.dims, (((0, v), 1),), 0))
            if common:
                terms = []
                for atom, c in key[0]:
                    left = list(_monomial(atom))
                    for v in common:
                        left.remove(v)
                    terms.append(((_monomial_atom(tuple(left)) if left else None), c))
                if any(a is None for a, _ in terms):  # one term was exactly the common part
                    const = sum(c for a, c in terms if a is None)
                    key = (tuple(sorted((a, c) for a, c in terms if a is not None)), const)
                else:
                    key = (tuple(sorted(terms)), 0)
        if key[0]:
            out.append(SymDim(self.dims, key[0], key[1]))
        elif key[1] != 1:
            g *= key[1]
        return g, out

    # -- spelling --------------------------------------------------------------
    def describe_vars(self, other: object = 0) -> str:
        """``batch in [1, 64], h in [1, inf]``: the variables of this dim (and ``other``)."""
        found = key_vars(self.key)
        if isinstance(other, SymDim):
            found |= key_vars(other.key)
        d = self.dims
        return ", ".join(f"{d.names[i]} in {bounds_text(d.lower[i], d.upper[i])}"
                         for i in sorted(found))

    def __str__(self) -> str:
        return key_text(self.key, self.dims.names)

    __repr__ = __str__


def is_symbolic(dim: object) -> bool:
    return isinstance(dim, SymDim)


__all__ = ["DEFAULT_LOWER", "DimVars", "SymDim", "UndecidableDim", "bounds_text",
           "is_symbolic", "make_dim", "mul_keys"]
