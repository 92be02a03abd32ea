"""Kernels of the native triangular factorizations (kiln.lax._linalg_native): Cholesky, triangular solve
and LU with partial pivoting of a batch of real float32/float64 matrices. The `linalg` kernel strategy's
code: plan(region, target) -> (emit, parallel items, work, detail).

One dispatch per call; the workgroups split the batch of matrices (parallel items = batch size), and each
matrix is factored by one workgroup, in its output buffer (a triangular solve's items are also shares of
one matrix: rows of X, or groups of its columns). A large Cholesky is split across dispatches by
kiln.lax._linalg_triangular._cholesky_split, whose trailing update (syrk_native: _emit_syrk) and joined
factor (cholesky_join_native: _emit_cholesky_join) are kernels here, split by rows:

- operands are read through their strided views (region_views: a transposed or sliced operand costs no
  copy); the first step copies the operand into the output buffer (Cholesky: its lower triangle,
  transposed into the upper one), every later step works on that contiguous row-major buffer;
- the inner loops run over contiguous rows in explicit vectors of the target's width (llvm.fmuladd on
  <W x float>), the tail of a row in one masked vector (llvm.masked.load/store);
- Cholesky and LU are blocked right-looking factorizations (LAPACK's potrf/getrf structure) with panels of
  PANEL rows/columns: the panel is factored with rank-1 updates, then the trailing matrix takes one rank-PANEL
  update per row, each output vector loaded and stored once for PANEL fused multiply-adds;
- from n (Cholesky) or min(m, n) (LU) of WIDE_FROM on, where the trailing matrix leaves the caches, the
  panels are grouped in blocks of BLOCK: inside a block the rank-PANEL updates stay left of the block's end
  and each panel's rows are first brought up to date right of it from the block's earlier rows (a
  left-looking product); after the block, the rest of the matrix takes one rank-BLOCK update, shaped as a
  matrix product (SYRK for Cholesky's upper triangle, GEMM for LU) in register tiles of matmul.py's
  microkernel shape (_product_update), so the trailing matrix is streamed once per BLOCK, not per PANEL.

Cholesky works on U = L^T (A = U^T U), whose rows are L's columns: a row of U is finished by one scaling
and its trailing update is a contiguous row operation; U is transposed into L at the end. A diagonal entry
that is not positive (or NaN) fails the matrix: its factor is all NaN, as JAX's. LU chooses the first
largest |entry| of the column as pivot (NaN first, as argmax), swaps whole rows, leaves a zero pivot's
column unscaled (divides by 1), as the composite's implementation and LAPACK's getrf do. The triangular
solve reads only a's triangle (not its diagonal with unit_diagonal) and divides by the diagonal as it is.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..layout import region_views
from .intrinsics import call_unary, fmuladd
from .loops import const64, delinearize, for_range, local_var, workgroup_slice
from .types import I1, I32, I64, PTR
from .vector_code import VectorCode, lanes_for

PANEL = 8
"""Rows (Cholesky) or columns (LU) per panel of the blocked factorizations: the rank of the trailing update."""
BLOCK = 64
"""Rows (Cholesky) or columns (LU) per block of the large-matrix path: the depth of its matrix-product
shaped update of the rest of the matrix (_product_update)."""
WIDE_FROM = 384
"""The large-matrix path serves Cholesky of n >= WIDE_FROM and LU of min(m, n) >= WIDE_FROM; smaller matrices
take the rank-PANEL updates of the whole trailing matrix (they fit in the caches)."""


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


class _Code(VectorCode):
    """VectorCode with the factorizations' row operations."""

    def update_row(self, base, dst, sources, coefs, count):
        """base[dst + c] -= sum_t coefs[t] * base[sources[t] + c] for c in [0, count): one load and store of
        the destination per len(coefs) fused multiply-adds."""
        b = self.b
        vnegs = [self.splat(b.fneg(c)) for c in coefs]

        def body(c, mask, rest):
            acc = self.vload(base, b.add(dst, c), mask)
            for s, n in zip(sources, vnegs):
                acc = fmuladd(b, n, self.vload(base, b.add(s, c), mask), acc)
            self.vstore(base, b.add(dst, c), acc, mask)

        self.row_loop(count, body)

    def scale_row(self, base, dst, divisor, count):
        """base[dst + c] /= divisor for c in [0, count)."""
        b = self.b
        vdiv = self.splat(divisor)

        def body(c, mask, rest):
            at = b.add(dst, c)
            self.vstore(base, at, b.fdiv(self.vload(base, at, mask), vdiv), mask)

        self.row_loop(count, body)

    def swap_rows(self, base, p, q, count):
        """Exchanges base[p + c] and base[q + c] for c in [0, count)."""
        b = self.b

        def body(c, mask, rest):
            x, y = self.vload(base, b.add(p, c), mask), self.vload(base, b.add(q, c), mask)
            self.vstore(base, b.add(p, c), y, mask)
            self.vstore(base, b.add(q, c), x, mask)

        self.row_loop(count, body)


class _Operand:
    """A batch of matrices read through its strided view: element (i, j) of batch item `index`."""

    def __init__(self, view, pointers, nbatch: int):
        self.view = view
        self.ptr = pointers[view.source]
        self.batch_strides = view.strides[:nbatch]
        self.row_stride, self.col_stride = view.strides[nbatch:]

    def base(self, b, batch_index):
        total = const64(self.view.offset)
        for i, s in zip(batch_index, self.batch_strides):
            if s:
                total = b.add(total, b.mul(i, const64(s)))
        return total

    def offset(self, b, base, i, j, transposed: bool = False):
        rs, cs = (self.col_stride, self.row_stride) if transposed else (self.row_stride, self.col_stride)
        return b.add(base, b.add(_times(b, i, rs), _times(b, j, cs)))


def _times(b, i, stride: int):
    if stride == 1:
        return i
    if stride == 0:
        return const64(0)
    return b.mul(i, const64(stride))


def _matrix_loop(b, batch_shape, wid, wcount, body):
    """body(item, batch_index) for this workgroup's share of the batch of matrices."""
    lo, hi = workgroup_slice(b, _prod(batch_shape), wid, wcount)
    for_range(b, lo, hi, lambda item: body(item, delinearize(b, item, batch_shape) if batch_shape else []),
              name="item")


def _if(b, cond, then):
    with b.if_then(cond):
        then()


def _blocked(b, count: int, factor_panel, update, update_tail: bool, first=None):
    """The blocked right-looking driver of Cholesky and LU over `count` rows/columns (from `first`, an i64,
    or 0): for each panel of PANEL starting at k (i64), factor_panel(k, PANEL) then update(k, PANEL) (the
    trailing matrix's rank-PANEL update); then the tail of count % PANEL: factor_panel(k, tail), and
    update(k, tail) when update_tail (a trailing part remains past it)."""
    panels, tail = divmod(count, PANEL)

    def start(k):
        return k if first is None else b.add(first, k)

    def panel(p):
        k = start(b.mul(p, const64(PANEL)))
        factor_panel(k, PANEL)
        update(k, PANEL)

    for_range(b, 0, panels, panel, name="panel")
    if tail:
        k = start(const64(panels * PANEL))
        factor_panel(k, tail)
        if update_tail:
            update(k, tail)


