"""ONNX Einsum, lowered at import to permute_dims, reshape, sum, take (diagonals) and
batched matmuls.

The equation is parsed once (explicit or implicit output, ``...`` broadcast dims, spaces);
each operand first takes the diagonal of a repeated label and sums the labels no one else
reads, then operands are contracted left to right: a pair becomes one ``matmul`` of
``[batch..., rows, k]`` by ``[batch..., k, cols]`` (the batch labels are the shared ones
still needed, ``k`` the shared ones that are not), and the result is permuted into the
output's label order. Imports the converter machinery only.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from irkernel.frontend.onnx.common import Context, OnnxOpConverter, Value, register

Args = list["Value | None"]
Labels = list[str]


def parse(ctx: Context, equation: str, ranks: list[int]) -> tuple[list[Labels], Labels]:
    """Per-operand labels and the output's; ``...`` becomes labels ``0``, ``1``, ...
    aligned from the right (NumPy broadcasting)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.error(f"equation {equation!r} has {len(terms)} operands, the node "
                        f"{len(ranks)}")
    n_ell = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks, strict=True)
                 if "..." in t), default=0)
    ell = [str(k) for k in range(n_ell)]

    def expand(term: str, rank: int | None) -> Labels:
        if any(c not in string.ascii_letters for c in term.replace("...", "")):
            raise ctx.error(f"equation {equation!r}: term {term!r} has a bad label")
        head, dots, tail = term.partition("...")
        if not dots:
            return list(term)
        n = (rank - len(head) - len(tail)) if rank is not None else n_ell
        return [*head, *ell[n_ell - n:], *tail]

    operands = [expand(t, r) for t, r in zip(terms, ranks, strict=True)]
    for t, labels, r in zip(terms, operands, ranks, strict=True):
        if len(labels) != r:
            raise ctx.error(f"equation {equation!r}: term {t!r} does not fit rank {r}")
    if arrow:
        out = expand(rhs, None)
    else:
        counts: dict[str, int] = {}
        for labels in operands:
            for c in labels:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1 and c not in ell)
    return operands, out


def _diagonal(ctx: Context, x: Value, labels: Labels) -> tuple[Value, Labels]:
    """Take the diagonal of each label repeated within one operand."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        d = x.shape[i]
        rest = [a for a in range(x.rank) if a not in (i, j)]
        x = ctx.emit("permute_dims", x, axes=(*rest, i, j))
        x = ctx.reshape(x, (*[x.shape[a] for a in range(len(rest))], d * d))
        x = ctx.emit("take", x, ctx.const(np.arange(d, dtype=np.int64) * (d + 1)),
                     axis=len(rest))
        labels = [labels[a] for a in rest] + [c]
    return x, labels


def _sum_out(ctx: Context, x: Value, labels: Labels, keep: set[str]) -> tuple[Value, Labels]:
    axes = tuple(a for a, c in enumerate(labels) if c not in keep)
    if not axes:
        return x, labels
    return ctx.emit("sum", x, axis=axes), [c for c in labels if c in keep]


def _arrange(ctx: Context, x: Value, labels: Labels, order: Labels) -> Value:
    perm = tuple(labels.index(c) for c in order)
    return x if perm == tuple(range(len(perm))) else ctx.emit("permute_dims", x, axes=perm)


def _contract(ctx: Context, a: Value, la: Labels, b: Value, lb: Labels,
              keep: set[str]) -> tuple[Value, Labels]:
    batch = [c for c in la if c in lb and c in keep]
    inner = [c for c in la if c in lb and c not in keep]
    rows = [c for c in la if c not in lb]
    cols = [c for c in lb if c not in la]
    size = {c: max(a.shape[la.index(c)] if c in la else 1, b.shape[lb.index(c)] if c in lb
                   else 1) for c in {*la, *lb}}
    for c in inner:  # a broadcast (size-1) contracted dim: materialize it on that side
        if a.shape[la.index(c)] != size[c]:
            a = ctx.emit("broadcast_to", a, shape=tuple(size[x] if x == c else
                                                         a.shape[la.index(x)] for x in la))
        if b.shape[lb.index(c)] != size[c]:
            b = ctx.emit("broadcast_to", b, shape=tuple(size[x] if x == c else
                                                         b.shape[lb.index(x)] for x in lb))
    a = _arrange(ctx, a, la, batch + rows + inner)
    b = _arrange(ctx, b, lb, batch + inner + cols)
    nb = len(batch)

    def count(cs: Labels) -> int:
        return int(np.prod([size[c] for c in cs], dtype=np.int64))

    a = ctx.reshape(a, (*a.shape[:nb], count(rows), count(inner)))
    b = ctx.reshape(b, (*b.shape[:nb], count(inner), count(cols)))
    y = ctx.emit("matmul", a, b)
    labels = batch + rows + cols
    return ctx.reshape(y, (*y.shape[:nb], *(size[c] for c in rows + cols))), labels


@register("Einsum")
class Einsum(OnnxOpConverter):
    graph_ops = ("broadcast_to", "matmul", "permute_dims", "reshape", "sum", "take")

    @classmethod
    def _impl_v12(cls, ctx: Context, args: Args, attrs: dict[str, Any]) -> Value:
        xs = [v for v in args if v is not None]
        if not xs:
            raise ctx.error("Einsum needs at least one input")
        equation = attrs.get("equation")
        if not isinstance(equation, str):
            raise ctx.error("Einsum needs the 'equation' attribute")
        terms, out = parse(ctx, equation, [v.rank for v in xs])
        ops = [_diagonal(ctx, v, t) for v, t in zip(xs, terms, strict=True)]
        x, labels = ops[0]
        for k in range(len(ops)):
            later = {c for _, t in ops[k + 1:] for c in t}
            if k:
                y, ly = _sum_out(ctx, *ops[k], later | set(out) | set(labels))
                x, labels = _contract(ctx, x, labels, y, ly, later | set(out))
            x, labels = _sum_out(ctx, x, labels, later | set(out))
        return _arrange(ctx, x, labels, out)


__all__ = ["Einsum", "parse"]
