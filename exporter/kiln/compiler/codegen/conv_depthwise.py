"""Depthwise convolutions (one channel per group): NHWC vectorized along the channels, NCHW along a channel's rows."""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from . import matmul
from .conv_gemm import _max
from .conv_plan import ConvPlan, _input_coordinate
from .intrinsics import fmuladd
from .loops import const64, delinearize, dot_offsets, for_range, guarded, workgroup_slice
from .types import F32, F64


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
                            guarded(b, valid, accumulate)
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
                    guarded(b, valid, run)
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

