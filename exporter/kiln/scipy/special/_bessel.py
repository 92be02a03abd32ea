"""Modified Bessel functions of the first kind of orders 0 and 1: i0, i0e, i1, i1e."""
from __future__ import annotations

import math

from ... import numpy as knp
from ._common import float_operands, horner, narrow

__all__ = ["i0e", "i1e", "i0", "i1"]


_BESSEL_SERIES_BELOW = 40.0  # kiln.numpy.i0's split: the power series below, the asymptotic series above


_BESSEL_SERIES_TERMS = 80


_BESSEL_ASYMPTOTIC_TERMS = 20


def _bessel_i_scaled(x, order: int):
    """exp(-|x|) I_order(|x|), order 0 or 1: the power series (x/2)^order sum_k (x^2/4)^k / (k! (k + order)!)
    (positive terms) times exp(-|x|) below 40; above, the asymptotic series
    (2 pi |x|)^(-1/2) sum_k (-1)^k prod_j (4 order^2 - (2j - 1)^2) / (k! (8|x|)^k), which needs no exponential."""
    ax = knp.abs(x)
    near = knp.less(ax, _BESSEL_SERIES_BELOW)
    xs = knp.where(near, ax, 0.0)
    quarter = knp.multiply(knp.multiply(xs, xs), 0.25)
    coeffs = [1.0 / (math.factorial(k) * math.factorial(k + order)) for k in range(_BESSEL_SERIES_TERMS)]
    series = horner(quarter, coeffs)
    if order == 1:
        series = knp.multiply(series, knp.multiply(xs, 0.5))
    series = knp.multiply(series, knp.exp(knp.negative(xs)))
    xf = knp.where(near, _BESSEL_SERIES_BELOW, ax)
    w = knp.reciprocal(knp.multiply(xf, 8.0))
    asym_coeffs, c = [1.0], 1.0
    for k in range(1, _BESSEL_ASYMPTOTIC_TERMS):
        c *= -(4 * order * order - (2 * k - 1) ** 2) / k
        asym_coeffs.append(c)
    far = knp.divide(horner(w, asym_coeffs), knp.sqrt(knp.multiply(xf, 2 * math.pi)))
    far = knp.where(knp.isinf(xf), 0.0, far)
    return knp.where(near, series, far)


def _odd(x, value):
    return knp.where(knp.less(x, 0.0), knp.negative(value), value)


def i0e(x):
    """exp(-|x|) I0(x), finite for every x (I0 itself overflows beyond 713)."""
    (x,), dtype = float_operands("i0e", x)
    return narrow(_bessel_i_scaled(x, 0), dtype)


def i1e(x):
    """exp(-|x|) I1(x) (odd in x)."""
    (x,), dtype = float_operands("i1e", x)
    return narrow(_odd(x, _bessel_i_scaled(x, 1)), dtype)


def _unscaled(x, order):
    """I_order(|x|) = exp(|x|) i_order_e(|x|), the exponential as exp(|x|/2)^2 so that it overflows only where
    the result does."""
    half = knp.exp(knp.multiply(knp.abs(x), 0.5))
    return knp.multiply(knp.multiply(_bessel_i_scaled(x, order), half), half)  # NaN at +-inf, as scipy


def i0(x):
    """The modified Bessel function I0: kiln.numpy.i0 (one implementation), in scipy's dtypes."""
    (x,), dtype = float_operands("i0", x)
    return narrow(knp.i0(x), dtype)


def i1(x):
    """The modified Bessel function I1 (odd in x), by i1e's series; NaN at +-inf as scipy's."""
    (x,), dtype = float_operands("i1", x)
    return narrow(_odd(x, _unscaled(x, 1)), dtype)
