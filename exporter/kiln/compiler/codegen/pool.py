"""reduce_window kernels (sum / max / min pooling) over a strided view of the operand.

One work item per output element in row-major order; for each window offset
whose position lands on a real element of the (base-dilated, padded)
operand, the element is combined into the accumulator (float sums in f64,
like the reduction kernels). Padding and dilation holes are the identity, so
they are skipped (pool_select.walk_window, the window walk of every pooling
kernel: without base dilation, by loop bounds).

Channel rows (the vector path): when the innermost axis is one the window does
not touch (channels of NHWC pooling) and the operand's view is contiguous along
it, one work item is one output row: the window is walked once per chunk of
LANES channels, each offset's chunk loaded and combined as one vector (offsets
outside the operand skipped by loop bounds, not per-element tests), the tail
channels one at a time. Each output element sees the same values combined in
the same order as in the scalar kernel (maximum/minimum propagate NaN, sums in
f64), so the results are bit for bit the same. Pooled rows (NCHW along W): when
the innermost axis is pooled with a small window stride s and is contiguous, the
outputs whose window lies inside the operand along it take LANES lanes s apart
(one load of (LANES - 1) s + 1 elements, then a shuffle), the row's edges one
output at a time (_row_plan). A run of LANES // 2 lanes precedes each scalar tail.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..layout import region_views
from . import pool_select, scalar_ops
from .loops import const64, delinearize, dot_offsets, for_range, workgroup_slice
from .intrinsics import call_binary
from .reduce import _Combiner
from .types import info


def _main_eqn(region):
    return next(e for e in reversed(region.eqns) if e.primitive.traits.fusion == "kernel")


def _selects(region) -> bool:
    """The region is one of max/min pooling's derivatives (codegen/pool_select.py)."""
    return _main_eqn(region).primitive.name in pool_select.PRIMITIVES


LANES = 8  # outputs per vector: one AVX register of f32 (two of f64; LLVM splits as the target needs)
MAX_LANE_STRIDE = 4  # pooled rows: window strides up to this load (LANES - 1) * stride + 1 elements per vector


