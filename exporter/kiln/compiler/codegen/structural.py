"""Kernels of the structural primitives (kiln.lax.structural_prims): pad, concatenate, gather,
scatter, dynamic_slice, dynamic_update_slice, sort, cumulative ops, argmax/argmin.

A region is the primitive's equation plus the layout ops (broadcast, transpose,
reshape, slice, rev) that feed it: every operand is read through a strided
View of a materialized buffer, so slices and transposes cost no copy. The
module is the `structural` kernel strategy's code: plan(region) -> (emit, parallel items, work).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..layout import contiguous_strides, region_views
from . import scalar_ops
from .loops import const64, delinearize, dot_offsets, for_range, local_var, while_loop, workgroup_slice
from .region_eval import load_view
from .types import I1, I64, info


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


class _Region:
    """The structural equation of a region and how to read its operands."""

    def __init__(self, region):
        self.region = region
        self.eqn = region.eqns[-1]
        self.kind = self.eqn.primitive.kernel_kind
        self.views = region_views(region)
        self.n_in = len(region.invars)

    def read(self, b, pointers, operand, index):
        """operand (Var or Literal) at multi-index `index` (i64 values)."""
        if not hasattr(operand, "id"):
            return scalar_ops.literal(operand.value, operand.aval.dtype)
        view = self.views[operand.id]
        return load_view(b, view, dot_offsets(b, index, view.strides, const64(view.offset)), pointers)

    def out(self, pointers, k=0):
        return pointers[self.n_in + k]


def _loop_nest(b, shape, workgroup_id, workgroup_count, point):
    """Calls point(index) for this workgroup's share of `shape` (rows split over workgroups)."""
    shape = tuple(shape)
    if any(d == 0 for d in shape):
        return
    if not shape:
        with b.if_then(b.icmp_unsigned("==", workgroup_id, const64(0))):
            point([])
        return
    if len(shape) == 1:
        lo, hi = workgroup_slice(b, shape[0], workgroup_id, workgroup_count)
        for_range(b, lo, hi, lambda i: point([i]), name="i")
        return
    lo, hi = workgroup_slice(b, _prod(shape[:-1]), workgroup_id, workgroup_count)

    def outer(o):
        prefix = delinearize(b, o, shape[:-1])
        for_range(b, 0, shape[-1], lambda j: point(prefix + [j]), name="j")

    for_range(b, lo, hi, outer, name="o")


def _items(shape) -> int:
    shape = tuple(shape)
    if any(d == 0 for d in shape):
        return 0
    if len(shape) <= 1:
        return shape[0] if shape else 1
    return _prod(shape[:-1])


def _to_i64(b, value, dtype):
    d = info(dtype)
    if d.bits == 64:
        return value
    return b.sext(value, I64) if d.is_signed else b.zext(value, I64)


def _clamp(b, v, lo: int, hi):
    hi = const64(hi) if isinstance(hi, int) else hi
    v = b.select(b.icmp_signed("<", v, const64(lo)), const64(lo), v)
    return b.select(b.icmp_signed(">", v, hi), hi, v)


def _all(b, conds):
    result = ir.Constant(I1, 1)
    for c in conds:
        result = b.and_(result, c)
    return result


# --------------------------------------------------------------------------- pad / concatenate / dynamic slices

def _emit_pad(r: _Region):
    eqn = r.eqn
    (x,) = eqn.invars
    in_shape = x.aval.shape
    out = eqn.outvars[0]
    dtype = out.aval.dtype
    config = eqn.params["padding_config"]
    fill = eqn.params["padding_value"]
    empty = _prod(in_shape) == 0

    def body(b, pointers, wid, wcount):
        def point(index):
            fill_value = scalar_ops.literal(np.asarray(fill, dtype), dtype)
            if empty:
                value = fill_value
            else:
                conds, src = [], []
                for i, n, (lo, _, interior) in zip(index, in_shape, config):
                    j = b.sub(i, const64(lo))
                    if interior:
                        step = const64(interior + 1)
                        q = b.sdiv(j, step)
                        conds.append(b.icmp_signed("==", b.srem(j, step), const64(0)))
                    else:
                        q = j
                    conds += [b.icmp_signed(">=", q, const64(0)), b.icmp_signed("<", q, const64(n)), b.icmp_signed(">=", j, const64(0))]
                    src.append(q)
                valid = _all(b, conds)
                src = [b.select(valid, q, const64(0)) for q in src]
                value = b.select(valid, r.read(b, pointers, x, src), fill_value)
            scalar_ops.store(b, r.out(pointers), dot_offsets(b, index, contiguous_strides(out.aval.shape)), value, dtype)

        _loop_nest(b, out.aval.shape, wid, wcount, point)

    return body, _items(out.aval.shape), out.aval.size


