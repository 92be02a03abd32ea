"""kiln.scipy.stats.t: Student's t distribution with df degrees of freedom."""
from __future__ import annotations

import math

from ... import numpy as knp
from .. import special
from ..special._incomplete import betainc64
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf"]


def _logpdf(where, x, df, loc, scale):
    """gammaln((df+1)/2) - gammaln(df/2) - log(df pi)/2 - (df+1)/2 log1p(z^2/df) - log(scale)."""
    (x, df, loc, scale), dtype = float_operands(where, x, df, loc, scale)
    z = standardize(x, loc, scale)
    half = knp.multiply(df, 0.5)
    half_up = knp.add(half, 0.5)
    norming = knp.subtract(special.gammaln(half_up), special.gammaln(half))
    norming = knp.subtract(norming, knp.multiply(knp.add(knp.log(df), math.log(math.pi)), 0.5))
    y = knp.subtract(knp.subtract(norming, knp.multiply(half_up, knp.log1p(knp.divide(knp.multiply(z, z), df)))),
                     knp.log(scale))
    return invalid_to_nan(knp.logical_and(knp.greater(df, 0), knp.greater(scale, 0)), y), dtype


def logpdf(x, df, loc=0, scale=1):
    return narrow(*_logpdf("t.logpdf", x, df, loc, scale))


def pdf(x, df, loc=0, scale=1):
    y, dtype = _logpdf("t.pdf", x, df, loc, scale)
    return narrow(knp.exp(y), dtype)


def _probability(where, x, df, loc, scale, upper):
    """The tail beyond |z| is I_w(df/2, 1/2) / 2 with w = df / (df + z^2) and 1 - w = z^2 / (df + z^2) given
    exactly, so both the tails and the middle keep their accuracy."""
    (x, df, loc, scale), dtype = float_operands(where, x, df, loc, scale)
    z = standardize(x, loc, scale)
    z2 = knp.multiply(z, z)
    total = knp.add(df, z2)
    tail = knp.multiply(betainc64(knp.multiply(df, 0.5), 0.5, knp.divide(df, total), knp.divide(z2, total)), 0.5)
    tail = knp.where(knp.isinf(z2), 0.0, tail)
    on_tail_side = knp.greater(z, 0) if upper else knp.less(z, 0)
    y = knp.where(on_tail_side, tail, knp.subtract(1.0, tail))
    return narrow(invalid_to_nan(knp.logical_and(knp.greater(df, 0), knp.greater(scale, 0)), y), dtype)


def cdf(x, df, loc=0, scale=1):
    return _probability("t.cdf", x, df, loc, scale, upper=False)


def sf(x, df, loc=0, scale=1):
    return _probability("t.sf", x, df, loc, scale, upper=True)
