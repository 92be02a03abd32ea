"""The Gamma function family: gammaln, digamma, polygamma, zeta, gamma, gammasgn, beta, betaln, factorial,
multigammaln, loggamma, comb, poch."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...lax.special_math import (  # noqa: F401  (EULER_GAMMA, stirling_correction: for the other modules)
    betaln64, digamma64, EULER_GAMMA, gammaln64, polygamma64, stirling_correction, trigamma64, zeta64,
)
from ._common import float_operands, narrow

__all__ = ["gammaln", "digamma", "psi", "zeta", "polygamma", "betaln", "gammasgn", "gamma", "beta", "factorial", "multigammaln", "loggamma", "comb", "poch"]


def gammaln(x):
    """log|Gamma(x)|; inf at the poles 0, -1, -2, ...; the derivative is digamma."""
    (x,), dtype = float_operands("gammaln", x)
    return narrow(gammaln64(x), dtype)


def digamma(x):
    """The logarithmic derivative of Gamma; scipy's values at the poles (psi(+0) = -inf, psi(-0) = inf, NaN at
    negative integers). Its derivative is polygamma(1, x)."""
    (x,), dtype = float_operands("digamma", x)
    return narrow(digamma64(x), dtype)


psi = digamma


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (q + k)^-x for x > 1 (q=None: the Riemann zeta function, q = 1)."""
    (x, q), dtype = float_operands("zeta", x, 1.0 if q is None else q)
    return narrow(zeta64(x, q), dtype)


def polygamma(n, x):
    """The n-th derivative of digamma: for a static integer n >= 0 digamma, trigamma, and for n >= 2
    (-1)^(n+1) n! zeta(n + 1, x); for an array n (as JAX's), elementwise by kiln.lax.polygamma (NaN where n is
    not a whole number >= 0)."""
    if hasattr(n, "shape") and not isinstance(n, np.generic):
        (n, x), dtype = float_operands("polygamma", n, x)
        return narrow(polygamma64(n, x), dtype)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative Python integer (the order), got {n!r}")
    (x,), dtype = float_operands("polygamma", x)
    if n == 0:
        return narrow(digamma64(x), dtype)
    if n == 1:
        return narrow(trigamma64(x), dtype)
    return narrow(knp.multiply((-1.0) ** (n + 1) * math.factorial(n), zeta64(float(n + 1), x)), dtype)


def betaln(a, b):
    """log|B(a, b)|, accurate also where one argument is large and the other small (see betaln64)."""
    (a, b), dtype = float_operands("betaln", a, b)
    return narrow(betaln64(a, b), dtype)


def _gammasgn64(x):
    """The sign of Gamma(x): 1 above 0, alternating between the poles below (-1 on (-1, 0)); +-1 at +-0 (the
    sign of the infinity); NaN at the negative integers, -inf and NaN."""
    floor = knp.floor(knp.where(knp.isfinite(x), x, 0.0))
    odd = knp.not_equal(knp.remainder(floor, 2.0), 0.0)
    negative = knp.where(odd, -1.0, 1.0)
    with np.errstate(divide="ignore"):
        minus_zero = knp.less(knp.divide(1.0, knp.where(knp.equal(x, 0.0), x, 1.0)), 0.0)
    out = knp.where(knp.greater(x, 0.0), 1.0, knp.where(knp.equal(x, floor), np.nan, negative))
    out = knp.where(knp.equal(x, 0.0), knp.where(minus_zero, -1.0, 1.0), out)
    return knp.where(knp.logical_or(knp.isnan(x), knp.equal(x, -np.inf)), np.nan, out)


def gammasgn(x):
    """The sign of the Gamma function (scipy's values at the poles and zeros)."""
    (x,), dtype = float_operands("gammasgn", x)
    return narrow(_gammasgn64(x), dtype)


def _gamma64(x):
    return knp.multiply(_gammasgn64(x), knp.exp(gammaln64(x)))


def gamma(x):
    """Gamma(x) = gammasgn(x) exp(gammaln(x)) (as JAX): the exponential multiplies gammaln's absolute error,
    so the relative error grows to about 1e-13 near the overflow at 171.6."""
    (x,), dtype = float_operands("gamma", x)
    return narrow(_gamma64(x), dtype)