def _emit_concatenate(r: _Region):
    eqn = r.eqn
    axis = eqn.params["dimension"]
    out = eqn.outvars[0]
    strides = contiguous_strides(out.aval.shape)
    dtype = out.aval.dtype

    def body(b, pointers, wid, wcount):
        start = 0
        for x in eqn.invars:
            shape = x.aval.shape

            def point(index, x=x, start=start):
                value = r.read(b, pointers, x, index)
                where = list(index)
                where[axis] = b.add(where[axis], const64(start))
                scalar_ops.store(b, r.out(pointers), dot_offsets(b, where, strides), value, dtype)

            _loop_nest(b, shape, wid, wcount, point)
            start += shape[axis]

    return body, _items(out.aval.shape), out.aval.size


def _starts(b, r, pointers, starts, shape, sizes):
    result = []
    for s, n, z in zip(starts, shape, sizes):
        v = _to_i64(b, r.read(b, pointers, s, []), s.aval.dtype)
        result.append(_clamp(b, v, 0, n - z))
    return result


def _emit_dynamic_slice(r: _Region):
    eqn = r.eqn
    x, *starts = eqn.invars
    out = eqn.outvars[0]
    sizes = eqn.params["slice_sizes"]

    def body(b, pointers, wid, wcount):
        if out.aval.size == 0:
            return
        st = _starts(b, r, pointers, starts, x.aval.shape, sizes)

        def point(index):
            value = r.read(b, pointers, x, [b.add(i, s) for i, s in zip(index, st)])
            scalar_ops.store(b, r.out(pointers), dot_offsets(b, index, contiguous_strides(out.aval.shape)), value, out.aval.dtype)

        _loop_nest(b, out.aval.shape, wid, wcount, point)

    return body, _items(out.aval.shape), out.aval.size


def _emit_dynamic_update_slice(r: _Region):
    eqn = r.eqn
    x, u, *starts = eqn.invars
    out = eqn.outvars[0]
    ushape = u.aval.shape
    empty_update = _prod(ushape) == 0

    def body(b, pointers, wid, wcount):
        if out.aval.size == 0:
            return
        st = _starts(b, r, pointers, starts, x.aval.shape, ushape)

        def point(index):
            value = r.read(b, pointers, x, index)
            if not empty_update:
                rel = [b.sub(i, s) for i, s in zip(index, st)]
                inside = _all(b, [c for q, n in zip(rel, ushape) for c in
                                  (b.icmp_signed(">=", q, const64(0)), b.icmp_signed("<", q, const64(n)))])
                rel = [b.select(inside, q, const64(0)) for q in rel]
                value = b.select(inside, r.read(b, pointers, u, rel), value)
            scalar_ops.store(b, r.out(pointers), dot_offsets(b, index, contiguous_strides(out.aval.shape)), value, out.aval.dtype)

        _loop_nest(b, out.aval.shape, wid, wcount, point)

    return body, _items(out.aval.shape), out.aval.size


# --------------------------------------------------------------------------- gather / scatter

def _index_tuple(b, r, pointers, indices, batch_index, sizes, clip: bool):
    """(operand positions along the indexed axes, validity) for one batch position."""
    values, conds = [], []
    for j, n in enumerate(sizes):
        v = _to_i64(b, r.read(b, pointers, indices, list(batch_index) + [const64(j)]), indices.aval.dtype)
        if clip:
            v = _clamp(b, v, 0, max(n - 1, 0))
        else:
            conds += [b.icmp_signed(">=", v, const64(0)), b.icmp_signed("<", v, const64(n))]
        values.append(v)
    valid = _all(b, conds)
    if not clip:
        values = [b.select(valid, v, const64(0)) for v in values]
    return values, valid


def _operand_index(axes, ndim, picked, rest_index):
    index, rest = [], iter(rest_index)
    for d in range(ndim):
        index.append(picked[axes.index(d)] if d in axes else next(rest))
    return index


