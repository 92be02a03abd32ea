"""The orthogonal and spectral factorizations under jax.lax.linalg's names: qr (Householder), eigh
(two-sided Jacobi), svd (QR, then one-sided Jacobi). Batched over leading axes.

Each is a composite primitive (kiln.lax.composite) with JAX's JVP rule and a batching rule; its
implementation is whole-matrix lax operations inside loops, so a compiled module runs a few fused
kernels per step, never one VM dispatch per element:

- qr: one Householder reflection per column (LAPACK's geqrf convention: R's diagonal is
  -sign(pivot) * norm, and a column already zero below the diagonal is left alone), accumulated into Q.
- eigh: Jacobi sweeps in the round-robin (parallel) ordering (kiln.lax._jacobi.two_sided): n/2
  disjoint rotations per round, until a sweep finds no pair above |a_pq| > eps sqrt(|a_pp a_qq|).
- svd: x = Q R (Householder), then one-sided Jacobi on R's columns (kiln.lax._jacobi.one_sided):
  R V = W with orthogonal columns whose norms are the singular values; U comes from a Householder QR
  of W (its columns are orthogonal, so that QR is diagonal and its Q completes U where a singular value
  is zero).

Odd sizes are padded with one zero row and column that no rotation touches. Matrices are scaled by
their largest |entry| first, so squares neither overflow nor underflow.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.trace import get_aval
from ..transforms.batching import move_batch_axis
from ..transforms.jvp import tangent_aval
from . import _eigh_ql
from . import _jacobi as jacobi
from . import _svd_qr_native as native
from . import api
from ._linalg_triangular import lu, matmul, permutation_matrix, swap_last, tril, triangular_solve, triu
from .composite import composite_primitive
from .control_flow import fori_loop
from .structural_prims import concatenate, pad
from .structural_prims import slice as slice_

__all__ = ["qr", "eigh", "svd"]

_I32 = np.dtype(np.int32)


# ---- array helpers over a batch of matrices (the last two axes) -------------------------------------

def _shape(x):
    return get_aval(x).shape


def _dtype(x):
    return get_aval(x).dtype


def _full(shape, value, dtype):
    return api.broadcast_in_dim(np.asarray(value, dtype), shape, ())


def _expand(x, shape):
    """x broadcast to shape, where x has shape's rank and size-1 axes where it broadcasts."""
    return api.broadcast_in_dim(x, shape, tuple(range(len(shape))))


def _along(v, shape, axis):
    """v of shape (*batch, shape[axis]) broadcast to shape along axis (batch axes lead)."""
    nb = len(_shape(v)) - 1
    return api.broadcast_in_dim(v, shape, tuple(range(nb)) + (axis,))


def _take(x, start, stop, axis):
    """The static slice start:stop of x along axis."""
    shape = _shape(x)
    starts = [0] * len(shape)
    limits = list(shape)
    starts[axis], limits[axis] = start, stop
    return slice_(x, tuple(starts), tuple(limits))


def _diagonal(a):
    """The diagonal (..., n) of every square matrix in a."""
    shape = _shape(a)
    nb = len(shape) - 2
    rows, cols = api.broadcasted_iota(_I32, shape, nb), api.broadcasted_iota(_I32, shape, nb + 1)
    return api.reduce_sum(api.select(api.eq(rows, cols), a, 0), (nb + 1,))


def _eye(batch, rows, cols, dtype):
    """A batch of (rows, cols) matrices with ones on the diagonal and zeros elsewhere."""
    shape = tuple(batch) + (rows, cols)
    nb = len(batch)
    same = api.eq(api.broadcasted_iota(_I32, shape, nb), api.broadcasted_iota(_I32, shape, nb + 1))
    return api.select(same, _full(shape, 1, dtype), _full(shape, 0, dtype))


def _identity(batch, n, dtype):
    return _eye(batch, n, n, dtype)


def _batch_max_abs(x):
    """max |x| over each matrix, shape (..., 1, 1); 1 where the matrix is zero (a safe scale)."""
    shape = _shape(x)
    nb = len(shape) - 2
    m = api.reshape(api.reduce_max(api.abs(x), (nb, nb + 1)), shape[:nb] + (1, 1))
    return api.select(api.gt(m, 0), m, _full(_shape(m), 1, _dtype(x)))


def _per_matrix(scale, shape):
    """A per-matrix scale (..., 1, 1) broadcast to a batch of vectors of shape (..., k)."""
    return _expand(api.reshape(scale, shape[:-1] + (1,)), shape)


