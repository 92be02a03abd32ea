"""Functions with closed forms: xlogy, xlog1py, entr, rel_entr, kl_div, boxcox, boxcox1p, bernoulli, and
spence (a series with its reflection and inversion formulas)."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...transforms.custom import custom_jvp
from ._common import float_operands, horner, narrow

__all__ = ["xlogy", "xlog1py", "entr", "rel_entr", "kl_div", "boxcox", "boxcox1p", "bernoulli", "spence"]


@custom_jvp
def _xlogy64(x, y):
    safe_y = knp.where(knp.equal(x, 0.0), 1.0, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return knp.where(knp.equal(x, 0.0), 0.0, knp.multiply(x, knp.log(safe_y)))


@_xlogy64.defjvp
def _xlogy64_jvp(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    with np.errstate(divide="ignore", invalid="ignore"):
        return _xlogy64(x, y), knp.add(knp.multiply(dx, knp.log(y)), knp.multiply(dy, knp.divide(x, y)))


def xlogy(x, y):
    """x * log(y), 0 where x == 0 (even for y == 0); derivatives as JAX: (log y, x / y)."""
    (x, y), dtype = float_operands("xlogy", x, y)
    return narrow(_xlogy64(x, y), dtype)


@custom_jvp
def _xlog1py64(x, y):
    safe_y = knp.where(knp.equal(x, 0.0), 0.0, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return knp.where(knp.equal(x, 0.0), 0.0, knp.multiply(x, knp.log1p(safe_y)))


@_xlog1py64.defjvp
def _xlog1py64_jvp(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    with np.errstate(divide="ignore", invalid="ignore"):
        return _xlog1py64(x, y), knp.add(knp.multiply(dx, knp.log1p(y)),
                                         knp.multiply(dy, knp.divide(x, knp.add(y, 1.0))))


def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (even for y == -1)."""
    (x, y), dtype = float_operands("xlog1py", x, y)
    return narrow(_xlog1py64(x, y), dtype)


def entr(x):
    """-x log x for x > 0, 0 at 0, -inf for x < 0 (NaN stays NaN)."""
    (x,), dtype = float_operands("entr", x)
    positive = knp.greater(x, 0.0)
    xp = knp.where(positive, x, 1.0)
    out = knp.where(positive, knp.negative(knp.multiply(xp, knp.log(xp))), knp.where(knp.equal(x, 0.0), 0.0, -np.inf))
    return narrow(knp.where(knp.isnan(x), x, out), dtype)


def _entropy_terms(where, x, y, with_linear):
    (x, y), dtype = float_operands(where, x, y)
    both = knp.logical_and(knp.greater(x, 0.0), knp.greater(y, 0.0))
    xs, ys = knp.where(both, x, 1.0), knp.where(both, y, 1.0)
    value = knp.multiply(xs, knp.log(knp.divide(xs, ys)))
    if with_linear:
        value = knp.add(knp.subtract(value, xs), ys)
    at_zero = knp.logical_and(knp.equal(x, 0.0), knp.greater_equal(y, 0.0))
    out = knp.where(both, value, knp.where(at_zero, y if with_linear else 0.0, np.inf))
    return narrow(knp.where(knp.logical_or(knp.isnan(x), knp.isnan(y)), np.nan, out), dtype)


def rel_entr(x, y):
    """x log(x / y) for x, y > 0; 0 at x = 0 <= y; inf elsewhere (scipy's convention)."""
    return _entropy_terms("rel_entr", x, y, with_linear=False)


def kl_div(x, y):
    """x log(x / y) - x + y for x, y > 0; y at x = 0 <= y; inf elsewhere."""
    return _entropy_terms("kl_div", x, y, with_linear=True)


def boxcox(x, lmbda):
    """(x^lmbda - 1) / lmbda as expm1(lmbda log x) / lmbda, log(x) at lmbda = 0."""
    (x, lmbda), dtype = float_operands("boxcox", x, lmbda)
    return narrow(_boxcox_of_log(knp.log(x), lmbda), dtype)


