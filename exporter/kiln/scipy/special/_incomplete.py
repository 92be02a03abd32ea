"""The regularized incomplete gamma and beta functions, by power series and continued fractions iterated in one
while_loop: gammainc, gammaincc, betainc."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...lax.control_flow import while_loop
from ...transforms.custom import custom_jvp
from ._common import central_difference, EPS, float_operands, horner, MAX_ITERATIONS, narrow
from ._gamma import betaln64, gammaln64, stirling_correction

__all__ = ["gammainc", "gammaincc", "betainc"]


_LOG1PMX_TERMS = 40  # |t| <= 1/4: the k-th term is below 4^-k / k


def _log1p_minus(t):
    """log1p(t) - t, by its series -t^2/2 + t^3/3 - ... for |t| <= 1/4 (no cancellation), directly outside
    (where it loses at most 8 ulp)."""
    near = knp.less_equal(knp.abs(t), 0.25)
    tn = knp.where(near, t, 0.0)
    series = knp.multiply(knp.multiply(tn, tn), horner(tn, [(-1) ** (k + 1) / (k + 2) for k in range(_LOG1PMX_TERMS)]))
    tf = knp.where(near, 1.0, t)
    return knp.where(near, series, knp.subtract(knp.log1p(tf), tf))


def _log_gamma_density_front(a, x):
    """log(x^a e^-x / Gamma(a)) = a log x - x - lgamma(a). For a >= 10, with Stirling's lgamma, as
    a (log1p(t) - t) + log(a)/2 - log(2 pi)/2 - correction(a), t = (x - a)/a: the terms of size a log a, which
    cancel where x is near a, never form (a log x - x - lgamma(a) lost eps * a log a: 1e-12 at a = 1000)."""
    large = knp.greater_equal(a, 10.0)
    al = knp.where(large, a, 10.0)
    t = knp.divide(knp.subtract(x, al), al)
    stirling = knp.subtract(knp.add(knp.multiply(al, _log1p_minus(t)), knp.multiply(knp.log(al), 0.5)),
                            knp.add(0.5 * math.log(2 * math.pi), stirling_correction(al)))
    direct = knp.subtract(knp.subtract(knp.multiply(a, knp.log(x)), x), gammaln64(a))
    return knp.where(large, stirling, direct)


def _gammainc_core(a, x):
    """(P(a, x), Q(a, x)) for a > 0, x > 0 finite. Where x < a + 1, P by its power series
    x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1) ... (a + n)) and Q = 1 - P; elsewhere Q by Legendre's
    continued fraction x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)), evaluated
    by the modified Lentz method, and P = 1 - Q. Both iterate in one while_loop until every element has
    converged to a relative 2^-53 (at most 2000 steps: enough for a up to about 10^6)."""
    series = knp.less(x, knp.add(a, 1.0))
    tiny = 1e-300

    def not_done(state):
        n, _, _, _, _, _, done = state
        return knp.logical_and(knp.less(n, MAX_ITERATIONS), knp.logical_not(knp.all(done)))

    def step(state):
        n, term, total, f, c, d, done = state
        nf = knp.asarray(n, np.float64)
        # series
        term = knp.multiply(term, knp.divide(x, knp.add(a, nf)))
        total = knp.where(done, total, knp.add(total, term))  # converged elements stay as they are
        series_done = knp.less_equal(knp.abs(term), knp.multiply(knp.abs(total), EPS))
        # continued fraction: b_n = x + 2n + 1 - a, a_n = -n (n - a)
        b_n = knp.add(knp.subtract(x, a), knp.add(knp.multiply(nf, 2.0), 1.0))
        a_n = knp.negative(knp.multiply(nf, knp.subtract(nf, a)))
        d = knp.add(b_n, knp.multiply(a_n, d))
        d = knp.reciprocal(knp.where(knp.less(knp.abs(d), tiny), tiny, d))
        c = knp.add(b_n, knp.divide(a_n, c))
        c = knp.where(knp.less(knp.abs(c), tiny), tiny, c)
        delta = knp.multiply(c, d)
        f = knp.where(done, f, knp.multiply(f, delta))
        fraction_done = knp.less_equal(knp.abs(knp.subtract(delta, 1.0)), EPS)
        done = knp.logical_or(done, knp.where(series, series_done, fraction_done))
        return n + 1, term, total, f, c, d, done

    ones = knp.ones_like(x)
    b0 = knp.add(knp.subtract(x, a), 1.0)
    f0 = knp.where(knp.less(knp.abs(b0), tiny), tiny, b0)
    state = (np.int32(1), ones, ones, f0, f0, knp.zeros_like(x), knp.zeros_like(x, dtype=bool))
    _, _, total, f, _, _, _ = while_loop(not_done, step, state)
    log_front = _log_gamma_density_front(a, x)  # log(x^a e^-x / Gamma(a))
    p_series = knp.multiply(knp.exp(knp.subtract(log_front, knp.log(a))), total)  # Gamma(a + 1) = a Gamma(a)
    q_fraction = knp.divide(knp.exp(log_front), f)
    p = knp.where(series, p_series, knp.subtract(1.0, q_fraction))
    q = knp.where(series, knp.subtract(1.0, p_series), q_fraction)
    return p, q


def _gammainc_both(a, x):
    """(P, Q) with scipy's values outside the core's domain: x = 0 gives (0, 1), x = inf (1, 0), a = 0 with
    x > 0 (1, 0), a < 0, x < 0 or NaN give NaN."""
    inside = knp.logical_and(knp.logical_and(knp.greater(a, 0.0), knp.greater(x, 0.0)),
                             knp.logical_and(knp.isfinite(x), knp.isfinite(a)))
    p, q = _gammainc_core(knp.where(inside, a, 1.0), knp.where(inside, x, 1.0))
    zero_x = knp.logical_and(knp.equal(x, 0.0), knp.greater(a, 0.0))
    full = knp.logical_or(knp.logical_and(knp.equal(a, 0.0), knp.greater(x, 0.0)),
                          knp.logical_and(knp.equal(x, np.inf), knp.logical_and(knp.greater(a, 0.0), knp.isfinite(a))))
    none = knp.logical_and(knp.equal(a, np.inf), knp.greater_equal(x, 0.0))
    p = knp.where(inside, p, knp.where(zero_x | none, 0.0, knp.where(full, 1.0, np.nan)))
    q = knp.where(inside, q, knp.where(zero_x | none, 1.0, knp.where(full, 0.0, np.nan)))
    return p, q


def _d_dx_gammainc(a, x):
    """x^(a-1) e^-x / Gamma(a), the derivative of P in x."""
    safe = knp.where(knp.greater(x, 0.0), x, 1.0)
    value = knp.exp(knp.subtract(knp.subtract(knp.multiply(knp.subtract(a, 1.0), knp.log(safe)), safe), gammaln64(a)))
    return knp.where(knp.greater(x, 0.0), value, 0.0)


def _d_da_gammainc(a, x):
    """dP/da by a central difference in float64 with step 1e-5 max(a, 1) (relative accuracy about 1e-9)."""
    h = knp.multiply(knp.maximum(a, 1.0), 1e-5)
    up, _ = _gammainc_both(knp.add(a, h), x)
    down, _ = _gammainc_both(knp.subtract(a, h), x)
    return knp.divide(knp.subtract(up, down), knp.multiply(h, 2.0))


@custom_jvp
def _gammainc64(a, x):
    return _gammainc_both(a, x)[0]


@_gammainc64.defjvp
def _gammainc64_jvp(primals, tangents):
    (a, x), (da, dx) = primals, tangents
    dp = knp.add(knp.multiply(dx, _d_dx_gammainc(a, x)), knp.multiply(da, _d_da_gammainc(a, x)))
    return _gammainc64(a, x), dp


@custom_jvp
def _gammaincc64(a, x):
    return _gammainc_both(a, x)[1]


@_gammaincc64.defjvp
def _gammaincc64_jvp(primals, tangents):
    (a, x), (da, dx) = primals, tangents
    dp = knp.add(knp.multiply(dx, _d_dx_gammainc(a, x)), knp.multiply(da, _d_da_gammainc(a, x)))
    return _gammaincc64(a, x), knp.negative(dp)


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x) = gamma(a, x) / Gamma(a). The derivative in x
    is exact; the one in a is a float64 central difference (relative accuracy about 1e-9)."""
    (a, x), dtype = float_operands("gammainc", a, x)
    return narrow(_gammainc64(a, x), dtype)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x), accurate where it is small."""
    (a, x), dtype = float_operands("gammaincc", a, x)
    return narrow(_gammaincc64(a, x), dtype)


def _betainc_fraction(a, b, x, y):
    """I_x(a, b) for x < (a + 1) / (a + b + 2) (where the continued fraction converges fast), y = 1 - x given
    exactly: x^a y^b / (a B(a, b)) / (1 + d_1 / (1 + d_2 / (1 + ...))), d_2m+1 = -(a + m)(a + b + m) x /
    ((a + 2m)(a + 2m + 1)), d_2m = m (b - m) x / ((a + 2m - 1)(a + 2m)), by the modified Lentz method in one
    while_loop (two partial fractions a step) until every element has converged (at most 2000 steps)."""
    tiny = 1e-300

    def clamp_tiny(v):
        return knp.where(knp.less(knp.abs(v), tiny), tiny, v)

    def fold(d, c, f, coefficient):
        d = knp.reciprocal(clamp_tiny(knp.add(1.0, knp.multiply(coefficient, d))))
        c = clamp_tiny(knp.add(1.0, knp.divide(coefficient, c)))
        delta = knp.multiply(c, d)
        return d, c, knp.multiply(f, delta), delta

    def not_done(state):
        m, _, _, _, done = state
        return knp.logical_and(knp.less(m, MAX_ITERATIONS), knp.logical_not(knp.all(done)))

    def step(state):
        m, d, c, f_in, done = state
        f = f_in
        mf = knp.asarray(m, np.float64)
        two_m = knp.multiply(mf, 2.0)
        even = knp.divide(knp.multiply(knp.multiply(mf, knp.subtract(b, mf)), x),
                          knp.multiply(knp.add(knp.subtract(a, 1.0), two_m), knp.add(a, two_m)))
        d, c, f, _ = fold(d, c, f, even)
        odd = knp.negative(knp.divide(knp.multiply(knp.multiply(knp.add(a, mf), knp.add(knp.add(a, b), mf)), x),
                                      knp.multiply(knp.add(a, two_m), knp.add(knp.add(a, two_m), 1.0))))
        d, c, f, delta = fold(d, c, f, odd)
        f = knp.where(done, f_in, f)  # converged elements stay as they are
        done = knp.logical_or(done, knp.less_equal(knp.abs(knp.subtract(delta, 1.0)), EPS))
        return m + 1, d, c, f, done

    first = knp.negative(knp.divide(knp.multiply(knp.add(a, b), x), knp.add(a, 1.0)))  # d_1
    d0 = knp.reciprocal(clamp_tiny(knp.add(1.0, first)))
    # Lentz's start, the fraction's value f and D both 1 / (1 + d_1), C = 1
    state = (np.int32(1), d0, knp.ones_like(x), d0, knp.zeros_like(x, dtype=bool))
    _, _, _, f, _ = while_loop(not_done, step, state)
    log_front = knp.subtract(knp.add(knp.multiply(a, knp.log(x)), knp.multiply(b, knp.log(y))),
                             knp.add(knp.log(a), betaln64(a, b)))
    return knp.multiply(knp.exp(log_front), f)


def _betainc_both(a, b, x, y):
    """I_x(a, b) for a, b > 0 and x in [0, 1] with y = 1 - x, from the side where the continued fraction
    converges: 1 - I_y(b, a) for x > (a + 1) / (a + b + 2). scipy's values at the edges; NaN outside."""
    inside = knp.logical_and(knp.logical_and(knp.greater(a, 0.0), knp.greater(b, 0.0)),
                             knp.logical_and(knp.greater(x, 0.0), knp.greater(y, 0.0)))
    inside = knp.logical_and(inside, knp.logical_and(knp.isfinite(a), knp.isfinite(b)))
    swap = knp.greater(x, knp.divide(knp.add(a, 1.0), knp.add(knp.add(a, b), 2.0)))
    a1, b1 = knp.where(inside, knp.where(swap, b, a), 1.0), knp.where(inside, knp.where(swap, a, b), 1.0)
    x1, y1 = knp.where(inside, knp.where(swap, y, x), 0.5), knp.where(inside, knp.where(swap, x, y), 0.5)
    fraction = _betainc_fraction(a1, b1, x1, y1)
    value = knp.where(swap, knp.subtract(1.0, fraction), fraction)
    params_ok = knp.logical_and(knp.greater(a, 0.0), knp.greater(b, 0.0))
    edge = knp.where(knp.equal(x, 0.0), 0.0, knp.where(knp.equal(y, 0.0), 1.0, np.nan))
    return knp.where(inside, value, knp.where(params_ok, edge, np.nan))


