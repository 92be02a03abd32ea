"""Winograd convolutions (3x3, stride 1 or 2, NHWC) over the matmul microkernel."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from llvmlite import ir

from . import epilogue as epilogues
from . import matmul
from .conv_plan import ConvPlan
from .intrinsics import fmuladd
from .loops import const64, dot_offsets, for_range, workgroup_slice
from .types import F32, F64, I1


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
    tiles_h: int          # tile rows (ceil(out height / outputs))
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

    @property
    def outputs(self) -> int:
        return self.scheme.outputs


@dataclass(frozen=True)
class WinogradScheme:
    """One spatial dim's transforms (the 2-d ones are their Kronecker products): a tile's `outputs` outputs
    from `span` inputs (starting outputs * stride apart) with `points` products: d -> B^T d (points x span),
    the kernel's 3 taps g -> G g (points x 3), the products m -> A^T m (outputs x points)."""
    stride: int
    span: int
    bt: tuple
    g: tuple
    at: tuple

    @property
    def points(self) -> int:
        return len(self.bt)

    @property
    def outputs(self) -> int:
        return len(self.at)

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
# F(4, 3): 6 products for 4 outputs (2-d: 36 for 16, 2.25 per output instead of F(2, 3)'s 4), the Toom-Cook
# points 0, 1, -1, 1/2, -2 and infinity: f32 results within 2.4e-6 (64 channels) and 5.3e-6 (256) of the
# output's scale, where 0, +-1, +-2 (Lavin's) gave 6.8e-6 and 1.2e-5 (float64 direct sums, random data)
WINOGRAD_F43 = WinogradScheme(1, 6, bt=((1, -1.5, -2, 1.5, 1, 0), (0, -1, 0.5, 2.5, 1, 0), (0, 1, -2.5, 0.5, 1, 0),
                                        (0, -2, -1, 2, 1, 0), (0, 0.5, -1, -0.5, 1, 0), (0, 1, -1.5, -2, 1.5, 1)),
                              g=((1, 0, 0), (1 / 3, 1 / 3, 1 / 3), (-1 / 3, 1 / 3, -1 / 3), (-16 / 15, -8 / 15, -4 / 15),
                                 (1 / 15, -2 / 15, 4 / 15), (0, 0, 1)),
                              at=((1, 1, 1, 1, 1, 0), (0, 1, -1, 0.5, -2, 0), (0, 1, 1, 0.25, 4, 0),
                                  (0, 1, -1, 0.125, -8, 1)))
WINOGRAD_F43_DTYPES = (np.float32,)  # f64 keeps F(2x2, 3x3), the more accurate
WINOGRAD_F43_MIN_SIZE = 8             # output rows and columns below which F(2x2, 3x3) is kept


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
    for scheme in _schemes(p):
        plan = _scheme_plan(p, target, scheme)
        if plan is not None:
            return plan
    return None


def _schemes(p: ConvPlan) -> list[WinogradScheme]:
    """The schemes to try, best first: F(4x4, 3x3) for f32 at stride 1 (see WINOGRAD_F43_DTYPES), then F(2x2, 3x3);
    the polyphase scheme at stride 2."""
    if p.strides[0] == 2:
        return [WINOGRAD_STRIDE2]
    oh, ow = p.out_spatial
    if p.dtype in WINOGRAD_F43_DTYPES and min(oh, ow) >= WINOGRAD_F43_MIN_SIZE:
        return [WINOGRAD_F43, WINOGRAD_F23]
    return [WINOGRAD_F23]


