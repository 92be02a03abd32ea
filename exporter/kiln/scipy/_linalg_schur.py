"""scipy.linalg's schur, rsf2csf, sqrtm and funm for one square real matrix, written in kiln operations with
static shapes (docs/linalg.md "Schur form and matrix functions").

schur: hessenberg, then Francis double-shift QR sweeps (Golub and Van Loan, Algorithm 7.5.1) in a
while_loop with an iteration budget. The active window [lo, hi] (the lowest unreduced diagonal block of
size >= 3) is found by masks; each bulge-chasing reflector is a rank-1 update of the whole matrix whose
vector is zero outside three rows of the window, so shapes never depend on the data. A final pass
rotates each 2x2 block with real eigenvalues to upper triangular and each complex one to scipy's
standard form (equal diagonal). rsf2csf, sqrtm and funm follow scipy's and JAX's algorithms, the
triangular recurrences vectorized one superdiagonal at a time.
"""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as knp
from ..lax.control_flow import fori_loop, while_loop
from ..numpy.linalg import _solve as np_linalg
from ..transforms.api import vmap
from ._linalg_extra import hessenberg

__all__ = ["schur", "rsf2csf", "sqrtm", "funm"]

_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128),
            np.dtype(np.complex64): np.dtype(np.complex64), np.dtype(np.complex128): np.dtype(np.complex128)}


def _real_matrix(fn: str, a, name: str = "a", *, batched: bool = False):
    x = np_linalg._square_float(f"scipy.linalg.{fn}", a, name)
    if x.ndim != 2 and not batched:
        raise ValueError(f"scipy.linalg.{fn}: expected one square matrix (2-D) for {name}, got shape {x.shape}")
    return x


class _Grid:
    """Masks over an n x n matrix, for reading and updating entries at traced indices."""

    def __init__(self, n: int, dtype):
        self.n, self.dtype, self.idx = n, np.dtype(dtype), np.arange(n)

    def unit(self, i, dtype=None):
        return (self.idx == i).astype(dtype or self.dtype)

    def entry(self, h, i, j):
        return knp.sum(h * knp.expand_dims(self.unit(i, h.dtype), -1) * self.unit(j, h.dtype))

    def row(self, h, i):
        return knp.sum(h * knp.expand_dims(self.unit(i, h.dtype), -1), axis=0)

    def col(self, h, j):
        return knp.sum(h * self.unit(j, h.dtype), axis=1)


def _outer(u, v):
    return knp.expand_dims(u, -1) * v


def _splits(h, eps, tiny):
    """split[i]: row i starts a new diagonal block (i == 0, or h[i, i - 1] is negligible next to its diagonal
    neighbours: LAPACK lahqr's small-subdiagonal test)."""
    d = knp.abs(knp.diagonal(h))
    sub = knp.abs(knp.diagonal(h, -1))
    scale = d[:-1] + d[1:]
    scale = knp.where(scale == 0, knp.max(knp.abs(h)), scale)
    small = sub <= knp.maximum(eps * scale, tiny)
    return knp.concatenate([np.ones(1, bool), small])


def _window(split, n: int):
    """(lo, hi, any): the lowest diagonal block of size >= 3 still to reduce, from the split flags."""
    idx = np.arange(n)
    start = knp.max(knp.where(split[None, :] & (idx[None, :] <= idx[:, None]), idx[None, :], 0), axis=1)
    after = knp.concatenate([split[1:], np.ones(1, bool)])
    end = knp.min(knp.where(after[None, :] & (idx[None, :] >= idx[:, None]), idx[None, :], n - 1), axis=1)
    active = end - start + 1 >= 3
    hi = knp.max(knp.where(active, idx, -1))
    lo = knp.max(knp.where(active & (idx == hi), start, 0))
    return lo, hi, hi >= 0


def _reflector(x, y, z):
    """LAPACK larfg on (x, y, z): tau and v = (1, v1, v2) with (I - tau v v^T)(x, y, z) = (beta, 0, 0)."""
    tail2 = y * y + z * z
    beta = -knp.copysign(knp.sqrt(x * x + tail2), x)
    moves = tail2 > 0
    tau = knp.where(moves, (beta - x) / knp.where(moves, beta, 1), 0)
    scale = knp.where(moves, x - beta, 1)
    return tau, y / scale, z / scale


