"""eigh_ql: the symmetric eigendecomposition of real float32/float64 matrices as one native kernel
(kiln.compiler.strategies.eigh, codegen/linalg_eigh.py), the implementation of eigh_p
(kiln.lax._linalg_spectral) for those dtypes.

One matrix, held in its eigenvector output (n x n, row-major) with the eigenvalue output and two
vectors of n scalars on the kernel's stack:

1. read the triangle named by `lower` into a full symmetric matrix, divided by its largest |entry|
   (a matrix with a NaN or an infinity gives NaN everywhere, as JAX's LAPACK call does for NaN);
2. Householder tridiagonalization from the last row up (EISPACK tred2 / Numerical Recipes' order: row
   i's reflector, scaled by its row's sum of |entries|, zeroes a[i, :i-1]; the trailing block gets the
   symmetric rank-2 update A - q u^T - u q^T on full rows), the reflectors kept in the rows they cleared;
3. Q^T accumulated in place from the reflectors (rows of the leading block times P_i);
4. the implicit QL algorithm with Wilkinson's shift on the tridiagonal matrix (tqli), each plane rotation
   applied to two rows of Q^T (the eigenvectors are rows until the end, so every O(n^3) loop runs over
   contiguous memory), at most MAX_ITERATIONS iterations per eigenvalue (more gives NaN: LAPACK's
   failure);
5. eigenvalues multiplied back by the scale, sorted ascending (selection sort swapping rows), and the
   matrix transposed in place so the eigenvectors are columns.

`eigh_numpy` is the same algorithm in numpy (same formulas, order and choices; the kernel's sums are
vectorized, so results differ only by rounding): eager evaluation runs it, so eager and compiled results
agree, signs of the vectors included.
"""
from __future__ import annotations

import numpy as np

from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register

MAX_ITERATIONS = 60
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
MAX_STACK_BYTES = 1 << 18
WORK_VECTORS = 5
WORK_PAD = 16
"""The kernel keeps WORK_VECTORS vectors of n + WORK_PAD scalars per matrix on its stack (the
subdiagonal, the Householder update's q, the zero-padded reflector, a QL sweep's cosines and sines;
WORK_PAD bounds the vector width it uses): eigh uses eigh_ql when they take at most MAX_STACK_BYTES
(256 KiB, as much as the matmul kernel's packed panels: n up to 6537 in float64, 13091 in float32),
Jacobi otherwise."""


def stack_fits(n: int, dtype) -> bool:
    """Whether eigh_ql's kernel takes n x n matrices of dtype (its work vectors fit on the stack)."""
    return WORK_VECTORS * (n + WORK_PAD) * np.dtype(dtype).itemsize <= MAX_STACK_BYTES


eigh_ql_p = register(Primitive("eigh_ql", multiple_results=True))
eigh_ql_p.def_traits(fusion="kernel", kernel="eigh")


def supported(dtype) -> bool:
    """Whether eigh_ql computes matrices of dtype (real float32 and float64)."""
    return np.dtype(dtype) in DTYPES


def _check(shape, dtype):
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"eigh_ql: expected a batch of square matrices, got shape {tuple(shape)}")
    if not supported(dtype):
        raise TypeError(f"eigh_ql: expected float32 or float64 matrices, got {np.dtype(dtype)}")


@eigh_ql_p.def_abstract_eval
def _abstract(x, *, lower, sort_eigenvalues):
    _check(x.shape, x.dtype)
    return [ShapedArray(x.shape, x.dtype), ShapedArray(x.shape[:-1], x.dtype)]


def _pythag(a, b):
    """sqrt(a^2 + b^2) without overflow or destructive underflow: the plain formula where a^2 + b^2 lies in
    [tiny / eps, huge / 2], else m sqrt(1 + (small / m)^2) (the kernel's choice)."""
    info = np.finfo(a.dtype)
    t = a * a + b * b
    if info.tiny / info.eps <= t <= info.max / 2:
        return np.sqrt(t)
    a, b = abs(a), abs(b)
    if a > b:
        return a * np.sqrt(1 + (b / a) * (b / a))
    if b == 0:
        return b
    return b * np.sqrt(1 + (a / b) * (a / b))


def _tridiagonalize(z, d, e):
    n = z.shape[0]
    for i in range(n - 1, 0, -1):
        if i >= 2:
            row = z[i, :i]
            scale = np.abs(row).sum()
            if scale == 0:
                e[i], d[i] = row[i - 1], 0
                continue
            row /= scale
            h = (row * row).sum()
            f = row[i - 1]
            g = -np.sqrt(h) if f >= 0 else np.sqrt(h)
            e[i] = scale * g
            h = h - f * g
            row[i - 1] = f - g
            p = (z[:i, :i] @ row) / h
            k = (row * p).sum() / (h + h)
            q = p - k * row
            z[:i, :i] -= np.outer(q, row) + np.outer(row, q)
            d[i] = h
        else:
            e[i], d[i] = z[i, i - 1], 0
    d[0] = e[0] = 0


def _accumulate(z, d):
    n = z.shape[0]
    for i in range(n):
        if d[i] != 0:
            u = z[i, :i]
            g = (z[:i, :i] @ u) / d[i]
            z[:i, :i] -= np.outer(g, u)
        d[i] = z[i, i]
        z[i, i] = 1
        z[i, :i] = 0
        z[:i, i] = 0