def _wide_blocks(b, count: int, factor_panel, update, product, update_tail: bool):
    """The large-matrix driver: blocks of BLOCK rows/columns from k0 to block_end, each factored by _blocked
    with factor_panel(k, width, k0, block_end) and update(k, width, k0, block_end): the panel's own rows are
    brought up to date right of the block from the block's earlier rows (left-looking, a product of depth
    k - k0) and the rank-PANEL updates stay left of block_end; then the rest of the matrix is updated by
    product(k0, block_end) (rank BLOCK, matrix-product shaped). The last, partial block is _blocked's
    whole-matrix form (factor_panel(k, width), update(k, width))."""
    blocks, last = divmod(count, BLOCK)

    def block(q):
        k0 = b.mul(q, const64(BLOCK))
        end = b.add(k0, const64(BLOCK))
        _blocked(b, BLOCK, lambda k, width: factor_panel(k, width, k0, end),
                 lambda k, width: update(k, width, k0, end), False, first=k0)
        product(k0, end)

    for_range(b, 0, blocks, block, name="block")
    if last:
        _blocked(b, last, factor_panel, update, update_tail, first=const64(blocks * BLOCK))


def _stack_array(b, ty, count: int, name: str):
    """A pointer to `count` elements of ty on the stack, allocated once at the top of the function."""
    entry = b.function.entry_basic_block
    here = b.block
    with b.goto_block(entry):
        if entry.instructions:
            b.position_before(entry.instructions[0])
        slot = b.alloca(ty, size=const64(count), name=name)
        slot.align = 64
        slot = b.inttoptr(b.ptrtoint(slot, I64), PTR)  # an untyped pointer, as the kernel's operands (folded away)
    if b.block is not here:
        b.position_at_end(here)
    return slot


