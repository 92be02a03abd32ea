"""kiln.scipy.stats.cauchy: the Cauchy distribution, density 1 / (pi scale (1 + z^2))."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]


def _z(where, x, loc, scale):
    (x, loc, scale), dtype = float_operands(where, x, loc, scale)
    return standardize(x, loc, scale), scale, dtype


def _logpdf(where, x, loc, scale):
    z, scale, dtype = _z(where, x, loc, scale)
    y = knp.subtract(knp.negative(knp.log1p(knp.multiply(z, z))), knp.add(knp.log(scale), math.log(math.pi)))
    return invalid_to_nan(knp.greater(scale, 0), y), dtype


def logpdf(x, loc=0, scale=1):
    return narrow(*_logpdf("cauchy.logpdf", x, loc, scale))


def pdf(x, loc=0, scale=1):
    y, dtype = _logpdf("cauchy.pdf", x, loc, scale)
    return narrow(knp.exp(y), dtype)


def _tail(z):
    """1/2 - arctan(z)/pi, as arctan(1/z)/pi for z > 1 (so that the right tail keeps its relative accuracy)."""
    far = knp.greater(z, 1.0)
    return knp.where(far, knp.divide(knp.arctan(knp.reciprocal(knp.where(far, z, 1.0))), math.pi),
                     knp.subtract(0.5, knp.divide(knp.arctan(z), math.pi)))


def cdf(x, loc=0, scale=1):
    z, scale, dtype = _z("cauchy.cdf", x, loc, scale)
    return narrow(invalid_to_nan(knp.greater(scale, 0), _tail(knp.negative(z))), dtype)


def sf(x, loc=0, scale=1):
    z, scale, dtype = _z("cauchy.sf", x, loc, scale)
    return narrow(invalid_to_nan(knp.greater(scale, 0), _tail(z)), dtype)


def _quantile(where, q, loc, scale, sign):
    (q, loc, scale), dtype = float_operands(where, q, loc, scale)
    inside = knp.logical_and(knp.greater_equal(q, 0), knp.less_equal(q, 1))
    # tan(pi (q - 1/2)) directly on [1/4, 3/4] (q - 1/2 is exact), as -1 / tan(pi q) for q < 1/4 and
    # -1 / tan(pi (q - 1)) for q > 3/4 (exact reductions, so both tails keep their relative accuracy)
    qs = knp.where(inside, q, 0.5)
    middle = knp.logical_and(knp.greater_equal(qs, 0.25), knp.less_equal(qs, 0.75))
    shifted = knp.where(knp.greater(qs, 0.75), knp.subtract(qs, 1.0), qs)
    t = knp.tan(knp.multiply(knp.where(middle, 0.25, shifted), math.pi))
    with np.errstate(divide="ignore"):
        z = knp.where(middle, knp.tan(knp.multiply(knp.subtract(qs, 0.5), math.pi)), knp.negative(knp.reciprocal(t)))
    z = knp.where(knp.equal(qs, 1.0), np.inf, z)  # tan(pi (1 - 1)) is +0
    y = knp.add(loc, knp.multiply(knp.multiply(scale, sign), z))
    return narrow(invalid_to_nan(knp.greater(scale, 0), knp.where(inside, y, np.nan)), dtype)


def ppf(q, loc=0, scale=1):
    """loc + scale tan(pi (q - 1/2))."""
    return _quantile("cauchy.ppf", q, loc, scale, 1.0)


def isf(q, loc=0, scale=1):
    return _quantile("cauchy.isf", q, loc, scale, -1.0)
