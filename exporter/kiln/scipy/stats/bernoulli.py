"""kiln.scipy.stats.bernoulli: one trial with success probability p (k in {0, 1} above loc)."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow

__all__ = ["logpmf", "pmf", "cdf", "ppf"]


def _valid(p):
    return knp.logical_and(knp.greater_equal(p, 0), knp.less_equal(p, 1))


def _logpmf(where, k, p, loc):
    (k, p, loc), dtype = float_operands(where, k, p, loc)
    k = knp.subtract(k, loc)
    inside = knp.logical_or(knp.equal(k, 0), knp.equal(k, 1))
    y = knp.add(special.xlogy(k, p), special.xlog1py(knp.subtract(1.0, k), knp.negative(p)))
    return invalid_to_nan(_valid(p), knp.where(inside, y, -np.inf)), dtype


def logpmf(k, p, loc=0):
    """k log(p) + (1 - k) log1p(-p) for k in {0, 1}, -inf elsewhere."""
    return narrow(*_logpmf("bernoulli.logpmf", k, p, loc))


def pmf(k, p, loc=0):
    y, dtype = _logpmf("bernoulli.pmf", k, p, loc)
    return narrow(knp.exp(y), dtype)


def cdf(k, p, loc=0):
    """0 below 0, 1 - p on [0, 1), 1 from 1."""
    (k, p, loc), dtype = float_operands("bernoulli.cdf", k, p, loc)
    k = knp.subtract(k, loc)
    y = knp.where(knp.less(k, 0), 0.0, knp.where(knp.less(k, 1), knp.subtract(1.0, p), 1.0))
    return narrow(invalid_to_nan(_valid(p), y), dtype)


def ppf(q, p, loc=0):
    """The least k in {-1, 0, 1} (plus loc) with cdf(k) >= q, as scipy: -1 at q = 0 (the support's edge)."""
    (q, p, loc), dtype = float_operands("bernoulli.ppf", q, p, loc)
    inside = knp.logical_and(knp.greater_equal(q, 0), knp.less_equal(q, 1))
    k = knp.where(knp.equal(q, 0), -1.0, knp.where(knp.less_equal(q, knp.subtract(1.0, p)), 0.0, 1.0))
    return narrow(invalid_to_nan(_valid(p), knp.where(inside, knp.add(k, loc), np.nan)), dtype)
