"""kiln.scipy.stats.uniform: the uniform distribution on [loc, loc + scale]."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "ppf"]


def _z(where, x, loc, scale):
    (x, loc, scale), dtype = float_operands(where, x, loc, scale)
    return standardize(x, loc, scale), scale, dtype


def _inside(z):
    return knp.logical_and(knp.greater_equal(z, 0), knp.less_equal(z, 1))


def logpdf(x, loc=0, scale=1):
    z, scale, dtype = _z("uniform.logpdf", x, loc, scale)
    y = knp.where(_inside(z), knp.negative(knp.log(scale)), -np.inf)
    return narrow(invalid_to_nan(knp.greater(scale, 0), y), dtype)


def pdf(x, loc=0, scale=1):
    z, scale, dtype = _z("uniform.pdf", x, loc, scale)
    y = knp.where(_inside(z), knp.reciprocal(scale), 0.0)
    return narrow(invalid_to_nan(knp.greater(scale, 0), y), dtype)


def cdf(x, loc=0, scale=1):
    z, scale, dtype = _z("uniform.cdf", x, loc, scale)
    return narrow(invalid_to_nan(knp.greater(scale, 0), knp.clip(z, 0.0, 1.0)), dtype)


def ppf(q, loc=0, scale=1):
    """loc + q scale for q in [0, 1], NaN outside."""
    (q, loc, scale), dtype = float_operands("uniform.ppf", q, loc, scale)
    inside = knp.logical_and(knp.greater_equal(q, 0), knp.less_equal(q, 1))
    y = knp.where(inside, knp.add(loc, knp.multiply(q, scale)), np.nan)
    return narrow(invalid_to_nan(knp.greater(scale, 0), y), dtype)
