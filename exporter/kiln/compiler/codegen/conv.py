"""Convolution kernels (conv_general_dilated).

Direct convolution over strided views of the operands (any dimension
numbers; transposes and reshapes that feed the convolution are address
arithmetic). One work item is (output batch, output spatial position, group,
tile of up to TILE output channels of that group). For each kernel position
whose input position is inside the (dilated, padded) input, and each input
channel of the group, a tile of accumulators is updated across contiguous
output channels: acc[c] += x * w[o0 + c] — the innermost loop runs along the
rhs output-feature stride (contiguous for HWIO kernels), so it vectorizes.
Floats accumulate in their compute type with fused multiply-adds; integers
wrap like numpy's astype.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ..layout import contiguous_strides, region_views
from . import scalar_ops
from .intrinsics import fmuladd
from .loops import const64, delinearize, dot_offsets, for_range, workgroup_slice
from .types import I1, info

TILE = 64


def _main_eqn(region):
    return next(e for e in reversed(region.eqns) if getattr(e.primitive, "kernel_codegen", None))


@dataclass
class ConvPlan:
    dtype: np.dtype
    lhs: object  # View
    rhs: object
    n_out: int
    out_features: int
    in_per_group: int
    out_spatial: tuple[int, ...]
    kernel_spatial: tuple[int, ...]
    in_spatial: tuple[int, ...]
    strides: tuple[int, ...]
    pad_lo: tuple[int, ...]
    lhs_dilation: tuple[int, ...]
    rhs_dilation: tuple[int, ...]
    feature_groups: int
    batch_groups: int
    lhs_s: tuple  # (batch, feature, spatial...) strides of the lhs view
    rhs_s: tuple  # (out feature, in feature, spatial...)
    out_s: tuple  # (batch, feature, spatial...) strides of the contiguous output

    @property
    def groups(self) -> int:
        return self.feature_groups * self.batch_groups

    @property
    def block(self) -> int:
        return self.out_features // self.groups

    @property
    def tiles(self) -> int:
        return -(-self.block // TILE)

    @property
    def items(self) -> int:
        return self.n_out * int(np.prod(self.out_spatial, dtype=np.int64)) * self.groups * self.tiles


def _conv_plan(region) -> ConvPlan:
    eqn = _main_eqn(region)
    p = eqn.params
    views = region_views(region)
    lv, rv = views[eqn.invars[0].id], views[eqn.invars[1].id]
    lhs_spec, rhs_spec, out_spec = p["dimension_numbers"]
    out_shape = eqn.outvars[0].aval.shape
    ostrides = contiguous_strides(out_shape)
    return ConvPlan(
        dtype=np.dtype(eqn.outvars[0].aval.dtype), lhs=lv, rhs=rv,
        n_out=out_shape[out_spec[0]], out_features=out_shape[out_spec[1]],
        in_per_group=rv.shape[rhs_spec[1]],
        out_spatial=tuple(out_shape[d] for d in out_spec[2:]),
        kernel_spatial=tuple(rv.shape[d] for d in rhs_spec[2:]),
        in_spatial=tuple(lv.shape[d] for d in lhs_spec[2:]),
        strides=tuple(p["window_strides"]), pad_lo=tuple(lo for lo, _ in p["padding"]),
        lhs_dilation=tuple(p["lhs_dilation"]), rhs_dilation=tuple(p["rhs_dilation"]),
        feature_groups=p["feature_group_count"], batch_groups=p["batch_group_count"],
        lhs_s=tuple(lv.strides[d] for d in lhs_spec), rhs_s=tuple(rv.strides[d] for d in rhs_spec),
        out_s=tuple(ostrides[d] for d in out_spec),
    )


def parallel_items(region) -> int:
    plan = _conv_plan(region)
    return plan.items if plan.block else 0


def work(region) -> int:
    eqn = _main_eqn(region)
    plan = _conv_plan(region)
    macs = int(eqn.outvars[0].aval.size) * plan.in_per_group * int(np.prod(plan.kernel_spatial, dtype=np.int64))
    return max(macs // 4, 1)


def emit_kernel(region):
    return _emit_conv(region, _conv_plan(region))


def _emit_conv(region, p: ConvPlan):
    d = info(p.dtype)
    acc_type = d.compute
    n_in = len(region.invars)
    nsp = len(p.out_spatial)
    item_shape = (p.n_out,) + p.out_spatial + (p.groups, p.tiles)
    lv, rv = p.lhs, p.rhs

    def zero():
        return ir.Constant(acc_type, 0.0) if d.is_float else ir.Constant(acc_type, 0)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if p.items == 0 or p.block == 0:
            return
        lhs_ptr, rhs_ptr, out_ptr = pointers[lv.source], pointers[rv.source], pointers[n_in]
        acc = b.alloca(acc_type, size=const64(TILE), name="acc")

        def acc_ptr(c):
            return b.gep(acc, [c], inbounds=True, source_etype=acc_type)

        lo, hi = workgroup_slice(b, p.items, workgroup_id, workgroup_count)

        def item(linear):
            index = delinearize(b, linear, item_shape)
            n, pos, grp, tile = index[0], index[1:1 + nsp], index[1 + nsp], index[2 + nsp]
            start = b.mul(tile, const64(TILE))
            remaining = b.sub(const64(p.block), start)
            count = b.select(b.icmp_signed("<", remaining, const64(TILE)), remaining, const64(TILE))
            o0 = b.add(b.mul(grp, const64(p.block)), start)
            for_range(b, 0, count, lambda c: b.store(zero(), acc_ptr(c)), name="init")
            lhs_batch = b.add(b.mul(grp, const64(p.n_out)), n) if p.batch_groups > 1 else n
            lhs_base = dot_offsets(b, [lhs_batch], [p.lhs_s[0]], const64(lv.offset))
            if p.feature_groups > 1:
                lhs_base = dot_offsets(b, [b.mul(grp, const64(p.in_per_group))], [p.lhs_s[1]], lhs_base)
            rhs_base = dot_offsets(b, [o0], [p.rhs_s[0]], const64(rv.offset))

            def kernel_loops(depth, in_index, k_index, valid):
                if depth == nsp:
                    def accumulate():
                        xb = dot_offsets(b, in_index, p.lhs_s[2:], lhs_base)
                        wb = dot_offsets(b, k_index, p.rhs_s[2:], rhs_base)

                        def channel(ci):
                            x = scalar_ops.load(b, lhs_ptr, dot_offsets(b, [ci], [p.lhs_s[1]], xb), p.dtype)
                            wc = dot_offsets(b, [ci], [p.rhs_s[1]], wb)

                            def lane(c):
                                w = scalar_ops.load(b, rhs_ptr, dot_offsets(b, [c], [p.rhs_s[0]], wc), p.dtype)
                                old = b.load(acc_ptr(c))
                                new = fmuladd(b, x, w, old) if d.is_float else b.add(b.mul(x, w), old)
                                b.store(new, acc_ptr(c))

                            for_range(b, 0, count, lane, name="c")

                        for_range(b, 0, p.in_per_group, channel, name="ci")

                    if valid is None:
                        accumulate()
                    else:
                        with b.if_then(valid):
                            accumulate()
                    return

                def step(k):
                    q = b.add(b.mul(pos[depth], const64(p.strides[depth])), b.mul(k, const64(p.rhs_dilation[depth])))
                    q = b.sub(q, const64(p.pad_lo[depth]))
                    ld = p.lhs_dilation[depth]
                    extent = (p.in_spatial[depth] - 1) * ld + 1 if p.in_spatial[depth] else 0
                    ok = b.and_(b.icmp_signed(">=", q, const64(0)), b.icmp_signed("<", q, const64(extent)))
                    if ld > 1:
                        ok = b.and_(ok, b.icmp_signed("==", b.srem(q, const64(ld)), const64(0)))
                        src = b.sdiv(q, const64(ld))
                    else:
                        src = q
                    both = ok if valid is None else b.and_(valid, ok)
                    kernel_loops(depth + 1, in_index + [src], k_index + [k], both)

                for_range(b, 0, p.kernel_spatial[depth], step, name=f"k{depth}")

            kernel_loops(0, [], [], None if nsp else ir.Constant(I1, 1))
            out_base = dot_offsets(b, [n, o0] + pos, p.out_s)

            def write(c):
                value = b.load(acc_ptr(c))
                scalar_ops.store(b, out_ptr, dot_offsets(b, [c], [p.out_s[1]], out_base), value, p.dtype)

            for_range(b, 0, count, write, name="w")

        for_range(b, lo, hi, item, name="t")

    return body
