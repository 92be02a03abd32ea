"""The exponential integrals: expn, exp1, expi."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...lax.control_flow import while_loop
from ...transforms.custom import custom_jvp
from ._common import EPS, float_operands, horner, MAX_ITERATIONS, narrow
from ._gamma import digamma64, EULER_GAMMA, gammaln64

__all__ = ["expn", "exp1", "expi"]


_EN_SERIES_TERMS = 26  # x <= 1: the k-th term is below 1 / k! (1e-26 at k = 26)


def _en_series(n, x):
    """E_n(x) for 0 < x <= 1 and integer n >= 1: (-x)^(n-1) / (n-1)! (digamma(n) - log x) -
    sum_{k != n-1} (-x)^k / ((k - n + 1) k!)."""
    total = 0.0
    for k in range(_EN_SERIES_TERMS):
        denominator = knp.subtract(float(k + 1), n)  # k - n + 1
        skip = knp.equal(denominator, 0.0)
        term = knp.divide(knp.power(knp.negative(x), float(k)) if k else 1.0,
                          knp.multiply(knp.where(skip, 1.0, denominator), float(math.factorial(k))))
        total = knp.add(total, knp.where(skip, 0.0, term))
    lead = knp.divide(knp.power(knp.negative(x), knp.subtract(n, 1.0)), knp.exp(gammaln64(n)))
    return knp.subtract(knp.multiply(lead, knp.subtract(digamma64(n), knp.log(x))), total)


def _en_fraction(n, x):
    """E_n(x) for x > 1: e^-x / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...))) by the modified
    Lentz method in one while_loop until every element converged (at most 2000 steps)."""
    tiny = 1e-300

    def not_done(state):
        i, _, _, _, done = state
        return knp.logical_and(knp.less(i, MAX_ITERATIONS), knp.logical_not(knp.all(done)))

    def step(state):
        i, c, d, f, done = state
        fi = knp.asarray(i, np.float64)
        a_i = knp.negative(knp.multiply(fi, knp.add(knp.subtract(n, 1.0), fi)))
        b_i = knp.add(knp.add(x, n), knp.multiply(fi, 2.0))
        d = knp.reciprocal(knp.where(knp.less(knp.abs(knp.add(knp.multiply(a_i, d), b_i)), tiny), tiny,
                                     knp.add(knp.multiply(a_i, d), b_i)))
        c = knp.add(b_i, knp.divide(a_i, c))
        c = knp.where(knp.less(knp.abs(c), tiny), tiny, c)
        delta = knp.multiply(c, d)
        f = knp.where(done, f, knp.multiply(f, delta))  # converged elements stay as they are
        return i + 1, c, d, f, knp.logical_or(done, knp.less_equal(knp.abs(knp.subtract(delta, 1.0)), EPS))

    b0 = knp.add(x, n)
    state = (np.int32(1), knp.full_like(x, 1.0 / tiny), knp.reciprocal(b0), knp.reciprocal(b0),
             knp.zeros_like(x, dtype=bool))
    _, _, _, f, _ = while_loop(not_done, step, state)
    return knp.multiply(f, knp.exp(knp.negative(x)))


@custom_jvp
def _expn64(n, x):
    return _expn_value(n, x)


@_expn64.defjvp
def _expn64_jvp(primals, tangents):
    """dE_n/dx = -E_(n-1)(x) (dE_0/dx = -E_0 (1 + 1/x)); n is an integer order, not differentiated (as JAX)."""
    (n, x), (_, dx) = primals, tangents
    safe_x = knp.where(knp.greater(x, 0.0), x, 1.0)
    lower = knp.where(knp.greater_equal(n, 1.0), _expn_value(knp.maximum(knp.subtract(n, 1.0), 0.0), x),
                      knp.multiply(_expn_value(n, x), knp.add(1.0, knp.reciprocal(safe_x))))
    return _expn64(n, x), knp.multiply(dx, knp.negative(lower))


def _expn_value(n, x):
    """E_n(x) for integer n >= 0 and x >= 0 with scipy's values: E_0 = e^-x / x, x = 0 gives 1/(n-1) (inf for
    n <= 1), NaN for n < 0 or x < 0."""
    integer_n = knp.logical_and(knp.greater_equal(n, 0.0), knp.equal(n, knp.floor(n)))
    positive = knp.logical_and(knp.greater(x, 0.0), integer_n)
    ns = knp.where(knp.logical_and(positive, knp.greater_equal(n, 1.0)), n, 1.0)
    small = knp.less_equal(x, 1.0)
    xs = knp.where(knp.logical_and(positive, small), x, 0.5)
    xf = knp.where(knp.logical_and(positive, knp.logical_not(small)), x, 2.0)
    value = knp.where(small, _en_series(ns, xs), _en_fraction(ns, xf))
    safe_x = knp.where(positive, x, 1.0)
    value = knp.where(knp.equal(n, 0.0), knp.divide(knp.exp(knp.negative(safe_x)), safe_x), value)
    value = knp.where(knp.isinf(x), 0.0, value)
    at_zero = knp.where(knp.greater(n, 1.0), knp.reciprocal(knp.maximum(knp.subtract(n, 1.0), 1.0)), np.inf)
    out = knp.where(positive, value, knp.where(knp.logical_and(knp.equal(x, 0.0), integer_n), at_zero, np.nan))
    return knp.where(knp.logical_and(knp.isinf(x), integer_n), 0.0, out)


def expn(n, x):
    """The generalized exponential integral E_n(x) = integral_1^inf e^(-x t) / t^n dt for integer n >= 0 (a
    non-integer n gives NaN; scipy truncates it): the series up to x = 1, the continued fraction beyond
    (relative error up to 1e-14 just above 1, where the fraction needs most steps)."""
    (n, x), dtype = float_operands("expn", n, x)
    return narrow(_expn64(n, x), dtype)


def exp1(x):
    """E_1(x) = integral_x^inf e^-t / t dt for x >= 0 (inf at 0, NaN below, as scipy's real exp1)."""
    (x,), dtype = float_operands("exp1", x)
    return narrow(_expn64(knp.ones_like(x), x), dtype)


_EI_SERIES_BELOW = 40.0


_EI_SERIES_TERMS = 110  # x < 40: positive terms x^k / (k k!), the last below 1e-18 of the sum


_EI_ASYMPTOTIC_TERMS = 40  # x >= 40: e^x / x sum_k k! / x^k, smallest term near k = 40 (4e-18)


def expi(x):
    """The exponential integral Ei(x): -E_1(-x) below 0; above, gamma + log x + sum x^k / (k k!) up to 40 and the
    asymptotic series e^x / x sum k! / x^k beyond (inf from 716, as scipy). Its derivative is e^x / x."""
    (x,), dtype = float_operands("expi", x)
    return narrow(_expi64(x), dtype)


@custom_jvp
def _expi64(x):
    negative = knp.less(x, 0.0)
    below = knp.negative(_expn64(knp.ones_like(x), knp.where(negative, knp.negative(x), 1.0)))
    near = knp.logical_and(knp.greater(x, 0.0), knp.less(x, _EI_SERIES_BELOW))
    xs = knp.where(near, x, 1.0)
    series = horner(xs, [0.0] + [1.0 / (k * math.factorial(k)) for k in range(1, _EI_SERIES_TERMS)])
    at_near = knp.add(knp.add(EULER_GAMMA, knp.log(xs)), series)
    far = knp.greater_equal(x, _EI_SERIES_BELOW)
    xf = knp.where(far, x, _EI_SERIES_BELOW)
    asymptotic = horner(knp.reciprocal(xf), [float(math.factorial(k)) for k in range(_EI_ASYMPTOTIC_TERMS)])
    half = knp.exp(knp.multiply(xf, 0.5))
    at_far = knp.multiply(knp.multiply(knp.divide(half, xf), half), asymptotic)
    out = knp.where(negative, below, knp.where(near, at_near, knp.where(knp.equal(x, 0.0), -np.inf, at_far)))
    return knp.where(knp.isnan(x), x, out)


@_expi64.defjvp
def _expi64_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _expi64(x), knp.multiply(dx, knp.divide(knp.exp(x), x))
