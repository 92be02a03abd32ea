"""The native symmetric eigendecomposition kernel (the `eigh` kernel strategy): the code of the primitive
eigh_ql (kiln.lax._eigh_ql, whose docstring gives the algorithm and whose numpy mirror is the eager
implementation).

Each workgroup takes a slice of the batch's matrices. One matrix lives in its eigenvector output (n x n,
row-major), its eigenvalues in the eigenvalue output, and WORK_VECTORS vectors of n + WORK_PAD scalars (the
subdiagonal, the Householder update's q, the zero-padded reflector u, a QL sweep's cosines and sines) in
a stack slot of the kernel. The eigenvectors are kept as rows until the final in-place transpose, so every
O(n^3) loop runs over contiguous memory with explicit vectors of the target's width (at most n):

- tridiagonalization and accumulation of Q: the reflector copied to u, zero-padded to whole vectors, so
  the leading block's rows are processed over whole vectors (no scalar tails; the columns past the block
  get zero terms), four rows at a time sharing each load of u and q (dots_padded, updates_padded);
- QL: each sweep's rotations applied after the sweep over column strips of four vectors held in
  registers, row i+1 carried from one rotation to the next (rotate_rows).

The region's operand is read through its View, so a transposed, broadcast or batched layout feeding the
kernel costs no copy.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..layout import region_views
from .intrinsics import call_unary, fmuladd
from .loops import const64, delinearize, dot_offsets, for_range, while_loop, workgroup_slice
from .region_eval import load_view
from ...lax._eigh_ql import MAX_ITERATIONS, MAX_STACK_BYTES, WORK_PAD, WORK_VECTORS, stack_fits
from .types import I1
from .vector_code import VectorCode


def _eqn(region):
    return next(e for e in region.eqns if e.primitive.name == "eigh_ql")


class _Emitter(VectorCode):
    """VectorCode with the eigh kernel's own operations (safe hypot, dots, padded row updates, QL rotations)."""

    def __init__(self, b: ir.IRBuilder, dtype, lanes: int):
        super().__init__(b, dtype, lanes)
        fi = np.finfo(self.dtype)
        self.safe_low, self.safe_high = float(fi.tiny / fi.eps), float(fi.max / 2)

    def pythag(self, x, y):
        """sqrt(x^2 + y^2) without overflow or destructive underflow: the plain formula where x^2 + y^2 is
        in [tiny / eps, huge / 2] (nothing lost to underflow, no overflow), else m sqrt(1 + (small / m)^2)
        (0 when both are 0). The same choice as kiln.lax._eigh_ql._pythag."""
        b = self.b
        t = fmuladd(b, x, x, b.fmul(y, y))
        result = self.var(self.sqrt(t), "hypot")
        fine = b.and_(b.fcmp_ordered(">=", t, self.const(self.safe_low)), b.fcmp_ordered("<=", t, self.const(self.safe_high)))
        with b.if_then(b.not_(fine), likely=False):
            ax, ay = self.fabs(x), self.fabs(y)
            x_big = b.fcmp_ordered(">", ax, ay)
            big = b.select(x_big, ax, ay)
            small = b.select(x_big, ay, ax)
            zero = b.fcmp_ordered("==", big, self.const(0))
            ratio = b.fdiv(small, b.select(zero, self.const(1), big))
            root = b.fmul(big, self.sqrt(fmuladd(b, ratio, ratio, self.const(1))))
            b.store(b.select(zero, self.const(0), root), result)
        return b.load(result)

    # ---- vector loops over [0, length) -----------------------------------------------------------------
    def vloop(self, length, vector_body, scalar_body, name):
        """vector_body(k) for k = 0, lanes, ... while k + lanes <= length; scalar_body(k) for the rest."""
        b = self.b
        chunks = b.udiv(length, const64(self.lanes))
        for_range(b, const64(0), chunks, lambda c: vector_body(b.mul(c, const64(self.lanes))), name=f"{name}.v")
        for_range(b, b.mul(chunks, const64(self.lanes)), length, scalar_body, name=f"{name}.s")

    def dot(self, x, xo, y, yo, length, name="dot", absolute=False):
        """sum_k x[xo + k] * y[yo + k] over [0, length) (absolute: sum_k |x[xo + k]|; y unused): four
        vector accumulators over blocks of 4 vectors, one over the remaining vectors, a scalar tail."""
        b = self.b
        zero_v = ir.Constant(self.vec, [0.0] * self.lanes)
        accs = [self.var(zero_v, f"{name}.acc{u}") for u in range(4)]
        tail = self.var(self.const(0), f"{name}.tail")
        step = const64(4 * self.lanes)

        def term(acc, k):
            xv = self.vload(x, b.add(xo, k))
            if absolute:
                b.store(b.fadd(b.load(acc), call_unary(b, "fabs", xv)), acc)
            else:
                b.store(fmuladd(b, xv, self.vload(y, b.add(yo, k)), b.load(acc)), acc)

        def block(c):
            k0 = b.mul(c, step)
            for u in range(4):
                term(accs[u], b.add(k0, const64(u * self.lanes)))

        blocks = b.udiv(length, step)
        for_range(b, const64(0), blocks, block, name=f"{name}.b")
        rest = b.sub(length, b.mul(blocks, step))
        start = b.mul(blocks, step)

        def sca(k):
            xs = self.load(x, b.add(xo, k))
            if absolute:
                b.store(b.fadd(b.load(tail), self.fabs(xs)), tail)
            else:
                b.store(fmuladd(b, xs, self.load(y, b.add(yo, k)), b.load(tail)), tail)

        vectors = b.udiv(rest, const64(self.lanes))
        for_range(b, const64(0), vectors, lambda c: term(accs[0], b.add(start, b.mul(c, const64(self.lanes)))),
                  name=f"{name}.v")
        for_range(b, b.add(start, b.mul(vectors, const64(self.lanes))), length, sca, name=f"{name}.s")
        total = b.fadd(b.fadd(b.load(accs[0]), b.load(accs[1])), b.fadd(b.load(accs[2]), b.load(accs[3])))
        return b.fadd(self.hsum(total), b.load(tail))

    def dots_padded(self, z, offsets, u, plen, name):
        """[sum_k z[o + k] u[k] for o in offsets] over [0, plen), plen a multiple of the vector width: the
        rows share each load of u and sum in independent accumulators."""
        b = self.b
        zero_v = ir.Constant(self.vec, [0.0] * self.lanes)
        accs = [self.var(zero_v, f"{name}.acc{t}") for t in range(len(offsets))]

        def vec(c):
            k = b.mul(c, const64(self.lanes))
            uv = self.vload(u, k)
            for acc, o in zip(accs, offsets):
                b.store(fmuladd(b, self.vload(z, b.add(o, k)), uv, b.load(acc)), acc)

        for_range(b, const64(0), b.udiv(plen, const64(self.lanes)), vec, name=name)
        return [self.hsum(b.load(acc)) for acc in accs]

    def updates_padded(self, z, offsets, terms, plen, name):
        """z[o + k] -= sum over (alpha, x) in terms[row] of alpha x[k], for each row offset o, over [0, plen)
        (a multiple of the vector width); the vectors x are loaded once for all the rows."""
        b = self.b
        sources = list(dict.fromkeys(x for row in terms for _, x in row))
        negs = [[(self.splat(b.fneg(alpha)), x) for alpha, x in row] for row in terms]

        def vec(c):
            k = b.mul(c, const64(self.lanes))
            loaded = {x: self.vload(x, k) for x in sources}
            for o, row in zip(offsets, negs):
                at = b.add(o, k)
                value = self.vload(z, at)
                for alpha, x in row:
                    value = fmuladd(b, alpha, loaded[x], value)
                self.vstore(z, at, value)

        for_range(b, const64(0), b.udiv(plen, const64(self.lanes)), vec, name=name)

    def rotate_rows(self, z, n, cs, ss, lo, hi):
        """The rotations i = hi-1, hi-2, ..., lo of one QL sweep applied to rows lo..hi of z (row-major,
        n columns): rotation i maps (z_i, z_{i+1}) to (c_i z_i - s_i z_{i+1}, s_i z_i + c_i z_{i+1}).
        Column blocks held in registers: row i+1's running value is carried from one rotation to the
        next, so each rotation loads and stores one row (LAPACK's dlasr, register-blocked)."""
        b = self.b
        N = const64(n)
        width = 4 * self.lanes
        groups = []  # (first column, [element types of the block's parts]) with static columns
        col = 0
        while col + width <= n:
            groups.append((col, [self.vec] * 4))
            col += width
        rest_vectors = (n - col) // self.lanes
        if rest_vectors:
            groups.append((col, [self.vec] * rest_vectors))
            col += rest_vectors * self.lanes
        if col < n:
            groups.append((col, [self.ty] * (n - col)))
        count = b.sub(hi, lo)
        for first, parts in groups:
            offsets, at = [], first
            for ty in parts:
                offsets.append(at)
                at += self.lanes if ty is self.vec else 1
            scalar = parts[0] is self.ty

            def load(row, off, scalar=scalar):
                index = b.add(b.mul(row, N), const64(off))
                return self.load(z, index) if scalar else self.vload(z, index)

            def store(row, off, value, scalar=scalar):
                index = b.add(b.mul(row, N), const64(off))
                (self.store if scalar else self.vstore)(z, index, value)

            def blocks_loop(first=first, parts=parts, offsets=offsets, scalar=scalar, load=load, store=store):
                carries = [self.var(load(hi, off), "carry") for off in offsets]

                def rotation(t):
                    i = b.sub(b.sub(hi, const64(1)), t)
                    c, s = self.load(cs, i), self.load(ss, i)
                    if not scalar:
                        c, s = self.splat(c), self.splat(s)
                    ns = b.fneg(s)
                    i1 = b.add(i, const64(1))
                    for carry, off in zip(carries, offsets):
                        zi, zj = load(i, off), b.load(carry)
                        store(i1, off, fmuladd(b, s, zi, b.fmul(c, zj)))
                        b.store(fmuladd(b, ns, zj, b.fmul(c, zi)), carry)

                for_range(b, const64(0), count, rotation, name="rot")
                for carry, off in zip(carries, offsets):
                    store(lo, off, b.load(carry))

            blocks_loop()


