"""Kernels of the native triangular factorizations (kiln.lax._linalg_native): Cholesky, triangular solve
and LU with partial pivoting of a batch of real float32/float64 matrices. The `linalg` kernel strategy's
code: plan(region, target) -> (emit, parallel items, work, detail).

One dispatch per call; the workgroups split the batch of matrices (parallel items = batch size), and each
matrix is factored by one workgroup, in its output buffer:

- operands are read through their strided views (region_views: a transposed or sliced operand costs no
  copy); the first step copies the operand into the output buffer (Cholesky: its lower triangle,
  transposed into the upper one), every later step works on that contiguous row-major buffer;
- the inner loops run over contiguous rows in explicit vectors of the target's width (llvm.fmuladd on
  <W x float>), with a scalar tail;
- Cholesky and LU are blocked right-looking factorizations (LAPACK's potrf/getrf structure) with panels of
  PANEL rows/columns: the panel is factored with rank-1 updates, then the trailing matrix takes one rank-PANEL
  update per row, each output vector loaded and stored once for PANEL fused multiply-adds.

Cholesky works on U = L^T (A = U^T U), whose rows are L's columns: a row of U is finished by one scaling
and its trailing update is a contiguous row operation; U is transposed into L at the end. A diagonal entry
that is not positive (or NaN) fails the matrix: its factor is all NaN, as JAX's. LU chooses the first
largest |entry| of the column as pivot (NaN first, as argmax), swaps whole rows, leaves a zero pivot's
column unscaled (divides by 1), as the composite's implementation and LAPACK's getrf do. The triangular
solve reads only a's triangle (not its diagonal with unit_diagonal) and divides by the diagonal as it is.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from ..layout import region_views
from .intrinsics import call_unary, fmuladd
from .loops import const64, delinearize, for_range, local_var, workgroup_slice
from .types import F32, F64, I1, I32, I64

PANEL = 8
"""Rows (Cholesky) or columns (LU) per panel of the blocked factorizations: the rank of the trailing update."""


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


class _Code:
    """Scalar and vector memory access and arithmetic of one float type at the target's vector width."""

    def __init__(self, b: ir.IRBuilder, dtype, vector_bytes: int):
        self.b = b
        self.dtype = np.dtype(dtype)
        self.ty = F32 if self.dtype == np.float32 else F64
        self.size = self.dtype.itemsize
        self.vw = max(vector_bytes // self.size, 1)
        self.vec = ir.VectorType(self.ty, self.vw)

    def const(self, value: float) -> ir.Constant:
        return ir.Constant(self.ty, float(value))

    def ptr(self, base, offset):
        return self.b.gep(base, [offset], inbounds=True, source_etype=self.ty)

    def load(self, base, offset):
        return self.b.load(self.ptr(base, offset), typ=self.ty)

    def store(self, value, base, offset):
        self.b.store(value, self.ptr(base, offset))

    def vload(self, base, offset):
        return self.b.load(self.ptr(base, offset), typ=self.vec, align=self.size)

    def vstore(self, value, base, offset):
        self.b.store(value, self.ptr(base, offset), align=self.size)

    def splat(self, x):
        b = self.b
        one = b.insert_element(ir.Constant(self.vec, None), x, ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(self.vec, None), ir.Constant(ir.VectorType(I32, self.vw), [0] * self.vw))

    def gather(self, base, offset, stride: int):
        """A vector of the vw elements at offset + l * stride (one vector load when stride is 1)."""
        if stride == 1:
            return self.vload(base, offset)
        b = self.b
        v = ir.Constant(self.vec, None)
        for lane in range(self.vw):
            v = b.insert_element(v, self.load(base, b.add(offset, const64(lane * stride))), ir.Constant(I32, lane))
        return v

    def hsum(self, v):
        """The lanes of v added in order."""
        b = self.b
        total = b.extract_element(v, ir.Constant(I32, 0))
        for lane in range(1, self.vw):
            total = b.fadd(total, b.extract_element(v, ir.Constant(I32, lane)))
        return total

    def row_loop(self, count, vector_body, scalar_body, name="c"):
        """vector_body(c) for c = 0, vw, ... while c + vw <= count, then scalar_body(c) for the rest (count:
        an i64 value or int)."""
        b = self.b
        count = const64(count) if isinstance(count, int) else count
        vectors = b.udiv(count, const64(self.vw))
        for_range(b, 0, vectors, lambda v: vector_body(b.mul(v, const64(self.vw))), name=f"{name}.v")
        for_range(b, b.mul(vectors, const64(self.vw)), count, scalar_body, name=f"{name}.s")

    def update_row(self, base, dst, sources, coefs, count):
        """base[dst + c] -= sum_t coefs[t] * base[sources[t] + c] for c in [0, count): one load and store of
        the destination per len(coefs) fused multiply-adds."""
        b = self.b
        negs = [b.fneg(c) for c in coefs]
        vnegs = [self.splat(n) for n in negs]

        def vector(c):
            acc = self.vload(base, b.add(dst, c))
            for s, n in zip(sources, vnegs):
                acc = fmuladd(b, n, self.vload(base, b.add(s, c)), acc)
            self.vstore(acc, base, b.add(dst, c))

        def scalar(c):
            acc = self.load(base, b.add(dst, c))
            for s, n in zip(sources, negs):
                acc = fmuladd(b, n, self.load(base, b.add(s, c)), acc)
            self.store(acc, base, b.add(dst, c))

        self.row_loop(count, vector, scalar)

    def scale_row(self, base, dst, divisor, count):
        """base[dst + c] /= divisor for c in [0, count)."""
        b = self.b
        vdiv = self.splat(divisor)
        self.row_loop(count, lambda c: self.vstore(b.fdiv(self.vload(base, b.add(dst, c)), vdiv), base, b.add(dst, c)),
                      lambda c: self.store(b.fdiv(self.load(base, b.add(dst, c)), divisor), base, b.add(dst, c)))

    def swap_rows(self, base, p, q, count):
        """Exchanges base[p + c] and base[q + c] for c in [0, count)."""
        b = self.b

        def vector(c):
            x, y = self.vload(base, b.add(p, c)), self.vload(base, b.add(q, c))
            self.vstore(y, base, b.add(p, c))
            self.vstore(x, base, b.add(q, c))

        def scalar(c):
            x, y = self.load(base, b.add(p, c)), self.load(base, b.add(q, c))
            self.store(y, base, b.add(p, c))
            self.store(x, base, b.add(q, c))

        self.row_loop(count, vector, scalar)


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


# --------------------------------------------------------------------------- Cholesky

def _emit_cholesky(region, target):
    eqn = region.eqns[-1]
    x = eqn.invars[0]
    shape = x.aval.shape
    batch, n = shape[:-2], shape[-1]
    views = region_views(region)
    nb = len(batch)
    items = _prod(batch) if n else 0
    panels, tail = divmod(n, PANEL)

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        code = _Code(b, x.aval.dtype, target.vector_bytes)
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

            # W (upper triangle) = the operand's lower triangle transposed; zeros below the diagonal
            def copy_row(i):
                for_range(b, 0, i, lambda j: code.store(code.const(0), out, at(i, j)), name="z")
                for_range(b, i, nn, lambda j: code.store(code.load(source.ptr, source.offset(b, src, j, i)), out,
                                                         at(i, j)), name="cp")

            for_range(b, 0, nn, copy_row, name="row")

            def factor_panel(k, width: int):
                def row(r):
                    def step():
                        d = code.load(out, at(r, r))
                        ok = b.fcmp_ordered(">", d, code.const(0))
                        with b.if_else(ok) as (then, otherwise):
                            with then:
                                s = call_unary(b, "sqrt", d)
                                code.store(s, out, at(r, r))
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

            def trailing(k, width: int):
                start = b.add(k, const64(width))

                def row(i):
                    rows = [b.add(k, const64(t)) for t in range(width)]
                    code.update_row(out, at(i, i), [at(r, i) for r in rows], [code.load(out, at(r, i)) for r in rows],
                                    b.sub(nn, i))

                _if(b, b.not_(b.load(failed_v)), lambda: for_range(b, start, nn, row, name="tr"))

            def panel(p):
                k = b.mul(p, const64(PANEL))
                factor_panel(k, PANEL)
                trailing(k, PANEL)

            for_range(b, 0, panels, panel, name="panel")
            if tail:
                factor_panel(const64(panels * PANEL), tail)

            with b.if_else(b.load(failed_v)) as (then, otherwise):
                with then:
                    nan = code.const(float("nan"))
                    for_range(b, 0, const64(n * n), lambda e: code.store(nan, out, b.add(w, e)), name="nan")
                with otherwise:
                    # L = U^T: each entry below the diagonal from its mirror, which becomes zero
                    def transpose_row(i):
                        def entry(j):
                            code.store(code.load(out, at(j, i)), out, at(i, j))
                            code.store(code.const(0), out, at(j, i))

                        for_range(b, 0, i, entry, name="tj")

                    for_range(b, 1, nn, transpose_row, name="ti")

        _matrix_loop(b, batch, wid, wcount, matrix)

    work = _prod(batch) * max(n, 1) ** 3 // 3 + _prod(shape)
    return body, items, work, f"panel {PANEL}"


# --------------------------------------------------------------------------- LU

def _emit_lu(region, target):
    eqn = region.eqns[-1]
    x = eqn.invars[0]
    shape = x.aval.shape
    batch, (m, n) = shape[:-2], shape[-2:]
    kmax = min(m, n)
    views = region_views(region)
    nb = len(batch)
    items = _prod(batch) if m and n else _prod(batch) if m else 0
    panels, tail = divmod(kmax, PANEL)
    position = {v.id: k for k, v in enumerate(region.outvars)}
    n_in = len(region.invars)

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        code = _Code(b, x.aval.dtype, target.vector_bytes)
        source = _Operand(views[x.id], pointers, nb)
        out, pivots_out, perm_out = (pointers[n_in + position[v.id]] for v in eqn.outvars)
        best_v = local_var(b, code.ty, code.const(0), "best")
        index_v = local_var(b, I64, const64(0), "index")
        nn = const64(n)

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
                for_range(b, 0, nn, lambda j: code.store(code.load(source.ptr, source.offset(b, src, i, j)), out,
                                                         at(i, j)), name="cp")
                b.store(b.trunc(i, I32), perm_at(i))

            for_range(b, 0, const64(m), copy_row, name="row")
            if n == 0:
                return

            def factor_panel(k, width: int):
                end = b.add(k, const64(width))

                def column(j):
                    # pivot: the first largest |entry| on or below the diagonal (NaN first, as argmax)
                    b.store(call_unary(b, "fabs", code.load(out, at(j, j))), best_v)
                    b.store(j, index_v)

                    def candidate(i):
                        v = call_unary(b, "fabs", code.load(out, at(i, j)))
                        best = b.load(best_v)
                        best_nan = b.fcmp_unordered("uno", best, best)
                        better = b.or_(b.fcmp_ordered(">", v, best), b.fcmp_unordered("uno", v, v))
                        better = b.and_(better, b.not_(best_nan))
                        b.store(b.select(better, v, best), best_v)
                        b.store(b.select(better, i, b.load(index_v)), index_v)

                    for_range(b, b.add(j, const64(1)), const64(m), candidate, name="piv")
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

                    def below(i):
                        factor = b.fdiv(code.load(out, at(i, j)), safe)
                        code.store(factor, out, at(i, j))
                        code.update_row(out, at(i, after), [at(j, after)], [factor], b.sub(end, after))

                    for_range(b, after, const64(m), below, name="l")

                for_range(b, k, end, column, name="j")

            def update_right(k, width: int):
                """U12 = L11^-1 A12 (rows of the panel, right of it), then A22 -= L21 U12."""
                end = b.add(k, const64(width))
                count = b.sub(nn, end)

                def u_row(t):
                    r = b.add(k, t)
                    for_range(b, k, r, lambda s: code.update_row(out, at(r, end), [at(s, end)],
                                                                 [code.load(out, at(r, s))], count), name="u")

                for_range(b, 1, const64(width), u_row, name="ut")
                rows = [b.add(k, const64(t)) for t in range(width)]

                def trailing(i):
                    code.update_row(out, at(i, end), [at(r, end) for r in rows], [code.load(out, at(i, r)) for r in rows],
                                    count)

                for_range(b, end, const64(m), trailing, name="tr")

            def panel(p):
                k = b.mul(p, const64(PANEL))
                factor_panel(k, PANEL)
                update_right(k, PANEL)

            for_range(b, 0, panels, panel, name="panel")
            if tail:
                k = const64(panels * PANEL)
                factor_panel(k, tail)
                if panels * PANEL + tail < n:
                    update_right(k, tail)

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
    items = _prod(batch) if rows and cols else 0
    dtype = rhs.aval.dtype

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        code = _Code(b, dtype, target.vector_bytes)
        mat = _Operand(views[a.id], pointers, nb)
        given = _Operand(views[rhs.id], pointers, nb)
        out = pointers[len(region.invars)]
        ncols = const64(cols)

        def matrix(item, batch_index):
            w = b.mul(item, const64(rows * cols))
            abase, bbase = mat.base(b, batch_index), given.base(b, batch_index)

            def at(i, j):
                return b.add(w, b.add(b.mul(i, ncols), j))

            def t(i, j):
                """op(a)[i, j]."""
                return code.load(mat.ptr, mat.offset(b, abase, i, j, transposed=transpose))

            for_range(b, 0, const64(rows), lambda i: for_range(
                b, 0, ncols, lambda j: code.store(code.load(given.ptr, given.offset(b, bbase, i, j)), out, at(i, j)),
                name="cj"), name="ci")
            if left:
                _left_solve(code, out, at, t, m, cols, lower, unit)
            else:
                _right_solve(code, out, at, mat, abase, m, rows, lower, transpose, unit)

        _matrix_loop(b, batch, wid, wcount, matrix)

    work = _prod(batch) * m * m * (cols if left else rows) // 2 + _prod(shape)
    return body, items, work, "left" if left else "right"


def _order(b, m: int, forward: bool, body):
    """body(i) for i = 0 .. m-1 (forward) or m-1 .. 0."""
    if forward:
        for_range(b, 0, m, body, name="i")
    else:
        for_range(b, 0, m, lambda s: body(b.sub(const64(m - 1), s)), name="i")


def _left_solve(code: _Code, out, at, t, m: int, k: int, lower: bool, unit: bool):
    """op(a) X = B for X (m x k) in place: row i of X is (B[i] - sum_t op(a)[i, t] X[t]) / op(a)[i, i] over
    the rows t solved before it, accumulated in vectors across X's columns (several accumulators over t
    when the columns are few)."""
    b = code.b
    group = 4 * code.vw  # columns per pass of the runtime column loop
    full_groups, rest = divmod(k, group)

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
            return b.shuffle_vector(one, ir.Constant(ty, None), ir.Constant(ir.VectorType(I32, ty.count), [0] * ty.count))

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

        _order(b, m, lower, row)

    if full_groups:
        chunks = [(c, code.vw) for c in range(0, group, code.vw)]
        for_range(b, 0, full_groups, lambda g: solve_pass(b.mul(g, const64(group)), chunks), name="g")
    if rest:
        solve_pass(const64(full_groups * group), _column_chunks(rest, code.vw))


def _right_solve(code: _Code, out, at, mat: _Operand, abase, m: int, rows: int, lower: bool, transpose: bool,
                 unit: bool):
    """X op(a) = B, each row x of X (length m) in place: op(a) upper is solved forward, lower backward.
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
                    code.store(value, out, x_at(j))
                neg = b.fneg(value)
                vneg = code.splat(neg)
                lo = b.add(j, const64(1)) if forward else const64(0)
                count = b.sub(const64(m), lo) if forward else j

                def vector(c):
                    col = b.add(lo, c)
                    acc = code.vload(out, x_at(col))
                    code.vstore(fmuladd(b, vneg, code.gather(mat.ptr, t_offset(j, col), along), acc), out, x_at(col))

                def scalar(c):
                    col = b.add(lo, c)
                    acc = code.load(out, x_at(col))
                    code.store(fmuladd(b, neg, t(j, col), acc), out, x_at(col))

                code.row_loop(count, vector, scalar, name="ax")

            _order(b, m, forward, step)
        else:
            acc_v = local_var(b, code.vec, ir.Constant(code.vec, None), "dot")
            sum_v = local_var(b, code.ty, code.const(0), "dots")

            def step(j):
                lo = const64(0) if forward else b.add(j, const64(1))
                count = j if forward else b.sub(const64(m), lo)
                b.store(ir.Constant(code.vec, [0.0] * code.vw), acc_v)
                b.store(code.const(0), sum_v)

                def vector(c):
                    s = b.add(lo, c)
                    b.store(fmuladd(b, code.vload(out, x_at(s)), code.vload(mat.ptr, t_offset(s, j)), b.load(acc_v)),
                            acc_v)

                def scalar(c):
                    s = b.add(lo, c)
                    b.store(fmuladd(b, code.load(out, x_at(s)), t(s, j), b.load(sum_v)), sum_v)

                code.row_loop(count, vector, scalar, name="dt")
                total = b.fadd(code.hsum(b.load(acc_v)), b.load(sum_v))
                value = b.fsub(code.load(out, x_at(j)), total)
                d = diag(j)
                if d is not None:
                    value = b.fdiv(value, d)
                code.store(value, out, x_at(j))

            _order(b, m, forward, step)

    for_range(b, 0, const64(rows), one_row, name="xr")


_EMITTERS = {"cholesky": _emit_cholesky, "lu": _emit_lu, "triangular_solve": _emit_triangular_solve}


def plan(region, target):
    """(body emitter, parallel items, work, detail) of a linalg region's kernel for `target`."""
    eqn = region.eqns[-1]
    dtype = np.dtype(eqn.invars[0].aval.dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"the linalg kernels compute float32 and float64, not {dtype} ({eqn.primitive.name})")
    return _EMITTERS[eqn.primitive.kernel_kind](region, target)


__all__ = ["PANEL", "plan"]
