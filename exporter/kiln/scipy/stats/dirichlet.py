"""kiln.scipy.stats.dirichlet: the Dirichlet distribution on the simplex (components on x's first axis, as
scipy and JAX)."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ._common import float_operands, joint_dtype, narrow

__all__ = ["logpdf", "pdf"]


def _logpdf(where, x, alpha):
    x, alpha = knp.asarray(x), knp.asarray(alpha)
    if alpha.ndim != 1:
        raise ValueError(f"{where}: argument alpha must be 1-D (the K concentrations), got shape {alpha.shape}")
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise ValueError(f"{where}: argument x must have {k} or {k - 1} entries on its first axis (alpha has {k}), "
                         f"got shape {x.shape}")
    (x_in, alpha_in) = (x, alpha)
    (x,), dtype = float_operands(where, x)
    (alpha,), alpha_dtype = float_operands(where, alpha)
    dtype = joint_dtype(([x_in], dtype), ([alpha_in], alpha_dtype))
    if x.shape[0] == k - 1:
        x = knp.concatenate([x, knp.subtract(1.0, knp.sum(x, axis=0, keepdims=True))], axis=0)
    a = knp.reshape(alpha, (k,) + (1,) * (x.ndim - 1))
    norming = knp.subtract(knp.sum(special.gammaln(alpha)), special.gammaln(knp.sum(alpha)))
    y = knp.subtract(knp.sum(special.xlogy(knp.subtract(a, 1.0), x), axis=0), norming)
    on_simplex = knp.logical_and(knp.all(knp.greater_equal(x, 0), axis=0),
                                 knp.less(knp.abs(knp.subtract(knp.sum(x, axis=0), 1.0)), 1e-6))
    valid = knp.all(knp.greater(alpha, 0))
    return knp.where(valid, knp.where(on_simplex, y, -np.inf), np.nan), dtype


def logpdf(x, alpha):
    """sum((alpha - 1) log x) - (sum gammaln(alpha) - gammaln(sum alpha)); -inf off the simplex (JAX's value;
    scipy raises), NaN for a non-positive alpha. x may leave out its last component (1 - the others' sum)."""
    return narrow(*_logpdf("dirichlet.logpdf", x, alpha))


def pdf(x, alpha):
    y, dtype = _logpdf("dirichlet.pdf", x, alpha)
    return narrow(knp.exp(y), dtype)