def _emit_gather(r: _Region):
    eqn = r.eqn
    x, indices = eqn.invars
    axes = tuple(eqn.params["axes"])
    clip = eqn.params["mode"] == "clip"
    out = eqn.outvars[0]
    dtype = out.aval.dtype
    nb = indices.aval.ndim - 1
    sizes = [x.aval.shape[a] for a in axes]
    empty_source = any(n == 0 for n in sizes)

    def body(b, pointers, wid, wcount):
        def point(index):
            if empty_source:
                value = scalar_ops.literal(np.zeros((), dtype), dtype)
            else:
                picked, valid = _index_tuple(b, r, pointers, indices, index[:nb], sizes, clip)
                value = r.read(b, pointers, x, _operand_index(axes, x.aval.ndim, picked, index[nb:]))
                if not clip:
                    value = b.select(valid, value, scalar_ops.literal(np.zeros((), dtype), dtype))
            scalar_ops.store(b, r.out(pointers), dot_offsets(b, index, contiguous_strides(out.aval.shape)), value, dtype)

        _loop_nest(b, out.aval.shape, wid, wcount, point)

    return body, _items(out.aval.shape), out.aval.size * (1 + len(axes))


def _emit_scatter(r: _Region):
    """Each workgroup owns a slice of the non-indexed ("rest") positions: it copies the operand there,
    then applies every update in order, so duplicate indices combine sequentially without races."""
    eqn = r.eqn
    x, indices, updates = eqn.invars
    axes = tuple(eqn.params["axes"])
    update, clip = eqn.params["update"], eqn.params["mode"] == "clip"
    out = eqn.outvars[0]
    dtype = out.aval.dtype
    shape = out.aval.shape
    out_strides = contiguous_strides(shape)
    rest_shape = tuple(d for i, d in enumerate(shape) if i not in axes)
    axes_shape = tuple(shape[a] for a in axes)
    batch_shape = indices.aval.shape[:-1]
    n_rest = _prod(rest_shape)
    items = 0 if _prod(shape) == 0 else max(n_rest, 1) if rest_shape else 1

    def body(b, pointers, wid, wcount):
        if _prod(shape) == 0:
            return
        lo, hi = workgroup_slice(b, items, wid, wcount)

        def rest_loop(fn):
            def one(ri):
                fn(delinearize(b, ri, rest_shape) if rest_shape else [])

            for_range(b, lo, hi, one, name="rest")

        def copy(rest_index):
            def at(ai):
                picked = delinearize(b, ai, axes_shape) if axes_shape else []
                index = _operand_index(axes, len(shape), picked, rest_index)
                scalar_ops.store(b, r.out(pointers), dot_offsets(b, index, out_strides), r.read(b, pointers, x, index), dtype)

            for_range(b, 0, _prod(axes_shape), at, name="copy")

        rest_loop(copy)
        if _prod(batch_shape) == 0 or any(n == 0 for n in axes_shape):
            return

        def apply(bi):
            batch_index = delinearize(b, bi, batch_shape) if batch_shape else []
            picked, valid = _index_tuple(b, r, pointers, indices, batch_index, axes_shape, clip)

            def write(rest_index):
                index = _operand_index(axes, len(shape), picked, rest_index)
                offset = dot_offsets(b, index, out_strides)
                u = r.read(b, pointers, updates, list(batch_index) + list(rest_index))
                if update != "set":
                    old = scalar_ops.load(b, r.out(pointers), offset, dtype)
                    u = scalar_ops.emit(b, update, {}, [old, u], [dtype, dtype], dtype)
                scalar_ops.store(b, r.out(pointers), offset, u, dtype)

            with b.if_then(valid):
                rest_loop(write)

        for_range(b, 0, _prod(batch_shape), apply, name="upd")

    return body, items, out.aval.size + updates.aval.size


# --------------------------------------------------------------------------- row-wise kernels: sort, cumulative, argmax

def _rows(shape, axis):
    """(shape of the rows' index space, function joining a row index and a position along axis)."""
    row_shape = tuple(d for i, d in enumerate(shape) if i != axis)

    def join(row_index, k):
        index = list(row_index)
        index.insert(axis, k)
        return index

    return row_shape, join


def _row_loop(b, row_shape, wid, wcount, fn):
    n = _prod(row_shape)
    lo, hi = workgroup_slice(b, n, wid, wcount)
    for_range(b, lo, hi, lambda o: fn(delinearize(b, o, row_shape) if row_shape else []), name="row")


