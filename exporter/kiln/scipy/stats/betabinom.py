"""kiln.scipy.stats.betabinom: the binomial distribution with a beta-distributed success probability."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow

__all__ = ["logpmf", "pmf"]


def _logpmf(where, k, n, a, b, loc):
    """log C(n, k) + betaln(k + a, n - k + b) - betaln(a, b) on the integers 0 <= k <= n."""
    (k, n, a, b, loc), dtype = float_operands(where, k, n, a, b, loc)
    k = knp.subtract(k, loc)
    inside = knp.logical_and(knp.logical_and(knp.greater_equal(k, 0), knp.less_equal(k, n)),
                             knp.equal(k, knp.floor(k)))
    ks = knp.where(inside, k, 0.0)
    choose = knp.subtract(knp.subtract(special.gammaln(knp.add(n, 1.0)), special.gammaln(knp.add(ks, 1.0))),
                          special.gammaln(knp.add(knp.subtract(n, ks), 1.0)))
    y = knp.add(choose, knp.subtract(special.betaln(knp.add(ks, a), knp.add(knp.subtract(n, ks), b)),
                                     special.betaln(a, b)))
    valid = knp.logical_and(knp.logical_and(knp.greater(a, 0), knp.greater(b, 0)),
                            knp.logical_and(knp.greater_equal(n, 0), knp.equal(n, knp.floor(n))))
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpmf(k, n, a, b, loc=0):
    return narrow(*_logpmf("betabinom.logpmf", k, n, a, b, loc))


def pmf(k, n, a, b, loc=0):
    y, dtype = _logpmf("betabinom.pmf", k, n, a, b, loc)
    return narrow(knp.exp(y), dtype)
