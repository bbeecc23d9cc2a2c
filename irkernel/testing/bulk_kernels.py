"""The wiring kernel of the scalar generator: one Numba sweep decides every body node.

Owns ``wire_kernel`` (with its splitmix64 helpers and ``STATUS_*`` codes); ``bulk`` builds
its inputs and the Function. Imports numpy and ``irkernel.ir.jit`` only.
"""

# Why a kernel rather than whole-array NumPy (the design note asked for NumPy): the
# fractions the spec promises are properties of the *wiring*, and they need sequential
# state. A node is dead exactly when no live node reads it, so every live node must be read
# by a later live node (or be an output); the sweep keeps one FIFO per (dtype lane, class)
# of live nodes nobody has read yet and later live nodes take their operands from it first.
# Lanes stay balanced because lane-flexible ops (compares, ``where``, ``astype``) choose
# their operand lane from the longest queue. A node is const-derived exactly when all its
# operands are, so each op node is designated N (reads at least one parameter-derived
# node) or C (reads only const-derived nodes). Whole-array NumPy could only approximate
# both (about 13 % of randomly wired nodes have no reader at all). The kernel does O(1)
# work per node from small ring buffers (recent picks) and reservoirs (far picks), draws
# its own splitmix64 numbers (deterministic per seed), and costs about as much as
# ``add_nodes``' type sweep.
#
# Node layout: params ``0..P-1``, then one "prefix" constant per dtype lane (so every lane
# has a leaf), then the body (constants at random positions). The last ``W`` op nodes form
# a merge window: while more unread live nodes remain than outputs requested, they pick
# forms that read the most of them (merging lanes through ``astype``/compares when
# needed), so the graph ends with exactly ``n_outputs`` sinks whenever the op mix can join
# its lanes.

from __future__ import annotations

import numpy as np

from irkernel.ir.ids import DTYPE_NAMES
from irkernel.ir.jit import kernel

#: Lanes (dtype codes) the kernels keep queues and rings for.
N_LANES = len(DTYPE_NAMES)

RING = 64  # recent members remembered per group (power of two)
RES = 256  # reservoir of far members per group
P_BALANCE = 0.7  # share of live nodes whose operand lane follows the longest queue
PEND_HIGH = 24  # above this many unread live nodes, one-operand ops are redrawn ...
MAX_REDRAWS = 3  # ... up to this many times (keeps high duplicate shares in balance)
P_RECENT_1024 = 870  # share (of 1024) of random operand picks taken from the recent ring
STATUS_OK, STATUS_EXTRA_FULL, STATUS_OUTPUTS_FULL, STATUS_NO_FORM = 0, 1, 2, 3

# Only scalar helpers are called per node: a call that passes arrays to a kernel
# that LLVM does not inline costs an atomic incref/decref per array argument.

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_INV53 = 1.0 / 9007199254740992.0
_INV52 = 1.0 / 4503599627370496.0


@kernel
def _step_kernel(x):
    """One splitmix64 step: (new state, 64 random bits)."""
    x = x + _GOLDEN
    z = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x, z ^ (z >> np.uint64(31))


@kernel
def _below_kernel(r, k):
    """Uniform int in [0, k) from random bits ``r``, for 1 <= k < 2**32 (no division)."""
    return np.int64(((r >> np.uint64(32)) * np.uint64(k)) >> np.uint64(32))


@kernel
def _below_lo_kernel(r, k):
    """Like _below_kernel from the low 32 bits of ``r`` (a second, independent draw)."""
    return np.int64(((r & np.uint64(0xFFFFFFFF)) * np.uint64(k)) >> np.uint64(32))


@kernel
def _low_unit_kernel(r):
    """Uniform float in [0, 1) from the low 32 bits of ``r`` (independent of _below_kernel)."""
    return np.float64(r & np.uint64(0xFFFFFFFF)) * (1.0 / 4294967296.0)


