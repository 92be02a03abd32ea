"""kiln.scipy.stats.poisson: the Poisson distribution with mean mu, on the integers k >= loc."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow

__all__ = ["logpmf", "pmf", "cdf", "sf"]


def _logpmf(where, k, mu, loc):
    """k log(mu) - mu - gammaln(k + 1) on the non-negative integers (k - loc), -inf elsewhere."""
    (k, mu, loc), dtype = float_operands(where, k, mu, loc)
    k = knp.subtract(k, loc)
    inside = knp.logical_and(knp.greater_equal(k, 0), knp.equal(k, knp.floor(k)))
    ks = knp.where(inside, k, 0.0)
    y = knp.subtract(knp.subtract(special.xlogy(ks, mu), mu), special.gammaln(knp.add(ks, 1.0)))
    return invalid_to_nan(knp.greater_equal(mu, 0), knp.where(inside, y, -np.inf)), dtype


def logpmf(k, mu, loc=0):
    return narrow(*_logpmf("poisson.logpmf", k, mu, loc))


def pmf(k, mu, loc=0):
    y, dtype = _logpmf("poisson.pmf", k, mu, loc)
    return narrow(knp.exp(y), dtype)


def _upper(where, fn, k, mu, loc, below):
    (k, mu, loc), dtype = float_operands(where, k, mu, loc)
    k = knp.floor(knp.subtract(k, loc))
    inside = knp.greater_equal(k, 0)
    y = knp.where(inside, fn(knp.add(knp.where(inside, k, 0.0), 1.0), mu), below)
    return narrow(invalid_to_nan(knp.greater_equal(mu, 0), y), dtype)


def cdf(k, mu, loc=0):
    """P(K <= k) = gammaincc(floor(k) + 1, mu)."""
    return _upper("poisson.cdf", special.gammaincc, k, mu, loc, 0.0)


def sf(k, mu, loc=0):
    """P(K > k) = gammainc(floor(k) + 1, mu) (accurate in the right tail)."""
    return _upper("poisson.sf", special.gammainc, k, mu, loc, 1.0)
