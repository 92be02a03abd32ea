"""Functions defined by integrals: sici (the sine and cosine integrals), fresnel (the Fresnel integrals) and
owens_t (Owen's T function). Each computes in float64 with an exact derivative rule."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...lax.control_flow import while_loop
from ...lax.math_prims import erf, erfc
from ...lax.special_math import sin_cos_pi
from ...transforms.custom import custom_jvp
from ._common import EPS, float_operands, horner, MAX_ITERATIONS, narrow, square_exactly
from ._gamma import EULER_GAMMA

__all__ = ["sici", "fresnel", "owens_t"]


# ---- complex arithmetic on (real, imaginary) pairs, for the continued fractions


def _mul(p, q):
    return p[0] * q[0] - p[1] * q[1], p[0] * q[1] + p[1] * q[0]


def _div(p, q):
    """p / q, both parts of q scaled by its larger one first (Smith's rule), so that nothing overflows."""
    big = knp.maximum(knp.abs(q[0]), knp.abs(q[1]))
    c, d = q[0] / big, q[1] / big
    norm = (c * c + d * d) * big
    return (p[0] * c + p[1] * d) / norm, (p[1] * c - p[0] * d) / norm


def _lentz(b0, step, partial):
    """The continued fraction 1 / (b_1 + a_2 / (b_2 + a_3 / (b_3 + ...))) with complex b_k = b0 + (k - 1) step
    (step real) and real a_k = partial(k), by the modified Lentz method in one while_loop until every element
    has converged to a relative 2^-53 (at most MAX_ITERATIONS steps)."""
    zero = knp.zeros_like(b0[0])

    def not_done(state):
        k, _, _, _, _, done = state
        return (k < MAX_ITERATIONS) & ~knp.all(done)

    def body(state):
        k, b, c, d, h, done = state
        a = partial(knp.asarray(k, np.float64))
        b = (b[0] + step, b[1])
        d = _div((knp.ones_like(zero), zero), (a * d[0] + b[0], a * d[1] + b[1]))
        a_over_c = _div((a + zero, zero), c)
        c = (b[0] + a_over_c[0], b[1] + a_over_c[1])
        delta = _mul(c, d)
        new_h = _mul(h, delta)
        h = (knp.where(done, h[0], new_h[0]), knp.where(done, h[1], new_h[1]))
        done = done | (knp.abs(delta[0] - 1.0) + knp.abs(delta[1]) <= EPS)
        return k + 1, b, c, d, h, done

    d0 = _div((knp.ones_like(zero), zero), b0)
    state = (np.int32(2), b0, (knp.full_like(zero, 1e150), zero), d0, d0, knp.zeros_like(zero, dtype=bool))
    return while_loop(not_done, body, state)[4]


# ---- sici


_SI_SERIES = [(-1) ** k / ((2 * k + 1) * math.factorial(2 * k + 1)) for k in range(16)]  # in x^2, times x
_CI_SERIES = [(-1) ** k / (2 * k * math.factorial(2 * k)) for k in range(1, 17)]  # in x^2, times x^2


@custom_jvp
def _sici64(x):
    """(Si(x), Ci(x)): the power series for |x| <= 2; beyond, -E1(i|x|) = Ci + i (Si - pi/2) by its continued
    fraction e^(-ix) / (1 + ix - 1 / (3 + ix - 4 / (5 + ix - ...))). Si is odd; Ci(-x) = Ci(x) (scipy's real
    part), Ci(0) = -inf, Ci(-inf) NaN."""
    ax = knp.abs(x)
    near = ax <= 2.0
    xs = knp.where(near, ax, 1.0)
    x2 = xs * xs
    si_near = xs * horner(x2, _SI_SERIES)
    ci_near = EULER_GAMMA + knp.log(xs) + x2 * horner(x2, _CI_SERIES)
    xf = knp.where(near | ~knp.isfinite(ax), 4.0, ax)
    h = _lentz((knp.ones_like(xf), xf), 2.0, lambda k: -(k - 1.0) * (k - 1.0))
    h = _mul((knp.cos(xf), -knp.sin(xf)), h)
    si_far, ci_far = math.pi / 2 + h[1], -h[0]
    si = knp.where(near, si_near, si_far)
    ci = knp.where(near, ci_near, ci_far)
    si = knp.where(knp.isinf(ax), math.pi / 2, si)
    ci = knp.where(knp.isinf(ax), 0.0, knp.where(ax == 0.0, -np.inf, ci))
    si = knp.where(x < 0, -si, si)
    ci = knp.where(x == -np.inf, np.nan, ci)
    return knp.where(knp.isnan(x), x, si), knp.where(knp.isnan(x), x, ci)


@_sici64.defjvp
def _sici64_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    safe = knp.where(x == 0.0, 1.0, x)
    return _sici64(x), (dx * knp.where(x == 0.0, 1.0, knp.sin(safe) / safe), dx * knp.cos(x) / x)


def sici(x):
    """(Si(x), Ci(x)): the sine integral int_0^x sin(t)/t dt and the cosine integral
    gamma + log|x| + int_0^x (cos(t) - 1)/t dt (scipy's real values for x < 0)."""
    (x,), dtype = float_operands("sici", x)
    si, ci = _sici64(x)
    return narrow(si, dtype), narrow(ci, dtype)


# ---- fresnel


# with t = pi x^2 / 2: C = x sum_k (-1)^k t^2k / ((2k)! (4k + 1)), S = x t sum_k (-1)^k t^2k / ((2k+1)! (4k + 3))
_C_SERIES = [(-1) ** k / (math.factorial(2 * k) * (4 * k + 1)) for k in range(16)]
_S_SERIES = [(-1) ** k / (math.factorial(2 * k + 1) * (4 * k + 3)) for k in range(16)]


def _sin_cos_half_pi_square(x):
    """(sin(pi x^2 / 2), cos(pi x^2 / 2)) with x^2 / 2 reduced exactly: x^2 = hi + lo (exact), and the whole
    turns n = round(hi / 2) leave nothing behind, so large x keep their accuracy."""
    hi, lo = square_exactly(x)
    u = hi * 0.5
    n = knp.rint(u)
    sine, cosine = sin_cos_pi(u - n + lo * 0.5)
    odd = knp.remainder(n, 2.0) == 1.0
    return knp.where(odd, -sine, sine), knp.where(odd, -cosine, cosine)


@custom_jvp
def _fresnel64(x):
    """(S(x), C(x)): their power series for |x| < 1.5; beyond, from erfc of a complex argument by its continued
    fraction 1 / (1 - i pi x^2 - 2 / (5 - i pi x^2 - 12 / (9 - ...))) (Numerical Recipes' frenel). Odd in x."""
    ax = knp.abs(x)
    near = ax < 1.5
    xs = knp.where(near, ax, 1.0)
    t = xs * xs * (math.pi / 2)
    c_near = xs * horner(t * t, _C_SERIES)
    s_near = xs * t * horner(t * t, _S_SERIES)
    xf = knp.where(near | knp.isinf(ax), 2.0, ax)
    h = _lentz((knp.ones_like(xf), -math.pi * xf * xf), 4.0, lambda k: -(2 * k - 3.0) * (2 * k - 2.0))
    h = _mul(h, (xf, -xf))
    sine, cosine = _sin_cos_half_pi_square(xf)
    rest = _mul((cosine, sine), h)
    one_minus = (1.0 - rest[0], -rest[1])
    c_far, s_far = 0.5 * (one_minus[0] - one_minus[1]), 0.5 * (one_minus[0] + one_minus[1])
    s = knp.where(near, s_near, knp.where(knp.isinf(ax), 0.5, s_far))
    c = knp.where(near, c_near, knp.where(knp.isinf(ax), 0.5, c_far))
    return knp.where(x < 0, -s, s), knp.where(x < 0, -c, c)


@_fresnel64.defjvp
def _fresnel64_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    sine, cosine = _sin_cos_half_pi_square(x)
    return _fresnel64(x), (dx * sine, dx * cosine)


def fresnel(x):
    """(S(x), C(x)): the Fresnel integrals int_0^x sin(pi t^2 / 2) dt and int_0^x cos(pi t^2 / 2) dt."""
    (x,), dtype = float_operands("fresnel", x)
    s, c = _fresnel64(x)
    return narrow(s, dtype), narrow(c, dtype)


# ---- owens_t


_GAUSS_NODES, _GAUSS_WEIGHTS = np.polynomial.legendre.leggauss(48)
_TAIL = 9.0  # exp(-h^2 x^2 / 2) is below 3e-18 of its peak beyond x = 9 / h


def _owens_t_direct(h, a):
    """T(h, a) for h >= 0 and 0 <= a <= 1: (1 / 2 pi) int_0^b exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx by
    48-point Gauss-Legendre, the range cut at b = min(a, 9 / h), where the integrand has fallen below 3e-18 of
    its peak, so that the integrand is a smooth bump over the whole range."""
    b = knp.minimum(a, _TAIL / knp.maximum(h, 1e-300))
    total = 0.0
    for node, weight in zip(_GAUSS_NODES, _GAUSS_WEIGHTS):
        x = b * (0.5 * (node + 1.0))
        one_x2 = 1.0 + x * x
        total = total + weight * knp.exp(-0.5 * h * h * one_x2) / one_x2
    return total * b * (0.25 / math.pi)


def _upper_normal(x):
    return 0.5 * erfc(x * (1 / math.sqrt(2.0)))


@custom_jvp
def _owens_t64(h, a):
    """T(h, a): even in h, odd in a; for |a| <= 1 directly, for |a| > 1 by Owen's identity
    T(h, a) = Q(h)/2 + Q(ah)/2 - Q(h) Q(ah) - T(ah, 1/a) (h, a >= 0; Q the upper normal tail)."""
    ah, aa = knp.abs(h), knp.abs(a)
    small = aa <= 1.0
    direct = _owens_t_direct(ah, knp.where(small, aa, 0.0))
    ai = knp.where(small | knp.isinf(aa), 1.0, aa)
    q_h, q_ah = _upper_normal(ah), _upper_normal(ah * ai)
    reflected = 0.5 * q_h + 0.5 * q_ah - q_h * q_ah - _owens_t_direct(ah * ai, 1.0 / ai)
    reflected = knp.where(knp.isinf(aa), 0.5 * q_h, reflected)
    value = knp.where(small, direct, reflected)
    value = knp.where(a < 0, -value, value)
    return knp.where(knp.isnan(h) | knp.isnan(a), np.nan, value)


@_owens_t64.defjvp
def _owens_t64_jvp(primals, tangents):
    """dT/dh = -phi(h) erf(a h / sqrt 2) / 2, dT/da = exp(-h^2 (1 + a^2) / 2) / (2 pi (1 + a^2))."""
    (h, a), (dh, da) = primals, tangents
    density = knp.exp(-0.5 * h * h) * (1 / math.sqrt(2 * math.pi))
    d_h = -0.5 * density * erf(a * h * (1 / math.sqrt(2.0)))
    one_a2 = 1.0 + a * a
    d_a = knp.exp(-0.5 * h * h * one_a2) / (2 * math.pi * one_a2)
    return _owens_t64(h, a), dh * d_h + da * d_a


def owens_t(h, a):
    """Owen's T function T(h, a) = (1 / 2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx."""
    (h, a), dtype = float_operands("owens_t", h, a)
    return narrow(_owens_t64(h, a), dtype)
