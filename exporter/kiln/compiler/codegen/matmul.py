"""dot_general kernels.

Fast path (f32/f64 whose batch, free and contracting dim groups each collapse
to one strided dim): C[b] = A[b] @ B[b] with B packed into NR-wide panels on
the stack (KC x NC blocks) and a register-blocked MR x NR microkernel of
explicit vector FMAs (llvm.fmuladd), GotoBLAS loop order. Workgroups split
(batch, row chunk, column chunk) tiles.

General path (integers, bool, f16, or groups that do not collapse): one
accumulator per output element, contracting index delinearized.

Epilogue (fast path only, codegen/epilogue.py): elementwise equations after the
dot_general in the region run on each work item's finished tile.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from llvmlite import ir

from ..layout import collapse_dims, region_views
from . import epilogue as epilogues
from . import scalar_ops
from .intrinsics import fmuladd, prefetch
from .loops import const64, delinearize, dot_offsets, for_range, workgroup_slice
from .types import F32, F64, I1, I64, PTR, info

KC = 256
NC_STRIPS = 8
ROW_CHUNK_TILES = 8
# B rows ahead of the one a packing microkernel (_microkernel(packs=True)) reads that it prefetches: B's
# rows lie a row stride apart (4 KiB for 1024 floats), on a new page each, where no hardware prefetcher
# follows; 16 rows are a few hundred cycles of a tile's FMAs ahead.
PACK_PREFETCH_ROWS = 16


@dataclass
class Operand:
    view: object
    batch: list[int]
    free: list[int]
    contract: list[int]


@dataclass
class DotPlan:
    lhs: Operand
    rhs: Operand
    dtype: np.dtype
    batch_shape: tuple[int, ...]
    m_shape: tuple[int, ...]
    n_shape: tuple[int, ...]
    k_shape: tuple[int, ...]
    fast: tuple | None  # (B, M, N, K, strides...) when every group is one strided dim

    @property
    def sizes(self):
        prod = lambda s: int(np.prod(s, dtype=np.int64))  # noqa: E731
        return prod(self.batch_shape), prod(self.m_shape), prod(self.n_shape), prod(self.k_shape)


def _group(view, dims) -> tuple[int, int] | None:
    """(size, stride) of dims of a view taken together, or None if they are not one strided dim."""
    shape, strides = collapse_dims([view.shape[d] for d in dims], [[view.strides[d] for d in dims]])
    if len(shape) != 1:
        return None
    return shape[0], strides[0][0]


def _plan(region) -> DotPlan:
    eqn = epilogues.dot_equation(region)
    views = region_views(region)
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lv, rv = views[eqn.invars[0].id], views[eqn.invars[1].id]
    lfree = [i for i in range(len(lv.shape)) if i not in lc and i not in lb]
    rfree = [i for i in range(len(rv.shape)) if i not in rc and i not in rb]
    lhs = Operand(lv, list(lb), lfree, list(lc))
    rhs = Operand(rv, list(rb), rfree, list(rc))
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    plan = DotPlan(lhs, rhs, dtype, tuple(lv.shape[d] for d in lb), tuple(lv.shape[d] for d in lfree),
                   tuple(rv.shape[d] for d in rfree), tuple(lv.shape[d] for d in lc), None)
    if dtype in (np.float32, np.float64):
        groups = [_group(lv, lb), _group(lv, lfree), _group(lv, lc), _group(rv, rb), _group(rv, rc), _group(rv, rfree)]
        if all(g is not None for g in groups):
            (_, sab), (_, sam), (_, sak), (_, sbb), (_, sbk), (_, sbn) = groups
            plan.fast = (sab, sam, sak, sbb, sbk, sbn)
    return plan


def _target_shape(target_vector_bytes: int, registers: int, dtype):
    vw = max(target_vector_bytes // np.dtype(dtype).itemsize, 1)
    mr = 6 if registers <= 16 else 12
    return vw, mr


# Work per workgroup that compile.choose_workgroups asks for (its _WORK_PER_GROUP), and the fewest
# items a product with that much work is split into (see _Tiling).
WORK_PER_GROUP = 1 << 16
MIN_ITEMS = 8
# Items a large product keeps (_Tiling): enough for 16 workers, of equal sizes. 1024 x 1024 x 1024 f32 on
# AVX-512: 4 row chunks of 264 rows x 4 column chunks, where ROW_CHUNK_TILES gave 11 x 4 and packed each
# of B's 256 x 256 blocks 11 times (min per call on a quiet Xeon: one worker 16.3 -> 14.6 ms, two 9.7 ->
# 7.9 ms).
SHARED_ITEMS = 16


class _Tiling:
    """Work items of NC columns (NC_STRIPS strips of NR) by ROW_CHUNK_TILES tiles of MR rows. A product
    too small for `want_items` such items (a residual layer's 64 x 128 x 128) takes narrower column chunks,
    then fewer row tiles per chunk, until it has them (or a chunk is one strip and one tile), so its
    workgroups can run on several workers; column chunks go first, as each row chunk packs B again."""

    def __init__(self, plan: DotPlan, vector_bytes: int, registers: int, want_items: int = 1):
        batch, m, n, k = plan.sizes
        self.vw, self.mr = _target_shape(vector_bytes, registers, plan.dtype)
        self.registers = registers
        # A product at most one vector wide (an output layer's 10 columns, its weight gradient) takes
        # strips of one vector: two would leave more than half the FMAs' lanes padding.
        self.nr = self.vw if 1 < n <= self.vw else 2 * self.vw
        strips, tiles = NC_STRIPS, ROW_CHUNK_TILES
        count = lambda: batch * max(-(-m // (self.mr * tiles)), 1) * max(-(-n // (self.nr * strips)), 1)  # noqa: E731
        while count() < want_items and strips > 1:
            strips //= 2
        while count() < want_items and tiles > 1:
            tiles //= 2
        self.nc = self.nr * strips
        self.row_chunk = self.mr * tiles
        self.m_chunks = max(-(-m // self.row_chunk), 1)
        self.n_chunks = max(-(-n // self.nc), 1)
        # A product of fewer than MIN_ITEMS workgroups (one per item wanted) with fewer column chunks
        # (and batches) than that: as many row chunks as the items need, of equal whole tiles, so each
        # workgroup gets as many rows (an output layer's 256 x 10 in two workgroups: 132 + 124 rows,
        # where chunks of 96 gave 96 + 160).
        per_row_chunk = batch * self.n_chunks
        if per_row_chunk < want_items < MIN_ITEMS:
            share = -(-want_items // per_row_chunk)
            self.row_chunk = self.mr * -(-(-(-m // self.mr)) // share)
            self.m_chunks = max(-(-m // self.row_chunk), 1)
        # A large product takes taller row chunks, as few as give SHARED_ITEMS items, of equal numbers of
        # tiles: an item packs B's panels for its rows alone, and a pack reads B's KC x NC block from
        # beyond L2, as long as the FMAs of a few tiles take.
        fewer = max(-(-SHARED_ITEMS // max(batch * self.n_chunks, 1)), 1)
        if fewer < self.m_chunks:
            tiles_all = -(-m // self.mr)
            self.row_chunk = self.mr * -(-tiles_all // fewer)
            self.m_chunks = max(-(-m // self.row_chunk), 1)
        self.items = batch * self.m_chunks * self.n_chunks if m and n else 0


def _tiling(region, plan: DotPlan, target) -> _Tiling:
    want = min(MIN_ITEMS, work(region) // WORK_PER_GROUP)
    return _Tiling(plan, target.vector_bytes, target.vector_registers, want)


def _fit_copies(t: _Tiling, plan: DotPlan, copies: int) -> None:
    """Row chunks short enough that `copies` copies of an item's rows x columns fit OPERAND_COPY_BYTES of
    stack (whole tiles, at least one). Only the kernel's own tiling changes: more items than
    parallel_items said only split the workgroups' shares finer."""
    if not copies:
        return
    batch, m, n, _ = plan.sizes
    rows = max(OPERAND_COPY_BYTES // (copies * t.nc * plan.dtype.itemsize) // t.mr * t.mr, t.mr)
    if t.row_chunk > rows:
        t.row_chunk = rows
        t.m_chunks = max(-(-m // t.row_chunk), 1)
        t.items = batch * t.m_chunks * t.n_chunks if m and n else 0


# The stack bytes a work item's copies of epilogue operands (copied_operands) may take.
OPERAND_COPY_BYTES = 1 << 17


def copied_operands(region) -> list[int]:
    """Input positions of the epilogue operands a work item copies to the stack (its rows x columns)
    before it accumulates the product, the epilogue reading the copy, when the kernel reads the operand
    through the home output's pointer (compile._reading_through): each may be the memory of the
    output the product is accumulated in (the epilogue's `home`, memory_plan._matmul_pairs), whose
    partial sums would otherwise overwrite it before the epilogue reads it (a residual layer's
    `h + gelu(z @ w + b)` written over h). An input qualifies when the kernel reads it only as an
    epilogue operand, every view of it the input itself (the product's shape, contiguous, offset 0),
    of the home output's dtype."""
    from ..layout import contiguous_strides

    try:
        plan = _plan(region)
        ep = epilogues.plan(region, plan.sizes) if plan.fast is not None else None
    except epilogues.NotFusable:
        return []
    if ep is None:
        return []
    shape = tuple(ep.dot.outvars[0].aval.shape)
    identity = tuple(contiguous_strides(shape))
    home_dtype = region.outvars[ep.home].aval.dtype
    operands = {plan.lhs.view.source, plan.rhs.view.source}
    out = []
    for i, v in enumerate(region.invars):
        mine = [w for w in ep.views if w.source == i]
        if (i not in operands and mine and tuple(v.aval.shape) == shape and v.aval.dtype == home_dtype
                and all(tuple(w.shape) == shape and tuple(w.strides) == identity and w.offset == 0
                        and w.dtype == v.aval.dtype for w in mine)):
            out.append(i)
    return out


def parallel_items(region, target) -> int:
    """Workgroup items of the region's kernel for `target` (a kiln.compiler.target.Target: its vector
    width and register count shape the tiling)."""
    plan = _plan(region)
    batch, m, n, _ = plan.sizes
    if plan.fast is None:
        return batch * m * n
    return _tiling(region, plan, target).items


def work(region) -> int:
    plan = _plan(region)
    batch, m, n, k = plan.sizes
    ep = epilogues.plan(region, plan.sizes) if plan.fast is not None else None
    if plan.fast is not None:
        n = -(-n // 16) * 16  # the fast path computes whole vectors of columns (16 f32 lanes on AVX-512)
    return batch * m * n * (max(k, 1) // 16 + (0 if ep is None else 1 + ep.cost // 4))


def epilogue_fusable(region) -> bool:
    """Whether the region (a product and elementwise work after it) is one kernel of the fast path."""
    plan = _plan(region)
    if plan.fast is None:
        return False
    try:
        epilogues.plan(region, plan.sizes)
    except epilogues.NotFusable:
        return False
    return True


def emit_matmul_kernel(region, target):
    plan = _plan(region)
    if plan.fast is None:
        if epilogues.dot_equation(region) is not region.eqns[-1]:
            raise epilogues.NotFusable("an epilogue needs the fast path (f32/f64, groups of one strided dim)")
        return _emit_general(region, plan)
    return _emit_fast(region, plan, _tiling(region, plan, target))


def _emit_general(region, plan: DotPlan):
    d = info(plan.dtype)
    acc_type = F64 if d.name == "f32" else d.compute
    out_shape = plan.batch_shape + plan.m_shape + plan.n_shape
    total = int(np.prod(out_shape, dtype=np.int64))
    kprod = int(np.prod(plan.k_shape, dtype=np.int64))
    nb, nm = len(plan.batch_shape), len(plan.m_shape)
    lv, rv = plan.lhs.view, plan.rhs.view

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if total == 0:
            return
        lhs_ptr, rhs_ptr, out_ptr = pointers[lv.source], pointers[rv.source], pointers[len(region.invars)]
        lo, hi = workgroup_slice(b, total, workgroup_id, workgroup_count)
        acc = b.alloca(acc_type)

        def element(o):
            index = delinearize(b, o, out_shape) if out_shape else []
            bidx, midx, nidx = index[:nb], index[nb:nb + nm], index[nb + nm:]
            lbase = dot_offsets(b, bidx, [lv.strides[i] for i in plan.lhs.batch], const64(lv.offset))
            lbase = dot_offsets(b, midx, [lv.strides[i] for i in plan.lhs.free], lbase)
            rbase = dot_offsets(b, bidx, [rv.strides[i] for i in plan.rhs.batch], const64(rv.offset))
            rbase = dot_offsets(b, nidx, [rv.strides[i] for i in plan.rhs.free], rbase)
            zero = ir.Constant(acc_type, 0.0) if d.is_float else ir.Constant(acc_type, 0)
            b.store(zero, acc)

            def step(kl):
                kidx = delinearize(b, kl, plan.k_shape) if plan.k_shape else []
                x = scalar_ops.load(b, lhs_ptr, dot_offsets(b, kidx, [lv.strides[i] for i in plan.lhs.contract], lbase), plan.dtype)
                y = scalar_ops.load(b, rhs_ptr, dot_offsets(b, kidx, [rv.strides[i] for i in plan.rhs.contract], rbase), plan.dtype)
                if d.kind == "b":
                    b.store(b.or_(b.load(acc), b.and_(x, y)), acc)
                elif d.is_float:
                    if acc_type != x.type:
                        x, y = b.fpext(x, acc_type), b.fpext(y, acc_type)
                    prod = b.fmul(x, y)
                    total_ = b.fadd(b.load(acc), prod)
                    total_.flags.extend(["reassoc", "contract"])
                    prod.flags.extend(["reassoc", "contract"])
                    b.store(total_, acc)
                else:
                    b.store(b.add(b.load(acc), b.mul(x, y)), acc)

            for_range(b, 0, kprod, step, name="k")
            value = b.load(acc)
            if value.type != d.compute:
                value = b.fptrunc(value, d.compute)
            scalar_ops.store(b, out_ptr, o, value, plan.dtype)

        for_range(b, lo, hi, element, name="o")

    return body


def _emit_fast(region, plan: DotPlan, t: _Tiling):
    batch, m, n, k = plan.sizes
    sab, sam, sak, sbb, sbk, sbn = plan.fast
    lv, rv = plan.lhs.view, plan.rhs.view
    ty = F32 if plan.dtype == np.float32 else F64
    vec = ir.VectorType(ty, t.vw)
    panel_len = KC * t.nc
    ep = epilogues.plan(region, plan.sizes)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if t.items == 0:
            return
        out_ptr = pointers[len(region.invars) + (0 if ep is None else ep.home)]
        a_ptr = b.gep(pointers[lv.source], [const64(lv.offset)], source_etype=ty)
        b_ptr = b.gep(pointers[rv.source], [const64(rv.offset)], source_etype=ty)
        if k == 0:
            lo, hi = workgroup_slice(b, batch * m * n, workgroup_id, workgroup_count)
            for_range(b, lo, hi, lambda i: b.store(ir.Constant(ty, 0.0), b.gep(out_ptr, [i], source_etype=ty)), name="z")
            return
        module = b.module
        direct = _reads_b_in_place(plan, t)
        st = _direct_strips(m, t) if direct else t  # the strips' width: NR, or wider for B read in place
        kernels = {rows: _microkernel(module, ty, st, rows) for rows in _tile_rows(m, t.mr)}
        pack = _transposing_packer(module, ty, t) if _k_contiguous(plan, t) else _packer(module, ty, st)
        packs_in_tile = _packs_while_computing(plan, t)
        packing = _microkernel(module, ty, st, t.mr, packs=True) if packs_in_tile else None
        dot_form = _dot_form(plan, t)
        dots = {cols: _dot_columns(module, ty, t.vw, cols) for cols in (DOT_COLUMNS, 1)} if dot_form else None
        panel = b.alloca(ty, size=const64(panel_len), name="panel")
        panel.align = 64
        copies_a = _copies_a(plan, st)
        prefetches_a = _prefetches_a(plan, t)
        a_ld = KC + 64 // plan.dtype.itemsize  # the copy's row length: a cache line past KC
        if copies_a:
            a_copy = b.alloca(ty, size=const64(t.mr * a_ld), name="a_copy")
            a_copy.align = 64
        a_strides = (const64(a_ld), const64(1)) if copies_a else (const64(sam), const64(sak))
        # Operands read through the accumulating output's pointer (written over: compile._reading_through).
        aliased = [i for i in (copied_operands(region) if ep is not None else []) if pointers[i] is out_ptr]
        _fit_copies(t, plan, len(aliased))
        operand_copies = {}
        for i in aliased:
            buf = b.alloca(ty, size=const64(t.row_chunk * t.nc), name=f"operand{i}")
            buf.align = 64
            operand_copies[i] = (buf, t.nc)
        lo, hi = workgroup_slice(b, t.items, workgroup_id, workgroup_count)
        k_blocks = -(-k // KC)
        # The epilogue runs tile by tile (after each tile's last k block) unless operands were copied per
        # item (their copies are indexed from the item's first row).
        tile_epilogue = ep is not None and not operand_copies

        def item(it):
            mi = b.urem(it, const64(t.m_chunks))
            rest = b.udiv(it, const64(t.m_chunks))
            ni = b.urem(rest, const64(t.n_chunks))
            bi = b.udiv(rest, const64(t.n_chunks))
            m0 = b.mul(mi, const64(t.row_chunk))
            m_end = _min(b, b.add(m0, const64(t.row_chunk)), const64(m))
            n0 = b.mul(ni, const64(t.nc))
            n_count = _min(b, b.sub(const64(n), n0), const64(t.nc))
            a_batch = b.gep(a_ptr, [b.mul(bi, const64(sab))], source_etype=ty)
            b_batch = b.gep(b_ptr, [b.mul(bi, const64(sbb))], source_etype=ty)
            c_batch = b.gep(out_ptr, [b.mul(bi, const64(m * n))], source_etype=ty)
            for i, (buf, ld) in operand_copies.items():
                # Before anything is accumulated: the operand may share the home output's memory.
                src = b.gep(pointers[i], [b.add(b.mul(bi, const64(m * n)), b.add(b.mul(m0, const64(n)), n0))], source_etype=ty)
                _copy_rows(b, ty, src, n, buf, ld, b.sub(m_end, m0), n_count)
            if dot_form:
                _emit_dot_rows(b, ty, t.vw, dots, a_batch, sam, b_batch, sbn, c_batch, n, k, m0, m_end, n0, n_count)
                if ep is not None:
                    epilogues.emit(b, region, ep, pointers, plan.sizes, bi, m0, m_end, n0, n_count, operand_copies)
                return

            def k_block(kb):
                k0 = b.mul(kb, const64(KC))
                kc = _min(b, b.sub(const64(k), k0), const64(KC))
                b_block = b.gep(b_batch, [b.add(b.mul(k0, const64(sbk)), b.mul(n0, const64(sbn)))], source_etype=ty)
                if not direct and not packs_in_tile:
                    b.call(pack, [b_block, const64(sbk), const64(sbn), kc, n_count, panel])
                load_c = b.icmp_unsigned("!=", kb, const64(0))

                def m_tile(mt):
                    row = b.add(m0, b.mul(mt, const64(t.mr)))
                    rows = _min(b, b.sub(m_end, row), const64(t.mr))
                    a_tile = b.gep(a_batch, [b.add(b.mul(row, const64(sam)), b.mul(k0, const64(sak)))], source_etype=ty)
                    if prefetches_a:
                        _prefetch_next_tile(b, ty, plan, t, a_tile, row, m_end, kc)
                    if copies_a:
                        _copy_rows(b, ty, a_tile, sam, a_copy, a_ld, rows, kc)
                        a_tile = a_copy

                    def strip(s):
                        col = b.mul(s, const64(st.nr))
                        cols = _min(b, b.sub(n_count, col), const64(st.nr))
                        c_tile = b.gep(c_batch, [b.add(b.mul(row, const64(n)), b.add(n0, col))], source_etype=ty)
                        if direct:
                            # Full strips read B's rows in place; a partial one is packed (zero-padded),
                            # as its vector loads would read past the row.
                            partial = b.icmp_unsigned("!=", cols, const64(st.nr))
                            in_place = b.gep(b_block, [col], source_etype=ty)
                            with b.if_then(partial):
                                b.call(pack, [in_place, const64(sbk), const64(sbn), kc, cols, panel])
                            b_strip = b.select(partial, panel, in_place)
                            ldb = b.select(partial, const64(st.nr), const64(sbk))
                        else:
                            b_strip = b.gep(panel, [b.mul(s, const64(KC * st.nr))], source_etype=ty)
                            ldb = const64(st.nr)
                        args = [a_tile, *a_strides, b_strip, ldb, c_tile, const64(n), kc, load_c, cols]
                        if packs_in_tile:
                            # The chunk's first tile packs each strip as it reads it from B (a full strip of a
                            # full tile) or after the element-wise packer wrote it (a partial strip, zero-
                            # padded, or the few rows of a chunk shorter than a tile).
                            first = b.icmp_unsigned("==", mt, const64(0))
                            full = b.and_(b.icmp_unsigned("==", cols, const64(st.nr)), b.icmp_unsigned("==", rows, const64(t.mr)))
                            source = b.gep(b_block, [col], source_etype=ty)
                            with b.if_else(b.and_(first, full)) as (then, otherwise):
                                with then:
                                    b.call(packing, [a_tile, *a_strides, source, const64(sbk), c_tile, const64(n), kc,
                                                     load_c, cols, b_strip])
                                with otherwise:
                                    with b.if_then(first):
                                        b.call(pack, [source, const64(sbk), const64(sbn), kc, cols, b_strip])
                                    _dispatch_rows(b, rows, kernels, args, t.mr)
                        else:
                            _dispatch_rows(b, rows, kernels, args, t.mr)

                    strips = b.udiv(b.add(n_count, const64(st.nr - 1)), const64(st.nr))
                    for_range(b, 0, strips, strip, name="s")
                    if tile_epilogue:
                        # The tile's rows are complete after the last k block: their epilogue now, while the
                        # tile's C is in L1/L2.
                        with b.if_then(b.icmp_unsigned("==", kb, const64(k_blocks - 1))):
                            epilogues.emit(b, region, ep, pointers, plan.sizes, bi, row, b.add(row, rows), n0, n_count)

                tiles = b.udiv(b.add(b.sub(m_end, m0), const64(t.mr - 1)), const64(t.mr))
                for_range(b, 0, tiles, m_tile, name="mt")

            for_range(b, 0, k_blocks, k_block, name="kb")
            if ep is not None and not tile_epilogue:
                epilogues.emit(b, region, ep, pointers, plan.sizes, bi, m0, m_end, n0, n_count, operand_copies)

        for_range(b, lo, hi, item, name="it")

    return body


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _tile_rows(m: int, mr: int) -> list[int]:
    """The row counts tiles of m rows have: mr (full tiles) and m % mr (the last one), as row chunks
    are whole tiles; only their microkernels are generated."""
    return sorted(({mr} if m >= mr else set()) | ({m % mr} if m % mr else set()))


def _dispatch_rows(b: ir.IRBuilder, rows, kernels, args, mr: int) -> None:
    """Calls the microkernel for `rows` rows (a key of `kernels`): the largest by default, the others by a switch."""
    largest = max(kernels)
    if len(kernels) == 1:
        b.call(kernels[largest], args)
        return
    done = b.function.append_basic_block("rows.done")
    default = b.function.append_basic_block("rows.full")
    switch = b.switch(rows, default)
    with b.goto_block(default):
        b.call(kernels[largest], args)
        b.branch(done)
    for r in sorted(kernels)[:-1]:
        block = b.function.append_basic_block(f"rows.{r}")
        switch.add_case(ir.Constant(I64, r), block)
        with b.goto_block(block):
            b.call(kernels[r], args)
            b.branch(done)
    b.position_at_end(done)


# pack(B, sbk, sbn, kc, n_count, panel): the packers' signature (_packer, _transposing_packer)
PACK_ARGS = [PTR, I64, I64, I64, I64, PTR]


def _internal_function(module: ir.Module, name: str, arg_types, noalias=()) -> tuple[ir.Function, ir.IRBuilder]:
    """A new internal `void name(arg_types...)` of the kernel's module (nounwind; the arguments at the
    indices `noalias` marked noalias) and a builder at its entry block: the prologue of the packers, the
    dot-product columns and the microkernels."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), arg_types), name=name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    for i in noalias:
        fn.args[i].add_attribute("noalias")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _packer(module: ir.Module, ty, t: _Tiling) -> ir.Function:
    """pack(B, sbk, sbn, kc, n_count, panel): NR-wide strips, k-major, zero-padded columns."""
    name = f"kiln.pack.{'f32' if ty == F32 else 'f64'}.{t.nr}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn, b = _internal_function(module, name, PACK_ARGS, noalias=(0, 5))
    src, sbk, sbn, kc, n_count, panel = fn.args

    def strip(s):
        col0 = b.mul(s, const64(t.nr))
        dst_strip = b.gep(panel, [b.mul(s, const64(KC * t.nr))], source_etype=ty)

        def row(kk):
            src_row = b.gep(src, [b.add(b.mul(kk, sbk), b.mul(col0, sbn))], source_etype=ty)
            dst_row = b.gep(dst_strip, [b.mul(kk, const64(t.nr))], source_etype=ty)

            def copy(j):
                v = b.load(b.gep(src_row, [b.mul(j, sbn)], source_etype=ty), typ=ty)
                b.store(v, b.gep(dst_row, [j], source_etype=ty))

            def zero(j):
                b.store(ir.Constant(ty, 0.0), b.gep(dst_row, [j], source_etype=ty))

            valid = _min(b, b.sub(n_count, col0), const64(t.nr))
            for_range(b, 0, valid, copy, name="j")
            for_range(b, valid, t.nr, zero, name="jz")

        for_range(b, 0, kc, row, name="kk")

    strips = b.udiv(b.add(n_count, const64(t.nr - 1)), const64(t.nr))
    for_range(b, 0, strips, strip, name="s")
    b.ret_void()
    return fn


DOT_ROWS = 4      # products of at most this many rows with A and B both contiguous along k: dot products
DOT_COLUMNS = 4   # columns (rows of B^T) one pass of a dot-product row reads together


def _dot_form(plan: DotPlan, t: _Tiling) -> bool:
    """Whether the product is computed as dot products along k: few rows (a batch-1 `x @ w.T`, a
    (out, in) weight applied to one vector, a batch-1 backward pass's `dz @ W^T`) with A's and B's k
    elements contiguous, so both stream with vector loads and no panel is packed."""
    _, m, _, k = plan.sizes
    _, _, sak, _, sbk, sbn = plan.fast
    return m <= DOT_ROWS and sak == 1 and sbk == 1 and sbn != 1 and k >= t.vw > 1 and t.vw & (t.vw - 1) == 0


def _horizontal_sum(b: ir.IRBuilder, v, vw: int):
    """The lanes of v added pairwise (halves, then quarters, ...): a fixed order."""
    while vw > 1:
        vw //= 2
        ity = ir.VectorType(ir.IntType(32), vw)
        lo = b.shuffle_vector(v, v, ir.Constant(ity, list(range(vw))))
        hi = b.shuffle_vector(v, v, ir.Constant(ity, list(range(vw, 2 * vw))))
        v = b.fadd(lo, hi)
    return b.extract_element(v, ir.Constant(I64, 0))


def _dot_columns(module: ir.Module, ty, vw: int, cols: int) -> ir.Function:
    """dot(A row, B, sbn, k, C row): C[j] = sum_k A[k] B[j * sbn + k] for j < cols, A and B contiguous along
    k: two vector accumulators per column over the whole vectors of k (summed lane-wise, then across
    lanes), the k tail added one element at a time."""
    name = f"kiln.dot.{'f32' if ty == F32 else 'f64'}.{vw}x{cols}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn, b = _internal_function(module, name, [PTR, PTR, I64, I64, PTR], noalias=(0, 1, 4))
    a_ptr, b_ptr, sbn, k, c_ptr = fn.args
    vec = ir.VectorType(ty, vw)
    align = ty_align(ty)
    zero = ir.Constant(vec, None)
    accs = [[b.alloca(vec, name=f"acc{j}_{u}") for u in range(2)] for j in range(cols)]
    for row in accs:
        for acc in row:
            b.store(zero, acc)
    rows = [b.gep(b_ptr, [b.mul(const64(j), sbn)], source_etype=ty) for j in range(cols)]
    pairs = b.udiv(k, const64(2 * vw))

    def step(kk, u):
        x = b.load(b.gep(a_ptr, [kk], source_etype=ty), typ=vec, align=align)
        for j in range(cols):
            y = b.load(b.gep(rows[j], [kk], source_etype=ty), typ=vec, align=align)
            b.store(fmuladd(b, x, y, b.load(accs[j][u])), accs[j][u])

    def pair(p):
        k0 = b.mul(p, const64(2 * vw))
        step(k0, 0)
        step(b.add(k0, const64(vw)), 1)

    for_range(b, 0, pairs, pair, name="kp")
    done = b.mul(pairs, const64(2 * vw))
    with b.if_then(b.icmp_unsigned("<=", b.add(done, const64(vw)), k)):
        step(done, 0)
    vec_end = b.mul(b.udiv(k, const64(vw)), const64(vw))
    for j in range(cols):
        total = _horizontal_sum(b, b.fadd(b.load(accs[j][0]), b.load(accs[j][1])), vw)
        slot = b.alloca(ty, name=f"sum{j}")
        b.store(total, slot)

        def tail(kk, j=j, slot=slot):
            x = b.load(b.gep(a_ptr, [kk], source_etype=ty), typ=ty)
            y = b.load(b.gep(rows[j], [kk], source_etype=ty), typ=ty)
            b.store(fmuladd(b, x, y, b.load(slot)), slot)

        for_range(b, vec_end, k, tail, name="kt")
        b.store(b.load(slot), b.gep(c_ptr, [const64(j)], source_etype=ty))
    b.ret_void()
    return fn


def _emit_dot_rows(b: ir.IRBuilder, ty, vw: int, dots, a_batch, sam: int, b_batch, sbn: int, c_batch, n: int,
                   k: int, m0, m_end, n0, n_count) -> None:
    """An item's rows m0..m_end x columns n0..n0+n_count as dot products (_dot_form), DOT_COLUMNS columns a
    pass, then the rest one by one."""
    groups = b.udiv(n_count, const64(DOT_COLUMNS))

    def row(r):
        a_row = b.gep(a_batch, [b.mul(r, const64(sam))], source_etype=ty)
        c_row = b.gep(c_batch, [b.add(b.mul(r, const64(n)), n0)], source_etype=ty)

        def call(cols, col):
            b_col = b.gep(b_batch, [b.mul(b.add(n0, col), const64(sbn))], source_etype=ty)
            b.call(dots[cols], [a_row, b_col, const64(sbn), const64(k), b.gep(c_row, [col], source_etype=ty)])

        for_range(b, 0, groups, lambda g: call(DOT_COLUMNS, b.mul(g, const64(DOT_COLUMNS))), name="g")
        for_range(b, b.mul(groups, const64(DOT_COLUMNS)), n_count, lambda c: call(1, c), name="c1")

    for_range(b, m0, m_end, row, name="r")


def _reads_b_in_place(plan: DotPlan, t: _Tiling) -> bool:
    """Whether the microkernel reads B's rows where they lie instead of a packed panel: B's columns
    contiguous and at most one tile of rows (a matrix-vector product, a batch smaller than MR), so a
    panel would be used once and packing it would only copy B."""
    _, m, _, _ = plan.sizes
    _, _, _, _, sbk, sbn = plan.fast
    return sbn == 1 and m <= t.mr


def _direct_strips(m: int, t: _Tiling):
    """The strip shape for B read in place: wider than NR when the tile has few rows (a matrix-vector
    product's one row: 8 vectors), so that a k step's FMAs are independent chains enough to keep the FMA
    units busy and each B row is read as one longer run; at most half the vector registers hold
    accumulators, and the width divides a column chunk."""
    limit = max(2, (t.registers // 2 - 1) // max(m, 1))
    halves = t.nr // t.vw
    while halves != 1 and halves * 2 <= min(8, limit) and t.nc % (halves * 2 * t.vw) == 0:
        halves *= 2
    return SimpleNamespace(vw=t.vw, nr=halves * t.vw, mr=t.mr)


def _packs_while_computing(plan: DotPlan, t: _Tiling) -> bool:
    """Whether a row chunk's first tile packs B's panel strip by strip as its microkernel reads B
    (_microkernel(packs=True)), instead of a packer copying the whole KC x NC block before any FMA: B's
    columns contiguous (its rows load as vectors) and packed (more than one tile of rows). The block's
    reads from beyond L2 then overlap the first tile's FMAs (64x1024x1024 f32, one worker: 1.44 -> 1.28
    ms), and every further tile reads the panel."""
    _, _, _, _, _, sbn = plan.fast
    return sbn == 1 and not _reads_b_in_place(plan, t)


def _copies_a(plan: DotPlan, st) -> bool:
    """Whether each tile's rows of A are copied for its strips to read (rows a cache line longer than KC,
    _copy_rows) instead of read where they lie: A's k elements contiguous, its rows a multiple of 4 KiB
    apart (1024 floats), and more than one strip to read them. Such rows all fall in one set of a
    set-associative L1 (4 KiB x the ways), so a tile's 12 rows evict each other at every k step and each
    broadcast comes from L2 (64x1024x1024 f32, one worker: 1.28 -> 1.22 ms)."""
    batch, m, n, k = plan.sizes
    _, sam, sak, _, _, _ = plan.fast
    return sak == 1 and (sam * plan.dtype.itemsize) % 4096 == 0 and n > st.nr and m > 1


# A's bytes from which it is taken to lie beyond L2 between its uses (_prefetches_a): an L2 of 1-2 MiB
# (Zen 4, recent Xeons) also holds B's panel and C's tiles.
A_BEYOND_L2_BYTES = 1 << 20


def _prefetches_a(plan: DotPlan, t: _Tiling) -> bool:
    """Whether each tile prefetches the next tile's rows of A (_prefetch_next_tile): A's k elements
    contiguous (whole cache lines), more than one tile of rows, and A too large to stay in L2 (a smaller
    one is read from L2, where the prefetches only cost: 256 x 256 x 256 f32, one worker, 291 -> 298 us)."""
    batch, m, _, k = plan.sizes
    _, _, sak, _, _, _ = plan.fast
    return sak == 1 and m > t.mr and batch * m * k * plan.dtype.itemsize >= A_BEYOND_L2_BYTES


def _prefetch_next_tile(b: ir.IRBuilder, ty, plan: DotPlan, t: _Tiling, a_tile, row, m_end, kc) -> None:
    """Prefetches into L2 (prefetcht1) the cache lines of the next tile's rows of A in this k block (the
    MR rows after `row`, within the chunk), while this tile's strips run: a tile's A comes from beyond L2
    (1024 x 1024: the item's 264 rows x 1 KiB of each k block), and its copy or first strip would wait on
    12 streams that each start cold. Each row's lines, A's k elements contiguous (_prefetches_a)."""
    _, sam, _, _, _, _ = plan.fast
    per_line = 64 // plan.dtype.itemsize
    nxt = b.add(row, const64(t.mr))
    rows = _min(b, b.sub(m_end, nxt), const64(t.mr))
    base = b.gep(a_tile, [const64(t.mr * sam)], source_etype=ty)
    lines = b.udiv(b.add(kc, const64(per_line - 1)), const64(per_line))

    def row_lines(i):
        start = b.gep(base, [b.mul(i, const64(sam))], source_etype=ty)
        for_range(b, 0, lines, lambda j: prefetch(b, b.gep(start, [b.mul(j, const64(per_line))], source_etype=ty), 2),
                  name="pfj")
        prefetch(b, b.gep(start, [b.sub(kc, const64(1))], source_etype=ty), 2)  # a row not line-aligned

    for_range(b, 0, rows, row_lines, name="pfi")


def _copy_rows(b: ir.IRBuilder, ty, src, src_ld: int, dst, dst_ld: int, rows, count) -> None:
    """dst[i * dst_ld + j] = src[i * src_ld + j] for i < rows, j < count (rows of contiguous elements)."""
    def row(i):
        s = b.gep(src, [b.mul(i, const64(src_ld))], source_etype=ty)
        d = b.gep(dst, [b.mul(i, const64(dst_ld))], source_etype=ty)
        for_range(b, 0, count, lambda j: b.store(b.load(b.gep(s, [j], source_etype=ty), typ=ty),
                                                 b.gep(d, [j], source_etype=ty)), name="cj")

    for_range(b, 0, rows, row, name="ci")


def _k_contiguous(plan: DotPlan, t: _Tiling) -> bool:
    """B's k elements are contiguous and its columns are not (B read transposed: x @ w.T, a backward
    pass's cotangent times a weight): the panels are packed by vector transposes (vw a power of two)."""
    _, _, _, _, sbk, sbn = plan.fast
    return sbk == 1 and sbn != 1 and t.vw > 1 and t.vw & (t.vw - 1) == 0


def _transpose_block(b: ir.IRBuilder, rows: list, vw: int) -> list:
    """The vw x vw block whose rows are the vectors `rows`, transposed: log2(vw) rounds of interleaving
    row i with row i + vw/2 (low halves to row 2i, high halves to row 2i + 1)."""
    half = vw // 2
    lo = ir.Constant(ir.VectorType(ir.IntType(32), vw), [x for i in range(half) for x in (i, vw + i)])
    hi = ir.Constant(ir.VectorType(ir.IntType(32), vw), [x for i in range(half, vw) for x in (i, vw + i)])
    for _ in range(vw.bit_length() - 1):
        out = []
        for i in range(half):
            out.append(b.shuffle_vector(rows[i], rows[i + half], lo))
            out.append(b.shuffle_vector(rows[i], rows[i + half], hi))
        rows = out
    return rows


def _transposing_packer(module: ir.Module, ty, t: _Tiling) -> ir.Function:
    """pack(B, sbk, sbn, kc, n_count, panel) for B whose k elements are contiguous (sbk == 1): the panel
    _packer writes (NR-wide strips, k-major, zero-padded columns), each full strip built from vw x vw
    blocks loaded as vw vectors along k (one per column) and transposed in registers; a partial strip
    and the k rows after the last whole block are copied element by element."""
    name = f"kiln.packt.{'f32' if ty == F32 else 'f64'}.{t.nr}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    scalar = _packer(module, ty, t)
    fn, b = _internal_function(module, name, PACK_ARGS, noalias=(0, 5))
    src, sbk, sbn, kc, n_count, panel = fn.args
    vw = t.vw
    vec = ir.VectorType(ty, vw)
    align = ty_align(ty)
    full_strips = b.udiv(n_count, const64(t.nr))
    kc_blocks = b.udiv(kc, const64(vw))
    kc_done = b.mul(kc_blocks, const64(vw))

    def strip(s):
        col0 = b.mul(s, const64(t.nr))
        dst_strip = b.gep(panel, [b.mul(s, const64(KC * t.nr))], source_etype=ty)

        def k_block(kb):
            k0 = b.mul(kb, const64(vw))
            for jb in range(t.nr // vw):
                rows = [b.load(b.gep(src, [b.add(b.mul(b.add(col0, const64(jb * vw + r)), sbn), k0)], source_etype=ty),
                               typ=vec, align=align) for r in range(vw)]
                for c, v in enumerate(_transpose_block(b, rows, vw)):
                    dst = b.gep(dst_strip, [b.add(b.mul(b.add(k0, const64(c)), const64(t.nr)), const64(jb * vw))],
                                source_etype=ty)
                    b.store(v, dst, align=align)

        for_range(b, 0, kc_blocks, k_block, name="kb")

        def k_row(kk):
            dst_row = b.gep(dst_strip, [b.mul(kk, const64(t.nr))], source_etype=ty)

            def copy(j):
                v = b.load(b.gep(src, [b.add(b.mul(b.add(col0, j), sbn), kk)], source_etype=ty), typ=ty)
                b.store(v, b.gep(dst_row, [j], source_etype=ty))

            for_range(b, 0, t.nr, copy, name="j")

        for_range(b, kc_done, kc, k_row, name="kt")

    for_range(b, 0, full_strips, strip, name="s")
    # The partial strip (n_count % nr columns), if any: the element-wise packer on it alone.
    rest = b.sub(n_count, b.mul(full_strips, const64(t.nr)))
    with b.if_then(b.icmp_unsigned("!=", rest, const64(0))):
        last = b.mul(full_strips, const64(t.nr))
        b.call(scalar, [b.gep(src, [b.mul(last, sbn)], source_etype=ty), sbk, sbn, kc, rest,
                        b.gep(panel, [b.mul(full_strips, const64(KC * t.nr))], source_etype=ty)])
    b.ret_void()
    return fn


def _microkernel(module: ir.Module, ty, t: _Tiling, mr: int, packs: bool = False) -> ir.Function:
    """C[0:mr, 0:cols] (+)= A[0:mr, 0:kc] @ B strip (kc rows of NR, ldb apart: a packed panel's strip or
    B's rows in place), accumulators in vector registers. With `packs`, a last argument `dst` receives the
    strip packed (row kk of the strip at dst + kk * NR) as each row is read, and the rows
    PACK_PREFETCH_ROWS ahead are prefetched (the strip is full: cols == NR)."""
    tag = "f32" if ty == F32 else "f64"
    name = f"kiln.micro.{tag}.{mr}x{t.nr}" + (".pack" if packs else "")
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    vec = ir.VectorType(ty, t.vw)
    halves = t.nr // t.vw
    arg_types = [PTR, I64, I64, PTR, I64, PTR, I64, I64, I1, I64] + ([PTR] if packs else [])
    fn, b = _internal_function(module, name, arg_types, noalias=(0, 3, 5, 10) if packs else (0, 3, 5))
    a_ptr, sam, sak, strip, ldb, c_ptr, ldc, kc, load_c, cols = fn.args[:10]
    accs = [[b.alloca(vec, name=f"acc{i}_{j}") for j in range(halves)] for i in range(mr)]
    tile = b.alloca(ty, size=const64(mr * t.nr), name="tile")
    full = b.icmp_unsigned("==", cols, const64(t.nr))
    zero = ir.Constant(vec, None)
    align = ty_align(ty)
    for row in accs:
        for acc in row:
            b.store(zero, acc)

    def c_elem(i, c):
        return b.gep(c_ptr, [b.add(b.mul(const64(i), ldc), c)], source_etype=ty)

    def tile_elem(i, c):
        return b.gep(tile, [b.add(const64(i * t.nr), c)], source_etype=ty)

    def load_full():
        for i in range(mr):
            for j in range(halves):
                ptr = c_elem(i, const64(j * t.vw))
                b.store(b.load(ptr, typ=vec, align=align), accs[i][j])

    def load_partial():
        for i in range(mr):
            for_range(b, 0, cols, lambda c, i=i: b.store(b.load(c_elem(i, c), typ=ty), tile_elem(i, c)), name="lc")
            for j in range(halves):
                merged = ir.Constant(vec, None)
                for lane in range(t.vw):
                    col = j * t.vw + lane
                    inside = b.icmp_signed("<", const64(col), cols)
                    v = b.select(inside, b.load(tile_elem(i, const64(col)), typ=ty), ir.Constant(ty, 0.0))
                    merged = b.insert_element(merged, v, ir.Constant(I64, lane))
                b.store(merged, accs[i][j])

    def store_full():
        for i in range(mr):
            for j in range(halves):
                b.store(b.load(accs[i][j]), c_elem(i, const64(j * t.vw)), align=align)

    def store_partial():
        for i in range(mr):
            for j in range(halves):
                value = b.load(accs[i][j])
                for lane in range(t.vw):
                    b.store(b.extract_element(value, ir.Constant(I64, lane)), tile_elem(i, const64(j * t.vw + lane)))
            for_range(b, 0, cols, lambda c, i=i: b.store(b.load(tile_elem(i, c), typ=ty), c_elem(i, c)), name="sc")

    def full_or_partial(on_full, on_partial):
        if packs:  # a packing kernel's strip is full: no code for a partial one
            on_full()
            return
        with b.if_else(full) as (then, otherwise):
            with then:
                on_full()
            with otherwise:
                on_partial()

    with b.if_then(load_c):
        full_or_partial(load_full, load_partial)

    def k_step(kk):
        row = b.gep(strip, [b.mul(kk, ldb)], source_etype=ty)
        bvecs = [b.load(b.gep(row, [const64(j * t.vw)], source_etype=ty), typ=vec, align=align) for j in range(halves)]
        if packs:
            ahead = b.gep(strip, [b.mul(b.add(kk, const64(PACK_PREFETCH_ROWS)), ldb)], source_etype=ty)
            per_line = 64 // (4 if ty == F32 else 8)
            for j in range(0, t.nr, per_line):
                prefetch(b, b.gep(ahead, [const64(j)], source_etype=ty))
            packed = b.gep(fn.args[10], [b.mul(kk, const64(t.nr))], source_etype=ty)
            for j in range(halves):
                b.store(bvecs[j], b.gep(packed, [const64(j * t.vw)], source_etype=ty), align=align)
        for i in range(mr):
            a = b.load(b.gep(a_ptr, [b.add(b.mul(const64(i), sam), b.mul(kk, sak))], source_etype=ty), typ=ty)
            splat = b.shuffle_vector(b.insert_element(ir.Constant(vec, None), a, ir.Constant(I64, 0)),
                                     ir.Constant(vec, None), ir.Constant(ir.VectorType(ir.IntType(32), t.vw), [0] * t.vw))
            for j in range(halves):
                b.store(fmuladd(b, splat, bvecs[j], b.load(accs[i][j])), accs[i][j])

    for_range(b, 0, kc, k_step, name="k")
    full_or_partial(store_full, store_partial)
    b.ret_void()
    return fn


def ty_align(ty) -> int:
    return 4 if ty == F32 else 8
