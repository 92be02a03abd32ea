"""The error function family and the normal distribution's functions: erf, erfc, erfinv, erfcinv, erfcx,
dawsn, ndtr, ndtri, log_ndtr."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...lax.math_prims import erf as _lax_erf
from ...lax.math_prims import erfc as _lax_erfc
from ...transforms.custom import custom_jvp
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


def _log_erfc(x):
    """log(erfc(x)) for x >= 0; beyond 26, where erfc nears the subnormals, from the asymptotic series
    erfc(x) = exp(-x^2) / (x sqrt(pi)) sum_n (-1)^n (2n-1)!! / (2x^2)^n (8 terms: the next is below 1e-19)."""
    far = knp.greater(x, 26.0)
    xf = knp.where(far, x, 26.0)
    u = knp.reciprocal(knp.multiply(knp.multiply(xf, xf), 2.0))
    series = horner(u, [(-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(9)])
    asymptotic = knp.subtract(knp.subtract(knp.log(series), knp.multiply(xf, xf)),
                              knp.add(knp.log(xf), 0.5 * math.log(math.pi)))
    return knp.where(far, asymptotic, knp.log(_lax_erfc(knp.where(far, 26.0, x))))


def _erfinv_core(y, q):
    """x >= 0 with erf(x) = y, where q = 1 - y is given exactly (y in [0, 1], q in [0, 1]): Winitzki's closed
    form (relative error below 2e-3) refined by two Halley steps (q is used in the tail, so it keeps its relative
    accuracy down to the smallest subnormal)."""
    safe_q = knp.where(knp.greater(q, 0.0), q, 0.5)
    log_term = knp.log(knp.multiply(safe_q, knp.subtract(2.0, safe_q)))  # log(1 - y^2)
    a = 0.147
    c = knp.add(2.0 / (math.pi * a), knp.multiply(log_term, 0.5))
    x = knp.sqrt(knp.maximum(knp.subtract(knp.sqrt(knp.subtract(knp.multiply(c, c), knp.divide(log_term, a))), c), 0.0))
    tail = knp.less(q, 0.5)
    log_q = knp.log(safe_q)
    for _ in range(2):
        x2 = knp.multiply(x, x)
        # Halley's steps (cubic convergence), in the body on erf(x) - y, in the tail on log(erfc(x)) - log(q),
        # which is nearly linear in x^2 (on erfc(x) - q they converge slowly where x is large)
        u = knp.divide(knp.subtract(_lax_erf(x), y), knp.multiply(_TWO_OVER_SQRT_PI, knp.exp(knp.negative(x2))))
        body = knp.subtract(x, knp.divide(u, knp.add(1.0, knp.multiply(x, u))))
        log_erfc = _log_erfc(x)
        slope = knp.multiply(-_TWO_OVER_SQRT_PI, knp.exp(knp.subtract(knp.negative(x2), log_erfc)))  # g'
        g = knp.subtract(log_erfc, log_q)
        curvature = knp.multiply(slope, knp.subtract(knp.multiply(x, -2.0), slope))  # g''
        step = knp.divide(g, slope)
        halley = knp.divide(step, knp.subtract(1.0, knp.divide(knp.multiply(step, curvature), knp.multiply(slope, 2.0))))
        x = knp.where(tail, knp.subtract(x, halley), body)
    return knp.where(knp.equal(q, 0.0), np.inf, x)


@custom_jvp
def _erfinv64(y):
    ay = knp.abs(y)
    x = _erfinv_core(ay, knp.subtract(1.0, ay))
    x = knp.where(knp.greater(ay, 1.0), np.nan, x)
    return knp.where(knp.less(y, 0), knp.negative(x), knp.where(knp.equal(y, 0), y, x))


@_erfinv64.defjvp
def _erfinv64_jvp(primals, tangents):
    (y,), (dy,) = primals, tangents
    x = _erfinv64(y)
    return x, knp.multiply(dy, knp.multiply(math.sqrt(math.pi) / 2.0, knp.exp(knp.multiply(x, x))))


def erfinv(y):
    """The inverse of erf on [-1, 1] (±1 -> ±inf, outside NaN); float64 within a few ulp (docs/scipy.md).
    The derivative is sqrt(pi)/2 exp(erfinv(y)^2)."""
    (y,), dtype = float_operands("erfinv", y)
    return narrow(_erfinv64(y), dtype)


@custom_jvp
def _erfcinv64(q):
    low = knp.less_equal(q, 1.0)
    qq = knp.where(low, q, knp.subtract(2.0, q))  # exact for q in [1, 2]
    qq = knp.where(knp.logical_and(knp.greater_equal(qq, 0.0), knp.less_equal(qq, 1.0)), qq, 1.0)
    x = _erfinv_core(knp.subtract(1.0, qq), qq)
    x = knp.where(low, x, knp.negative(x))
    inside = knp.logical_and(knp.greater_equal(q, 0.0), knp.less_equal(q, 2.0))
    return knp.where(inside, x, np.nan)


@_erfcinv64.defjvp
def _erfcinv64_jvp(primals, tangents):
    (q,), (dq,) = primals, tangents
    x = _erfcinv64(q)
    return x, knp.multiply(dq, knp.multiply(-math.sqrt(math.pi) / 2.0, knp.exp(knp.multiply(x, x))))


def erfcinv(q):
    """The inverse of erfc on [0, 2] (0 -> inf, 2 -> -inf, outside NaN), accurate in the tail (q down to 1e-308)."""
    (q,), dtype = float_operands("erfcinv", q)
    return narrow(_erfcinv64(q), dtype)


def ndtr(x):
    """The standard normal CDF, erfc(-x/sqrt(2)) / 2 (JAX's formula: the rounding of x/sqrt(2) costs a relative
    2 x^2 2^-53 in the left tail)."""
    (x,), dtype = float_operands("ndtr", x)
    return narrow(knp.multiply(_lax_erfc(knp.multiply(x, -_SQRT1_2)), 0.5), dtype)


def ndtri(p):
    """The standard normal quantile, -sqrt(2) erfcinv(2p): 0 -> -inf, 1 -> inf, outside [0, 1] NaN."""
    (p,), dtype = float_operands("ndtri", p)
    return narrow(knp.multiply(_erfcinv64(knp.multiply(p, 2.0)), -math.sqrt(2.0)), dtype)


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
