"""Kernels of select_and_gather_add and select_and_scatter_add (kiln.lax.pooling_select): the
derivatives of max/min pooling, recomputing each window's selection from the operand x.

- gather (one work item per window): the window's extremum m and tie count over its real positions
  (padding and base-dilation holes skipped, NaN propagating like reduce_window) in one pass, then the
  mean of the tangent over the positions where x == m.
- scatter (one work item per element i of x): for every window containing i (solved per dimension
  from i's dilated, padded coordinate), its extremum m and tie count n; when x[i] == m, i receives
  c[window] / n. Each element is written by its own item, in a fixed window order: no atomics, no
  zero-initialized output, the same bits for any workgroup count.

No index tensor is materialized: the cost is a few passes over each window instead.

Channel rows (the vector paths): when the innermost axis is untouched by the window and contiguous in
x and the tangent or cotangent, the scatter's work item is a row of x's channels, handled LANES
channels at a time as vectors (the tail one by one): the same windows in the same order, each window's
extremum, tie count and NaN flag per lane, and c / n added where the lane attains the extremum. Every
element receives the same terms in the same order as in the scalar kernel, so the bits are the same.
The gather does the same over rows of output channels (the selection, then the tangent summed where
the lane attains it).

Bands (the f32/f64 scatter of rank >= 3 without base dilation): one work item per W x channels slab of
x, which it zeroes and then accumulates window by window, each window's selection computed once per
band; windows along W in descending order give each element its shares in the scalar kernel's order.
A pooled innermost axis (NCHW) takes the same kernel one lane wide: each band is one row of W.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..layout import region_views
from . import scalar_ops
from .loops import const64, delinearize, dot_offsets, for_range, guarded, workgroup_slice
from .reduce import _Combiner
from .types import I1, I64, info

PRIMITIVES = ("select_and_gather_add", "select_and_scatter_add")


def _main_eqn(region):
    return next(e for e in reversed(region.eqns) if e.primitive.name in PRIMITIVES)


def _trivial(p, d) -> bool:
    """A dimension the window does not touch (batch, channels): width and stride 1, no padding (padding
    after it would put windows past the operand's end) and no base dilation."""
    return (p["window_dimensions"][d] == 1 and p["window_strides"][d] == 1 and tuple(p["padding"][d]) == (0, 0)
            and p["base_dilation"][d] == 1)


LANES = 8  # as codegen/pool.py's channel rows


def _row_length(region) -> int:
    """The channel-row length when the vector path applies (the scatter's or the gather's), else 0 (module
    docstring)."""
    eqn = _main_eqn(region)
    p = eqn.params
    shape = tuple(eqn.outvars[0].aval.shape)
    if not shape or shape[-1] < LANES:
        return 0
    d = len(shape) - 1
    if not _trivial(p, d) or tuple(p["padding"][d]) != (0, 0):
        return 0
    views = region_views(region)
    if any(views[v.id].strides[-1] != 1 for v in eqn.invars[:2]):
        return 0
    return int(shape[-1])


def _bands(region) -> bool:
    """The scatter's band path (module docstring): f32/f64 without base dilation, either channel rows of
    rank >= 3 or (_pooled_bands) a pooled innermost axis."""
    eqn = _main_eqn(region)
    if (eqn.primitive.name != "select_and_scatter_add" or any(bd != 1 for bd in eqn.params["base_dilation"])
            or np.dtype(eqn.outvars[0].aval.dtype) not in (np.float32, np.float64)):
        return False
    return (_row_length(region) > 0 and eqn.outvars[0].aval.ndim >= 3) or _pooled_bands(region)


def _pooled_bands(region) -> bool:
    """Bands along a pooled innermost axis (NCHW's W): one lane, each window's selection once per band."""
    eqn = _main_eqn(region)
    return (eqn.primitive.name == "select_and_scatter_add" and eqn.outvars[0].aval.ndim >= 2
            and not _trivial(eqn.params, eqn.outvars[0].aval.ndim - 1)
            and all(bd == 1 for bd in eqn.params["base_dilation"])
            and np.dtype(eqn.outvars[0].aval.dtype) in (np.float32, np.float64))


class _WithChannel:
    """A view with a trailing axis of length 1 (its index is always 0)."""

    def __init__(self, view):
        self.source, self.offset, self.strides = view.source, view.offset, tuple(view.strides) + (1,)


def parallel_items(region) -> int:
    eqn = _main_eqn(region)
    shape = tuple(eqn.outvars[0].aval.shape)
    if _bands(region):
        return int(np.prod(shape[:-1] if _pooled_bands(region) else shape[:-2], dtype=np.int64))
    row = _row_length(region)
    return int(eqn.outvars[0].aval.size) // row if row else int(eqn.outvars[0].aval.size)


def work(region) -> int:
    eqn = _main_eqn(region)
    window = int(np.prod(eqn.params["window_dimensions"], dtype=np.int64))
    per_item = 2 * window * (window if eqn.primitive.name == "select_and_scatter_add" else 1)
    return int(eqn.outvars[0].aval.size) * per_item


def inside_range(b, base, step: int, extent: int, count: int):
    """[k_lo, k_hi): the k in [0, count) with 0 <= base + k * step < extent (step >= 1)."""
    need = b.sub(const64(0), base)
    k_lo = b.select(b.icmp_signed(">", need, const64(0)), b.udiv(b.add(need, const64(step - 1)), const64(step)),
                    const64(0))
    room = b.sub(const64(extent - 1), base)
    last = b.add(b.udiv(room, const64(step)), const64(1))
    k_hi = b.select(b.icmp_signed(">=", room, const64(0)),
                    b.select(b.icmp_signed("<", last, const64(count)), last, const64(count)), const64(0))
    return k_lo, k_hi


def walk_window(b, p, x_shape, pos, visit):
    """visit(source index) for each position of the window at output position `pos` that lands on an element of
    the operand (of x_shape), in window order: dimensions the window does not touch take pos's index; without
    base dilation only the offsets inside the operand are looped over, with it each is tested. reduce_window's
    scalar and row kernels (pool.py) and every kernel here walk windows with it."""
    rank = len(x_shape)

    def window(depth, src_index, valid):
        if depth == rank:
            guarded(b, valid, visit, src_index)
            return
        if _trivial(p, depth):
            window(depth + 1, src_index + [pos[depth]], valid)
            return
        s, wd, bd = p["window_strides"][depth], p["window_dilation"][depth], p["base_dilation"][depth]
        pad = p["padding"][depth][0]
        extent = (x_shape[depth] - 1) * bd + 1 if x_shape[depth] else 0
        base = b.sub(b.mul(pos[depth], const64(s)), const64(pad))  # q at window offset 0
        if bd == 1:
            # only the offsets landing inside the operand: no test per element
            k_lo, k_hi = inside_range(b, base, wd, extent, p["window_dimensions"][depth])
            for_range(b, k_lo, k_hi, lambda k: window(depth + 1, src_index + [b.add(base, b.mul(k, const64(wd)))], valid),
                      name=f"k{depth}")
            return

        def step(k):
            q = b.add(base, b.mul(k, const64(wd)))
            ok = b.and_(b.icmp_signed(">=", q, const64(0)), b.icmp_signed("<", q, const64(extent)))
            ok = b.and_(ok, b.icmp_signed("==", b.srem(q, const64(bd)), const64(0)))
            q = b.sdiv(q, const64(bd))
            window(depth + 1, src_index + [q], ok if valid is None else b.and_(valid, ok))

        for_range(b, 0, p["window_dimensions"][depth], step, name=f"k{depth}")

    window(0, [], None)


def _windows_holding(b, p, idx, pooled_shape, depth_end, visit):
    """visit(output position over the dims before depth_end) for each window holding x's element idx there,
    solved per dimension (the window o holds i at offset k when o * stride = i * base_dilation + pad - k *
    window_dilation), offsets ascending: the scatter kernels' fixed window order."""

    def windows(depth, opos, valid):
        if depth == depth_end:
            guarded(b, valid, visit, opos)
            return
        if _trivial(p, depth):
            windows(depth + 1, opos + [idx[depth]], valid)
            return
        s, wd, bd = p["window_strides"][depth], p["window_dilation"][depth], p["base_dilation"][depth]
        coord = b.add(b.mul(idx[depth], const64(bd)), const64(p["padding"][depth][0]))

        def step(k):
            q = b.sub(coord, b.mul(k, const64(wd)))  # = o * s for the window o holding i at offset k
            ok = b.icmp_signed(">=", q, const64(0))
            if s > 1:
                ok = b.and_(ok, b.icmp_signed("==", b.srem(q, const64(s)), const64(0)))
                o = b.sdiv(q, const64(s))
            else:
                o = q
            ok = b.and_(ok, b.icmp_signed("<", o, const64(pooled_shape[depth])))
            windows(depth + 1, opos + [o], ok if valid is None else b.and_(valid, ok))

        for_range(b, 0, p["window_dimensions"][depth], step, name=f"w{depth}")

    windows(0, [], None)


def _splat(ty, value):
    return ir.Constant(ty, value if not isinstance(ty, ir.VectorType) else [value] * ty.count)


class _Lanes:
    """One lane count's types (compute values, tie counts, flags; a scalar for one lane) and the stack slots
    of a selection: the running extremum m, the tie count n, the NaN flag and, where a kernel names it, an
    accumulator (acc)."""

    def __init__(self, b, ct, lanes: int, acc: str | None = None):
        self.vt = ct if lanes == 1 else ir.VectorType(ct, lanes)
        self.it = I64 if lanes == 1 else ir.VectorType(I64, lanes)
        self.bt = I1 if lanes == 1 else ir.VectorType(I1, lanes)
        self.m, self.n = b.alloca(self.vt, name=f"m{lanes}"), b.alloca(self.it, name=f"n{lanes}")
        self.nan = b.alloca(self.bt, name=f"nan{lanes}")
        self.acc = b.alloca(self.vt, name=f"{acc}{lanes}") if acc else None


def _row_lanes(b, ct, row: int, acc: str | None = None) -> dict:
    """The _Lanes of a channel-row kernel by lane count: LANES, and 1 where the row has a tail."""
    return {lanes: _Lanes(b, ct, lanes, acc) for lanes in ({LANES, 1} if row % LANES else {LANES})}


def _over_row(b, row: int, chunk):
    """chunk(c, lanes) over a row of `row` channels: LANES at a time, then the tail one by one."""
    whole = row - row % LANES
    if whole:
        for_range(b, 0, whole, lambda c: chunk(c, LANES), name="c", step=LANES)
    if whole < row:
        for_range(b, whole, row, lambda c: chunk(c, 1), name="t")


def _load_lanes(b, ptr, offset, lanes: int, dtype):
    """`lanes` consecutive elements at ptr[offset] in the compute type (one lane: a scalar): f32/f64 in one
    vector load, halves converted lane by lane."""
    d = info(dtype)
    if lanes == 1:
        return scalar_ops.load(b, ptr, offset, dtype)
    if d.storage == d.compute:
        return b.load(b.gep(ptr, [offset], inbounds=True, source_etype=d.storage),
                      typ=ir.VectorType(d.compute, lanes), align=d.bits // 8)
    v = ir.Constant(ir.VectorType(d.compute, lanes), None)
    for k in range(lanes):
        v = b.insert_element(v, scalar_ops.load(b, ptr, b.add(offset, const64(k)), dtype), const64(k))
    return v


def _store_lanes(b, ptr, offset, value, lanes: int, dtype):
    """The inverse of _load_lanes."""
    d = info(dtype)
    if lanes == 1:
        scalar_ops.store(b, ptr, offset, value, dtype)
    elif d.storage == d.compute:
        b.store(value, b.gep(ptr, [offset], inbounds=True, source_etype=d.storage), align=d.bits // 8)
    else:
        for k in range(lanes):
            scalar_ops.store(b, ptr, b.add(offset, const64(k)), b.extract_element(value, const64(k)), dtype)


def _selection(b, p, x_shape, pos, load_x, lanes: _Lanes, comb):
    """The extremum and tie count of the window at output position pos, per lane, in one pass: a strictly
    better value restarts the count, an equal one adds to it; a NaN makes the extremum NaN (which selects
    nothing). load_x(index) gives x there, one value per lane."""
    better = ">" if p["op"] == "max" else "<"
    b.store(_splat(lanes.vt, comb.init().constant), lanes.m)
    b.store(_splat(lanes.it, 0), lanes.n)
    b.store(_splat(lanes.bt, 0), lanes.nan)

    def visit(src):
        v = load_x(src)
        m = b.load(lanes.m)
        wins = b.fcmp_ordered(better, v, m)
        ties = b.fcmp_ordered("==", v, m)
        b.store(b.select(wins, v, m), lanes.m)
        b.store(b.select(wins, _splat(lanes.it, 1), b.add(b.load(lanes.n), b.zext(ties, lanes.it))), lanes.n)
        b.store(b.or_(b.load(lanes.nan), b.fcmp_unordered("uno", v, v)), lanes.nan)

    walk_window(b, p, x_shape, pos, visit)
    return b.select(b.load(lanes.nan), _splat(lanes.vt, float("nan")), b.load(lanes.m)), b.load(lanes.n)


def emit_kernel(region):
    eqn = _main_eqn(region)
    p = eqn.params
    views = region_views(region)
    sv, xv = views[eqn.invars[0].id], views[eqn.invars[1].id]
    x_shape = tuple(eqn.invars[1].aval.shape)
    out_shape = tuple(eqn.outvars[0].aval.shape)
    pooled_shape = tuple(eqn.invars[0].aval.shape) if eqn.primitive.name == "select_and_scatter_add" else out_shape
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    ct = info(dtype).compute
    comb = _Combiner(p["op"], dtype)
    total = int(np.prod(out_shape, dtype=np.int64))
    n_in = len(region.invars)
    scatter = eqn.primitive.name == "select_and_scatter_add"
    row = _row_length(region)
    if _bands(region) and _pooled_bands(region):
        # a pooled innermost axis: the band kernel over a trailing channel axis of length 1 the window does
        # not touch, so each band is one row of W and each window's selection is computed once per band
        p1 = {**p, "window_dimensions": (*p["window_dimensions"], 1), "window_strides": (*p["window_strides"], 1),
              "padding": (*map(tuple, p["padding"]), (0, 0)), "base_dilation": (*p["base_dilation"], 1),
              "window_dilation": (*p["window_dilation"], 1)}
        return _emit_scatter_bands(p1, _WithChannel(sv), _WithChannel(xv), (*x_shape, 1), (*pooled_shape, 1), dtype,
                                   comb, n_in, 1)
    if row and _bands(region):
        return _emit_scatter_bands(p, sv, xv, x_shape, pooled_shape, dtype, comb, n_in, row)
    if row and not scatter:
        return _emit_gather_rows(p, sv, xv, x_shape, out_shape, dtype, comb, n_in, row)
    if row:
        return _emit_scatter_rows(p, sv, xv, x_shape, pooled_shape, dtype, comb, n_in, row)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if total == 0:
            return
        x_ptr, s_ptr, out_ptr = pointers[xv.source], pointers[sv.source], pointers[n_in]
        one = _Lanes(b, ct, 1, "acc")
        lo, hi = workgroup_slice(b, total, workgroup_id, workgroup_count)

        def load_x(index):
            return scalar_ops.load(b, x_ptr, dot_offsets(b, index, xv.strides, const64(xv.offset)), dtype)

        def gather(o):
            pos = delinearize(b, o, out_shape)
            m, _ = _selection(b, p, x_shape, pos, load_x, one, comb)
            b.store(const64(0), one.n)
            b.store(ir.Constant(ct, 0.0), one.acc)

            def take(idx):
                hit = b.fcmp_ordered("==", load_x(idx), m)
                with b.if_then(hit):
                    t = scalar_ops.load(b, s_ptr, dot_offsets(b, idx, sv.strides, const64(sv.offset)), dtype)
                    b.store(b.fadd(b.load(one.acc), t), one.acc)
                    b.store(b.add(b.load(one.n), const64(1)), one.n)

            walk_window(b, p, x_shape, pos, take)
            n = b.load(one.n)
            n = b.select(b.icmp_signed(">", n, const64(0)), n, const64(1))
            scalar_ops.store(b, out_ptr, o, b.fdiv(b.load(one.acc), b.sitofp(n, ct)), dtype)

        def scatter_to(i):
            idx = delinearize(b, i, x_shape)
            xi = load_x(idx)
            b.store(ir.Constant(ct, 0.0), one.acc)

            def visit(opos):
                m, n = _selection(b, p, x_shape, opos, load_x, one, comb)
                with b.if_then(b.fcmp_ordered("==", xi, m)):
                    c = scalar_ops.load(b, s_ptr, dot_offsets(b, opos, sv.strides, const64(sv.offset)), dtype)
                    b.store(b.fadd(b.load(one.acc), b.fdiv(c, b.sitofp(n, ct))), one.acc)

            _windows_holding(b, p, idx, pooled_shape, len(x_shape), visit)
            scalar_ops.store(b, out_ptr, i, b.load(one.acc), dtype)

        for_range(b, lo, hi, scatter_to if scatter else gather, name="o")

    return body


def _emit_scatter_rows(p, sv, xv, x_shape, pooled_shape, dtype, comb, n_in, row):
    """select_and_scatter_add over rows of x's channels (module docstring)."""
    ct = info(dtype).compute
    rank = len(x_shape)
    rows = int(np.prod(x_shape[:-1], dtype=np.int64))

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if rows == 0:
            return
        x_ptr, s_ptr, out_ptr = pointers[xv.source], pointers[sv.source], pointers[n_in]
        lo, hi = workgroup_slice(b, rows, workgroup_id, workgroup_count)
        slots = _row_lanes(b, ct, row, "acc")

        def load(ptr, view, index, lanes):
            return _load_lanes(b, ptr, dot_offsets(b, index, view.strides, const64(view.offset)), lanes, dtype)

        def chunk(r, idx, c, lanes):
            ln = slots[lanes]
            xi = load(x_ptr, xv, idx + [c], lanes)
            b.store(_splat(ln.vt, 0.0), ln.acc)

            def visit(opos):
                full = opos + [c]
                m, n = _selection(b, p, x_shape, full, lambda src: load(x_ptr, xv, src, lanes), ln, comb)
                share = b.fdiv(load(s_ptr, sv, full, lanes), b.sitofp(n, ln.vt))
                share = b.select(b.fcmp_ordered("==", xi, m), share, _splat(ln.vt, 0.0))
                b.store(b.fadd(b.load(ln.acc), share), ln.acc)

            _windows_holding(b, p, idx, pooled_shape, rank - 1, visit)
            _store_lanes(b, out_ptr, b.add(b.mul(r, const64(row)), c), b.load(ln.acc), lanes, dtype)

        def element(r):
            idx = delinearize(b, r, x_shape[:-1]) if rank > 1 else []
            _over_row(b, row, lambda c, lanes: chunk(r, idx, c, lanes))

        for_range(b, lo, hi, element, name="r")

    return body


def _emit_scatter_bands(p, sv, xv, x_shape, pooled_shape, dtype, comb, n_in, row):
    """select_and_scatter_add over bands of x (module docstring): one work item per index of x's dims
    before the last two (a row of W x channels), whose output it zeroes and then accumulates window by
    window, each window's selection computed once per band."""
    d = info(dtype)
    ct = d.compute
    rank = len(x_shape)
    band_dim = rank - 2
    width = x_shape[band_dim]
    bands = int(np.prod(x_shape[:-2], dtype=np.int64))
    s_w, wd_w, pad_w = p["window_strides"][band_dim], p["window_dilation"][band_dim], p["padding"][band_dim][0]
    w_w = p["window_dimensions"][band_dim]

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if bands == 0:
            return
        x_ptr, s_ptr, out_ptr = pointers[xv.source], pointers[sv.source], pointers[n_in]
        lo, hi = workgroup_slice(b, bands, workgroup_id, workgroup_count)
        slots = _row_lanes(b, ct, row)

        def load(ptr, view, index, lanes):
            return _load_lanes(b, ptr, dot_offsets(b, index, view.strides, const64(view.offset)), lanes, dtype)

        def chunk(r, idx, c, lanes):
            ln = slots[lanes]
            out_row = b.add(b.mul(r, const64(width * row)), c)  # out index of (idx, w = 0, c)

            def band(opos):
                # windows along the band dim in descending order: each element then receives its windows'
                # shares in the scalar kernel's order (window offsets ascending), so the sums are the same
                def one(j):
                    o = b.sub(const64(pooled_shape[band_dim] - 1), j)
                    full = opos + [o, c]
                    m, n = _selection(b, p, x_shape, full, lambda src: load(x_ptr, xv, src, lanes), ln, comb)
                    share = b.fdiv(load(s_ptr, sv, full, lanes), b.sitofp(n, ln.vt))
                    base = b.sub(b.mul(o, const64(s_w)), const64(pad_w))
                    k_lo, k_hi = inside_range(b, base, wd_w, width, w_w)

                    def put(k):
                        q = b.add(base, b.mul(k, const64(wd_w)))
                        hit = b.fcmp_ordered("==", load(x_ptr, xv, idx + [q, c], lanes), m)
                        at = b.add(out_row, b.mul(q, const64(row)))
                        old = _load_lanes(b, out_ptr, at, lanes, dtype)
                        _store_lanes(b, out_ptr, at, b.fadd(old, b.select(hit, share, _splat(ln.vt, 0.0))), lanes, dtype)

                    for_range(b, k_lo, k_hi, put, name="k")

                for_range(b, 0, pooled_shape[band_dim], one, name="ow")

            _windows_holding(b, p, idx, pooled_shape, band_dim, band)

        def element(r):
            idx = delinearize(b, r, x_shape[:-2]) if rank > 2 else []
            start = b.mul(r, const64(width * row))
            for_range(b, 0, width * row, lambda i: b.store(ir.Constant(ct, 0.0), b.gep(
                out_ptr, [b.add(start, i)], inbounds=True, source_etype=d.storage)), name="z")
            _over_row(b, row, lambda c, lanes: chunk(r, idx, c, lanes))

        for_range(b, lo, hi, element, name="r")

    return body


def _emit_gather_rows(p, tv, xv, x_shape, out_shape, dtype, comb, n_in, row):
    """select_and_gather_add over rows of output channels (module docstring): per lane the selection, then
    the tangent summed over the positions attaining the extremum and divided by their count, as the
    scalar kernel does (a position that does not attain it adds +0.0, which changes no sum)."""
    ct = info(dtype).compute
    rows = int(np.prod(out_shape[:-1], dtype=np.int64))

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if rows == 0:
            return
        x_ptr, t_ptr, out_ptr = pointers[xv.source], pointers[tv.source], pointers[n_in]
        lo, hi = workgroup_slice(b, rows, workgroup_id, workgroup_count)
        slots = _row_lanes(b, ct, row, "sum")

        def load(ptr, view, index, lanes):
            return _load_lanes(b, ptr, dot_offsets(b, index, view.strides, const64(view.offset)), lanes, dtype)

        def chunk(r, pos, c, lanes):
            ln = slots[lanes]
            full = pos + [c]
            m, _ = _selection(b, p, x_shape, full, lambda src: load(x_ptr, xv, src, lanes), ln, comb)
            b.store(_splat(ln.it, 0), ln.n)
            b.store(_splat(ln.vt, 0.0), ln.acc)

            def take(src):
                hit = b.fcmp_ordered("==", load(x_ptr, xv, src, lanes), m)
                t = b.select(hit, load(t_ptr, tv, src, lanes), _splat(ln.vt, 0.0))
                b.store(b.fadd(b.load(ln.acc), t), ln.acc)
                b.store(b.add(b.load(ln.n), b.zext(hit, ln.it)), ln.n)

            walk_window(b, p, x_shape, full, take)
            n = b.load(ln.n)
            n = b.select(b.icmp_signed(">", n, _splat(ln.it, 0)), n, _splat(ln.it, 1))
            value = b.fdiv(b.load(ln.acc), b.sitofp(n, ln.vt))
            _store_lanes(b, out_ptr, b.add(b.mul(r, const64(row)), c), value, lanes, dtype)

        def element(r):
            pos = delinearize(b, r, out_shape[:-1]) if len(out_shape) > 1 else []
            _over_row(b, row, lambda c, lanes: chunk(r, pos, c, lanes))

        for_range(b, lo, hi, element, name="r")

    return body