def _scheme_plan(p: ConvPlan, target, scheme: WinogradScheme) -> WinogradPlan | None:
    """The plan with `scheme`, None where its stack buffers do not fit in WINOGRAD_STACK_BYTES."""
    oh, ow = p.out_spatial
    cin, n = p.in_per_group, p.block
    size = p.dtype.itemsize
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
    tiles_h, tiles_w = -(-oh // scheme.outputs), -(-ow // scheme.outputs)
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
    whole_features = n % w.vw == 0  # then every column chunk's feature count (nc, or n's rest) is whole vectors
    pts, span, positions = sc.points, sc.span, w.positions
    kernel_rows, rows_g = sc.kernel_rows, len(sc.kernel_rows)
    mo = sc.outputs  # output pixels per tile along each dim
    step = mo * sc.stride  # input positions between tiles
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

        def lanes_loop(count, contiguous, fn, name, whole_vectors=False):
            """fn(j, t) for j < count: whole vectors of t = vec where the elements are contiguous, then the
            rest one at a time (t = the scalar type; no such loop where count is known to be whole vectors:
            the transforms are long straight-line code, each copy adds to the compile time)."""
            if contiguous and w.vw > 1:
                vectors = b.udiv(count, const64(w.vw))
                for_range(b, 0, vectors, lambda k: fn(b.mul(k, const64(w.vw)), vec), name=name + "v")
                if not whole_vectors:
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
                    lanes_loop(cols, rs[0] == 1, features, "wf", whole_features)
                    for_range(b, cols, w.nr, padding, name="wz")
                for_range(b, 0, cin, channel, name="wc")
            for_range(b, 0, strips, u_strip, name="ws")

            def tile_index(local):
                return b.add(tr0, b.udiv(local, const64(w.tiles_w))), b.urem(local, const64(w.tiles_w))

            def tile_origin(local):  # its first output pixel
                tr, tc = tile_index(local)
                return b.mul(tr, const64(mo)), b.mul(tc, const64(mo))

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
                    lanes_loop(const64(cin), ls[1] == 1, channels, "vc", cin % w.vw == 0)
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

                # Y = A^T M A into the output's mo x mo pixels (those inside it)
                def out_tile(tile):
                    y0, x0 = tile_origin(b.add(c0, tile))
                    base = b.add(dot_offsets(b, [batch, y0, x0], (os_[0], os_[2], os_[3])), n0)
                    src = b.mul(tile, const64(w.nc))
                    # down[r]: output row y0 + r inside; right[c]: column x0 + c
                    down = [b.icmp_signed("<", b.add(y0, const64(r)), const64(oh)) for r in range(mo)]
                    right = [b.icmp_signed("<", b.add(x0, const64(c)), const64(ow)) for c in range(mo)]

                    def values(j, t):
                        m = [load(m_buf, b.add(const64(xi * m_xi), b.add(src, j)), t) for xi in range(positions)]
                        rows = [transform(sc.at, [m[pts * i + c] for i in range(pts)]) for c in range(pts)]
                        return [transform(sc.at, [rows[c][r] for c in range(pts)]) for r in range(mo)]  # y[r][c]

                    def pixel(r, c, j):
                        return b.add(base, b.add(const64(r * os_[2] + c * os_[3]), j))

                    inside = b.and_(down[mo - 1], right[mo - 1])

                    def features(j, t):  # one copy of the transform: the tiles past the edge branch at the stores
                        y = values(j, t)
                        with b.if_else(inside) as (then, otherwise):
                            with then:
                                for r in range(mo):
                                    for c in range(mo):
                                        store(y[r][c], out_ptr, pixel(r, c, j))
                            with otherwise:
                                for r in range(mo):
                                    for c in range(mo):
                                        if r == 0 and c == 0:  # the tile's first pixel is always inside
                                            store(y[r][c], out_ptr, pixel(r, c, j))
                                            continue
                                        with b.if_then(b.and_(down[r], right[c])):
                                            store(y[r][c], out_ptr, pixel(r, c, j))
                    lanes_loop(n_count, True, features, "yj", whole_features)
                for_range(b, 0, count, out_tile, name="yt")

            for_range(b, 0, b.udiv(b.add(band_tiles, const64(w.chunk - 1)), const64(w.chunk)), chunk, name="ck")
            if ep is not None:  # bias, activation, ...: on the item's finished rows
                m0 = b.mul(tr0, const64(mo * ow))
                m_end = matmul._min(b, b.mul(tr_end, const64(mo * ow)), const64(oh * ow))
                epilogues.emit(b, region, ep, pointers, (p.n_out, oh * ow, n, 0), batch, m0, m_end, n0, n_count)

        for_range(b, lo, hi, item, name="it")

    return body

