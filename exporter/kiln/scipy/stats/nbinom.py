"""kiln.scipy.stats.nbinom: the number of failures before the n-th success in trials of probability p."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow

__all__ = ["logpmf", "pmf"]


def _logpmf(where, k, n, p, loc):
    """gammaln(k + n) - gammaln(k + 1) - gammaln(n) + n log p + k log1p(-p) on the integers k >= 0."""
    (k, n, p, loc), dtype = float_operands(where, k, n, p, loc)
    k = knp.subtract(k, loc)
    inside = knp.logical_and(knp.greater_equal(k, 0), knp.equal(k, knp.floor(k)))
    ks = knp.where(inside, k, 0.0)
    choose = knp.subtract(knp.subtract(special.gammaln(knp.add(ks, n)), special.gammaln(knp.add(ks, 1.0))),
                          special.gammaln(n))
    y = knp.add(choose, knp.add(special.xlogy(n, p), special.xlog1py(ks, knp.negative(p))))
    valid = knp.logical_and(knp.logical_and(knp.greater(p, 0), knp.less_equal(p, 1)), knp.greater(n, 0))
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpmf(k, n, p, loc=0):
    return narrow(*_logpmf("nbinom.logpmf", k, n, p, loc))


def pmf(k, n, p, loc=0):
    y, dtype = _logpmf("nbinom.pmf", k, n, p, loc)
    return narrow(knp.exp(y), dtype)
