"""kiln.scipy.stats.laplace: the Laplace distribution, density exp(-|z|) / (2 scale)."""
from __future__ import annotations

import math

from ... import numpy as knp
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf"]


def _z(where, x, loc, scale):
    (x, loc, scale), dtype = float_operands(where, x, loc, scale)
    return standardize(x, loc, scale), scale, dtype


def _logpdf(where, x, loc, scale):
    z, scale, dtype = _z(where, x, loc, scale)
    y = knp.subtract(knp.negative(knp.abs(z)), knp.add(knp.log(scale), math.log(2.0)))
    return invalid_to_nan(knp.greater(scale, 0), y), dtype


def logpdf(x, loc=0, scale=1):
    return narrow(*_logpdf("laplace.logpdf", x, loc, scale))


def pdf(x, loc=0, scale=1):
    y, dtype = _logpdf("laplace.pdf", x, loc, scale)
    return narrow(knp.exp(y), dtype)


def cdf(x, loc=0, scale=1):
    """exp(z)/2 below loc, 1 - exp(-z)/2 above."""
    z, scale, dtype = _z("laplace.cdf", x, loc, scale)
    half_tail = knp.multiply(knp.exp(knp.negative(knp.abs(z))), 0.5)
    y = knp.where(knp.less(z, 0), half_tail, knp.subtract(1.0, half_tail))
    return narrow(invalid_to_nan(knp.greater(scale, 0), y), dtype)
