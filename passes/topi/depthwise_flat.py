"""Depthwise convs vectorized along the flattened output plane, at any map size.

Why: the per-row schedule (``conv.plane_window``) fills a 7- or 14-wide output row with
4-, 2- and 1-lane pieces, and the channel-vectorized one (the former ``depthwise_small``)
spent most of its time transposing: scalar stores into a channel-last scratch, then a
16-lane scatter per output pixel into NCHW (5-6 GB/s on mobilenet_v2's 14x14 layers,
against onnxruntime's 2.5x). Here the vector runs along the output plane flattened,
``p = oh * OW + ow``: a chunk of consecutive ``p`` spans row ends, so a 7x7 map is three
full vectors and one lane, and every output store (where FuseTIR puts the epilogue: bias,
relu6, SiLU) is a full vector of the NCHW output, with no transpose anywhere.

**The taps are constant offsets of ``p``.** The input is read through phase planes
(``S_ab[i, j] = x[s*i + a, s*j + b]``, zero outside the image) whose rows are exactly
``OW`` long. Tap ``(kh, kw)``, with ``kh*dh - pt = s*ey + a`` and ``kw*dw - pl = s*ex +
b``, reads ``S_ab[oh + ey, ow + ex]``, which in the flattened plane is ``p + ey*OW + ex``:
one unaligned vector load. A lane whose ``ow + ex`` falls outside ``[0, OW)`` read a
neighbouring row's element instead of padding, so the taps are summed per ``ex`` and
each off-centre group passes through a select on a precomputed column mask, whose false
side is what the padding would give, ``0 * sum w`` (a select, not a multiply: an inf in
the neighbouring row must not turn into ``0 * inf``; an inf weight must still give NaN,
as in the reference). That is exact as long as every column past the phase rows' end is
padding, ``s * OW >= W`` (``flat_ok``): true of "same" padding at any stride, i.e. every
depthwise layer of the CNNs; other shapes keep ``plane_window``. The masks are periodic
in ``p`` with period ``lcm(OW, chunk)``; one table per kernel call, before the parallel
loop. A chunk is two vectors (two independent fma chains); after the last whole chunk
come one vector and the last partial vector, computed whole into scratch and its real
lanes copied out (a 1-lane piece would be one scalar chain of every tap).

**Copies.** With stride 1 and ``OW == W`` the phase plane *is* the input plane extended
with zeros, so the chunks whose taps all fall inside the plane read the input directly;
only the first and last chunks (those reaching the padding rows) read two small scratch
windows, zero-extended copies of the plane's ends, computed last. Other planes are
copied into their phase planes first, in groups of planes (``GROUP_ELEMENTS``) all
copied before any is computed: a load that spans two stores still in the store buffer
waits for both, and a 7x7 plane's taps are read right after its copy. With a column
stride the column phases of a row are read in one loop (LLVM turns it into
de-interleaving shuffles); for short phase rows, which LLVM turned into gathers, over
the whole plane at once into scratch first (``deinterleave_ok``). A plane whose phase
planes would overflow half of L1 is taken in bands of output rows (``band_rows``), each
band's phase rows copied and then its chunks computed.

**Many taps.** A fused kernel of more taps than vector registers (7x7 with AVX-512)
spills its weights; then the plane is computed one pass per column group (``KH`` weights
in registers) adding into a plane accumulator, then stored (``by_group_worth``). Past
``MANY_TAPS`` taps, rows of 16 or more (or of 12-15 with 16 lanes) take the
row-blocked schedule instead
(``depthwise_rows``, which shares input rows between output rows). Parallel over planes
or groups of planes. float32 and float64 (half the lanes). Imports irkernel.tir and
passes.topi.vector only.
"""

# no `from __future__ import annotations`: T.prim_func evaluates the closures in annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from irkernel.tir import script as T
from irkernel.tir.function import PrimFunc
from passes.topi.vector import current_target, registers, vector_bits

#: Largest mask period (elements, ``lcm(OW, chunk)``) kept in a table; wider rows of an
#: odd width keep ``plane_window`` (no CNN layer comes near it).
MAX_PERIOD = 8192
#: Most taps a kernel may have to run fused on rows 16 wide (more: ``depthwise_rows``).
MANY_TAPS = 16
#: Parallel work (multiply-adds) below which the planes run on one thread.
PARALLEL_MIN_TAPS = 1 << 16
#: Most scratch elements of a group of small planes copied before any is computed (16 KiB
#: of float32: half of L1).
GROUP_ELEMENTS = 4096
#: Phase rows (input columns / stride) below which the column phases of a whole plane
#: are split in one loop before the rows are copied (measured: 14 and 7 twice as fast as
#: row by row, 28 and 56 slower).
SPLIT_ROWS_BELOW = 16
#: Parallel tasks to aim for when grouping planes (balance over two to eight threads).
MIN_TASKS = 16
#: Most bands of output rows a large plane is computed in (``band_rows``).
MAX_BANDS = 8


