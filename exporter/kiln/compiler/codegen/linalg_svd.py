"""Native QR and SVD kernels (the `svd` kernel strategy) of kiln.lax._svd_qr_native's qr_kernel and
svd_kernel primitives: one dispatch per call, the batch's matrices split over the workgroups (a
matrix is one work item), each matrix factored start to finish by one workgroup.

The algorithm is the one _svd_qr_native's numpy mirror (the primitives' eager implementation) runs, step
for step, so compiled and eager results agree up to rounding (in float64 the signs of singular vectors too):
Householder QR (LAPACK's geqrf convention, Q formed backwards as orgqr), and for the SVD of matrices with
min(m, n) >= BIDIAG_FROM Householder bidiagonalization, Q and P formed, implicit-shift QR on the
bidiagonal matrix with each sweep's rotations applied to the columns of Q and P after it (register-blocked
strips, _rotate_columns) and canonical signs; for smaller ones QR then
one-sided Jacobi on R^T's columns in the round-robin order (rotations as three shears, squared norms
updated as gesvj does), U = Q V, and the right singular vectors the sorted W's columns normalized (from a
Householder QR of the sorted W when a squared norm is zero or subnormal).

Everything runs in column storage in the `work` output (a matrix's columns contiguous), so every inner
loop (a reflector applied to a column, a dot product of two columns, a plane rotation of two columns)
walks contiguous memory: it is emitted as explicit vectors of the target's width (`_Gen.vloop`,
`_Gen.vsum`) with a scalar tail. The work output is zeroed at the end (it is nobody's value).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ...lax import _svd_qr_native as native
from ..layout import region_views
from .intrinsics import call_binary, call_unary, fmuladd, halving_reduce
from .loops import const64, delinearize, dot_offsets, for_range, local_var, while_loop, workgroup_slice
from .region_eval import load_view
from .types import I1, I32, I64
from .vector_code import VectorCode


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


class _Gen(VectorCode):
    """VectorCode with the qr/svd kernels' helpers: loads, stores and splats of a given width (a vector of
    `lanes` or one element), and the contiguous vector loops and sums over a range with a scalar tail."""

    def __init__(self, b: ir.IRBuilder, dtype, lanes: int):
        super().__init__(b, dtype, lanes)
        self.t = self.ty
        self.vt = self.vec

    # scalars
    def c(self, value, width: int = 1):
        if width == 1:
            return ir.Constant(self.t, float(value))
        return ir.Constant(ir.VectorType(self.t, width), [float(value)] * width)

    def ld(self, base, offset, width: int = 1):
        if width == 1:
            return self.b.load(self.ptr(base, offset), typ=self.t)
        return self.b.load(self.ptr(base, offset), typ=ir.VectorType(self.t, width), align=self.size)

    def st(self, base, offset, value, width: int = 1):
        if width == 1:
            self.b.store(value, self.ptr(base, offset))
        else:
            self.b.store(value, self.ptr(base, offset), align=self.size)

    def splat(self, value, width: int | None = None):
        """value in every lane of a vector of `width` (default: lanes); width 1: value itself."""
        width = self.lanes if width is None else width
        if width == 1:
            return value
        b = self.b
        vt = ir.VectorType(self.t, width)
        one = b.insert_element(ir.Constant(vt, ir.Undefined), value, ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, width), [0] * width))

    def hmax(self, v):
        return halving_reduce(self.b, v, lambda b, lo, hi: call_binary(b, "maximum", lo, hi))

    def fma(self, x, y, z):
        return fmuladd(self.b, x, y, z)

    def abs(self, x):
        return call_unary(self.b, "fabs", x)

    def lt(self, x, y):
        return self.b.fcmp_ordered("<", x, y)

    def gt(self, x, y):
        return self.b.fcmp_ordered(">", x, y)

    # loops over a contiguous range [lo, hi): vectors of `lanes`, then one element at a time
    def _split(self, lo, hi):
        b = self.b
        lo = const64(lo) if isinstance(lo, int) else lo
        hi = const64(hi) if isinstance(hi, int) else hi
        count = b.sub(hi, lo)
        vec_end = b.add(lo, b.and_(count, const64(~(self.lanes - 1))))
        return lo, hi, vec_end

    def vloop(self, lo, hi, body, name="v"):
        """body(i, width) for i in [lo, hi): width = lanes over the vector part, then 1."""
        lo, hi, vec_end = self._split(lo, hi)
        if self.lanes > 1:
            for_range(self.b, lo, vec_end, lambda i: body(i, self.lanes), name=f"{name}.vec", step=self.lanes)
            for_range(self.b, vec_end, hi, lambda i: body(i, 1), name=f"{name}.tail")
        else:
            for_range(self.b, lo, hi, lambda i: body(i, 1), name=name)

    def vsum(self, lo, hi, terms, count: int = 1, name="s"):
        """The sums over i in [lo, hi) of the products x * y of each of terms(i, width) -> `count` (x, y)
        pairs (fused multiply-adds into two vector accumulators each, two vectors a step so that the
        additions' latency overlaps, then one vector, then the scalar tail added to their total)."""
        b = self.b
        lo, hi, vec_end = self._split(lo, hi)
        results = []
        if self.lanes > 1:
            lanes = self.lanes
            accs = [[local_var(b, self.vt, self.c(0.0, lanes), f"{name}.acc") for _ in range(2)] for _ in range(count)]
            pair_end = b.add(lo, b.and_(b.sub(hi, lo), const64(~(2 * lanes - 1))))

            def add(i, which):
                for acc, (x, y) in zip(accs, terms(i, lanes)):
                    b.store(self.fma(x, y, b.load(acc[which])), acc[which])

            def two(i):
                add(i, 0)
                add(b.add(i, const64(lanes)), 1)

            for_range(b, lo, pair_end, two, name=f"{name}.vec2", step=2 * lanes)
            for_range(b, pair_end, vec_end, lambda i: add(i, 0), name=f"{name}.vec", step=lanes)
            results = [self.hsum(b.fadd(b.load(acc[0]), b.load(acc[1]))) for acc in accs]
        tails = [local_var(b, self.t, results[k] if results else self.c(0.0), f"{name}.tail") for k in range(count)]

        def scalar(i):
            for acc, (x, y) in zip(tails, terms(i, 1)):
                b.store(self.fma(x, y, b.load(acc)), acc)

        for_range(b, vec_end if self.lanes > 1 else lo, hi, scalar, name=f"{name}.tail")
        return [b.load(t) for t in tails]

    UNROLL = 16
    """Most vectors of a range of static length that usum / uloop emit in straight-line code."""

    def unrolls(self, length: int) -> bool:
        return self.lanes > 1 and length // self.lanes <= self.UNROLL

    def uloop(self, lo, length: int, body, name="u"):
        """vloop over [lo, lo + length) for a static length: straight-line vectors when unrolls(length)."""
        if not self.unrolls(length):
            return self.vloop(lo, self.b.add(lo, const64(length)), body, name=name)
        vectors = length // self.lanes
        for k in range(vectors):
            body(self.b.add(lo, const64(k * self.lanes)), self.lanes)
        for k in range(vectors * self.lanes, length):
            body(self.b.add(lo, const64(k)), 1)

    def usum(self, lo, length: int, terms, count: int = 1, name="s"):
        """vsum over [lo, lo + length) for a static length: straight-line vectors when unrolls(length), the
        same additions in the same order as vsum's (two accumulators alternating, then one, then the tail)."""
        if not self.unrolls(length):
            return self.vsum(lo, self.b.add(lo, const64(length)), terms, count=count, name=name)
        b = self.b
        vectors = length // self.lanes
        accs = [[self.c(0.0, self.lanes), self.c(0.0, self.lanes)] for _ in range(count)]
        paired = vectors - vectors % 2
        for k in range(vectors):
            which = k % 2 if k < paired else 0
            for acc, (x, y) in zip(accs, terms(b.add(lo, const64(k * self.lanes)), self.lanes)):
                acc[which] = self.fma(x, y, acc[which])
        totals = [self.hsum(b.fadd(acc[0], acc[1])) for acc in accs]
        for k in range(vectors * self.lanes, length):
            for idx, (x, y) in enumerate(terms(b.add(lo, const64(k)), 1)):
                totals[idx] = self.fma(x, y, totals[idx])
        return totals

    def vmax_abs(self, base, lo, hi, name="m"):
        """max |base[i]| over [lo, hi) (NaN propagates), 0 for an empty range."""
        b = self.b
        lo, hi, vec_end = self._split(lo, hi)
        result = self.c(0.0)
        if self.lanes > 1:
            acc = local_var(b, self.vt, self.c(0.0, self.lanes), f"{name}.acc")
            for_range(b, lo, vec_end, lambda i: b.store(call_binary(b, "maximum", b.load(acc), self.abs(self.ld(base, i, self.lanes))), acc),
                      name=f"{name}.vec", step=self.lanes)
            result = self.hmax(b.load(acc))
        tail = local_var(b, self.t, result, f"{name}.tail")
        for_range(b, vec_end if self.lanes > 1 else lo, hi,
                  lambda i: b.store(call_binary(b, "maximum", b.load(tail), self.abs(self.ld(base, i))), tail), name=f"{name}.tail")
        return b.load(tail)

    def zero(self, base, count):
        self.vloop(0, count, lambda i, w: self.st(base, i, self.c(0.0, w), w), name="zero")


# ---- the shared steps ----------------------------------------------------------------------------------

def _helper(g: _Gen, name: str, args: list, emit):
    """Calls the module's internal function `name` (defined on first use by emit(g', *params), g' a _Gen
    over its own builder) with args: an i64 or a pointer each. One copy of each step per kernel keeps the
    module small (the SVD runs the Householder steps twice and forms three Qs)."""
    b = g.b
    module = b.module
    full = f"{name}.{g.t}.{g.lanes}"
    fn = module.globals.get(full)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [a.type for a in args]), name=full)
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        inner = ir.IRBuilder(fn.append_basic_block("entry"))
        emit(_Gen(inner, g.dtype, g.lanes), *fn.args)
        inner.ret_void()
    b.call(fn, args)