def _tile_shapes(registers: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(rows, vectors) of the register tiles of the product updates: of the rest of the matrix, matmul.py's
    microkernel shape (6 or 12 rows of two vectors: 12 or 24 accumulators of the 16 or 32 vector
    registers); of a panel's PANEL rows, 4 or 8 rows of two vectors."""
    return ((6, 2), (4, 2)) if registers <= 16 else ((12, 2), (PANEL, 2))


def _product_update(code: "_Code", out, depth, rows: tuple, cols: tuple, a_at, b_at, c_at, tile: tuple,
                    max_depth: int = BLOCK, pack_a: bool = False, source=None):
    """C[i, j] -= sum_{t < depth} A(i, t) B(t, j) (depth: int or i64) for i in [rows[0], rows[1]) and j in
    [cols[0], cols[1])
    (cols[0] None: the upper triangle, j from i), the offsets of A(i, t), B(t, j) and C[i, j] given by a_at,
    b_at and c_at (i64 values). By register tiles of tile = (mr rows, nv vectors): each step t broadcasts mr
    elements of A, loads nv vectors of B and adds mr * nv fused multiply-adds into accumulators that stay in
    registers over the whole depth; C is loaded and stored once. A row block's tiles walk along its columns
    (its A elements stay in L1; B's rows come from L2); the triangle's diagonal tile and the last columns' tile
    store through lane masks. pack_a: A's elements are first copied t-major to the stack (depth <= max_depth),
    where each A(i, t) is on its own row i (LU's L21): a step's broadcasts then come from one cache line and
    the tiles' loads touch few pages (else the mr rows of A and depth rows of B overflow the L1 TLB).
    source: the buffer A and B are read from (else out)."""
    b, lanes = code.b, code.lanes
    source = out if source is None else source
    mr, nv = tile
    width = nv * lanes
    row_lo, row_hi = rows
    col_lo, col_hi = cols
    zero = ir.Constant(code.vec, None)

    def masks_of(count):
        """The nv vectors' lane masks of a tile whose first `count` columns (i64, in [0, width]) exist."""
        masks = []
        for v in range(nv):
            left = b.sub(count, const64(v * lanes))
            left = b.select(b.icmp_signed("<", left, const64(0)), const64(0), left)
            left = b.select(b.icmp_signed(">", left, const64(lanes)), const64(lanes), left)
            masks.append(code.mask(left))
        return masks

    packed = _stack_array(b, code.ty, max_depth * mr, "apack") if pack_a else None
    depth_v = const64(depth) if isinstance(depth, int) else depth

    def pack(i0, count: int):
        """The row block's A elements, t-major (packed[t * count + r] = A(i0 + r, t)): each step's broadcasts
        come from one cache line, and the tiles' loads touch few pages."""
        for r in range(count):
            i = b.add(i0, const64(r))
            for_range(b, 0, depth_v, lambda t: code.store(packed, b.add(b.mul(t, const64(count)), const64(r)),
                                                          code.load(source, a_at(i, t))), name="pk")

    def tile_at(i0, count: int, j0, masks, diagonal: bool):
        accs = [[code.var(zero, "acc") for _ in range(nv)] for _ in range(count)]

        def step(t):
            bs = [code.vload(source, b_at(t, b.add(j0, const64(v * lanes))), None if masks is None else masks[v])
                  for v in range(nv)]
            for r in range(count):
                if packed is None:
                    a = code.splat(code.load(source, a_at(b.add(i0, const64(r)), t)))
                else:
                    a = code.splat(code.load(packed, b.add(b.mul(t, const64(count)), const64(r))))
                for v in range(nv):
                    b.store(fmuladd(b, a, bs[v], b.load(accs[r][v])), accs[r][v])

        for_range(b, 0, depth_v, step, name="kt")
        for r in range(count):
            for v in range(nv):
                mask = None if masks is None else masks[v]
                if diagonal and v * lanes < r:  # the lanes left of row r's diagonal are not stored
                    keep = ir.Constant(ir.VectorType(I1, lanes), [int(v * lanes + l >= r) for l in range(lanes)])
                    mask = keep if mask is None else b.and_(mask, keep)
                at = c_at(b.add(i0, const64(r)), b.add(j0, const64(v * lanes)))
                value = b.fsub(code.vload(out, at, mask), b.load(accs[r][v]))
                code.vstore(out, at, value, mask)

    def row_block(i0, count: int):
        if packed is not None:
            pack(i0, count)
        start = i0 if col_lo is None else col_lo
        if col_lo is None:  # the diagonal tile, then the columns right of it
            span = b.sub(col_hi, start)
            first = b.select(b.icmp_signed("<", span, const64(width)), span, const64(width))
            tile_at(i0, count, start, masks_of(first), True)
            start = b.add(start, const64(width))
        span = b.sub(col_hi, start)
        span = b.select(b.icmp_signed("<", span, const64(0)), const64(0), span)
        full = b.udiv(span, const64(width))
        for_range(b, 0, full, lambda q: tile_at(i0, count, b.add(start, b.mul(q, const64(width))), None, False),
                  name="jt")
        rest = b.sub(span, b.mul(full, const64(width)))
        _if(b, b.icmp_unsigned("!=", rest, const64(0)),
            lambda: tile_at(i0, count, b.add(start, b.mul(full, const64(width))), masks_of(rest), False))

    blocks = b.udiv(b.sub(row_hi, row_lo), const64(mr))
    for_range(b, 0, blocks, lambda q: row_block(b.add(row_lo, b.mul(q, const64(mr))), mr), name="it")
    for_range(b, b.add(row_lo, b.mul(blocks, const64(mr))), row_hi, lambda i: row_block(i, 1), name="ir")


# --------------------------------------------------------------------------- Cholesky

def _emit_cholesky(region, target):
    eqn = region.eqns[-1]
    x = eqn.invars[0]
    shape = x.aval.shape
    batch, n = shape[:-2], shape[-1]
    views = region_views(region)
    nb = len(batch)
    items = _prod(batch) if n else 0

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        code = _Code(b, x.aval.dtype, lanes_for(target.vector_bytes, x.aval.dtype))
        tile, panel_tile = _tile_shapes(target.vector_registers)
        source = _Operand(views[x.id], pointers, nb)
        out = pointers[len(region.invars)]
        failed_v = local_var(b, I1, ir.Constant(I1, 0), "failed")
        nn = const64(n)

        def matrix(item, batch_index):
            w = b.mul(item, const64(n * n))
            src = source.base(b, batch_index)
            b.store(ir.Constant(I1, 0), failed_v)

            def at(i, j):
                return b.add(w, b.add(b.mul(i, nn), j))

            # W (upper triangle) = the operand's lower triangle transposed, by vw x vw tiles; zeros below
            _copy_transposed_lower(code, source, src, out, at, n)
            def factor_panel(k, width: int, k0=None, block_end=None):
                if block_end is not None:  # the panel's rows right of the block: U12 -= U01^T U02 (rows k0 .. k)
                    _if(b, b.not_(b.load(failed_v)), lambda: _product_update(
                        code, out, b.sub(k, k0), (k, b.add(k, const64(width))), (block_end, nn),
                        lambda i, t: at(b.add(k0, t), i), lambda t, j: at(b.add(k0, t), j), at, panel_tile))

                def row(r):
                    def step():
                        d = code.load(out, at(r, r))
                        ok = b.fcmp_ordered(">", d, code.const(0))
                        with b.if_else(ok) as (then, otherwise):
                            with then:
                                s = call_unary(b, "sqrt", d)
                                code.store(out, at(r, r), s)
                                after = b.add(r, const64(1))
                                code.scale_row(out, at(r, after), s, b.sub(nn, after))
                                end = b.add(k, const64(width))

                                def below(r2):
                                    code.update_row(out, at(r2, r2), [at(r, r2)], [code.load(out, at(r, r2))],
                                                    b.sub(nn, r2))

                                for_range(b, after, end, below, name="pr")
                            with otherwise:
                                b.store(ir.Constant(I1, 1), failed_v)

                    _if(b, b.not_(b.load(failed_v)), step)

                for_range(b, k, b.add(k, const64(width)), row, name="r")

            def trailing(k, width: int, k0=None, end=None):
                """Rows k + width .. n take the panel's rank-width update; within a block (end), rows .. end
                and only left of end."""
                start = b.add(k, const64(width))

                def row(i):
                    rows = [b.add(k, const64(t)) for t in range(width)]
                    code.update_row(out, at(i, i), [at(r, i) for r in rows], [code.load(out, at(r, i)) for r in rows],
                                    b.sub(nn if end is None else end, i))

                _if(b, b.not_(b.load(failed_v)), lambda: for_range(b, start, nn if end is None else end, row,
                                                                    name="tr"))

            def product(k0, end):
                """Rows end .. n: U22 -= U12^T U12 (upper triangle), U12 the block's rows right of it."""
                _if(b, b.not_(b.load(failed_v)), lambda: _product_update(
                    code, out, BLOCK, (end, nn), (None, nn), lambda i, t: at(b.add(k0, t), i),
                    lambda t, j: at(b.add(k0, t), j), at, tile))

            if n >= WIDE_FROM:
                _wide_blocks(b, n, factor_panel, trailing, product, update_tail=False)
            else:
                _blocked(b, n, factor_panel, trailing, update_tail=False)

            with b.if_else(b.load(failed_v)) as (then, otherwise):
                with then:
                    nan = code.splat(code.const(float("nan")))
                    code.row_loop(const64(n * n), lambda c, mask, rest: code.vstore(out, b.add(w, c), nan, mask))
                with otherwise:
                    _transpose_upper_to_lower(code, out, at, n)

        _matrix_loop(b, batch, wid, wcount, matrix)

    work = _prod(batch) * max(n, 1) ** 3 // 3 + _prod(shape)
    return body, items, work, f"panel {PANEL}"


def _copy_row(code: _Code, source: "_Operand", base, i, count: int, out, dst, first=None):
    """out[dst : dst + count] = row i of the operand from column `first` (i64, or 0) (vectors; gathered where
    its columns are strided)."""
    b = code.b

    def body(c, mask, rest):
        col = c if first is None else b.add(first, c)
        value = code.gather(source.ptr, source.offset(b, base, i, col), source.col_stride, mask, rest)
        code.vstore(out, b.add(dst, c), value, mask)

    code.row_loop(const64(count), body, name="cp")


def _tiles(code: _Code, n: int, body, upper_only: bool = True):
    """body(I, J) (tile indices, i64) for the vw x vw tiles of an n x n matrix on and above the diagonal."""
    b = code.b
    count = -(-n // code.lanes)
    for_range(b, 0, count, lambda i: for_range(b, i if upper_only else 0, count, lambda j: body(i, j), name="tj"),
              name="ti")


def _copy_transposed_lower(code: _Code, source: "_Operand", src, out, at, n: int):
    """out (n x n at `at`) = the operand's lower triangle transposed (its upper triangle), zeros below the
    diagonal: the operand's tiles below the diagonal loaded by rows, transposed in registers, stored by rows."""
    b, v = code.b, code.lanes
    zero = ir.Constant(code.vec, None)

    def tile(ti, tj):
        i0, j0 = b.mul(ti, const64(v)), b.mul(tj, const64(v))
        count_i, mask_i = code.tile_masks(n, i0)
        _, mask_j = code.tile_masks(n, j0)
        rows = []
        for r in range(v):  # operand rows j0 + r, columns i0 ..: clamped in bounds, unused lanes never stored
            row = b.add(j0, const64(r))
            row = b.select(b.icmp_signed("<", row, const64(n)), row, const64(n - 1))
            rows.append(code.gather(source.ptr, source.offset(b, src, row, i0), source.col_stride, mask_i, count_i))
        diagonal = b.icmp_unsigned("==", ti, tj)
        for c, value in enumerate(code.transpose(rows)):
            row = b.add(i0, const64(c))
            keep = ir.Constant(ir.VectorType(I1, v), [int(l >= c) for l in range(v)])
            keep = b.or_(keep, code.lanes_if(ir.Constant(ir.VectorType(I1, v), [1] * v), b.not_(diagonal)))
            value = b.select(keep, value, zero)
            code.vstore(out, at(row, j0), value, code.lanes_if(mask_j, b.icmp_signed("<", row, const64(n))))

    _tiles(code, n, tile)

    def zero_row(i):
        code.row_loop(i, lambda c, mask, rest: code.vstore(out, at(i, c), zero, mask), name="zr")

    for_range(b, 1, const64(n), zero_row, name="zi")


def _transpose_upper_to_lower(code: _Code, out, at, n: int):
    """out (n x n, zero below the diagonal) in place := its transpose: each tile above the diagonal moves to
    its mirror (transposed in registers) and is zeroed, each diagonal tile is transposed in place."""
    b, v = code.b, code.lanes
    zero = ir.Constant(code.vec, None)

    def tile(ti, tj):
        i0, j0 = b.mul(ti, const64(v)), b.mul(tj, const64(v))
        _, mask_i = code.tile_masks(n, i0)
        _, mask_j = code.tile_masks(n, j0)
        off_diagonal = b.icmp_unsigned("!=", ti, tj)
        rows = []
        for r in range(v):
            row = b.add(i0, const64(r))
            inside = code.lanes_if(mask_j, b.icmp_signed("<", row, const64(n)))
            rows.append(code.vload(out, at(row, j0), inside))
            code.vstore(out, at(row, j0), zero, code.lanes_if(inside, off_diagonal))
        for c, value in enumerate(code.transpose(rows)):
            row = b.add(j0, const64(c))
            code.vstore(out, at(row, i0), value, code.lanes_if(mask_i, b.icmp_signed("<", row, const64(n))))

    _tiles(code, n, tile)


# --------------------------------------------------------------------------- SYRK

def _emit_syrk(region, target):
    """c - x^T x (x: k x s) on and below the diagonal, by row blocks of the register tile's rows: the
    item's blocks' rows of c are copied whole into the output, then, BLOCK rows of x (a depth chunk, in L2)
    at a time, each block's columns up to its last row take the chunk's product (_product_update: A(i, t) =
    x[t, i], B(t, j) = x[t, j]). Row block q is paired with block count - 1 - q in one parallel item, so
    the items' work is even (a triangle's rows grow)."""
    eqn = region.eqns[-1]
    c, x = eqn.invars
    shape = c.aval.shape
    batch, s = shape[:-2], shape[-1]
    k = x.aval.shape[-2]
    views = region_views(region)
    nb = len(batch)
    if views[x.id].strides[-1] != 1:
        raise ValueError("syrk_native reads x's rows as vectors: its last axis must be contiguous")
    tile, _ = _tile_shapes(target.vector_registers)
    mr = tile[0]
    blocks = -(-s // mr)
    pairs = -(-blocks // 2)
    items = _prod(batch) * pairs if s else 0

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        code = _Code(b, c.aval.dtype, lanes_for(target.vector_bytes, c.aval.dtype))
        given, rows_of = _Operand(views[c.id], pointers, nb), _Operand(views[x.id], pointers, nb)
        out = pointers[len(region.invars)]
        ns = const64(s)

        def blocks_of(q, each):
            """each(at, xat, i0, end) for the two row blocks of parallel item q."""
            matrix = b.udiv(q, const64(pairs))
            pair = b.urem(q, const64(pairs))
            index = delinearize(b, matrix, batch) if batch else []
            w = b.mul(matrix, const64(s * s))
            cbase, xbase = given.base(b, index), rows_of.base(b, index)

            def at(i, j):
                return b.add(w, b.add(b.mul(i, ns), j))

            def xat(t, j):
                return rows_of.offset(b, xbase, t, j)

            def block(number):
                i0 = b.mul(number, const64(mr))
                end = b.add(i0, const64(mr))
                each(cbase, at, xat, i0, b.select(b.icmp_signed("<", end, ns), end, ns))

            block(pair)
            other = b.sub(const64(blocks - 1), pair)
            _if(b, b.icmp_unsigned("!=", other, pair), lambda: block(other))

        lo, hi = workgroup_slice(b, items, wid, wcount)

        def copy(cbase, at, xat, i0, end):
            for_range(b, i0, end, lambda i: _copy_row(code, given, cbase, i, s, out, at(i, const64(0))), name="cr")

        for_range(b, lo, hi, lambda q: blocks_of(q, copy), name="item")

        def update(t0, depth):
            def each(cbase, at, xat, i0, end):
                _product_update(code, out, depth, (i0, end), (const64(0), end), lambda i, t: xat(b.add(t0, t), i),
                                lambda t, j: xat(b.add(t0, t), j), at, tile, source=rows_of.ptr)

            for_range(b, lo, hi, lambda q: blocks_of(q, each), name="item")

        chunks, last = divmod(k, BLOCK)  # depth BLOCK at a time: x's rows of a chunk stay in L2 over the blocks
        for_range(b, 0, chunks, lambda c: update(b.mul(c, const64(BLOCK)), BLOCK), name="chunk")
        if last:
            update(const64(chunks * BLOCK), last)

    work = _prod(batch) * (s * s * max(k, 1) // 2 + s * s)
    return body, items, work, f"rows {mr}"


def _emit_cholesky_join(region, target):
    """The split Cholesky's factor from its pieces (L11 and L21^T of each block), by groups of `lanes` rows
    (JOIN_ROWS rows a parallel item): in block k's columns a group's rows are zeros above the block, rows of
    L11 in it, and below it lanes x lanes tiles of L21^T (its rows loaded as vectors) transposed in
    registers; every row NaN when the last block's last diagonal entry is. The blocks but the last are
    SPLIT_BLOCK wide, a multiple of the lanes, so a group never straddles a block's edge."""
    eqn = region.eqns[-1]
    pieces = eqn.invars
    dtype = eqn.outvars[0].aval.dtype
    shape = eqn.outvars[0].aval.shape
    batch, n = shape[:-2], shape[-1]
    views = region_views(region)
    nb = len(batch)
    v = lanes_for(target.vector_bytes, dtype)
    assert JOIN_ROWS % v == 0 and all(p.aval.shape[-1] % v == 0 for p in pieces[0:-1:2])
    parts = -(-n // JOIN_ROWS)
    items = _prod(batch) * parts if n else 0

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        code = _Code(b, dtype, v)
        ops = [_Operand(views[p.id], pointers, nb) for p in pieces]
        out = pointers[len(region.invars)]
        nn = const64(n)
        zero, nan = ir.Constant(code.vec, None), code.splat(code.const(float("nan")))

        def item(q):
            matrix = b.udiv(q, const64(parts))
            first = b.mul(b.urem(q, const64(parts)), const64(JOIN_ROWS))
            index = delinearize(b, matrix, batch) if batch else []
            bases = [op.base(b, index) for op in ops]
            w = b.mul(matrix, const64(n * n))
            last = pieces[-1].aval.shape[-1] - 1
            corner = code.load(ops[-1].ptr, ops[-1].offset(b, bases[-1], const64(last), const64(last)))
            failed = b.fcmp_unordered("uno", corner, corner)

            def at(i, j):
                return b.add(w, b.add(b.mul(i, nn), j))

            def group(g):
                r0 = b.add(first, b.mul(g, const64(v)))
                left = b.sub(nn, r0)
                count = b.select(b.icmp_signed("<", left, const64(v)), left, const64(v))

                def each_row(body):
                    for_range(b, r0, b.add(r0, count), body, name="r")

                def fill(value, start, size):
                    each_row(lambda i: code.row_loop(const64(size), lambda c, mask, rest: code.vstore(
                        out, at(i, b.add(const64(start), c)), value, mask), name="f"))

                def blocks():
                    start = 0
                    for k in range(0, len(pieces), 2):
                        size = pieces[k].aval.shape[-1]

                        def inside(op=ops[k], base=bases[k], start=start, size=size):
                            def row(i):
                                r = b.sub(i, const64(start))
                                code.row_loop(const64(size), lambda c, mask, rest: code.vstore(
                                    out, at(i, b.add(const64(start), c)),
                                    code.gather(op.ptr, op.offset(b, base, r, c), op.col_stride, mask, rest), mask),
                                    name="p")

                            each_row(row)

                        def under(op=ops[k + 1] if k + 1 < len(pieces) else None,
                                  base=bases[k + 1] if k + 1 < len(pieces) else None, start=start, size=size):
                            j0 = b.sub(r0, const64(start + size))  # the group's columns of L21^T
                            rows_mask = code.mask(count)

                            def tile(t):
                                c0 = b.mul(t, const64(v))
                                loaded = [code.gather(op.ptr, op.offset(b, base, b.add(c0, const64(l)), j0),
                                                      op.col_stride, rows_mask, count) for l in range(v)]
                                for r, value in enumerate(code.transpose(loaded)):
                                    _if(b, b.icmp_signed("<", const64(r), count),
                                        lambda r=r, value=value: code.vstore(
                                            out, at(b.add(r0, const64(r)), b.add(const64(start), c0)), value))

                            for_range(b, 0, size // v, tile, name="t")

                        with b.if_else(b.icmp_signed("<", r0, const64(start))) as (then, otherwise):
                            with then:
                                fill(zero, start, size)
                            with otherwise:
                                if k + 1 == len(pieces):
                                    inside()
                                else:
                                    with b.if_else(b.icmp_signed("<", r0, const64(start + size))) as (th, ot):
                                        with th:
                                            inside()
                                        with ot:
                                            under()
                        start += size

                with b.if_else(failed) as (then, otherwise):
                    with then:
                        fill(nan, 0, n)
                    with otherwise:
                        blocks()

            groups = b.udiv(b.add(b.sub(b.select(b.icmp_signed("<", b.add(first, const64(JOIN_ROWS)), nn),
                                                 b.add(first, const64(JOIN_ROWS)), nn), first), const64(v - 1)),
                            const64(v))
            for_range(b, 0, groups, group, name="g")

        lo, hi = workgroup_slice(b, items, wid, wcount)
        for_range(b, lo, hi, item, name="item")

    work = _prod(shape) * 2
    return body, items, work, f"{len(pieces[0::2])} blocks"


JOIN_ROWS = 16
"""Rows of the joined Cholesky factor per parallel item (_emit_cholesky_join)."""


# --------------------------------------------------------------------------- LU

WIDE_BYTES = 1 << 20
"""LU also takes the large-matrix path (_wide_blocks) for min(m, n) >= 2 * BLOCK when the matrix is larger
than this (as a tall panel of the split LU, _linalg_triangular._lu_split: its trailing columns leave L2)."""
PANEL_STACK_BYTES = 1 << 17
"""The largest column-major copy of an LU panel (m x PANEL) the large-matrix path keeps on the stack (m up
to 4096 in float32, 2048 in float64); taller matrices factor the panel in place, row by row."""


def _panel_copy(code: _Code, out, at, panel, m: int, k, width: int, to_panel: bool):
    """Rows k .. m of the matrix's columns k .. k + width to (to_panel) or from the column-major panel
    (panel[c * m + i] = A[i, k + c]): lanes rows at a time, lanes x lanes tiles transposed in registers."""
    b, v = code.b, code.lanes
    blocks = b.udiv(b.sub(const64(m), k), const64(v))

    def block(i0, count, row_mask):
        rows = [b.add(i0, const64(r)) for r in range(v)]
        if count is not None:  # the last rows: clamped in bounds, lanes past m never stored
            rows = [b.select(b.icmp_signed("<", r, const64(m)), r, const64(m - 1)) for r in rows]
        for c0 in range(0, width, v):
            cols = min(v, width - c0)
            col_mask = ir.Constant(ir.VectorType(I1, v), [int(l < cols) for l in range(v)])
            if to_panel:
                tile = code.transpose([code.vload(out, at(r, b.add(k, const64(c0))), col_mask) for r in rows])
                for c in range(cols):
                    code.vstore(panel, b.add(const64((c0 + c) * m), i0), tile[c], row_mask)
            else:
                zero = ir.Constant(code.vec, None)
                tile = code.transpose([code.vload(panel, b.add(const64((c0 + c) * m), i0), row_mask) if c < cols
                                       else zero for c in range(v)])
                for r in range(v):
                    mask = col_mask if count is None else code.lanes_if(
                        col_mask, b.icmp_unsigned("<", const64(r), count))
                    code.vstore(out, at(rows[r], b.add(k, const64(c0))), tile[r], mask)

    for_range(b, 0, blocks, lambda q: block(b.add(k, b.mul(q, const64(v))), None, None), name="pc")
    done = b.add(k, b.mul(blocks, const64(v)))
    rest = b.sub(const64(m), done)
    _if(b, b.icmp_unsigned("!=", rest, const64(0)), lambda: block(done, rest, code.mask(rest)))


def _pivot_key(code: _Code, value):
    """The pivot search's key of a scalar or vector value: |x|'s bits as an integer, every NaN made the one
    pattern above infinity (so the first largest key is argmax's pivot, NaN first)."""
    lanes = value.type.count if isinstance(value.type, ir.VectorType) else None

    def const(x):
        return ir.Constant(code.int_ty if lanes is None else ir.VectorType(code.int_ty, lanes),
                           x if lanes is None else [x] * lanes)

    b = code.b
    key = b.and_(b.bitcast(value, const(0).type), const(code.abs_bits))
    return b.select(b.icmp_unsigned(">", key, const(code.nan_key)), const(code.nan_key), key)


def _column_argmax(code: _Code, panel, col, j, m: int):
    """The row p in [j, m) of the first largest |panel[col + p]|, NaN first (argmax's rule, as factor_panel's
    search): per lane the first best key (|x|'s bits, every NaN one pattern above inf) and its row, then the
    lanes' best key with the smallest row among equals."""
    b, v = code.b, code.lanes
    ivec = ir.VectorType(code.int_ty, v)
    rvec = ir.VectorType(I64, v)
    best = code.var(ir.Constant(ivec, [-1] * v), "bestv")
    where = code.var(ir.Constant(rvec, [0] * v), "wherev")
    lanes = ir.Constant(rvec, list(range(v)))
    minus = ir.Constant(ivec, [-1] * v)

    def body(r, mask, rest):
        i = b.add(j, r)
        key = _pivot_key(code, code.vload(panel, b.add(col, i), mask))
        if mask is not None:
            key = b.select(mask, key, minus)
        row_one = b.insert_element(ir.Constant(rvec, None), i, ir.Constant(I32, 0))
        row = b.add(b.shuffle_vector(row_one, ir.Constant(rvec, None), ir.Constant(ir.VectorType(I32, v), [0] * v)),
                    lanes)
        old = b.load(best)
        better = b.icmp_signed(">", key, old)
        b.store(b.select(better, key, old), best)
        b.store(b.select(better, row, b.load(where)), where)

    code.row_loop(b.sub(const64(m), j), body, name="am")
    keys, rows = b.load(best), b.load(where)
    top = b.extract_element(keys, ir.Constant(I32, 0))
    for lane in range(1, v):
        top = b.select(b.icmp_signed(">", b.extract_element(keys, ir.Constant(I32, lane)), top),
                       b.extract_element(keys, ir.Constant(I32, lane)), top)
    result = const64(m)
    for lane in range(v):
        hit = b.icmp_signed("==", b.extract_element(keys, ir.Constant(I32, lane)), top)
        row = b.extract_element(rows, ir.Constant(I32, lane))
        result = b.select(b.and_(hit, b.icmp_unsigned("<", row, result)), row, result)
    return result


def _emit_lu(region, target):
    eqn = region.eqns[-1]
    x = eqn.invars[0]
    shape = x.aval.shape
    batch, (m, n) = shape[:-2], shape[-2:]
    kmax = min(m, n)
    views = region_views(region)
    nb = len(batch)
    items = _prod(batch) if m else 0  # no columns: the permutation is still written
    position = {v.id: k for k, v in enumerate(region.outvars)}
    n_in = len(region.invars)

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        code = _Code(b, x.aval.dtype, lanes_for(target.vector_bytes, x.aval.dtype))
        tile, panel_tile = _tile_shapes(target.vector_registers)
        source = _Operand(views[x.id], pointers, nb)
        out, pivots_out, perm_out = (pointers[n_in + position[v.id]] for v in eqn.outvars)
        best_v = local_var(b, code.int_ty, ir.Constant(code.int_ty, -1), "best")
        index_v = local_var(b, I64, const64(0), "index")
        nn = const64(n)
        wide = kmax >= WIDE_FROM or (kmax >= 2 * BLOCK and m * n * code.size > WIDE_BYTES)
        column_panel = wide and m * PANEL * code.size <= PANEL_STACK_BYTES
        panel = _stack_array(b, code.ty, m * PANEL, "panel") if column_panel else None

        def matrix(item, batch_index):
            w = b.mul(item, const64(m * n))
            piv = b.mul(item, const64(kmax))
            perm = b.mul(item, const64(m))
            src = source.base(b, batch_index)

            def at(i, j):
                return b.add(w, b.add(b.mul(i, nn), j))

            def perm_at(i):
                return b.gep(perm_out, [b.add(perm, i)], inbounds=True, source_etype=I32)

            def copy_row(i):
                _copy_row(code, source, src, i, n, out, at(i, const64(0)))
                b.store(b.trunc(i, I32), perm_at(i))

            for_range(b, 0, const64(m), copy_row, name="row")
            if n == 0:
                return

            def consider(v, i):
                """The pivot search's step at row i of entry v: the first largest |entry| wins, NaN first (as
                argmax). Compared as integers: |v|'s bits with every NaN made the one pattern above infinity,
                so the loop-carried chain is one integer compare and select."""
                key = _pivot_key(code, v)
                best = b.load(best_v)
                better = b.icmp_signed(">", key, best)
                b.store(b.select(better, key, best), best_v)
                b.store(b.select(better, i, b.load(index_v)), index_v)

            def search(j):
                b.store(ir.Constant(code.int_ty, -1), best_v)
                b.store(j, index_v)
                for_range(b, j, const64(m), lambda i: consider(code.load(out, at(i, j)), i), name="piv")

            def factor_panel(k, width: int, k0=None, block_end=None):
                """Columns k .. k + width of rows k ..: pivot, swap, multipliers and their update of the panel's
                later columns, row by row in vectors hoisted out of the row loop; the update of column j + 1
                tracks its pivot, so only the panel's first column is searched on its own."""
                end = b.add(k, const64(width))
                chunks = -(-(width - 1) // code.lanes)
                search(k)

                def column(j):
                    p = b.load(index_v)
                    b.store(b.trunc(p, I32), b.gep(pivots_out, [b.add(piv, j)], inbounds=True, source_etype=I32))

                    def swap():
                        code.swap_rows(out, at(j, const64(0)), at(p, const64(0)), nn)
                        pj, pp = perm_at(j), perm_at(p)
                        vj, vp = b.load(pj, typ=I32), b.load(pp, typ=I32)
                        b.store(vp, pj)
                        b.store(vj, pp)

                    _if(b, b.icmp_unsigned("!=", p, j), swap)
                    pivot = code.load(out, at(j, j))
                    safe = b.select(b.fcmp_ordered("==", pivot, code.const(0)), code.const(1), pivot)
                    after = b.add(j, const64(1))
                    count = b.sub(end, after)
                    masks, sources = [], []
                    for q in range(chunks):
                        left = b.sub(count, const64(q * code.lanes))
                        left = b.select(b.icmp_signed("<", left, const64(0)), const64(0), left)
                        left = b.select(b.icmp_signed(">", left, const64(code.lanes)), const64(code.lanes), left)
                        masks.append(code.mask(left))
                        sources.append(code.vload(out, at(j, b.add(after, const64(q * code.lanes))), masks[-1]))
                    b.store(ir.Constant(code.int_ty, -1), best_v)
                    b.store(after, index_v)

                    def below(i):
                        factor = b.fdiv(code.load(out, at(i, j)), safe)
                        code.store(out, at(i, j), factor)
                        neg = code.splat(b.fneg(factor))
                        for q, (mask, source) in enumerate(zip(masks, sources)):
                            offset = at(i, b.add(after, const64(q * code.lanes)))
                            value = fmuladd(b, neg, source, code.vload(out, offset, mask))
                            code.vstore(out, offset, value, mask)
                            if q == 0:
                                consider(b.extract_element(value, ir.Constant(I32, 0)), i)

                    for_range(b, after, const64(m), below, name="l")

                for_range(b, k, end, column, name="j")

            def factor_panel_columns(k, width: int, k0=None, block_end=None):
                """factor_panel's columns held column-major on the stack (panel_buffer): each column's pivot
                search, scaling and update of the panel's later columns run in vectors down the rows, not one
                row at a time; the same operations on each element as factor_panel, so the same bits."""
                end = b.add(k, const64(width))
                _panel_copy(code, out, at, panel, m, k, width, to_panel=True)

                def column(c):
                    j = b.add(k, c)
                    col = b.mul(c, const64(m))
                    p = _column_argmax(code, panel, col, j, m)
                    b.store(b.trunc(p, I32), b.gep(pivots_out, [b.add(piv, j)], inbounds=True, source_etype=I32))

                    def swap():
                        code.swap_rows(out, at(j, const64(0)), at(p, const64(0)), nn)

                        def element(c2):
                            at_j, at_p = b.add(b.mul(c2, const64(m)), j), b.add(b.mul(c2, const64(m)), p)
                            x, y = code.load(panel, at_j), code.load(panel, at_p)
                            code.store(panel, at_j, y)
                            code.store(panel, at_p, x)

                        for_range(b, 0, const64(width), element, name="ps")
                        pj, pp = perm_at(j), perm_at(p)
                        vj, vp = b.load(pj, typ=I32), b.load(pp, typ=I32)
                        b.store(vp, pj)
                        b.store(vj, pp)

                    _if(b, b.icmp_unsigned("!=", p, j), swap)
                    pivot = code.load(panel, b.add(col, j))
                    safe = code.splat(b.select(b.fcmp_ordered("==", pivot, code.const(0)), code.const(1), pivot))
                    after = b.add(j, const64(1))
                    later = b.add(c, const64(1))

                    def rows(r, mask, rest):
                        i = b.add(after, r)
                        factor = b.fdiv(code.vload(panel, b.add(col, i), mask), safe)
                        code.vstore(panel, b.add(col, i), factor, mask)

                        def update(c2):
                            neg = code.splat(b.fneg(code.load(panel, b.add(b.mul(c2, const64(m)), j))))
                            at2 = b.add(b.mul(c2, const64(m)), i)
                            code.vstore(panel, at2, fmuladd(b, neg, factor, code.vload(panel, at2, mask)), mask)

                        for_range(b, later, const64(width), update, name="pu")

                    code.row_loop(b.sub(const64(m), after), rows, name="cl")

                for_range(b, 0, const64(width), column, name="pj")
                _panel_copy(code, out, at, panel, m, k, width, to_panel=False)

            def update_right(k, width: int, k0=None, block_end=None):
                """U12 = L11^-1 A12 (rows of the panel, right of it), then A22 -= L21 U12. Within a block
                (k0 .. block_end): first the panel's rows right of the block take the block's earlier rows'
                update (left-looking, depth k - k0), and A22 is updated only left of block_end (product() does
                the rest after the block)."""
                end = b.add(k, const64(width))
                count = b.sub(nn, end)
                if block_end is not None:
                    _product_update(code, out, b.sub(k, k0), (k, end), (block_end, nn),
                                    lambda i, t: at(i, b.add(k0, t)), lambda t, j: at(b.add(k0, t), j), at, panel_tile,
                                    pack_a=True)

                rows = [b.add(k, const64(t)) for t in range(width)]
                for t in range(1, width):  # row t of U12: one pass taking the t rows above it
                    code.update_row(out, at(rows[t], end), [at(r, end) for r in rows[:t]],
                                    [code.load(out, at(rows[t], r)) for r in rows[:t]], count)

                def trailing(i, count=count):
                    code.update_row(out, at(i, end), [at(r, end) for r in rows],
                                    [code.load(out, at(i, r)) for r in rows], count)

                if block_end is None:
                    for_range(b, end, const64(m), trailing, name="tr")
                else:
                    for_range(b, end, const64(m), lambda i: trailing(i, b.sub(block_end, end)), name="tr")

            def product(k0, end):
                """Rows and columns end ..: A22 -= L21 U12 (the block's columns below it, its rows right of it)."""
                _product_update(code, out, BLOCK, (end, const64(m)), (end, nn), lambda i, t: at(i, b.add(k0, t)),
                                lambda t, j: at(b.add(k0, t), j), at, tile, pack_a=True)

            if wide:
                _wide_blocks(b, kmax, factor_panel if panel is None else factor_panel_columns, update_right, product,
                             update_tail=kmax < n)
            else:
                _blocked(b, kmax, factor_panel, update_right, update_tail=kmax < n)

        _matrix_loop(b, batch, wid, wcount, matrix)

    work = _prod(batch) * (m * n * max(kmax, 1) + m * n)
    return body, items, work, f"panel {PANEL}"


# --------------------------------------------------------------------------- triangular solve

def _column_chunks(k: int, vw: int) -> list[tuple[int, int]]:
    """[(first column, width)] covering k columns: vectors of vw, then halving widths down to scalars."""
    chunks, c, w = [], 0, vw
    while c < k:
        while w > k - c:
            w //= 2
        chunks.append((c, w))
        c += w
    return chunks


def _solve_chunks(left: bool, rows: int, cols: int, lanes: int) -> tuple[int, int]:
    """(parts per matrix, size of a part) of a triangular solve's parallel items: X's independent pieces
    (the rows of X op(a) = B, the columns of op(a) X = B) in parts of at least SOLVE_PART_WORK elements of
    work, a left solve's parts whole groups of 4 vectors of columns (_left_solve's passes, so each column's
    operations, and bits, do not depend on the split)."""
    if left:
        group = 4 * lanes
        size = max(1, SOLVE_PART_WORK // max(rows * rows // 2 * group, 1)) * group
        return -(-cols // size), size
    size = max(1, SOLVE_PART_WORK // max(cols * cols // 2, 1))
    return -(-rows // size), size


SOLVE_BLOCK_ROWS = (4, 2)
"""Rows of a lower left solve taken together (_left_solve's block_rows) with 32 and with 16 vector registers:
their 4-vector accumulators, X's 4 vectors and a broadcast fit in the registers."""
SOLVE_PART_WORK = 1 << 18
"""Multiply-adds per parallel item of a triangular solve (a share of one matrix's rows or columns)."""


def _emit_triangular_solve(region, target):
    eqn = region.eqns[-1]
    a, rhs = eqn.invars
    params = eqn.params
    left, transpose, unit = params["left_side"], params["transpose_a"], params["unit_diagonal"]
    lower = params["lower"] != transpose  # the triangle of op(a)
    shape = rhs.aval.shape
    batch = shape[:-2]
    rows, cols = shape[-2:]
    m = a.aval.shape[-1]
    views = region_views(region)
    nb = len(batch)
    dtype = rhs.aval.dtype
    lanes = lanes_for(target.vector_bytes, dtype)
    parts, size = _solve_chunks(left, rows, cols, lanes)
    items = _prod(batch) * parts if rows and cols else 0

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        code = _Code(b, dtype, lanes)
        mat = _Operand(views[a.id], pointers, nb)
        given = _Operand(views[rhs.id], pointers, nb)
        out = pointers[len(region.invars)]
        ncols = const64(cols)

        def part(item):
            matrix_item = b.udiv(item, const64(parts))
            piece = b.urem(item, const64(parts))
            batch_index = delinearize(b, matrix_item, batch) if batch else []
            w = b.mul(matrix_item, const64(rows * cols))
            abase, bbase = mat.base(b, batch_index), given.base(b, batch_index)

            def at(i, j):
                return b.add(w, b.add(b.mul(i, ncols), j))

            def t(i, j):
                """op(a)[i, j]."""
                return code.load(mat.ptr, mat.offset(b, abase, i, j, transposed=transpose))

            first = b.mul(piece, const64(size))
            if left:  # columns first .. first + count of every row
                def solve(count: int):
                    for_range(b, 0, const64(rows), lambda i: _copy_row(code, given, bbase, i, count, out,
                                                                       at(i, first), first), name="ci")
                    _left_solve(code, out, at, t, m, count, lower, unit, first,
                                block_rows=SOLVE_BLOCK_ROWS[target.vector_registers <= 16])

                last = cols - (parts - 1) * size
                if last == size:
                    solve(size)
                else:
                    with b.if_else(b.icmp_unsigned("==", piece, const64(parts - 1))) as (then, otherwise):
                        with then:
                            solve(last)
                        with otherwise:
                            solve(size)
            else:  # rows first .. end, whole
                end = b.add(first, const64(size))
                end = b.select(b.icmp_signed("<", end, const64(rows)), end, const64(rows))
                for_range(b, first, end, lambda i: _copy_row(code, given, bbase, i, cols, out,
                                                             at(i, const64(0))), name="ci")
                _right_solve(code, out, at, mat, abase, m, (first, end), lower, transpose, unit)

        lo, hi = workgroup_slice(b, items, wid, wcount)
        for_range(b, lo, hi, part, name="item")

    work = _prod(batch) * m * m * (cols if left else rows) // 2 + _prod(shape)
    return body, items, work, ("left" if left else "right") + (f", {parts} parts" if parts > 1 else "")


def _order(b, m: int, forward: bool, body):
    """body(i) for i = 0 .. m-1 (forward) or m-1 .. 0."""
    if forward:
        for_range(b, 0, m, body, name="i")
    else:
        for_range(b, 0, m, lambda s: body(b.sub(const64(m - 1), s)), name="i")


def _left_solve(code: _Code, out, at, t, m: int, k: int, lower: bool, unit: bool, first=None, block_rows: int = 1):
    """op(a) X = B for X's k columns from `first` (i64, or 0) (m x k) in place: row i of X is (B[i] - sum_t
    op(a)[i, t] X[t]) / op(a)[i, i] over the rows t solved before it, accumulated in vectors across X's
    columns (several accumulators over t when the columns are few; a lower op(a)'s rows block_rows at a
    time where the columns fill the accumulators, so that each X[t] loaded serves them all)."""
    b = code.b
    group = 4 * code.lanes  # columns per pass of the runtime column loop
    full_groups, rest = divmod(k, group)

    def start(c):
        return c if first is None else b.add(first, c)

    def solve_pass(c0, chunks):
        """Solves the columns c0 + chunk for the static chunks [(offset, width)]."""
        unroll = max(1, 4 // len(chunks))
        types = [ir.VectorType(code.ty, width) if width > 1 else code.ty for _, width in chunks]

        def load(ty, offset):
            if ty is code.ty:
                return code.load(out, offset)
            return b.load(code.ptr(out, offset), typ=ty, align=code.size)

        def splat(x, ty):
            if ty is code.ty:
                return x
            one = b.insert_element(ir.Constant(ty, None), x, ir.Constant(I32, 0))
            zeros = ir.Constant(ir.VectorType(I32, ty.count), [0] * ty.count)
            return b.shuffle_vector(one, ir.Constant(ty, None), zeros)

        def row(i):
            slots = [[local_var(b, ty, ir.Constant(ty, None) if ty is not code.ty else code.const(0), f"acc{u}")
                      for ty in types] for u in range(unroll)]
            for u in range(unroll):
                for slot, ty in zip(slots[u], types):
                    b.store(ir.Constant(ty, [0.0] * ty.count) if ty is not code.ty else code.const(0), slot)
            lo, hi = (const64(0), i) if lower else (b.add(i, const64(1)), const64(m))
            span = b.sub(hi, lo)
            steps = b.udiv(span, const64(unroll))

            def accumulate(u, s):
                coef = t(i, s)
                for slot, ty, (off, _) in zip(slots[u], types, chunks):
                    x = load(ty, at(s, b.add(c0, const64(off))))
                    b.store(fmuladd(b, splat(coef, ty), x, b.load(slot)), slot)

            def step(q):
                s0 = b.add(lo, b.mul(q, const64(unroll)))
                for u in range(unroll):
                    accumulate(u, b.add(s0, const64(u)))

            for_range(b, 0, steps, step, name="s")
            for_range(b, b.add(lo, b.mul(steps, const64(unroll))), hi, lambda s: accumulate(0, s), name="sr")
            divisor = None if unit else t(i, i)
            for j, (ty, (off, _)) in enumerate(zip(types, chunks)):
                total = b.load(slots[0][j])
                for u in range(1, unroll):
                    total = b.fadd(total, b.load(slots[u][j]))
                offset = at(i, b.add(c0, const64(off)))
                value = b.fsub(load(ty, offset), total)
                if divisor is not None:
                    value = b.fdiv(value, splat(divisor, ty))
                b.store(value, code.ptr(out, offset), align=code.size)

        def rows_block(q):
            """Rows i0 .. i0 + block_rows - 1 of a lower op(a) together: each X[s] loaded once for all of
            them over s < i0, then each row adds its terms from the block's rows before it and is finished,
            in order: each accumulator takes the same operations in the same order as row() (same bits)."""
            i0 = b.mul(q, const64(block_rows))
            slots = [[local_var(b, ty, ir.Constant(ty, None), f"acc{r}") for ty in types] for r in range(block_rows)]
            for row_slots in slots:
                for slot, ty in zip(row_slots, types):
                    b.store(ir.Constant(ty, [0.0] * ty.count), slot)

            def common(s):
                xs = [load(ty, at(s, b.add(c0, const64(off)))) for ty, (off, _) in zip(types, chunks)]
                for r in range(block_rows):
                    coef = t(b.add(i0, const64(r)), s)
                    for slot, ty, x in zip(slots[r], types, xs):
                        b.store(fmuladd(b, splat(coef, ty), x, b.load(slot)), slot)

            for_range(b, 0, i0, common, name="s")
            for r in range(block_rows):
                i = b.add(i0, const64(r))
                for r2 in range(r):
                    s2 = b.add(i0, const64(r2))
                    coef = t(i, s2)
                    for slot, ty, (off, _) in zip(slots[r], types, chunks):
                        x = load(ty, at(s2, b.add(c0, const64(off))))
                        b.store(fmuladd(b, splat(coef, ty), x, b.load(slot)), slot)
                divisor = None if unit else t(i, i)
                for slot, ty, (off, _) in zip(slots[r], types, chunks):
                    offset = at(i, b.add(c0, const64(off)))
                    value = b.fsub(load(ty, offset), b.load(slot))
                    if divisor is not None:
                        value = b.fdiv(value, splat(divisor, ty))
                    b.store(value, code.ptr(out, offset), align=code.size)

        if lower and unroll == 1 and block_rows > 1 and all(ty is not code.ty for ty in types):
            blocks = m // block_rows
            for_range(b, 0, blocks, rows_block, name="ib")
            for_range(b, blocks * block_rows, m, row, name="i")
        else:
            _order(b, m, lower, row)

    if full_groups:
        chunks = [(c, code.lanes) for c in range(0, group, code.lanes)]
        for_range(b, 0, full_groups, lambda g: solve_pass(start(b.mul(g, const64(group))), chunks), name="g")
    if rest:
        solve_pass(start(const64(full_groups * group)), _column_chunks(rest, code.lanes))


def _right_solve(code: _Code, out, at, mat: _Operand, abase, m: int, rows: tuple, lower: bool, transpose: bool,
                 unit: bool):
    """X op(a) = B, each row x of X (length m) in place, rows[0] .. rows[1] (i64): op(a) upper is solved
    forward, lower backward.
    Where op(a)'s rows are contiguous in a's layout the row form runs (x[j] final, then the later entries of
    x take x[j] times row j of op(a)); otherwise the column form (x[j] = (x[j] - x . column j of op(a)) /
    op(a)[j, j], the dot product in vectors)."""
    b = code.b
    forward = not lower
    # strides of op(a) along its rows' index (down a column) and along a row
    down, along = (mat.col_stride, mat.row_stride) if transpose else (mat.row_stride, mat.col_stride)

    def t(i, j):
        return code.load(mat.ptr, mat.offset(b, abase, i, j, transposed=transpose))

    def diag(j):
        return None if unit else t(j, j)

    def t_offset(i, j):
        return mat.offset(b, abase, i, j, transposed=transpose)

    def one_row(r):
        def x_at(j):
            return at(r, j)

        if along == 1 or down != 1:
            def step(j):
                value = code.load(out, x_at(j))
                d = diag(j)
                if d is not None:
                    value = b.fdiv(value, d)
                    code.store(out, x_at(j), value)
                neg = b.fneg(value)
                vneg = code.splat(neg)
                lo = b.add(j, const64(1)) if forward else const64(0)
                count = b.sub(const64(m), lo) if forward else j

                def body(c, mask, rest):
                    col = b.add(lo, c)
                    acc = code.vload(out, x_at(col), mask)
                    row = code.gather(mat.ptr, t_offset(j, col), along, mask, rest)
                    code.vstore(out, x_at(col), fmuladd(b, vneg, row, acc), mask)

                code.row_loop(count, body, name="ax")

            _order(b, m, forward, step)
        else:
            acc_v = local_var(b, code.vec, ir.Constant(code.vec, None), "dot")

            def step(j):
                lo = const64(0) if forward else b.add(j, const64(1))
                count = j if forward else b.sub(const64(m), lo)
                b.store(ir.Constant(code.vec, None), acc_v)

                def body(c, mask, rest):
                    s = b.add(lo, c)
                    b.store(fmuladd(b, code.vload(out, x_at(s), mask), code.vload(mat.ptr, t_offset(s, j), mask),
                                    b.load(acc_v)), acc_v)

                code.row_loop(count, body, name="dt")
                total = code.hsum_in_order(b.load(acc_v))
                value = b.fsub(code.load(out, x_at(j)), total)
                d = diag(j)
                if d is not None:
                    value = b.fdiv(value, d)
                code.store(out, x_at(j), value)

            _order(b, m, forward, step)

    for_range(b, rows[0], rows[1], one_row, name="xr")


_EMITTERS = {"cholesky": _emit_cholesky, "lu": _emit_lu, "triangular_solve": _emit_triangular_solve,
             "syrk": _emit_syrk, "cholesky_join": _emit_cholesky_join}


def plan(region, target):
    """(body emitter, parallel items, work, detail) of a linalg region's kernel for `target`."""
    eqn = region.eqns[-1]
    dtype = np.dtype(eqn.invars[0].aval.dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"the linalg kernels compute float32 and float64, not {dtype} ({eqn.primitive.name})")
    return _EMITTERS[eqn.primitive.kernel_kind](region, target)


__all__ = ["PANEL", "plan"]
