"""The native kernels of qr and svd for real float32/float64 matrices (the `svd` kernel strategy,
kiln/compiler/codegen/linalg_svd.py): one primitive each, a kernel of its own, one dispatch per call
with the batch's matrices split over the workgroups. kiln.lax._linalg_spectral's qr and svd composites
bind them in their graphs (complex, half and empty matrices keep the lax composite path).

Each primitive's eager implementation below is the kernel's algorithm step for step in numpy (batched),
so eager results equal compiled ones up to rounding, in float64 the signs of singular vectors included (in
float32 a rounding can flip a rotation decision near the threshold and with it a pair's sign).

- qr_kernel: Householder QR as LAPACK's geqrf computes it (R's diagonal is -sign(pivot) * the column's
  norm; a column already zero below the diagonal is left alone: tau = 0), each column's norm scaled by
  its largest entry; Q formed backwards (orgqr: H_{k-1} first, only the columns it changes).
- svd_kernel, N = min(m, n) >= BIDIAG_FROM (uses_bidiagonal): x (or x^T when wide, so M >= N) divided by
  its largest |entry| (a NaN or an infinity: every result NaN), Householder bidiagonalization x = Q B P^T
  (gebd2's order; each reflector as qr's), Q's columns and P formed backwards as orgqr, then Golub and
  Reinsch's implicit-shift QR on B (as EISPACK's svd; the rotations applied to Q's and P's columns; more
  than MAX_QR_ITERATIONS sweeps for one singular value: all NaN), each pair of vectors negated where v's
  first largest |entry| is negative (canonical signs, so that eager and compiled agree whatever a rounding
  changes in the sweeps' decisions), singular values sorted descending with their vectors.
- svd_kernel, smaller N: x (or x^T when wide, so M >= N) divided by its largest |entry| (NaN if x holds
  one, so that every result is NaN), then x = Q R (as above),
  then one-sided Jacobi (Hestenes) on R's columns: sweeps over all pairs in the round-robin order (round
  r pairs (r, N'-1) and ((r+k) mod (N'-1), (r-k) mod (N'-1)), N' = N rounded up to even, the pairs
  with the padding column skipped) until a sweep rotates no pair (at most MAX_SWEEPS); a pair rotates
  when |w_p . w_q| > sqrt(N) eps |w_p| |w_q| (LAPACK's gesvj criterion), applied as three shears
  (rotate_by_shears: three multiply-adds per element, not four operations); each sweep starts from the
  columns' exact squared norms, a rotation updates them (alpha - t gamma, beta + t gamma, as gesvj) and
  recomputes one that cancelled below NORM_GUARD of its old value. The sweeps run on R^T's columns (R's rows: fewer sweeps
  than on R's): R^T V = W, so x = (Q V) S (W S^-1)^T; the singular values are W's column norms, sorted
  descending (stably; NaN last); U = Q[:, :N] V (sorted): the reflectors applied to [V; 0] when U has
  N columns, else Q formed, with Q's other columns after them; the right vectors are the sorted W's columns times 1 / sigma when every squared norm is normal
  (>= the dtype's tiny), else Q_W sign(diag R_W) from a Householder QR of the sorted W (its columns are
  orthogonal, so R_W is diagonal and Q_W completes them where a singular value is zero).

The kernels need scratch memory (the matrices in column storage, Q, W, V): a last output, `work`,
zeroed by the kernel when it is done (its eager value is zeros), which nothing reads.
"""
from __future__ import annotations

import numpy as np

from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from ._eigh_ql import _pythag  # sqrt(a^2 + b^2) as the kernels compute it

MAX_SWEEPS = 40
_NATIVE = (np.dtype(np.float32), np.dtype(np.float64))


def native_dtype(dtype) -> bool:
    """Whether qr/svd of this dtype take the native kernels (real float32/float64)."""
    return np.dtype(dtype) in _NATIVE


# ---- sizes of the outputs and the scratch ------------------------------------------------------------

def qr_sizes(m: int, n: int, full_matrices: bool) -> tuple[int, int]:
    """(columns of q, rows of r)."""
    k = m if full_matrices else min(m, n)
    return k, k