COLUMN_GROUP = 4
"""Columns a reflector updates together (_by_groups)."""


def _by_groups(b, lo, hi, columns, name):
    """columns([c, ..., c + COLUMN_GROUP - 1]) for c = lo, lo + COLUMN_GROUP, ... (a group's updates share
    their reflector's loads and loops; each column's arithmetic is its own, so the results are those of one
    column at a time), then columns([c]) for each column left."""
    lo = const64(lo) if isinstance(lo, int) else lo
    hi = const64(hi) if isinstance(hi, int) else hi
    group = COLUMN_GROUP
    whole = b.add(lo, b.and_(b.sub(hi, lo), const64(~(group - 1))))
    for_range(b, lo, whole, lambda c: columns([b.add(c, const64(k)) for k in range(group)]), name=f"{name}.g",
              step=group)
    for_range(b, whole, hi, lambda c: columns([c]), name=f"{name}.1")


def _householder(g: _Gen, a, m: int, ncols: int, k: int, taus):
    """In place on the columns of a (m x ncols, column storage): the first k Householder steps (as
    _svd_qr_native._householder). taus[j] = tau_j; a holds R and the reflectors' v below the diagonal."""
    _helper(g, "householder", [a, const64(m), const64(ncols), const64(k), taus], _householder_body)


def _householder_body(g: _Gen, a, m, ncols, k, taus):
    for_range(g.b, const64(0), k, lambda j: _householder_step(g, a, m, ncols, j, taus), name="hh.j")


def _reflector_scalars(g: _Gen, alpha, safe, below_sq):
    """(beta, tau, gap) of a reflector whose column has leading entry alpha, largest |entry| safe (1 for a
    zero column) and sum of (x_i / safe)^2 below alpha below_sq, computed on the column divided by safe (as
    LAPACK's larfg rescales a tiny column: a subnormal column's own differences would lose the bits the
    reflector's orthogonality needs); v_i = (x_i / safe) / gap (as _svd_qr_native._householder)."""
    b = g.b
    sa = b.fdiv(alpha, safe)
    snorm = g.sqrt(b.fadd(b.fmul(sa, sa), below_sq))
    reflect = g.gt(below_sq, g.c(0.0))
    sbeta = b.select(b.fcmp_ordered(">=", alpha, g.c(0.0)), b.fneg(snorm), snorm)
    beta = b.select(reflect, b.fmul(safe, sbeta), alpha)
    tau = b.select(reflect, b.fdiv(b.fsub(sbeta, sa), b.select(reflect, sbeta, g.c(1.0))), g.c(0.0))
    gap = b.select(reflect, b.fsub(sa, sbeta), g.c(1.0))
    return beta, tau, gap


def _householder_step(g: _Gen, a, m, ncols, j, taus):
    """Householder step j (of _householder): column j's reflector, applied to the columns after it."""
    b = g.b
    cj = b.mul(j, m)
    start = b.add(cj, j)
    end = b.add(cj, m)
    below_lo = b.add(start, const64(1))
    scale = g.vmax_abs(a, start, end, name="hh.scale")
    safe = b.select(g.gt(scale, g.c(0.0)), scale, g.c(1.0))
    (below_sq,) = g.vsum(below_lo, end, lambda i, w: [(lambda s: (s, s))(b.fdiv(g.ld(a, i, w), g.splat(safe, w)))],
                         name="hh.sq")
    alpha = g.ld(a, start)
    beta, tau, gap = _reflector_scalars(g, alpha, safe, below_sq)
    g.vloop(below_lo, end, lambda i, w: g.st(a, i, b.fdiv(b.fdiv(g.ld(a, i, w), g.splat(safe, w)), g.splat(gap, w)), w),
            name="hh.v")
    reflect = g.gt(below_sq, g.c(0.0))
    g.st(taus, j, tau)

    def columns(cs):
        shifts = [b.sub(b.mul(c, m), cj) for c in cs]  # column c's element i lies at i + shift
        dots = g.vsum(below_lo, end, lambda i, w: [(g.ld(a, i, w), g.ld(a, b.add(i, shift), w)) for shift in shifts],
                      count=len(cs), name="hh.dot")
        tws = []
        for c, dot in zip(cs, dots):
            top = b.add(b.mul(c, m), j)
            w_ = b.fadd(g.ld(a, top), dot)
            tw = b.fmul(tau, w_)
            g.st(a, top, b.fsub(g.ld(a, top), tw))
            tws.append(tw)

        def axpy(i, w):
            v = g.ld(a, i, w)
            for shift, tw in zip(shifts, tws):
                at = b.add(i, shift)
                g.st(a, at, b.fsub(g.ld(a, at, w), b.fmul(v, g.splat(tw, w))), w)

        g.vloop(below_lo, end, axpy, name="hh.axpy")

    with b.if_then(reflect):
        _by_groups(b, b.add(j, const64(1)), ncols, columns, name="hh.col")
    g.st(a, start, beta)


def _form_q(g: _Gen, a, m: int, k: int, taus, q, kq: int):
    """Q's first kq columns (column storage, m each) from _householder's reflectors in a, H_{k-1} first."""
    _helper(g, "form_q", [a, const64(m), const64(k), taus, q, const64(kq)], _form_q_body)


def _form_q_body(g: _Gen, a, m, k, taus, q, kq):
    b = g.b
    g.zero(q, b.mul(kq, m))
    for_range(b, const64(0), kq, lambda c: g.st(q, b.add(b.mul(c, m), c), g.c(1.0)), name="q.eye")
    _reflect(g, a, m, k, taus, q, kq, identity=True)


def _apply_q(g: _Gen, a, m: int, k: int, taus, x, ncols: int):
    """x <- Q x on x's ncols columns (column storage, m each): _householder's reflectors in a, H_{k-1} first."""
    _helper(g, "apply_q", [a, const64(m), const64(k), taus, x, const64(ncols)],
            lambda g_, a_, m_, k_, taus_, x_, n_: _reflect(g_, a_, m_, k_, taus_, x_, n_, identity=False))


def _reflect(g: _Gen, a, m, k, taus, q, kq, identity: bool):
    """H_j for j = k-1 down to 0 applied to q's kq columns: from column j on when q started as the identity
    (the columns before j are still unit vectors H_j leaves alone), else to all of them."""
    b = g.b

    def step(r):
        j = b.sub(b.sub(k, const64(1)), r)
        tau = g.ld(taus, j)
        cj = b.mul(j, m)
        below_lo = b.add(b.add(cj, j), const64(1))
        end = b.add(cj, m)

        def columns(cs):
            shifts = [b.sub(b.mul(c, m), cj) for c in cs]
            dots = g.vsum(below_lo, end, lambda i, w: [(g.ld(a, i, w), g.ld(q, b.add(i, shift), w)) for shift in shifts],
                          count=len(cs), name="q.dot")
            tws = []
            for c, dot in zip(cs, dots):
                top = b.add(b.mul(c, m), j)
                tw = b.fmul(tau, b.fadd(g.ld(q, top), dot))
                g.st(q, top, b.fsub(g.ld(q, top), tw))
                tws.append(tw)

            def axpy(i, w):
                v = g.ld(a, i, w)
                for shift, tw in zip(shifts, tws):
                    at = b.add(i, shift)
                    g.st(q, at, b.fsub(g.ld(q, at, w), b.fmul(v, g.splat(tw, w))), w)

            g.vloop(below_lo, end, axpy, name="q.axpy")

        with b.if_then(b.fcmp_unordered("!=", tau, g.c(0.0))):
            _by_groups(b, j if identity else const64(0), kq, columns, name="q.col")

    for_range(b, const64(0), k, step, name="q.j")


