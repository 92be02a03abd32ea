"""kiln.scipy.stats.beta: the beta distribution, density z^(a-1) (1-z)^(b-1) / B(a, b) / scale on [0, 1]."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ..special._incomplete import betainc64
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf"]


def _logpdf(where, x, a, b, loc, scale):
    (x, a, b, loc, scale), dtype = float_operands(where, x, a, b, loc, scale)
    z = standardize(x, loc, scale)
    inside = knp.logical_and(knp.greater_equal(z, 0), knp.less_equal(z, 1))
    zs = knp.where(inside, z, 0.5)
    y = knp.add(special.xlogy(knp.subtract(a, 1.0), zs), special.xlog1py(knp.subtract(b, 1.0), knp.negative(zs)))
    y = knp.subtract(knp.subtract(y, special.betaln(a, b)), knp.log(scale))
    valid = knp.logical_and(knp.logical_and(knp.greater(a, 0), knp.greater(b, 0)), knp.greater(scale, 0))
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpdf(x, a, b, loc=0, scale=1):
    return narrow(*_logpdf("beta.logpdf", x, a, b, loc, scale))


def pdf(x, a, b, loc=0, scale=1):
    y, dtype = _logpdf("beta.pdf", x, a, b, loc, scale)
    return narrow(knp.exp(y), dtype)


def _probability(where, x, a, b, loc, scale, upper):
    """I_z(a, b) (cdf) or I_(1-z)(b, a) (sf), z = (x - loc) / scale clipped to [0, 1]."""
    (x, a, b, loc, scale), dtype = float_operands(where, x, a, b, loc, scale)
    z = knp.clip(standardize(x, loc, scale), 0.0, 1.0)
    y = knp.subtract(1.0, z)
    value = betainc64(b, a, y, z) if upper else betainc64(a, b, z, y)
    valid = knp.logical_and(knp.logical_and(knp.greater(a, 0), knp.greater(b, 0)), knp.greater(scale, 0))
    return narrow(invalid_to_nan(valid, value), dtype)


def cdf(x, a, b, loc=0, scale=1):
    """The regularized incomplete beta function I_z(a, b)."""
    return _probability("beta.cdf", x, a, b, loc, scale, upper=False)


def sf(x, a, b, loc=0, scale=1):
    """1 - cdf as I_(1-z)(b, a) (accurate where it is small)."""
    return _probability("beta.sf", x, a, b, loc, scale, upper=True)