def _sign(x):
    """+1 where x >= 0, else -1 (LAPACK's sign of zero)."""
    return api.select(api.ge(x, 0), _full(_shape(x), 1, _dtype(x)), _full(_shape(x), -1, _dtype(x)))


def _pad_square(x, n):
    """x (..., m, m) padded with zero rows and columns to (..., n, n)."""
    shape = _shape(x)
    extra = n - shape[-1]
    if extra == 0:
        return x
    config = [(0, 0, 0)] * (len(shape) - 2) + [(0, extra, 0), (0, extra, 0)]
    return pad(x, np.zeros((), _dtype(x)), config)


# ---- qr --------------------------------------------------------------------------------------------

def _householder_qr(x):
    """(q, r) with q (..., m, m) orthogonal and r (..., m, n) upper triangular, one Householder
    reflection H = I - tau v v^T (v_j = 1) per column as LAPACK's geqrf/orgqr compute them."""
    shape, dtype = _shape(x), _dtype(x)
    nb, (m, n) = len(shape) - 2, shape[-2:]
    batch = shape[:nb]
    rows_col = api.broadcasted_iota(_I32, batch + (m, 1), nb)
    rows = api.broadcasted_iota(_I32, shape, nb)
    cols = api.broadcasted_iota(_I32, shape, nb + 1)
    one = _full(batch + (1, 1), 1, dtype)
    zero = _full(batch + (1, 1), 0, dtype)

    def column(x, j):
        return api.dynamic_slice_in_dim(x, j, 1, axis=nb + 1)

    def step(j, carry):
        r, q = carry
        col = column(r, j)
        lower = api.select(api.ge(rows_col, j), col, 0)
        below = api.select(api.gt(rows_col, j), col, 0)
        alpha = api.dynamic_slice_in_dim(col, j, 1, axis=nb)
        scale = api.reshape(api.reduce_max(api.abs(lower), (nb, nb + 1)), batch + (1, 1))
        safe_scale = api.select(api.gt(scale, 0), scale, one)
        scaled_below = api.div(below, _expand(safe_scale, _shape(below)))
        below_sq = api.reshape(api.reduce_sum(api.mul(scaled_below, scaled_below), (nb, nb + 1)), batch + (1, 1))
        scaled_alpha = api.div(alpha, safe_scale)
        norm = api.mul(safe_scale, api.sqrt(api.add(api.mul(scaled_alpha, scaled_alpha), below_sq)))
        reflect = api.gt(below_sq, 0)
        beta = api.select(reflect, api.neg(api.mul(_sign(alpha), norm)), alpha)
        safe_beta = api.select(reflect, beta, one)
        tau = api.select(reflect, api.div(api.sub(beta, alpha), safe_beta), zero)
        pivot_gap = api.select(reflect, api.sub(alpha, beta), one)
        v = api.add(api.div(below, _expand(pivot_gap, _shape(below))),
                    api.select(api.eq(rows_col, j), _full(_shape(below), 1, dtype), _full(_shape(below), 0, dtype)))
        tau_v = api.mul(_expand(tau, _shape(v)), v)
        r = api.sub(r, matmul(tau_v, matmul(swap_last(v), r)))
        r = api.select(api.eq(cols, j), api.select(api.gt(rows, j), _full(shape, 0, dtype),
                                                   api.select(api.eq(rows, j), _expand(beta, shape), r)), r)
        q = api.sub(q, matmul(matmul(q, v), swap_last(tau_v)))
        return r, q

    return fori_loop(0, min(m, n), step, (x, _identity(batch, m, dtype)))[::-1]


def _qr_impl(x, *, full_matrices):
    shape, dtype = _shape(x), _dtype(x)
    batch, (m, n) = shape[:-2], shape[-2:]
    if m == 0 or n == 0:
        k = m if full_matrices else min(m, n)
        return [_eye(batch, m, k, dtype), _full(batch + (k, n), 0, dtype)]
    if native.native_dtype(dtype):  # real f32/f64: the native kernel (kiln.lax._svd_qr_native)
        return native.qr(x, full_matrices)
    q, r = _householder_qr(x)
    if not full_matrices and m > n:
        q, r = _take(q, 0, n, len(_shape(q)) - 1), _take(r, 0, n, len(_shape(r)) - 2)
    return [q, r]


qr_p = composite_primitive("qr", _qr_impl, multiple_results=True)