def boxcox1p(x, lmbda):
    """((1 + x)^lmbda - 1) / lmbda from log1p(x) (accurate for small x), log1p(x) at lmbda = 0."""
    (x, lmbda), dtype = float_operands("boxcox1p", x, lmbda)
    return narrow(_boxcox_of_log(knp.log1p(x), lmbda), dtype)


def _boxcox_of_log(log_x, lmbda):
    zero = knp.equal(lmbda, 0.0)
    safe = knp.where(zero, 1.0, lmbda)
    return knp.where(zero, log_x, knp.divide(knp.expm1(knp.multiply(safe, log_x)), safe))


def bernoulli(n: int):
    """The Bernoulli numbers B_0 .. B_n (B_1 = -1/2, as scipy), computed exactly in rationals: a float64 array."""
    from fractions import Fraction

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"bernoulli: n must be a non-negative Python integer, got {n!r}")
    numbers = []
    for m in range(int(n) + 1):
        total = Fraction(0)
        for k in range(m):
            total += Fraction(math.comb(m + 1, k)) * numbers[k]
        numbers.append(Fraction(1) if m == 0 else -total / (m + 1))
    return np.array([float(b) for b in numbers])


_DILOG_TERMS = 60  # |y| <= 1/2: the k-th term is below 2^-k / k^2


def _dilog_small(y):
    """Li2(y) = sum_k y^k / k^2 for |y| <= 1/2."""
    return knp.multiply(y, horner(y, [1.0 / (k + 1) ** 2 for k in range(_DILOG_TERMS)]))


def spence(x):
    """Spence's function for real x >= 0 (scipy's convention): integral_1^x log(t) / (t - 1) dt = Li2(1 - x),
    from the series of Li2 on [-1/2, 1/2] and its reflection and inversion formulas; NaN below 0."""
    (x,), dtype = float_operands("spence", x)
    pi2_6 = math.pi ** 2 / 6.0
    y = knp.subtract(1.0, x)
    near = knp.less_equal(knp.abs(y), 0.5)  # x in [1/2, 3/2]: the series in y
    small = knp.less(x, 0.5)  # reflection: Li2(y) = pi^2/6 - log(y) log(x) - Li2(x)
    xs = knp.where(small, x, 0.25)
    ys = knp.subtract(1.0, xs)
    with np.errstate(divide="ignore", invalid="ignore"):
        reflected = knp.subtract(knp.subtract(pi2_6, knp.multiply(knp.log(ys), knp.log(xs))), _dilog_small(xs))
    reflected = knp.where(knp.equal(x, 0.0), pi2_6, reflected)
    # x > 3/2: Li2(1 - x) = -Li2(1 - 1/x) - log(x)^2 / 2, and Li2(1 - 1/x) by the series in 1 - 1/x up to x = 2,
    # by reflection (series in 1/x) beyond
    large = knp.greater(x, 1.5)
    xl = knp.where(large, x, 2.0)
    w = knp.subtract(1.0, knp.reciprocal(xl))
    inner = knp.where(knp.less_equal(w, 0.5), _dilog_small(knp.where(knp.less_equal(w, 0.5), w, 0.5)),
                      knp.subtract(knp.subtract(pi2_6, knp.multiply(knp.log(w), knp.negative(knp.log(xl)))),
                                   _dilog_small(knp.reciprocal(xl))))
    log_x = knp.log(xl)
    inverted = knp.subtract(knp.negative(inner), knp.multiply(knp.multiply(log_x, log_x), 0.5))
    inverted = knp.where(knp.isinf(xl), -np.inf, inverted)
    out = knp.where(near, _dilog_small(knp.where(near, y, 0.0)), knp.where(small, reflected, inverted))
    out = knp.where(knp.less(x, 0.0), np.nan, out)
    return narrow(knp.where(knp.isnan(x), x, out), dtype)
