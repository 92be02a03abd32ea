"""Bessel functions: the modified ones of the first kind of orders 0 and 1 (i0, i0e, i1, i1e) and those of the
first kind of integer orders 0 .. v (bessel_jn)."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ...lax.special_math import odd_extension, bessel_i_scaled
from ._common import float_operands, narrow

__all__ = ["i0e", "i1e", "i0", "i1", "bessel_jn"]


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


_RESCALE_ABOVE = 1e250  # the backward recurrence's values are scaled down past this, so that they never overflow


def bessel_jn(z, *, v: int, n_iter: int = 50):
    """J_0(z) .. J_v(z), the Bessel functions of the first kind of integer order, stacked on a new first axis
    (shape (v + 1, *z.shape)), as jax.scipy.special.bessel_jn: Miller's backward recurrence
    J_(k-1) = 2k/z J_k - J_(k+1) from k = n_iter (static; accurate where n_iter is well above |z|: the default
    50 for |z| up to about 25), normalized by J_0 + 2 (J_2 + J_4 + ...) = 1; kiln rescales the recurrence so
    that small |z| does not overflow, and J_n(0) is 1 for n = 0, else 0."""
    v = int(np.asarray(v))
    n_iter = int(n_iter)
    if v < 0 or n_iter < v:
        raise ValueError(f"bessel_jn: need 0 <= v <= n_iter, got v={v}, n_iter={n_iter}")
    (z,), dtype = float_operands("bessel_jn", z)
    zero = z == 0.0
    zs = knp.where(zero, 1.0, z)
    f0, f1 = knp.zeros_like(zs), knp.full_like(zs, 1e-16)
    norm, kept = knp.zeros_like(zs), [None] * (v + 1)
    for k in range(n_iter, -1, -1):
        f = 2.0 * (k + 1.0) * f1 / zs - f0
        if k % 2 == 0:
            norm = norm + 2.0 * f
        if k <= v:
            kept[k] = f
        big = knp.abs(f) > _RESCALE_ABOVE
        scale = knp.where(big, 1.0 / _RESCALE_ABOVE, 1.0)
        f0, f = f1 * scale, f * scale
        norm = norm * scale
        kept = [None if e is None else e * scale for e in kept]
        f1 = f
    values = knp.stack([e / (norm - f) for e in kept])
    at_zero = np.zeros((v + 1,) + (1,) * knp.ndim(z))
    at_zero[0] = 1.0
    return narrow(knp.where(zero, at_zero, values), dtype)