def _check_float_matrix(fn: str, x, *, square: bool):
    a = get_aval(x)
    if a.ndim < 2:
        raise ValueError(f"{fn}: argument x must have at least 2 dimensions (a batch of matrices), got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{fn}: argument x must be a batch of square matrices, got shape {a.shape}")
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"{fn}: argument x must be a floating-point array, got {a.dtype}")


def qr(x, *, pivoting: bool = False, full_matrices: bool = True, use_magma=None):
    """jax.lax.linalg.qr: (q, r) with x = q @ r for a batch (..., m, n); q (..., m, m) orthogonal and r
    (..., m, n) upper triangular, or with full_matrices=False q (..., m, k) and r (..., k, n), k = min(m, n).
    Signs follow LAPACK (numpy): r's diagonal is -sign(x's pivot) * the column's norm. use_magma is
    accepted and ignored (a GPU choice in JAX)."""
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not supported by kiln")
    x = api.asarray(x)
    _check_float_matrix("qr", x, square=False)
    return tuple(qr_p.apply(x, full_matrices=bool(full_matrices)))


def _thin_qr_jvp(q, r, dx):
    """JAX's rule for m >= n: with C = Q^T dX R^-1 and Omega = tril(C, -1) - tril(C, -1)^T,
    dQ = Q (Omega - C) + dX R^-1 and dR = (C - Omega) R."""
    dx_rinv = triangular_solve(r, dx, left_side=False, lower=False)
    c = matmul(swap_last(q), dx_rinv)
    lower = tril(c, -1)
    omega = api.sub(lower, swap_last(lower))
    dq = api.add(matmul(q, api.sub(omega, c)), dx_rinv)
    dr = matmul(api.sub(c, omega), r)
    return dq, dr


def _qr_jvp(primals, tangents, *, full_matrices):
    (x,), (dx,) = primals, tangents
    q, r = qr_p.apply(x, full_matrices=full_matrices)
    if isinstance(dx, Zero):
        return [q, r], [Zero(tangent_aval(get_aval(q))), Zero(tangent_aval(get_aval(r)))]
    m, n = _shape(x)[-2:]
    nd = len(_shape(x))
    if m < n:
        r1 = _take(r, 0, m, nd - 1)
        dq, dr1 = _thin_qr_jvp(q, r1, _take(dx, 0, m, nd - 1))
        dr2 = api.add(matmul(swap_last(dq), _take(x, m, n, nd - 1)), matmul(swap_last(q), _take(dx, m, n, nd - 1)))
        return [q, r], [dq, concatenate([dr1, dr2], nd - 1)]
    if not full_matrices or m == n:
        dq, dr = _thin_qr_jvp(q, r, dx)
        return [q, r], [dq, dr]
    q_mn, q_mp = _take(q, 0, n, nd - 1), _take(q, n, m, nd - 1)
    dq_mn, dr_nn = _thin_qr_jvp(q_mn, _take(r, 0, n, nd - 2), dx)
    return [q, r], [concatenate([dq_mn, _completion_jvp(q_mn, q_mp, dq_mn)], nd - 1),
                    pad(dr_nn, np.zeros((), _dtype(x)), [(0, 0, 0)] * (nd - 2) + [(0, m - n, 0), (0, 0, 0)])]


def _completion_jvp(q_mn, q_mp, dq_mn):
    """JAX's derivative of the m - n columns that complete Q for a tall x (Roberts and Roberts,
    arXiv:2409.13374, eqs. 32-33): with Z = Q_pn (Q_nn - I)^-1,
    dQ_mp = dQ_mn Z^T - (Q_mn + Q_mp Z) (dQ_pn - Z dQ_nn)^T."""
    nd = len(_shape(q_mn))
    n = _shape(q_mn)[-1]
    q_nn, q_pn = _take(q_mn, 0, n, nd - 2), _take(q_mn, n, _shape(q_mn)[-2], nd - 2)
    dq_nn, dq_pn = _take(dq_mn, 0, n, nd - 2), _take(dq_mn, n, _shape(dq_mn)[-2], nd - 2)
    shifted = api.sub(q_nn, _identity(_shape(q_nn)[:-2], n, _dtype(q_nn)))
    z_t = _solve(swap_last(shifted), swap_last(q_pn))
    z = swap_last(z_t)
    return api.sub(matmul(dq_mn, z_t),
                   matmul(api.add(q_mn, matmul(q_mp, z)), swap_last(api.sub(dq_pn, matmul(z, dq_nn)))))