def _d_dx_betainc(a, b, x, y):
    """x^(a-1) (1-x)^(b-1) / B(a, b), the derivative of I_x(a, b) in x."""
    ok = knp.logical_and(knp.greater(x, 0.0), knp.greater(y, 0.0))
    xs, ys = knp.where(ok, x, 0.5), knp.where(ok, y, 0.5)
    log_density = knp.subtract(knp.add(knp.multiply(knp.subtract(a, 1.0), knp.log(xs)),
                                       knp.multiply(knp.subtract(b, 1.0), knp.log(ys))), betaln64(a, b))
    return knp.where(ok, knp.exp(log_density), 0.0)


@custom_jvp
def betainc64(a, b, x, y):
    """I_x(a, b) with y = 1 - x passed along exactly (callers that know 1 - x better than 1 - x rounds give it)."""
    return _betainc_both(a, b, x, y)


@betainc64.defjvp
def _betainc64_jvp(primals, tangents):
    """x and y are one variable: the tangent of x is taken as (dx - dy) / 2, right both for y = 1 - x (dy = -dx)
    and for x = 1 - p, y = p (dx = -dp, dy = dp)."""
    (a, b, x, y), (da, db, dx, dy) = primals, tangents
    d_a = central_difference(lambda v: _betainc_both(v, b, x, y), a)
    d_b = central_difference(lambda v: _betainc_both(a, v, x, y), b)
    d_x = knp.multiply(knp.subtract(dx, dy), 0.5)
    dp = knp.add(knp.add(knp.multiply(da, d_a), knp.multiply(db, d_b)), knp.multiply(d_x, _d_dx_betainc(a, b, x, y)))
    return betainc64(a, b, x, y), dp


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (JAX's argument order). The derivative in x is exact;
    those in a and b are float64 central differences (relative accuracy about 1e-9)."""
    (a, b, x), dtype = float_operands("betainc", a, b, x)
    return narrow(betainc64(a, b, x, knp.subtract(1.0, x)), dtype)
