"""kiln.scipy.stats.expon: the exponential distribution, density exp(-z) / scale for z = (x - loc) / scale >= 0."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def _z(where, x, loc, scale):
    (x, loc, scale), dtype = float_operands(where, x, loc, scale)
    return standardize(x, loc, scale), scale, dtype


def _finish(scale, y, dtype):
    return narrow(invalid_to_nan(knp.greater(scale, 0), y), dtype)


def _logpdf(where, x, loc, scale):
    z, scale, dtype = _z(where, x, loc, scale)
    y = knp.where(knp.less(z, 0), -np.inf, knp.subtract(knp.negative(z), knp.log(scale)))
    return y, scale, dtype


def logpdf(x, loc=0, scale=1):
    y, scale, dtype = _logpdf("expon.logpdf", x, loc, scale)
    return _finish(scale, y, dtype)


def pdf(x, loc=0, scale=1):
    y, scale, dtype = _logpdf("expon.pdf", x, loc, scale)
    return _finish(scale, knp.exp(y), dtype)


def cdf(x, loc=0, scale=1):
    """1 - exp(-z) as -expm1(-z) (accurate for small z), 0 below loc."""
    z, scale, dtype = _z("expon.cdf", x, loc, scale)
    return _finish(scale, knp.where(knp.less(z, 0), 0.0, knp.negative(knp.expm1(knp.negative(knp.maximum(z, 0))))), dtype)


def logcdf(x, loc=0, scale=1):
    z, scale, dtype = _z("expon.logcdf", x, loc, scale)
    inside = knp.greater(z, 0)
    zs = knp.where(inside, z, 1.0)
    # log(1 - e^-z): log1p(-e^-z) once e^-z < 1/2, log(-expm1(-z)) below (each keeps its relative accuracy)
    y = knp.where(knp.greater(zs, np.log(2.0)), knp.log1p(knp.negative(knp.exp(knp.negative(zs)))),
                  knp.log(knp.negative(knp.expm1(knp.negative(zs)))))
    return _finish(scale, knp.where(inside, y, -np.inf), dtype)


def sf(x, loc=0, scale=1):
    z, scale, dtype = _z("expon.sf", x, loc, scale)
    return _finish(scale, knp.exp(knp.negative(knp.maximum(z, 0))), dtype)


def logsf(x, loc=0, scale=1):
    z, scale, dtype = _z("expon.logsf", x, loc, scale)
    return _finish(scale, knp.negative(knp.maximum(z, 0)), dtype)


def ppf(q, loc=0, scale=1):
    """loc - scale log1p(-q); NaN outside [0, 1]."""
    (q, loc, scale), dtype = float_operands("expon.ppf", q, loc, scale)
    inside = knp.logical_and(knp.greater_equal(q, 0), knp.less_equal(q, 1))
    y = knp.subtract(loc, knp.multiply(scale, knp.log1p(knp.negative(knp.where(inside, q, 0.5)))))
    return _finish(scale, knp.where(inside, y, np.nan), dtype)
