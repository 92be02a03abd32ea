"""Convolutions as implicit GEMMs over the matmul microkernel (rows or cols orientation), with lhs dilation's
phases and the kernel gradients' batch rows."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from llvmlite import ir

from . import epilogue as epilogues
from . import matmul
from .conv_plan import ConvPlan, _input_coordinate
from .loops import const64, delinearize, dot_offsets, for_range, workgroup_slice
from .types import F32, F64, I1, I64, PTR


def _epilogue_sizes(p: ConvPlan, g: GemmPlan) -> tuple[int, int, int]:
    """(batch, rows, columns) of the GEMM's output as the epilogue sees it: (batch, pixels, features) for
    the rows orientation (NHWC), (batch, features, pixels) for the cols one (NCHW)."""
    return (p.n_out, g.pixels, p.block) if g.orientation == "rows" else (p.n_out, p.block, g.pixels)



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


def _item_coordinates(b, p: ConvPlan, g: GemmPlan, it):
    """Parallel item `it`'s row chunk, feature chunk, batch element and group (row chunks vary fastest)."""
    mi = b.urem(it, const64(g.m_chunks))
    rest = b.udiv(it, const64(g.m_chunks))
    ni = b.urem(rest, const64(g.n_chunks))
    bg = b.udiv(rest, const64(g.n_chunks))
    return mi, ni, b.udiv(bg, const64(p.groups)), b.urem(bg, const64(p.groups))


def _k_block_span(b, p: ConvPlan, g: GemmPlan, kb):
    """The taps [t0, t0 + tn) and channels [c0, c0 + cn) that k block kb covers: whole taps of every
    channel when a block holds several taps, else one tap's channel block."""
    if g.taps_per_block > 1:
        t0 = b.mul(kb, const64(g.taps_per_block))
        tn = matmul._min(b, b.sub(const64(g.taps), t0), const64(g.taps_per_block))
        return t0, tn, const64(0), const64(p.in_per_group)
    c0 = b.mul(b.urem(kb, const64(g.cblocks)), const64(g.channel_block))
    cn = matmul._min(b, b.sub(const64(p.in_per_group), c0), const64(g.channel_block))
    return b.udiv(kb, const64(g.cblocks)), const64(1), c0, cn


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
            mi, ni, batch, grp = _item_coordinates(b, p, g, it)
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
                t0, tn, c0, cn = _k_block_span(b, p, g, kb)
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
            mi, ni, batch, grp = _item_coordinates(b, p, g, it)
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
                t0, tn, c0, cn = _k_block_span(b, p, g, kb)

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

