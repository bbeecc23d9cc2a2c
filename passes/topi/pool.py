"""Max pooling as two passes per output row: a vertical max into a row scratch, then the
horizontal windows along that row.

Why not the per-plane window schedule (``conv.plane_window``, which max pools used
before): it copies every plane into phase-split scratch filled with -inf, a scalar copy
of the whole input with strided stores, before any max is taken; squeezenet1_1's three
3x3 stride-2 pools moved 4-10 GB/s there, against onnxruntime's 18-30.

Here each task takes one (image, channel) plane and, per output row ``oh``:

1. **vertical**: ``v[pl + j] = max_kh x[row(kh), j]`` over the whole input row, in
   full-width vectors of unit-stride loads (the rows are read straight from the input:
   no copy of the plane). Padding rows are never read: ``row(kh)`` clamps the tap to the
   first or last tap of the window that is inside the image (a repeated row does not
   change a max), so no select and no -inf rows;
2. **horizontal**: ``out[oh, ow] = max_kw v[ow * sw + kw * dw]``. The scratch row has
   ``pl`` -inf cells before the image and enough after it for the last (ceil_mode)
   window: written once per task, so horizontal padding costs nothing per row. With
   stride 1 this is vectorized along the output row. With a larger stride the taps of
   neighbouring outputs are ``sw`` apart: TIR has no shuffle, and a vectorized TIR loop
   over them is a lane-by-lane gather. On rows of more than ``GATHER_OUTPUTS`` outputs
   the loop stays serial and LLVM's loop vectorizer turns it into wide loads and
   shuffles (an interleaved access group), which was 15-20% faster than the gathers on
   squeezenet's and resnet's 55- and 56-wide output rows; on shorter rows the
   vectorizer's vector body hardly runs (27 outputs: one 16-wide iteration and 11 scalar
   ones), and the gathers were 1.5-2x faster than that. (A full-resolution max and a
   scalar decimation lost to both.)
   The maxima are compare-and-selects in a balanced tree with one NaN test per output
   (``max_taps``).

The output store is the only one, so FuseTIR's epilogue goes there. A window with no tap
inside the image along the rows (a padding at least as large as the dilated kernel) is
left to the canonical template (``pool_ok``). The maxima are taken in another order than
the reference's (columns of the window, then rows): the value is the same, NaN where
any tap is NaN, except the sign of a zero maximum of a window holding both -0 and +0.
Imports irkernel.tir, ``passes.topi.vector`` and ``passes.topi.conv``'s helpers.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.topi.conv import parallel_if_worth, row_chunk
from passes.topi.vector import vector_bits, vector_columns

#: Most outputs per row whose strided windows are read as TIR gathers of the scratch row;
#: longer rows are a serial loop that LLVM vectorizes with shuffles (measured on Zen 4,
#: 3x3 stride 2: gathers 1.5-2x faster at 13 and 27 outputs, 15-20% slower at 55 and 56).
GATHER_OUTPUTS = 32
#: Most taps along one axis of a window (the vertical and the horizontal pass each take
#: one max of that many values per store; wider windows keep the canonical loop).
MAX_TAPS = 64


def pool_ok(x_shape: tuple[int, ...], kernel: tuple[int, ...], strides: tuple[int, ...],
            pad_begin: tuple[int, ...], dilation: tuple[int, ...], out_size: tuple[int, ...],
            dtype: str) -> bool:
    """Whether this schedule covers a max_pool: float32, 2-D (NCHW), at most ``MAX_TAPS``
    taps along each axis (the passes cost kh + kw taps per output, so YOLO's 13x13
    spatial pyramid pools are cheap here), and every output row's window has a tap
    inside the image (always unless the padding reaches past the whole dilated kernel)."""
    if dtype != "float32" or len(x_shape) != 4 or max(kernel) > MAX_TAPS:
        return False
    h, (kh, sh, pt, dh, oh) = x_shape[2], (kernel[0], strides[0], pad_begin[0],
                                           dilation[0], out_size[0])
    return all(_row_taps(o, h, kh, sh, pt, dh)[0] <= _row_taps(o, h, kh, sh, pt, dh)[1]
               for o in range(oh))


def _row_taps(o: int, h: int, kh: int, sh: int, pt: int, dh: int) -> tuple[int, int]:
    """The first and last kernel row of output row ``o`` that fall inside the image."""
    base = o * sh - pt
    return max(0, -(base // dh)), min(kh - 1, (h - 1 - base) // dh)


def max_taps(values: list) -> object:
    """The max of ``values`` (TIR expressions), NaN when any is NaN, as ``T.max`` gives,
    but with one compare-and-select per tap (x86 ``maxps``) and one NaN test for all:
    ``T.max`` is ``llvm.maximum``, five to six AVX-512 instructions per tap, which made the
    pool twice as slow. (The sign of a zero max may differ from ``llvm.maximum``'s, as
    it does between NumPy and the canonical template: -0 and +0 compare equal.)

    The selects form a balanced tree: a select names each operand twice, so a chain
    ``select(v > acc, v, acc)`` over k taps is a tree of 2**k nodes to every pass that
    walks it (a 13x13 pool's expression took minutes to print and lower); a balanced
    tree is about k**2, and its independent selects run in parallel."""
    nan = T.ne(values[0], values[0])
    for v in values[1:]:
        nan = nan | T.ne(v, v)
    level = list(values)
    while len(level) > 1:
        pairs = [T.select(b > a, b, a) for a, b in zip(level[::2], level[1::2])]
        level = pairs + level[len(pairs) * 2:]
    if len(values) == 1:
        return level[0]
    return T.select(nan, T.float32(float("nan")), level[0])


def max_pool_rows(x_shape: tuple[int, int, int, int], kernel: tuple[int, int],
                  strides: tuple[int, int], pad_begin: tuple[int, int],
                  dilation: tuple[int, int], out_hw: tuple[int, int],
                  bits: int = 0) -> PrimFunc:
    """The row-pass max pool ``(x0, out)`` (see the module docstring) for the target's
    vector width (``bits``: 0 for the current target's)."""
    return _pool("max", tuple(x_shape), tuple(kernel), tuple(strides), tuple(pad_begin),
                 tuple(dilation), tuple(out_hw), (), (), row_chunk(bits or vector_bits()),
                 (bits or vector_bits()) // 32)


def avg_pool_rows(x_shape: tuple[int, int, int, int], kernel: tuple[int, int],
                  strides: tuple[int, int], pad_begin: tuple[int, int],
                  dilation: tuple[int, int], out_hw: tuple[int, int],
                  divisors: tuple[tuple[int, ...], tuple[int, ...]], bounds: tuple[int, ...],
                  bits: int = 0) -> PrimFunc:
    """The row-pass average pool ``(x0, out)``: sums by the same two passes, each output
    divided by its window's count, ``divisors[0][oh] * divisors[1][ow]``
    (``nn_rules.pool_divisors``); ``bounds`` = (top, bottom, left, right): the range of
    input positions those counts cover (``[-pad, size + pad)`` with count_include_pad,
    ``[0, size)`` without), from which the kernel computes them."""
    return _pool("avg", tuple(x_shape), tuple(kernel), tuple(strides), tuple(pad_begin),
                 tuple(dilation), tuple(out_hw), tuple(map(tuple, divisors)), tuple(bounds),
                 row_chunk(bits or vector_bits()), (bits or vector_bits()) // 32)


def _count(o, lo: int, hi: int, k: int, s: int, pad: int, d: int, counts: tuple[int, ...]):
    """The taps of window ``o`` (a TIR index) inside ``[lo, hi)``, at least 1, as a float32
    (exact: a count is far below 2**24): the constant when every window has the same
    count (the usual case), else computed."""
    if len(set(counts)) == 1:
        return T.float32(float(counts[0]))
    base = o * s - pad
    first = T.max(T.floordiv(lo - base + d - 1, d), 0)
    last = T.min(T.floordiv(hi - 1 - base, d), k - 1)
    return T.cast("float32", T.max(last - first + 1, 1))


@lru_cache(maxsize=256)
def _pool(  # noqa: C901 (trace-time specialization)
        kind: str, x_shape: tuple[int, int, int, int], kernel: tuple[int, int],
        strides: tuple[int, int], pad_begin: tuple[int, int], dilation: tuple[int, int],
        out_hw: tuple[int, int], divisors: tuple[tuple[int, ...], ...],
        bounds: tuple[int, ...], step: int, lanes: int) -> PrimFunc:
    n_, c_, h_, w_ = x_shape
    kh_, kw_ = kernel
    sh, sw = strides
    dh, dw = dilation
    pt, pl = pad_begin
    oh_, ow_ = out_hw
    # the scratch row: pl padding cells, the image row, padding up to the last window's
    # reach; padding is -inf for a max, 0 for a sum
    wp = max(pl + w_, (ow_ - 1) * sw + (kw_ - 1) * dw + 1)
    top = any(_row_taps(o, h_, kh_, sh, pt, dh)[0] > 0 for o in range(oh_))
    bottom = any(_row_taps(o, h_, kh_, sh, pt, dh)[1] < kh_ - 1 for o in range(oh_))
    dtype = "float32"
    average = kind == "avg"
    fill = 0.0 if average else float("-inf")
    serial = sw > 1 and ow_ > GATHER_OUTPUTS

    def rows(oh):
        """The input row of each kernel row of output row ``oh``, clamped to the first or
        last one inside the image where the window can reach past it, and whether the
        kernel row is inside (None: always)."""
        base = oh * sh - pt
        out = []
        lo = T.max(T.floordiv(pt - oh * sh + dh - 1, dh), 0) if top else None
        hi = T.min(T.floordiv(h_ - 1 + pt - oh * sh, dh), kh_ - 1) if bottom else None
        for kh in range(kh_):
            k, inside = kh, None
            if lo is not None:
                k, inside = T.max(k, lo), lo <= kh
            if hi is not None:
                k = T.min(k, hi)
                inside = kh <= hi if inside is None else inside & (kh <= hi)
            out.append((base + k * dh, inside))
        return out

    def vmax(x0, n, c, src, j):
        return max_taps([x0[n, c, r, j] for r, _ in src])

    def vsum(x0, n, c, src, j):
        """A clamped row repeats a row inside: it adds 0 instead."""
        total = None
        for r, inside in src:
            v = x0[n, c, r, j]
            if inside is not None:
                v = T.select(inside, v, T.float32(0.0))
            total = v if total is None else total + v
        return total

    def window(v, j):
        taps = [v[j * sw + kw * dw] for kw in range(kw_)]
        if not average:
            return max_taps(taps)
        total = taps[0]
        for t in taps[1:]:
            total = total + t
        return total

    vertical_of = vsum if average else vmax
    if average:
        top_lo, bottom_hi, left_lo, right_hi = bounds
        rows_of, cols_of = divisors

    def store(out, n, c, oh, ow, v, rcount):
        value = window(v, ow)
        if average:
            ccount = _count(ow, left_lo, right_hi, kw_, sw, pl, dw, cols_of)
            value = value / (rcount * ccount)  # the product of two exact counts: exact
        out[n, c, oh, ow] = value

    @T.prim_func(private=True)
    def pool(x0: T.Buffer((n_, c_, h_, w_), dtype), out: T.Buffer((n_, c_, oh_, ow_), dtype)):
        for t in parallel_if_worth(n_ * c_ * (h_ * w_ * kh_ + oh_ * ow_ * kw_))(n_ * c_):
            n, c = t // c_, t % c_
            v = T.alloc_buffer((wp,), dtype)
            if pl:
                for q in T.serial(pl):
                    v[q] = fill
            if wp > pl + w_:
                for q in T.serial(wp - pl - w_):
                    v[pl + w_ + q] = fill
            for oh in T.serial(oh_):
                src = rows(oh)
                rcount = (_count(oh, top_lo, bottom_hi, kh_, sh, pt, dh, rows_of)
                          if average else None)

                def vertical(j):
                    v[pl + j] = vertical_of(x0, n, c, src, j)  # noqa: B023

                vector_columns(w_, lanes, vertical, step)
                if serial:
                    for ow in T.serial(ow_):
                        store(out, n, c, oh, ow, v, rcount)
                else:
                    def horizontal(j):
                        store(out, n, c, oh, j, v, rcount)  # noqa: B023

                    vector_columns(ow_, lanes, horizontal, step)

    return pool.with_attr("schedule", f"{kind}_pool_rows")


__all__ = ["GATHER_OUTPUTS", "MAX_TAPS", "avg_pool_rows", "max_pool_rows", "max_taps",
           "pool_ok"]
