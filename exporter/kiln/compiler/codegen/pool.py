"""reduce_window kernels (sum / max / min pooling) over a strided view of the operand.

One work item per output element in row-major order; for each window offset
whose position lands on a real element of the (base-dilated, padded)
operand, the element is combined into the accumulator (float sums in f64,
like the reduction kernels). Padding and dilation holes are the identity, so
they are skipped.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..layout import region_views
from . import pool_select, scalar_ops
from .loops import const64, delinearize, dot_offsets, for_range, workgroup_slice
from .reduce import _Combiner


def _main_eqn(region):
    return next(e for e in reversed(region.eqns) if e.primitive.traits.fusion == "kernel")


def _selects(region) -> bool:
    """The region is one of max/min pooling's derivatives (codegen/pool_select.py)."""
    return _main_eqn(region).primitive.name in pool_select.PRIMITIVES


def parallel_items(region) -> int:
    if _selects(region):
        return pool_select.parallel_items(region)
    return int(_main_eqn(region).outvars[0].aval.size)


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
    rank = len(out_shape)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if total == 0:
            return
        acc = b.alloca(comb.acc_type, name="acc")
        lo, hi = workgroup_slice(b, total, workgroup_id, workgroup_count)

        def element(o):
            pos = delinearize(b, o, out_shape)
            b.store(comb.init(), acc)

            def window(depth, src_index, valid):
                if depth == rank:
                    def take():
                        offset = dot_offsets(b, src_index, view.strides, const64(view.offset))
                        value = scalar_ops.load(b, pointers[view.source], offset, dtype)
                        b.store(comb.combine(b, b.load(acc), value, False), acc)

                    if valid is None:
                        take()
                    else:
                        with b.if_then(valid):
                            take()
                    return
                w, s, wd, bd = (p["window_dimensions"][depth], p["window_strides"][depth],
                                p["window_dilation"][depth], p["base_dilation"][depth])
                pad = p["padding"][depth][0]
                extent = (in_shape[depth] - 1) * bd + 1 if in_shape[depth] else 0
                if w == 1 and s == 1 and pad == 0 and bd == 1:  # a dimension the window does not touch
                    window(depth + 1, src_index + [pos[depth]], valid)
                    return

                def step(k):
                    q = b.sub(b.add(b.mul(pos[depth], const64(s)), b.mul(k, const64(wd))), const64(pad))
                    ok = b.and_(b.icmp_signed(">=", q, const64(0)), b.icmp_signed("<", q, const64(extent)))
                    if bd > 1:
                        ok = b.and_(ok, b.icmp_signed("==", b.srem(q, const64(bd)), const64(0)))
                        q = b.sdiv(q, const64(bd))
                    window(depth + 1, src_index + [q], ok if valid is None else b.and_(valid, ok))

                for_range(b, 0, w, step, name=f"k{depth}")

            window(0, [], None)
            scalar_ops.store(b, pointers[n_in], o, comb.finalize(b, b.load(acc)), dtype)

        for_range(b, lo, hi, element, name="o")

    return body
