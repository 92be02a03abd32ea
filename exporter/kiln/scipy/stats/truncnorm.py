"""kiln.scipy.stats.truncnorm: the normal distribution truncated to [a, b] (a and b in standard units, as scipy)."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from . import norm
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf"]


def _log_diff_exp(p, q):
    """log(exp(p) - exp(q)) for p >= q."""
    return knp.add(p, knp.log(knp.negative(knp.expm1(knp.subtract(q, p)))))


def _log_mass(a, b):
    """log(Phi(b) - Phi(a)) from the tail where it is small: the upper tail when a > 0."""
    right = knp.greater(a, 0)
    upper = _log_diff_exp(special.log_ndtr(knp.negative(a)), special.log_ndtr(knp.negative(b)))
    lower = _log_diff_exp(special.log_ndtr(b), special.log_ndtr(a))
    return knp.where(right, upper, lower)


def _logpdf(where, x, a, b, loc, scale):
    (x, a, b, loc, scale), dtype = float_operands(where, x, a, b, loc, scale)
    z = standardize(x, loc, scale)
    y = knp.subtract(norm.logpdf(z), knp.add(_log_mass(a, b), knp.log(scale)))
    inside = knp.logical_and(knp.greater_equal(z, a), knp.less_equal(z, b))
    valid = knp.logical_and(knp.less(a, b), knp.greater(scale, 0))
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpdf(x, a, b, loc=0, scale=1):
    return narrow(*_logpdf("truncnorm.logpdf", x, a, b, loc, scale))


def pdf(x, a, b, loc=0, scale=1):
    y, dtype = _logpdf("truncnorm.pdf", x, a, b, loc, scale)
    return narrow(knp.exp(y), dtype)


def _cdf(where, x, a, b, loc, scale, upper):
    """(Phi(z) - Phi(a)) / (Phi(b) - Phi(a)) as exp(log-differences), from the upper tail when a > 0; sf
    (upper=True) is (Phi(b) - Phi(z)) / (Phi(b) - Phi(a))."""
    (x, a, b, loc, scale), dtype = float_operands(where, x, a, b, loc, scale)
    z = knp.clip(standardize(x, loc, scale), a, b)
    mass = _log_mass(a, b)
    below = knp.exp(knp.subtract(_log_mass(a, z), mass))
    above = knp.exp(knp.subtract(_log_mass(z, b), mass))
    y = knp.where(knp.equal(z, a), 0.0, below) if not upper else knp.where(knp.equal(z, b), 0.0, above)
    valid = knp.logical_and(knp.less(a, b), knp.greater(scale, 0))
    return narrow(invalid_to_nan(valid, y), dtype)


def cdf(x, a, b, loc=0, scale=1):
    return _cdf("truncnorm.cdf", x, a, b, loc, scale, upper=False)


def sf(x, a, b, loc=0, scale=1):
    return _cdf("truncnorm.sf", x, a, b, loc, scale, upper=True)
