"""kiln.scipy.stats.binom: the number of successes in n trials of probability p."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ..special._incomplete import betainc64
from ._common import float_operands, invalid_to_nan, narrow

__all__ = ["logpmf", "pmf", "cdf", "sf"]


def _logpmf(where, k, n, p, loc):
    """log C(n, k) + k log p + (n - k) log1p(-p) on the integers 0 <= k <= n, -inf elsewhere."""
    (k, n, p, loc), dtype = float_operands(where, k, n, p, loc)
    k = knp.subtract(k, loc)
    inside = knp.logical_and(knp.logical_and(knp.greater_equal(k, 0), knp.less_equal(k, n)),
                             knp.equal(k, knp.floor(k)))
    ks = knp.where(inside, k, 0.0)
    choose = knp.subtract(knp.subtract(special.gammaln(knp.add(n, 1.0)), special.gammaln(knp.add(ks, 1.0))),
                          special.gammaln(knp.add(knp.subtract(n, ks), 1.0)))
    y = knp.add(choose, knp.add(special.xlogy(ks, p), special.xlog1py(knp.subtract(n, ks), knp.negative(p))))
    valid = knp.logical_and(knp.logical_and(knp.greater_equal(p, 0), knp.less_equal(p, 1)),
                            knp.logical_and(knp.greater_equal(n, 0), knp.equal(n, knp.floor(n))))
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpmf(k, n, p, loc=0):
    return narrow(*_logpmf("binom.logpmf", k, n, p, loc))


def pmf(k, n, p, loc=0):
    y, dtype = _logpmf("binom.pmf", k, n, p, loc)
    return narrow(knp.exp(y), dtype)


def _probability(where, k, n, p, loc, upper):
    """P(K <= k) = I_(1-p)(n - k, k + 1) for 0 <= k < n (sf: I_p(k + 1, n - k)), 1 - p and p passed exactly."""
    (k, n, p, loc), dtype = float_operands(where, k, n, p, loc)
    k = knp.floor(knp.subtract(k, loc))
    inside = knp.logical_and(knp.greater_equal(k, 0), knp.less(k, n))
    ks = knp.where(inside, k, 0.0)
    ns = knp.where(inside, n, 1.0)
    q = knp.subtract(1.0, p)
    if upper:
        value = betainc64(knp.add(ks, 1.0), knp.subtract(ns, ks), p, q)
        value = knp.where(inside, value, knp.where(knp.less(k, 0), 1.0, 0.0))
    else:
        value = betainc64(knp.subtract(ns, ks), knp.add(ks, 1.0), q, p)
        value = knp.where(inside, value, knp.where(knp.less(k, 0), 0.0, 1.0))
    valid = knp.logical_and(knp.logical_and(knp.greater_equal(p, 0), knp.less_equal(p, 1)),
                            knp.logical_and(knp.greater_equal(n, 0), knp.equal(n, knp.floor(n))))
    return narrow(invalid_to_nan(valid, value), dtype)


def cdf(k, n, p, loc=0):
    return _probability("binom.cdf", k, n, p, loc, upper=False)


def sf(k, n, p, loc=0):
    return _probability("binom.sf", k, n, p, loc, upper=True)
