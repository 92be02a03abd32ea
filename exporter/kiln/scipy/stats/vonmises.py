"""kiln.scipy.stats.vonmises: the von Mises distribution on the circle, density exp(kappa cos z) / (2 pi I0(kappa))
(periodic in z, as scipy's)."""
from __future__ import annotations

import math

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf"]


def _logpdf(where, x, kappa, loc, scale):
    """kappa (cos z - 1) - log(2 pi i0e(kappa)) - log(scale): i0e keeps large kappa finite."""
    (x, kappa, loc, scale), dtype = float_operands(where, x, kappa, loc, scale)
    z = standardize(x, loc, scale)
    y = knp.subtract(knp.multiply(kappa, knp.subtract(knp.cos(z), 1.0)),
                     knp.add(knp.log(knp.multiply(special.i0e(kappa), 2 * math.pi)), knp.log(scale)))
    return invalid_to_nan(knp.logical_and(knp.greater(kappa, 0), knp.greater(scale, 0)), y), dtype


def logpdf(x, kappa, loc=0, scale=1):
    return narrow(*_logpdf("vonmises.logpdf", x, kappa, loc, scale))


def pdf(x, kappa, loc=0, scale=1):
    y, dtype = _logpdf("vonmises.pdf", x, kappa, loc, scale)
    return narrow(knp.exp(y), dtype)
