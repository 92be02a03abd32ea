"""The confluent and Gauss hypergeometric functions hyp1f1 and hyp2f1 for real arguments, by their power series
(summed in one while_loop until every element has converged) and the transformations that keep the series in
its fast range. Derivatives: in x exact (a shifted function), in the parameters float64 central differences."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ...lax.control_flow import while_loop
from ...transforms.custom import custom_jvp
from ._common import EPS, float_operands, narrow
from ._gamma import _gammasgn64, gammaln64

__all__ = ["hyp1f1", "hyp2f1"]

_SERIES_STEPS = 20000  # the most terms a series takes (2F1 at |z| = 0.9 with large parameters needs thousands)


def _series(numerators, denominators, z):
    """sum_k prod (n)_k / prod (d)_k z^k / k! until every element's term is below 2^-53 of its sum (a term that
    is exactly zero ends a terminating series)."""

    def not_done(state):
        k, _, _, done = state
        return (k < _SERIES_STEPS) & ~knp.all(done)

    def body(state):
        k, term, total, done = state
        kf = knp.asarray(k, np.float64)
        for n in numerators:
            term = term * (n + kf)
        for d in denominators:
            term = term / (d + kf)
        term = term * z / (kf + 1.0)
        new_total = total + term
        total = knp.where(done, total, new_total)
        done = done | (knp.abs(term) <= EPS * knp.abs(new_total))
        return k + 1, term, total, done

    ones = knp.ones_like(z)
    return while_loop(not_done, body, (np.int32(0), ones, ones, knp.zeros_like(z, dtype=bool)))[2]


def _log_gamma_ratios(ratios):
    """[(sign, log|.|) of prod Gamma(n) / prod Gamma(d) for (numerators, denominators) in ratios]; a pole in a
    denominator gives sign 0, one in a numerator log inf. Every Gamma is taken in one stacked evaluation (one
    kernel, not one each)."""
    args = [v for numerators, denominators in ratios for v in (*numerators, *denominators)]
    stacked = knp.stack(args)
    poles = (stacked <= 0) & (stacked == knp.floor(stacked))
    safe = knp.where(poles, 1.0, stacked)
    signs, logs = _gammasgn64(safe), gammaln64(safe)
    out, i = [], 0
    for numerators, denominators in ratios:
        sign, log = 1.0, 0.0
        for j in range(i, i + len(numerators)):
            sign, log = sign * signs[j], log + knp.where(poles[j], np.inf, logs[j])
        i += len(numerators)
        for j in range(i, i + len(denominators)):
            sign, log = knp.where(poles[j], 0.0, sign * signs[j]), log - logs[j]
        i += len(denominators)
        out.append((sign, log))
    return out


def _step(v):
    return knp.maximum(knp.abs(v), 1.0) * 1e-5


# ---- 1F1


_ASYMPTOTIC_FROM = 100.0  # |x| from which 1F1 comes from its asymptotic series


def _asymptotic_1f1(a, b, z):
    """1F1(a; b; z) e^-z for z >= 100: Gamma(b) / Gamma(a) z^(a - b) sum_k (b - a)_k (1 - a)_k / k! z^-k, summed
    while the terms decrease (Pearson, Olver and Porter 2017, eq. 3.8)."""

    def not_done(state):
        k, term, _, done = state
        return (k < 500) & ~knp.all(done)

    def body(state):
        k, term, total, done = state
        kf = knp.asarray(k, np.float64)
        new_term = term * (b - a + kf) * (1.0 - a + kf) / ((kf + 1.0) * z)
        growing = knp.abs(new_term) >= knp.abs(term)
        stop = done | growing
        total = knp.where(stop, total, total + new_term)
        done = stop | (knp.abs(new_term) <= EPS * knp.abs(total))
        return k + 1, knp.where(stop, term, new_term), total, done

    ones = knp.ones_like(z)
    total = while_loop(not_done, body, (np.int32(0), ones, ones, knp.zeros_like(z, dtype=bool)))[2]
    ((sign, log),) = _log_gamma_ratios([([b], [a])])
    return sign * knp.exp(log + (a - b) * knp.log(z)) * total


def _hyp1f1_value(a, b, x):
    """1F1 for a real x: the series where |x| < 100 (for x < 0 through Kummer's transformation
    1F1(a; b; x) = e^x 1F1(b - a; b; -x), so that the terms do not alternate), the asymptotic series beyond.
    JAX's conventions: 1 for a = 0, e^x for a = b, inf where b is 0 or a negative integer."""
    negative = x < 0
    z = knp.abs(x)
    a1 = knp.where(negative, b - a, a)
    near = z < _ASYMPTOTIC_FROM
    zs = knp.where(near, z, 0.5)
    series = _series([a1], [b], zs)
    series = knp.where(negative, knp.exp(-zs) * series, series)
    zf = knp.where(near, _ASYMPTOTIC_FROM, z)
    far = _asymptotic_1f1(a1, b, zf)
    far = knp.where(negative, far, far * knp.exp(zf))
    value = knp.where(near, series, far)
    b_pole = (b <= 0) & (b == knp.floor(b))
    value = knp.where(b_pole, np.inf, value)
    return knp.where(a == 0, 1.0, knp.where(a == b, knp.exp(x), value))