def _apply_reflector(h, q, v, tau):
    """h <- P h P, q <- q P for P = I - tau v v^T."""
    h = h - tau * _outer(v, knp.matmul(v, h))
    h = h - tau * _outer(knp.matmul(h, v), v)
    q = q - tau * _outer(knp.matmul(q, v), v)
    return h, q


def _francis_sweep(h, q, lo, hi, exceptional, g: _Grid):
    """One implicit double-shift sweep over the window [lo, hi] (Golub and Van Loan 7.5.1), with the
    shifts of the window's trailing 2x2 block, or lahqr's exceptional shifts when `exceptional`."""
    e = g.entry
    h11, h12, h21, h22 = e(h, hi - 1, hi - 1), e(h, hi - 1, hi), e(h, hi, hi - 1), e(h, hi, hi)
    ex = knp.abs(h21) + knp.abs(e(h, hi - 1, hi - 2))
    h11 = knp.where(exceptional, 0.75 * ex + h22, h11)
    h12 = knp.where(exceptional, -0.4375 * ex, h12)
    h21 = knp.where(exceptional, ex, h21)
    h22 = knp.where(exceptional, h11, h22)
    s, t = h11 + h22, h11 * h22 - h12 * h21
    a00, a01, a10 = e(h, lo, lo), e(h, lo, lo + 1), e(h, lo + 1, lo)
    a11, a21 = e(h, lo + 1, lo + 1), e(h, lo + 2, lo + 1)
    first = (a00 * a00 + a01 * a10 - s * a00 + t, a10 * (a00 + a11 - s), a10 * a21)

    def step(j, state):
        h, q = state
        col = g.col(h, j - 1)
        x = knp.where(j == lo, first[0], knp.sum(col * g.unit(j)))
        y = knp.where(j == lo, first[1], knp.sum(col * g.unit(j + 1)))
        z = knp.where(j == lo, first[2], knp.sum(col * g.unit(j + 2))) * (j + 2 <= hi).astype(g.dtype)
        norm = knp.abs(x) + knp.abs(y) + knp.abs(z)
        norm = knp.where(norm == 0, 1, norm)
        tau, v1, v2 = _reflector(x / norm, y / norm, z / norm)
        tau = knp.where((j >= lo) & (j <= hi - 1), tau, 0)
        v = g.unit(j) + v1 * g.unit(j + 1) + v2 * g.unit(j + 2)
        return _apply_reflector(h, q, v, tau)

    return fori_loop(0, g.n - 1, step, (h, q))


def _rotate(h, q, i, c, s, g: _Grid):
    """h <- G^T h G, q <- q G for the rotation G = [[c, -s], [s, c]] in rows/columns i, i + 1."""
    ui, uj = g.unit(i), g.unit(i + 1)
    ri, rj = g.row(h, i), g.row(h, i + 1)
    h = h + _outer(ui, (c - 1) * ri + s * rj) + _outer(uj, -s * ri + (c - 1) * rj)
    ci, cj = g.col(h, i), g.col(h, i + 1)
    h = h + _outer((c - 1) * ci + s * cj, ui) + _outer(-s * ci + (c - 1) * cj, uj)
    qi, qj = g.col(q, i), g.col(q, i + 1)
    q = q + _outer((c - 1) * qi + s * qj, ui) + _outer(-s * qi + (c - 1) * qj, uj)
    return h, q