def beta(a, b):
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), as the signs times exp(betaln)."""
    (a, b), dtype = float_operands("beta", a, b)
    sign = knp.multiply(knp.multiply(_gammasgn64(a), _gammasgn64(b)), _gammasgn64(knp.add(a, b)))
    return narrow(knp.multiply(sign, knp.exp(betaln64(a, b))), dtype)


def factorial(n, exact: bool = False):
    """n! = Gamma(n + 1) for real n (0 for n < 0, as scipy); exact=True (integer arithmetic) is not supported,
    as in JAX."""
    if exact:
        raise ValueError("factorial: exact=True is not supported (kiln computes Gamma(n + 1) in floating point)")
    (n,), dtype = float_operands("factorial", n)
    return narrow(knp.where(knp.less(n, 0.0), 0.0, _gamma64(knp.add(n, 1.0))), dtype)


def multigammaln(a, d: int):
    """The log of the multivariate Gamma function of dimension d (a static int):
    d (d - 1) / 4 log(pi) + sum_j gammaln(a - j / 2), j = 0 .. d - 1."""
    if int(d) != d or int(d) < 1:
        raise ValueError(f"multigammaln: d must be a positive integer, got {d!r}")
    (a,), dtype = float_operands("multigammaln", a)
    total = 0.25 * d * (d - 1) * math.log(math.pi)
    for j in range(int(d)):
        total = knp.add(total, gammaln64(knp.subtract(a, 0.5 * j)))
    return narrow(total, dtype)


def loggamma(x):
    """log(Gamma(x)) for real x > 0; NaN elsewhere (JAX's real branch; scipy continues it to complex values)."""
    (x,), dtype = float_operands("loggamma", x)
    return narrow(knp.where(knp.greater(x, 0.0), gammaln64(knp.where(knp.greater(x, 0.0), x, 1.0)), np.nan), dtype)


def comb(N, k, *, exact: bool = False, repetition: bool = False):  # noqa: N803 - scipy's name
    """The binomial coefficient N choose k for real N and k, exp(gammaln(N + 1) - gammaln(k + 1) -
    gammaln(N - k + 1)); 0 unless 0 <= k <= N; repetition=True counts multisets, comb(N + k - 1, k)."""
    if exact:
        raise ValueError("comb: exact=True is not supported (kiln computes with gammaln in floating point)")
    (n, k), dtype = float_operands("comb", N, k)
    if repetition:
        n = knp.subtract(knp.add(n, k), 1.0)
    inside = knp.logical_and(knp.logical_and(knp.greater_equal(k, 0.0), knp.greater_equal(n, 0.0)), knp.less_equal(k, n))
    ns, ks = knp.where(inside, n, 1.0), knp.where(inside, k, 0.0)
    log_value = knp.subtract(knp.subtract(gammaln64(knp.add(ns, 1.0)), gammaln64(knp.add(ks, 1.0))),
                             gammaln64(knp.add(knp.subtract(ns, ks), 1.0)))
    return narrow(knp.where(inside, knp.exp(log_value), 0.0), dtype)


def poch(z, m):
    """The rising factorial Gamma(z + m) / Gamma(z), as the signs times exp(gammaln(z + m) - gammaln(z)): 1 for
    m = 0, 0 where z is a pole and z + m is not (scipy's value); NaN where both are poles."""
    (z, m), dtype = float_operands("poch", z, m)
    zm = knp.add(z, m)
    value = knp.multiply(knp.multiply(_gammasgn64(zm), _gammasgn64(z)), knp.exp(knp.subtract(gammaln64(zm), gammaln64(z))))

    def pole(v):
        return knp.logical_and(knp.less_equal(v, 0.0), knp.equal(v, knp.floor(v)))

    value = knp.where(knp.logical_and(pole(z), knp.logical_not(pole(zm))), 0.0, value)
    return narrow(knp.where(knp.equal(m, 0.0), 1.0, value), dtype)
