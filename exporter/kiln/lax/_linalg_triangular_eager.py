"""Eager (numpy) implementations of the triangular factorizations, used when kiln.lax.linalg's primitives
run on concrete arrays: the same algorithms and choices as the traced implementations in
_linalg_triangular (same pivots, NaN for a failed Cholesky, zero pivots left unscaled), written with numpy
slicing so that an eager call costs numpy operations rather than one interpreted graph step per element
of the loop. Batched over leading axes."""
from __future__ import annotations

import numpy as np


def cholesky(x):
    """Left-looking Cholesky of x's lower triangle; all NaN for each matrix that is not positive definite."""
    x = np.asarray(x)
    n = x.shape[-1]
    factor = np.zeros_like(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        for j in range(n):
            v = x[..., j:, j] - np.einsum("...ik,...k->...i", factor[..., j:, :j], factor[..., j, :j])
            d = np.sqrt(v[..., 0])
            factor[..., j, j] = d
            factor[..., j + 1:, j] = v[..., 1:] / d[..., None]
    diagonal = np.diagonal(factor, axis1=-2, axis2=-1)
    failed = ~np.all(diagonal > 0, axis=-1)
    factor[failed] = np.nan
    return factor


def substitute(a, b, *, lower: bool, unit_diagonal: bool):
    """x with a @ x = b for triangular a (only its lower or upper triangle is read), row by row."""
    a, b = np.asarray(a), np.asarray(b)
    m = a.shape[-1]
    x = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], b.dtype)
    order = range(m) if lower else range(m - 1, -1, -1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for i in order:
            known = slice(0, i) if lower else slice(i + 1, m)
            rest = b[..., i, :] - np.einsum("...k,...kj->...j", a[..., i, known], x[..., known, :])
            x[..., i, :] = rest if unit_diagonal else rest / a[..., i, i][..., None]
    return x


def triangular_solve(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    a, b = np.asarray(a), np.asarray(b)
    if not left_side:
        solved = triangular_solve(a, np.swapaxes(b, -1, -2), left_side=True, lower=lower,
                                  transpose_a=not transpose_a, conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
        return np.swapaxes(solved, -1, -2)
    if transpose_a:
        a, lower = np.swapaxes(a, -1, -2), not lower
    return substitute(a, b, lower=lower, unit_diagonal=unit_diagonal)


def lu(a):
    """Gaussian elimination with partial pivoting: (lu, pivots, permutation) as JAX's lax.linalg.lu."""
    lu_ = np.array(a, copy=True)
    batch, (m, n) = lu_.shape[:-2], lu_.shape[-2:]
    k = min(m, n)
    pivots = np.zeros(batch + (k,), np.int32)
    perm = np.broadcast_to(np.arange(m, dtype=np.int32), batch + (m,)).copy()
    if lu_.size == 0:
        return lu_, pivots, perm
    flat, flat_pivots, flat_perm = lu_.reshape((-1, m, n)), pivots.reshape((-1, k)), perm.reshape((-1, m))
    rows = np.arange(flat.shape[0])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for j in range(k):
            p = j + np.argmax(np.abs(flat[:, j:, j]), axis=1)
            flat_pivots[:, j] = p
            row_j, row_p = flat[rows, j, :].copy(), flat[rows, p, :].copy()
            flat[rows, j, :], flat[rows, p, :] = row_p, row_j
            order_j, order_p = flat_perm[rows, j].copy(), flat_perm[rows, p].copy()
            flat_perm[rows, j], flat_perm[rows, p] = order_p, order_j
            pivot = flat[:, j, j]
            safe = np.where(pivot == 0, np.ones((), flat.dtype), pivot)
            multipliers = flat[:, j + 1:, j] / safe[:, None]
            flat[:, j + 1:, j] = multipliers
            flat[:, j + 1:, j + 1:] -= multipliers[:, :, None] * flat[:, j, None, j + 1:]
    return flat.reshape(lu_.shape), flat_pivots.reshape(pivots.shape), flat_perm.reshape(perm.shape)
