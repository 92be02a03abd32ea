"""kiln.scipy.stats.norm: the normal distribution (scipy.stats.norm's functions of x, loc and scale)."""
from __future__ import annotations

import math

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _logpdf(where, x, loc, scale):
    (x, loc, scale), dtype = float_operands(where, x, loc, scale)
    z = standardize(x, loc, scale)
    y = knp.subtract(knp.subtract(knp.multiply(knp.multiply(z, z), -0.5), knp.log(scale)), _HALF_LOG_2PI)
    return invalid_to_nan(knp.greater(scale, 0), y), dtype


def logpdf(x, loc=0, scale=1):
    """-z^2/2 - log(scale) - log(2 pi)/2, z = (x - loc) / scale."""
    y, dtype = _logpdf("norm.logpdf", x, loc, scale)
    return narrow(y, dtype)


def pdf(x, loc=0, scale=1):
    y, dtype = _logpdf("norm.pdf", x, loc, scale)
    return narrow(knp.exp(y), dtype)


def _of_z(where, fn, x, loc, scale, sign):
    (x, loc, scale), dtype = float_operands(where, x, loc, scale)
    z = knp.multiply(standardize(x, loc, scale), sign)
    return narrow(invalid_to_nan(knp.greater(scale, 0), fn(z)), dtype)


def cdf(x, loc=0, scale=1):
    """ndtr((x - loc) / scale)."""
    return _of_z("norm.cdf", special.ndtr, x, loc, scale, 1.0)


def logcdf(x, loc=0, scale=1):
    """log_ndtr((x - loc) / scale): accurate far into the left tail."""
    return _of_z("norm.logcdf", special.log_ndtr, x, loc, scale, 1.0)


def sf(x, loc=0, scale=1):
    """1 - cdf, as ndtr(-z) (accurate in the right tail)."""
    return _of_z("norm.sf", special.ndtr, x, loc, scale, -1.0)


def logsf(x, loc=0, scale=1):
    return _of_z("norm.logsf", special.log_ndtr, x, loc, scale, -1.0)


def _quantile(where, q, loc, scale, sign):
    (q, loc, scale), dtype = float_operands(where, q, loc, scale)
    y = knp.add(loc, knp.multiply(knp.multiply(scale, sign), special.ndtri(q)))
    return narrow(invalid_to_nan(knp.greater(scale, 0), y), dtype)


def ppf(q, loc=0, scale=1):
    """loc + scale ndtri(q)."""
    return _quantile("norm.ppf", q, loc, scale, 1.0)


def isf(q, loc=0, scale=1):
    """loc - scale ndtri(q) (the inverse of sf)."""
    return _quantile("norm.isf", q, loc, scale, -1.0)