def _standardize(h, q, g: _Grid):
    """Each 2x2 diagonal block (h[i + 1, i] != 0): real eigenvalues -> rotated to upper triangular (its
    subdiagonal set to 0); complex ones -> rotated to equal diagonal entries (scipy's standard form)."""
    def step(i, state):
        h, q = state
        e = g.entry
        a, b, c, d = e(h, i, i), e(h, i, i + 1), e(h, i + 1, i), e(h, i + 1, i + 1)
        block = c != 0
        disc = 0.25 * (a - d) * (a - d) + b * c
        real = disc >= 0
        lam = 0.5 * (a + d) + knp.copysign(knp.sqrt(knp.maximum(disc, 0)), a - d)
        # an eigenvector for lam: (lam - d, c) or (b, lam - a), the longer one
        u1, u2 = lam - d, c
        w1, w2 = b, lam - a
        longer = u1 * u1 + u2 * u2 >= w1 * w1 + w2 * w2
        x1, x2 = knp.where(longer, u1, w1), knp.where(longer, u2, w2)
        r = knp.sqrt(x1 * x1 + x2 * x2)
        r = knp.where(r == 0, 1, r)
        theta = 0.5 * knp.arctan2(-(a - d), b + c)
        cs = knp.where(block, knp.where(real, x1 / r, knp.cos(theta)), 1)
        sn = knp.where(block, knp.where(real, x2 / r, knp.sin(theta)), 0)
        h, q = _rotate(h, q, i, cs, sn, g)
        drop = block & real
        return h * (1 - _outer(g.unit(i + 1), g.unit(i)) * drop.astype(g.dtype)), q

    return fori_loop(0, g.n - 1, step, (h, q))


def _real_schur(a):
    n, dtype = a.shape[-1], a.dtype
    if n <= 1:
        return a, knp.asarray(np.eye(n, dtype=dtype))
    g = _Grid(n, dtype)
    info = np.finfo(dtype)
    eps, tiny = info.eps, info.tiny * (n / info.eps)
    budget = 30 * max(10, n)
    below = (g.idx[:, None] <= g.idx[None, :] + 1).astype(dtype)
    h, q = hessenberg(a, calc_q=True)

    def cond(state):
        h, _, it = state
        return _window(_splits(h, eps, tiny), n)[2] & (it < budget) & knp.all(knp.isfinite(h))

    def body(state):
        h, q, it = state
        split = _splits(h, eps, tiny)
        h = h * (below - knp.pad(knp.diag(split[1:].astype(dtype)), [(1, 0), (0, 1)]))
        lo, hi, _ = _window(split, n)
        h, q = _francis_sweep(h, q, lo, hi, it % 10 == 9, g)
        return h * below, q, it + 1

    h, q, it = while_loop(cond, body, (h, q, np.int32(0)))
    split = _splits(h, eps, tiny)
    h = h * below - h * knp.pad(knp.diag(split[1:].astype(dtype)), [(1, 0), (0, 1)])
    h, q = _standardize(h, q, g)
    failed = _window(split, n)[2] | ~knp.all(knp.isfinite(h))
    return knp.where(failed, np.nan, h), knp.where(failed, np.nan, q)


def schur(a, output="real"):
    """scipy.linalg.schur (JAX's signature): (T, Z) with a = Z T Z^T, Z orthogonal and T quasi-upper
    triangular (1x1 blocks for real eigenvalues, 2x2 blocks in standard form for complex pairs); with
    output='complex', T upper triangular and Z unitary (through rsf2csf). Real float input only (kiln's
    linalg has no complex factorizations); a matrix whose QR iterations do not converge within
    30 max(10, n) sweeps, or that holds inf/NaN, gives all-NaN T and Z (scipy raises). Leading axes are a
    batch (as JAX's), each matrix iterating until its own convergence."""
    if output not in ("real", "complex"):
        raise ValueError(f"scipy.linalg.schur: output must be 'real' or 'complex', got {output!r}")
    x = _real_matrix("schur", a, batched=True)

    def one(m):
        t, z = _real_schur(m)
        return _complex_from_real_schur(t, z) if output == "complex" else (t, z)

    batch = x.shape[:-2]
    if not batch:
        return one(x)
    if not math.prod(batch):
        dtype = _COMPLEX[x.dtype] if output == "complex" else x.dtype
        return x.astype(dtype), x.astype(dtype)
    t, z = vmap(one)(knp.reshape(x, (-1,) + x.shape[-2:]))
    return knp.reshape(t, x.shape), knp.reshape(z, x.shape)


