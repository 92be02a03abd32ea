"""The Gamma function family: gammaln, digamma, polygamma, zeta, gamma, gammasgn, beta, betaln, factorial,
multigammaln, loggamma, comb, poch."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...transforms.custom import custom_jvp
from ._common import float_operands, horner, narrow

__all__ = ["gammaln", "digamma", "psi", "zeta", "polygamma", "betaln", "gammasgn", "gamma", "beta", "factorial", "multigammaln", "loggamma", "comb", "poch"]


EULER_GAMMA = 0.57721566490153286060651209008240243


def _zeta_minus_one(k: int) -> float:
    """zeta(k) - 1 for k >= 2 to double precision: the sum to N - 1 and the Euler-Maclaurin tail at N = 20."""
    n = 20
    head = math.fsum(j ** -float(k) for j in range(n - 1, 1, -1))
    tail = n ** (1.0 - k) / (k - 1) + 0.5 * n ** -float(k)
    rising, bernoulli_terms = float(k), [(1 / 6, 2), (-1 / 30, 4), (1 / 42, 6), (-1 / 30, 8), (5 / 66, 10)]
    for b, two_j in bernoulli_terms:
        tail += b / math.factorial(two_j) * rising * n ** (-k - two_j + 1.0)
        rising *= (k + two_j - 1) * (k + two_j)
    return head + tail


# lgamma(2 + t) = (1 - gamma) t + sum_{k >= 2} (-1)^k (zeta(k) - 1) / k t^k, used for |t| <= 1/2 (32 terms:
# the k-th is below 4^-k).
_LGAMMA2_COEFFS = [0.0, 1.0 - EULER_GAMMA] + [(-1) ** k * _zeta_minus_one(k) / k for k in range(2, 33)]


# Stirling's series of lgamma(y) - ((y - 1/2) log y - y + log(2 pi)/2) in 1/y, for y >= 10: B_2k / (2k (2k-1) y^(2k-1)).
_STIRLING = [1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400]


def _lgamma_near_two(t):
    return horner(t, _LGAMMA2_COEFFS)


def _lgamma_positive(x):
    """lgamma for x > 0 (0 gives inf): the series about 2 on [1/2, 10) after moving x there by the recurrence
    (every factor positive, so nothing cancels), Stirling's series from 10. The series is evaluated once, at
    the point each branch moved x to."""
    small = knp.less(x, 0.5)  # lgamma(x) = lgamma(x + 2) - log(x) - log1p(x)
    one = knp.logical_and(knp.greater_equal(x, 0.5), knp.less(x, 1.5))  # lgamma(x) = lgamma(x + 1) - log(x)
    mid = knp.logical_and(knp.greater_equal(x, 1.5), knp.less(x, 10.0))  # lgamma(x - n) + log((x-1)...(x-n))
    xm = knp.where(mid, x, 2.0)
    product, shift = 1.0, 0.0
    for j in range(1, 9):
        down = knp.greater_equal(knp.subtract(xm, float(j)), 1.5)
        product = knp.multiply(product, knp.where(down, knp.subtract(xm, float(j)), 1.0))
        shift = knp.add(shift, knp.where(down, 1.0, 0.0))
    xs = knp.where(knp.logical_or(small, one), knp.where(knp.greater(x, 0.0), x, 0.25), 1.0)
    t = knp.where(small, xs, knp.where(one, knp.subtract(xs, 1.0), knp.subtract(knp.subtract(xm, shift), 2.0)))
    big = knp.greater_equal(x, 10.0)
    xb = knp.where(big, x, 10.0)
    # the branches' logarithms (log(x (1 + x)), log(x), log of the product, log(x) for Stirling) as one log
    log_arg = knp.log(knp.where(big, xb, knp.where(small, knp.multiply(xs, knp.add(xs, 1.0)),
                                                   knp.where(one, xs, product))))
    near_two = knp.add(_lgamma_near_two(t), knp.where(knp.logical_or(small, one), knp.negative(log_arg), log_arg))
    w = knp.reciprocal(xb)
    stirling = knp.multiply(w, horner(knp.multiply(w, w), _STIRLING))
    at_big = knp.add(knp.subtract(knp.multiply(knp.subtract(xb, 0.5), log_arg), xb),
                     knp.add(0.5 * math.log(2 * math.pi), stirling))
    at_big = knp.where(knp.isinf(xb), np.inf, at_big)
    return knp.where(knp.equal(x, 0.0), np.inf, knp.where(big, at_big, near_two))


# sin(pi r) = r sum_k s_k r^2k and cos(pi r) = sum_k c_k r^2k for |r| <= 1/2 (Taylor; the first omitted terms are
# below 1e-24): polynomials compile to far less code than the general sin and tan.
_SIN_PI = [(-1) ** k * math.pi ** (2 * k + 1) / math.factorial(2 * k + 1) for k in range(14)]


_COS_PI = [(-1) ** k * math.pi ** (2 * k) / math.factorial(2 * k) for k in range(15)]


def _sin_cos_pi(x):
    """(sin(pi x), cos(pi x)) up to the sign of a whole turn, for finite x: r = x - round(x) is exact, so large
    x lose nothing."""
    r = knp.subtract(x, knp.rint(x))
    r2 = knp.multiply(r, r)
    return knp.multiply(r, horner(r2, _SIN_PI)), horner(r2, _COS_PI)


@custom_jvp
def gammaln64(x):
    negative = knp.less(x, 0.0)
    finite_neg = knp.logical_and(negative, knp.isfinite(x))
    z = knp.where(finite_neg, knp.subtract(1.0, x), knp.abs(x))
    positive = _lgamma_positive(z)
    xn = knp.where(finite_neg, x, -0.5)
    with np.errstate(divide="ignore"):
        reflected = knp.subtract(knp.log(knp.divide(math.pi, knp.abs(_sin_cos_pi(xn)[0]))), positive)
    out = knp.where(finite_neg, reflected, positive)
    out = knp.where(knp.equal(x, -np.inf), -np.inf, out)  # scipy's value
    return knp.where(knp.isnan(x), x, out)


@gammaln64.defjvp
def _gammaln64_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return gammaln64(x), knp.multiply(dx, digamma64(x))


def gammaln(x):
    """log|Gamma(x)|; inf at the poles 0, -1, -2, ...; the derivative is digamma."""
    (x,), dtype = float_operands("gammaln", x)
    return narrow(gammaln64(x), dtype)


# digamma(y) = log y - 1/(2y) - sum_k B_2k / (2k y^2k) for y >= 10, in 1/y^2 (through B_16: the next term is
# below 1e-17 at y = 10).
_DIGAMMA_ASYMPTOTIC = [0.0, -1 / 12, 1 / 120, -1 / 252, 1 / 240, -1 / 132, 691 / 32760, -1 / 12, 3617 / 8160]


# trigamma(y) = 1/y + 1/(2y^2) + sum_k B_2k / y^(2k+1) for y >= 10: the B_2k in 1/y^2, times 1/y.
_TRIGAMMA_ASYMPTOTIC = [0.0, 1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510]


def _shift_to_ten(x, power):
    """(y, s): y = x + n >= 10 for the least n >= 0, and s = sum_{k < n} 1/(x + k)^power (x > 0)."""
    s, y = 0.0, x
    for _ in range(10):
        below = knp.less(y, 10.0)
        ys = knp.where(below, y, 1.0)
        term = knp.reciprocal(ys) if power == 1 else knp.reciprocal(knp.multiply(ys, ys))
        s = knp.add(s, knp.where(below, term, 0.0))
        y = knp.where(below, knp.add(y, 1.0), y)
    return y, s


def _digamma_positive(x):
    y, s = _shift_to_ten(x, 1)
    finite = knp.isfinite(y)
    yf = knp.where(finite, y, 10.0)
    w2 = knp.reciprocal(knp.multiply(yf, yf))
    at_y = knp.add(knp.subtract(knp.log(yf), knp.divide(0.5, yf)), horner(w2, _DIGAMMA_ASYMPTOTIC))
    return knp.subtract(knp.where(finite, at_y, np.inf), s)


@custom_jvp
def digamma64(x):
    negative = knp.less(x, 0.0)
    finite_neg = knp.logical_and(negative, knp.isfinite(x))
    z = knp.where(finite_neg, knp.subtract(1.0, x), knp.where(knp.equal(x, 0.0), 1.0, knp.abs(x)))
    positive = _digamma_positive(z)
    xn = knp.where(finite_neg, x, -0.5)
    r = knp.subtract(xn, knp.rint(xn))
    with np.errstate(divide="ignore", invalid="ignore"):
        sine, cosine = _sin_cos_pi(r)
        reflected = knp.subtract(positive, knp.divide(knp.multiply(cosine, math.pi), sine))
    reflected = knp.where(knp.equal(r, 0.0), np.nan, reflected)
    out = knp.where(finite_neg, reflected, positive)
    zero = knp.equal(x, 0.0)
    with np.errstate(divide="ignore"):
        minus_zero = knp.less(knp.divide(1.0, knp.where(zero, x, 1.0)), 0.0)
    out = knp.where(zero, knp.where(minus_zero, np.inf, -np.inf), out)  # scipy: psi(+-0) = -+inf
    out = knp.where(knp.equal(x, -np.inf), np.nan, out)
    return knp.where(knp.isnan(x), x, out)


@digamma64.defjvp
def _digamma64_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return digamma64(x), knp.multiply(dx, _trigamma64(x))


def _trigamma64(x):
    """polygamma(1, x): the recurrence up to 10, the asymptotic series, and pi^2 / sin^2(pi x) - trigamma(1 - x)
    below 0 (its derivative is that of the composition)."""
    negative = knp.less(x, 0.0)
    z = knp.where(negative, knp.subtract(1.0, x), knp.where(knp.equal(x, 0.0), 1.0, x))
    y, s = _shift_to_ten(z, 2)
    finite = knp.isfinite(y)
    yf = knp.where(finite, y, 10.0)
    w = knp.reciprocal(yf)
    at_y = knp.add(knp.add(w, knp.multiply(0.5, knp.multiply(w, w))),
                   knp.multiply(w, horner(knp.multiply(w, w), _TRIGAMMA_ASYMPTOTIC)))
    positive = knp.add(knp.where(finite, at_y, 0.0), s)
    xn = knp.where(negative, x, -0.5)
    sine = _sin_cos_pi(xn)[0]
    with np.errstate(divide="ignore"):
        reflected = knp.subtract(knp.divide(math.pi ** 2, knp.multiply(sine, sine)), positive)
    out = knp.where(negative, reflected, positive)
    return knp.where(knp.equal(x, 0.0), np.inf, out)


def digamma(x):
    """The logarithmic derivative of Gamma; scipy's values at the poles (psi(+0) = -inf, psi(-0) = inf, NaN at
    negative integers). Its derivative is polygamma(1, x)."""
    (x,), dtype = float_operands("digamma", x)
    return narrow(digamma64(x), dtype)


psi = digamma


_ZETA_DIRECT_TERMS = 12


# B_2j / (2j)!, j = 1..9, for the Euler-Maclaurin tail
_BERNOULLI_OVER_FACTORIAL = [1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160, -691 / 1307674368000,
                             1 / 74724249600, -3617 / 10670622842880000, 43867 / 5109094217170944000]


def _zeta64(s, q):
    """sum_k (q + k)^-s for s > 1: twelve terms directly, then the Euler-Maclaurin tail at a = q + 12
    (a^(1-s)/(s-1) + a^-s/2 + sum_j B_2j/(2j)! s(s+1)...(s+2j-2) a^(-s-2j+1), nine terms); inf at s = 1 and at
    the poles q = 0, -1, -2; NaN for s < 1 and for q < -2 (not implemented there)."""
    s = knp.asarray(s, np.float64) if not hasattr(s, "shape") else s
    total = 0.0
    for k in range(_ZETA_DIRECT_TERMS):
        base = knp.add(q, float(k))
        safe = knp.where(knp.equal(base, 0.0), 1.0, base)
        total = knp.add(total, knp.where(knp.equal(base, 0.0), np.inf, knp.power(safe, knp.negative(s))))
    a = knp.add(q, float(_ZETA_DIRECT_TERMS))
    a = knp.where(knp.greater(a, 0.0), a, 1.0)
    a_to_minus_s = knp.power(a, knp.negative(s))
    tail = knp.add(knp.divide(knp.multiply(a_to_minus_s, a), knp.subtract(s, 1.0)), knp.multiply(a_to_minus_s, 0.5))
    rising, power = s, knp.divide(a_to_minus_s, a)  # s (s+1) ... (s+2j-2), a^(-s-2j+1)
    for j, coefficient in enumerate(_BERNOULLI_OVER_FACTORIAL, start=1):
        tail = knp.add(tail, knp.multiply(knp.multiply(rising, power), coefficient))
        rising = knp.multiply(rising, knp.multiply(knp.add(s, 2.0 * j - 1), knp.add(s, 2.0 * j)))
        power = knp.divide(power, knp.multiply(a, a))
    out = knp.add(total, tail)
    out = knp.where(knp.equal(s, 1.0), np.inf, knp.where(knp.less(s, 1.0), np.nan, out))
    return knp.where(knp.logical_or(knp.less(q, -2.0), knp.isnan(q)), np.nan, out)


def zeta(x, q=None):
    """The Hurwitz zeta function sum_k (q + k)^-x for x > 1 (q=None: the Riemann zeta function, q = 1)."""
    (x, q), dtype = float_operands("zeta", x, 1.0 if q is None else q)
    return narrow(_zeta64(x, q), dtype)


def polygamma(n, x):
    """The n-th derivative of digamma for a static integer n >= 0: digamma, trigamma, and for n >= 2
    (-1)^(n+1) n! zeta(n + 1, x)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative Python integer (the order), got {n!r}")
    (x,), dtype = float_operands("polygamma", x)
    if n == 0:
        return narrow(digamma64(x), dtype)
    if n == 1:
        return narrow(_trigamma64(x), dtype)
    return narrow(knp.multiply((-1.0) ** (n + 1) * math.factorial(n), _zeta64(float(n + 1), x)), dtype)