def _row_plan(region):
    """(row length, lane stride, [vector range]) when a vector path applies, else None.

    Channel rows: the innermost axis is untouched by the window, unpadded and unit-stride in the operand's
    view and at least LANES long; lane stride 1, every whole chunk of LANES vectorized. Pooled rows (NCHW
    along W): the innermost axis is pooled with window stride s <= MAX_LANE_STRIDE and no base
    dilation and is unit-stride in the view; lanes are s apart (one load of (LANES - 1) s + 1 elements,
    then a shuffle), for the outputs whose whole window lies inside the operand along it (the interior,
    at least LANES of them); the rest of the row takes one output at a time."""
    eqn = _main_eqn(region)
    p = eqn.params
    shape = tuple(eqn.outvars[0].aval.shape)
    if not shape or shape[-1] < LANES:
        return None
    d = len(shape) - 1
    view = region_views(region)[eqn.invars[0].id]
    if view.strides[-1] != 1:
        return None
    w, s, (lo, hi), bd, wd = (p["window_dimensions"][d], p["window_strides"][d], tuple(p["padding"][d]),
                              p["base_dilation"][d], p["window_dilation"][d])
    if (w, s, (lo, hi), bd) == (1, 1, (0, 0), 1):
        return shape[-1], 1, _segments(0, shape[-1], shape[-1])
    if bd != 1 or s > MAX_LANE_STRIDE:
        return None
    extent = eqn.invars[0].aval.shape[-1]
    first = -(-lo // s) if lo > 0 else 0  # the first output whose window starts inside
    last = (extent - 1 - (w - 1) * wd + lo) // s + 1 if extent - 1 - (w - 1) * wd + lo >= 0 else 0
    last = min(last, shape[-1])
    if last - first < LANES:
        return None
    return shape[-1], s, _segments(first, last, shape[-1])


def _segments(first: int, last: int, row: int):
    """(start, stop, lanes) runs covering [0, row): [first, last) in chunks of LANES, then one of
    LANES // 2 where it fits, the rest one at a time."""
    eight = first + (last - first) // LANES * LANES
    four = eight + (last - eight) // (LANES // 2) * (LANES // 2)
    runs = [(0, first, 1), (first, eight, LANES), (eight, four, LANES // 2), (four, row, 1)]
    return tuple(r for r in runs if r[0] < r[1])


def _row_length(region) -> int:
    plan = _row_plan(region)
    return plan[0] if plan else 0


def parallel_items(region) -> int:
    if _selects(region):
        return pool_select.parallel_items(region)
    size = int(_main_eqn(region).outvars[0].aval.size)
    row = _row_length(region)
    return size // row if row else size


def work(region) -> int:
    if _selects(region):
        return pool_select.work(region)
    eqn = _main_eqn(region)
    return int(eqn.outvars[0].aval.size) * int(np.prod(eqn.params["window_dimensions"], dtype=np.int64))


def emit_kernel(region):
    if _selects(region):
        return pool_select.emit_kernel(region)
    eqn = _main_eqn(region)
    p = eqn.params
    view = region_views(region)[eqn.invars[0].id]
    in_shape = tuple(eqn.invars[0].aval.shape)
    out_shape = tuple(eqn.outvars[0].aval.shape)
    total = int(np.prod(out_shape, dtype=np.int64))
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    comb = _Combiner("sum" if p["op"] == "add" else p["op"], dtype)
    n_in = len(region.invars)
    plan = _row_plan(region)
    if plan:
        return _emit_rows(p, view, in_shape, out_shape, dtype, comb, n_in, *plan)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if total == 0:
            return
        acc = b.alloca(comb.acc_type, name="acc")
        lo, hi = workgroup_slice(b, total, workgroup_id, workgroup_count)

        def element(o):
            pos = delinearize(b, o, out_shape)
            b.store(comb.init(), acc)

            def take(src_index):
                offset = dot_offsets(b, src_index, view.strides, const64(view.offset))
                value = scalar_ops.load(b, pointers[view.source], offset, dtype)
                b.store(comb.combine(b, b.load(acc), value, False), acc)

            pool_select.walk_window(b, p, in_shape, pos, take)
            scalar_ops.store(b, pointers[n_in], o, comb.finalize(b, b.load(acc)), dtype)

        for_range(b, lo, hi, element, name="o")

    return body


def _emit_rows(p, view, in_shape, out_shape, dtype, comb, n_in, row, lane_stride, segments):
    """The row kernel (module docstring, _row_plan): one work item per output row of `row` elements, taken
    in segments of (start, stop, lanes) (lanes lane_stride apart in the operand)."""
    d = info(dtype)
    rows = int(np.prod(out_shape[:-1], dtype=np.int64))
    # f32 / f64 / integers are stored as computed: one vector load or store; halves and bools convert lane by lane
    direct = d.storage == d.compute and d.kind != "b"

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if rows == 0:
            return
        src, out_ptr = pointers[view.source], pointers[n_in]
        lo, hi = workgroup_slice(b, rows, workgroup_id, workgroup_count)
        slots = {n: b.alloca(comb.acc_type if n == 1 else ir.VectorType(comb.acc_type, n), name=f"acc{n}")
                 for n in {n for _, _, n in segments}}

        def load(offset, lanes):
            if lanes == 1:
                return scalar_ops.load(b, src, offset, dtype)
            if direct:
                ptr = b.gep(src, [offset], inbounds=True, source_etype=d.storage)
                span = (lanes - 1) * lane_stride + 1
                v = b.load(ptr, typ=ir.VectorType(d.storage, span), align=_align(d))
                if lane_stride == 1:
                    return v
                return b.shuffle_vector(v, ir.Constant(ir.VectorType(d.storage, span), None),
                                        ir.Constant(ir.VectorType(ir.IntType(32), lanes),
                                                    [k * lane_stride for k in range(lanes)]))
            v = ir.Constant(ir.VectorType(d.compute, lanes), None)
            for k in range(lanes):
                at = b.add(offset, const64(k * lane_stride))
                v = b.insert_element(v, scalar_ops.load(b, src, at, dtype), const64(k))
            return v

        def store(offset, value, lanes):
            if lanes == 1:
                scalar_ops.store(b, out_ptr, offset, comb.finalize(b, value), dtype)
            elif direct:
                if comb.acc_type != d.compute:  # float sums: f64 lanes rounded once, as the scalar finalize does
                    value = b.fptrunc(value, ir.VectorType(d.compute, lanes))
                ptr = b.gep(out_ptr, [offset], inbounds=True, source_etype=d.storage)
                b.store(value, ptr, align=_align(d))
            else:
                for k in range(lanes):
                    lane = b.extract_element(value, const64(k))
                    scalar_ops.store(b, out_ptr, b.add(offset, const64(k)), comb.finalize(b, lane), dtype)

        def chunk(pos, out_base, c, lanes):
            slot = slots[lanes]
            vec_acc = slot.allocated_type
            init = comb.init()
            b.store(init if lanes == 1 else ir.Constant(vec_acc, [init] * lanes), slot)

            def visit(src_index):
                offset = dot_offsets(b, src_index, view.strides, const64(view.offset))
                value = load(offset, lanes)
                if lanes > 1 and d.kind == "b":
                    value = b.zext(value, ir.VectorType(ir.IntType(8), lanes))
                    b.store(call_binary(b, "umin" if comb.op == "min" else "umax", b.load(slot), value), slot)
                    return
                if lanes > 1 and comb.op == "sum" and d.is_float:
                    if value.type != vec_acc:
                        value = b.fpext(value, vec_acc)
                    b.store(b.fadd(b.load(slot), value), slot)
                    return
                b.store(comb.combine(b, b.load(slot), value, False), slot)

            pool_select.walk_window(b, p, in_shape, pos + [c], visit)
            store(b.add(out_base, c), b.load(slot), lanes)

        def element(r):
            pos = delinearize(b, r, out_shape[:-1]) if rank_rows else []
            out_base = b.mul(r, const64(row))
            for start, stop, lanes in segments:
                for_range(b, start, stop, lambda c, n=lanes: chunk(pos, out_base, c, n), name=f"c{lanes}", step=lanes)

        rank_rows = len(out_shape) - 1
        for_range(b, lo, hi, element, name="r")

    return body


def _align(d) -> int:
    return {8: 1, 16: 2, 32: 4, 64: 8}[d.bits]