def rsf2csf(T, Z, check_finite=True):
    """scipy.linalg.rsf2csf: the complex Schur form (T upper triangular, Z unitary) from a real one, by one
    complex Givens rotation per 2x2 block (scipy's algorithm; the eigenvalue with the positive imaginary
    part is put first). Results are complex64 for float32 input and complex128 for float64."""
    t = knp.asarray(T)
    z = knp.asarray(Z)
    for name, x in (("T", t), ("Z", z)):
        if x.ndim != 2 or x.shape[0] != x.shape[1]:
            raise ValueError(f"scipy.linalg.rsf2csf: {name} must be a square 2-D matrix, got shape {x.shape}")
    if t.shape != z.shape:
        raise ValueError(f"scipy.linalg.rsf2csf: T and Z must have the same shape, got {t.shape} and {z.shape}")
    if t.dtype.kind not in "fc" or z.dtype.kind not in "fc" or t.dtype.itemsize < 4 or z.dtype.itemsize < 4:
        raise TypeError(f"scipy.linalg.rsf2csf: T and Z must be float32/float64 (or complex) matrices, got "
                        f"{t.dtype} and {z.dtype}")
    dtype = _COMPLEX[np.promote_types(t.dtype, z.dtype)]
    return _complex_from_real_schur(t.astype(dtype), z.astype(dtype))


def _complex_from_real_schur(t, z):
    """rsf2csf's rotations on one (T, Z) pair (any dtype; computed in the matching complex one)."""
    dtype = _COMPLEX[np.dtype(t.dtype)]
    t, z = t.astype(dtype), z.astype(dtype)
    n = t.shape[0]
    g = _Grid(n, dtype)
    eps = np.finfo(dtype).eps

    def step(k, state):
        t, z = state
        m = n - 1 - k
        e = g.entry
        a, b, c, d = e(t, m - 1, m - 1), e(t, m - 1, m), e(t, m, m - 1), e(t, m, m)
        rotate = knp.abs(c) > eps * (knp.abs(a) + knp.abs(d))
        mu = 0.5 * (a - d) + knp.sqrt(0.25 * (a - d) * (a - d) + b * c)
        r = knp.sqrt(knp.abs(mu) ** 2 + knp.abs(c) ** 2)
        r = knp.where(r == 0, 1, r)
        cs = knp.where(rotate, mu / r, 1).astype(dtype)
        sn = knp.where(rotate, c / r, 0).astype(dtype)
        ui, uj = g.unit(m - 1), g.unit(m)
        ri, rj = g.row(t, m - 1), g.row(t, m)
        t = t + _outer(ui, (knp.conj(cs) - 1) * ri + sn * rj) + _outer(uj, -sn * ri + (cs - 1) * rj)
        ci, cj = g.col(t, m - 1), g.col(t, m)
        t = t + _outer((cs - 1) * ci + knp.conj(sn) * cj, ui) + _outer(-knp.conj(sn) * ci + (knp.conj(cs) - 1) * cj, uj)
        zi, zj = g.col(z, m - 1), g.col(z, m)
        z = z + _outer((cs - 1) * zi + knp.conj(sn) * zj, ui) + _outer(-knp.conj(sn) * zi + (knp.conj(cs) - 1) * zj, uj)
        return t * (1 - _outer(uj, ui)), z

    if n > 1:
        t, z = fori_loop(0, n - 1, step, (t, z))
    return t, z


def _by_superdiagonal(n: int, init, update):
    """Fills a triangular matrix one superdiagonal d = 1 .. n - 1 at a time: x <- x + mask_d * update(x)."""
    idx = np.arange(n)

    def step(d, x):
        mask = (idx[None, :] - idx[:, None] == d)
        return knp.where(mask, update(x), x)

    return fori_loop(1, n, step, init) if n > 1 else init


def sqrtm(A, blocksize=1):
    """scipy.linalg.sqrtm with JAX's semantics: the principal square root through the complex Schur form
    (a = Z T Z^H; U with U^2 = T by the triangular recurrence U[i, j] = (T[i, j] - sum_k U[i, k] U[k, j]) /
    (U[i, i] + U[j, j]), one superdiagonal at a time; a zero numerator gives 0, as JAX), so the result is
    always complex (complex64 for float32, complex128 for float64), as JAX's."""
    if blocksize != 1:
        raise NotImplementedError("scipy.linalg.sqrtm: the blocked version (blocksize > 1) is not implemented")
    x = _real_matrix("sqrtm", A, "A")
    t, z = schur(x, output="complex")
    n = t.shape[0]
    root = knp.sqrt(knp.diagonal(t))
    u0 = knp.diag(root)
    denominator = knp.expand_dims(root, -1) + root

    def update(u):
        numerator = t - knp.matmul(u, u)
        return knp.where(numerator == 0, 0, numerator / knp.where(numerator == 0, 1, denominator))

    u = _by_superdiagonal(n, u0, update)
    return knp.matmul(knp.matmul(z, u), knp.conj(knp.transpose(z)))


