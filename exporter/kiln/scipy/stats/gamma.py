"""kiln.scipy.stats.gamma: the gamma distribution with shape a, density z^(a-1) e^-z / Gamma(a) / scale."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from .. import special
from ._common import float_operands, invalid_to_nan, narrow, standardize

__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"]


def _logpdf(where, x, a, loc, scale):
    (x, a, loc, scale), dtype = float_operands(where, x, a, loc, scale)
    z = standardize(x, loc, scale)
    inside = knp.greater_equal(z, 0)
    zs = knp.where(inside, z, 1.0)
    y = knp.subtract(knp.subtract(knp.subtract(special.xlogy(knp.subtract(a, 1.0), zs), zs), special.gammaln(a)),
                     knp.log(scale))
    valid = knp.logical_and(knp.greater(a, 0), knp.greater(scale, 0))
    return invalid_to_nan(valid, knp.where(inside, y, -np.inf)), dtype


def logpdf(x, a, loc=0, scale=1):
    return narrow(*_logpdf("gamma.logpdf", x, a, loc, scale))


def pdf(x, a, loc=0, scale=1):
    y, dtype = _logpdf("gamma.pdf", x, a, loc, scale)
    return narrow(knp.exp(y), dtype)


def _at_z(where, x, a, loc, scale):
    """(a, z = max((x - loc) / scale, 0), valid parameters, dtype)."""
    (x, a, loc, scale), dtype = float_operands(where, x, a, loc, scale)
    valid = knp.logical_and(knp.greater(a, 0), knp.greater(scale, 0))
    return a, knp.maximum(standardize(x, loc, scale), 0.0), valid, dtype


def cdf(x, a, loc=0, scale=1):
    """gammainc(a, z)."""
    a, z, valid, dtype = _at_z("gamma.cdf", x, a, loc, scale)
    return narrow(invalid_to_nan(valid, special.gammainc(a, z)), dtype)


def sf(x, a, loc=0, scale=1):
    """gammaincc(a, z) (accurate in the right tail)."""
    a, z, valid, dtype = _at_z("gamma.sf", x, a, loc, scale)
    return narrow(invalid_to_nan(valid, special.gammaincc(a, z)), dtype)


def _log_of(p, q):
    """log(p) where p is small, log1p(-q) where it is near 1 (p = 1 - q)."""
    return knp.where(knp.greater(p, 0.5), knp.log1p(knp.negative(q)), knp.log(p))


def logcdf(x, a, loc=0, scale=1):
    a, z, valid, dtype = _at_z("gamma.logcdf", x, a, loc, scale)
    return narrow(invalid_to_nan(valid, _log_of(special.gammainc(a, z), special.gammaincc(a, z))), dtype)


def logsf(x, a, loc=0, scale=1):
    a, z, valid, dtype = _at_z("gamma.logsf", x, a, loc, scale)
    return narrow(invalid_to_nan(valid, _log_of(special.gammaincc(a, z), special.gammainc(a, z))), dtype)
