"""kiln.scipy.stats.gennorm: the generalized normal distribution, density beta / (2 Gamma(1/beta)) exp(-|z|^beta)."""
from __future__ import annotations


from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf"]


def _logpdf(where, x, beta, loc, scale):
    (x, beta, loc, scale), dtype = float_operands(where, x, beta, loc, scale)
    z = standardize(x, loc, scale)
    norming = knp.subtract(knp.log(knp.multiply(beta, 0.5)), special.gammaln(knp.reciprocal(beta)))
    y = knp.subtract(knp.subtract(norming, knp.power(knp.abs(z), beta)), knp.log(scale))
    return invalid_to_nan(knp.logical_and(knp.greater(beta, 0), knp.greater(scale, 0)), y), dtype


def logpdf(x, beta, loc=0, scale=1):
    return narrow(*_logpdf("gennorm.logpdf", x, beta, loc, scale))


def pdf(x, beta, loc=0, scale=1):
    y, dtype = _logpdf("gennorm.pdf", x, beta, loc, scale)
    return narrow(knp.exp(y), dtype)


def _probability(where, x, beta, loc, scale, upper):
    """The tail beyond |z| is gammaincc(1/beta, |z|^beta) / 2."""
    (x, beta, loc, scale), dtype = float_operands(where, x, beta, loc, scale)
    z = standardize(x, loc, scale)
    tail = knp.multiply(special.gammaincc(knp.reciprocal(beta), knp.power(knp.abs(z), beta)), 0.5)
    on_tail_side = knp.greater(z, 0) if upper else knp.less(z, 0)
    y = knp.where(on_tail_side, tail, knp.subtract(1.0, tail))
    return narrow(invalid_to_nan(knp.logical_and(knp.greater(beta, 0), knp.greater(scale, 0)), y), dtype)


def cdf(x, beta, loc=0, scale=1):
    return _probability("gennorm.cdf", x, beta, loc, scale, upper=False)


def sf(x, beta, loc=0, scale=1):
    return _probability("gennorm.sf", x, beta, loc, scale, upper=True)