@kernel
def _unit_kernel(r):
    """Uniform float in [0, 1) from random bits ``r``."""
    return np.float64(r >> np.uint64(11)) * _INV53


@kernel
def _merge_form_kernel(form_nslots, form_slot, form_out, qsize, ring_n, x):
    """Form reading the most unread live nodes (ties: result lane has unread nodes).

    Runs only in the merge window. Returns (form or -1, new PRNG state).
    """
    best, best_score = -1, 0.0
    used = np.zeros(N_LANES, np.int64)
    for f in range(form_nslots.shape[0]):
        used[:] = 0
        pops = 0
        ok = True
        for s in range(form_nslots[f]):
            lane = form_slot[f, s]
            if ring_n[lane * 4] + ring_n[lane * 4 + 2] == 0:
                ok = False
            used[lane] += 1
            if used[lane] <= qsize[2 * lane] + qsize[2 * lane + 1]:
                pops += 1
        if not ok or pops == 0:
            continue
        out = form_out[f]
        after = qsize[2 * out] + qsize[2 * out + 1] - used[out]
        x, r = _step_kernel(x)
        score = 4.0 * pops + (2.0 if after >= 1 else 0.0) + _unit_kernel(r)
        if score > best_score:
            best, best_score = f, score
    return best, x


@kernel
def wire_kernel(seed, param_lane, prefix_lane, n_rest, n_const_rest, const_lanes, const_ptr,  # noqa: C901
                const_ids, n_dead, n_csub, n_dup, window, n_outputs, op_prob, op_alias,
                op_form_start, op_form_count, op_lane_forms, op_lane_count, form_kind,
                form_out, form_nslots, form_slot, form_attr, form_variadic, kind_variadic,
                const_kind, kind, a0, a1, attr_id, extra, outputs):
    """Decide every body node (see the module docstring); fills the output columns.

    Inputs: ``param_lane`` int8[P]; ``prefix_lane`` int8[k] (one constant each);
    ``n_rest`` further body nodes of which ``n_const_rest`` are constants;
    constant ids per lane in ``const_ids[const_ptr[l]:const_ptr[l+1]]``; exact
    designation counts among the op nodes before the ``window``; the op mix
    (Walker alias table ``op_prob``/``op_alias``, forms per op and per (op,
    lane)); the
    form table. Outputs (body-relative, length ``k + n_rest``): ``kind``,
    ``a0``, ``a1``, ``attr_id``; ``extra`` holds variadic operands; ``outputs``
    (length >= n_outputs + 16) receives the sinks first, then spare live nodes.
    Groups of remembered nodes are ``lane * 4 + class * 2 + dead`` (class 0 N,
    1 C); FIFOs of unread live nodes are ``lane * 2 + class``.
    Returns (status, extra used, sinks, outputs written).
    """
    x = np.uint64(seed)
    n_params = param_lane.shape[0]
    n_prefix = prefix_lane.shape[0]
    n_body = n_prefix + n_rest
    n_total = n_params + n_body
    n_forms = form_nslots.shape[0]
    ring = np.zeros((4 * N_LANES, RING), np.int32)
    ring_n = np.zeros(4 * N_LANES, np.int64)
    res = np.zeros((4 * N_LANES, RES), np.int32)
    src_ring = np.zeros((4, RING), np.int32)  # recent non-duplicate op nodes by (class, dead)
    src_n = np.zeros(4, np.int64)
    head = np.full(2 * N_LANES, -1, np.int64)
    tail = np.full(2 * N_LANES, -1, np.int64)
    qsize = np.zeros(2 * N_LANES, np.int64)
    nxt = np.empty(n_total, np.int32)
    lane_of = np.empty(n_total, np.int8)
    ops_buf = np.empty(3, np.int64)
    spare_cap = outputs.shape[0]
    spare = np.empty(spare_cap, np.int64)
    n_live_ops = 0
    pend_total = 0
    m0 = n_rest - n_const_rest - window
    c_left, d_left, k_left, u_left = n_const_rest, n_dead, n_csub, n_dup
    t = 0  # op-node index
    n_extra = 0
    for i in range(n_total):
        b = i - n_params
        enqueue = False
        if i < n_params:  # -------------------------------------------- param
            lane = param_lane[i]
            cls, dead = 0, 0
        else:
            is_const = b < n_prefix
            x, r0 = _step_kernel(x)  # high half: const or op; low half: dead or live
            if not is_const:
                is_const = _below_kernel(r0, np.int64(n_body - b)) < c_left
            if is_const:  # -------------------------------------------- const
                if b < n_prefix:
                    lane = prefix_lane[b]
                else:
                    x, r = _step_kernel(x)
                    lane = const_lanes[_below_kernel(r, np.int64(const_lanes.shape[0]))]
                    c_left -= 1
                lo = const_ptr[lane]
                x, r = _step_kernel(x)
                kind[b] = const_kind
                a0[b] = const_ids[lo + _below_kernel(r, np.int64(const_ptr[lane + 1] - lo))]
                a1[b] = -1
                attr_id[b] = 0
                cls, dead = 1, 0
            else:  # ------------------------------------------------------ op
                enqueue = True
                cls, dead, dup = 0, 0, False
                in_window = t >= m0
                if not in_window:  # exact counts by selection sampling
                    left = m0 - t
                    if _below_lo_kernel(r0, np.int64(left)) < d_left:
                        dead = 1
                        d_left -= 1
                    x, r = _step_kernel(x)
                    if _below_kernel(r, np.int64(left)) < k_left:
                        cls = 1
                        k_left -= 1
                    if _below_lo_kernel(r, np.int64(left)) < u_left:
                        dup = True
                        u_left -= 1
                t += 1
                enqueue = dead == 0
                lane = -1
                if dup:  # copy a recent op node of the same class (and liveness)
                    rr = cls * 2
                    x, r = _step_kernel(x)
                    if dead and src_n[rr + 1] > 0 and (src_n[rr] == 0 or (r & 1) == 1):
                        rr += 1
                    if src_n[rr] > 0:
                        back = _below_kernel(r, np.int64(min(src_n[rr], RING)))
                        src = src_ring[rr, (src_n[rr] - 1 - back) & (RING - 1)]
                        sb = src - n_params
                        kind[b] = kind[sb]
                        attr_id[b] = attr_id[sb]
                        if kind_variadic[kind[sb]]:
                            cnt = a1[sb]
                            if n_extra + cnt > extra.shape[0]:
                                return STATUS_EXTRA_FULL, n_extra, 0, 0
                            for j in range(cnt):
                                extra[n_extra + j] = extra[a0[sb] + j]
                            a0[b] = n_extra
                            a1[b] = cnt
                            n_extra += cnt
                        else:
                            a0[b] = a0[sb]
                            a1[b] = a1[sb]
                        lane = lane_of[src]
                    else:
                        dup = False
                if not dup:
                    f = -1
                    merge = False
                    if in_window:
                        total = 0
                        for q in range(10):
                            total += qsize[q]
                        if total >= n_outputs:
                            f, x = _merge_form_kernel(form_nslots, form_slot, form_out, qsize,
                                                      ring_n, x)
                            merge = f >= 0
                    if not merge:
                        tries = 0
                        redraws = 0
                        cls0 = cls
                        while True:
                            if tries <= 8:  # an op by weight, then a form
                                x, r = _step_kernel(x)  # Walker alias: no branches
                                o = _below_kernel(r, np.int64(op_alias.shape[0]))
                                if _low_unit_kernel(r) >= op_prob[o]:
                                    o = op_alias[o]
                                f = -1
                                x, r = _step_kernel(x)
                                if tries == 0 and dead == 0 and _low_unit_kernel(r) < P_BALANCE:
                                    best, best_l = 0, -1  # follow the longest FIFO
                                    for ln in range(N_LANES):
                                        s = qsize[2 * ln + 1]
                                        if cls == 0:
                                            s += qsize[2 * ln]
                                        if s > best and op_lane_count[o, ln] > 0:
                                            best, best_l = s, ln
                                    if best_l >= 0:
                                        k = _below_kernel(r, np.int64(op_lane_count[o, best_l]))
                                        f = op_lane_forms[o, best_l, k]
                                if f < 0:
                                    k = _below_kernel(r, np.int64(op_form_count[o]))
                                    f = op_form_start[o] + k
                                if (pend_total > PEND_HIGH and form_nslots[f] < 2 and dead == 0
                                        and redraws < MAX_REDRAWS):
                                    redraws += 1  # many unread nodes: prefer ops that read two
                                    continue
                            else:  # rare (first nodes): scan the table, then flip the class
                                idx = tries - 9
                                if idx >= 2 * n_forms:
                                    return STATUS_NO_FORM, n_extra, 0, 0
                                f = idx if idx < n_forms else idx - n_forms
                                cls = cls0 if idx < n_forms else 1 - cls0
                            anchor_ok = cls == 1
                            ok = True
                            for s in range(form_nslots[f]):
                                base = form_slot[f, s] * 4
                                n_ok = ring_n[base] > 0 or (dead == 1 and ring_n[base + 1] > 0)
                                c_ok = ring_n[base + 2] > 0 or (dead == 1 and ring_n[base + 3] > 0)
                                if cls == 1:
                                    ok = ok and c_ok
                                else:
                                    ok = ok and (n_ok or c_ok)
                                    anchor_ok = anchor_ok or n_ok
                            if ok and anchor_ok:
                                break
                            tries += 1
                    ns = form_nslots[f]
                    anchor = -1
                    if cls == 0 and not merge:  # the slot that must read an N node
                        x, r = _step_kernel(x)
                        start = _below_kernel(r, np.int64(ns))
                        for k in range(2 * ns):
                            s = start + (k if k < ns else k - ns)
                            if s >= ns:
                                s -= ns
                            base = form_slot[f, s]
                            if k < ns:  # first choice: a lane with unread N nodes
                                if dead == 0 and qsize[2 * base] > 0:
                                    anchor = s
                                    break
                            elif ring_n[base * 4] > 0 or (dead == 1 and ring_n[base * 4 + 1] > 0):
                                anchor = s
                                break
                    any_n = False
                    for s in range(ns):
                        ln = form_slot[f, s]
                        if merge:
                            want = 2
                        elif cls == 1:
                            want = 1
                        else:
                            want = 0 if s == anchor else 2
                        v = -1
                        vc = 0
                        if dead == 0:  # read an unread live node first
                            qn, qc = 2 * ln, 2 * ln + 1
                            qsel = -1
                            if want != 1 and qsize[qn] > 0 and (
                                    want == 0 or qsize[qn] >= qsize[qc]):
                                qsel = qn
                            elif want != 0 and qsize[qc] > 0:
                                qsel = qc
                            if qsel >= 0:
                                v = head[qsel]
                                head[qsel] = nxt[v]
                                if head[qsel] < 0:
                                    tail[qsel] = -1
                                qsize[qsel] -= 1
                                pend_total -= 1
                                vc = qsel & 1
                        if v < 0:  # a random earlier node: mostly recent, sometimes far
                            # one draw: bits 0-1 pick the group, 2-11 recent or far, the
                            # rest the position
                            x, r = _step_kernel(x)
                            c0 = want if want != 2 else np.int64(r & np.uint64(1))
                            d0 = np.int64((r >> np.uint64(1)) & np.uint64(1)) if dead else 0
                            g = -1
                            for k in range(4):  # (c0, d0), then the other liveness, class
                                c = c0 if k < 2 else 1 - c0
                                d = d0 if k % 2 == 0 else 1 - d0
                                if (k >= 2 and want != 2) or (k % 2 == 1 and dead == 0):
                                    continue
                                if ring_n[ln * 4 + c * 2 + d] > 0:
                                    g = ln * 4 + c * 2 + d
                                    break
                            if g < 0:  # only "either class" can be left (checked available)
                                for gg in range(ln * 4, ln * 4 + 4):
                                    if g < 0 and ring_n[gg] > 0 and (dead == 1 or gg % 2 == 0):
                                        g = gg
                            vc = (g >> 1) & 1
                            tg = ring_n[g]
                            if ((r >> np.uint64(2)) & np.uint64(1023)) < np.uint64(P_RECENT_1024):
                                u = np.float64(r >> np.uint64(12)) * _INV52
                                k = 1 + np.int64(min(tg, RING) * u * u)
                                v = ring[g, (tg - k) & (RING - 1)]
                            else:
                                v = res[g, _below_kernel(r, np.int64(min(tg, RES)))]
                        ops_buf[s] = v
                        if vc == 0:
                            any_n = True
                    cls = 0 if any_n else 1
                    kind[b] = form_kind[f]
                    attr_id[b] = form_attr[f]
                    if form_variadic[f]:
                        if n_extra + ns > extra.shape[0]:
                            return STATUS_EXTRA_FULL, n_extra, 0, 0
                        for s in range(ns):
                            extra[n_extra + s] = ops_buf[s]
                        a0[b] = n_extra
                        a1[b] = ns
                        n_extra += ns
                    else:
                        a0[b] = ops_buf[0]
                        a1[b] = ops_buf[1] if ns == 2 else -1
                    lane = form_out[f]
                    rr = cls * 2 + dead
                    src_ring[rr, src_n[rr] & (RING - 1)] = i
                    src_n[rr] += 1
        # -- remember node i in its group (ring + reservoir); FIFO if an unread live op
        lane_of[i] = lane
        g = lane * 4 + cls * 2 + dead
        tg = ring_n[g]
        ring[g, tg & (RING - 1)] = i
        x, r = _step_kernel(x)  # high half: group reservoir; low half: spare outputs
        if tg < RES:
            res[g, tg] = i
        else:
            j = _below_kernel(r, np.int64(tg + 1))
            if j < RES:
                res[g, j] = i
        ring_n[g] = tg + 1
        if enqueue:
            q = 2 * lane + cls
            nxt[i] = -1
            if tail[q] < 0:
                head[q] = i
            else:
                nxt[tail[q]] = i
            tail[q] = i
            qsize[q] += 1
            pend_total += 1
            if n_live_ops < spare_cap:  # reservoir of live op nodes for spare outputs
                spare[n_live_ops] = i
            else:
                j = _below_lo_kernel(r, np.int64(n_live_ops + 1))
                if j < spare_cap:
                    spare[j] = i
            n_live_ops += 1
    n_sinks = 0
    for q in range(10):
        n_sinks += qsize[q]
    if n_sinks > spare_cap:
        return STATUS_OUTPUTS_FULL, n_extra, n_sinks, 0
    n_out = 0
    for q in range(10):  # the sinks: live nodes nobody reads
        v = head[q]
        while v >= 0:
            outputs[n_out] = v
            n_out += 1
            v = nxt[v]
    for j in range(min(n_live_ops, spare_cap)):
        if n_out >= spare_cap:
            break
        v = spare[j]
        seen = False
        for k in range(n_sinks):
            if outputs[k] == v:
                seen = True
                break
        if not seen:
            outputs[n_out] = v
            n_out += 1
    return STATUS_OK, n_extra, n_sinks, n_out


__all__ = ["STATUS_EXTRA_FULL", "STATUS_NO_FORM", "STATUS_OK", "STATUS_OUTPUTS_FULL",
           "wire_kernel"]