def _solve(a, b):
    """x with a @ x = b through the triangular family's LU with partial pivoting."""
    lu_, _, perm = lu(a)
    permuted = matmul(permutation_matrix(perm, _dtype(b)), b)
    y = triangular_solve(lu_, permuted, left_side=True, lower=True, unit_diagonal=True)
    return triangular_solve(lu_, y, left_side=True, lower=False)


def _batch_to_front(value, dim, axis_size):
    return move_batch_axis(value, dim, 0, axis_size)


def _qr_batch(values, dims, *, axis_size, full_matrices):
    x = _batch_to_front(values[0], dims[0], axis_size)
    return qr_p.apply(x, full_matrices=full_matrices), [0, 0]


qr_p.jvp_rule = qr_p.graph_free(_qr_jvp)
qr_p.batching_rule = qr_p.graph_free(_qr_batch)


# ---- eigh ------------------------------------------------------------------------------------------

def _from_triangle(x, lower):
    """The symmetric matrix read from x's lower (or upper) triangle."""
    return api.add(tril(x), swap_last(tril(x, -1))) if lower else api.add(triu(x), swap_last(triu(x, 1)))


def _sort_columns(keys, *matrices):
    """The columns of each matrix reordered so that keys (..., k) ascend (stable)."""
    shape = _shape(matrices[0])
    key_grid = _along(keys, shape, len(shape) - 1)
    return api.sort((key_grid, *matrices), dimension=-1, num_keys=1)


def _batch_last(x):
    """(..., r, c) -> (r, c, ...)."""
    nd = len(_shape(x))
    return api.transpose(x, (nd - 2, nd - 1) + tuple(range(nd - 2)))


def _columns_from_rows(xt):
    """(k, r, ...) whose rows are columns -> (..., r, k)."""
    nd = len(_shape(xt))
    return api.transpose(xt, tuple(range(2, nd)) + (1, 0))


def _jacobi_eigh(x, *, lower, sort_eigenvalues):
    """[v, w] of the symmetric matrices read from one triangle of x: scaled by their largest |entry|,
    padded to an even size, diagonalized by Jacobi sweeps, then unscaled and (optionally) sorted."""
    shape, dtype = _shape(x), _dtype(x)
    nb, n = len(shape) - 2, shape[-1]
    batch = shape[:nb]
    if n == 0:
        return [x, _full(batch + (0,), 0, dtype)]
    a = _from_triangle(x, lower)
    scale = _batch_max_abs(a)
    size = n + n % 2
    a = _batch_last(_pad_square(api.div(a, _expand(scale, shape)), size))
    d, vt = jacobi.two_sided(a, _batch_last(_identity(batch, size, dtype)))
    w = _take(api.transpose(d, tuple(range(1, nb + 1)) + (0,)), 0, n, nb)
    v = _take(_take(_columns_from_rows(vt), 0, n, nb), 0, n, nb + 1)
    w = api.mul(w, _per_matrix(scale, batch + (n,)))
    if sort_eigenvalues:
        _, v = _sort_columns(w, v)
        w = api.sort(w, dimension=-1)
    return [v, w]


def _eigh_impl(x, *, lower, sort_eigenvalues):
    """Real float32/float64 matrices: the native kernel eigh_ql (kiln.lax._eigh_ql: Householder
    tridiagonalization, implicit QL, one dispatch per call); other dtypes and n = 0: Jacobi."""
    n, dtype = _shape(x)[-1], _dtype(x)
    if n > 0 and _eigh_ql.supported(dtype) and _eigh_ql.stack_fits(n, dtype):
        return _eigh_ql.eigh_ql(x, lower=lower, sort_eigenvalues=sort_eigenvalues)
    return _jacobi_eigh(x, lower=lower, sort_eigenvalues=sort_eigenvalues)


eigh_p = composite_primitive("eigh", _eigh_impl, multiple_results=True)


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index=None, implementation=None):
    """jax.lax.linalg.eigh: (v, w) with x = v @ diag(w) @ v^T for a batch of symmetric matrices
    (..., n, n): w (..., n) ascending (sort_eigenvalues) and v's columns the unit eigenvectors (each
    one's sign is the Jacobi iteration's). symmetrize_input uses (x + x^T)/2; otherwise only the
    triangle named by lower is read. implementation is accepted and ignored (kiln always uses Jacobi)."""
    if subset_by_index is not None:
        raise NotImplementedError("eigh: subset_by_index is not supported by kiln")
    x = api.asarray(x)
    _check_float_matrix("eigh", x, square=True)
    if symmetrize_input:
        x = api.div(api.add(x, swap_last(x)), 2)
    v, w = eigh_p.apply(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues))
    return v, w


