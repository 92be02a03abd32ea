"""sph_harm_y: the spherical harmonics Y_n^m(theta, phi) of scipy.special (scipy >= 1.15) and JAX.

theta is the polar angle (colatitude), phi the azimuth. The fully normalized associated Legendre values
P_l^|m|(cos theta) sqrt((2l + 1)/(4 pi) (l - |m|)!/(l + |m|)!) (Condon-Shortley phase included) come from
the stable recurrences in l for every l, |m| <= n_max (no factorials, so no overflow at high degree):
P_0^0 = 1/sqrt(4 pi), P_m^m = -sqrt((2m + 1)/(2m)) sin(theta) P_(m-1)^(m-1), P_(m+1)^m = sqrt(2m + 3)
cos(theta) P_m^m, P_l^m = a_lm (cos(theta) P_(l-1)^m - P_(l-2)^m / a_(l-1)m), a_lm = sqrt((4l^2 - 1)/(l^2 - m^2));
each element then picks its (n, |m|) from that table, times exp(i m phi) and (-1)^m for m < 0. The table is
built for n_max = max(n) when n is concrete; a traced n needs n_max (JAX's argument). |m| > n gives 0.
"""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...core import dtypes
from ...core.errors import ConcretizationError
from ...core.trace import Tracer, is_eager
from ...lax.complex_prims import complex as make_complex
from ...numpy._base import aval, broadcast_all, convert

__all__ = ["sph_harm_y"]


def _concrete(v):
    """v's value, or None when it is only known when the compiled program runs."""
    if not isinstance(v, Tracer):
        return np.asarray(v)
    try:
        return np.asarray(v.concrete_value())
    except ConcretizationError:
        return None


def _legendre_table(cos_t, sin_t, n_max):
    """{(l, m): normalized P_l^m(cos theta)} for 0 <= m <= l <= n_max."""
    table = {(0, 0): knp.full_like(cos_t, 1.0 / math.sqrt(4 * math.pi))}
    for m in range(n_max + 1):
        if m > 0:
            table[(m, m)] = knp.multiply(table[(m - 1, m - 1)], knp.multiply(sin_t, -math.sqrt((2 * m + 1) / (2 * m))))
        if m + 1 <= n_max:
            table[(m + 1, m)] = knp.multiply(table[(m, m)], knp.multiply(cos_t, math.sqrt(2 * m + 3)))
        for ell in range(m + 2, n_max + 1):
            a = math.sqrt((4 * ell * ell - 1) / (ell * ell - m * m))
            a_prev = math.sqrt((4 * (ell - 1) ** 2 - 1) / ((ell - 1) ** 2 - m * m))
            table[(ell, m)] = knp.multiply(knp.subtract(knp.multiply(cos_t, table[(ell - 1, m)]),
                                                        knp.divide(table[(ell - 2, m)], a_prev)), a)
    return table


def sph_harm_y(n, m, theta, phi, diff_n=0, n_max=None):
    """scipy.special.sph_harm_y(n, m, theta, phi): Y_n^m at polar angle theta and azimuth phi, complex
    (complex64 for float32 angles, complex128 otherwise). n_max bounds the degree when n is traced."""
    if diff_n != 0:
        raise NotImplementedError(f"sph_harm_y: only diff_n=0 is supported, got diff_n={diff_n}")
    n_int, m_int = knp.asarray(n), knp.asarray(m)
    for name, v in (("n", n_int), ("m", m_int)):
        if not (dtypes.is_int(aval(v).dtype) or dtypes.is_bool(aval(v).dtype)):
            raise TypeError(f"sph_harm_y: {name} must be an integer array, got dtype {aval(v).dtype}")
    theta, phi = knp.asarray(theta), knp.asarray(phi)
    real = np.dtype(np.float32)
    for v in (theta, phi):
        dt = np.dtype(aval(v).dtype)
        if (dtypes.is_float(dt) and dt.itemsize == 8) or (not dtypes.is_float(dt) and
                                                          (is_eager() or not aval(v).weak_type)):
            real = np.dtype(np.float64)
    if n_max is None:
        concrete = _concrete(n_int)
        if concrete is None:
            raise ValueError("sph_harm_y: n is traced; pass n_max, the largest degree (a Python int), as in JAX")
        n_max = int(concrete.max(initial=0))
    n_max = int(n_max)
    if n_max < 0:
        raise ValueError(f"sph_harm_y: n_max must be non-negative, got {n_max}")
    n_int, m_int, theta, phi = broadcast_all(n_int, m_int, convert(theta, np.float64), convert(phi, np.float64),
                                             where="sph_harm_y")
    table = _legendre_table(knp.cos(theta), knp.sin(theta), n_max)
    width = n_max + 1
    keys = sorted(table)
    stacked = knp.stack([table[k] for k in keys])
    position = np.zeros(width * width, np.int64)
    for i, (ell, mm) in enumerate(keys):
        position[ell * width + mm] = i
    abs_m = knp.abs(m_int)
    valid = knp.logical_and(knp.logical_and(knp.greater_equal(n_int, 0), knp.less_equal(n_int, n_max)),
                            knp.less_equal(abs_m, n_int))
    flat = knp.where(valid, knp.add(knp.multiply(n_int, width), abs_m), 0)
    index = knp.take(position, convert(flat, np.int64))
    p = knp.take_along_axis(stacked, index[None], axis=0)[0]
    sign = knp.where(knp.logical_and(knp.less(m_int, 0), knp.equal(knp.remainder(abs_m, 2), 1)), -1.0, 1.0)
    p = knp.where(valid, knp.multiply(p, sign), 0.0)
    angle = knp.multiply(convert(m_int, np.float64), phi)
    y = make_complex(knp.multiply(p, knp.cos(angle)), knp.multiply(p, knp.sin(angle)))
    return convert(y, np.complex64 if real == np.float32 else np.complex128)