class _always:
    """A no-op context manager: the group's planes all exist."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def flat_ok(x_shape: tuple[int, ...], kernel: tuple[int, ...], strides: tuple[int, ...],
            pad_begin: tuple[int, ...], out_hw: tuple[int, ...], dtype: str,
            bits: int = 0) -> bool:
    """Whether a depthwise conv (``conv.depthwise_ok`` signature) can run flattened: the
    output covers every input column (``s * OW >= W``: no column a tap reads lies past
    the phase rows' end) and the mask period fits ``MAX_PERIOD``."""
    if dtype not in ("float32", "float64"):
        return False
    chunk = _chunk(dtype, bits or vector_bits())
    return strides[1] * out_hw[1] >= x_shape[3] and math.lcm(out_hw[1], chunk) <= MAX_PERIOD


def many_taps(kernel: tuple[int, ...]) -> bool:
    """Whether a kernel has more than ``MANY_TAPS`` taps (5x5, 7x7): on rows 16 wide
    they run in row blocks (``depthwise_rows``; with AVX2 code, 3x3 kernels ran faster
    here)."""
    return kernel[0] * kernel[1] > MANY_TAPS


def by_group_worth(kernel: tuple[int, ...], bits: int) -> bool:
    """Whether the flattened schedule runs one pass per column group: more taps than vector
    registers (their weights spill when fused: 7x7 with AVX-512, 5x5 too with AVX2;
    measured, 5x5 on 7x7 and 14x14 maps ran faster fused with AVX-512)."""
    return kernel[0] * kernel[1] > registers(bits)


def _chunk(dtype: str, bits: int) -> int:
    """Lanes per chunk: two vectors (two independent fma chains per tap group)."""
    return 2 * bits // (32 if dtype == "float32" else 64)


@dataclass(frozen=True)
class Taps:
    """The taps grouped by column offset ``ex``: ``groups[ex] = [(phase, flat offset,
    kh, kw), ...]`` with the flat offset ``ey * OW + ex`` relative to ``p``."""

    groups: dict[int, list[tuple[tuple[int, int], int, int, int]]]
    phases: list[tuple[int, int]]
    rows: tuple[int, int]  # ey of the first and one past the last tap row
    ow: int  # the output rows' length (the phase planes')

    @staticmethod
    def of(kernel, strides, pad_begin, dilation, ow_) -> "Taps":
        groups: dict[int, list] = {}
        eys = []
        for kh in range(kernel[0]):
            ey, a = divmod(kh * dilation[0] - pad_begin[0], strides[0])
            eys.append(ey)
            for kw in range(kernel[1]):
                ex, b = divmod(kw * dilation[1] - pad_begin[1], strides[1])
                groups.setdefault(ex, []).append(((a, b), ey * ow_ + ex, kh, kw))
        phases = sorted({tap[0] for taps in groups.values() for tap in taps})
        return Taps(dict(sorted(groups.items())), phases, (min(eys), max(eys) + 1), ow_)

    @property
    def offsets(self) -> list[int]:
        return [tap[1] for taps in self.groups.values() for tap in taps]

    def centre_first(self) -> list[tuple[int, list]]:
        """The groups, the centre one (``ex = 0``, never masked) first: by-group passes
        start from it."""
        return sorted(self.groups.items(), key=lambda item: item[0] != 0)

    def layout(self, oh_: int, overshoot: int) -> tuple[int, int, int]:
        """``(rows, front, plane)`` of a phase plane: rows ``ey_min .. OH + ey_max - 1``
        of ``OW``, after ``front`` elements of slack for the masked lanes that cross the
        plane's start, with slack after them for those that cross its end and for the
        ``overshoot`` lanes computed past the last output."""
        ow_ = self.ow
        lo, hi = min(self.offsets), max(self.offsets)
        rows = oh_ + self.rows[1] - 1 - self.rows[0]
        front = max(self.rows[0] * ow_ - lo, 0)
        back = max(hi - (self.rows[1] - 1) * ow_, 0) + overshoot
        return rows, front, front + rows * ow_ + back


def depthwise_flat(x_shape: tuple[int, int, int, int], w_shape: tuple[int, int, int, int],
                   strides: tuple[int, int], pad_begin: tuple[int, int],
                   dilation: tuple[int, int], out_hw: tuple[int, int], dtype: str = "float32",
                   bits: int = 0, by_group: bool | None = None) -> PrimFunc:
    """The flattened depthwise conv ``(x0, x1: (C, 1, KH, KW), out)`` (see the module
    docstring; ``flat_ok`` must hold). ``by_group``: one pass per column group (None:
    ``by_group_worth``)."""
    bits = bits or vector_bits()
    if by_group is None:
        by_group = by_group_worth(w_shape[2:], bits)
    return _depthwise_flat(tuple(x_shape), tuple(w_shape), tuple(strides), tuple(pad_begin),
                           tuple(dilation), tuple(out_hw), dtype, _chunk(dtype, bits) // 2, 2,
                           by_group, current_target().l1d)


@lru_cache(maxsize=256)
def _depthwise_flat(  # noqa: C901 (trace-time specialization)
        x_shape: tuple[int, int, int, int], w_shape: tuple[int, int, int, int],
        strides: tuple[int, int], pad_begin: tuple[int, int], dilation: tuple[int, int],
        out_hw: tuple[int, int], dtype: str, lanes: int, vectors: int,
        by_group: bool, l1d: int) -> PrimFunc:
    n_, c_, h_, w_ = x_shape
    oh_, ow_ = out_hw
    p_ = oh_ * ow_
    taps = Taps.of(w_shape[2:], strides, pad_begin, dilation, ow_)
    lo, hi = min(taps.offsets), max(taps.offsets)
    masked = [ex for ex in taps.groups if ex != 0]
    chunk = lanes * vectors
    period = math.lcm(ow_, chunk)
    full = p_ // chunk  # whole chunks; the rest in vectors
    p_end = -(-p_ // lanes) * lanes  # past the last lane computed
    zero = getattr(T, dtype)(0.0)
    # Split: the phase plane is the image itself (stride 1, rows as long as the output's):
    # the steps whose taps stay inside the plane read x0, the others two scratch windows.
    step, steps = (lanes, p_end // lanes) if by_group else (chunk, full)
    first_in = -(-max(-lo, 0) // step)  # first step whose taps start inside the plane
    last_in = min(max((h_ * w_ - hi) // step, 0), steps)  # past the last such step
    split = strides == (1, 1) and ow_ == w_ and last_in - first_in >= 2
    # Otherwise every phase plane's rows ey_min .. OH + ey_max - 1, with slack before and
    # after for the masked lanes that cross the plane's ends.
    rows, front, plane = taps.layout(oh_, p_end - p_)
    groups = taps.centre_first()
    band = 0 if split or by_group or deinterleave_ok(x_shape, strides) else band_rows(
        taps, oh_, chunk, l1d // (4 if dtype == "float32" else 8))

    @T.prim_func(private=True)
    def depthwise(x0: T.Buffer(x_shape, dtype), x1: T.Buffer(w_shape, dtype),  # noqa: C901
                  out: T.Buffer((n_, c_, oh_, ow_), dtype)):
        masks = mask_table(masked, period, ow_, dtype)

        def group_sum(source, c, f, pm, ex, group):
            """Taps ``group`` (column offset ``ex``) at lanes ``f`` (output positions), tap
            ``off`` read as ``source(phase, f + off)``; ``pm``: ``f`` modulo the mask
            period."""
            inside = masks[masked.index(ex), pm] > 0.5 if ex else None
            return tap_sum(x1, c, group, lambda ph, off: source(ph, f + off), inside, zero)

        def sums(source, c, f, pm):
            acc = None
            for ex, group in groups:
                s = group_sum(source, c, f, pm, ex, group)
                acc = s if acc is None else acc + s
            return acc

        def store(n, c, f, value):
            out[n, c, T.floordiv(f, ow_), T.floormod(f, ow_)] = value

        def chunks(c0, c1, value, n, c, rest):
            """Output chunks ``[c0, c1)`` of ``value(f, pm)``; with ``rest``, the
            positions after the last whole chunk."""
            if c1 > c0:
                for v in T.serial(c0, c1):
                    pm = T.floormod(v * chunk, period)
                    for ji in T.vectorized(chunk):
                        store(n, c, v * chunk + ji, value(v * chunk + ji, pm + ji))
            if rest and p_ > full * chunk:
                # one vector stored directly, then the last partial vector computed whole
                # into scratch (a 1-lane piece would be a scalar chain of every tap) and
                # its real lanes copied out
                base = full * chunk
                if p_ - base >= lanes:
                    for ji in T.vectorized(lanes):
                        store(n, c, base + ji, value(base + ji, base % period + ji))
                    base += lanes
                if p_ > base:
                    last = T.alloc_buffer((lanes,), dtype)
                    for ji in T.vectorized(lanes):
                        last[ji] = value(base + ji, base % period + ji)
                    for j in T.serial(p_ - base):
                        store(n, c, base + j, last[j])

        def plane_conv(ranges, n, c, acc):
            """One plane: ``ranges`` of steps ``(first, end, source)``."""
            if not by_group:
                for k, (v0, v1, source) in enumerate(ranges):
                    chunks(v0, v1, lambda f, pm: sums(source, c, f, pm),  # noqa: B023
                           n, c, k == len(ranges) - 1)
                return
            # one pass per column group, its few weights in registers, through ``acc``
            for e, (ex, group) in enumerate(groups):
                for v0, v1, source in ranges:
                    if v1 > v0:
                        for v in T.serial(v0, v1):
                            pm = T.floormod(v * lanes, period)
                            for ji in T.vectorized(lanes):
                                s = group_sum(source, c, v * lanes + ji, pm + ji, ex, group)
                                acc[v * lanes + ji] = s if e == 0 else acc[v * lanes + ji] + s
            chunks(0, full, lambda f, pm: acc[f], n, c, True)

        planes = n_ * c_
        parallel = T.parallel if planes * p_ * len(taps.offsets) >= PARALLEL_MIN_TAPS \
            else T.serial
        if split:
            for t in parallel(planes):
                n, c = t // c_, t % c_
                # windows of the zero-extended plane around its two ends, read after the
                # middle (so their stores have left the store buffer: a load spanning
                # two pending stores waits for both)
                top, bottom = (lo, first_in * step + hi), (last_in * step + lo, p_end + hi)
                xpad_top = T.alloc_buffer((top[1] - top[0],), dtype)
                xpad_bottom = T.alloc_buffer((bottom[1] - bottom[0],), dtype)
                acc = T.alloc_buffer((p_end,), dtype) if by_group else None
                _window(xpad_top, x0, n, c, top, h_ * w_, w_)
                _window(xpad_bottom, x0, n, c, bottom, h_ * w_, w_)
                plane_conv([
                    (first_in, last_in, lambda _, f: x0[  # noqa: B023
                        n, c, T.floordiv(f, w_), T.floormod(f, w_)]),  # noqa: B023
                    (0, first_in, lambda _, f: xpad_top[f - top[0]]),  # noqa: B023
                    (last_in, steps, lambda _, f: xpad_bottom[f - bottom[0]])],  # noqa: B023
                    n, c, acc)
        elif band:
            # one plane a task, in bands of output rows: the band's phase rows copied, then
            # its chunks computed, so the scratch stays in L1
            spans = [(r0, min(r0 + band, oh_)) for r0 in range(0, oh_, band)]
            layouts = [taps.layout(r1 - r0, p_end - p_ if r1 == oh_ else 0)
                       for r0, r1 in spans]
            for t in parallel(planes):
                n, c = t // c_, t % c_
                xpad = T.alloc_buffer((len(taps.phases) * max(lay[2] for lay in layouts),),
                                      dtype)
                for (r0, r1), (rows_b, front_b, plane_b) in zip(spans, layouts, strict=True):
                    phase_copy(xpad, x0, n, c, 0, taps, strides, (h_, w_), ow_, rows_b,
                               front_b, plane_b, first_row=r0)
                    origin = front_b - (taps.rows[0] + r0) * ow_
                    last = r1 == oh_
                    chunks(r0 * ow_ // chunk, full if last else r1 * ow_ // chunk,
                           lambda f, pm, origin=origin, plane_b=plane_b: sums(
                               lambda ph, g: xpad[taps.phases.index(ph) * plane_b  # noqa: B023
                                                  + origin + g], c, f, pm),  # noqa: B023
                           n, c, last)
        else:
            # groups of planes: all copied, then all computed (the same store-buffer reason)
            size = len(taps.phases) * plane
            group = max(1, min(GROUP_ELEMENTS // size, -(-planes // MIN_TASKS)))
            tasks = -(-planes // group)
            origin = front - taps.rows[0] * ow_  # where position p = 0 sits in a plane
            for t in parallel(tasks):
                xpad = T.alloc_buffer((group * size,), dtype)
                split_cols = T.alloc_buffer((h_ * w_,), dtype) \
                    if deinterleave_ok(x_shape, strides) else None
                acc = T.alloc_buffer((p_end,), dtype) if by_group else None
                for stage in range(2):
                    for g in T.serial(group):
                        pl = t * group + g
                        n, c = pl // c_, pl % c_
                        with T.If(pl < planes) if planes % group else _always():
                            if stage == 0:
                                phase_copy(xpad, x0, n, c, g * size, taps, strides, (h_, w_),
                                            ow_, rows, front, plane, split_cols)
                            else:
                                plane_conv([(0, steps, lambda ph, f: xpad[  # noqa: B023
                                    g * size + taps.phases.index(ph) * plane  # noqa: B023
                                    + origin + f])], n, c, acc)  # noqa: B023

    return depthwise.with_attr("schedule", "depthwise_flat")


def band_rows(taps: Taps, oh_: int, chunk: int, l1_elements: int) -> int:
    """Output rows per band of a plane whose phase planes would overflow half of L1
    (``l1_elements``: L1 in elements), else 0 (no bands). A band is a whole number of
    chunks (rows a multiple of ``chunk / gcd(OW, chunk)``) whose phase rows, halo
    included, fit half of L1; at most ``MAX_BANDS`` bands (each is code of its own). Why:
    the 96-channel 112x112 stride-2 layer of mobilenet_v2 copied each plane's 51 KB of
    phase planes before computing it, and ran at 20 GB/s where the 56x56 one, whose
    13 KB stay in L1, ran at 27."""
    ow_, nph = taps.ow, len(taps.phases)
    halo = taps.rows[1] - taps.rows[0] - 1
    _, _, plane = taps.layout(oh_, chunk)
    budget = l1_elements // 2
    if nph * plane <= budget:
        return 0
    step = chunk // math.gcd(ow_, chunk)
    fit = (budget // nph - (plane - (oh_ + halo) * ow_)) // ow_ - halo  # rows that fit
    rows = max(fit // step, 1, -(-oh_ // (MAX_BANDS * step))) * step
    return rows if rows < oh_ else 0


def tap_sum(x1, c, group, read, inside, zero):
    """``sum w * x`` over the taps of ``group`` (``read(phase, off)`` a tap's input), an
    fma chain; where ``inside`` (None: everywhere) is false the lane is off its row, so
    the taps are padding: ``0 * sum w`` (NaN for an inf or NaN weight, as in the
    reference), through a select (a multiply by a 0/1 mask would turn an inf in the
    neighbouring row into NaN)."""
    s = None
    for phase, off, kh, kw in group:
        xv, wv = read(phase, off), x1[c, 0, kh, kw]
        s = wv * xv if s is None else T.fma(wv, xv, s)
    if inside is None:
        return s
    total = None
    for _, _, kh, kw in group:
        total = x1[c, 0, kh, kw] if total is None else total + x1[c, 0, kh, kw]
    return T.select(inside, s, zero * total)


def mask_table(masked: list[int], period: int, ow_: int, dtype: str):
    """Emit: the mask table ``masks[e, q]``, 1 where column ``q % OW + ex`` of group
    ``masked[e]`` is inside ``[0, OW)``, else 0, for ``q`` over ``period`` (a multiple of
    ``OW``); None when no group is masked."""
    if not masked:
        return None
    masks = T.alloc_buffer((len(masked), period), dtype)
    for e, ex in enumerate(masked):
        j0 = min(max(-ex, 0), ow_)
        j1 = max(min(ow_ - ex, ow_), j0)
        for r in T.serial(period // ow_):
            for j, j_end, value in ((0, j0, 0.0), (j0, j1, 1.0), (j1, ow_, 0.0)):
                if j_end > j:
                    for q in T.serial(j, j_end):
                        masks[e, r * ow_ + q] = value
    return masks


def _window(buf, x0, n, c, span, hw, w_) -> None:
    """Emit: ``buf[f - f0] = x0[n, c]`` flattened at ``f`` for ``f`` in ``span = (f0, f1)``,
    zero outside the plane's ``hw`` elements (trace-time bounds: fills and a copy)."""
    f0, f1 = span
    a, b = min(max(f0, 0), f1), max(min(f1, hw), min(max(f0, 0), f1))
    if a > f0:
        for q in T.serial(a - f0):
            buf[q] = 0.0
    if b > a:
        for f in T.serial(a, b):
            buf[f - f0] = x0[n, c, T.floordiv(f, w_), T.floormod(f, w_)]
    if f1 > b:
        for q in T.serial(b - f0, f1 - f0):
            buf[q] = 0.0


def deinterleave_ok(x_shape: tuple[int, ...], strides: tuple[int, int]) -> bool:
    """Whether the column phases are split over the whole plane at once (``phase_copy``):
    a column stride, rows that hold a whole number of strides, and phase rows shorter
    than ``SPLIT_ROWS_BELOW`` (longer ones LLVM vectorizes row by row)."""
    return strides[1] > 1 and x_shape[3] % strides[1] == 0 \
        and x_shape[3] // strides[1] < SPLIT_ROWS_BELOW


def phase_copy(xpad, x0, n, c, at0, taps, strides, hw, ow_, rows, front, plane,
                split=None, first_row: int = 0) -> None:
    """Emit: the phase planes ``taps.phases`` of image ``(n, c)`` into ``xpad[at0...]`` (one per
    ``plane`` elements: ``front`` zeros, ``rows`` rows of ``ow_``, zeros to the end), row
    ``i`` of phase ``(a, b)`` holding ``x[s*(i + ey_min) + a, s*j + b]``, zero outside
    the image. With a column stride, the column phases are read in one loop (LLVM turns it
    into de-interleaving shuffles; the loop of one short row it turned into gathers): over
    the whole plane into ``split`` (``deinterleave_ok``: ``split[b * HW/s + m] =
    x[s*m + b]`` flat), whose rows are then copied; else row by row. ``first_row``: the
    rows are a band's, from phase row ``first_row`` on (``band_rows``)."""
    (sh, sw), (h_, w_) = strides, hw
    ey0 = taps.rows[0] + first_row
    for k in range(len(taps.phases)):  # the slack before and after the rows
        for q in T.serial(front):
            xpad[at0 + k * plane + q] = 0.0
        for q in T.serial(front + rows * ow_, plane):
            xpad[at0 + k * plane + q] = 0.0
    used = sorted({ph[1] for ph in taps.phases})
    wq, per = w_ // sw, h_ * w_ // sw  # a split row's length, a column phase's size
    if split is not None:
        for m in T.serial(per):
            for b in used:
                f = sw * m + b
                split[b * per + m] = x0[n, c, T.floordiv(f, w_), T.floormod(f, w_)]
    for a in sorted({ph[0] for ph in taps.phases}):
        cols = [(ph[1], at0 + taps.phases.index(ph) * plane + front) for ph in taps.phases
                if ph[0] == a]
        # rows i (from ey_min) whose image row s*(i + ey0) + a is inside [0, H)
        i0 = min(max(-(-(-a) // sh) - ey0, 0), rows)
        i1 = min(max(-(-(h_ - a) // sh) - ey0, i0), rows)
        for bounds in ((0, i0), (i1, rows)):
            if bounds[1] > bounds[0]:
                for _, at in cols:
                    for q in T.serial(bounds[0] * ow_, bounds[1] * ow_):
                        xpad[at + q] = 0.0
        if i1 <= i0:
            continue
        ends = [min(-(-(w_ - b) // sw), ow_) for b, _ in cols]  # columns inside the image
        common = 0 if split is not None else min(ends)
        for i in T.serial(i0, i1):
            r = sh * (i + ey0) + a
            if common:
                for j in T.serial(common):
                    for b, at in cols:
                        xpad[at + i * ow_ + j] = x0[n, c, r, sw * j + b]
            for (b, at), end in zip(cols, ends, strict=True):
                if end > common:
                    for j in T.serial(common, end):
                        xpad[at + i * ow_ + j] = x0[n, c, r, sw * j + b] if split is None \
                            else split[b * per + r * wq + j]
                if ow_ > end:
                    for j in T.serial(end, ow_):
                        xpad[at + i * ow_ + j] = 0.0


__all__ = ["MANY_TAPS", "MAX_BANDS", "MAX_PERIOD", "Taps", "band_rows", "by_group_worth",
           "deinterleave_ok", "depthwise_flat", "flat_ok", "many_taps", "mask_table",
           "phase_copy", "tap_sum"]