def _eigh_jvp(primals, tangents, *, lower, sort_eigenvalues):
    """JAX's rule for distinct eigenvalues: with C = V^T dA V, dw = diag(C) and
    dV = V (F * C), F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it (degenerate eigenvalues give
    inf/NaN, as in JAX). dA is read as the symmetric matrix from the same triangle as the primal."""
    (x,), (dx,) = primals, tangents
    v, w = eigh_p.apply(x, lower=lower, sort_eigenvalues=sort_eigenvalues)
    if isinstance(dx, Zero):
        return [v, w], [Zero(tangent_aval(get_aval(v))), Zero(tangent_aval(get_aval(w)))]
    shape = _shape(v)
    nb = len(shape) - 2
    eye = _identity(shape[:nb], shape[-1], _dtype(v))
    w_cols = _along(w, shape, nb + 1)
    w_rows = _along(w, shape, nb)
    f = api.sub(api.div(1, api.add(eye, api.sub(w_cols, w_rows))), eye)
    c = matmul(matmul(swap_last(v), _from_triangle(dx, lower)), v)
    return [v, w], [matmul(v, api.mul(f, c)), _diagonal(c)]


def _eigh_batch(values, dims, *, axis_size, lower, sort_eigenvalues):
    x = _batch_to_front(values[0], dims[0], axis_size)
    return eigh_p.apply(x, lower=lower, sort_eigenvalues=sort_eigenvalues), [0, 0]


eigh_p.jvp_rule = eigh_p.graph_free(_eigh_jvp)
eigh_p.batching_rule = eigh_p.graph_free(_eigh_batch)


# ---- svd -------------------------------------------------------------------------------------------

def _column_norms(w):
    nb = len(_shape(w)) - 2
    return api.sqrt(api.reduce_sum(api.mul(w, w), (nb,)))


def _jacobi_svd_tall(x, *, full_matrices, compute_uv):
    """svd of x (..., m, n) with m >= n: (s, u, vh), or (s,) without compute_uv."""
    shape, dtype = _shape(x), _dtype(x)
    nb, (m, n) = len(shape) - 2, shape[-2:]
    batch = shape[:nb]
    scale = _batch_max_abs(x)
    q, r = _householder_qr(api.div(x, _expand(scale, shape)))
    r = _take(r, 0, n, nb)
    size = n + n % 2
    wt = _batch_last(swap_last(_pad_square(r, size)))
    if compute_uv:
        wt = concatenate([wt, _batch_last(_identity(batch, size, dtype))], 1)
    wt = jacobi.one_sided(wt, size)
    w = _take(_take(_columns_from_rows(_take(wt, 0, size, 1)), 0, n, nb), 0, n, nb + 1)
    sigma = _column_norms(w)
    descending = api.neg(sigma)
    if not compute_uv:
        return [api.mul(api.neg(api.sort(descending, dimension=-1)), _per_matrix(scale, batch + (n,)))]
    v = _take(_take(_columns_from_rows(_take(wt, size, 2 * size, 1)), 0, n, nb), 0, n, nb + 1)
    _, w, v = _sort_columns(descending, w, v)
    s = _column_norms(w)
    w_q, w_r = _householder_qr(w)
    u_of_r = api.mul(w_q, _along(_sign(_diagonal(w_r)), _shape(w_q), nb + 1))
    u = matmul(_take(q, 0, n, nb + 1), u_of_r)
    if full_matrices and m > n:
        u = concatenate([u, _take(q, n, m, nb + 1)], nb + 1)
    return [api.mul(s, _per_matrix(scale, batch + (n,))), u, swap_last(v)]


def _empty_svd(x, *, full_matrices, compute_uv):
    """JAX's results for matrices with no entries: no singular values, identity (or empty) factors."""
    shape, dtype = _shape(x), _dtype(x)
    batch, (m, n) = shape[:-2], shape[-2:]
    s = _full(batch + (0,), 0, dtype)
    if not compute_uv:
        return [s]
    if full_matrices:
        return [s, _eye(batch, m, m, dtype), _eye(batch, n, n, dtype)]
    return [s, _full(batch + (m, 0), 0, dtype), _full(batch + (0, n), 0, dtype)]