@custom_jvp
def _hyp1f1_64(a, b, x):
    return _hyp1f1_value(a, b, x)


@_hyp1f1_64.defjvp
def _hyp1f1_64_jvp(primals, tangents):
    """d/dx = a/b 1F1(a + 1; b + 1; x); d/da and d/db by central differences (step 1e-5 max(|v|, 1)); the five
    shifted functions and the value are computed as one stacked evaluation."""
    (a, b, x), (da, db, dx) = primals, tangents
    ha, hb = _step(a), _step(b)
    values = _hyp1f1_value(knp.stack([a, a + 1.0, a + ha, a - ha, a, a]),
                           knp.stack([b, b + 1.0, b, b, b + hb, b - hb]), knp.stack([x] * 6))
    d_x = a / b * values[1]
    d_a = (values[2] - values[3]) / (2.0 * ha)
    d_b = (values[4] - values[5]) / (2.0 * hb)
    return values[0], da * d_a + db * d_b + dx * d_x


def hyp1f1(a, b, x):
    """The confluent hypergeometric function 1F1(a; b; x) = sum_k (a)_k / (b)_k x^k / k! for real arguments
    (JAX's conventions: 1 for a = 0, also where b = 0)."""
    (a, b, x), dtype = float_operands("hyp1f1", a, b, x)
    return narrow(_hyp1f1_64(a, b, x), dtype)


# ---- 2F1


_TRANSFORM_ABOVE = 0.9  # z from which 2F1 is taken from its 1 - z transformation
_INTEGER_GAP = 1e-9  # c - a - b closer than this to an integer: the 1 - z transformation's terms blow up


def _hyp2f1_unit_interval(a, b, c, z):
    """2F1(a, b; c; z) for 0 <= z < 1: the series up to 0.9; above, the 1 - z transformation
    Gamma(c) Gamma(d) / (Gamma(c - a) Gamma(c - b)) F(a, b; 1 - d; 1 - z)
    + (1 - z)^d Gamma(c) Gamma(-d) / (Gamma(a) Gamma(b)) F(c - a, c - b; 1 + d; 1 - z), d = c - a - b, unless d
    is (nearly) an integer, where the series is summed to the end instead (slowly near z = 1). The three series
    run as one, stacked on a new first axis."""
    d = c - a - b
    integral = knp.abs(d - knp.rint(d)) < _INTEGER_GAP
    transform = (z > _TRANSFORM_ABOVE) & ~integral
    zs = knp.where(transform, 0.0, z)
    w = knp.where(transform, 1.0 - z, 0.0)
    ds = knp.where(transform, d, 0.5)
    direct, first, second = _series([knp.stack([a, a, c - a]), knp.stack([b, b, c - b])],
                                    [knp.stack([c, 1.0 - ds, 1.0 + ds])], knp.stack([zs, w, w]))
    (sign1, log1), (sign2, log2) = _log_gamma_ratios([([c, ds], [c - a, c - b]), ([c, -ds], [a, b])])
    w_safe = knp.where(transform, w, 1.0)
    transformed = sign1 * knp.exp(log1) * first + sign2 * knp.exp(log2 + ds * knp.log(w_safe)) * second
    return knp.where(transform, transformed, direct)


