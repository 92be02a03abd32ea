"""kiln.scipy.stats.geom: the number of trials up to the first success (k = 1, 2, ...)."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow

__all__ = ["logpmf", "pmf", "cdf"]


def _valid(p):
    return knp.logical_and(knp.greater(p, 0), knp.less_equal(p, 1))


def _logpmf(where, k, p, loc):
    """(k - 1) log1p(-p) + log p on the integers k >= 1, -inf elsewhere."""
    (k, p, loc), dtype = float_operands(where, k, p, loc)
    k = knp.subtract(k, loc)
    inside = knp.logical_and(knp.greater_equal(k, 1), knp.equal(k, knp.floor(k)))
    ks = knp.where(inside, k, 1.0)
    y = knp.add(special.xlog1py(knp.subtract(ks, 1.0), knp.negative(p)), knp.log(p))
    return invalid_to_nan(_valid(p), knp.where(inside, y, -np.inf)), dtype


def logpmf(k, p, loc=0):
    return narrow(*_logpmf("geom.logpmf", k, p, loc))


def pmf(k, p, loc=0):
    y, dtype = _logpmf("geom.pmf", k, p, loc)
    return narrow(knp.exp(y), dtype)


def cdf(k, p, loc=0):
    """1 - (1 - p)^floor(k), as -expm1(floor(k) log1p(-p)); 0 below 1."""
    (k, p, loc), dtype = float_operands("geom.cdf", k, p, loc)
    k = knp.floor(knp.subtract(k, loc))
    inside = knp.greater_equal(k, 1)
    y = knp.negative(knp.expm1(special.xlog1py(knp.where(inside, k, 1.0), knp.negative(p))))
    return narrow(invalid_to_nan(_valid(p), knp.where(inside, y, 0.0)), dtype)
