"""kiln.scipy.stats.pareto: the Pareto distribution with shape b, density b / z^(b+1) / scale for z >= 1."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def _at_z(where, x, b, loc, scale):
    """(b, log z with z clamped to its support's edge 1, whether z is in the support, valid, dtype)."""
    (x, b, loc, scale), dtype = float_operands(where, x, b, loc, scale)
    z = standardize(x, loc, scale)
    inside = knp.greater_equal(z, 1.0)
    valid = knp.logical_and(knp.greater(b, 0), knp.greater(scale, 0))
    return b, knp.log(knp.where(inside, z, 1.0)), inside, scale, valid, dtype


def _logpdf(where, x, b, loc, scale):
    b, log_z, inside, scale, valid, dtype = _at_z(where, x, b, loc, scale)
    y = knp.subtract(knp.subtract(knp.log(b), knp.multiply(knp.add(b, 1.0), log_z)), knp.log(scale))
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpdf(x, b, loc=0, scale=1):
    return narrow(*_logpdf("pareto.logpdf", x, b, loc, scale))


def pdf(x, b, loc=0, scale=1):
    y, dtype = _logpdf("pareto.pdf", x, b, loc, scale)
    return narrow(knp.exp(y), dtype)


def _tail(where, x, b, loc, scale, fn):
    b, log_z, _, _, valid, dtype = _at_z(where, x, b, loc, scale)
    return narrow(invalid_to_nan(valid, fn(knp.negative(knp.multiply(b, log_z)))), dtype)  # fn of log sf


def cdf(x, b, loc=0, scale=1):
    """1 - z^-b as -expm1(-b log z)."""
    return _tail("pareto.cdf", x, b, loc, scale, lambda log_sf: knp.negative(knp.expm1(log_sf)))


def logcdf(x, b, loc=0, scale=1):
    return _tail("pareto.logcdf", x, b, loc, scale, lambda log_sf: knp.log(knp.negative(knp.expm1(log_sf))))


def sf(x, b, loc=0, scale=1):
    return _tail("pareto.sf", x, b, loc, scale, knp.exp)


def logsf(x, b, loc=0, scale=1):
    return _tail("pareto.logsf", x, b, loc, scale, lambda log_sf: log_sf)


def ppf(q, b, loc=0, scale=1):
    """loc + scale (1 - q)^(-1/b), as exp(-log1p(-q) / b)."""
    (q, b, loc, scale), dtype = float_operands("pareto.ppf", q, b, loc, scale)
    inside = knp.logical_and(knp.greater_equal(q, 0), knp.less_equal(q, 1))
    with np.errstate(divide="ignore"):
        z = knp.exp(knp.divide(knp.negative(knp.log1p(knp.negative(knp.where(inside, q, 0.0)))), b))
    y = knp.where(inside, knp.add(loc, knp.multiply(scale, z)), np.nan)
    return narrow(invalid_to_nan(knp.logical_and(knp.greater(b, 0), knp.greater(scale, 0)), y), dtype)