def _hyp2f1_value(a, b, c, x):
    """2F1 for real x <= 1 (inf above 1, as JAX): x < 0 through Pfaff's transformation
    (1 - x)^-a F(a, c - b; c; x / (x - 1)) (or a and b exchanged); x = 1 by Gauss's sum (inf unless
    c - a - b > 0); 1 for x = 0 or a or b = 0; inf where c is 0 or a negative integer."""
    negative = x < 0
    inside = x < 1
    xs = knp.where(inside, x, 0.0)
    z = knp.where(negative, xs / (xs - 1.0), xs)
    # of Pfaff's two forms, the one whose parameters (a, c - b) or (b, c - a) have the larger minimum: the fewer
    # sign changes among the terms, the less they cancel
    swap = negative & (knp.minimum(b, c - a) > knp.minimum(a, c - b))
    a1 = knp.where(swap, b, a)
    b1 = knp.where(negative, c - knp.where(swap, a, b), b)
    value = _hyp2f1_unit_interval(a1, b1, c, z)
    value = knp.where(negative, value * knp.exp(-a1 * knp.log1p(-xs)), value)
    d = c - a - b
    ((sign, log),) = _log_gamma_ratios([([c, knp.where(d > 0, d, 1.0)], [c - a, c - b])])
    gauss = knp.where(d > 0, sign * knp.exp(log), np.inf)
    value = knp.where(inside, value, knp.where(x == 1.0, gauss, np.inf))
    c_pole = (c <= 0) & (c == knp.floor(c))
    value = knp.where(c_pole, np.inf, value)
    return knp.where((x == 0) | (((a == 0) | (b == 0)) & (c != 0)), 1.0, value)


@custom_jvp
def _hyp2f1_64(a, b, c, x):
    return _hyp2f1_value(a, b, c, x)


@_hyp2f1_64.defjvp
def _hyp2f1_64_jvp(primals, tangents):
    """d/dx = ab/c 2F1(a + 1, b + 1; c + 1; x); d/da, d/db and d/dc by central differences (step
    1e-5 max(|v|, 1)); the seven shifted functions and the value are computed as one stacked evaluation."""
    (a, b, c, x), (da, db, dc, dx) = primals, tangents
    ha, hb, hc = _step(a), _step(b), _step(c)
    values = _hyp2f1_value(knp.stack([a, a + 1.0, a + ha, a - ha, a, a, a, a]),
                           knp.stack([b, b + 1.0, b, b, b + hb, b - hb, b, b]),
                           knp.stack([c, c + 1.0, c, c, c, c, c + hc, c - hc]), knp.stack([x] * 8))
    d_x = a * b / c * values[1]
    d_a = (values[2] - values[3]) / (2.0 * ha)
    d_b = (values[4] - values[5]) / (2.0 * hb)
    d_c = (values[6] - values[7]) / (2.0 * hc)
    return values[0], da * d_a + db * d_b + dc * d_c + dx * d_x


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k! for real arguments
    and x <= 1."""
    (a, b, c, x), dtype = float_operands("hyp2f1", a, b, c, x)
    return narrow(_hyp2f1_64(a, b, c, x), dtype)