def _ql(z, d, e, eps) -> bool:
    """The implicit QL iterations; False when an eigenvalue needs more than MAX_ITERATIONS."""
    n = d.shape[0]
    info = np.finfo(d.dtype)
    floor = d.dtype.type(info.tiny / info.eps)  # below it subnormal arithmetic may never converge
    e[:n - 1] = e[1:].copy()
    e[n - 1] = 0

    def negligible(m):
        return abs(e[m]) <= eps * (abs(d[m]) + abs(d[m + 1])) + floor

    first = 0
    while first < n:
        # an unreduced block [first, last]; QL converges from its top and chases from its bottom, so larger
        # entries belong at the bottom (a block graded the other way underflows the chase): reversed when
        # its last diagonal entry is smaller than its first (LAPACK steqr's choice between QL and QR)
        last = first
        while last < n - 1 and not negligible(last):
            last += 1
        if first < last and abs(d[last]) < abs(d[first]):
            _reverse_block(z, d, e, first, last)
        for l in range(first, last + 1):
            if not _ql_eigenvalue(z, d, e, l, negligible, eps):
                return False
        first = last + 1
    return True


def _reverse_block(z, d, e, first, last):
    d[first:last + 1] = d[first:last + 1][::-1].copy()
    e[first:last] = e[first:last][::-1].copy()
    z[first:last + 1] = z[first:last + 1][::-1].copy()


def _ql_eigenvalue(z, d, e, l, negligible, eps) -> bool:
    """QL iterations until d[l] has converged (False after MAX_ITERATIONS). Before the first, an unreduced
    block [l, m] whose bottom entry is below eps times its top one (a block that was the bottom of a
    matrix graded both ways) is reversed, as whole blocks are in _ql."""
    n = d.shape[0]
    iterations = 0
    while True:
        m = l
        while m < n - 1 and not negligible(m):
            m += 1
        if m == l:
            break
        if iterations == 0 and abs(d[m]) < eps * abs(d[l]):
            _reverse_block(z, d, e, l, m)
        if iterations == MAX_ITERATIONS:
            return False
        iterations += 1
        g = (d[l + 1] - d[l]) / (e[l] + e[l])
        r = abs(_pythag(g, d.dtype.type(1)))
        g = d[m] - d[l] + e[l] / (g + (r if g >= 0 else -r))
        s = c = d.dtype.type(1)
        p = d.dtype.type(0)
        i = m - 1
        deflated = False
        while i >= l:
            f, b = s * e[i], c * e[i]
            r = _pythag(f, g)
            e[i + 1] = r
            if r == 0:
                d[i + 1] -= p
                e[m] = 0
                deflated = True
                break
            s, c = f / r, g / r
            g = d[i + 1] - p
            r = (d[i] - g) * s + 2 * c * b
            p = s * r
            d[i + 1] = g + p
            g = c * r - b
            zi, zj = z[i].copy(), z[i + 1]
            z[i] = c * zi - s * zj
            z[i + 1] = s * zi + c * zj
            i -= 1
        if deflated:
            continue
        d[l] -= p
        e[l] = g
        e[m] = 0
    return True




def _one(a, lower: bool, sort_eigenvalues: bool):
    dtype = a.dtype
    n = a.shape[0]
    t = np.tril(a) if lower else np.triu(a).T
    z = t + np.tril(t, -1).T
    amax = np.abs(z).max()
    if not np.isfinite(amax) or np.isnan(z).any():
        return np.full((n, n), np.nan, dtype), np.full((n,), np.nan, dtype)
    scale = amax if amax != 0 else dtype.type(1)
    z = z / scale
    d, e = np.zeros(n, dtype), np.zeros(n, dtype)
    with np.errstate(all="ignore"):
        _tridiagonalize(z, d, e)
        _accumulate(z, d)
        if not _ql(z, d, e, np.finfo(dtype).eps):
            return np.full((n, n), np.nan, dtype), np.full((n,), np.nan, dtype)
    d = d * scale
    if sort_eigenvalues:
        for i in range(n - 1):
            k = i + int(np.argmin(d[i:]))
            if d[k] < d[i]:
                d[i], d[k] = d[k], d[i]
                z[[i, k]] = z[[k, i]]
    return z.T.copy(), d


def eigh_numpy(x, *, lower: bool, sort_eigenvalues: bool):
    """[v, w] of eigh_ql computed with numpy (the kernel's algorithm; see the module docstring)."""
    x = np.asarray(x)
    _check(x.shape, x.dtype)
    shape, n = x.shape, x.shape[-1]
    flat = x.reshape((-1, n, n))
    v = np.empty(flat.shape, x.dtype)
    w = np.empty(flat.shape[:2], x.dtype)
    for k in range(flat.shape[0]):
        v[k], w[k] = _one(flat[k], lower, sort_eigenvalues)
    return [v.reshape(shape), w.reshape(shape[:-1])]


eigh_ql_p.def_impl(eigh_numpy)


def eigh_ql(x, *, lower: bool, sort_eigenvalues: bool):
    """[v, w]: eigenvectors (columns) and eigenvalues of the symmetric matrices read from the triangle of x
    named by lower (float32/float64, (..., n, n))."""
    return eigh_ql_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues))
