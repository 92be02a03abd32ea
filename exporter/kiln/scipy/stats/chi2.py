"""kiln.scipy.stats.chi2: the chi-squared distribution with df degrees of freedom (gamma with a = df/2, scale 2)."""
from __future__ import annotations

from ... import numpy as knp
from . import gamma
from ._common import float_operands, narrow

__all__ = ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"]


def _as_gamma(where, fn, x, df, loc, scale):
    """fn of gamma(a = df/2, scale = 2 scale) computed in float64, rounded to the operands' dtype."""
    (x, df, loc, scale), dtype = float_operands(where, x, df, loc, scale)
    return narrow(fn(x, knp.multiply(df, 0.5), loc, knp.multiply(scale, 2.0)), dtype)


def logpdf(x, df, loc=0, scale=1):
    return _as_gamma("chi2.logpdf", gamma.logpdf, x, df, loc, scale)


def pdf(x, df, loc=0, scale=1):
    return _as_gamma("chi2.pdf", gamma.pdf, x, df, loc, scale)


def cdf(x, df, loc=0, scale=1):
    return _as_gamma("chi2.cdf", gamma.cdf, x, df, loc, scale)


def sf(x, df, loc=0, scale=1):
    return _as_gamma("chi2.sf", gamma.sf, x, df, loc, scale)


def logcdf(x, df, loc=0, scale=1):
    return _as_gamma("chi2.logcdf", gamma.logcdf, x, df, loc, scale)


def logsf(x, df, loc=0, scale=1):
    return _as_gamma("chi2.logsf", gamma.logsf, x, df, loc, scale)