def qr_work_size(m: int, n: int, full_matrices: bool) -> int:
    """Scratch elements per matrix: x's columns (n x m), Q's columns (kq x m), the taus."""
    kq, _ = qr_sizes(m, n, full_matrices)
    return n * m + kq * m + min(m, n)


def svd_work_size(m: int, n: int, full_matrices: bool, compute_uv: bool) -> int:
    """Scratch elements per matrix, M = max(m, n), N = min(m, n). The bidiagonal path: A's columns (N x M),
    d, e, the taus of Q and P, M for A v and 9 N for two sweeps' rotations and the signs; with compute_uv also P's
    reflectors (N x N), Q's columns (kq x M) and V (N x N). The Jacobi path: A's columns (N x M), its taus, W (N x N),
    the squared norms (N) and ten values per pair of a Jacobi round; with compute_uv also Q's columns (kq x M), V (N x N), the sorted W (N x N),
    its Q (N x N) and taus (N)."""
    big, small = max(m, n), min(m, n)
    if uses_bidiagonal(m, n):  # A's columns, d, e, the taus of Q and P, A v (M), two sweeps' rotations and
        # the signs (9 N);
        # with compute_uv also P's reflectors (N x N), Q's columns (kq x M) and V (N x N)
        size = small * big + 4 * small + big + 9 * small
        if compute_uv:
            size += 2 * small * small + (big if full_matrices else small) * big
        return size
    size = small * big + small + small * small + small + 10 * ((small + small % 2) // 2)
    if compute_uv:
        kq = big if full_matrices else small
        size += kq * big + 3 * small * small + small
    return size


# ---- numpy mirror of the kernels (the eager implementation) ------------------------------------------

def _householder(a, columns: int):
    """In place on a (B, m, n): the first `columns` Householder steps. Returns the taus (B, columns);
    a holds R on and above the diagonal and the reflectors' v (v_j = 1 implied) below it."""
    bsz, m, n = a.shape
    taus = np.zeros((bsz, columns), a.dtype)
    with np.errstate(all="ignore"):
        for j in range(columns):
            col = a[:, j:, j]
            alpha, below = col[:, 0].copy(), col[:, 1:]
            scale = np.max(np.abs(col), axis=1)
            safe = np.where(scale > 0, scale, 1).astype(a.dtype)
            scaled = below / safe[:, None]
            below_sq = np.sum(scaled * scaled, axis=1)
            # beta, tau and v from the column divided by its largest |entry| (as LAPACK's larfg rescales a
            # tiny column): a subnormal column's own differences would lose the bits H's orthogonality needs
            sa = alpha / safe
            reflect = below_sq > 0
            sbeta = -np.where(alpha >= 0, 1, -1).astype(a.dtype) * np.sqrt(sa * sa + below_sq)
            beta = np.where(reflect, safe * sbeta, alpha)
            tau = np.where(reflect, (sbeta - sa) / np.where(reflect, sbeta, 1), 0).astype(a.dtype)
            gap = np.where(reflect, sa - sbeta, 1).astype(a.dtype)
            v = (scaled / gap[:, None]).astype(a.dtype)
            if j + 1 < n:
                rest = a[:, j + 1:, j + 1:]
                w = a[:, j, j + 1:] + np.einsum("bi,bic->bc", v, rest)
                tw = tau[:, None] * w
                a[:, j, j + 1:] -= tw
                rest -= v[:, :, None] * tw[:, None, :]
            a[:, j, j] = beta
            a[:, j + 1:, j] = v
            taus[:, j] = tau
    return taus


def _form_q(a, taus, columns: int):
    """Q's first `columns` columns (B, m, columns) from _householder's reflectors, H_{k-1} applied first."""
    bsz, m, _ = a.shape
    q = np.zeros((bsz, m, columns), a.dtype)
    q[:, np.arange(min(m, columns)), np.arange(min(m, columns))] = 1
    return _reflect(a, taus, q, identity=True)


def _reflect(a, taus, q, identity: bool):
    """q (B, m, c) <- Q q in place, H_{k-1} applied first; from column j on for H_j when q started as the
    identity (the columns before j are unit vectors H_j leaves alone)."""
    bsz = a.shape[0]
    with np.errstate(all="ignore"):
        for j in range(taus.shape[1] - 1, -1, -1):
            v = np.concatenate([np.ones((bsz, 1), a.dtype), a[:, j + 1:, j]], axis=1)
            block = q[:, j:, j:] if identity else q[:, j:, :]
            w = np.einsum("bi,bic->bc", v, block)
            block -= v[:, :, None] * (taus[:, j, None] * w)[:, None, :]
    return q


def _qr_numpy(x, full_matrices: bool):
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    a = np.array(x.reshape((-1, m, n)), copy=True)
    k = min(m, n)
    kq, kr = qr_sizes(m, n, full_matrices)
    taus = _householder(a, k)
    q = _form_q(a, taus, kq)
    r = np.triu(a[:, :kr, :])
    return q.reshape(batch + (m, kq)), r.reshape(batch + (kr, n))


def round_robin_pairs(size: int, r: int):
    """The pairs (p < q) of round r of a sweep over `size` (even) positions."""
    last = size - 1
    pairs = [(r % last if last else 0, last)]
    for k in range(1, size // 2):
        a, b = (r + k) % last, (r - k) % last
        pairs.append((min(a, b), max(a, b)))
    return pairs


def _rotation(theta, active):
    """kiln.lax._jacobi's rotation: t = sign(theta) / (|theta| + sqrt(1 + theta^2)) without overflow.
    Returns (c, s, t, p): cosine, sine, tangent and the shears' p = s / (1 + c) = tan(angle / 2)."""
    with np.errstate(all="ignore"):
        big = np.abs(theta) > 1
        inverse = 1 / np.where(big, theta, 1)
        root = np.where(big, np.abs(theta) * (1 + np.sqrt(1 + inverse * inverse)),
                        np.abs(theta) + np.sqrt(1 + theta * theta))
        t = np.where(active, np.where(theta >= 0, 1, -1) / root, 0).astype(theta.dtype)
        c = (1 / np.sqrt(1 + t * t)).astype(theta.dtype)
        s = (t * c).astype(theta.dtype)
    return c, s, t, (s / (1 + c)).astype(theta.dtype)


def rotate_by_shears(x, y, s, p):
    """(c x - s y, s x + c y) as three shears (x -= p y; y += s x; x -= p y): three multiply-adds where
    the rotation takes four operations, and as accurate (|p|, |s| <= 1)."""
    x = x - p * y
    y = y + s * x
    return x - p * y, y


# A squared norm updated by a rotation (alpha - t gamma) that falls below this fraction of its old value
# lost bits to cancellation: it is recomputed from the rotated column instead.
NORM_GUARD = 1.0 / 16


def _jacobi(w, v):
    """One-sided Jacobi on the columns of w (B, N, N) in place, v (B, N, N) or None rotated along.
    Returns the squared column norms (B, N). Each sweep starts from exact squared norms; a rotation
    updates them as gesvj does (alpha - t gamma, beta + t gamma), recomputing one that cancelled below
    NORM_GUARD of its old value; the returned norms are recomputed from the final columns."""
    n = w.shape[-1]
    dtype = w.dtype
    tol = dtype.type(np.sqrt(n) * np.finfo(dtype).eps)
    guard = dtype.type(NORM_GUARD)
    size = n + n % 2
    rounds = []
    for r in range(size - 1):
        pairs = [(p, q) for p, q in round_robin_pairs(size, r) if q < n]
        if pairs:
            rounds.append((np.array([p for p, _ in pairs]), np.array([q for _, q in pairs])))
    with np.errstate(all="ignore"):
        for _ in range(MAX_SWEEPS):
            d = np.sum(w * w, axis=1)
            rotated = False
            for ps, qs in rounds:
                wp, wq = w[:, :, ps], w[:, :, qs]
                alpha, beta = d[:, ps], d[:, qs]
                gamma = np.sum(wp * wq, axis=1)
                active = np.abs(gamma) > tol * (np.sqrt(alpha) * np.sqrt(beta))
                if not active.any():
                    continue
                rotated = True
                _, s, t, p = _rotation((beta - alpha) / (2 * np.where(active, gamma, 1)), active)
                s3, p3, act3 = s[:, None, :], p[:, None, :], active[:, None, :]
                new_p, new_q = rotate_by_shears(wp, wq, s3, p3)
                w[:, :, ps] = np.where(act3, new_p, wp)
                w[:, :, qs] = np.where(act3, new_q, wq)
                tg = t * gamma
                for idx, old, new, col in ((ps, alpha, alpha - tg, new_p), (qs, beta, beta + tg, new_q)):
                    recompute = active & ~(new >= old * guard)
                    d[:, idx] = np.where(recompute, np.sum(col * col, axis=1), np.where(active, new, old))
                if v is not None:
                    vp, vq = v[:, :, ps], v[:, :, qs]
                    new_vp, new_vq = rotate_by_shears(vp, vq, s3, p3)
                    v[:, :, ps] = np.where(act3, new_vp, vp)
                    v[:, :, qs] = np.where(act3, new_vq, vq)
            if not rotated:
                break
    return np.sum(w * w, axis=1)


def descending_order(sigma):
    """The stable order of sigma (B, N) descending, NaN last."""
    key = np.where(np.isnan(sigma), np.inf, -sigma)
    return np.argsort(key, axis=-1, kind="stable")


# ---- Golub-Kahan-Reinsch SVD (N >= BIDIAG_FROM) --------------------------------------------------------

BIDIAG_FROM = 32
"""Matrices whose smaller side is at least this take the bidiagonal path (Householder bidiagonalization,
then implicit-shift QR on the bidiagonal matrix); smaller ones the QR + one-sided Jacobi path."""

MAX_QR_ITERATIONS = 60
"""Implicit QR sweeps allowed per singular value before the matrix's results are NaN."""


def uses_bidiagonal(m: int, n: int) -> bool:
    """Whether the svd of an m x n matrix takes the bidiagonal path."""
    return min(m, n) >= BIDIAG_FROM


def _reflector(x):
    """In place on x (1-D, length >= 1): the Householder reflector of _householder's formulas (LAPACK's
    larfg, computed on x divided by its largest |entry|). Returns (tau, beta); x[1:] becomes v (v_0 = 1 implied)."""
    dtype = x.dtype
    alpha, below = x[0], x[1:]
    scale = np.max(np.abs(x))
    safe = scale if scale > 0 else dtype.type(1)
    scaled = below / safe
    below_sq = np.sum(scaled * scaled, dtype=dtype)
    sa = alpha / safe
    if not below_sq > 0:
        x[1:] = scaled
        return dtype.type(0), alpha
    snorm = np.sqrt(sa * sa + below_sq)
    sbeta = -snorm if alpha >= 0 else snorm
    x[1:] = scaled / (sa - sbeta)
    return (sbeta - sa) / sbeta, safe * sbeta


def _bidiagonalize(a):
    """In place on a (M, N), M >= N: A = Q B P^T with B upper bidiagonal (LAPACK gebd2's order: for each i,
    the left reflector of column i, then the right one of row i). Returns (d, e, taus_q, taus_p): B's
    diagonal and superdiagonal; a keeps the left reflectors' v below the diagonal (as _householder) and
    the right ones' in row i right of the superdiagonal (v_0 = 1 at column i + 1)."""
    m, n = a.shape
    dtype = a.dtype
    d, e = np.zeros(n, dtype), np.zeros(n, dtype)
    taus_q, taus_p = np.zeros(n, dtype), np.zeros(n, dtype)
    for i in range(n):
        tau, beta = _reflector(a[i:, i])
        if tau != 0 and i + 1 < n:
            v = a[i + 1:, i]
            rest = a[i + 1:, i + 1:]
            tw = tau * (a[i, i + 1:] + v @ rest)
            a[i, i + 1:] -= tw
            rest -= v[:, None] * tw[None, :]
        a[i, i] = d[i] = beta
        taus_q[i] = tau
        if i + 1 < n:
            tau, beta = _reflector(a[i, i + 1:])
            if tau != 0:
                v = a[i, i + 2:]
                rest = a[i + 1:, i + 1:]
                tw = tau * (rest[:, 0] + rest[:, 1:] @ v)
                rest[:, 0] -= tw
                rest[:, 1:] -= tw[:, None] * v[None, :]
            a[i, i + 1] = e[i] = beta
            taus_p[i] = tau
    return d, e, taus_q, taus_p


def _right_reflectors(a, taus_p):
    """P's reflectors as _form_q reads them: column j + 1 of an N x N matrix holds row j's v below row
    j + 1, tau_{j+1} = taus_p[j], tau_0 = 0 (so P = H_1 ... H_{N-1}, H_{j+1} acting on rows j + 1 on)."""
    n = a.shape[1]
    y = np.zeros((n, n), a.dtype)
    taus = np.zeros(n, a.dtype)
    for j in range(n - 1):
        y[j + 2:, j + 1] = a[j, j + 2:]
        taus[j + 1] = taus_p[j]
    return y, taus


def _rotate(x, i, j, c, s):
    """Columns i, j of x <- (x_i c + x_j s, x_j c - x_i s)."""
    xi, xj = x[:, i].copy(), x[:, j]
    x[:, i] = xi * c + xj * s
    x[:, j] = xj * c - xi * s


def _bidiagonal_qr(w, rv1, u, v):
    """The singular values of the upper bidiagonal matrix with diagonal w and superdiagonal rv1[1:] (rv1[0]
    = 0), in place in w (>= 0, unsorted); u's and v's first N columns rotated along (either may be None).
    Golub and Reinsch's implicit-shift QR (as EISPACK's svd): for k = N-1 down to 0, split at the last
    negligible rv1[l] (|rv1[l]| + anorm == anorm) or w[l-1] (whose rv1[l] is then chased out by rotations
    of rows l-1 and l..k, applied to u), then sweeps from l with the shift of the trailing 2x2 until rv1[k]
    is negligible; a negative w[k] flips v's column k. Returns False when a singular value takes more than
    MAX_QR_ITERATIONS sweeps."""
    n = w.shape[0]
    dtype = w.dtype
    one, zero = dtype.type(1), dtype.type(0)
    anorm = zero
    for i in range(n):
        anorm = max(anorm, abs(w[i]) + abs(rv1[i]))
    for k in range(n - 1, -1, -1):
        its = 0
        while True:
            cancel = True
            for l in range(k, -1, -1):
                if abs(rv1[l]) + anorm == anorm:
                    cancel = False
                    break
                if abs(w[l - 1]) + anorm == anorm:
                    break
            if cancel:
                nm = l - 1
                c, s = zero, one
                for i in range(l, k + 1):
                    f = s * rv1[i]
                    rv1[i] = c * rv1[i]
                    if abs(f) + anorm == anorm:
                        break
                    g = w[i]
                    h = _pythag(f, g)
                    w[i] = h
                    c, s = g / h, -f / h
                    if u is not None:
                        _rotate(u, nm, i, c, s)
            z = w[k]
            if l == k:
                if z < 0:
                    w[k] = -z
                    if v is not None:
                        v[:, k] = -v[:, k]
                break
            if its == MAX_QR_ITERATIONS:
                return False
            its += 1
            x, y, g, h = w[l], w[k - 1], rv1[k - 1], rv1[k]
            f = ((y - z) * (y + z) + (g - h) * (g + h)) / (2 * h * y)
            g = _pythag(f, one)
            f = ((x - z) * (x + z) + h * (y / (f + (g if f >= 0 else -g)) - h)) / x
            c = s = one
            for j in range(l, k):
                i = j + 1
                g, y = rv1[i], w[i]
                h, g = s * g, c * g
                z = _pythag(f, h)
                rv1[j] = z
                c, s = f / z, h / z
                f, g = x * c + g * s, g * c - x * s
                h, y = y * s, y * c
                if v is not None:
                    _rotate(v, j, i, c, s)
                z = _pythag(f, h)
                w[j] = z
                if z != 0:
                    c, s = f / z, h / z
                f, x = c * g + s * y, c * y - s * g
                if u is not None:
                    _rotate(u, j, i, c, s)
            rv1[l] = zero
            rv1[k] = f
            w[k] = x
    return True


def _svd_bidiagonal_one(a, kq: int, compute_uv: bool):
    """One matrix a (M, N), M >= N, scaled to a largest |entry| of 1 (finite): (sigma, U (M, kq), V (N, N))
    unsorted (U, V None without compute_uv), or None when the QR iteration failed."""
    m, n = a.shape
    dtype = a.dtype
    with np.errstate(all="ignore"):
        d, e, taus_q, taus_p = _bidiagonalize(a)
        u = v = None
        if compute_uv:
            u = _form_q(a[None], taus_q[None], kq)[0]
            y, taus_y = _right_reflectors(a, taus_p)
            v = _form_q(y[None], taus_y[None], n)[0]
        rv1 = np.zeros(n, dtype)
        rv1[1:] = e[:-1]
        if not _bidiagonal_qr(d, rv1, u, v):
            return None
        if compute_uv:
            _canonical_signs(u, v)
    return d, u, v


def _canonical_signs(u, v):
    """Each pair of singular vectors (u's and v's column k) negated where v's largest |entry| (the first) is
    negative: the QR sweeps' decisions (a negligible entry, one sweep more) can flip a pair's sign, and a
    rounding can change them between the eager mirror and the kernel; after this the signs agree."""
    n = v.shape[1]
    for k in range(n):
        if v[np.argmax(np.abs(v[:, k])), k] < 0:
            v[:, k] = -v[:, k]
            u[:, k] = -u[:, k]


def _svd_bidiagonal(a, scale, full_matrices: bool, compute_uv: bool):
    """The bidiagonal path of _svd_numpy for a (B, M, N), M >= N, already divided by scale (B,): returns
    (s (B, N), u (B, M, kq), v (B, N, N)) with s sorted descending and u's first N columns and v's sorted
    along; a matrix with a non-finite scale (a NaN or an infinity) or whose QR iteration fails is all NaN."""
    bsz, big, small = a.shape
    dtype = a.dtype
    kq = big if full_matrices else small
    s = np.full((bsz, small), np.nan, dtype)
    u = np.full((bsz, big, kq), np.nan, dtype)
    v = np.full((bsz, small, small), np.nan, dtype)
    for k in range(bsz):
        if not np.isfinite(scale[k]):
            continue
        result = _svd_bidiagonal_one(np.array(a[k], copy=True), kq, compute_uv)
        if result is None:
            continue
        sigma, uk, vk = result
        order = descending_order(sigma[None])[0]
        s[k] = sigma[order] * scale[k]
        if compute_uv:
            u[k] = np.concatenate([uk[:, order], uk[:, small:]], axis=1)
            v[k] = vk[:, order]
    return s, u, v


def _svd_numpy(x, full_matrices: bool, compute_uv: bool):
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    dtype = x.dtype
    a = x.reshape((-1, m, n))
    wide = m < n
    if wide:
        a = np.swapaxes(a, 1, 2)
    big, small = max(m, n), min(m, n)
    with np.errstate(all="ignore"):
        scale = np.max(np.abs(a), axis=(1, 2)) if a.shape[0] else np.zeros((0,), dtype)
        scale = np.where(scale == 0, 1, scale).astype(dtype)  # NaN stays: every result NaN
        a = (a / scale[:, None, None]).astype(dtype)
    if uses_bidiagonal(m, n):
        s, u, v = _svd_bidiagonal(a, scale, full_matrices, compute_uv)
        if not compute_uv:
            return [s.reshape(batch + (small,))]
        vh = np.swapaxes(v, 1, 2)
        if wide:
            u, vh = np.swapaxes(vh, 1, 2), np.swapaxes(u, 1, 2)
        return [s.reshape(batch + (small,)), np.ascontiguousarray(u).reshape(batch + u.shape[1:]),
                np.ascontiguousarray(vh).reshape(batch + vh.shape[1:])]
    taus = _householder(a, small)
    w = np.swapaxes(np.triu(a[:, :small, :]), 1, 2).copy()  # Jacobi on R^T's columns (R's rows)
    v = np.broadcast_to(np.eye(small, dtype=dtype), w.shape).copy() if compute_uv else None
    d = _jacobi(w, v)
    sigma = np.sqrt(d)
    order = descending_order(sigma)
    s = (np.take_along_axis(sigma, order, axis=1) * scale[:, None]).astype(dtype)
    if not compute_uv:
        return [s.reshape(batch + (small,))]
    kq = big if full_matrices else small
    ws = np.take_along_axis(w, order[:, None, :], axis=2)
    vs = np.take_along_axis(v, order[:, None, :], axis=2)
    if kq == small:  # U = Q [V; 0]: the reflectors applied to V (no Q formed)
        u = np.zeros((a.shape[0], big, small), dtype)
        u[:, :small, :] = vs
        u = _reflect(a, taus, u, identity=False)
    else:
        q = _form_q(a, taus, kq)
        u = np.concatenate([(q[:, :, :small] @ vs).astype(dtype), q[:, :, small:]], axis=2)
    # W's columns are orthogonal: normalized, they are the right vectors, unless a squared norm is zero
    # or subnormal (a zero singular value's vector must complete the basis, a subnormal column lost its
    # direction's digits): then the Householder QR of the sorted W gives them (Q_W sign(diag R_W))
    normal = np.all(d >= np.finfo(dtype).tiny, axis=1)
    with np.errstate(all="ignore"):
        inverse = (1 / np.take_along_axis(sigma, order, axis=1)).astype(dtype)
        q_w = ws * inverse[:, None, :]
    if not normal.all():
        rest = ~normal
        wr = ws[rest].copy()
        taus_w = _householder(wr, small)
        q_r = _form_q(wr, taus_w, small)
        signs = np.where(wr[:, np.arange(small), np.arange(small)] >= 0, 1, -1).astype(dtype)
        q_w[rest] = q_r * signs[:, None, :]
    vh = np.swapaxes(q_w, 1, 2)
    if wide:
        u, vh = np.swapaxes(vh, 1, 2), np.swapaxes(u, 1, 2)
    return [s.reshape(batch + (small,)), np.ascontiguousarray(u).reshape(batch + u.shape[1:]),
            np.ascontiguousarray(vh).reshape(batch + vh.shape[1:])]


# ---- the primitives -----------------------------------------------------------------------------------

def _qr_avals(x, *, full_matrices):
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    kq, kr = qr_sizes(m, n, full_matrices)
    return [ShapedArray(batch + (m, kq), x.dtype), ShapedArray(batch + (kr, n), x.dtype),
            ShapedArray(batch + (qr_work_size(m, n, full_matrices),), x.dtype)]


def _qr_eager(x, *, full_matrices):
    x = np.asarray(x)
    q, r = _qr_numpy(x, full_matrices)
    work = np.zeros(x.shape[:-2] + (qr_work_size(*x.shape[-2:], full_matrices),), x.dtype)
    return [q, r, work]


def _svd_avals(x, *, full_matrices, compute_uv):
    batch, (m, n) = x.shape[:-2], x.shape[-2:]
    k = min(m, n)
    outs = [ShapedArray(batch + (k,), x.dtype)]
    if compute_uv:
        ku, kv = (m, n) if full_matrices else (k, k)
        outs += [ShapedArray(batch + (m, ku), x.dtype), ShapedArray(batch + (kv, n), x.dtype)]
    return outs + [ShapedArray(batch + (svd_work_size(m, n, full_matrices, compute_uv),), x.dtype)]


def _svd_eager(x, *, full_matrices, compute_uv):
    x = np.asarray(x)
    outs = _svd_numpy(x, full_matrices, compute_uv)
    work = np.zeros(x.shape[:-2] + (svd_work_size(*x.shape[-2:], full_matrices, compute_uv),), x.dtype)
    return outs + [work]


qr_kernel_p = register(Primitive("qr_kernel", multiple_results=True))
qr_kernel_p.def_abstract_eval(_qr_avals)
qr_kernel_p.def_impl(_qr_eager)
qr_kernel_p.def_traits(fusion="kernel", kernel="svd")

svd_kernel_p = register(Primitive("svd_kernel", multiple_results=True))
svd_kernel_p.def_abstract_eval(_svd_avals)
svd_kernel_p.def_impl(_svd_eager)
svd_kernel_p.def_traits(fusion="kernel", kernel="svd")


def qr(x, full_matrices: bool):
    """[q, r] of the real float32/float64 matrices x (..., m, n), m, n >= 1, from the native kernel."""
    return list(qr_kernel_p.bind(x, full_matrices=bool(full_matrices))[:2])


def svd(x, full_matrices: bool, compute_uv: bool):
    """[s] or [s, u, vh] of the real float32/float64 matrices x (..., m, n), m, n >= 1, from the native
    kernel."""
    return list(svd_kernel_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))[:-1])