def _svd_impl(x, *, full_matrices, compute_uv):
    m, n = _shape(x)[-2:]
    if m == 0 or n == 0:
        return _empty_svd(x, full_matrices=full_matrices, compute_uv=compute_uv)
    if native.native_dtype(_dtype(x)):  # real f32/f64: the native kernel (kiln.lax._svd_qr_native)
        return native.svd(x, full_matrices, compute_uv)
    if m >= n:
        return _jacobi_svd_tall(x, full_matrices=full_matrices, compute_uv=compute_uv)
    outs = _jacobi_svd_tall(swap_last(x), full_matrices=full_matrices, compute_uv=compute_uv)
    if not compute_uv:
        return outs
    s, u, vh = outs
    return [s, swap_last(vh), swap_last(u)]


svd_p = composite_primitive("svd", _svd_impl, multiple_results=True)


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True, subset_by_index=None, algorithm=None):
    """jax.lax.linalg.svd: (u, s, vh) with x = u @ diag(s) @ vh for a batch (..., m, n), s (..., k)
    descending (k = min(m, n)), u (..., m, m) and vh (..., n, n), or (..., m, k) and (..., k, n) without
    full_matrices; only s when compute_uv is False. Singular vectors' signs are the algorithm's.
    algorithm is accepted and ignored (kiln always uses QR then one-sided Jacobi)."""
    if subset_by_index is not None:
        raise NotImplementedError("svd: subset_by_index is not supported by kiln")
    x = api.asarray(x)
    _check_float_matrix("svd", x, square=False)
    outs = svd_p.apply(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return outs[0]
    s, u, vh = outs
    return u, s, vh


def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    """JAX's rule: with dS = U^T dA V, ds = diag(dS); dU and dV from F_ij = 1 / (s_j^2 - s_i^2), plus the
    components outside the span of U (m > n) or V (n > m). Repeated singular values give inf/NaN."""
    (x,), (dx,) = primals, tangents
    outs = svd_p.apply(x, full_matrices=full_matrices, compute_uv=compute_uv)
    if isinstance(dx, Zero):
        return outs, [Zero(tangent_aval(get_aval(o))) for o in outs]
    m, n = _shape(x)[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError("svd: the derivative of full_matrices=True for a non-square matrix is not "
                                  "implemented (as in JAX); use full_matrices=False")
    s, u, vh = svd_p.apply(x, full_matrices=False, compute_uv=True)
    v = swap_last(vh)
    shape_k = _shape(s) + (_shape(s)[-1],)
    nb = len(shape_k) - 2
    ds_matrix = matmul(matmul(swap_last(u), dx), v)
    ds = _diagonal(ds_matrix)
    if not compute_uv:
        return outs, [ds]
    s_cols, s_rows = _along(s, shape_k, nb + 1), _along(s, shape_k, nb)
    eye = _identity(shape_k[:nb], shape_k[-1], _dtype(s))
    diffs = api.mul(api.add(s_cols, s_rows), api.sub(s_cols, s_rows))
    f = api.sub(api.div(1, api.add(diffs, eye)), eye)
    dss = api.mul(s_cols, ds_matrix)
    sds = api.mul(s_rows, ds_matrix)
    zero_s = api.convert_element_type(api.eq(s, 0), _dtype(s))
    s_inv = api.sub(api.div(1, api.add(s, zero_s)), zero_s)
    du_dv_diagonal = api.mul(api.mul(api.sub(ds_matrix, swap_last(ds_matrix)), 0.5),
                             api.mul(eye, _along(s_inv, shape_k, nb + 1)))
    du = matmul(u, api.add(api.mul(f, api.add(dss, swap_last(dss))), du_dv_diagonal))
    dv = matmul(v, api.mul(f, api.add(sds, swap_last(sds))))
    if m > n:
        dav = matmul(dx, v)
        du = api.add(du, api.div(api.sub(dav, matmul(u, matmul(swap_last(u), dav))), _along(s, _shape(dav), nb + 1)))
    if n > m:
        dahu = matmul(swap_last(dx), u)
        dv = api.add(dv, api.div(api.sub(dahu, matmul(v, matmul(vh, dahu))), _along(s, _shape(dahu), nb + 1)))
    return outs, [ds, du, swap_last(dv)]


def _svd_batch(values, dims, *, axis_size, full_matrices, compute_uv):
    x = _batch_to_front(values[0], dims[0], axis_size)
    outs = svd_p.apply(x, full_matrices=full_matrices, compute_uv=compute_uv)
    return outs, [0] * len(outs)


svd_p.jvp_rule = svd_p.graph_free(_svd_jvp)
svd_p.batching_rule = svd_p.graph_free(_svd_batch)
