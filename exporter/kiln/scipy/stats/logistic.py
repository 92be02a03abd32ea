"""kiln.scipy.stats.logistic: the logistic distribution, density e^-z / (1 + e^-z)^2 / scale."""
from __future__ import annotations

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]


def _z(where, x, loc, scale):
    (x, loc, scale), dtype = float_operands(where, x, loc, scale)
    return standardize(x, loc, scale), scale, dtype


def _logpdf(where, x, loc, scale):
    """-|z| - 2 log1p(exp(-|z|)) - log(scale): symmetric, so both tails keep their accuracy."""
    z, scale, dtype = _z(where, x, loc, scale)
    a = knp.abs(z)
    y = knp.subtract(knp.subtract(knp.negative(a), knp.multiply(knp.log1p(knp.exp(knp.negative(a))), 2.0)),
                     knp.log(scale))
    return invalid_to_nan(knp.greater(scale, 0), y), dtype


def logpdf(x, loc=0, scale=1):
    return narrow(*_logpdf("logistic.logpdf", x, loc, scale))


def pdf(x, loc=0, scale=1):
    y, dtype = _logpdf("logistic.pdf", x, loc, scale)
    return narrow(knp.exp(y), dtype)


def cdf(x, loc=0, scale=1):
    """expit(z)."""
    z, scale, dtype = _z("logistic.cdf", x, loc, scale)
    return narrow(invalid_to_nan(knp.greater(scale, 0), special.expit(z)), dtype)


def sf(x, loc=0, scale=1):
    """expit(-z)."""
    z, scale, dtype = _z("logistic.sf", x, loc, scale)
    return narrow(invalid_to_nan(knp.greater(scale, 0), special.expit(knp.negative(z))), dtype)


def ppf(q, loc=0, scale=1):
    """loc + scale logit(q)."""
    (q, loc, scale), dtype = float_operands("logistic.ppf", q, loc, scale)
    return narrow(invalid_to_nan(knp.greater(scale, 0), knp.add(loc, knp.multiply(scale, special.logit(q)))), dtype)


def isf(q, loc=0, scale=1):
    """loc - scale logit(q)."""
    (q, loc, scale), dtype = float_operands("logistic.isf", q, loc, scale)
    return narrow(invalid_to_nan(knp.greater(scale, 0), knp.subtract(loc, knp.multiply(scale, special.logit(q)))),
                  dtype)
