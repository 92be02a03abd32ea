"""kiln.scipy.stats.gumbel_l: the left-skewed Gumbel distribution (of minima), sf exp(-e^z)."""
from __future__ import annotations

from ... import numpy as knp
from . import _gumbel as g
from ._common import float_operands, invalid_to_nan, narrow

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1):
    y, scale, dtype = g.logpdf("gumbel_l.logpdf", x, loc, scale, -1.0)
    return g.finish(scale, y, dtype)


def pdf(x, loc=0, scale=1):
    y, scale, dtype = g.logpdf("gumbel_l.pdf", x, loc, scale, -1.0)
    return g.finish(scale, knp.exp(y), dtype)


def _of_u(where, fn, x, loc, scale):
    u, scale, dtype = g.standard(where, x, loc, scale, -1.0)
    return g.finish(scale, fn(u), dtype)


def logsf(x, loc=0, scale=1):
    return _of_u("gumbel_l.logsf", g.lower_tail, x, loc, scale)


def sf(x, loc=0, scale=1):
    return _of_u("gumbel_l.sf", lambda u: knp.exp(g.lower_tail(u)), x, loc, scale)


def logcdf(x, loc=0, scale=1):
    return _of_u("gumbel_l.logcdf", g.upper_tail, x, loc, scale)


def cdf(x, loc=0, scale=1):
    return _of_u("gumbel_l.cdf", lambda u: knp.negative(knp.expm1(knp.negative(knp.exp(knp.negative(u))))), x, loc,
                 scale)


def ppf(q, loc=0, scale=1):
    """loc + scale log(-log1p(-q))."""
    (q, loc, scale), dtype = float_operands("gumbel_l.ppf", q, loc, scale)
    inside = knp.logical_and(knp.greater_equal(q, 0), knp.less_equal(q, 1))
    y = knp.add(loc, knp.multiply(scale, knp.log(knp.negative(knp.log1p(knp.negative(knp.where(inside, q, 0.5)))))))
    return narrow(invalid_to_nan(knp.greater(scale, 0), knp.where(inside, y, float("nan"))), dtype)
