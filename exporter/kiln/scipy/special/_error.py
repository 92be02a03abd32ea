"""The error function family and the normal distribution's functions: erf, erfc, erfinv, erfcinv, erfcx,
dawsn, ndtr, ndtri, log_ndtr."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...lax.math_prims import erf as _lax_erf
from ...lax.math_prims import erfc as _lax_erfc
from ...lax.special_math import erfcinv64, erfinv64
from ._common import float_operands, horner, narrow, square_exactly

__all__ = ["erf", "erfc", "erfinv", "erfcinv", "ndtr", "ndtri", "log_ndtr", "erfcx", "dawsn"]


_SQRT1_2 = 1.0 / math.sqrt(2.0)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf(x):
    """The error function (kiln's erf primitive: float64 within 2 ulp, docs/accuracy.md)."""
    (x,), dtype = float_operands("erf", x)
    return narrow(_lax_erf(x), dtype)


def erfc(x):
    """1 - erf(x), accurate in the right tail (kiln's erfc primitive)."""
    (x,), dtype = float_operands("erfc", x)
    return narrow(_lax_erfc(x), dtype)


def erfinv(y):
    """The inverse of erf on [-1, 1] (±1 -> ±inf, outside NaN); float64 within a few ulp (docs/scipy.md).
    The derivative is sqrt(pi)/2 exp(erfinv(y)^2)."""
    (y,), dtype = float_operands("erfinv", y)
    return narrow(erfinv64(y), dtype)


def erfcinv(q):
    """The inverse of erfc on [0, 2] (0 -> inf, 2 -> -inf, outside NaN), accurate in the tail (q down to 1e-308)."""
    (q,), dtype = float_operands("erfcinv", q)
    return narrow(erfcinv64(q), dtype)


def ndtr(x):
    """The standard normal CDF, erfc(-x/sqrt(2)) / 2 (JAX's formula: the rounding of x/sqrt(2) costs a relative
    2 x^2 2^-53 in the left tail)."""
    (x,), dtype = float_operands("ndtr", x)
    return narrow(knp.multiply(_lax_erfc(knp.multiply(x, -_SQRT1_2)), 0.5), dtype)


def ndtri(p):
    """The standard normal quantile, -sqrt(2) erfcinv(2p): 0 -> -inf, 1 -> inf, outside [0, 1] NaN."""
    (p,), dtype = float_operands("ndtri", p)
    return narrow(knp.multiply(erfcinv64(knp.multiply(p, 2.0)), -math.sqrt(2.0)), dtype)


def _log_ndtr_asymptotic(x):
    """log Phi(x) for x <= -20: -x^2/2 - log(-x) - log(2 pi)/2 + log(1 - 1/x^2 + 3/x^4 - 15/x^6 ...), ten terms
    of the series (the next is below 1e-17)."""
    z = knp.reciprocal(knp.multiply(x, x))
    total = 0.0
    for k in range(10, 0, -1):  # Horner in z: sum_k (-1)^k (2k-1)!! z^k
        coeff = (-1) ** k * math.prod(range(1, 2 * k, 2))
        total = knp.multiply(z, knp.add(total, coeff))
    series = knp.log1p(total)
    return knp.add(knp.subtract(knp.subtract(knp.multiply(knp.multiply(x, x), -0.5), knp.log(knp.negative(x))),
                                0.5 * math.log(2 * math.pi)), series)


def log_ndtr(x):
    """log of the standard normal CDF: log1p(-ndtr(-x)) for x > 0, log(ndtr(x)) down to -20, the asymptotic
    series below (log_ndtr(-1e5) = -5.0e9 as scipy)."""
    (x,), dtype = float_operands("log_ndtr", x)
    right = knp.greater(x, 0.0)
    deep = knp.less(x, -20.0)
    xr = knp.where(right, x, 1.0)
    xm = knp.where(knp.logical_or(right, deep), -1.0, x)
    xd = knp.where(deep, x, -30.0)
    r = knp.log1p(knp.multiply(_lax_erfc(knp.multiply(xr, _SQRT1_2)), -0.5))
    m = knp.log(knp.multiply(_lax_erfc(knp.multiply(xm, -_SQRT1_2)), 0.5))
    out = knp.where(right, r, knp.where(deep, _log_ndtr_asymptotic(xd), m))
    return narrow(knp.where(knp.isnan(x), x, out), dtype)


def _erfcx_nonnegative(x):
    """exp(x^2) erfc(x) for x >= 0: with x^2 split exactly, exp(hi) (1 + lo) erfc(x) up to 26; beyond, the
    asymptotic series 1 / (x sqrt(pi)) sum_n (-1)^n (2n-1)!! / (2x^2)^n (8 terms)."""
    far = knp.greater(x, 26.0)
    xn = knp.where(far, 26.0, x)
    hi, lo = square_exactly(xn)
    near = knp.multiply(knp.multiply(knp.exp(hi), knp.add(1.0, lo)), _lax_erfc(xn))
    xf = knp.where(far, x, 26.0)
    u = knp.reciprocal(knp.multiply(knp.multiply(xf, xf), 2.0))
    series = horner(u, [(-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(9)])
    asymptotic = knp.divide(series, knp.multiply(xf, math.sqrt(math.pi)))
    return knp.where(far, knp.where(knp.isinf(xf), 0.0, asymptotic), near)


def erfcx(x):
    """The scaled complementary error function exp(x^2) erfc(x): 2 exp(x^2) - erfcx(-x) below 0 (overflowing
    where exp(x^2) does)."""
    (x,), dtype = float_operands("erfcx", x)
    ax = knp.abs(x)
    positive = _erfcx_nonnegative(ax)
    hi, lo = square_exactly(knp.where(knp.less(x, 0.0), knp.minimum(ax, 27.0), 0.0))
    negative = knp.subtract(knp.multiply(knp.multiply(knp.exp(hi), knp.add(1.0, lo)), 2.0), positive)
    negative = knp.where(knp.greater(ax, 27.0), np.inf, negative)
    out = knp.where(knp.less(x, 0.0), negative, positive)
    return narrow(knp.where(knp.isnan(x), x, out), dtype)


_DAWSON_SERIES_BELOW = 6.5
_DAWSON_SERIES_TERMS = 130  # |x| < 6.5: positive terms x^(2k+1) / (k! (2k+1)), the last below 1e-22 of the sum
_DAWSON_ASYMPTOTIC_TERMS = 36  # |x| >= 6.5: 1/(2x) sum (2k-1)!! / (2x^2)^k, smallest term near k = 42


def dawsn(x):
    """Dawson's integral exp(-x^2) integral_0^x exp(t^2) dt: exp(-x^2) sum_k x^(2k+1) / (k! (2k+1)) (positive
    terms, x^2 split exactly for the exponential) below 6.5, the asymptotic series 1/(2x) sum (2k-1)!! / (2x^2)^k
    above; odd in x."""
    (x,), dtype = float_operands("dawsn", x)
    near = knp.less(knp.abs(x), _DAWSON_SERIES_BELOW)
    xs = knp.where(near, x, 1.0)  # signed: both series are odd in x, -0.0 included
    hi, lo = square_exactly(xs)
    series = knp.multiply(xs, horner(hi, [1.0 / (math.factorial(k) * (2 * k + 1)) for k in range(_DAWSON_SERIES_TERMS)]))
    at_near = knp.multiply(knp.multiply(knp.exp(knp.negative(hi)), knp.subtract(1.0, lo)), series)
    xf = knp.where(near, _DAWSON_SERIES_BELOW, x)
    u = knp.reciprocal(knp.multiply(knp.multiply(xf, xf), 2.0))
    asymptotic = knp.divide(horner(u, [float(math.prod(range(1, 2 * k, 2))) for k in range(_DAWSON_ASYMPTOTIC_TERMS)]),
                            knp.multiply(xf, 2.0))
    return narrow(knp.where(near, at_near, asymptotic), dtype)