def plan(region, target):
    """(body emitter, parallel items, work) of an eigh_ql region's kernel: one item per matrix."""
    eqn = _eqn(region)
    (x,) = eqn.invars
    lower, sort = eqn.params["lower"], eqn.params["sort_eigenvalues"]
    shape = x.aval.shape
    dtype = np.dtype(x.aval.dtype)
    n = shape[-1]
    batch_shape = tuple(shape[:-2])
    count = int(np.prod(batch_shape, dtype=np.int64))
    if not stack_fits(n, dtype):
        raise ValueError(f"eigh_ql: {n}x{n} {dtype} matrices need more than {MAX_STACK_BYTES} bytes of stack "
                         "(eigh uses Jacobi for them)")
    views = region_views(region)
    if not hasattr(x, "id") or x.id not in views:
        raise ValueError(f"eigh_ql: the operand {x} is not a value the kernel can read through a View")
    view = views[x.id]
    n_in = len(region.invars)
    out_index = {v.id: k for k, v in enumerate(region.outvars)}
    if any(o.id not in out_index for o in eqn.outvars):
        raise ValueError("eigh_ql: the kernel writes both results (its eigenvectors are its workspace), but the "
                         "region does not output both")
    v_out, w_out = (n_in + out_index[o.id] for o in eqn.outvars)
    lanes = max(1, min(target.vector_bytes // dtype.itemsize, WORK_PAD, 1 << (max(n, 1).bit_length() - 1)))
    eps = float(np.finfo(dtype).eps)
    huge = float(np.finfo(dtype).max)

    def body(b, pointers, wid, wcount):
        if count == 0 or n == 0:
            return
        g = _Emitter(b, dtype, lanes)
        T = g.ty
        stride = n + WORK_PAD
        work = b.alloca(T, size=const64(WORK_VECTORS * stride), name="work")
        e_vec, q_vec, u_vec, c_vec, s_vec = (b.gep(work, [const64(k * stride)], inbounds=True, source_etype=T)
                                             for k in range(WORK_VECTORS))
        lo, hi = workgroup_slice(b, count, wid, wcount)

        def matrix(m):
            z = b.gep(pointers[v_out], [b.mul(m, const64(n * n))], inbounds=True, source_etype=T)
            d = b.gep(pointers[w_out], [b.mul(m, const64(n))], inbounds=True, source_etype=T)
            bad = g.var(ir.Constant(I1, 0), "bad")
            _load(g, z, m, bad, pointers, view, batch_shape, n, lower, huge)
            with b.if_then(b.not_(b.load(bad))):
                _solve(g, z, d, e_vec, q_vec, u_vec, c_vec, s_vec, bad, n, sort, eps)
            with b.if_then(b.load(bad)):
                nan = g.const(float("nan"))
                for_range(b, const64(0), const64(n * n), lambda k: g.store(z, k, nan), name="nanz")
                for_range(b, const64(0), const64(n), lambda k: g.store(d, k, nan), name="nand")

        for_range(b, lo, hi, matrix, name="mat")

    work = max(1, count) * (10 * n ** 3 + 40 * n * n)
    return body, count, work


def _load(g: _Emitter, z, m, bad, pointers, view, batch_shape, n, lower, huge):
    """The triangle of matrix m into z as a full symmetric matrix divided by its largest |entry|; bad
    set when an entry is NaN or infinite."""
    b = g.b
    amax = g.var(g.const(0), "amax")
    prefix = delinearize(b, m, batch_shape) if batch_shape else []

    def read(i, j):
        index = prefix + ([i, j] if lower else [j, i])
        return load_view(b, view, dot_offsets(b, index, view.strides, const64(view.offset)), pointers)

    def row(i):
        def col(j):
            a = read(i, j)
            g.store(z, b.add(b.mul(i, const64(n)), j), a)
            g.store(z, b.add(b.mul(j, const64(n)), i), a)
            absa = g.fabs(a)
            b.store(b.or_(b.load(bad), b.fcmp_unordered(">", absa, g.const(huge))), bad)
            old = b.load(amax)
            b.store(b.select(b.fcmp_ordered(">", absa, old), absa, old), amax)

        for_range(b, const64(0), b.add(i, const64(1)), col, name="ldj")

    for_range(b, const64(0), const64(n), row, name="ldi")
    with b.if_then(b.not_(b.load(bad))):
        mx = b.load(amax)
        scale = b.select(b.fcmp_ordered("==", mx, g.const(0)), g.const(1), mx)
        b.store(scale, amax)

        def vec(k):
            g.vstore(z, k, b.fdiv(g.vload(z, k), g.splat(scale)))

        def sca(k):
            g.store(z, k, b.fdiv(g.load(z, k), scale))

        g.vloop(const64(n * n), vec, sca, "scale")
    g.scale_slot = amax


def _solve(g: _Emitter, z, d, e, q, u, cs, ss, bad, n, sort, eps):
    b = g.b
    _tridiagonalize(g, z, d, e, q, u, n)
    _accumulate(g, z, d, u, n)
    _ql(g, z, d, e, cs, ss, bad, n, eps)
    with b.if_then(b.not_(b.load(bad))):
        scale = b.load(g.scale_slot)
        for_range(b, const64(0), const64(n), lambda k: g.store(d, k, b.fmul(g.load(d, k), scale)), name="unscale")
        if sort:
            _sort(g, z, d, n)
        _transpose(g, z, n)


def _padded(g: _Emitter, length):
    """length rounded up to a multiple of the vector width."""
    b = g.b
    lanes = const64(g.lanes)
    return b.mul(b.udiv(b.add(length, const64(g.lanes - 1)), lanes), lanes)


def _copy_padded(g: _Emitter, z, row, length, plen, u):
    """u[0:length] = z[row + 0 : row + length], u[length:plen] = 0."""
    b = g.b
    for_range(b, const64(0), length, lambda k: g.store(u, k, g.load(z, b.add(row, k))), name="ucopy")
    for_range(b, length, plen, lambda k: g.store(u, k, g.const(0)), name="upad")


ROW_BLOCK = 4
"""Rows of the leading block handled together by the tridiagonalization's and accumulation's loops."""


def _row_blocks(g: _Emitter, count, body, name):
    """body(first_row, ROW_BLOCK) over rows [0, count) in blocks, then body(row, 1) for the rest."""
    b = g.b
    blocks = b.udiv(count, const64(ROW_BLOCK))
    for_range(b, const64(0), blocks, lambda k: body(b.mul(k, const64(ROW_BLOCK)), ROW_BLOCK), name=f"{name}.blk")
    for_range(b, b.mul(blocks, const64(ROW_BLOCK)), count, lambda j: body(j, 1), name=f"{name}.one")


def _tridiagonalize(g: _Emitter, z, d, e, q, u, n):
    """Householder reduction, rows n-1 .. 1 (the module docstring of kiln.lax._eigh_ql). The reflector u
    is copied to a zero-padded vector, so the matrix-vector products and rank-2 updates of the leading
    i x i block run over plen = i rounded up to whole vectors: the columns past i get zero terms (they
    hold finite values the later steps overwrite; plen <= n + lanes - 1 stays inside the matrix because
    the vector width is at most n)."""
    b = g.b
    N = const64(n)

    def step(ii):
        i = b.sub(const64(n - 1), ii)
        row_i = b.mul(i, N)
        last = b.add(row_i, b.sub(i, const64(1)))  # z[i, i-1]
        with b.if_else(b.icmp_signed(">=", i, const64(2))) as (reflect, plain):
            with reflect:
                scale = g.dot(z, row_i, None, None, i, "rsum", absolute=True)
                with b.if_else(b.fcmp_ordered("==", scale, g.const(0))) as (zero_row, nonzero):
                    with zero_row:
                        g.store(e, i, g.load(z, last))
                        g.store(d, i, g.const(0))
                    with nonzero:
                        def divide(k):
                            g.store(z, b.add(row_i, k), b.fdiv(g.load(z, b.add(row_i, k)), scale))

                        for_range(b, const64(0), i, divide, name="rdiv")
                        h = g.dot(z, row_i, z, row_i, i, "hsq")
                        f = g.load(z, last)
                        root = g.sqrt(h)
                        gg = b.select(b.fcmp_ordered(">=", f, g.const(0)), b.fneg(root), root)
                        g.store(e, i, b.fmul(scale, gg))
                        h = b.fsub(h, b.fmul(f, gg))
                        g.store(z, last, b.fsub(f, gg))
                        plen = _padded(g, i)
                        _copy_padded(g, z, row_i, i, plen, u)

                        def p_rows(j0, count):
                            rows = [b.add(j0, const64(t)) for t in range(count)]
                            sums = g.dots_padded(z, [b.mul(j, N) for j in rows], u, plen, "pdot")
                            for j, total in zip(rows, sums):
                                g.store(q, j, b.fdiv(total, h))

                        _row_blocks(g, i, p_rows, "prow")
                        for_range(b, i, plen, lambda k: g.store(q, k, g.const(0)), name="qpad")
                        kk = b.fdiv(g.dot(u, const64(0), q, const64(0), plen, "kdot"), b.fadd(h, h))
                        neg_kk = b.fneg(kk)
                        for_range(b, const64(0), i, lambda j: g.store(q, j, fmuladd(b, neg_kk, g.load(u, j), g.load(q, j))),
                                  name="qvec")

                        def update(j0, count):
                            rows = [b.add(j0, const64(t)) for t in range(count)]
                            g.updates_padded(z, [b.mul(j, N) for j in rows],
                                             [[(g.load(q, j), u), (g.load(u, j), q)] for j in rows], plen, "upd")

                        _row_blocks(g, i, update, "urow")
                        g.store(d, i, h)
            with plain:
                g.store(e, i, g.load(z, last))
                g.store(d, i, g.const(0))

    if n >= 2:
        for_range(b, const64(0), const64(n - 1), step, name="tri")
    g.store(d, const64(0), g.const(0))
    g.store(e, const64(0), g.const(0))


def _accumulate(g: _Emitter, z, d, u, n):
    """Q^T in z from the reflectors kept in its rows (each copied to the zero-padded u first, as in
    _tridiagonalize); d gets the tridiagonal matrix's diagonal."""
    b = g.b
    N = const64(n)

    def step(i):
        row_i = b.mul(i, N)
        h = g.load(d, i)
        with b.if_then(b.fcmp_unordered("!=", h, g.const(0))):
            plen = _padded(g, i)
            _copy_padded(g, z, row_i, i, plen, u)

            def apply(r0, count):
                offsets = [b.mul(b.add(r0, const64(t)), N) for t in range(count)]
                sums = g.dots_padded(z, offsets, u, plen, "adot")
                g.updates_padded(z, offsets, [[(b.fdiv(total, h), u)] for total in sums], plen, "aupd")

            _row_blocks(g, i, apply, "arow")
        diag = b.add(row_i, i)
        g.store(d, i, g.load(z, diag))
        g.store(z, diag, g.const(1))

        def clear(j):
            g.store(z, b.add(row_i, j), g.const(0))
            g.store(z, b.add(b.mul(j, N), i), g.const(0))

        for_range(b, const64(0), i, clear, name="clr")

    for_range(b, const64(0), N, step, name="accum")


def _ql(g: _Emitter, z, d, e, cs, ss, bad, n, eps):
    """The implicit QL iterations with Wilkinson's shift (tqli); each sweep's rotations (cs, ss) applied to
    rows of z after the sweep (_Emitter.rotate_rows); bad set when an eigenvalue takes more than
    MAX_ITERATIONS."""
    b = g.b
    N = const64(n)
    for_range(b, const64(1), N, lambda i: g.store(e, b.sub(i, const64(1)), g.load(e, i)), name="eshift")
    g.store(e, const64(n - 1), g.const(0))
    m_v = g.var(const64(0), "m")
    it_v = g.var(const64(0), "iters")
    i_v = g.var(const64(0), "i")
    s_v, c_v, p_v, g_v = (g.var(g.const(0), name) for name in ("s", "c", "p", "g"))
    deflated_v = g.var(ir.Constant(I1, 0), "deflated")
    fn = b.function

    def negligible(m):
        """e[m] negligible: relative to its diagonal neighbours, or below tiny / eps (subnormal arithmetic
        could not converge there; the matrix is scaled to a largest entry of 1, so it is far below eps
        times its norm)."""
        dd = b.fadd(g.fabs(g.load(d, m)), g.fabs(g.load(d, b.add(m, const64(1)))))
        return b.fcmp_ordered("<=", g.fabs(g.load(e, m)), b.fadd(b.fmul(g.const(eps), dd), g.const(g.safe_low)))

    def m_cond():
        return b.icmp_signed("<", b.load(m_v), const64(n - 1))

    def m_body(found):
        """One step of the search for the first negligible e[m] from m_v on (breaks to found)."""
        m = b.load(m_v)
        nxt = fn.append_basic_block("m.next")
        b.cbranch(negligible(m), found, nxt)
        b.position_at_end(nxt)
        b.store(b.add(m, const64(1)), m_v)

    def eigenvalue(l):
        b.store(const64(0), it_v)

        def iterate(done):
            # m: the first index >= l whose subdiagonal entry is negligible
            b.store(l, m_v)

            def m_cond():
                return b.icmp_signed("<", b.load(m_v), const64(n - 1))

            while_loop(b, m_cond, m_body, name="msearch")
            m = b.load(m_v)
            go = fn.append_basic_block("ql.go")
            b.cbranch(b.icmp_signed("==", m, l), done, go)
            b.position_at_end(go)
            # a block whose bottom is below eps times its top (the lower part of a matrix graded both ways):
            # reversed before its first iteration, as whole blocks are below
            steep = b.and_(b.icmp_signed("==", b.load(it_v), const64(0)),
                           b.fcmp_ordered("<", g.fabs(g.load(d, m)), b.fmul(g.const(eps), g.fabs(g.load(d, l)))))
            with b.if_then(steep):
                _reverse_block(g, z, d, e, l, b.add(b.sub(m, l), const64(1)), n)
            fail = fn.append_basic_block("ql.fail")
            proceed = fn.append_basic_block("ql.step")
            b.cbranch(b.icmp_signed(">=", b.load(it_v), const64(MAX_ITERATIONS)), fail, proceed)
            b.position_at_end(fail)
            b.store(ir.Constant(I1, 1), bad)
            b.branch(done)
            b.position_at_end(proceed)
            b.store(b.add(b.load(it_v), const64(1)), it_v)
            dl, el = g.load(d, l), g.load(e, l)
            l1 = b.add(l, const64(1))
            gg = b.fdiv(b.fsub(g.load(d, l1), dl), b.fadd(el, el))
            r = g.fabs(g.pythag(gg, g.const(1)))
            signed_r = b.select(b.fcmp_ordered(">=", gg, g.const(0)), r, b.fneg(r))
            gg = b.fadd(b.fsub(g.load(d, m), dl), b.fdiv(el, b.fadd(gg, signed_r)))
            b.store(gg, g_v)
            b.store(g.const(1), s_v)
            b.store(g.const(1), c_v)
            b.store(g.const(0), p_v)
            b.store(ir.Constant(I1, 0), deflated_v)
            b.store(b.sub(m, const64(1)), i_v)

            def chase_cond():
                return b.icmp_signed(">=", b.load(i_v), l)

            def chase(stop):
                i = b.load(i_v)
                i1 = b.add(i, const64(1))
                s, c, ei = b.load(s_v), b.load(c_v), g.load(e, i)
                f = b.fmul(s, ei)
                bb = b.fmul(c, ei)
                r = g.pythag(f, b.load(g_v))
                g.store(e, i1, r)
                go_on = fn.append_basic_block("chase.rot")
                underflow = fn.append_basic_block("chase.zero")
                b.cbranch(b.fcmp_ordered("==", r, g.const(0)), underflow, go_on)
                b.position_at_end(underflow)
                g.store(d, i1, b.fsub(g.load(d, i1), b.load(p_v)))
                g.store(e, m, g.const(0))
                b.store(ir.Constant(I1, 1), deflated_v)
                b.branch(stop)
                b.position_at_end(go_on)
                s = b.fdiv(f, r)
                c = b.fdiv(b.load(g_v), r)
                gi = b.fsub(g.load(d, i1), b.load(p_v))
                rr = b.fadd(b.fmul(b.fsub(g.load(d, i), gi), s), b.fmul(b.fmul(g.const(2), c), bb))
                p = b.fmul(s, rr)
                g.store(d, i1, b.fadd(gi, p))
                b.store(b.fsub(b.fmul(c, rr), bb), g_v)
                b.store(s, s_v)
                b.store(c, c_v)
                b.store(p, p_v)
                g.store(cs, i, c)
                g.store(ss, i, s)
                b.store(b.sub(i, const64(1)), i_v)

            while_loop(b, chase_cond, chase, name="chase")
            # the rotations made: i = m-1 down to l, or down to the deflation point + 1
            lowest = b.add(b.load(i_v), const64(1))
            with b.if_then(b.icmp_signed("<", lowest, m)):
                g.rotate_rows(z, n, cs, ss, lowest, m)
            with b.if_then(b.not_(b.load(deflated_v))):
                g.store(d, l, b.fsub(g.load(d, l), b.load(p_v)))
                g.store(e, l, b.load(g_v))
                g.store(e, m, g.const(0))

        def forever():
            return b.not_(b.load(bad))

        while_loop(b, forever, iterate, name="qliter")

    # Unreduced blocks [first, last] one after the other. QL converges from a block's top and chases from
    # its bottom, so larger entries belong at the bottom (a block graded the other way underflows the
    # chase): a block whose last diagonal entry is smaller than its first is reversed first (d, e and the
    # rows of Q^T; LAPACK steqr's choice between QL and QR per block; the numpy mirror does the same).
    first_v = g.var(const64(0), "first")

    def block_cond():
        return b.icmp_signed("<", b.load(first_v), N)

    def block(done):
        first = b.load(first_v)
        b.store(first, m_v)
        while_loop(b, m_cond, m_body, name="bsearch")
        last = b.load(m_v)
        flip = b.and_(b.icmp_signed("<", first, last),
                      b.fcmp_ordered("<", g.fabs(g.load(d, last)), g.fabs(g.load(d, first))))
        with b.if_then(flip):
            _reverse_block(g, z, d, e, first, b.add(b.sub(last, first), const64(1)), n)
        for_range(b, first, b.add(last, const64(1)), eigenvalue, name="ql")
        b.store(b.add(last, const64(1)), first_v)

    while_loop(b, block_cond, block, name="blocks")


def _reverse(g: _Emitter, x, first, count, width):
    """Reverses the order of the count rows of width elements at x from row first (width 1: a vector)."""
    b = g.b
    W = const64(width)
    last = b.sub(b.add(first, count), const64(1))

    def swap(i):
        top, bottom = b.mul(b.add(first, i), W), b.mul(b.sub(last, i), W)

        def element(k):
            p, q = b.add(top, k), b.add(bottom, k)
            a, c = g.load(x, p), g.load(x, q)
            g.store(x, p, c)
            g.store(x, q, a)

        for_range(b, const64(0), W, element, name="revk")

    for_range(b, const64(0), b.sdiv(count, const64(2)), swap, name="rev")


def _reverse_block(g: _Emitter, z, d, e, first, count, n):
    """Reverses the index order of the tridiagonal block of count rows from first: d, e and rows of z."""
    b = g.b
    _reverse(g, d, first, count, 1)
    _reverse(g, e, first, b.sub(count, const64(1)), 1)
    _reverse(g, z, first, count, n)


def _sort(g: _Emitter, z, d, n):
    """Eigenvalues ascending (selection sort, the first least value), their rows swapped along."""
    b = g.b
    N = const64(n)
    k_v = g.var(const64(0), "k")
    best_v = g.var(g.const(0), "best")

    def place(i):
        b.store(i, k_v)
        b.store(g.load(d, i), best_v)

        def scan(j):
            v = g.load(d, j)
            less = b.fcmp_ordered("<", v, b.load(best_v))
            b.store(b.select(less, j, b.load(k_v)), k_v)
            b.store(b.select(less, v, b.load(best_v)), best_v)

        for_range(b, b.add(i, const64(1)), N, scan, name="scan")
        k = b.load(k_v)
        with b.if_then(b.icmp_signed("!=", k, i)):
            g.store(d, k, g.load(d, i))
            g.store(d, i, b.load(best_v))
            row_i, row_k = b.mul(i, N), b.mul(k, N)

            def swap(j):
                a, c = g.load(z, b.add(row_i, j)), g.load(z, b.add(row_k, j))
                g.store(z, b.add(row_i, j), c)
                g.store(z, b.add(row_k, j), a)

            for_range(b, const64(0), N, swap, name="swap")

    if n >= 2:
        for_range(b, const64(0), const64(n - 1), place, name="sort")


def _transpose(g: _Emitter, z, n):
    b = g.b
    N = const64(n)

    def row(i):
        def col(j):
            p, q = b.add(b.mul(i, N), j), b.add(b.mul(j, N), i)
            a, c = g.load(z, p), g.load(z, q)
            g.store(z, p, c)
            g.store(z, q, a)

        for_range(b, const64(0), i, col, name="tcol")

    for_range(b, const64(0), N, row, name="trow")