def stirling_correction(x):
    """lgamma(x) - ((x - 1/2) log x - x + log(2 pi)/2) for x >= 10."""
    w = knp.reciprocal(x)
    return knp.multiply(w, horner(knp.multiply(w, w), _STIRLING))


def betaln64(a, b):
    """log|B(a, b)|. With p = min(a, b) > 0 and q = max(a, b) >= 10, gammaln(p) plus
    lgamma(q) - lgamma(p + q) from Stirling's formula written so that nothing of size q log q cancels:
    -(q - 1/2) log1p(p/q) - p log(p + q) + p + (correction(q) - correction(p + q)). Otherwise
    gammaln(a) + gammaln(b) - gammaln(a + b)."""
    p, q = knp.minimum(a, b), knp.maximum(a, b)
    large = knp.logical_and(knp.greater_equal(q, 10.0), knp.greater(p, 0.0))
    ps, qs = knp.where(large, p, 1.0), knp.where(large, q, 10.0)
    total = knp.add(ps, qs)
    difference = knp.add(knp.subtract(knp.add(knp.negative(knp.multiply(knp.subtract(qs, 0.5),
                                                                          knp.log1p(knp.divide(ps, qs)))),
                                              ps), knp.multiply(ps, knp.log(total))),
                         knp.subtract(stirling_correction(qs), stirling_correction(total)))
    at_large = knp.add(gammaln64(ps), difference)
    at_large = knp.where(knp.isinf(q), -np.inf, at_large)
    plain = knp.subtract(knp.add(gammaln64(a), gammaln64(b)), gammaln64(knp.add(a, b)))
    return knp.where(large, at_large, plain)


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
