"""kiln.scipy.stats.wrapcauchy: the wrapped Cauchy distribution on [0, 2 pi], density
(1 - c^2) / (2 pi (1 + c^2 - 2 c cos x))."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf"]


def _logpdf(where, x, c, loc, scale):
    (x, c, loc, scale), dtype = float_operands(where, x, c, loc, scale)
    z = standardize(x, loc, scale)
    inside = knp.logical_and(knp.greater_equal(z, 0), knp.less_equal(z, 2 * math.pi))
    denominator = knp.subtract(knp.add(1.0, knp.multiply(c, c)), knp.multiply(knp.multiply(c, 2.0), knp.cos(z)))
    y = knp.subtract(knp.log(knp.subtract(1.0, knp.multiply(c, c))),
                     knp.add(knp.log(knp.multiply(denominator, 2 * math.pi)), knp.log(scale)))
    valid = knp.logical_and(knp.logical_and(knp.greater(c, 0), knp.less(c, 1)), knp.greater(scale, 0))
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpdf(x, c, loc=0, scale=1):
    return narrow(*_logpdf("wrapcauchy.logpdf", x, c, loc, scale))


def pdf(x, c, loc=0, scale=1):
    y, dtype = _logpdf("wrapcauchy.pdf", x, c, loc, scale)
    return narrow(knp.exp(y), dtype)