def _less(b, dtype, a, c):
    d = info(dtype)
    if d.is_float:
        a_nan = b.fcmp_unordered("uno", a, a)
        c_nan = b.fcmp_unordered("uno", c, c)
        return b.or_(b.fcmp_ordered("<", a, c), b.and_(b.not_(a_nan), c_nan))
    if d.is_signed:
        return b.icmp_signed("<", a, c)
    return b.icmp_unsigned("<", a, c)


def _equal(b, dtype, a, c):
    d = info(dtype)
    if d.is_float:
        both_nan = b.and_(b.fcmp_unordered("uno", a, a), b.fcmp_unordered("uno", c, c))
        return b.or_(b.fcmp_ordered("==", a, c), both_nan)
    return b.icmp_unsigned("==", a, c)


def _emit_sort(r: _Region):
    eqn = r.eqn
    axis = eqn.params["dimension"]
    num_keys = eqn.params["num_keys"]
    shape = eqn.outvars[0].aval.shape
    n = shape[axis]
    strides = contiguous_strides(shape)
    row_shape, join = _rows(shape, axis)
    outs = eqn.outvars
    dtypes_ = [v.aval.dtype for v in outs]

    def body(b, pointers, wid, wcount):
        if _prod(shape) == 0:
            return
        out_ptrs = [r.out(pointers, k) for k in range(len(outs))]
        step = const64(strides[axis])
        root_v = local_var(b, I64, const64(0), "root")
        end_v = local_var(b, I64, const64(0), "end")
        start_v = local_var(b, I64, const64(0), "start")
        last_v = local_var(b, I64, const64(0), "last")

        def row(row_index):
            base = dot_offsets(b, join(row_index, const64(0)), strides)

            def copy(k):
                for x, ptr, dt in zip(eqn.invars, out_ptrs, dtypes_):
                    scalar_ops.store(b, ptr, b.add(base, b.mul(k, step)), r.read(b, pointers, x, join(row_index, k)), dt)

            for_range(b, 0, n, copy, name="copy")
            if n < 2:
                return

            def at(k):
                return b.add(base, b.mul(k, step))

            def less(i, j):
                oi, oj = at(i), at(j)
                result = ir.Constant(I1, 0)
                for ptr, dt in reversed(list(zip(out_ptrs[:num_keys], dtypes_[:num_keys]))):
                    a, c = scalar_ops.load(b, ptr, oi, dt), scalar_ops.load(b, ptr, oj, dt)
                    result = b.or_(_less(b, dt, a, c), b.and_(_equal(b, dt, a, c), result))
                return result

            def swap(i, j):
                oi, oj = at(i), at(j)
                for ptr, dt in zip(out_ptrs, dtypes_):
                    st = info(dt).storage
                    pi = b.gep(ptr, [oi], inbounds=True, source_etype=st)
                    pj = b.gep(ptr, [oj], inbounds=True, source_etype=st)
                    vi, vj = b.load(pi, typ=st), b.load(pj, typ=st)
                    b.store(vj, pi)
                    b.store(vi, pj)

            def sift(end_value):
                b.store(end_value, end_v)

                def cond():
                    child = b.add(b.mul(b.load(root_v), const64(2)), const64(1))
                    return b.icmp_signed("<", child, b.load(end_v))

                def step_body(done):
                    root = b.load(root_v)
                    child = b.add(b.mul(root, const64(2)), const64(1))
                    right = b.add(child, const64(1))
                    has_right = b.icmp_signed("<", right, b.load(end_v))
                    # the right child's index is clamped so the comparison reads in bounds
                    pick_right = b.and_(has_right, less(child, b.select(has_right, right, child)))
                    child = b.select(pick_right, right, child)
                    go_on = b.block.function.append_basic_block("sift.swap")
                    b.cbranch(less(root, child), go_on, done)
                    b.position_at_end(go_on)
                    swap(root, child)
                    b.store(child, root_v)

                while_loop(b, cond, step_body, name="sift")

            b.store(const64(n // 2), start_v)

            def heapify_cond():
                return b.icmp_signed(">", b.load(start_v), const64(0))

            def heapify(done):
                s = b.sub(b.load(start_v), const64(1))
                b.store(s, start_v)
                b.store(s, root_v)
                sift(const64(n))

            while_loop(b, heapify_cond, heapify, name="heapify")
            b.store(const64(n - 1), last_v)

            def extract_cond():
                return b.icmp_signed(">", b.load(last_v), const64(0))

            def extract(done):
                last = b.load(last_v)
                swap(const64(0), last)
                b.store(const64(0), root_v)
                sift(last)
                b.store(b.sub(last, const64(1)), last_v)

            while_loop(b, extract_cond, extract, name="extract")

        _row_loop(b, row_shape, wid, wcount, row)

    work = _prod(shape) * max(1, int(np.log2(max(n, 2)))) * 4
    return body, _items(row_shape + (1,)) if row_shape else 1, work


def _emit_cumulative(r: _Region):
    eqn = r.eqn
    (x,) = eqn.invars
    op = {"sum": "add", "prod": "mul", "max": "max", "min": "min"}[eqn.primitive.cumulative]
    axis, reverse = eqn.params["axis"], eqn.params["reverse"]
    shape = x.aval.shape
    n = shape[axis]
    dtype = eqn.outvars[0].aval.dtype
    strides = contiguous_strides(shape)
    row_shape, join = _rows(shape, axis)

    def body(b, pointers, wid, wcount):
        if _prod(shape) == 0:
            return
        acc_v = b.alloca(info(dtype).compute, name="acc")

        def row(row_index):
            def position(k):
                return b.sub(const64(n - 1), k) if reverse else k

            first = position(const64(0))
            v0 = r.read(b, pointers, x, join(row_index, first))
            b.store(v0, acc_v)
            scalar_ops.store(b, r.out(pointers), dot_offsets(b, join(row_index, first), strides), v0, dtype)

            def step(k):
                p = position(k)
                acc = scalar_ops.emit(b, op, {}, [b.load(acc_v), r.read(b, pointers, x, join(row_index, p))], [dtype, dtype], dtype)
                b.store(acc, acc_v)
                scalar_ops.store(b, r.out(pointers), dot_offsets(b, join(row_index, p), strides), acc, dtype)

            for_range(b, 1, n, step, name="k")

        _row_loop(b, row_shape, wid, wcount, row)

    return body, _items(row_shape + (1,)) if row_shape else 1, _prod(shape) * 2


def _emit_argreduce(r: _Region):
    eqn = r.eqn
    (x,) = eqn.invars
    is_max = eqn.primitive.arg_op == "max"
    axis = eqn.params["axis"]
    shape = x.aval.shape
    n = shape[axis]
    dtype = x.aval.dtype
    out = eqn.outvars[0]
    out_dtype = out.aval.dtype
    row_shape, join = _rows(shape, axis)
    out_strides = contiguous_strides(row_shape)
    d = info(dtype)

    def body(b, pointers, wid, wcount):
        if _prod(row_shape) == 0:
            return
        best_v = b.alloca(d.compute, name="best")
        index_v = b.alloca(I64, name="index")

        def row(row_index):
            b.store(r.read(b, pointers, x, join(row_index, const64(0))), best_v)
            b.store(const64(0), index_v)

            def step(k):
                v = r.read(b, pointers, x, join(row_index, k))
                best = b.load(best_v)
                better = _less(b, dtype, best, v) if is_max else _less(b, dtype, v, best)
                if d.is_float:
                    # NaN wins (the first one): _less orders NaN last, so argmin needs it explicitly
                    v_nan = b.fcmp_unordered("uno", v, v)
                    best_nan = b.fcmp_unordered("uno", best, best)
                    better = b.select(best_nan, ir.Constant(I1, 0), b.or_(better, v_nan)) if not is_max else \
                        b.select(best_nan, ir.Constant(I1, 0), better)
                b.store(b.select(better, v, best), best_v)
                b.store(b.select(better, k, b.load(index_v)), index_v)

            for_range(b, 1, n, step, name="k")
            value = scalar_ops.convert(b, b.load(index_v), np.dtype(np.int64), out_dtype)
            scalar_ops.store(b, r.out(pointers), dot_offsets(b, row_index, out_strides), value, out_dtype)

        _row_loop(b, row_shape, wid, wcount, row)

    return body, _items(row_shape + (1,)) if row_shape else 1, _prod(shape) * 2


_EMITTERS = {
    "pad": _emit_pad, "concatenate": _emit_concatenate, "gather": _emit_gather, "scatter": _emit_scatter,
    "dynamic_slice": _emit_dynamic_slice, "dynamic_update_slice": _emit_dynamic_update_slice, "sort": _emit_sort,
    "cumulative": _emit_cumulative, "argreduce": _emit_argreduce,
}


def plan(region):
    """(body emitter, parallel items, work) of a structural region's kernel, computed together once (the
    `structural` kernel strategy plans each region once: no cache kept here)."""
    r = _Region(region)
    return _EMITTERS[r.kind](r)