def funm(A, func, disp=True):
    """scipy.linalg.funm with JAX's semantics: f(A) for a function f of the eigenvalues, through the
    complex Schur form a = Z T Z^H and Parlett's recurrence (Golub and Van Loan, Algorithm 11.1.1)
    F[i, j] = (T[i, j] (F[j, j] - F[i, i]) + sum_k (T[i, k] F[k, j] - F[i, k] T[k, j])) / (T[j, j] - T[i, i]),
    one superdiagonal at a time (a zero denominator leaves the numerator, as JAX). func is called once on
    the complex vector of eigenvalues (a kiln array: use kiln.numpy functions, as JAX needs jax.numpy
    ones). The result is complex; with disp=False, (F, errest), errest as JAX's (from the smallest
    eigenvalue separation). Repeated or close eigenvalues make the result inaccurate, as in scipy."""
    x = _real_matrix("funm", A, "A")
    t, z = schur(x, output="complex")
    n, dtype = t.shape[0], t.dtype
    diag = knp.diagonal(t)
    f0 = knp.diag(knp.asarray(func(diag)).astype(dtype))
    separation = knp.expand_dims(diag, 0) - knp.expand_dims(diag, -1)

    def update(f):
        numerator = knp.matmul(t, f) - knp.matmul(f, t)
        return knp.where(separation != 0, numerator / knp.where(separation == 0, 1, separation), numerator)

    f = _by_superdiagonal(n, f0, update)
    f = knp.matmul(knp.matmul(z, f), knp.conj(knp.transpose(z)))
    if disp:
        return f
    upper = np.triu(np.ones((n, n), bool), 1)
    minden = knp.min(knp.where(upper, knp.abs(separation), np.inf)) if n > 1 else knp.asarray(np.inf)
    minden = knp.minimum(minden, knp.abs(t[0, 0])) if n else minden
    tol = np.finfo(dtype).eps
    minden = knp.where(minden == 0, tol, minden)
    off = knp.max(knp.sum(knp.abs(knp.triu(t, 1)), axis=0)) if n else knp.asarray(0.0)
    err = knp.where(knp.any(knp.isinf(f)), np.inf, knp.minimum(1, knp.maximum(tol, (tol / minden) * off)))
    return f, err


def bartels_stewart(a, b, q):
    """X with A X + X B = Q for one real A (m, m), B (n, n), Q (m, n) (Bartels-Stewart): the complex Schur
    forms A = U R U^H, B = V S V^H, then R Y + Y S = U^H Q V by an anti-diagonal wavefront (entry (i, j)
    needs the entries below it and to its left, so the m + n - 1 anti-diagonals from the bottom-left corner
    are solved in order, each from one residual F - R Y - Y S), and X = real(U Y V^H)."""
    ra, ua = schur(a, output="complex")
    sb, vb = schur(b, output="complex")
    m, n = a.shape[-1], b.shape[-1]
    f = knp.matmul(knp.matmul(knp.conj(knp.transpose(ua)), q.astype(ra.dtype)), vb)
    denominator = knp.expand_dims(knp.diagonal(ra), -1) + knp.diagonal(sb)
    wave = (m - 1 - np.arange(m))[:, None] + np.arange(n)[None, :]

    def step(d, y):
        residual = f - knp.matmul(ra, y) - knp.matmul(y, sb)
        return knp.where(wave == d, residual / denominator, y)

    y = fori_loop(0, m + n - 1, step, knp.zeros((m, n), ra.dtype))
    return knp.real(knp.matmul(knp.matmul(ua, y), knp.conj(knp.transpose(vb)))).astype(a.dtype)
