"""Modified Bessel functions of the first kind of orders 0 and 1: i0, i0e, i1, i1e."""
from __future__ import annotations

from ... import numpy as knp
from ...lax.special_math import odd_extension, bessel_i_scaled
from ._common import float_operands, narrow

__all__ = ["i0e", "i1e", "i0", "i1"]


def i0e(x):
    """exp(-|x|) I0(x), finite for every x (I0 itself overflows beyond 713)."""
    (x,), dtype = float_operands("i0e", x)
    return narrow(bessel_i_scaled(x, 0), dtype)


def i1e(x):
    """exp(-|x|) I1(x) (odd in x)."""
    (x,), dtype = float_operands("i1e", x)
    return narrow(odd_extension(x, bessel_i_scaled(x, 1)), dtype)


def _unscaled(x, order):
    """I_order(|x|) = exp(|x|) i_order_e(|x|), the exponential as exp(|x|/2)^2 so that it overflows only where
    the result does."""
    half = knp.exp(knp.multiply(knp.abs(x), 0.5))
    return knp.multiply(knp.multiply(bessel_i_scaled(x, order), half), half)  # NaN at +-inf, as scipy


def i0(x):
    """The modified Bessel function I0: kiln.numpy.i0 (one implementation), in scipy's dtypes."""
    (x,), dtype = float_operands("i0", x)
    return narrow(knp.i0(x), dtype)


def i1(x):
    """The modified Bessel function I1 (odd in x), by i1e's series; NaN at +-inf as scipy's."""
    (x,), dtype = float_operands("i1", x)
    return narrow(odd_extension(x, _unscaled(x, 1)), dtype)