def _rotation(g: _Gen, theta, width: int = 1):
    """(c, s, t, p) of kiln.lax._jacobi's rotation for theta (a scalar, or a vector of `width`), p = s / (1 + c)
    the parameter of its shears (as _svd_qr_native._rotation)."""
    b = g.b
    one = g.c(1.0, width)
    mag = g.abs(theta)
    big = g.gt(mag, one)
    inverse = b.fdiv(one, b.select(big, theta, one))
    root_big = b.fmul(mag, b.fadd(one, g.sqrt(b.fadd(one, b.fmul(inverse, inverse)))))
    root_small = b.fadd(mag, g.sqrt(b.fadd(one, b.fmul(theta, theta))))
    sign = b.select(b.fcmp_ordered(">=", theta, g.c(0.0, width)), one, g.c(-1.0, width))
    t = b.fdiv(sign, b.select(big, root_big, root_small))
    c = b.fdiv(one, g.sqrt(b.fadd(one, b.fmul(t, t))))
    s = b.fmul(t, c)
    return c, s, t, b.fdiv(s, b.fadd(one, c))


LAG_BYTES = 32 * 1024
"""W and V (n x n each) above this many bytes: V's Jacobi rotations lag W's by a round (_jacobi)."""


def jacobi_scratch(n: int) -> int:
    """Scratch elements of _jacobi's rounds: gamma, alpha, beta (then s, p, t gamma) and active of each pair,
    and s, p, active of the round V's rotations wait for and of the current one."""
    return 10 * ((n + n % 2) // 2)


def _jacobi(g: _Gen, w, v, d, n: int, scratch):
    """One-sided Jacobi on the n columns (n long) of w, v (or None) rotated along; d the squared norms
    (as _svd_qr_native._jacobi). A round's pairs are disjoint, so each round has all its pairs' dot
    products first, then computes their rotations as vectors across the pairs (the divisions and square
    roots of one pair no longer wait for each other pair's), then applies the rotations as three shears
    (one pass over W's and V's columns, three multiply-adds per element each) and updates the squared
    norms (alpha - t gamma, beta + t gamma; one that cancelled below NORM_GUARD is recomputed), taking the
    next round's dot products as soon as both their columns are rotated (still in cache). Each sweep starts
    from exact squared norms; the final ones are recomputed too."""
    b = g.b
    tol = float(np.float64(np.sqrt(n) * np.finfo(g.dtype).eps).astype(g.dtype))
    size = n + n % 2
    last = size - 1
    h = size // 2
    gam, al, be = scratch, g.ptr(scratch, const64(h)), g.ptr(scratch, const64(2 * h))
    ss_, ps_, tg_ = gam, al, be  # overwritten in place once the parameters are computed
    act = g.ptr(scratch, const64(3 * h))
    # Where W and V outgrow the first-level cache (LAG_BYTES), V's rotations lag W's: a round's (s, p,
    # active) wait in `prev` for the next round's, and the two rounds' rotations of V go in one pass (three
    # columns loaded and stored where two rounds apart take four); smaller, V is rotated in W's pass
    lag = v is not None and 2 * n * n * g.size > LAG_BYTES
    prev = [g.ptr(scratch, const64(k * h)) for k in (4, 5, 6)]
    cur = [g.ptr(scratch, const64(k * h)) for k in (7, 8, 9)]
    pending = local_var(b, I1, ir.Constant(I1, 0), "v.pending")

    def norms(p):
        base = b.mul(p, const64(n))
        (sq,) = g.vsum(base, b.add(base, const64(n)), lambda i, wd: [(lambda x: (x, x))(g.ld(w, i, wd))], name="d")
        g.st(d, p, sq)

    for_range(b, 0, n, norms, name="d.p")
    sweeps = local_var(b, I64, const64(0), "sweeps")
    rotated = local_var(b, I1, ir.Constant(I1, 1), "rotated")

    def wrap(x):  # x mod last for 0 <= x < 2 last (no division: a pair's members are on every path)
        return b.select(b.icmp_unsigned(">=", x, const64(last)), b.sub(x, const64(last)), x)

    def members(r, kk):
        """Pair kk of round r (0 <= r <= last, 0 <= kk < h): (p, q), p < q (round_robin_pairs)."""
        first = b.icmp_signed("==", kk, const64(0))
        x = wrap(b.add(r, kk))
        y = wrap(b.sub(b.add(r, const64(last)), kk))
        lo_ = b.select(b.icmp_signed("<", x, y), x, y)
        hi_ = b.select(b.icmp_signed("<", x, y), y, x)
        p = b.select(first, wrap(r), lo_)
        q = b.select(first, const64(last), hi_)
        return p, q

    def norms_of(kk, r):
        """Pair kk of round r: its columns' squared norms into the scratch (1 for the padding column's pair)."""
        p, q = members(r, kk)
        real = b.icmp_signed("<", q, const64(n))
        g.st(al, kk, g.c(1.0))
        g.st(be, kk, g.c(1.0))
        with b.if_then(real):
            g.st(al, kk, g.ld(d, p))
            g.st(be, kk, g.ld(d, q))
        return p, q, real

    def dots(r, kk):
        """Pair kk of round r: its inner product and the squared norms of its columns, into the scratch."""
        p, q, real = norms_of(kk, r)
        g.st(gam, kk, g.c(0.0))
        with b.if_then(real):
            pb = b.mul(p, const64(n))
            shift = b.sub(b.mul(q, const64(n)), pb)
            (gamma,) = g.usum(pb, n, lambda i, wd: [(g.ld(w, i, wd), g.ld(w, b.add(i, shift), wd))], name="gamma")
            g.st(gam, kk, gamma)

    def one_round(r):
        def parameters(kk, wd):
            gamma, alpha, beta = g.ld(gam, kk, wd), g.ld(al, kk, wd), g.ld(be, kk, wd)
            active = g.gt(g.abs(gamma), b.fmul(g.c(tol, wd), b.fmul(g.sqrt(alpha), g.sqrt(beta))))
            safe = b.select(active, gamma, g.c(1.0, wd))
            _, s, t, p = _rotation(g, b.fdiv(b.fsub(beta, alpha), b.fmul(g.c(2.0, wd), safe)), wd)
            g.st(ss_, kk, s, wd)
            g.st(ps_, kk, p, wd)
            g.st(tg_, kk, b.fmul(t, gamma), wd)
            g.st(act, kk, b.select(active, g.c(1.0, wd), g.c(0.0, wd)), wd)
            if lag:
                for buffer, value in zip(cur, (s, p, b.select(active, g.c(1.0, wd), g.c(0.0, wd)))):
                    g.st(buffer, kk, value, wd)

        g.vloop(0, h, parameters, name="par")

        following = b.add(r, const64(1))
        fused = local_var(b, I1, ir.Constant(I1, 0), "fused")
        fused_dot = local_var(b, g.t, g.c(0.0), "fused.dot")

        def apply(kk):
            """Rotates pair kk (if active); for kk >= 1 its rotation pass also takes the inner product of the
            following round's pair kk - 1 (into fused / fused_dot): column x = (r + kk) mod last of this
            pair with column (r + last - (kk - 2)) mod last of pair kk - 2, or column last (pair 0's) for
            kk = 1, both final for this round."""
            b.store(ir.Constant(I1, 0), fused)
            with b.if_then(b.fcmp_ordered("!=", g.ld(act, kk), g.c(0.0))):
                b.store(ir.Constant(I1, 1), rotated)
                p, q = members(r, kk)
                x = wrap(b.add(r, kk))
                other = b.select(b.icmp_signed("==", kk, const64(1)), const64(last),
                                 wrap(b.sub(b.add(r, const64(last + 2)), kk)))
                want = b.and_(b.icmp_signed(">=", kk, const64(1)), b.icmp_signed("<", other, const64(n)))
                x_is_p = b.icmp_signed("==", x, p)
                s, sh = g.ld(ss_, kk), g.ld(ps_, kk)
                pb = b.mul(p, const64(n))
                qb = b.mul(q, const64(n))
                shift = b.sub(qb, pb)

                def rot(base, i, wd):
                    sv, pv = g.splat(s, wd), g.splat(sh, wd)
                    xp, xq = g.ld(base, i, wd), g.ld(base, b.add(i, shift), wd)
                    xp = g.fma(b.fneg(pv), xq, xp)
                    xq = g.fma(sv, xp, xq)
                    xp = g.fma(b.fneg(pv), xq, xp)
                    g.st(base, i, xp, wd)
                    g.st(base, b.add(i, shift), xq, wd)
                    return xp, xq

                def both(i, wd):  # W's columns, and V's in the same pass unless they lag (v_rounds)
                    xp, xq = rot(w, i, wd)
                    if v is not None and not lag:
                        rot(v, i, wd)
                    return xp, xq

                with b.if_else(want) as (with_dot, alone):
                    with with_dot:
                        to_other = b.sub(b.mul(other, const64(n)), pb)

                        def terms(i, wd):
                            xp, xq = both(i, wd)
                            return [(b.select(x_is_p, xp, xq), g.ld(w, b.add(i, to_other), wd))]

                        (dot,) = g.usum(pb, n, terms, name="rot.dot")
                        b.store(dot, fused_dot)
                        b.store(ir.Constant(I1, 1), fused)
                    with alone:
                        g.uloop(pb, n, both, name="rot")
                tg = g.ld(tg_, kk)
                for col, col_base, sign in ((p, pb, -1.0), (q, qb, 1.0)):
                    old = g.ld(d, col)
                    new = g.fma(g.c(sign), tg, old)
                    g.st(d, col, new)
                    with b.if_then(b.fcmp_unordered("<", new, b.fmul(old, g.c(native.NORM_GUARD)))):
                        (sq,) = g.vsum(col_base, b.add(col_base, const64(n)),
                                       lambda i, wd: [(lambda x: (x, x))(g.ld(w, i, wd))], name="dg")
                        g.st(d, col, sq)

        # The next round's pair j - 1 joins a column of this round's pair j - 2 and one of pair j (the
        # circle method moves each position one step), so its inner product is taken in pair j's rotation
        # pass (or, pair j not rotating, right after it, both columns still in cache); pair h - 1 (pairs
        # h - 2 and h - 1) last.
        def apply_then_dot(j):
            apply(j)
            with b.if_then(b.icmp_signed(">=", j, const64(1))):
                with b.if_else(b.load(fused)) as (taken, separate):
                    with taken:
                        kk = b.sub(j, const64(1))
                        p, q = members(following, kk)
                        g.st(gam, kk, b.load(fused_dot))
                        g.st(al, kk, g.ld(d, p))
                        g.st(be, kk, g.ld(d, q))
                    with separate:
                        dots(following, b.sub(j, const64(1)))

        for_range(b, 0, h, apply_then_dot, name="apply")
        dots(following, const64(h - 1))
        if lag:
            with b.if_else(b.load(pending)) as (pair_up, wait):
                with pair_up:
                    v_rounds(b.sub(r, const64(1)), r)
                    b.store(ir.Constant(I1, 0), pending)
                with wait:
                    for src, dst in zip(cur, prev):
                        g.vloop(0, h, lambda i, wd: g.st(dst, i, g.ld(src, i, wd), wd), name="v.keep")
                    b.store(ir.Constant(I1, 1), pending)

    def shears(xp, xq, s, sh, wd):
        """(c xp - s xq, s xp + c xq) as rotate_by_shears (the W rotation's arithmetic)."""
        sv, pv = g.splat(s, wd), g.splat(sh, wd)
        xp = g.fma(b.fneg(pv), xq, xp)
        xq = g.fma(sv, xp, xq)
        return g.fma(b.fneg(pv), xq, xp), xq

    def v_single(p, q, s, sh):
        """V's columns p < q rotated by (s, p = sh)."""
        pb = b.mul(p, const64(n))
        shift = b.sub(b.mul(q, const64(n)), pb)

        def one(i, wd):
            xp, xq = shears(g.ld(v, i, wd), g.ld(v, b.add(i, shift), wd), s, sh, wd)
            g.st(v, i, xp, wd)
            g.st(v, b.add(i, shift), xq, wd)

        g.uloop(pb, n, one, name="v.rot")

    def params(buffer, kk):
        s, sh, active = (g.ld(x, kk) for x in buffer)
        return s, sh, b.fcmp_ordered("!=", active, g.c(0.0))

    def v_rounds(ra, rb):
        """V's rotations of round ra (in prev) and of the next round rb (in cur): pass j rotates ra's pair j
        and then rb's pair j - 1, which joins ra's pair j's column x = (ra + j) mod last with the column
        (ra + last + 2 - j) mod last of ra's pair j - 2 (column last for j = 1), both final for round ra;
        rb's pair h - 1 (ra's pairs h - 1 and h - 2) after them. Each column's rotations in the same order
        and arithmetic as one round after the other."""
        def step(j):
            pa, qa = members(ra, j)
            sa, sha, act_a = params(prev, j)
            x = wrap(b.add(ra, j))
            x_is_pa = b.icmp_signed("==", x, pa)
            y = b.select(x_is_pa, qa, pa)
            later = b.icmp_signed(">=", j, const64(1))
            kb = b.select(later, b.sub(j, const64(1)), const64(0))
            pb_, qb_ = members(rb, kb)
            sb, shb, act_b = params(cur, kb)
            act_b = b.and_(later, act_b)
            other = b.select(b.icmp_signed("==", j, const64(1)), const64(last),
                             wrap(b.sub(b.add(ra, const64(last + 2)), j)))
            x_is_pb = b.icmp_signed("==", x, pb_)
            with b.if_else(b.and_(act_a, act_b)) as (both_rounds, not_both):
                with both_rounds:
                    xb, yb, ob = (b.mul(c, const64(n)) for c in (x, y, other))
                    to_y, to_o = b.sub(yb, xb), b.sub(ob, xb)

                    def one(i, wd):
                        vx, vy = g.ld(v, i, wd), g.ld(v, b.add(i, to_y), wd)
                        np_, nq_ = shears(b.select(x_is_pa, vx, vy), b.select(x_is_pa, vy, vx), sa, sha, wd)
                        vx, vy = b.select(x_is_pa, np_, nq_), b.select(x_is_pa, nq_, np_)
                        g.st(v, b.add(i, to_y), vy, wd)
                        vo = g.ld(v, b.add(i, to_o), wd)
                        np_, nq_ = shears(b.select(x_is_pb, vx, vo), b.select(x_is_pb, vo, vx), sb, shb, wd)
                        g.st(v, i, b.select(x_is_pb, np_, nq_), wd)
                        g.st(v, b.add(i, to_o), b.select(x_is_pb, nq_, np_), wd)

                    g.uloop(xb, n, one, name="v.rot2")
                with not_both:
                    with b.if_then(act_a):
                        v_single(pa, qa, sa, sha)
                    with b.if_then(act_b):
                        v_single(pb_, qb_, sb, shb)

        for_range(b, 0, h, step, name="v.pass")
        pb_, qb_ = members(rb, const64(h - 1))
        sb, shb, act_b = params(cur, const64(h - 1))
        with b.if_then(act_b):
            v_single(pb_, qb_, sb, shb)

    def v_flush():
        """V's rotations of the round waiting in prev (the sweep's last), alone."""
        ra = const64(last - 1)

        def step(j):
            pa, qa = members(ra, j)
            sa, sha, act_a = params(prev, j)
            with b.if_then(act_a):
                v_single(pa, qa, sa, sha)

        with b.if_then(b.load(pending)):
            for_range(b, 0, h, step, name="v.flush")
            b.store(ir.Constant(I1, 0), pending)

    for_range(b, 0, h, lambda kk: dots(const64(0), kk), name="dots0")

    def cond():
        return b.and_(b.load(rotated), b.icmp_signed("<", b.load(sweeps), const64(native.MAX_SWEEPS)))

    def sweep(done):
        # exact squared norms at each sweep's start (round 0's pairs take them again: their inner products
        # were taken at the end of the previous sweep)
        for_range(b, 0, n, norms, name="d.s")
        for_range(b, 0, h, lambda kk: norms_of(kk, const64(0)), name="d.r0")
        b.store(ir.Constant(I1, 0), rotated)
        for_range(b, 0, last, one_round, name="round")
        if lag:
            v_flush()
        b.store(b.add(b.load(sweeps), const64(1)), sweeps)

    while_loop(b, cond, sweep, name="sweep")
    for_range(b, 0, n, norms, name="d.f")


# ---- the bidiagonal path (Golub-Kahan-Reinsch; _svd_qr_native.uses_bidiagonal) -------------------------

def _bidiagonalize(g: _Gen, a, m: int, n: int, d, rv1, taus_q, taus_y, wv):
    """In place on a (m x n, m >= n, column storage): _svd_qr_native._bidiagonalize. d gets B's diagonal,
    rv1[i + 1] its superdiagonal entry e_i (rv1[0] = 0); taus_q the left reflectors' taus, taus_y[i + 1] the
    right ones' (taus_y[0] = 0, as _right_reflectors); wv is m scalars of scratch."""
    _helper(g, "bidiagonalize", [a, const64(m), const64(n), d, rv1, taus_q, taus_y, wv], _bidiagonalize_body)


def _bidiagonalize_body(g: _Gen, a, m, n, d, rv1, taus_q, taus_y, wv):
    b = g.b
    g.st(rv1, const64(0), g.c(0.0))
    g.st(taus_y, const64(0), g.c(0.0))
    one = const64(1)

    def step(i):
        _householder_step(g, a, m, n, i, taus_q)
        g.st(d, i, g.ld(a, b.add(b.mul(i, m), i)))
        i1 = b.add(i, one)
        with b.if_then(b.icmp_signed("<", i1, n)):
            _right_step(g, a, m, n, i, rv1, taus_y, wv)

    for_range(b, const64(0), n, step, name="bd.i")


def _right_step(g: _Gen, a, m, n, i, rv1, taus_y, wv):
    """Row i's reflector over columns i + 1.. (_svd_qr_native._reflector on a[i, i + 1:]: strided in column
    storage, O(n) scalars), applied to rows i + 1.. of those columns: wv = A v (v_0 = 1 at column i + 1),
    then each column c -= v_c tau wv (both over contiguous columns, COLUMN_GROUP columns a pass)."""
    b = g.b
    one = const64(1)
    i1, i2 = b.add(i, one), b.add(i, const64(2))
    at = lambda j: b.add(b.mul(j, m), i)  # noqa: E731  (element (i, j))
    scale_v = local_var(b, g.t, g.c(0.0), "rr.scale")
    for_range(b, i1, n, lambda j: b.store(call_binary(b, "maximum", b.load(scale_v), g.abs(g.ld(a, at(j)))), scale_v),
              name="rr.max")
    scale = b.load(scale_v)
    safe = b.select(g.gt(scale, g.c(0.0)), scale, g.c(1.0))
    sq_v = local_var(b, g.t, g.c(0.0), "rr.sq")

    def square(j):
        x = b.fdiv(g.ld(a, at(j)), safe)
        b.store(g.fma(x, x, b.load(sq_v)), sq_v)

    for_range(b, i2, n, square, name="rr.sq")
    below_sq = b.load(sq_v)
    alpha = g.ld(a, at(i1))
    beta, tau, gap = _reflector_scalars(g, alpha, safe, below_sq)
    reflect = g.gt(below_sq, g.c(0.0))
    for_range(b, i2, n, lambda j: g.st(a, at(j), b.fdiv(b.fdiv(g.ld(a, at(j)), safe), gap)), name="rr.v")
    g.st(taus_y, i1, tau)
    g.st(rv1, i1, beta)
    lo, hi = i1, m  # the rows updated, within each column

    with b.if_then(reflect):
        first = b.mul(i1, m)
        g.vloop(lo, hi, lambda r, w: g.st(wv, r, g.ld(a, b.add(first, r), w), w), name="rr.w0")

        def gather(cs):
            coefs = [g.ld(a, at(c)) for c in cs]
            bases = [b.mul(c, m) for c in cs]

            def one_row(r, w):
                acc = g.ld(wv, r, w)
                for coef, base in zip(coefs, bases):
                    acc = g.fma(g.splat(coef, w), g.ld(a, b.add(base, r), w), acc)
                g.st(wv, r, acc, w)

            g.vloop(lo, hi, one_row, name="rr.w")

        _by_groups(b, i2, n, gather, name="rr.wc")
        g.vloop(lo, hi, lambda r, w: g.st(wv, r, b.fmul(g.ld(wv, r, w), g.splat(tau, w)), w), name="rr.tw")
        g.vloop(lo, hi, lambda r, w: g.st(a, b.add(first, r), b.fsub(g.ld(a, b.add(first, r), w), g.ld(wv, r, w)), w),
                name="rr.u0")

        def update(cs):
            coefs = [b.fneg(g.ld(a, at(c))) for c in cs]
            bases = [b.mul(c, m) for c in cs]

            def one_row(r, w):
                tw = g.ld(wv, r, w)
                for coef, base in zip(coefs, bases):
                    where = b.add(base, r)
                    g.st(a, where, g.fma(g.splat(coef, w), tw, g.ld(a, where, w)), w)

            g.vloop(lo, hi, one_row, name="rr.u")

        _by_groups(b, i2, n, update, name="rr.uc")
    g.st(a, at(i1), beta)


def _rotate_columns(g: _Gen, x, length: int, cs, ss, lo, hi):
    """The rotations j = lo, ..., hi - 1 (in that order) of columns (j, j + 1) of x (column storage, `length`
    each): (x_j, x_{j+1}) <- (x_j c_j + x_{j+1} s_j, x_{j+1} c_j - x_j s_j). Register-blocked as
    linalg_eigh's rotate_rows: strips of four vectors down the columns, column j + 1's rotated value carried
    to the next rotation, so each rotation loads and stores one column's strip."""
    b = g.b
    L = const64(length)
    lanes = g.lanes
    width = 4 * lanes
    groups = []
    row = 0
    while row + width <= length:
        groups.append((row, [lanes] * 4))
        row += width
    if (length - row) // lanes:
        groups.append((row, [lanes] * ((length - row) // lanes)))
        row += ((length - row) // lanes) * lanes
    if row < length:
        groups.append((row, [1] * (length - row)))
    count = b.sub(hi, lo)

    def strip(first, widths):
        offsets, at = [], first
        for w in widths:
            offsets.append((at, w))
            at += w
        col = lambda j, off: b.add(b.mul(j, L), const64(off))  # noqa: E731
        carries = [local_var(b, ir.VectorType(g.t, w) if w > 1 else g.t, g.ld(x, col(lo, off), w), "rc.carry")
                   for off, w in offsets]

        def rotation(t):
            j = b.add(lo, t)
            j1 = b.add(j, const64(1))
            c, s = g.ld(cs, j), g.ld(ss, j)
            for carry, (off, w) in zip(carries, offsets):
                cv, sv = g.splat(c, w), g.splat(s, w)
                xj, xk = b.load(carry), g.ld(x, col(j1, off), w)
                g.st(x, col(j, off), g.fma(xk, sv, b.fmul(xj, cv)), w)
                b.store(g.fma(b.fneg(xj), sv, b.fmul(xk, cv)), carry)

        for_range(b, const64(0), count, rotation, name="rc.rot")
        for carry, (off, w) in zip(carries, offsets):
            g.st(x, col(hi, off), b.load(carry), w)

    for first, widths in groups:
        strip(first, widths)


def _rotate_pair(g: _Gen, x, length: int, i, j, c, s):
    """Columns i, j of x (column storage): (x_i c + x_j s, x_j c - x_i s)."""
    b = g.b
    bi, shift = b.mul(i, const64(length)), b.mul(b.sub(j, i), const64(length))

    def one(r, w):
        cv, sv = g.splat(c, w), g.splat(s, w)
        xi, xj = g.ld(x, r, w), g.ld(x, b.add(r, shift), w)
        g.st(x, r, g.fma(xj, sv, b.fmul(xi, cv)), w)
        g.st(x, b.add(r, shift), g.fma(b.fneg(xi), sv, b.fmul(xj, cv)), w)

    g.vloop(bi, b.add(bi, const64(length)), one, name="rp")


def _bidiagonal_qr(g: _Gen, w, rv1, n: int, u, m: int, v, rot, bad):
    """_svd_qr_native._bidiagonal_qr: w the diagonal, rv1 the superdiagonal (rv1[0] = 0); u (m long
    columns) and v (n long) rotated along (None: not, both), each sweep's rotations kept in rot (9 n scalars:
    two sets of V's cosines and sines and U's, and the columns of v to negate) and applied to u and v during
    the next sweep's chase, one rotation per chase step (the chase is a chain of dependent divisions and
    square roots; the rotations' vector work fills its latency), whatever is left after it in register-blocked
    strips (_rotate_columns); a column of v whose value came out negative is negated at the end (no later
    rotation touches it). bad set when a singular value takes more than MAX_QR_ITERATIONS sweeps."""
    from .linalg_eigh import _Emitter

    b = g.b
    fn = b.function
    hyp = _Emitter(b, g.dtype, g.lanes).pythag
    vectors = u is not None
    if vectors:
        pend_l = local_var(b, I64, const64(0), "pend.l")
        pend_k = local_var(b, I64, const64(0), "pend.k")
        flip = local_var(b, I1, ir.Constant(I1, 0), "flip")
        negs = g.ptr(rot, const64(8 * n))
        for_range(b, 0, n, lambda i: g.st(negs, i, g.c(0.0)), name="negs")

    def sets():
        """(the current sweep's [cv, sv, cu, su], the pending sweep's)."""
        first, second = rot, g.ptr(rot, const64(4 * n))
        f = b.load(flip)
        cur, pend = b.select(f, second, first), b.select(f, first, second)
        return [g.ptr(cur, const64(k * n)) for k in range(4)], [g.ptr(pend, const64(k * n)) for k in range(4)]

    def apply_pending(lo, hi):
        """The pending sweep's rotations lo .. hi - 1 (blocked), if any."""
        _, (pcv, psv, pcu, psu) = sets()
        with b.if_then(b.icmp_signed("<", lo, hi)):
            _rotate_columns(g, v, n, pcv, psv, lo, hi)
            _rotate_columns(g, u, m, pcu, psu, lo, hi)

    def flush():
        apply_pending(b.load(pend_l), b.load(pend_k))
        b.store(const64(0), pend_l)
        b.store(const64(0), pend_k)
    zero, one = g.c(0.0), g.c(1.0)
    anorm_v = local_var(b, g.t, zero, "anorm")
    for_range(b, 0, n, lambda i: b.store(call_binary(b, "maximum", b.load(anorm_v), b.fadd(
        g.abs(g.ld(w, i)), g.abs(g.ld(rv1, i)))), anorm_v), name="anorm")
    anorm = b.load(anorm_v)

    def negligible(x):
        return b.fcmp_ordered("==", b.fadd(g.abs(x), anorm), anorm)

    its_v = local_var(b, I64, const64(0), "its")
    l_v = local_var(b, I64, const64(0), "l")
    cancel_v = local_var(b, I1, ir.Constant(I1, 1), "cancel")
    c_v, s_v, f_v = (local_var(b, g.t, zero, name) for name in ("c", "s", "f"))
    x_v, g_v, h_v = (local_var(b, g.t, zero, name) for name in ("x", "g", "h"))

    def singular_value(kk):
        k = b.sub(const64(n - 1), kk)
        b.store(const64(0), its_v)

        def iteration(done):
            b.store(k, l_v)
            b.store(ir.Constant(I1, 1), cancel_v)

            def search(found):
                l_ = b.load(l_v)
                nxt = fn.append_basic_block("bq.l2")
                stop = fn.append_basic_block("bq.stop")
                b.cbranch(negligible(g.ld(rv1, l_)), stop, nxt)
                b.position_at_end(stop)
                b.store(ir.Constant(I1, 0), cancel_v)
                b.branch(found)
                b.position_at_end(nxt)
                step = fn.append_basic_block("bq.l3")
                b.cbranch(negligible(g.ld(w, b.sub(l_, const64(1)))), found, step)
                b.position_at_end(step)
                b.store(b.sub(l_, const64(1)), l_v)

            while_loop(b, lambda: ir.Constant(I1, 1), search, name="bq.search")
            l_ = b.load(l_v)
            with b.if_then(b.load(cancel_v)):
                if vectors:
                    flush()
                nm = b.sub(l_, const64(1))
                b.store(zero, c_v)
                b.store(one, s_v)
                b.store(l_, l_v)  # the loop index i starts at l (l_v reused; restored after)

                def cancel(stop):
                    i = b.load(l_v)
                    f = b.fmul(b.load(s_v), g.ld(rv1, i))
                    g.st(rv1, i, b.fmul(b.load(c_v), g.ld(rv1, i)))
                    go = fn.append_basic_block("bq.c2")
                    b.cbranch(negligible(f), stop, go)
                    b.position_at_end(go)
                    gg = g.ld(w, i)
                    h = hyp(f, gg)
                    g.st(w, i, h)
                    c, s = b.fdiv(gg, h), b.fneg(b.fdiv(f, h))
                    b.store(c, c_v)
                    b.store(s, s_v)
                    if u is not None:
                        _rotate_pair(g, u, m, nm, i, c, s)
                    b.store(b.add(i, const64(1)), l_v)

                while_loop(b, lambda: b.icmp_signed("<=", b.load(l_v), k), cancel, name="bq.cancel")
                b.store(l_, l_v)
            z = g.ld(w, k)
            go = fn.append_basic_block("bq.go")
            converged = fn.append_basic_block("bq.conv")
            b.cbranch(b.icmp_signed("==", l_, k), converged, go)
            b.position_at_end(converged)
            with b.if_then(g.lt(z, zero)):
                g.st(w, k, b.fneg(z))
                if vectors:
                    g.st(negs, k, one)
            b.branch(done)
            b.position_at_end(go)
            fail = fn.append_basic_block("bq.fail")
            sweep = fn.append_basic_block("bq.sweep")
            b.cbranch(b.icmp_signed(">=", b.load(its_v), const64(native.MAX_QR_ITERATIONS)), fail, sweep)
            b.position_at_end(fail)
            b.store(ir.Constant(I1, 1), bad)
            b.branch(done)
            b.position_at_end(sweep)
            b.store(b.add(b.load(its_v), const64(1)), its_v)
            k1 = b.sub(k, const64(1))
            x, y, gg, h = g.ld(w, l_), g.ld(w, k1), g.ld(rv1, k1), g.ld(rv1, k)
            f = b.fdiv(b.fadd(b.fmul(b.fsub(y, z), b.fadd(y, z)), b.fmul(b.fsub(gg, h), b.fadd(gg, h))),
                       b.fmul(b.fmul(g.c(2.0), h), y))
            gg = hyp(f, one)
            signed = b.select(b.fcmp_ordered(">=", f, zero), gg, b.fneg(gg))
            f = b.fdiv(b.fadd(b.fmul(b.fsub(x, z), b.fadd(x, z)), b.fmul(h, b.fsub(b.fdiv(y, b.fadd(f, signed)), h))), x)
            b.store(f, f_v)
            b.store(x, x_v)
            b.store(one, c_v)
            b.store(one, s_v)
            if vectors:
                (cv_, sv_, cu_, su_), (pcv, psv, pcu, psu) = sets()
                shift = b.sub(b.load(pend_l), l_)  # chase step j applies the pending rotation j + shift
                pend_end = b.load(pend_k)
            else:
                cv_, sv_, cu_, su_ = (g.ptr(rot, const64(k_ * n)) for k_ in range(4))

            def chase(j):
                i = b.add(j, const64(1))
                gg, y = g.ld(rv1, i), g.ld(w, i)
                c, s = b.load(c_v), b.load(s_v)
                h, gg = b.fmul(s, gg), b.fmul(c, gg)
                f, x = b.load(f_v), b.load(x_v)
                z = hyp(f, h)
                g.st(rv1, j, z)
                c, s = b.fdiv(f, z), b.fdiv(h, z)
                f, gg = b.fadd(b.fmul(x, c), b.fmul(gg, s)), b.fsub(b.fmul(gg, c), b.fmul(x, s))
                h, y = b.fmul(y, s), b.fmul(y, c)
                g.st(cv_, j, c)
                g.st(sv_, j, s)
                z = hyp(f, h)
                g.st(w, j, z)
                nonzero = b.fcmp_unordered("!=", z, zero)
                c = b.select(nonzero, b.fdiv(f, z), c)
                s = b.select(nonzero, b.fdiv(h, z), s)
                b.store(b.fadd(b.fmul(c, gg), b.fmul(s, y)), f_v)
                b.store(b.fsub(b.fmul(c, y), b.fmul(s, gg)), x_v)
                b.store(c, c_v)
                b.store(s, s_v)
                g.st(cu_, j, c)
                g.st(su_, j, s)
                if vectors:
                    pj = b.add(j, shift)
                    with b.if_then(b.icmp_signed("<", pj, pend_end)):
                        pj1 = b.add(pj, const64(1))
                        _rotate_pair(g, v, n, pj, pj1, g.ld(pcv, pj), g.ld(psv, pj))
                        _rotate_pair(g, u, m, pj, pj1, g.ld(pcu, pj), g.ld(psu, pj))

            for_range(b, l_, k, chase, name="bq.chase")
            g.st(rv1, l_, zero)
            g.st(rv1, k, b.load(f_v))
            g.st(w, k, b.load(x_v))
            if vectors:
                apply_pending(b.add(k, shift), pend_end)  # what the chase left of the pending sweep
                b.store(l_, pend_l)
                b.store(k, pend_k)
                b.store(b.not_(b.load(flip)), flip)

        while_loop(b, lambda: b.not_(b.load(bad)), iteration, name="bq.iter")

    for_range(b, 0, n, singular_value, name="bq.k")
    if vectors:
        flush()

        def negate(k):
            with b.if_then(b.fcmp_unordered("!=", g.ld(negs, k), zero)):
                base = b.mul(k, const64(n))
                g.vloop(base, b.add(base, const64(n)), lambda i, wd: g.st(v, i, b.fneg(g.ld(v, i, wd)), wd),
                        name="bq.neg")

        for_range(b, 0, n, negate, name="bq.negs")


def _canonical_signs(g: _Gen, u, m: int, v, n: int):
    """_svd_qr_native._canonical_signs: columns k of u and v negated where v's first largest |entry| is
    negative."""
    b = g.b

    def column(k):
        base = b.mul(k, const64(n))
        best = local_var(b, g.t, g.c(-1.0), "cs.best")
        value = local_var(b, g.t, g.c(0.0), "cs.value")

        def scan(i):
            x = g.ld(v, b.add(base, i))
            larger = g.gt(g.abs(x), b.load(best))
            b.store(b.select(larger, g.abs(x), b.load(best)), best)
            b.store(b.select(larger, x, b.load(value)), value)

        for_range(b, 0, n, scan, name="cs.i")
        with b.if_then(g.lt(b.load(value), g.c(0.0))):
            g.vloop(base, b.add(base, const64(n)), lambda i, wd: g.st(v, i, b.fneg(g.ld(v, i, wd)), wd), name="cs.v")
            ub = b.mul(k, const64(m))
            g.vloop(ub, b.add(ub, const64(m)), lambda i, wd: g.st(u, i, b.fneg(g.ld(u, i, wd)), wd), name="cs.u")

    for_range(b, 0, n, column, name="cs.k")


def _svd_bidiagonal_matrix(g: _Gen, take, a, scale, outs, bi, M: int, N: int, kq: int, uv: bool, wide: bool):
    """The bidiagonal path of one matrix, a (N columns of M, scaled) already in the work: bidiagonalize,
    form U (Q's first kq columns) and V (P), the implicit QR, then s sorted descending with U's first N
    columns and V's sorted along into the outputs; all NaN when the scale is not finite (a NaN or an
    infinity in the matrix) or the QR iteration fails (as _svd_qr_native._svd_bidiagonal)."""
    b = g.b
    d, rv1, taus_q, taus_y, wv, rot = take(N), take(N), take(N), take(N), take(M), take(9 * N)
    if uv:
        y, q, v = take(N * N), take(kq * M), take(N * N)
    bad = local_var(b, I1, b.not_(b.fcmp_ordered("<", scale, g.c(np.inf))), "bad")
    s_out = g.ptr(outs[0], b.mul(bi, const64(N)))
    if uv:
        u_rows, u_cols, vh_rows, vh_cols = (M, kq, kq, M) if not wide else (N, N, kq, M)
        u_out = g.ptr(outs[1], b.mul(bi, const64(M * kq if not wide else N * N)))
        vh_out = g.ptr(outs[2], b.mul(bi, const64(N * N if not wide else kq * M)))

    with b.if_then(b.not_(b.load(bad))):
        _bidiagonalize(g, a, M, N, d, rv1, taus_q, taus_y, wv)
        if uv:
            _form_q(g, a, M, N, taus_q, q, kq)

            def y_col(j):  # column j + 1 of y: row j's right reflector below row j + 1
                for_range(b, b.add(j, const64(2)), N, lambda r: g.st(
                    y, b.add(b.mul(b.add(j, const64(1)), const64(N)), r), g.ld(a, b.add(b.mul(r, const64(M)), j))),
                    name="y.r")

            for_range(b, 0, N - 1, y_col, name="y.c")
            _form_q(g, y, N, N, taus_y, v, N)
        _bidiagonal_qr(g, d, rv1, N, q if uv else None, M, v if uv else None, rot, bad)
        if uv:
            _canonical_signs(g, q, M, v, N)

    with b.if_else(b.load(bad)) as (failed, fine):
        with failed:
            nan = g.c(np.nan)
            for_range(b, 0, N, lambda i: g.st(s_out, i, nan), name="nan.s")
            if uv:
                for_range(b, 0, (M * kq if not wide else N * N), lambda i: g.st(u_out, i, nan), name="nan.u")
                for_range(b, 0, (N * N if not wide else kq * M), lambda i: g.st(vh_out, i, nan), name="nan.vh")
        with fine:
            def place(p):
                sigma = g.ld(d, p)
                rank = local_var(b, I64, const64(0), "rank")

                def count(qq):  # stable descending: larger first, equal ones in index order
                    other = g.ld(d, qq)
                    before = b.or_(g.gt(other, sigma), b.and_(b.fcmp_ordered("==", other, sigma), b.icmp_signed("<", qq, p)))
                    b.store(b.add(b.load(rank), b.zext(before, I64)), rank)

                for_range(b, 0, N, count, name="rank.q")
                r = b.load(rank)
                g.st(s_out, r, b.fmul(sigma, scale))
                if not uv:
                    return
                qcol, vcol = b.mul(p, const64(M)), b.mul(p, const64(N))
                if not wide:  # u (M x kq) column r = q's column p; vh (N x N) row r = v's column p
                    for_range(b, 0, M, lambda i: g.st(u_out, b.add(b.mul(i, const64(kq)), r), g.ld(q, b.add(qcol, i))),
                              name="uo")
                    dst = b.mul(r, const64(N))
                    g.vloop(0, N, lambda i, wd: g.st(vh_out, b.add(dst, i), g.ld(v, b.add(vcol, i), wd), wd), name="vo")
                else:  # u (N x N) column r = v's column p; vh (kq x M) row r = q's column p
                    for_range(b, 0, N, lambda i: g.st(u_out, b.add(b.mul(i, const64(N)), r), g.ld(v, b.add(vcol, i))),
                              name="uo")
                    dst = b.mul(r, const64(M))
                    g.vloop(0, M, lambda i, wd: g.st(vh_out, b.add(dst, i), g.ld(q, b.add(qcol, i), wd), wd), name="vo")

            for_range(b, 0, N, place, name="rank.p")
            if uv and kq > N:  # Q's other columns, unrotated
                def rest(c):
                    qcol = b.mul(c, const64(M))
                    if not wide:
                        for_range(b, 0, M, lambda i: g.st(u_out, b.add(b.mul(i, const64(kq)), c), g.ld(q, b.add(qcol, i))),
                                  name="uq")
                    else:
                        g.vloop(0, M, lambda i, wd: g.st(vh_out, b.add(qcol, i), g.ld(q, b.add(qcol, i), wd), wd), name="vq")

                for_range(b, N, kq, rest, name="rest")


# ---- the kernels ------------------------------------------------------------------------------------------

class _Operand:
    """How to read element (i, j) of batch item bi of the kernel's operand."""

    def __init__(self, region, eqn):
        self.x = eqn.invars[0]
        self.view = region_views(region)[self.x.id]
        self.batch = self.x.aval.shape[:-2]

    def base(self, b, bi):
        index = delinearize(b, bi, self.batch) if self.batch else []
        return dot_offsets(b, index, self.view.strides[:len(self.batch)], const64(self.view.offset))

    def read(self, b, pointers, base, i, j, transposed=False):
        si, sj = self.view.strides[-2:]
        if transposed:
            si, sj = sj, si
        offset = b.add(base, b.add(b.mul(i, const64(si)), b.mul(j, const64(sj))))
        return load_view(b, self.view, offset, pointers)


def _outputs(region, eqn, pointers):
    n_in = len(region.invars)
    position = {v.id: k for k, v in enumerate(region.outvars)}
    return [pointers[n_in + position[v.id]] for v in eqn.outvars]


def _lanes(dtype, target) -> int:
    lanes = max(1, target.vector_bytes // np.dtype(dtype).itemsize)
    return 1 << (lanes.bit_length() - 1)


def _emit_qr(region, eqn, target):
    x = eqn.invars[0]
    dtype = x.aval.dtype
    batch, (m, n) = x.aval.shape[:-2], x.aval.shape[-2:]
    full = eqn.params["full_matrices"]
    kq, kr = native.qr_sizes(m, n, full)
    k = min(m, n)
    ws = native.qr_work_size(m, n, full)
    items = _prod(batch)
    operand = _Operand(region, eqn)

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        out_q, out_r, work = _outputs(region, eqn, pointers)
        g = _Gen(b, dtype, _lanes(dtype, target))
        lo, hi = workgroup_slice(b, items, wid, wcount)

        def matrix(bi):
            wbase = g.ptr(work, b.mul(bi, const64(ws)))
            a, q = wbase, g.ptr(wbase, const64(n * m))
            taus = g.ptr(wbase, const64(n * m + kq * m))
            xb = operand.base(b, bi)
            for_range(b, 0, n, lambda j: for_range(
                b, 0, m, lambda i: g.st(a, b.add(b.mul(j, const64(m)), i), operand.read(b, pointers, xb, i, j)), name="cp.i"),
                name="cp.j")
            _householder(g, a, m, n, k, taus)
            _form_q(g, a, m, k, taus, q, kq)
            qo = g.ptr(out_q, b.mul(bi, const64(m * kq)))
            for_range(b, 0, m, lambda i: for_range(
                b, 0, kq, lambda c: g.st(qo, b.add(b.mul(i, const64(kq)), c), g.ld(q, b.add(b.mul(c, const64(m)), i))),
                name="qo.c"), name="qo.i")
            ro = g.ptr(out_r, b.mul(bi, const64(kr * n)))

            def r_row(i):
                def r_col(j):
                    value = b.select(b.icmp_signed("<=", i, j), g.ld(a, b.add(b.mul(j, const64(m)), i)), g.c(0.0))
                    g.st(ro, b.add(b.mul(i, const64(n)), j), value)
                for_range(b, 0, n, r_col, name="ro.j")

            for_range(b, 0, kr, r_row, name="ro.i")
            g.zero(wbase, ws)

        for_range(b, lo, hi, matrix, name="matrix")

    work = items * (2 * m * n * k + 2 * m * kq * k + 4 * m * n)
    return body, items, max(work, 1), f"qr {m}x{n}"


def _emit_svd(region, eqn, target):
    x = eqn.invars[0]
    dtype = x.aval.dtype
    batch, (m, n) = x.aval.shape[:-2], x.aval.shape[-2:]
    full, uv = eqn.params["full_matrices"], eqn.params["compute_uv"]
    wide = m < n
    big, small = max(m, n), min(m, n)
    kq = big if full else small
    ws = native.svd_work_size(m, n, full, uv)
    items = _prod(batch)
    operand = _Operand(region, eqn)

    def body(b, pointers, wid, wcount):
        if items == 0:
            return
        outs = _outputs(region, eqn, pointers)
        work = outs[-1]
        g = _Gen(b, dtype, _lanes(dtype, target))
        lo, hi = workgroup_slice(b, items, wid, wcount)
        N, M = small, big

        def matrix(bi):
            wbase = g.ptr(work, b.mul(bi, const64(ws)))
            offset = 0

            def take(count):
                nonlocal offset
                p = g.ptr(wbase, const64(offset))
                offset += count
                return p

            bidiagonal = native.uses_bidiagonal(m, n)
            a = take(N * M)
            if not bidiagonal:
                taus, w, d = take(N), take(N * N), take(N)
                scratch = take(jacobi_scratch(N))
                if uv:
                    q, v, wsorted, qw, taus_w = take(kq * M), take(N * N), take(N * N), take(N * N), take(N)
            xb = operand.base(b, bi)
            scale_v = local_var(b, g.t, g.c(0.0), "scale")

            def copy(j):
                def one(i):
                    value = operand.read(b, pointers, xb, i, j, transposed=wide)
                    b.store(call_binary(b, "maximum", b.load(scale_v), g.abs(value)), scale_v)
                    g.st(a, b.add(b.mul(j, const64(M)), i), value)
                for_range(b, 0, M, one, name="cp.i")

            for_range(b, 0, N, copy, name="cp.j")
            scale = b.load(scale_v)
            scale = b.select(b.fcmp_ordered("==", scale, g.c(0.0)), g.c(1.0), scale)  # NaN stays
            g.vloop(0, N * M, lambda i, wd: g.st(a, i, b.fdiv(g.ld(a, i, wd), g.splat(scale, wd)), wd), name="sc")
            if bidiagonal:
                _svd_bidiagonal_matrix(g, take, a, scale, outs, bi, M, N, kq, uv, wide)
                g.zero(wbase, ws)
                return
            _householder(g, a, M, N, N, taus)

            def w_col(j):  # W = R^T: W's column j is R's row j
                def one(i):
                    value = b.select(b.icmp_signed(">=", i, j), g.ld(a, b.add(b.mul(i, const64(M)), j)), g.c(0.0))
                    g.st(w, b.add(b.mul(j, const64(N)), i), value)
                for_range(b, 0, N, one, name="w.i")

            for_range(b, 0, N, w_col, name="w.j")
            if uv:
                g.zero(v, N * N)
                for_range(b, 0, N, lambda c: g.st(v, b.mul(c, const64(N + 1)), g.c(1.0)), name="v.eye")
            _jacobi(g, w, v if uv else None, d, N, scratch)
            if uv:
                # every squared norm normal (NaN: no): the right vectors are W's columns normalized
                normal = local_var(b, I1, ir.Constant(I1, 1), "normal")
                tiny = g.c(float(np.finfo(g.dtype).tiny))
                for_range(b, 0, N, lambda j: b.store(b.and_(b.load(normal), b.fcmp_ordered(">=", g.ld(d, j), tiny)), normal),
                          name="normal")

            # ranks: the stable descending order of sigma = sqrt(d), NaN last
            s_out = g.ptr(outs[0], b.mul(bi, const64(N)))

            # d becomes sigma = sqrt(d) once, so the O(N^2) comparisons take no square roots
            g.vloop(0, N, lambda i, wd: g.st(d, i, g.sqrt(g.ld(d, i, wd)), wd), name="sigma")

            def key(p):
                sigma = g.ld(d, p)
                return sigma, b.select(b.fcmp_unordered("uno", sigma, sigma), g.c(np.inf), b.fneg(sigma))

            def place(p, fn):
                sigma, kp = key(p)
                rank = local_var(b, I64, const64(0), "rank")

                def count(qq):
                    _, kqq = key(qq)
                    before = b.or_(g.lt(kqq, kp), b.and_(b.fcmp_ordered("==", kqq, kp), b.icmp_signed("<", qq, p)))
                    b.store(b.add(b.load(rank), b.zext(before, I64)), rank)

                for_range(b, 0, N, count, name="rank.q")
                fn(p, b.load(rank), sigma)

            def put_s(p, rank, sigma):
                g.st(s_out, rank, b.fmul(sigma, scale))
                if uv:
                    g.st(taus_w, rank, sigma)  # the sorted sigma, until W's QR (if any) needs the taus
                    src_w, src_v = b.mul(p, const64(N)), b.mul(p, const64(N))
                    dst = b.mul(rank, const64(N))
                    g.vloop(0, N, lambda i, wd: g.st(wsorted, b.add(dst, i), g.ld(w, b.add(src_w, i), wd), wd), name="ws")
                    # V sorted into qw's storage until U is formed
                    g.vloop(0, N, lambda i, wd: g.st(qw, b.add(dst, i), g.ld(v, b.add(src_v, i), wd), wd), name="vs")

            for_range(b, 0, N, lambda p: place(p, put_s), name="rank.p")
            if uv:
                if kq == N:
                    # U = Q [V sorted; 0]: the reflectors applied to V's columns (no Q formed), then into a
                    g.zero(q, N * M)
                    for_range(b, 0, N, lambda c: g.vloop(0, N, lambda i, wd: g.st(
                        q, b.add(b.mul(c, const64(M)), i), g.ld(qw, b.add(b.mul(c, const64(N)), i), wd), wd), name="uv.i"),
                        name="uv.c")
                    _apply_q(g, a, M, N, taus, q, N)
                    g.vloop(0, N * M, lambda i, wd: g.st(a, i, g.ld(q, i, wd), wd), name="ua")
                else:
                    _form_q(g, a, M, N, taus, q, kq)
                    # U's first N columns (column storage, in a): Q[:, :N] @ V sorted
                    g.zero(a, N * M)

                    def u_col(c):
                        uc = b.mul(c, const64(M))

                        def term(kk):
                            coef = g.ld(qw, b.add(b.mul(c, const64(N)), kk))
                            qk = b.mul(kk, const64(M))
                            shift = b.sub(qk, uc)
                            g.vloop(uc, b.add(uc, const64(M)), lambda i, wd: g.st(a, i, g.fma(
                                g.splat(coef, wd), g.ld(q, b.add(i, shift), wd), g.ld(a, i, wd)), wd), name="u.axpy")

                        for_range(b, 0, N, term, name="u.k")

                    for_range(b, 0, N, u_col, name="u.c")

                def normalized(c):
                    inverse = b.fdiv(g.c(1.0), g.ld(taus_w, c))
                    base = b.mul(c, const64(N))
                    g.vloop(base, b.add(base, const64(N)),
                            lambda i, wd: g.st(qw, i, b.fmul(g.ld(wsorted, i, wd), g.splat(inverse, wd)), wd), name="nv")

                def householder_vectors():
                    _householder(g, wsorted, N, N, N, taus_w)
                    _form_q(g, wsorted, N, N, taus_w, qw, N)

                    def sign_col(c):
                        negative = g.lt(g.ld(wsorted, b.add(b.mul(c, const64(N)), c)), g.c(0.0))
                        with b.if_then(negative):
                            base = b.mul(c, const64(N))
                            g.vloop(base, b.add(base, const64(N)), lambda i, wd: g.st(qw, i, b.fneg(g.ld(qw, i, wd)), wd),
                                    name="sg")

                    for_range(b, 0, N, sign_col, name="sg.c")

                with b.if_else(b.load(normal)) as (then, otherwise):
                    with then:
                        for_range(b, 0, N, normalized, name="nv.c")
                    with otherwise:
                        householder_vectors()
                # V_A = W's Q with R_W's signs (column storage in qw): row c of vh (tall), column c of u (wide)
                if not wide:
                    vh = g.ptr(outs[2], b.mul(bi, const64(N * N)))
                    g.vloop(0, N * N, lambda i, wd: g.st(vh, i, g.ld(qw, i, wd), wd), name="vo")
                else:
                    u_small = g.ptr(outs[1], b.mul(bi, const64(N * N)))
                    for_range(b, 0, N, lambda c: for_range(b, 0, N, lambda i: g.st(
                        u_small, b.add(b.mul(i, const64(N)), c), g.ld(qw, b.add(b.mul(c, const64(N)), i))), name="vo.i"),
                        name="vo.c")

                # write U (M x kq): columns < N from a, the rest Q's
                if not wide:
                    u_out = g.ptr(outs[1], b.mul(bi, const64(M * kq)))

                    def u_row(i):
                        for_range(b, 0, N, lambda c: g.st(u_out, b.add(b.mul(i, const64(kq)), c),
                                                          g.ld(a, b.add(b.mul(c, const64(M)), i))), name="uo.c")
                        for_range(b, N, kq, lambda c: g.st(u_out, b.add(b.mul(i, const64(kq)), c),
                                                           g.ld(q, b.add(b.mul(c, const64(M)), i))), name="uo.q")

                    for_range(b, 0, M, u_row, name="uo.i")
                else:
                    vh_out = g.ptr(outs[2], b.mul(bi, const64(kq * M)))

                    def vh_row(c):
                        src = b.mul(c, const64(M))
                        g.vloop(0, M, lambda i, wd: g.st(vh_out, b.add(src, i), g.ld(a, b.add(src, i), wd), wd), name="vho")

                    def vh_rest(c):
                        src = b.mul(c, const64(M))
                        g.vloop(0, M, lambda i, wd: g.st(vh_out, b.add(src, i), g.ld(q, b.add(src, i), wd), wd), name="vhq")

                    for_range(b, 0, N, vh_row, name="vho.c")
                    for_range(b, N, kq, vh_rest, name="vhq.c")
            g.zero(wbase, ws)

        for_range(b, lo, hi, matrix, name="matrix")

    sweeps = 8  # a typical count (the work estimate only sizes the workgroups)
    work = items * (4 * big * small * small + sweeps * small ** 3 * (10 if uv else 4))
    return body, items, max(work, 1), f"svd {m}x{n}"


def plan(region, target):
    """(body emitter, parallel items, work, detail) of a qr_kernel / svd_kernel region."""
    eqn = next(e for e in region.eqns if e.primitive.traits.kernel == "svd")
    if eqn.primitive.name == "qr_kernel":
        return _emit_qr(region, eqn, target)
    return _emit_svd(region, eqn, target)
