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

This module picks a convolution's strategy and holds the generic loops; the
others are in conv_winograd.py (3x3 Winograd), conv_gemm.py (implicit GEMM,
lhs dilation's phases, kernel gradients' batch rows) and conv_depthwise.py;
conv_plan.py has the plan they share.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from llvmlite import ir

from . import epilogue as epilogues
from . import scalar_ops
from .conv_depthwise import (_depthwise, _depthwise_items, _depthwise_planes, _emit_depthwise, _emit_depthwise_planes,
                             _planes_items)
from .conv_gemm import (GemmPlan, _batch_gemm_plan, _emit_batch_gemm, _emit_gemm, _emit_gemm_phases, _epilogue_sizes,
                        _gemm_plan)
from .conv_plan import TILE, ConvPlan, _conv_plan, _input_coordinate, _main_eqn
from .conv_winograd import _emit_winograd, _winograd_plan
from .intrinsics import fmuladd
from .loops import const64, delinearize, dot_offsets, for_range, guarded, workgroup_slice
from .types import I1, info


def parallel_items(region, target) -> int:
    plan = _conv_plan(region)
    wino = _winograd_plan(plan, target)
    if wino is not None:
        return plan.n_out * wino.bands * -(-plan.block // wino.nc)
    gemm = _gemm_plan(plan, target)
    if gemm is not None:
        return plan.n_out * plan.groups * gemm.m_chunks * gemm.n_chunks
    gemm = _batch_gemm_plan(plan, target)
    if gemm is not None:
        return gemm.pixels * gemm.m_chunks * gemm.n_chunks
    if _depthwise(plan):
        return _depthwise_items(plan)
    if _depthwise_planes(plan):
        return _planes_items(plan)
    return plan.items if plan.block else 0


def work(region, target) -> int:
    eqn = _main_eqn(region)
    plan = _conv_plan(region)
    macs = int(eqn.outvars[0].aval.size) * plan.in_per_group * int(np.prod(plan.kernel_spatial, dtype=np.int64))
    return max(macs // {"direct": 4, "depthwise": 8, "depthwise_planes": 8, "winograd": 36}.get(strategy(region, target), 16), 1)


def strategy(region, target) -> str:
    """'winograd' (3x3 stride 1 or 2, NHWC: Winograd over the matmul microkernel), 'gemm' (implicit
    GEMM over the matmul microkernel), 'gemm_batch' (the same with the batch as GEMM rows: kernel
    gradients), 'depthwise' (one channel per group, vectorized along the channels) or 'direct' (the generic
    loops) for `target`."""
    plan = _conv_plan(region)
    if _winograd_plan(plan, target) is not None:
        return "winograd"
    if _gemm_plan(plan, target) is not None:
        return "gemm"
    if _batch_gemm_plan(plan, target) is not None:
        return "gemm_batch"
    if _depthwise(plan):
        return "depthwise"
    return "depthwise_planes" if _depthwise_planes(plan) else "direct"



def _epilogue(region, p: ConvPlan, g: GemmPlan | None):
    """The elementwise epilogue after the convolution (epilogue_fusion.py), None when there is none; only
    a GEMM without groups or lhs dilation whose output is (batch, pixels, features) (rows) or (batch,
    features, pixels) (cols) contiguous takes one."""
    eqn = _main_eqn(region)
    if eqn is region.eqns[-1] and [v.id for v in region.outvars] == [eqn.outvars[0].id]:
        return None
    if g is None or g.phases or p.groups != 1:
        raise epilogues.NotFusable("a convolution epilogue needs the GEMM without groups or lhs dilation")
    rows = g.orientation == "rows"
    if (g.pixel_stride != (p.block if rows else 1) or p.out_s[1] != (1 if rows else g.pixels)
            or p.out_s[0] != p.block * g.pixels):
        raise epilogues.NotFusable("a convolution epilogue needs a contiguous (batch, pixels, features) or "
                                   "(batch, features, pixels) output")
    return epilogues.plan(region, _epilogue_sizes(p, g) + (p.in_per_group * g.taps,))


def epilogue_fusable(region) -> bool:
    """Whether the region (a convolution and elementwise work after it) is one kernel: the implicit GEMM
    with rows = pixels, its epilogue applied to each work item's finished tile (as the matmul strategy's)."""
    plan = _conv_plan(region)
    try:
        return _epilogue(region, plan, _gemm_plan(plan, SimpleNamespace(vector_bytes=32, vector_registers=16))) is not None
    except epilogues.NotFusable:
        return False


def emit_kernel(region, target):
    plan = _conv_plan(region)
    gemm = _gemm_plan(plan, target)
    ep = _epilogue(region, plan, gemm)
    wino = _winograd_plan(plan, target)
    if wino is not None:
        return _emit_winograd(region, plan, wino, ep)
    if gemm is not None:
        return _emit_gemm_phases(region, plan, gemm) if gemm.phases else _emit_gemm(region, plan, gemm, ep)
    gemm = _batch_gemm_plan(plan, target)
    if gemm is not None:
        return _emit_batch_gemm(region, plan, gemm)
    if _depthwise(plan):
        return _emit_depthwise(region, plan, target)
    if _depthwise_planes(plan):
        return _emit_depthwise_planes(region, plan)
    return _emit_conv(region, plan)



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

                    guarded(b, valid, accumulate)
                    return

                def step(k):
                    src, ok = _input_coordinate(b, p, depth, pos[depth], k)
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

