"""kiln.scipy.stats.gamma: the gamma distribution with shape a, density z^(a-1) e^-z / Gamma(a) / scale."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"]


def _logpdf(where, x, a, loc, scale):
    (x, a, loc, scale), dtype = float_operands(where, x, a, loc, scale)
    z = standardize(x, loc, scale)
    inside = knp.greater_equal(z, 0)
    zs = knp.where(inside, z, 1.0)
    y = knp.subtract(knp.subtract(knp.subtract(special.xlogy(knp.subtract(a, 1.0), zs), zs), special.gammaln(a)),
                     knp.log(scale))
    valid = knp.logical_and(knp.greater(a, 0), knp.greater(scale, 0))
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpdf(x, a, loc=0, scale=1):
    return narrow(*_logpdf("gamma.logpdf", x, a, loc, scale))


def pdf(x, a, loc=0, scale=1):
    y, dtype = _logpdf("gamma.pdf", x, a, loc, scale)
    return narrow(knp.exp(y), dtype)


def _probabilities(where, x, a, loc, scale):
    """(P, Q, valid, dtype): the regularized incomplete gamma functions at z = max((x - loc) / scale, 0)."""
    (x, a, loc, scale), dtype = float_operands(where, x, a, loc, scale)
    z = knp.maximum(standardize(x, loc, scale), 0.0)
    valid = knp.logical_and(knp.greater(a, 0), knp.greater(scale, 0))
    return special.gammainc(a, z), special.gammaincc(a, z), valid, dtype


def cdf(x, a, loc=0, scale=1):
    """gammainc(a, z)."""
    p, _, valid, dtype = _probabilities("gamma.cdf", x, a, loc, scale)
    return narrow(invalid_to_nan(valid, p), dtype)


def sf(x, a, loc=0, scale=1):
    """gammaincc(a, z) (accurate in the right tail)."""
    _, q, valid, dtype = _probabilities("gamma.sf", x, a, loc, scale)
    return narrow(invalid_to_nan(valid, q), dtype)


def _log_of(p, q):
    """log(p) where p is small, log1p(-q) where it is near 1 (p = 1 - q)."""
    return knp.where(knp.greater(p, 0.5), knp.log1p(knp.negative(q)), knp.log(p))


def logcdf(x, a, loc=0, scale=1):
    p, q, valid, dtype = _probabilities("gamma.logcdf", x, a, loc, scale)
    return narrow(invalid_to_nan(valid, _log_of(p, q)), dtype)


def logsf(x, a, loc=0, scale=1):
    p, q, valid, dtype = _probabilities("gamma.logsf", x, a, loc, scale)
    return narrow(invalid_to_nan(valid, _log_of(q, p)), dtype)
