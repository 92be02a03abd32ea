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
from types import SimpleNamespace

import numpy as np
from llvmlite import ir

from ..layout import contiguous_strides, region_views
from . import epilogue as epilogues
from . import matmul, scalar_ops
from .intrinsics import fmuladd
from .loops import const64, delinearize, dot_offsets, for_range, workgroup_slice
from .types import F32, F64, I1, I64, PTR, info

TILE = 64


def _main_eqn(region):
    return next(e for e in reversed(region.eqns) if e.primitive.traits.fusion == "kernel")


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


def _epilogue_sizes(p: ConvPlan, g: GemmPlan) -> tuple[int, int, int]:
    """(batch, rows, columns) of the GEMM's output as the epilogue sees it: (batch, pixels, features) for
    the rows orientation (NHWC), (batch, features, pixels) for the cols one (NCHW)."""
    return (p.n_out, g.pixels, p.block) if g.orientation == "rows" else (p.n_out, p.block, g.pixels)


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


# ----------------------------------------------------------------------------- depthwise (f32/f64)
#
# One input channel and one output feature per group (feature_group_count = channels: MobileNet's
# depthwise convolutions), channels contiguous in the image, the kernel and the output (NHWC/HWIO): each
# output pixel is a sum over the taps of x[pixel's input position, c] * w[tap, c] along the channels, which
# the loop vectorizer turns into vector FMAs. A work item is an output row (every spatial dim but the last)
# and a chunk of at most DEPTHWISE_CHUNK channels; per pixel the taps inside the input are summed into an
# accumulator row (zero-initialized) that is then stored. The generic loops took one scalar FMA per
# element with a tile per output pixel and group (56x56x64 3x3: 2.3 ms of CPU).

DEPTHWISE_CHUNK = 256
DEPTHWISE_VECTORS = 4   # vectors of channels accumulated together


def _depthwise(p: ConvPlan) -> bool:
    """A depthwise convolution (feature groups of one channel) or a depthwise kernel's gradient (batch groups
    of one image: the forward channels are the lhs batch, summed over the forward batch, its in_per_group),
    lanes contiguous in the image, the kernel and the output."""
    if (p.dtype not in (np.float32, np.float64) or p.block != 1 or p.items == 0 or not p.out_spatial
            or p.rhs_s[0] != 1 or p.out_s[1] != 1):
        return False
    if p.batch_groups == 1:
        return p.in_per_group == 1 and p.lhs_s[1] == 1
    return p.feature_groups == 1 and p.n_out == 1 and p.lhs_s[0] == 1


