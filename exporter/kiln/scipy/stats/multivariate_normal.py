"""kiln.scipy.stats.multivariate_normal: the normal distribution of vectors (x's last axis), by the Cholesky
factor of the covariance (kiln.lax.linalg.cholesky and triangular_solve)."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...lax import linalg as lax_linalg
from ._common import float_operands, joint_dtype, narrow

__all__ = ["logpdf", "pdf"]


def _logpdf(where, x, mean, cov, allow_singular):
    if allow_singular:
        raise NotImplementedError(f"{where}: allow_singular=True is not supported (kiln factors cov by Cholesky)")
    x_in, mean_in, cov_in = x, mean, cov
    (x, mean), dtype = float_operands(where, x, mean)
    (cov,), cov_dtype = float_operands(where, cov)
    dtype = joint_dtype(([x_in, mean_in], dtype), ([cov_in], cov_dtype))
    if cov.ndim < 2 or cov.shape[-1] != cov.shape[-2]:
        raise ValueError(f"{where}: argument cov must be a square matrix (or a batch of them), got shape {cov.shape}")
    n = cov.shape[-1]
    if x.shape[-1:] != (n,):
        raise ValueError(f"{where}: the last axis of x and mean must have the covariance's size {n}, got x and mean "
                         f"broadcast to {x.shape}")
    factor = lax_linalg.cholesky(cov)
    diff = knp.subtract(x, mean)
    if cov.ndim == 2:  # one factor for every vector: one solve with the vectors as columns
        batch = diff.shape[:-1]
        columns = knp.transpose(knp.reshape(diff, (-1, n)))
        solved = lax_linalg.triangular_solve(factor, columns, left_side=True, lower=True)
        maha = knp.reshape(knp.sum(knp.multiply(solved, solved), axis=0), batch)
    else:
        batch = np.broadcast_shapes(diff.shape[:-1], cov.shape[:-2])
        diff = knp.broadcast_to(diff, batch + (n,))
        factor_b = knp.broadcast_to(factor, batch + (n, n))
        solved = lax_linalg.triangular_solve(factor_b, diff[..., None], left_side=True, lower=True)[..., 0]
        maha = knp.sum(knp.multiply(solved, solved), axis=-1)
    half_log_det = knp.sum(knp.log(knp.diagonal(factor, axis1=-2, axis2=-1)), axis=-1)
    return knp.subtract(knp.add(knp.multiply(maha, -0.5), knp.negative(half_log_det)),
                        0.5 * n * math.log(2 * math.pi)), dtype


def logpdf(x, mean, cov, allow_singular=None):
    """-(x - mean)^T cov^-1 (x - mean) / 2 - log det(cov) / 2 - n log(2 pi) / 2 over x's last axis; cov may be a
    batch (..., n, n) broadcast against x. A covariance that is not positive definite gives NaN (scipy raises)."""
    return narrow(*_logpdf("multivariate_normal.logpdf", x, mean, cov, allow_singular))


def pdf(x, mean, cov, allow_singular=None):
    y, dtype = _logpdf("multivariate_normal.pdf", x, mean, cov, allow_singular)
    return narrow(knp.exp(y), dtype)
