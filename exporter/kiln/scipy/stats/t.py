"""kiln.scipy.stats.t: Student's t distribution with df degrees of freedom."""
from __future__ import annotations

import math

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf"]


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