def _depthwise_item_shape(p: ConvPlan) -> tuple[int, ...]:
    """Items: output rows by chunks of channels, or single pixels where that gives fewer than 16 items (a
    kernel gradient's 3x3 'pixels')."""
    chunks = -(-p.groups // DEPTHWISE_CHUNK)
    rows = (p.n_out,) + tuple(p.out_spatial[:-1])
    if int(np.prod(rows, dtype=np.int64)) * chunks < 16:
        return rows + (p.out_spatial[-1], chunks)
    return rows + (chunks,)


def _depthwise_items(p: ConvPlan) -> int:
    return int(np.prod(_depthwise_item_shape(p), dtype=np.int64))


def _emit_depthwise(region, p: ConvPlan, target):
    ty = F32 if p.dtype == np.float32 else F64
    vw = max(target.vector_bytes // p.dtype.itemsize, 1)
    vec = ir.VectorType(ty, vw)
    align = p.dtype.itemsize
    nsp = len(p.out_spatial)
    lv, rv = p.lhs, p.rhs
    n_in = len(region.invars)
    channels = p.groups
    chunk = min(channels, DEPTHWISE_CHUNK)
    chunks = -(-channels // chunk)
    item_shape = _depthwise_item_shape(p)
    per_pixel = len(item_shape) == nsp + 2
    items = _depthwise_items(p)
    block = DEPTHWISE_VECTORS * vw  # channels whose accumulators stay in registers over a pixel's taps

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        x_ptr, w_ptr, out_ptr = pointers[lv.source], pointers[rv.source], pointers[n_in]
        accs = [b.alloca(vec, name=f"acc{i}") for i in range(DEPTHWISE_VECTORS)]  # promoted to registers
        acc1 = b.alloca(ty, name="acc1")  # the tail channels' one at a time
        lo, hi = workgroup_slice(b, items, workgroup_id, workgroup_count)

        def elem(base, offset):
            return b.gep(base, [offset], source_etype=ty)

        def item(it):
            index = delinearize(b, it, item_shape)
            n, outer, ch = index[0], index[1:nsp], index[-1]
            c0 = b.mul(ch, const64(chunk))
            count = const64(chunk) if channels % chunk == 0 else matmul._min(b, b.sub(const64(channels), c0), const64(chunk))
            x_base = b.add(dot_offsets(b, [n], p.lhs_s[:1], const64(lv.offset)), c0)
            w_base = b.add(const64(rv.offset), c0)
            o_base = b.add(dot_offsets(b, [n] + list(outer), (p.out_s[0],) + tuple(p.out_s[2:-1])), c0)

            def pixel(wp):
                pos = list(outer) + [wp]
                out_row = elem(out_ptr, b.add(o_base, b.mul(wp, const64(p.out_s[-1]))))

                def channels_at(c, lanes, vectors):
                    """out_row[c : c + vectors * lanes] = the pixel's sum over its taps inside the input."""
                    t = vec if lanes == vw else ty
                    slots = accs[:vectors] if lanes == vw else [acc1]
                    zero = ir.Constant(t, None if lanes == vw else 0.0)
                    for a in slots:
                        b.store(zero, a)

                    def taps(depth, x_off, w_off, valid):
                        if depth == nsp:
                            def channel(ci):  # a kernel gradient sums over the forward batch too
                                xc = dot_offsets(b, [ci], p.lhs_s[1:2], x_off)
                                wc = dot_offsets(b, [ci], p.rhs_s[1:2], w_off)
                                for i, a in enumerate(slots):
                                    at = b.add(c, const64(i * lanes))
                                    xv = b.load(elem(x_ptr, b.add(xc, at)), typ=t, align=align)
                                    wv = b.load(elem(w_ptr, b.add(wc, at)), typ=t, align=align)
                                    b.store(fmuladd(b, xv, wv, b.load(a, typ=t)), a)

                            def accumulate():
                                if p.in_per_group == 1:
                                    channel(const64(0))
                                else:
                                    for_range(b, 0, p.in_per_group, channel, name="ci")
                            if valid is None:
                                accumulate()
                            else:
                                with b.if_then(valid):
                                    accumulate()
                            return

                        def step(k):
                            q, ok = _input_coordinate(b, p, depth, pos[depth], k)
                            taps(depth + 1, b.add(x_off, b.mul(q, const64(p.lhs_s[2 + depth]))),
                                 b.add(w_off, b.mul(k, const64(p.rhs_s[2 + depth]))),
                                 ok if valid is None else b.and_(valid, ok))
                        for_range(b, 0, p.kernel_spatial[depth], step, name=f"k{depth}")

                    taps(0, x_base, w_base, None)
                    for i, a in enumerate(slots):
                        b.store(b.load(a, typ=t), elem(out_row, b.add(c, const64(i * lanes))), align=align)

                blocks = b.udiv(count, const64(block))
                for_range(b, 0, blocks, lambda k: channels_at(b.mul(k, const64(block)), vw, DEPTHWISE_VECTORS), name="cb")
                done = b.mul(blocks, const64(block))
                vectors_end = b.add(done, b.mul(b.udiv(b.sub(count, done), const64(vw)), const64(vw)))
                for_range(b, b.udiv(done, const64(vw)), b.udiv(vectors_end, const64(vw)),
                          lambda k: channels_at(b.mul(k, const64(vw)), vw, 1), name="cv")
                for_range(b, vectors_end, count, lambda c: channels_at(c, 1, 1), name="cs")

            if per_pixel:
                pixel(index[nsp])
            else:
                for_range(b, 0, p.out_spatial[-1], pixel, name="w")

        for_range(b, lo, hi, item, name="it")

    return body


# Depthwise with the spatial dims contiguous (NCHW/OIHW): each channel's plane is a convolution of its own.
# A work item is one output row of one channel: the row (zeroed) accumulates, for each tap whose input row is
# inside, the input row shifted by the tap times the tap's weight over the pixels whose input column is
# inside (stride 1 along the row, so a contiguous run: vectorized), then is stored.

PLANES_MAX_WIDTH = 4096  # the row accumulator lives on the stack


def _depthwise_planes(p: ConvPlan) -> bool:
    return (p.dtype in (np.float32, np.float64) and p.batch_groups == 1 and p.in_per_group == 1 and p.block == 1
            and p.items > 0 and len(p.out_spatial) >= 1 and p.out_spatial[-1] <= PLANES_MAX_WIDTH
            and p.lhs_s[-1] == 1 and p.out_s[-1] == 1 and p.strides[-1] == 1 and p.lhs_dilation[-1] == 1)


def _planes_items(p: ConvPlan) -> int:
    return p.n_out * p.groups * int(np.prod(p.out_spatial[:-1], dtype=np.int64))


def _emit_depthwise_planes(region, p: ConvPlan):
    ty = F32 if p.dtype == np.float32 else F64
    nsp = len(p.out_spatial)
    lv, rv = p.lhs, p.rhs
    n_in = len(region.invars)
    width, in_width = p.out_spatial[-1], p.in_spatial[-1]
    rd, pad = p.rhs_dilation[-1], p.pad_lo[-1]
    item_shape = (p.n_out, p.groups) + tuple(p.out_spatial[:-1])
    items = _planes_items(p)
    zero = ir.Constant(ty, 0.0)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        x_ptr, w_ptr, out_ptr = pointers[lv.source], pointers[rv.source], pointers[n_in]
        row_buf = b.alloca(ty, size=const64(width), name="row")
        row_buf.align = 64
        lo, hi = workgroup_slice(b, items, workgroup_id, workgroup_count)

        def elem(base, offset):
            return b.gep(base, [offset], source_etype=ty)

        def item(it):
            index = delinearize(b, it, item_shape)
            n, c, outer = index[0], index[1], index[2:]
            x_base = dot_offsets(b, [n, c], p.lhs_s[:2], const64(lv.offset))
            w_base = dot_offsets(b, [c], p.rhs_s[:1], const64(rv.offset))
            for_range(b, 0, width, lambda j: b.store(zero, elem(row_buf, j)), name="z")

            def taps(depth, x_off, w_off, valid):
                if depth == nsp - 1:
                    def inner(k):
                        shift = b.sub(b.mul(k, const64(rd)), const64(pad))  # input column of output pixel 0
                        j_lo = matmul._min(b, _max(b, b.sub(const64(0), shift), const64(0)), const64(width))
                        j_hi = _max(b, matmul._min(b, b.sub(const64(in_width), shift), const64(width)), j_lo)
                        wt = b.load(elem(w_ptr, b.add(w_off, b.mul(k, const64(p.rhs_s[-1])))), typ=ty)
                        src = elem(x_ptr, b.add(x_off, shift))
                        for_range(b, j_lo, j_hi, lambda j: b.store(
                            fmuladd(b, b.load(elem(src, j), typ=ty), wt, b.load(elem(row_buf, j), typ=ty)),
                            elem(row_buf, j)), name="j")

                    def run():
                        for_range(b, 0, p.kernel_spatial[-1], inner, name="kw")
                    if valid is None:
                        run()
                    else:
                        with b.if_then(valid):
                            run()
                    return

                def step(k):
                    q, ok = _input_coordinate(b, p, depth, outer[depth], k)
                    taps(depth + 1, b.add(x_off, b.mul(q, const64(p.lhs_s[2 + depth]))),
                         b.add(w_off, b.mul(k, const64(p.rhs_s[2 + depth]))), ok if valid is None else b.and_(valid, ok))
                for_range(b, 0, p.kernel_spatial[depth], step, name=f"k{depth}")

            taps(0, x_base, w_base, None)
            out_row = elem(out_ptr, dot_offsets(b, [n, c] + list(outer), p.out_s[:-1]))
            for_range(b, 0, width, lambda j: b.store(b.load(elem(row_buf, j), typ=ty), elem(out_row, j)), name="st")

        for_range(b, lo, hi, item, name="it")

    return body


def _input_coordinate(b, p: ConvPlan, d: int, out_pos, tap):
    """(the input index along spatial dim d, inside?) of output position out_pos and kernel tap `tap` there:
    q = out_pos * stride + tap * rhs_dilation - pad_lo in the lhs-dilated, padded input, inside where it lands on
    an element of the input (0 <= q < its dilated extent, on the lhs dilation's grid), the index q / lhs_dilation."""
    q = b.sub(b.add(b.mul(out_pos, const64(p.strides[d])), b.mul(tap, const64(p.rhs_dilation[d]))), const64(p.pad_lo[d]))
    ld = p.lhs_dilation[d]
    extent = (p.in_spatial[d] - 1) * ld + 1 if p.in_spatial[d] else 0
    ok = b.and_(b.icmp_signed(">=", q, const64(0)), b.icmp_signed("<", q, const64(extent)))
    if ld > 1:
        ok = b.and_(ok, b.icmp_signed("==", b.srem(q, const64(ld)), const64(0)))
        q = b.sdiv(q, const64(ld))
    return q, ok


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


# ----------------------------------------------------------------------------- implicit GEMM (f32/f64)
#
# out[n, g*block + o, pixel] = sum over taps t and input channels ci of
#     x[n, g*ipg + ci, input position of (pixel, t)] * w[g*block + o, ci, t]
# is a matrix product per (batch, group) with K = (tap, channel) pairs, computed with the matmul
# strategy's register-blocked microkernel (codegen/matmul.py). Two orientations, chosen by where the
# output's elements lie (the microkernel writes rows of contiguous columns):
#
# - rows (feature dim contiguous: NHWC, NWC): GEMM rows are output pixels, columns output features.
#   A = the image (im2col rows), read in place when a tile's pixels lie in one output row and inside the
#   input for this tap, else packed (zeros for padding and dilation holes); B = the weights, packed into
#   NR-wide panels per K block.
# - cols (spatial dims contiguous: NCHW): GEMM rows are output features, columns output pixels.
#   A = the weights, read in place (one tap per K block) or packed; B = the image, packed into panels
#   (im2col, zeros for padding and holes).
#
# K blocks are either part of one tap's channels (channels >= KC/2) or several whole taps.

GEMM_MIN_FEATURES = 8   # output features per group below which the generic strategy is kept (depthwise)
GEMM_MIN_K = 8          # taps x input channels per group below which the generic strategy is kept
GEMM_MAX_M_CHUNKS = 16  # row chunks per (batch, group, column chunk): bigger chunks repack B less often
GEMM_MIN_ROWS = 16      # GEMM rows below which the generic strategy is kept: each work item packs its B
                        # panels again, which only pays over enough rows (a weight gradient's 3x3 'pixels')


@dataclass
class GemmPlan:
    orientation: str      # 'rows' or 'cols'
    pixels: int           # output pixels per image
    pixel_stride: int     # output stride between consecutive pixels (row-major over out_spatial)
    taps: int             # kernel positions
    m: int                # GEMM rows
    n: int                # GEMM columns
    taps_per_block: int   # > 1: blocks of whole taps; 1: blocks of channels of one tap
    channel_block: int    # channels per block (all of them when taps_per_block > 1)
    cblocks: int          # channel blocks per tap (taps_per_block == 1)
    vw: int
    mr: int
    nr: int
    nc: int
    row_chunk: int
    phases: bool = False  # rows orientation with lhs dilation: _emit_gemm_phases (row_chunk: whole output rows)

    @property
    def k_blocks(self) -> int:
        if self.taps_per_block > 1:
            return -(-self.taps // self.taps_per_block)
        return self.taps * self.cblocks

    @property
    def m_chunks(self) -> int:
        return max(-(-self.m // self.row_chunk), 1)

    @property
    def n_chunks(self) -> int:
        return max(-(-self.n // self.nc), 1)


def _gemm_plan(p: ConvPlan, target) -> GemmPlan | None:
    """The implicit-GEMM plan of a convolution for `target` (its vector width and register count shape the
    microkernel), or None where the generic strategy is kept."""
    if p.dtype not in (np.float32, np.float64) or p.batch_groups != 1 or p.items == 0:
        return None
    taps = int(np.prod(p.kernel_spatial, dtype=np.int64))
    if p.block < GEMM_MIN_FEATURES or p.in_per_group * taps < GEMM_MIN_K:
        return None
    pixels = int(np.prod(p.out_spatial, dtype=np.int64))
    # the output's spatial dims must be one strided dim, row-major in the kernel's spatial order
    pixel_stride = None
    inner = 1
    for size, stride in zip(reversed(p.out_spatial), reversed(p.out_s[2:])):
        if size != 1:
            if pixel_stride is None:
                pixel_stride = stride
            elif stride != pixel_stride * inner:
                return None
        inner *= size
    pixel_stride = pixel_stride or 1
    if p.out_s[1] == 1:
        orientation, m, n = "rows", pixels, p.block
    elif pixel_stride == 1:
        orientation, m, n = "cols", p.block, pixels
    else:
        return None
    if pixels < 4 or m < GEMM_MIN_ROWS:
        return None
    vw, mr = matmul._target_shape(target.vector_bytes, target.vector_registers, p.dtype)
    nr = vw if n <= vw else 2 * vw  # one vector of columns for few features (16 per group): no half-empty strips
    nc = nr * matmul.NC_STRIPS
    tiles = -(-m // mr)
    row_chunk = mr * max(matmul.ROW_CHUNK_TILES, -(-tiles // GEMM_MAX_M_CHUNKS))
    kc = matmul.KC
    if 2 * p.in_per_group >= kc:
        taps_per_block, channel_block = 1, min(p.in_per_group, kc)
    else:  # whole taps, as many as fit in KC, spread evenly over the blocks (9 taps of 64 channels: 3 x 3)
        most = max(1, kc // p.in_per_group)
        taps_per_block, channel_block = -(-taps // -(-taps // most)), p.in_per_group
    phases = orientation == "rows" and any(v != 1 for v in p.lhs_dilation)
    if phases:  # items of whole output rows, as many as give SHARED_ITEMS items
        width = p.out_spatial[-1]
        rows = m // width
        chunks = min(rows, max(1, -(-matmul.SHARED_ITEMS // (p.n_out * p.groups * -(-n // nc)))))
        row_chunk = width * -(-rows // chunks)
    return GemmPlan(orientation, pixels, pixel_stride, taps, m, n, taps_per_block, channel_block,
                    -(-p.in_per_group // channel_block), vw, mr, nr, nc, row_chunk, phases)


def _emit_gemm(region, p: ConvPlan, g: GemmPlan, ep=None):
    ty = F32 if p.dtype == np.float32 else F64
    kc_max = matmul.KC
    nsp = len(p.out_spatial)
    lv, rv = p.lhs, p.rhs
    n_in = len(region.invars)
    tiling = SimpleNamespace(vw=g.vw, nr=g.nr)
    rows_mode = g.orientation == "rows"
    batches = p.n_out * p.groups
    items = batches * g.m_chunks * g.n_chunks
    ld_one = all(v == 1 for v in p.lhs_dilation)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        x_ptr, w_ptr = pointers[lv.source], pointers[rv.source]
        out_ptr = pointers[n_in + (0 if ep is None else ep.home)]
        module = b.module
        kernels = {rows: matmul._microkernel(module, ty, tiling, rows) for rows in matmul._tile_rows(g.m, g.mr)}
        pack_w = matmul._packer(module, ty, tiling) if rows_mode else None
        panel = b.alloca(ty, size=const64(kc_max * g.nc), name="panel")
        panel.align = 64
        apack = b.alloca(ty, size=const64(g.mr * kc_max), name="apack")
        apack.align = 64
        # per column of a panel of image columns (cols mode): its input offset for the current tap, -1 if outside
        col_runs = not rows_mode and ld_one and nsp > 0
        col_offsets = b.alloca(I64, size=const64(g.nc), name="coloff") if not rows_mode and not col_runs else None
        if col_runs:  # one image row of the panel's columns (tap, channel), and the tap's runs over output rows
            runs = _max_row_runs(g.nc, p.out_spatial[-1])
            row_buf = b.alloca(ty, size=const64(g.nc), name="colrow")
            row_buf.align = 64
            run_slots = b.alloca(I64, size=const64(5 * runs), name="runs")
        a_slot, sam_slot, sak_slot = b.alloca(PTR, name="a"), b.alloca(I64, name="sam"), b.alloca(I64, name="sak")
        lo, hi = workgroup_slice(b, items, workgroup_id, workgroup_count)

        def elem(base, offset):
            return b.gep(base, [offset], source_etype=ty)

        def tap_index(t):
            return delinearize(b, t, p.kernel_spatial) if nsp else []

        def input_offset(pixel, k_index):
            """(offset of x[., 0, input position] relative to the image base, inside?) for an output pixel
            (linear) and a tap (multi-index)."""
            return position_offset(delinearize(b, pixel, p.out_spatial) if nsp else [], k_index)

        def position_offset(pos, k_index):
            """input_offset for an output pixel given as its position (multi-index)."""
            offset, inside = const64(0), ir.Constant(I1, 1)
            for d in range(nsp):
                q, ok = _input_coordinate(b, p, d, pos[d], k_index[d])
                inside = b.and_(inside, ok)
                offset = b.add(offset, b.mul(q, const64(p.lhs_s[2 + d])))
            return offset, inside

        def item(it):
            mi = b.urem(it, const64(g.m_chunks))
            rest = b.udiv(it, const64(g.m_chunks))
            ni = b.urem(rest, const64(g.n_chunks))
            bg = b.udiv(rest, const64(g.n_chunks))
            batch = b.udiv(bg, const64(p.groups))
            grp = b.urem(bg, const64(p.groups))
            m0 = b.mul(mi, const64(g.row_chunk))
            m_end = matmul._min(b, b.add(m0, const64(g.row_chunk)), const64(g.m))
            n0 = b.mul(ni, const64(g.nc))
            n_count = matmul._min(b, b.sub(const64(g.n), n0), const64(g.nc))
            strips = b.udiv(b.add(n_count, const64(g.nr - 1)), const64(g.nr))
            # image base (batch, first channel of the group) and weight base (first feature of the group)
            x_base = dot_offsets(b, [batch, b.mul(grp, const64(p.in_per_group))], p.lhs_s[:2], const64(lv.offset))
            w_base = dot_offsets(b, [b.mul(grp, const64(p.block))], p.rhs_s[:1], const64(rv.offset))
            c_base = dot_offsets(b, [batch, b.mul(grp, const64(p.block))], p.out_s[:2])
            ldc = g.pixel_stride if rows_mode else p.out_s[1]  # C[pixel, feature] or C[feature, pixel]

            def k_block(kb):
                if g.taps_per_block > 1:
                    t0 = b.mul(kb, const64(g.taps_per_block))
                    tn = matmul._min(b, b.sub(const64(g.taps), t0), const64(g.taps_per_block))
                    c0, cn = const64(0), const64(p.in_per_group)
                else:
                    t0, tn = b.udiv(kb, const64(g.cblocks)), const64(1)
                    c0 = b.mul(b.urem(kb, const64(g.cblocks)), const64(g.channel_block))
                    cn = matmul._min(b, b.sub(const64(p.in_per_group), c0), const64(g.channel_block))
                kc = b.mul(tn, cn)
                load_c = b.icmp_unsigned("!=", kb, const64(0))

                def panel_slot(kk, j):
                    strip = b.udiv(j, const64(g.nr))
                    return b.gep(panel, [b.add(b.mul(strip, const64(kc_max * g.nr)),
                                               b.add(b.mul(kk, const64(g.nr)), b.urem(j, const64(g.nr))))],
                                 source_etype=ty)

                padded = b.mul(strips, const64(g.nr))
                if rows_mode:  # B panel = weights[kk, feature n0 + j]: each tap's cn channels by the matmul packer
                    def pack_tap(tt):
                        src = dot_offsets(b, tap_index(b.add(t0, tt)), p.rhs_s[2:], dot_offsets(b, [c0], p.rhs_s[1:2], w_base))
                        src = dot_offsets(b, [n0], p.rhs_s[:1], src)
                        b.call(pack_w, [elem(w_ptr, src), const64(p.rhs_s[1]), const64(p.rhs_s[0]), cn, n_count,
                                        b.gep(panel, [b.mul(b.mul(tt, cn), const64(g.nr))], source_etype=ty)])
                    for_range(b, 0, tn, pack_tap, name="tt")
                elif col_runs:  # B panel = image[kk, pixel n0 + j], copied run by run (_pack_image_runs)
                    _pack_image_runs(b, p, g, x_ptr, x_base, panel, row_buf, run_slots, tap_index, t0, tn, c0, cn,
                                     n0, n_count, padded)
                else:  # B panel = image[kk, pixel n0 + j] (lhs dilation: element by element)
                    def tap(tt):
                        t = b.add(t0, tt)
                        k_index = tap_index(t)

                        def offsets(j):
                            offset, inside = input_offset(b.add(n0, j), k_index)
                            b.store(b.select(inside, offset, const64(-1)),
                                    b.gep(col_offsets, [j], source_etype=I64))
                        for_range(b, 0, n_count, offsets, name="jo")

                        def chan(cc):
                            kk = b.add(b.mul(tt, cn), cc)
                            src = dot_offsets(b, [b.add(c0, cc)], p.lhs_s[1:2], x_base)

                            def col(j):
                                off = b.load(b.gep(col_offsets, [j], source_etype=I64), typ=I64)
                                inside = b.icmp_signed(">=", off, const64(0))
                                safe = b.select(inside, b.add(src, off), src)
                                v = b.load(elem(x_ptr, safe), typ=ty)
                                b.store(b.select(inside, v, ir.Constant(ty, 0.0)), panel_slot(kk, j))
                            for_range(b, 0, n_count, col, name="j")
                            for_range(b, n_count, padded,
                                      lambda j: b.store(ir.Constant(ty, 0.0), panel_slot(kk, j)), name="jz")
                        for_range(b, 0, cn, chan, name="cc")
                    for_range(b, 0, tn, tap, name="tt")

                def m_tile(mt):
                    row = b.add(m0, b.mul(mt, const64(g.mr)))
                    rows = matmul._min(b, b.sub(m_end, row), const64(g.mr))

                    def use_packed():
                        b.store(apack, a_slot)
                        b.store(const64(kc_max), sam_slot)
                        b.store(const64(1), sak_slot)

                    def pack_rows(fn):
                        """apack[i, kk] = fn(i, kk, tap, channel) for the tile's rows."""
                        def one_row(i):
                            def tap(tt):
                                k_index = tap_index(b.add(t0, tt))
                                fn(i, tt, k_index)
                            for_range(b, 0, tn, tap, name="tt")
                        for_range(b, 0, rows, one_row, name="ri")

                    if rows_mode:
                        def pack_image():
                            """apack[i, (tap, channel)]: per row its pixel's position (once), per tap its input
                            position; the tap's channels copied in one run (vectorized where they are contiguous)
                            or zeros where the tap falls in the padding or a dilation hole."""
                            def one_row(i):
                                pos = delinearize(b, b.add(row, i), p.out_spatial) if nsp else []
                                dst_row = b.gep(apack, [b.mul(i, const64(kc_max))], source_etype=ty)

                                def tap(tt):
                                    offset, inside = position_offset(pos, tap_index(b.add(t0, tt)))
                                    dst = b.gep(dst_row, [b.mul(tt, cn)], source_etype=ty)
                                    with b.if_else(inside) as (then, otherwise):
                                        with then:
                                            src = elem(x_ptr, dot_offsets(b, [c0], p.lhs_s[1:2], b.add(x_base, offset)))
                                            for_range(b, 0, cn, lambda cc: b.store(
                                                b.load(b.gep(src, [b.mul(cc, const64(p.lhs_s[1]))], source_etype=ty), typ=ty),
                                                b.gep(dst, [cc], source_etype=ty)), name="cp")
                                        with otherwise:
                                            for_range(b, 0, cn, lambda cc: b.store(ir.Constant(ty, 0.0),
                                                                                   b.gep(dst, [cc], source_etype=ty)), name="cz")
                                for_range(b, 0, tn, tap, name="tt")
                            for_range(b, 0, rows, one_row, name="ri")
                            use_packed()

                        if g.taps_per_block == 1 and ld_one and nsp:
                            # in place when the tile's pixels are in one output row and inside the input
                            k_index = tap_index(t0)
                            first, inside = input_offset(row, k_index)
                            pos = delinearize(b, row, p.out_spatial)
                            last_inner = b.add(pos[-1], b.sub(rows, const64(1)))
                            same_row = b.icmp_signed("<", last_inner, const64(p.out_spatial[-1]))
                            q_last = b.sub(b.add(b.mul(last_inner, const64(p.strides[-1])),
                                                 b.mul(k_index[-1], const64(p.rhs_dilation[-1]))), const64(p.pad_lo[-1]))
                            ok = b.and_(b.and_(inside, same_row), b.icmp_signed("<", q_last, const64(p.in_spatial[-1])))
                            with b.if_else(ok) as (then, otherwise):
                                with then:
                                    src = dot_offsets(b, [c0], p.lhs_s[1:2], b.add(x_base, first))
                                    b.store(elem(x_ptr, src), a_slot)
                                    b.store(const64(p.strides[-1] * p.lhs_s[-1]), sam_slot)
                                    b.store(const64(p.lhs_s[1]), sak_slot)
                                with otherwise:
                                    pack_image()
                        else:
                            pack_image()
                    else:
                        if g.taps_per_block == 1:
                            src = dot_offsets(b, tap_index(t0), p.rhs_s[2:], dot_offsets(b, [c0], p.rhs_s[1:2], w_base))
                            src = dot_offsets(b, [row], p.rhs_s[:1], src)
                            b.store(elem(w_ptr, src), a_slot)
                            b.store(const64(p.rhs_s[0]), sam_slot)
                            b.store(const64(p.rhs_s[1]), sak_slot)
                        else:
                            def row_tap(i, tt, k_index):
                                src0 = dot_offsets(b, k_index, p.rhs_s[2:], dot_offsets(b, [b.add(row, i)], p.rhs_s[:1], w_base))
                                dst0 = b.add(b.mul(i, const64(kc_max)), b.mul(tt, cn))

                                def chan(cc):
                                    v = b.load(elem(w_ptr, dot_offsets(b, [b.add(c0, cc)], p.rhs_s[1:2], src0)), typ=ty)
                                    b.store(v, elem(apack, b.add(dst0, cc)))
                                for_range(b, 0, cn, chan, name="cc")
                            pack_rows(row_tap)
                            use_packed()

                    a_tile = b.load(a_slot, typ=PTR)
                    sam, sak = b.load(sam_slot, typ=I64), b.load(sak_slot, typ=I64)

                    def strip(s):
                        col = b.mul(s, const64(g.nr))
                        cols = matmul._min(b, b.sub(n_count, col), const64(g.nr))
                        c_off = b.add(c_base, b.add(b.mul(row, const64(ldc)), b.add(n0, col)))
                        b_strip = b.gep(panel, [b.mul(s, const64(kc_max * g.nr))], source_etype=ty)
                        args = [a_tile, sam, sak, b_strip, const64(g.nr), elem(out_ptr, c_off), const64(ldc), kc, load_c, cols]
                        matmul._dispatch_rows(b, rows, kernels, args, g.mr)

                    for_range(b, 0, strips, strip, name="s")

                tiles = b.udiv(b.add(b.sub(m_end, m0), const64(g.mr - 1)), const64(g.mr))
                for_range(b, 0, tiles, m_tile, name="mt")

            for_range(b, 0, g.k_blocks, k_block, name="kb")
            if ep is not None:  # bias, activation, ...: on the item's finished tile, still in cache
                epilogues.emit(b, region, ep, pointers, _epilogue_sizes(p, g) + (0,), batch, m0, m_end, n0, n_count)

        for_range(b, lo, hi, item, name="it")

    return body


def _max(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _max_row_runs(nc: int, width: int) -> int:
    """The most output rows (of `width` pixels) that nc consecutive pixels touch."""
    return min(nc, -(-(nc - 1) // width) + 1)


def _pack_image_runs(b, p: ConvPlan, g: GemmPlan, x_ptr, x_base, panel, row_buf, run_slots, tap_index, t0, tn, c0,
                     cn, n0, n_count, padded):
    """The cols orientation's B panel, panel[kk = (tap tt, channel cc), column j] = the image at pixel n0 + j for
    that tap and channel (zero where it falls in the padding), without lhs dilation. The panel's pixels cover a
    few output rows (the last spatial dim); for a tap, each row's pixels read one strided run of an input row,
    with zeros before and after it where the tap reaches into the padding: those runs are found once per tap
    (per row: the panel column it starts at, its length, the run's first and last column within it and its
    input offset), then for each channel its image row is built run by run in `row_buf` (zeros, then a strided
    copy, vectorized) and copied into the panel's NR-wide strips, so no element computes its own address."""
    ty = F32 if p.dtype == np.float32 else F64
    nsp = len(p.out_spatial)
    width, stride, dil, pad = p.out_spatial[-1], p.strides[-1], p.rhs_dilation[-1], p.pad_lo[-1]
    in_width = p.in_spatial[-1]
    step = stride * p.lhs_s[-1]  # input elements between consecutive pixels of a run
    zero = ir.Constant(ty, 0.0)
    kc_max = matmul.KC
    first_row = b.udiv(n0, const64(width))
    nruns = b.add(b.sub(b.udiv(b.add(n0, b.sub(n_count, const64(1))), const64(width)), first_row), const64(1))

    def slot(r, field):
        return b.gep(run_slots, [b.add(b.mul(r, const64(5)), const64(field))], source_etype=I64)

    def ceil_div(a, d):  # a >= 0
        return b.udiv(b.add(a, const64(d - 1)), const64(d))

    # row_buf's columns past n_count up to the strips' width stay zero (the panel's padding columns)
    for_range(b, n_count, padded, lambda j: b.store(zero, b.gep(row_buf, [j], source_etype=ty)), name="bz")

    def tap(tt):
        k_index = tap_index(b.add(t0, tt))
        # the pixels w of an output row whose input column q = w*stride + k*dil - pad lies in [0, in_width)
        shift = b.sub(b.mul(k_index[-1], const64(dil)), const64(pad))  # q at w = 0
        w_lo = b.select(b.icmp_signed("<", shift, const64(0)), ceil_div(b.sub(const64(0), shift), stride), const64(0))
        room = b.sub(const64(in_width - 1), shift)
        w_hi = b.select(b.icmp_signed("<", room, const64(0)), const64(0), b.add(b.udiv(room, const64(stride)), const64(1)))

        def run(r):
            row = b.add(first_row, r)
            start = _max(b, n0, b.mul(row, const64(width)))  # first pixel of the run
            end = matmul._min(b, b.add(n0, n_count), b.mul(b.add(row, const64(1)), const64(width)))
            w0 = b.sub(start, b.mul(row, const64(width)))
            w1 = b.add(w0, b.sub(end, start))
            offset, inside = const64(0), ir.Constant(I1, 1)
            outer = delinearize(b, row, p.out_spatial[:-1]) if nsp > 1 else []
            for d in range(nsp - 1):
                q, ok = _input_coordinate(b, p, d, outer[d], k_index[d])
                inside = b.and_(inside, ok)
                offset = b.add(offset, b.mul(q, const64(p.lhs_s[2 + d])))
            lo = matmul._min(b, _max(b, w_lo, w0), w1)
            hi = b.select(inside, _max(b, matmul._min(b, w_hi, w1), lo), lo)
            b.store(b.sub(start, n0), slot(r, 0))
            b.store(b.sub(end, start), slot(r, 1))
            b.store(b.sub(lo, w0), slot(r, 2))
            b.store(b.sub(hi, w0), slot(r, 3))
            q0 = b.add(b.mul(lo, const64(stride)), shift)
            b.store(b.add(offset, b.mul(q0, const64(p.lhs_s[-1]))), slot(r, 4))
        for_range(b, 0, nruns, run, name="run")

        def chan(cc):
            src = dot_offsets(b, [b.add(c0, cc)], p.lhs_s[1:2], x_base)

            def fill(r):
                at, length = b.load(slot(r, 0), typ=I64), b.load(slot(r, 1), typ=I64)
                lo, hi, off = b.load(slot(r, 2), typ=I64), b.load(slot(r, 3), typ=I64), b.load(slot(r, 4), typ=I64)
                dst = b.gep(row_buf, [at], source_etype=ty)
                for_range(b, 0, lo, lambda j: b.store(zero, b.gep(dst, [j], source_etype=ty)), name="z0")
                base = b.gep(x_ptr, [b.add(src, off)], source_etype=ty)
                copy_dst = b.gep(dst, [lo], source_etype=ty)
                for_range(b, 0, b.sub(hi, lo), lambda j: b.store(
                    b.load(b.gep(base, [b.mul(j, const64(step))], source_etype=ty), typ=ty),
                    b.gep(copy_dst, [j], source_etype=ty)), name="cp")
                for_range(b, hi, length, lambda j: b.store(zero, b.gep(dst, [j], source_etype=ty)), name="z1")
            for_range(b, 0, nruns, fill, name="fill")
            kk = b.add(b.mul(tt, cn), cc)

            def strip(s):
                src_strip = b.gep(row_buf, [b.mul(s, const64(g.nr))], source_etype=ty)
                dst_strip = b.gep(panel, [b.add(b.mul(s, const64(kc_max * g.nr)), b.mul(kk, const64(g.nr)))],
                                  source_etype=ty)
                for j in range(g.nr):
                    b.store(b.load(b.gep(src_strip, [const64(j)], source_etype=ty), typ=ty),
                            b.gep(dst_strip, [const64(j)], source_etype=ty))
            for_range(b, 0, b.udiv(padded, const64(g.nr)), strip, name="s")
        for_range(b, 0, cn, chan, name="cc")
    for_range(b, 0, tn, tap, name="tt")


# ----------------------------------------------------------------------------- lhs dilation: phases
#
# With lhs dilation L (a strided convolution's input gradient: L = the forward stride), output pixel o reads
# tap t only where o*s + t*rd - pad is a multiple of L: the pixels of one output row with the same o mod L
# (a phase) share their taps, and the other taps land on holes. So each output row is taken phase by phase,
# in tiles of MR pixels of one phase (L pixels apart in the output, s apart in the input), and each tile
# multiplies only the taps of its phase: the image read in place where the tile's pixels lie inside the
# input for the tap, packed (zeros outside) otherwise, the weights' panel rows of that tap, C accumulated
# (the item's output block zeroed first, as a pixel may have no tap at all). Packing the holes' zeros and
# multiplying them took L^2 times the work in 2-d.


def _phase_tile_rows(width: int, ld: int, mr: int) -> list[int]:
    """The tile row counts of the phases of a row of `width` pixels (as _tile_rows for each phase's pixels)."""
    counts = set()
    for phase in range(min(ld, width)):
        counts.update(matmul._tile_rows(-(-(width - phase) // ld), mr))
    return sorted(counts)


def _emit_gemm_phases(region, p: ConvPlan, g: GemmPlan):
    ty = F32 if p.dtype == np.float32 else F64
    kc_max = matmul.KC
    nsp = len(p.out_spatial)
    lv, rv = p.lhs, p.rhs
    n_in = len(region.invars)
    tiling = SimpleNamespace(vw=g.vw, nr=g.nr)
    items = p.n_out * p.groups * g.m_chunks * g.n_chunks
    width, ld, stride = p.out_spatial[-1], p.lhs_dilation[-1], p.strides[-1]
    rd, pad, in_width = p.rhs_dilation[-1], p.pad_lo[-1], p.in_spatial[-1]
    rows_per_item = g.row_chunk // width
    out_rows = g.m // width
    zero = ir.Constant(ty, 0.0)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        x_ptr, w_ptr, out_ptr = pointers[lv.source], pointers[rv.source], pointers[n_in]
        module = b.module
        kernels = {rows: matmul._microkernel(module, ty, tiling, rows) for rows in _phase_tile_rows(width, ld, g.mr)}
        pack_w = matmul._packer(module, ty, tiling)
        panel = b.alloca(ty, size=const64(kc_max * g.nc), name="panel")
        panel.align = 64
        apack = b.alloca(ty, size=const64(g.mr * kc_max), name="apack")
        apack.align = 64
        lo, hi = workgroup_slice(b, items, workgroup_id, workgroup_count)

        def elem(base, offset):
            return b.gep(base, [offset], source_etype=ty)

        def tap_index(t):
            return delinearize(b, t, p.kernel_spatial)

        def item(it):
            mi = b.urem(it, const64(g.m_chunks))
            rest = b.udiv(it, const64(g.m_chunks))
            ni = b.urem(rest, const64(g.n_chunks))
            bg = b.udiv(rest, const64(g.n_chunks))
            batch = b.udiv(bg, const64(p.groups))
            grp = b.urem(bg, const64(p.groups))
            r0 = b.mul(mi, const64(rows_per_item))
            r_end = matmul._min(b, b.add(r0, const64(rows_per_item)), const64(out_rows))
            n0 = b.mul(ni, const64(g.nc))
            n_count = matmul._min(b, b.sub(const64(g.n), n0), const64(g.nc))
            strips = b.udiv(b.add(n_count, const64(g.nr - 1)), const64(g.nr))
            x_base = dot_offsets(b, [batch, b.mul(grp, const64(p.in_per_group))], p.lhs_s[:2], const64(lv.offset))
            w_base = dot_offsets(b, [b.mul(grp, const64(p.block))], p.rhs_s[:1], const64(rv.offset))
            c_base = b.add(dot_offsets(b, [batch, b.mul(grp, const64(p.block))], p.out_s[:2]), n0)

            def zero_pixel(px):
                row = b.add(c_base, b.mul(px, const64(g.pixel_stride)))
                for_range(b, 0, n_count, lambda j: b.store(zero, elem(out_ptr, b.add(row, j))), name="zj")
            for_range(b, b.mul(r0, const64(width)), b.mul(r_end, const64(width)), zero_pixel, name="zp")

            def k_block(kb):
                if g.taps_per_block > 1:
                    t0 = b.mul(kb, const64(g.taps_per_block))
                    tn = matmul._min(b, b.sub(const64(g.taps), t0), const64(g.taps_per_block))
                    c0, cn = const64(0), const64(p.in_per_group)
                else:
                    t0, tn = b.udiv(kb, const64(g.cblocks)), const64(1)
                    c0 = b.mul(b.urem(kb, const64(g.cblocks)), const64(g.channel_block))
                    cn = matmul._min(b, b.sub(const64(p.in_per_group), c0), const64(g.channel_block))

                def pack_tap(tt):
                    src = dot_offsets(b, tap_index(b.add(t0, tt)), p.rhs_s[2:], dot_offsets(b, [c0], p.rhs_s[1:2], w_base))
                    src = dot_offsets(b, [n0], p.rhs_s[:1], src)
                    b.call(pack_w, [elem(w_ptr, src), const64(p.rhs_s[1]), const64(p.rhs_s[0]), cn, n_count,
                                    b.gep(panel, [b.mul(b.mul(tt, cn), const64(g.nr))], source_etype=ty)])
                for_range(b, 0, tn, pack_tap, name="tt")
                x_chan = dot_offsets(b, [c0], p.lhs_s[1:2], x_base)

                def out_row(r):
                    outer = delinearize(b, r, p.out_spatial[:-1]) if nsp > 1 else []

                    def tap(tt):
                        k_index = tap_index(b.add(t0, tt))
                        offset, inside = x_chan, ir.Constant(I1, 1)
                        for d in range(nsp - 1):
                            q, ok = _input_coordinate(b, p, d, outer[d], k_index[d])
                            inside = b.and_(inside, ok)
                            offset = b.add(offset, b.mul(q, const64(p.lhs_s[2 + d])))
                        b_tap = b.gep(panel, [b.mul(b.mul(tt, cn), const64(g.nr))], source_etype=ty)

                        def phase(ph):
                            v = b.sub(b.add(b.mul(ph, const64(stride)), b.mul(k_index[-1], const64(rd))), const64(pad))
                            first_q = b.sdiv(v, const64(ld))  # the input index of the phase's first pixel
                            count = b.udiv(b.add(b.sub(const64(width), ph), const64(ld - 1)), const64(ld))

                            def tile(ti):
                                i0 = b.mul(ti, const64(g.mr))
                                rows = matmul._min(b, b.sub(count, i0), const64(g.mr))
                                q0 = b.add(first_q, b.mul(i0, const64(stride)))
                                q_last = b.add(q0, b.mul(b.sub(rows, const64(1)), const64(stride)))
                                whole = b.and_(b.icmp_signed(">=", q0, const64(0)),
                                               b.icmp_signed("<", q_last, const64(in_width)))
                                in_place = elem(x_ptr, b.add(offset, b.mul(q0, const64(p.lhs_s[-1]))))
                                with b.if_then(b.not_(whole)):
                                    def pack_row(i):
                                        q = b.add(q0, b.mul(i, const64(stride)))
                                        ok = b.and_(b.icmp_signed(">=", q, const64(0)), b.icmp_signed("<", q, const64(in_width)))
                                        dst = b.gep(apack, [b.mul(i, const64(kc_max))], source_etype=ty)
                                        with b.if_else(ok) as (then, otherwise):
                                            with then:
                                                src = elem(x_ptr, b.add(offset, b.mul(q, const64(p.lhs_s[-1]))))
                                                for_range(b, 0, cn, lambda cc: b.store(
                                                    b.load(b.gep(src, [b.mul(cc, const64(p.lhs_s[1]))], source_etype=ty), typ=ty),
                                                    b.gep(dst, [cc], source_etype=ty)), name="cp")
                                            with otherwise:
                                                for_range(b, 0, cn, lambda cc: b.store(zero, b.gep(dst, [cc], source_etype=ty)),
                                                          name="cz")
                                    for_range(b, 0, rows, pack_row, name="ri")
                                a_tile = b.select(whole, in_place, apack)
                                sam = b.select(whole, const64(stride * p.lhs_s[-1]), const64(kc_max))
                                sak = b.select(whole, const64(p.lhs_s[1]), const64(1))
                                pixel = b.add(b.mul(r, const64(width)), b.add(ph, b.mul(i0, const64(ld))))
                                c_row = b.add(c_base, b.mul(pixel, const64(g.pixel_stride)))

                                def strip(s_):
                                    col = b.mul(s_, const64(g.nr))
                                    cols = matmul._min(b, b.sub(n_count, col), const64(g.nr))
                                    b_strip = b.gep(b_tap, [b.mul(s_, const64(kc_max * g.nr))], source_etype=ty)
                                    args = [a_tile, sam, sak, b_strip, const64(g.nr), elem(out_ptr, b.add(c_row, col)),
                                            const64(ld * g.pixel_stride), cn, ir.Constant(I1, 1), cols]
                                    matmul._dispatch_rows(b, rows, kernels, args, g.mr)
                                for_range(b, 0, strips, strip, name="s")

                            with b.if_then(b.icmp_signed("==", b.srem(v, const64(ld)), const64(0))):
                                for_range(b, 0, b.udiv(b.add(count, const64(g.mr - 1)), const64(g.mr)), tile, name="ti")
                        with b.if_then(inside):
                            for_range(b, 0, min(ld, width), phase, name="ph")
                    for_range(b, 0, tn, tap, name="tt")
                for_range(b, r0, r_end, out_row, name="r")

            for_range(b, 0, g.k_blocks, k_block, name="kb")

        for_range(b, lo, hi, item, name="it")

    return body


# ----------------------------------------------------------------------------- kernel gradients: batch rows
#
# A convolution whose output has few pixels but many batch rows and contiguous features -- the kernel
# gradient of an NHWC/HWIO convolution: batch = the forward input's channels, features = the forward
# output's channels, pixels = the kernel's positions, taps = the forward output's pixels, channels = the
# forward batch -- is, for each output pixel, a matrix product rows (batch) x K by K x features. For a
# fixed channel and outer tap position the innermost taps lie at a constant stride in the image, so A is
# read in place (no packing) over the run of inner taps that lands inside the input; taps outside it
# contribute nothing and are skipped. The weights (the forward output's cotangent) are packed into
# NR-wide panels per block of inner taps. The item's output block is zeroed first, then accumulated.


def _batch_gemm_plan(p: ConvPlan, target) -> GemmPlan | None:
    if (p.dtype not in (np.float32, np.float64) or p.batch_groups != 1 or p.feature_groups != 1
            or p.items == 0 or not p.out_spatial or any(v != 1 for v in p.lhs_dilation) or p.out_s[1] != 1):
        return None
    taps = int(np.prod(p.kernel_spatial, dtype=np.int64))
    pixels = int(np.prod(p.out_spatial, dtype=np.int64))
    if (p.block < GEMM_MIN_FEATURES or p.n_out < GEMM_MIN_ROWS or p.kernel_spatial[-1] < GEMM_MIN_K
            or p.in_per_group * taps < GEMM_MIN_K):
        return None
    vw, mr = matmul._target_shape(target.vector_bytes, target.vector_registers, p.dtype)
    nr = vw if p.block <= vw else 2 * vw
    tiles = -(-p.n_out // mr)
    row_chunk = mr * max(matmul.ROW_CHUNK_TILES, -(-tiles // GEMM_MAX_M_CHUNKS))
    # narrower column chunks until there are matmul.SHARED_ITEMS items (a 3x3 kernel's 9 pixels with one chunk
    # each left two workers 5 and 4); the cotangent's strips are read in place, so this costs no packing
    strips = matmul.NC_STRIPS
    while strips > 1 and pixels * -(-p.n_out // row_chunk) * -(-p.block // (nr * strips)) < matmul.SHARED_ITEMS:
        strips //= 2
    return GemmPlan("batch", pixels, 0, taps, p.n_out, p.block, 1, 1, 1, vw, mr, nr, nr * strips, row_chunk)


def _emit_batch_gemm(region, p: ConvPlan, g: GemmPlan):
    ty = F32 if p.dtype == np.float32 else F64
    kc_max = matmul.KC
    nsp = len(p.out_spatial)
    lv, rv = p.lhs, p.rhs
    n_in = len(region.invars)
    tiling = SimpleNamespace(vw=g.vw, nr=g.nr)
    items = g.pixels * g.m_chunks * g.n_chunks
    outer_taps = p.kernel_spatial[:-1]
    inner_taps = p.kernel_spatial[-1]
    s_in, rd_in, pad_in, extent_in = p.strides[-1], p.rhs_dilation[-1], p.pad_lo[-1], p.in_spatial[-1]

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        x_ptr, w_ptr, out_ptr = pointers[lv.source], pointers[rv.source], pointers[n_in]
        kernels = {rows: matmul._microkernel(b.module, ty, tiling, rows) for rows in matmul._tile_rows(g.m, g.mr)}
        pack = matmul._packer(b.module, ty, tiling)
        in_place = p.rhs_s[0] == 1  # the cotangent's features contiguous: B's full strips are read in place
        panel = b.alloca(ty, size=const64(kc_max * g.nc), name="panel")
        panel.align = 64
        lo, hi = workgroup_slice(b, items, workgroup_id, workgroup_count)

        def elem(base, offset):
            return b.gep(base, [offset], source_etype=ty)

        def item(it):
            mi = b.urem(it, const64(g.m_chunks))
            rest = b.udiv(it, const64(g.m_chunks))
            ni = b.urem(rest, const64(g.n_chunks))
            pixel = b.udiv(rest, const64(g.n_chunks))
            pos = delinearize(b, pixel, p.out_spatial)
            m0 = b.mul(mi, const64(g.row_chunk))
            m_end = matmul._min(b, b.add(m0, const64(g.row_chunk)), const64(g.m))
            n0 = b.mul(ni, const64(g.nc))
            n_count = matmul._min(b, b.sub(const64(g.n), n0), const64(g.nc))
            strips = b.udiv(b.add(n_count, const64(g.nr - 1)), const64(g.nr))
            c_base = dot_offsets(b, pos, p.out_s[2:], dot_offsets(b, [n0], p.out_s[1:2]))

            def zero_row(r):
                row_base = dot_offsets(b, [r], p.out_s[:1], c_base)
                for_range(b, 0, n_count, lambda j: b.store(ir.Constant(ty, 0.0), elem(out_ptr, b.add(row_base, j))),
                          name="zj")
            for_range(b, m0, m_end, zero_row, name="zr")
            # the inner taps landing inside the input: q = pos*s + t*rd - pad in [0, extent)
            base_q = b.sub(b.mul(pos[-1], const64(s_in)), const64(pad_in))  # q at t = 0
            need = b.sub(const64(0), base_q)  # t*rd >= need
            t_lo = b.select(b.icmp_signed(">", need, const64(0)),
                            b.udiv(b.add(need, const64(rd_in - 1)), const64(rd_in)), const64(0))
            room = b.sub(const64(extent_in - 1), base_q)  # t*rd <= room
            t_hi = b.select(b.icmp_signed(">=", room, const64(0)),
                            matmul._min(b, b.add(b.udiv(room, const64(rd_in)), const64(1)), const64(inner_taps)),
                            const64(0))

            def channel(ci):
                def outer(to):
                    k_outer = delinearize(b, to, outer_taps) if outer_taps else []
                    inside = ir.Constant(I1, 1)
                    x_off = dot_offsets(b, [ci], p.lhs_s[1:2], const64(lv.offset))
                    for d in range(nsp - 1):
                        q = b.sub(b.add(b.mul(pos[d], const64(p.strides[d])), b.mul(k_outer[d], const64(p.rhs_dilation[d]))),
                                  const64(p.pad_lo[d]))
                        inside = b.and_(inside, b.and_(b.icmp_signed(">=", q, const64(0)),
                                                       b.icmp_signed("<", q, const64(p.in_spatial[d]))))
                        x_off = b.add(x_off, b.mul(q, const64(p.lhs_s[2 + d])))
                    w_off = dot_offsets(b, k_outer, p.rhs_s[2:-1], dot_offsets(b, [ci], p.rhs_s[1:2], const64(rv.offset)))
                    w_off = dot_offsets(b, [n0], p.rhs_s[:1], w_off)

                    def run():
                        blocks = b.udiv(b.add(b.sub(t_hi, t_lo), const64(kc_max - 1)), const64(kc_max))

                        def block(kb):
                            t0 = b.add(t_lo, b.mul(kb, const64(kc_max)))
                            kc = matmul._min(b, b.sub(t_hi, t0), const64(kc_max))
                            b_block = elem(w_ptr, dot_offsets(b, [t0], p.rhs_s[-1:], w_off))
                            if not in_place:
                                b.call(pack, [b_block, const64(p.rhs_s[-1]), const64(p.rhs_s[0]), kc, n_count, panel])
                            q0 = b.add(base_q, b.mul(t0, const64(rd_in)))
                            a_block = b.add(x_off, b.mul(q0, const64(p.lhs_s[-1])))

                            def m_tile(mt):
                                row = b.add(m0, b.mul(mt, const64(g.mr)))
                                rows = matmul._min(b, b.sub(m_end, row), const64(g.mr))
                                a_tile = elem(x_ptr, dot_offsets(b, [row], p.lhs_s[:1], a_block))

                                def strip(s):
                                    col = b.mul(s, const64(g.nr))
                                    cols = matmul._min(b, b.sub(n_count, col), const64(g.nr))
                                    c_off = b.add(dot_offsets(b, [row], p.out_s[:1], c_base), col)
                                    if in_place:
                                        # full strips read the cotangent's rows where they lie; a partial one
                                        # is packed (zero-padded), as its vector loads would read past the row
                                        partial = b.icmp_unsigned("!=", cols, const64(g.nr))
                                        strip_src = b.gep(b_block, [col], source_etype=ty)
                                        with b.if_then(partial):
                                            b.call(pack, [strip_src, const64(p.rhs_s[-1]), const64(1), kc, cols, panel])
                                        b_strip = b.select(partial, panel, strip_src)
                                        ldb = b.select(partial, const64(g.nr), const64(p.rhs_s[-1]))
                                    else:
                                        b_strip = b.gep(panel, [b.mul(s, const64(kc_max * g.nr))], source_etype=ty)
                                        ldb = const64(g.nr)
                                    args = [a_tile, const64(p.lhs_s[0]), const64(rd_in * p.lhs_s[-1]), b_strip, ldb,
                                            elem(out_ptr, c_off), const64(p.out_s[0]), kc, ir.Constant(I1, 1), cols]
                                    matmul._dispatch_rows(b, rows, kernels, args, g.mr)
                                for_range(b, 0, strips, strip, name="s")

                            tiles = b.udiv(b.add(b.sub(m_end, m0), const64(g.mr - 1)), const64(g.mr))
                            for_range(b, 0, tiles, m_tile, name="mt")
                        for_range(b, 0, blocks, block, name="kb")

                    with b.if_then(b.and_(inside, b.icmp_signed("<", t_lo, t_hi))):
                        run()
                for_range(b, 0, int(np.prod(outer_taps, dtype=np.int64)), outer, name="to")
            for_range(b, 0, p.in_per_group, channel, name="ci")

        for_range(b, lo, hi, item, name="it")

    return body


# ----------------------------------------------------------------------------- Winograd: F(2x2, 3x3), and stride 2
#
# A 3x3 stride-1 convolution (no dilation, no groups) with the output's features contiguous (NHWC) computes
# each 2x2 block of output pixels (a tile) from the 4x4 input patch under it as
#     Y = A^T [ sum over input channels of (G g G^T) (.) (B^T d B) ] A
# (Lavin & Gray 2015): per tile, channel pair and one of the 16 positions xi of the 4x4 transformed patch,
# one product instead of 9/4 -- the 16 positions are 16 matrix products V[xi] (tiles x channels) by
# U[xi] (channels x features), 2.25 times fewer FMAs than the implicit GEMM's. A work item is (image,
# band of tile rows, column chunk of features): it transforms the kernel (U, packed into the microkernel's
# NR-wide panels, on the stack), then per chunk of tiles transforms the input patches (B^T d B, zeros
# outside the image), runs the 16 products with the matmul microkernel into M[xi], and transforms them
# into the output (A^T M A, pixels past the output's edge dropped); the epilogue (bias, relu) runs on the
# item's finished rows. Transforms of the kernel use halves, of the data and the result only additions:
# the rounding is that of a direct sum of a few more terms. A stride-2 one takes the same steps with 5x5
# input patches and 25 positions (WINOGRAD_STRIDE2: the even taps F(2, 2), the odd one direct; 25 products
# per tile instead of 36). The 2-d transforms are the 1-d ones (WinogradScheme) along each dim.
#
# B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
# G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
# A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]

WINOGRAD_MIN_CHANNELS = 16   # input channels and output features per convolution below which the GEMM is kept
WINOGRAD_MIN_PIXELS = 64
WINOGRAD_ITEMS = 16          # work items aimed at (bands of tile rows): each transforms the kernel once
WINOGRAD_PANEL_BYTES = 512 << 10   # the transformed kernel's panels on the stack (positions x channels x NC)
WINOGRAD_BUFFER_BYTES = 256 << 10  # the transformed input's, and the products', for one chunk of tiles
WINOGRAD_STACK_BYTES = 1 << 20     # all three at most (else the GEMM): 256 channels of f64 at stride 2 would take 1.5 MiB


@dataclass
class WinogradPlan:
    tiles_h: int          # tile rows (ceil(out height / 2))
    tiles_w: int          # tiles per tile row
    band: int             # tile rows per work item
    chunk: int            # tiles per chunk (whole microkernel tiles)
    vw: int
    mr: int
    nr: int
    nc: int               # features per column chunk (whole strips)
    a_ld: int             # row length of the transformed input (channels, a cache line more at 4 KiB)
    scheme: WinogradScheme

    @property
    def bands(self) -> int:
        return -(-self.tiles_h // self.band)

    @property
    def positions(self) -> int:
        return self.scheme.points ** 2

    @property
    def kernel_positions(self) -> int:
        return len(self.scheme.kernel_rows) ** 2


@dataclass(frozen=True)
class WinogradScheme:
    """One spatial dim's transforms (the 2-d ones are their Kronecker products): a tile's 2 outputs from
    `span` inputs (starting 2 * stride apart) with `points` products: d -> B^T d (points x span), the
    kernel's 3 taps g -> G g (points x 3), the products m -> A^T m (2 x points)."""
    stride: int
    span: int
    bt: tuple
    g: tuple
    at: tuple

    @property
    def points(self) -> int:
        return len(self.bt)

    @property
    def kernel_rows(self) -> tuple:
        """G's distinct rows: the positions whose rows are equal share their transformed kernel (stride 2's
        two odd-tap products: 16 distinct kernel panels of 25)."""
        return tuple(dict.fromkeys(self.g))

    @property
    def kernel_index(self) -> tuple:
        """Each point's row of kernel_rows."""
        return tuple(self.kernel_rows.index(row) for row in self.g)


# F(2, 3): 4 products for 2 outputs of a 3-tap stride-1 filter
WINOGRAD_F23 = WinogradScheme(1, 4, bt=((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1)),
                              g=((1, 0, 0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0, 0, 1)),
                              at=((1, 1, 1, 0), (0, 1, -1, -1)))
# Stride 2 (polyphase): y0 = x0 w0 + x1 w1 + x2 w2, y1 = x2 w0 + x3 w1 + x4 w2: the even taps are F(2, 2) over
# x0, x2, x4 ((x0 - x2) w0, x2 (w0 + w2), (x4 - x2) w2), the odd tap two products: 5 for 2 outputs, not 6
# (2-d: 25 for 4, not 36)
WINOGRAD_STRIDE2 = WinogradScheme(2, 5, bt=((1, 0, -1, 0, 0), (0, 0, 1, 0, 0), (0, 0, -1, 0, 1), (0, 1, 0, 0, 0),
                                            (0, 0, 0, 1, 0)),
                                  g=((1, 0, 0), (1, 0, 1), (0, 0, 1), (0, 1, 0), (0, 1, 0)),
                                  at=((1, 1, 0, 1, 0), (0, 1, 1, 0, 1)))
WINOGRAD_SCHEMES = {1: WINOGRAD_F23, 2: WINOGRAD_STRIDE2}


def _winograd_plan(p: ConvPlan, target) -> WinogradPlan | None:
    if (p.dtype not in (np.float32, np.float64) or len(p.out_spatial) != 2 or p.kernel_spatial != (3, 3)
            or p.strides not in ((1, 1), (2, 2)) or p.rhs_dilation != (1, 1) or p.lhs_dilation != (1, 1) or p.groups != 1
            or p.items == 0 or p.out_s[1] != 1):
        return None
    oh, ow = p.out_spatial
    cin, n = p.in_per_group, p.block
    if (p.out_s[3] != n or p.out_s[2] != ow * n or oh < 2 or ow < 2 or oh * ow < WINOGRAD_MIN_PIXELS
            or not WINOGRAD_MIN_CHANNELS <= cin <= matmul.KC or n < WINOGRAD_MIN_CHANNELS):
        return None
    size = p.dtype.itemsize
    scheme = WINOGRAD_SCHEMES[p.strides[0]]
    positions = scheme.points ** 2
    u_positions = len(scheme.kernel_rows) ** 2
    vw, mr = matmul._target_shape(target.vector_bytes, target.vector_registers, p.dtype)
    nr = vw if n <= vw else 2 * vw
    # column chunks as if every position had panels of its own (stride 2's 25 in 512 KiB: 64 of 128 features);
    # wider ones (its 16 distinct panels: 128) took one chunk of 12 tiles per tile row of 14, 3% slower
    strips = max(1, min(matmul.NC_STRIPS, -(-n // nr), WINOGRAD_PANEL_BYTES // (positions * cin * nr * size)))
    nc = strips * nr
    a_ld = cin + (64 // size if (cin * size) % 4096 == 0 else 0)
    per_tile = positions * max(a_ld, nc) * size
    chunk = mr * max(1, min(2, WINOGRAD_BUFFER_BYTES // (per_tile * mr)))
    if (u_positions * cin * nc + positions * chunk * (a_ld + nc)) * size > WINOGRAD_STACK_BYTES:
        return None
    tiles_h, tiles_w = -(-oh // 2), -(-ow // 2)
    want = max(1, -(-WINOGRAD_ITEMS // (p.n_out * -(-n // nc))))
    band = -(-tiles_h // min(want, tiles_h))
    return WinogradPlan(tiles_h, tiles_w, band, chunk, vw, mr, nr, nc, a_ld, scheme)


def _winograd_tile_rows(w: WinogradPlan) -> list[int]:
    """The row counts of the microkernel tiles of every chunk of every band."""
    counts = set()
    last = w.tiles_h - (w.bands - 1) * w.band
    for band_tiles in {w.band * w.tiles_w, last * w.tiles_w}:
        for size in {min(w.chunk, band_tiles), band_tiles % w.chunk}:
            if size:
                counts.update(matmul._tile_rows(size, w.mr))
    return sorted(counts)


def _emit_winograd(region, p: ConvPlan, w: WinogradPlan, ep=None):
    ty = F32 if p.dtype == np.float32 else F64
    vec = ir.VectorType(ty, w.vw)
    align = p.dtype.itemsize
    lv, rv = p.lhs, p.rhs
    n_in = len(region.invars)
    cin, n = p.in_per_group, p.block
    oh, ow = p.out_spatial
    ih, iw = p.in_spatial
    pad_h, pad_w = p.pad_lo
    ls, rs, os_ = p.lhs_s, p.rhs_s, p.out_s
    n_chunks = -(-n // w.nc)
    items = p.n_out * w.bands * n_chunks
    tiling = SimpleNamespace(vw=w.vw, nr=w.nr)
    sc = w.scheme
    pts, span, positions = sc.points, sc.span, w.positions
    kernel_rows, rows_g = sc.kernel_rows, len(sc.kernel_rows)
    step = 2 * sc.stride  # input positions between tiles
    line = 64 // p.dtype.itemsize  # each position's block a cache line past its size: the blocks' accesses at
    u_xi = cin * w.nc + line       # one index (a transform's loads or stores) then do not all fall in one
    v_xi = w.chunk * w.a_ld + line  # set of the L1 when the size is a multiple of 4 KiB (64 x 64 floats)
    m_xi = w.chunk * w.nc + line

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        x_ptr, w_ptr = pointers[lv.source], pointers[rv.source]
        out_ptr = pointers[n_in + (0 if ep is None else ep.home)]
        kernels = {rows: matmul._microkernel(b.module, ty, tiling, rows) for rows in _winograd_tile_rows(w)}
        u_buf = b.alloca(ty, size=const64(w.kernel_positions * u_xi), name="wino_u")
        v_buf = b.alloca(ty, size=const64(positions * v_xi), name="wino_v")
        m_buf = b.alloca(ty, size=const64(positions * m_xi), name="wino_m")
        for buf in (u_buf, v_buf, m_buf):
            buf.align = 64
        lo, hi = workgroup_slice(b, items, workgroup_id, workgroup_count)

        def elem(base, offset):
            return b.gep(base, [offset], source_etype=ty)

        def at(base, offset, t):
            ptr = elem(base, offset)
            return ptr if ptr.type.is_opaque or t == ty else b.bitcast(ptr, t.as_pointer())  # the stack's are typed

        def load(base, offset, t):
            return b.load(at(base, offset, t), typ=t, align=align)

        def store(value, base, offset):
            b.store(value, at(base, offset, value.type), align=align)

        def lanes_loop(count, contiguous, fn, name):
            """fn(j, t) for j < count: whole vectors of t = vec where the elements are contiguous, then the
            rest one at a time (t = the scalar type)."""
            if contiguous and w.vw > 1:
                vectors = b.udiv(count, const64(w.vw))
                for_range(b, 0, vectors, lambda k: fn(b.mul(k, const64(w.vw)), vec), name=name + "v")
                for_range(b, b.mul(vectors, const64(w.vw)), count, lambda j: fn(j, ty), name=name)
            else:
                for_range(b, 0, count, lambda j: fn(j, ty), name=name)

        def kernel_row(point):
            """kernel_index[point] for a point known at run time."""
            row = point  # the identity, but where a row repeats an earlier one
            for k, r in enumerate(sc.kernel_index):
                if r != k:
                    row = b.select(b.icmp_unsigned("==", point, const64(k)), const64(r), row)
            return row

        def combine(coefficients, values):
            """sum of coefficient * value: additions for +-1 (the positive terms first), a common factor
            applied once ((g0 + g1 + g2) / 2), fused multiply-adds otherwise."""
            terms = [(c, v) for c, v in zip(coefficients, values) if c != 0]
            t = values[0].type
            if not terms:
                return ir.Constant(t, None) if t == vec else ir.Constant(ty, 0.0)
            scale = abs(terms[0][0])
            if any(abs(c) != scale for c, _ in terms):
                scale = 1
            terms.sort(key=lambda cv: cv[0] < 0)

            def constant(c):
                return ir.Constant(t, [float(c)] * w.vw) if t == vec else ir.Constant(ty, float(c))
            total = None
            for c, v in terms:
                c = c / scale
                if total is None:
                    total = v if c == 1 else b.fneg(v) if c == -1 else b.fmul(v, constant(c))
                elif c in (1, -1):
                    total = b.fadd(total, v) if c == 1 else b.fsub(total, v)
                else:
                    total = fmuladd(b, v, constant(c), total)
            return total if scale == 1 else b.fmul(total, constant(scale))

        def transform(matrix, values):
            return [combine(row, values) for row in matrix]

        def item(it):
            ni = b.urem(it, const64(n_chunks))
            rest = b.udiv(it, const64(n_chunks))
            band = b.urem(rest, const64(w.bands))
            batch = b.udiv(rest, const64(w.bands))
            n0 = b.mul(ni, const64(w.nc))
            n_count = matmul._min(b, b.sub(const64(n), n0), const64(w.nc))
            strips = b.udiv(b.add(n_count, const64(w.nr - 1)), const64(w.nr))
            tr0 = b.mul(band, const64(w.band))
            tr_end = matmul._min(b, b.add(tr0, const64(w.band)), const64(w.tiles_h))
            band_tiles = b.mul(b.sub(tr_end, tr0), const64(w.tiles_w))
            x_base = dot_offsets(b, [batch], ls[:1], const64(lv.offset))
            w_base = dot_offsets(b, [n0], rs[:1], const64(rv.offset))

            # U[xi][strip][ci][j] = (G g G^T)[xi] of the kernel's (ci, feature n0 + strip*NR + j); zero columns
            def u_strip(s):
                col = b.mul(s, const64(w.nr))
                cols = matmul._min(b, b.sub(n_count, col), const64(w.nr))
                src_strip = b.add(w_base, b.mul(col, const64(rs[0])))

                def channel(ci):
                    src = b.add(src_strip, b.mul(ci, const64(rs[1])))
                    dst = b.add(b.mul(s, const64(cin * w.nr)), b.mul(ci, const64(w.nr)))

                    def features(j, t):
                        at = b.add(src, b.mul(j, const64(rs[0])))
                        g = [[load(w_ptr, b.add(at, const64(a * rs[2] + c * rs[3])), t) for c in range(3)]
                             for a in range(3)]
                        gg = [transform(kernel_rows, [g[a][c] for a in range(3)]) for c in range(3)]
                        for i in range(rows_g):  # gg[c][i] = (G g)[i][c]
                            for jj, u in enumerate(transform(kernel_rows, [gg[c][i] for c in range(3)])):
                                store(u, u_buf, b.add(const64((rows_g * i + jj) * u_xi), b.add(dst, j)))

                    def padding(j):
                        for xi in range(w.kernel_positions):
                            store(ir.Constant(ty, 0.0), u_buf, b.add(const64(xi * u_xi), b.add(dst, j)))
                    lanes_loop(cols, rs[0] == 1, features, "wf")
                    for_range(b, cols, w.nr, padding, name="wz")
                for_range(b, 0, cin, channel, name="wc")
            for_range(b, 0, strips, u_strip, name="ws")

            def tile_index(local):
                return b.add(tr0, b.udiv(local, const64(w.tiles_w))), b.urem(local, const64(w.tiles_w))

            def tile_origin(local):  # its first output pixel
                tr, tc = tile_index(local)
                return b.mul(tr, const64(2)), b.mul(tc, const64(2))

            def chunk(ck):
                c0 = b.mul(ck, const64(w.chunk))
                count = matmul._min(b, b.sub(band_tiles, c0), const64(w.chunk))

                # V[xi][tile][ci] = (B^T d B)[xi] of the tile's 4x4 input patch (zeros outside the image)
                def in_tile(tile):
                    tr, tc = tile_index(b.add(c0, tile))
                    y0, x0 = b.mul(tr, const64(step)), b.mul(tc, const64(step))
                    offsets, inside = [], []
                    for r in range(span):
                        hh = b.sub(b.add(y0, const64(r)), const64(pad_h))
                        row_ok = b.and_(b.icmp_signed(">=", hh, const64(0)), b.icmp_signed("<", hh, const64(ih)))
                        for c in range(span):
                            ww = b.sub(b.add(x0, const64(c)), const64(pad_w))
                            ok = b.and_(row_ok, b.and_(b.icmp_signed(">=", ww, const64(0)),
                                                       b.icmp_signed("<", ww, const64(iw))))
                            off = b.add(x_base, b.add(b.mul(hh, const64(ls[2])), b.mul(ww, const64(ls[3]))))
                            offsets.append(b.select(ok, off, x_base))
                            inside.append(ok)
                    dst = b.mul(tile, const64(w.a_ld))

                    def channels(ci, t):
                        cs = b.mul(ci, const64(ls[1]))
                        zero = ir.Constant(t, None) if t == vec else ir.Constant(ty, 0.0)
                        d = [b.select(inside[k], load(x_ptr, b.add(offsets[k], cs), t), zero) for k in range(span * span)]
                        cols = [transform(sc.bt, [d[span * r + c] for r in range(span)]) for c in range(span)]
                        for i in range(pts):  # cols[c][i] = (B^T d)[i][c]
                            for j, v in enumerate(transform(sc.bt, [cols[c][i] for c in range(span)])):
                                store(v, v_buf, b.add(const64((pts * i + j) * v_xi), b.add(dst, ci)))
                    lanes_loop(const64(cin), ls[1] == 1, channels, "vc")
                for_range(b, 0, count, in_tile, name="vt")

                # M[xi] = V[xi] @ U[xi], one microkernel tile of rows and strip of features at a time
                def position(xi):
                    a_xi = elem(v_buf, b.mul(xi, const64(v_xi)))
                    i, j = b.udiv(xi, const64(pts)), b.urem(xi, const64(pts))
                    u_xi_at = b.add(b.mul(kernel_row(i), const64(rows_g)), kernel_row(j))
                    u_at = elem(u_buf, b.mul(u_xi_at, const64(u_xi)))
                    m_at = elem(m_buf, b.mul(xi, const64(m_xi)))

                    def m_tile(mt):
                        row = b.mul(mt, const64(w.mr))
                        rows = matmul._min(b, b.sub(count, row), const64(w.mr))
                        a_tile = elem(a_xi, b.mul(row, const64(w.a_ld)))

                        def strip(s):
                            col = b.mul(s, const64(w.nr))
                            cols = matmul._min(b, b.sub(n_count, col), const64(w.nr))
                            args = [a_tile, const64(w.a_ld), const64(1), elem(u_at, b.mul(s, const64(cin * w.nr))),
                                    const64(w.nr), elem(m_at, b.add(b.mul(row, const64(w.nc)), col)), const64(w.nc),
                                    const64(cin), ir.Constant(I1, 0), cols]
                            matmul._dispatch_rows(b, rows, kernels, args, w.mr)
                        for_range(b, 0, strips, strip, name="s")
                    for_range(b, 0, b.udiv(b.add(count, const64(w.mr - 1)), const64(w.mr)), m_tile, name="mt")
                for_range(b, 0, positions, position, name="xi")

                # Y = A^T M A into the output's 2x2 pixels (those inside it)
                def out_tile(tile):
                    y0, x0 = tile_origin(b.add(c0, tile))
                    base = b.add(dot_offsets(b, [batch, y0, x0], (os_[0], os_[2], os_[3])), n0)
                    src = b.mul(tile, const64(w.nc))
                    down = b.icmp_signed("<", b.add(y0, const64(1)), const64(oh))
                    right = b.icmp_signed("<", b.add(x0, const64(1)), const64(ow))

                    def values(j, t):
                        m = [load(m_buf, b.add(const64(xi * m_xi), b.add(src, j)), t) for xi in range(positions)]
                        rows = [transform(sc.at, [m[pts * i + c] for i in range(pts)]) for c in range(pts)]
                        return [transform(sc.at, [rows[c][r] for c in range(pts)]) for r in range(2)]  # y[r][c]

                    def pixel(r, c, j):
                        return b.add(base, b.add(const64(r * os_[2] + c * os_[3]), j))

                    def whole(j, t):
                        y = values(j, t)
                        for r in range(2):
                            for c in range(2):
                                store(y[r][c], out_ptr, pixel(r, c, j))

                    def edge(j, t):
                        y = values(j, t)
                        store(y[0][0], out_ptr, pixel(0, 0, j))
                        with b.if_then(right):
                            store(y[0][1], out_ptr, pixel(0, 1, j))
                        with b.if_then(down):
                            store(y[1][0], out_ptr, pixel(1, 0, j))
                        with b.if_then(b.and_(down, right)):
                            store(y[1][1], out_ptr, pixel(1, 1, j))
                    with b.if_else(b.and_(down, right)) as (then, otherwise):
                        with then:
                            lanes_loop(n_count, True, whole, "yj")
                        with otherwise:
                            lanes_loop(n_count, True, edge, "ye")
                for_range(b, 0, count, out_tile, name="yt")

            for_range(b, 0, b.udiv(b.add(band_tiles, const64(w.chunk - 1)), const64(w.chunk)), chunk, name="ck")
            if ep is not None:  # bias, activation, ...: on the item's finished rows
                m0 = b.mul(tr0, const64(2 * ow))
                m_end = matmul._min(b, b.mul(tr_end, const64(2 * ow)), const64(oh * ow))
                epilogues.emit(b, region, ep, pointers, (p.n_out, oh * ow, n, 0), batch, m0, m_end, n0, n_count)

        for_range(b, lo, hi, item, name="it")

    return body
