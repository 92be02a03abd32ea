"""kiln.lax's special functions, as in jax.lax: lgamma, digamma, polygamma, zeta, erf_inv, igamma, igammac,
igamma_grad_a, random_gamma_grad, betainc, bessel_i0e and bessel_i1e, with JAX's derivative rules.

Each is a composition of lax operations (no primitive of its own), computed in float64 and rounded once to
the operand's dtype, except erf_inv in float32 (and float16/bfloat16 through float32), which is XLA's
polynomial operation for operation, so that kiln.random.normal draws JAX's numbers. kiln.scipy.special and
kiln.random use these (one implementation of each); docs/scipy.md states their accuracy. The kernels, named
*64 and written in _special_ops' numpy-style arithmetic, take float64 operands of one shape.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes
from ..core.trace import get_aval
from ..core.ad_util import Zero
from ..transforms.batching import move_batch_axis
from ..transforms.jvp import tangent_aval
from . import _special_ops as ops
from . import prims
from .api import _operands as api_operands
from .composite import composite_primitive
from .control_flow import while_loop
from .math_prims import erf, erfc

__all__ = ["lgamma", "digamma", "polygamma", "zeta", "erf_inv", "igamma", "igammac", "igamma_grad_a",
           "random_gamma_grad", "betainc", "bessel_i0e", "bessel_i1e"]

MAX_ITERATIONS = 2000  # the most steps a while_loop series or continued fraction takes
EPS = 2.0 ** -53  # the relative change at which an element of such a loop has converged


class _Kernel:
    """An elementwise kernel (float64 unless said otherwise) bound as a composite primitive, so that
    transformations see one primitive: its JVP sums each operand's tangent times that operand's partial derivative (defpartials), and vmap moves
    the batch axes to the front. Eager calls run the kernel on the values under np.errstate (its divisions by
    zero and NaN comparisons are intended)."""

    def __init__(self, name: str, kernel, dtype):
        self.kernel = kernel
        self.dtype = np.dtype(dtype)
        self.partials = None
        self.primitive = composite_primitive(name, kernel, eager=self._eager)
        self.primitive.jvp_rule = self.primitive.graph_free(self._jvp)
        self.primitive.batching_rule = self.primitive.graph_free(self._batch)

    def __call__(self, *xs):
        """The primitive on the operands in the kernel's dtype (Python numbers included), broadcast together."""
        xs = [ops.asarray(x, self.dtype) for x in xs]
        shape = np.broadcast_shapes(*(get_aval(x).shape for x in xs))
        xs = [x if get_aval(x).shape == shape else prims.broadcast_in_dim.bind(
            x, shape=shape, broadcast_dimensions=tuple(range(len(shape) - get_aval(x).ndim, len(shape)))) for x in xs]
        return self.primitive.apply(*xs)

    def defpartials(self, partials):
        """partials(*operands, out) -> one zero-argument function per operand giving d out / d operand."""
        self.partials = partials
        return partials

    def _eager(self, *xs):
        with np.errstate(all="ignore"):
            return self.kernel(*xs)

    def _jvp(self, primals, tangents):
        out = self.primitive.apply(*primals)
        tangent = None
        for dot, partial in zip(tangents, self.partials(*primals, out)):
            if isinstance(dot, Zero):
                continue
            term = prims.mul.bind(dot, partial())
            tangent = term if tangent is None else prims.add.bind(tangent, term)
        return out, Zero(tangent_aval(get_aval(out))) if tangent is None else tangent

    def _batch(self, values, dims, *, axis_size):
        return self.primitive.apply(*[move_batch_axis(v, d, 0, axis_size) for v, d in zip(values, dims)]), 0


def kernel(name: str, dtype=np.float64):
    """Decorator: the function as a _Kernel primitive named `name`, computing in `dtype`."""
    return lambda fn: _Kernel(name, fn, dtype)


def _central_difference(fn, v):
    """d fn / d v by a float64 central difference with step 1e-5 max(|v|, 1)."""
    h = ops.multiply(ops.maximum(ops.abs(v), 1.0), 1e-5)
    return ops.divide(ops.subtract(fn(ops.add(v, h)), fn(ops.subtract(v, h))), ops.multiply(h, 2.0))


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
    return ops.horner(t, _LGAMMA2_COEFFS)


def _lgamma_positive(x):
    """lgamma for x > 0 (0 gives inf): the series about 2 on [1/2, 10) after moving x there by the recurrence
    (every factor positive, so nothing cancels), Stirling's series from 10. The series is evaluated once, at
    the point each branch moved x to."""
    small = ops.less(x, 0.5)  # lgamma(x) = lgamma(x + 2) - log(x) - log1p(x)
    one = ops.logical_and(ops.greater_equal(x, 0.5), ops.less(x, 1.5))  # lgamma(x) = lgamma(x + 1) - log(x)
    mid = ops.logical_and(ops.greater_equal(x, 1.5), ops.less(x, 10.0))  # lgamma(x - n) + log((x-1)...(x-n))
    xm = ops.where(mid, x, 2.0)
    product, shift = 1.0, 0.0
    for j in range(1, 9):
        down = ops.greater_equal(ops.subtract(xm, float(j)), 1.5)
        product = ops.multiply(product, ops.where(down, ops.subtract(xm, float(j)), 1.0))
        shift = ops.add(shift, ops.where(down, 1.0, 0.0))
    xs = ops.where(ops.logical_or(small, one), ops.where(ops.greater(x, 0.0), x, 0.25), 1.0)
    t = ops.where(small, xs, ops.where(one, ops.subtract(xs, 1.0), ops.subtract(ops.subtract(xm, shift), 2.0)))
    big = ops.greater_equal(x, 10.0)
    xb = ops.where(big, x, 10.0)
    # the branches' logarithms (log(x (1 + x)), log(x), log of the product, log(x) for Stirling) as one log
    log_arg = ops.log(ops.where(big, xb, ops.where(small, ops.multiply(xs, ops.add(xs, 1.0)),
                                                   ops.where(one, xs, product))))
    near_two = ops.add(_lgamma_near_two(t), ops.where(ops.logical_or(small, one), ops.negative(log_arg), log_arg))
    w = ops.reciprocal(xb)
    stirling = ops.multiply(w, ops.horner(ops.multiply(w, w), _STIRLING))
    at_big = ops.add(ops.subtract(ops.multiply(ops.subtract(xb, 0.5), log_arg), xb),
                     ops.add(0.5 * math.log(2 * math.pi), stirling))
    at_big = ops.where(ops.isinf(xb), np.inf, at_big)
    return ops.where(ops.equal(x, 0.0), np.inf, ops.where(big, at_big, near_two))


# sin(pi r) = r sum_k s_k r^2k and cos(pi r) = sum_k c_k r^2k for |r| <= 1/2 (Taylor; the first omitted terms are
# below 1e-24): polynomials compile to far less code than the general sin and tan.
_SIN_PI = [(-1) ** k * math.pi ** (2 * k + 1) / math.factorial(2 * k + 1) for k in range(14)]


_COS_PI = [(-1) ** k * math.pi ** (2 * k) / math.factorial(2 * k) for k in range(15)]


def sin_cos_pi(x):
    """(sin(pi x), cos(pi x)) up to the sign of a whole turn, for finite x: r = x - round(x) is exact, so large
    x lose nothing."""
    r = ops.subtract(x, ops.rint(x))
    r2 = ops.multiply(r, r)
    return ops.multiply(r, ops.horner(r2, _SIN_PI)), ops.horner(r2, _COS_PI)


@kernel("lgamma")
def gammaln64(x):
    negative = ops.less(x, 0.0)
    finite_neg = ops.logical_and(negative, ops.isfinite(x))
    z = ops.where(finite_neg, ops.subtract(1.0, x), ops.abs(x))
    positive = _lgamma_positive(z)
    xn = ops.where(finite_neg, x, -0.5)
    with np.errstate(divide="ignore"):
        reflected = ops.subtract(ops.log(ops.divide(math.pi, ops.abs(sin_cos_pi(xn)[0]))), positive)
    out = ops.where(finite_neg, reflected, positive)
    out = ops.where(ops.equal(x, -np.inf), -np.inf, out)  # scipy's value
    return ops.where(ops.isnan(x), x, out)


@gammaln64.defpartials
def _gammaln64_partials(x, out):
    return [lambda: digamma64(x)]


# digamma(y) = log y - 1/(2y) - sum_k B_2k / (2k y^2k) for y >= 10, in 1/y^2 (through B_16: the next term is
# below 1e-17 at y = 10).
_DIGAMMA_ASYMPTOTIC = [0.0, -1 / 12, 1 / 120, -1 / 252, 1 / 240, -1 / 132, 691 / 32760, -1 / 12, 3617 / 8160]


# trigamma(y) = 1/y + 1/(2y^2) + sum_k B_2k / y^(2k+1) for y >= 10: the B_2k in 1/y^2, times 1/y.
_TRIGAMMA_ASYMPTOTIC = [0.0, 1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510]


def _shift_to_ten(x, power):
    """(y, s): y = x + n >= 10 for the least n >= 0, and s = sum_{k < n} 1/(x + k)^power (x > 0)."""
    s, y = 0.0, x
    for _ in range(10):
        below = ops.less(y, 10.0)
        ys = ops.where(below, y, 1.0)
        term = ops.reciprocal(ys) if power == 1 else ops.reciprocal(ops.multiply(ys, ys))
        s = ops.add(s, ops.where(below, term, 0.0))
        y = ops.where(below, ops.add(y, 1.0), y)
    return y, s


def _digamma_positive(x):
    y, s = _shift_to_ten(x, 1)
    finite = ops.isfinite(y)
    yf = ops.where(finite, y, 10.0)
    w2 = ops.reciprocal(ops.multiply(yf, yf))
    at_y = ops.add(ops.subtract(ops.log(yf), ops.divide(0.5, yf)), ops.horner(w2, _DIGAMMA_ASYMPTOTIC))
    return ops.subtract(ops.where(finite, at_y, np.inf), s)


@kernel("digamma")
def digamma64(x):
    negative = ops.less(x, 0.0)
    finite_neg = ops.logical_and(negative, ops.isfinite(x))
    z = ops.where(finite_neg, ops.subtract(1.0, x), ops.where(ops.equal(x, 0.0), 1.0, ops.abs(x)))
    positive = _digamma_positive(z)
    xn = ops.where(finite_neg, x, -0.5)
    r = ops.subtract(xn, ops.rint(xn))
    with np.errstate(divide="ignore", invalid="ignore"):
        sine, cosine = sin_cos_pi(r)
        reflected = ops.subtract(positive, ops.divide(ops.multiply(cosine, math.pi), sine))
    reflected = ops.where(ops.equal(r, 0.0), np.nan, reflected)
    out = ops.where(finite_neg, reflected, positive)
    zero = ops.equal(x, 0.0)
    with np.errstate(divide="ignore"):
        minus_zero = ops.less(ops.divide(1.0, ops.where(zero, x, 1.0)), 0.0)
    out = ops.where(zero, ops.where(minus_zero, np.inf, -np.inf), out)  # scipy: psi(+-0) = -+inf
    out = ops.where(ops.equal(x, -np.inf), np.nan, out)
    return ops.where(ops.isnan(x), x, out)


@digamma64.defpartials
def _digamma64_partials(x, out):
    return [lambda: trigamma64(x)]


def trigamma64(x):
    """polygamma(1, x): the recurrence up to 10, the asymptotic series, and pi^2 / sin^2(pi x) - trigamma(1 - x)
    below 0 (its derivative is that of the composition)."""
    negative = ops.less(x, 0.0)
    z = ops.where(negative, ops.subtract(1.0, x), ops.where(ops.equal(x, 0.0), 1.0, x))
    y, s = _shift_to_ten(z, 2)
    finite = ops.isfinite(y)
    yf = ops.where(finite, y, 10.0)
    w = ops.reciprocal(yf)
    at_y = ops.add(ops.add(w, ops.multiply(0.5, ops.multiply(w, w))),
                   ops.multiply(w, ops.horner(ops.multiply(w, w), _TRIGAMMA_ASYMPTOTIC)))
    positive = ops.add(ops.where(finite, at_y, 0.0), s)
    xn = ops.where(negative, x, -0.5)
    sine = sin_cos_pi(xn)[0]
    with np.errstate(divide="ignore"):
        reflected = ops.subtract(ops.divide(math.pi ** 2, ops.multiply(sine, sine)), positive)
    out = ops.where(negative, reflected, positive)
    return ops.where(ops.equal(x, 0.0), np.inf, out)


_ZETA_DIRECT_TERMS = 12


# B_2j / (2j)!, j = 1..9, for the Euler-Maclaurin tail
_BERNOULLI_OVER_FACTORIAL = [1 / 12, -1 / 720, 1 / 30240, -1 / 1209600, 1 / 47900160, -691 / 1307674368000,
                             1 / 74724249600, -3617 / 10670622842880000, 43867 / 5109094217170944000]


def zeta64(s, q):
    """sum_k (q + k)^-s for s > 1: twelve terms directly, then the Euler-Maclaurin tail at a = q + 12
    (a^(1-s)/(s-1) + a^-s/2 + sum_j B_2j/(2j)! s(s+1)...(s+2j-2) a^(-s-2j+1), nine terms); inf at s = 1 and at
    the poles q = 0, -1, -2; NaN for s < 1 and for q < -2 (not implemented there)."""
    s = ops.asarray(s, np.float64) if not hasattr(s, "shape") else s
    total = 0.0
    for k in range(_ZETA_DIRECT_TERMS):
        base = ops.add(q, float(k))
        safe = ops.where(ops.equal(base, 0.0), 1.0, base)
        total = ops.add(total, ops.where(ops.equal(base, 0.0), np.inf, ops.power(safe, ops.negative(s))))
    a = ops.add(q, float(_ZETA_DIRECT_TERMS))
    a = ops.where(ops.greater(a, 0.0), a, 1.0)
    a_to_minus_s = ops.power(a, ops.negative(s))
    tail = ops.add(ops.divide(ops.multiply(a_to_minus_s, a), ops.subtract(s, 1.0)), ops.multiply(a_to_minus_s, 0.5))
    rising, power = s, ops.divide(a_to_minus_s, a)  # s (s+1) ... (s+2j-2), a^(-s-2j+1)
    for j, coefficient in enumerate(_BERNOULLI_OVER_FACTORIAL, start=1):
        tail = ops.add(tail, ops.multiply(ops.multiply(rising, power), coefficient))
        rising = ops.multiply(rising, ops.multiply(ops.add(s, 2.0 * j - 1), ops.add(s, 2.0 * j)))
        power = ops.divide(power, ops.multiply(a, a))
    out = ops.add(total, tail)
    out = ops.where(ops.equal(s, 1.0), np.inf, ops.where(ops.less(s, 1.0), np.nan, out))
    return ops.where(ops.logical_or(ops.less(q, -2.0), ops.isnan(q)), np.nan, out)


def stirling_correction(x):
    """lgamma(x) - ((x - 1/2) log x - x + log(2 pi)/2) for x >= 10."""
    w = ops.reciprocal(x)
    return ops.multiply(w, ops.horner(ops.multiply(w, w), _STIRLING))


def betaln64(a, b):
    """log|B(a, b)|. With p = min(a, b) > 0 and q = max(a, b) >= 10, gammaln(p) plus
    lgamma(q) - lgamma(p + q) from Stirling's formula written so that nothing of size q log q cancels:
    -(q - 1/2) log1p(p/q) - p log(p + q) + p + (correction(q) - correction(p + q)). Otherwise
    gammaln(a) + gammaln(b) - gammaln(a + b)."""
    p, q = ops.minimum(a, b), ops.maximum(a, b)
    large = ops.logical_and(ops.greater_equal(q, 10.0), ops.greater(p, 0.0))
    ps, qs = ops.where(large, p, 1.0), ops.where(large, q, 10.0)
    total = ops.add(ps, qs)
    difference = ops.add(ops.subtract(ops.add(ops.negative(ops.multiply(ops.subtract(qs, 0.5),
                                                                          ops.log1p(ops.divide(ps, qs)))),
                                              ps), ops.multiply(ps, ops.log(total))),
                         ops.subtract(stirling_correction(qs), stirling_correction(total)))
    at_large = ops.add(gammaln64(ps), difference)
    at_large = ops.where(ops.isinf(q), -np.inf, at_large)
    plain = ops.subtract(ops.add(gammaln64(a), gammaln64(b)), gammaln64(ops.add(a, b)))
    return ops.where(large, at_large, plain)


_LOG1PMX_TERMS = 40  # |t| <= 1/4: the k-th term is below 4^-k / k


def _log1p_minus(t):
    """log1p(t) - t, by its series -t^2/2 + t^3/3 - ... for |t| <= 1/4 (no cancellation), directly outside
    (where it loses at most 8 ulp)."""
    near = ops.less_equal(ops.abs(t), 0.25)
    tn = ops.where(near, t, 0.0)
    coefficients = [(-1) ** (k + 1) / (k + 2) for k in range(_LOG1PMX_TERMS)]
    series = ops.multiply(ops.multiply(tn, tn), ops.horner(tn, coefficients))
    tf = ops.where(near, 1.0, t)
    return ops.where(near, series, ops.subtract(ops.log1p(tf), tf))


def _log_gamma_density_front(a, x):
    """log(x^a e^-x / Gamma(a)) = a log x - x - lgamma(a). For a >= 10, with Stirling's lgamma, as
    a (log1p(t) - t) + log(a)/2 - log(2 pi)/2 - correction(a), t = (x - a)/a: the terms of size a log a, which
    cancel where x is near a, never form (a log x - x - lgamma(a) lost eps * a log a: 1e-12 at a = 1000)."""
    large = ops.greater_equal(a, 10.0)
    al = ops.where(large, a, 10.0)
    t = ops.divide(ops.subtract(x, al), al)
    stirling = ops.subtract(ops.add(ops.multiply(al, _log1p_minus(t)), ops.multiply(ops.log(al), 0.5)),
                            ops.add(0.5 * math.log(2 * math.pi), stirling_correction(al)))
    direct = ops.subtract(ops.subtract(ops.multiply(a, ops.log(x)), x), gammaln64(a))
    return ops.where(large, stirling, direct)


def _gammainc_core(a, x):
    """(P(a, x), Q(a, x)) for a > 0, x > 0 finite. Where x < a + 1, P by its power series
    x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1) ... (a + n)) and Q = 1 - P; elsewhere Q by Legendre's
    continued fraction x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)), evaluated
    by the modified Lentz method, and P = 1 - Q. Both iterate in one while_loop until every element has
    converged to a relative 2^-53 (at most 2000 steps: enough for a up to about 10^6)."""
    series = ops.less(x, ops.add(a, 1.0))
    tiny = 1e-300

    def not_done(state):
        n, _, _, _, _, _, done = state
        return ops.logical_and(ops.less(n, MAX_ITERATIONS), ops.logical_not(ops.all(done)))

    def step(state):
        n, term, total, f, c, d, done = state
        nf = ops.asarray(n, np.float64)
        # series
        term = ops.multiply(term, ops.divide(x, ops.add(a, nf)))
        total = ops.where(done, total, ops.add(total, term))  # converged elements stay as they are
        series_done = ops.less_equal(ops.abs(term), ops.multiply(ops.abs(total), EPS))
        # continued fraction: b_n = x + 2n + 1 - a, a_n = -n (n - a)
        b_n = ops.add(ops.subtract(x, a), ops.add(ops.multiply(nf, 2.0), 1.0))
        a_n = ops.negative(ops.multiply(nf, ops.subtract(nf, a)))
        d = ops.add(b_n, ops.multiply(a_n, d))
        d = ops.reciprocal(ops.where(ops.less(ops.abs(d), tiny), tiny, d))
        c = ops.add(b_n, ops.divide(a_n, c))
        c = ops.where(ops.less(ops.abs(c), tiny), tiny, c)
        delta = ops.multiply(c, d)
        f = ops.where(done, f, ops.multiply(f, delta))
        fraction_done = ops.less_equal(ops.abs(ops.subtract(delta, 1.0)), EPS)
        done = ops.logical_or(done, ops.where(series, series_done, fraction_done))
        return n + 1, term, total, f, c, d, done

    ones = ops.ones_like(x)
    b0 = ops.add(ops.subtract(x, a), 1.0)
    f0 = ops.where(ops.less(ops.abs(b0), tiny), tiny, b0)
    state = (np.int32(1), ones, ones, f0, f0, ops.zeros_like(x), ops.zeros_like(x, dtype=bool))
    _, _, total, f, _, _, _ = while_loop(not_done, step, state)
    log_front = _log_gamma_density_front(a, x)  # log(x^a e^-x / Gamma(a))
    p_series = ops.multiply(ops.exp(ops.subtract(log_front, ops.log(a))), total)  # Gamma(a + 1) = a Gamma(a)
    q_fraction = ops.divide(ops.exp(log_front), f)
    p = ops.where(series, p_series, ops.subtract(1.0, q_fraction))
    q = ops.where(series, ops.subtract(1.0, p_series), q_fraction)
    return p, q


def _gammainc_both(a, x):
    """(P, Q) with scipy's values outside the core's domain: x = 0 gives (0, 1), x = inf (1, 0), a = 0 with
    x > 0 (1, 0), a < 0, x < 0 or NaN give NaN."""
    inside = ops.logical_and(ops.logical_and(ops.greater(a, 0.0), ops.greater(x, 0.0)),
                             ops.logical_and(ops.isfinite(x), ops.isfinite(a)))
    p, q = _gammainc_core(ops.where(inside, a, 1.0), ops.where(inside, x, 1.0))
    zero_x = ops.logical_and(ops.equal(x, 0.0), ops.greater(a, 0.0))
    full = ops.logical_or(ops.logical_and(ops.equal(a, 0.0), ops.greater(x, 0.0)),
                          ops.logical_and(ops.equal(x, np.inf), ops.logical_and(ops.greater(a, 0.0), ops.isfinite(a))))
    none = ops.logical_and(ops.equal(a, np.inf), ops.greater_equal(x, 0.0))
    p = ops.where(inside, p, ops.where(zero_x | none, 0.0, ops.where(full, 1.0, np.nan)))
    q = ops.where(inside, q, ops.where(zero_x | none, 1.0, ops.where(full, 0.0, np.nan)))
    return p, q


def _d_dx_gammainc(a, x):
    """x^(a-1) e^-x / Gamma(a), the derivative of P in x."""
    safe = ops.where(ops.greater(x, 0.0), x, 1.0)
    value = ops.exp(ops.subtract(ops.subtract(ops.multiply(ops.subtract(a, 1.0), ops.log(safe)), safe), gammaln64(a)))
    return ops.where(ops.greater(x, 0.0), value, 0.0)


def igamma_grad_a64(a, x):
    """dP/da: the power series P = sum_n x^(a+n) e^-x / Gamma(a+n+1) differentiated term by term (the log of a
    term has the derivative log x - digamma(a+n+1)), summed past its largest term until the terms no longer
    count (at most 100000 steps). 0 where P is constant in a (x = 0 or inf), NaN outside a > 0, x >= 0."""
    inside = ops.logical_and(ops.logical_and(ops.greater(a, 0.0), ops.greater(x, 0.0)),
                             ops.logical_and(ops.isfinite(x), ops.isfinite(a)))
    a1, x1 = ops.where(inside, a, 1.0), ops.where(inside, x, 1.0)
    log_x = ops.log(x1)
    term = ops.exp(ops.subtract(_log_gamma_density_front(a1, x1), ops.log(a1)))  # x^a e^-x / Gamma(a + 1)
    psi = digamma64(ops.add(a1, 1.0))

    def body(state):
        n, term, psi, total, derivative = state
        k = ops.add(a1, ops.asarray(n + 1))
        term = ops.multiply(term, ops.divide(x1, k))
        psi = ops.add(psi, ops.reciprocal(k))
        return n + 1, term, psi, ops.add(total, term), ops.add(derivative, ops.multiply(term, ops.subtract(log_x, psi)))

    def more(state):
        n, term, _, total, _ = state
        before_peak = ops.less_equal(ops.asarray(n), ops.subtract(x1, a1))
        counts = ops.greater(term, ops.multiply(total, 1e-18))
        return ops.logical_and(ops.less(n, 100000), ops.logical_not(ops.all(ops.logical_not(
            ops.logical_or(before_peak, counts)))))

    state = (np.int32(0), term, psi, term, ops.multiply(term, ops.subtract(log_x, psi)))
    derivative = while_loop(more, body, state)[4]
    constant = ops.logical_or(ops.logical_and(ops.equal(x, 0.0), ops.greater(a, 0.0)), ops.equal(x, np.inf))
    return ops.where(inside, derivative, ops.where(constant, 0.0, np.nan))


@kernel("igamma")
def gammainc64(a, x):
    return _gammainc_both(a, x)[0]


@gammainc64.defpartials
def _gammainc64_partials(a, x, out):
    return [lambda: igamma_grad_a64(a, x), lambda: _d_dx_gammainc(a, x)]


@kernel("igammac")
def gammaincc64(a, x):
    return _gammainc_both(a, x)[1]


@gammaincc64.defpartials
def _gammaincc64_partials(a, x, out):
    return [lambda: ops.negative(igamma_grad_a64(a, x)), lambda: ops.negative(_d_dx_gammainc(a, x))]


def _betainc_fraction(a, b, x, y):
    """I_x(a, b) for x < (a + 1) / (a + b + 2) (where the continued fraction converges fast), y = 1 - x given
    exactly: x^a y^b / (a B(a, b)) / (1 + d_1 / (1 + d_2 / (1 + ...))), d_2m+1 = -(a + m)(a + b + m) x /
    ((a + 2m)(a + 2m + 1)), d_2m = m (b - m) x / ((a + 2m - 1)(a + 2m)), by the modified Lentz method in one
    while_loop (two partial fractions a step) until every element has converged (at most 2000 steps)."""
    tiny = 1e-300

    def clamp_tiny(v):
        return ops.where(ops.less(ops.abs(v), tiny), tiny, v)

    def fold(d, c, f, coefficient):
        d = ops.reciprocal(clamp_tiny(ops.add(1.0, ops.multiply(coefficient, d))))
        c = clamp_tiny(ops.add(1.0, ops.divide(coefficient, c)))
        delta = ops.multiply(c, d)
        return d, c, ops.multiply(f, delta), delta

    def not_done(state):
        m, _, _, _, done = state
        return ops.logical_and(ops.less(m, MAX_ITERATIONS), ops.logical_not(ops.all(done)))

    def step(state):
        m, d, c, f_in, done = state
        f = f_in
        mf = ops.asarray(m, np.float64)
        two_m = ops.multiply(mf, 2.0)
        even = ops.divide(ops.multiply(ops.multiply(mf, ops.subtract(b, mf)), x),
                          ops.multiply(ops.add(ops.subtract(a, 1.0), two_m), ops.add(a, two_m)))
        d, c, f, _ = fold(d, c, f, even)
        odd = ops.negative(ops.divide(ops.multiply(ops.multiply(ops.add(a, mf), ops.add(ops.add(a, b), mf)), x),
                                      ops.multiply(ops.add(a, two_m), ops.add(ops.add(a, two_m), 1.0))))
        d, c, f, delta = fold(d, c, f, odd)
        f = ops.where(done, f_in, f)  # converged elements stay as they are
        done = ops.logical_or(done, ops.less_equal(ops.abs(ops.subtract(delta, 1.0)), EPS))
        return m + 1, d, c, f, done

    first = ops.negative(ops.divide(ops.multiply(ops.add(a, b), x), ops.add(a, 1.0)))  # d_1
    d0 = ops.reciprocal(clamp_tiny(ops.add(1.0, first)))
    # Lentz's start, the fraction's value f and D both 1 / (1 + d_1), C = 1
    state = (np.int32(1), d0, ops.ones_like(x), d0, ops.zeros_like(x, dtype=bool))
    _, _, _, f, _ = while_loop(not_done, step, state)
    log_front = ops.subtract(ops.add(ops.multiply(a, ops.log(x)), ops.multiply(b, ops.log(y))),
                             ops.add(ops.log(a), betaln64(a, b)))
    return ops.multiply(ops.exp(log_front), f)


def _betainc_both(a, b, x, y):
    """I_x(a, b) for a, b > 0 and x in [0, 1] with y = 1 - x, from the side where the continued fraction
    converges: 1 - I_y(b, a) for x > (a + 1) / (a + b + 2). scipy's values at the edges; NaN outside."""
    inside = ops.logical_and(ops.logical_and(ops.greater(a, 0.0), ops.greater(b, 0.0)),
                             ops.logical_and(ops.greater(x, 0.0), ops.greater(y, 0.0)))
    inside = ops.logical_and(inside, ops.logical_and(ops.isfinite(a), ops.isfinite(b)))
    swap = ops.greater(x, ops.divide(ops.add(a, 1.0), ops.add(ops.add(a, b), 2.0)))
    a1, b1 = ops.where(inside, ops.where(swap, b, a), 1.0), ops.where(inside, ops.where(swap, a, b), 1.0)
    x1, y1 = ops.where(inside, ops.where(swap, y, x), 0.5), ops.where(inside, ops.where(swap, x, y), 0.5)
    fraction = _betainc_fraction(a1, b1, x1, y1)
    value = ops.where(swap, ops.subtract(1.0, fraction), fraction)
    params_ok = ops.logical_and(ops.greater(a, 0.0), ops.greater(b, 0.0))
    edge = ops.where(ops.equal(x, 0.0), 0.0, ops.where(ops.equal(y, 0.0), 1.0, np.nan))
    return ops.where(inside, value, ops.where(params_ok, edge, np.nan))


def _d_dx_betainc(a, b, x, y):
    """x^(a-1) (1-x)^(b-1) / B(a, b), the derivative of I_x(a, b) in x."""
    ok = ops.logical_and(ops.greater(x, 0.0), ops.greater(y, 0.0))
    xs, ys = ops.where(ok, x, 0.5), ops.where(ok, y, 0.5)
    log_density = ops.subtract(ops.add(ops.multiply(ops.subtract(a, 1.0), ops.log(xs)),
                                       ops.multiply(ops.subtract(b, 1.0), ops.log(ys))), betaln64(a, b))
    return ops.where(ok, ops.exp(log_density), 0.0)


@kernel("betainc")
def betainc64(a, b, x, y):
    """I_x(a, b) with y = 1 - x passed along exactly (callers that know 1 - x better than 1 - x rounds give it)."""
    return _betainc_both(a, b, x, y)


@betainc64.defpartials
def _betainc64_partials(a, b, x, y, out):
    """x and y are one variable: each carries half of d/dx (with opposite signs), right both for y = 1 - x
    (dy = -dx) and for x = 1 - p, y = p (dx = -dp, dy = dp)."""
    return [lambda: _central_difference(lambda v: _betainc_both(v, b, x, y), a),
            lambda: _central_difference(lambda v: _betainc_both(a, v, x, y), b),
            lambda: ops.multiply(_d_dx_betainc(a, b, x, y), 0.5),
            lambda: ops.multiply(_d_dx_betainc(a, b, x, y), -0.5)]


_BESSEL_SERIES_BELOW = 40.0  # kiln.numpy.i0's split: the power series below, the asymptotic series above


_BESSEL_SERIES_TERMS = 80


_BESSEL_ASYMPTOTIC_TERMS = 20


def bessel_i_scaled(x, order: int):
    """exp(-|x|) I_order(|x|), order 0 or 1: the power series (x/2)^order sum_k (x^2/4)^k / (k! (k + order)!)
    (positive terms) times exp(-|x|) below 40; above, the asymptotic series
    (2 pi |x|)^(-1/2) sum_k (-1)^k prod_j (4 order^2 - (2j - 1)^2) / (k! (8|x|)^k), which needs no exponential."""
    ax = ops.abs(x)
    near = ops.less(ax, _BESSEL_SERIES_BELOW)
    xs = ops.where(near, ax, 0.0)
    quarter = ops.multiply(ops.multiply(xs, xs), 0.25)
    coeffs = [1.0 / (math.factorial(k) * math.factorial(k + order)) for k in range(_BESSEL_SERIES_TERMS)]
    series = ops.horner(quarter, coeffs)
    if order == 1:
        series = ops.multiply(series, ops.multiply(xs, 0.5))
    series = ops.multiply(series, ops.exp(ops.negative(xs)))
    xf = ops.where(near, _BESSEL_SERIES_BELOW, ax)
    w = ops.reciprocal(ops.multiply(xf, 8.0))
    asym_coeffs, c = [1.0], 1.0
    for k in range(1, _BESSEL_ASYMPTOTIC_TERMS):
        c *= -(4 * order * order - (2 * k - 1) ** 2) / k
        asym_coeffs.append(c)
    far = ops.divide(ops.horner(w, asym_coeffs), ops.sqrt(ops.multiply(xf, 2 * math.pi)))
    far = ops.where(ops.isinf(xf), 0.0, far)
    return ops.where(near, series, far)


def odd_extension(x, value):
    """value for x >= 0, -value for x < 0 (an odd function from its values at |x|)."""
    return ops.where(ops.less(x, 0.0), ops.negative(value), value)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _log_erfc(x):
    """log(erfc(x)) for x >= 0; beyond 26, where erfc nears the subnormals, from the asymptotic series
    erfc(x) = exp(-x^2) / (x sqrt(pi)) sum_n (-1)^n (2n-1)!! / (2x^2)^n (8 terms: the next is below 1e-19)."""
    far = ops.greater(x, 26.0)
    xf = ops.where(far, x, 26.0)
    u = ops.reciprocal(ops.multiply(ops.multiply(xf, xf), 2.0))
    series = ops.horner(u, [(-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(9)])
    asymptotic = ops.subtract(ops.subtract(ops.log(series), ops.multiply(xf, xf)),
                              ops.add(ops.log(xf), 0.5 * math.log(math.pi)))
    return ops.where(far, asymptotic, ops.log(erfc(ops.where(far, 26.0, x))))


def _erfinv_core(y, q):
    """x >= 0 with erf(x) = y, where q = 1 - y is given exactly (y in [0, 1], q in [0, 1]): Winitzki's closed
    form (relative error below 2e-3) refined by two Halley steps (q is used in the tail, so it keeps its relative
    accuracy down to the smallest subnormal)."""
    safe_q = ops.where(ops.greater(q, 0.0), q, 0.5)
    log_term = ops.log(ops.multiply(safe_q, ops.subtract(2.0, safe_q)))  # log(1 - y^2)
    a = 0.147
    c = ops.add(2.0 / (math.pi * a), ops.multiply(log_term, 0.5))
    x = ops.sqrt(ops.maximum(ops.subtract(ops.sqrt(ops.subtract(ops.multiply(c, c), ops.divide(log_term, a))), c), 0.0))
    tail = ops.less(q, 0.5)
    log_q = ops.log(safe_q)
    for _ in range(2):
        x2 = ops.multiply(x, x)
        # Halley's steps (cubic convergence), in the body on erf(x) - y, in the tail on log(erfc(x)) - log(q),
        # which is nearly linear in x^2 (on erfc(x) - q they converge slowly where x is large)
        u = ops.divide(ops.subtract(erf(x), y), ops.multiply(_TWO_OVER_SQRT_PI, ops.exp(ops.negative(x2))))
        body = ops.subtract(x, ops.divide(u, ops.add(1.0, ops.multiply(x, u))))
        log_erfc = _log_erfc(x)
        slope = ops.multiply(-_TWO_OVER_SQRT_PI, ops.exp(ops.subtract(ops.negative(x2), log_erfc)))  # g'
        g = ops.subtract(log_erfc, log_q)
        curvature = ops.multiply(slope, ops.subtract(ops.multiply(x, -2.0), slope))  # g''
        step = ops.divide(g, slope)
        halley = ops.divide(step, ops.subtract(1.0, ops.divide(ops.multiply(step, curvature),
                                                               ops.multiply(slope, 2.0))))
        x = ops.where(tail, ops.subtract(x, halley), body)
    return ops.where(ops.equal(q, 0.0), np.inf, x)


@kernel("erf_inv")
def erfinv64(y):
    ay = ops.abs(y)
    x = _erfinv_core(ay, ops.subtract(1.0, ay))
    x = ops.where(ops.greater(ay, 1.0), np.nan, x)
    return ops.where(ops.less(y, 0), ops.negative(x), ops.where(ops.equal(y, 0), y, x))


@erfinv64.defpartials
def _erfinv64_partials(y, out):
    return [lambda: ops.multiply(math.sqrt(math.pi) / 2.0, ops.exp(ops.multiply(out, out)))]


@kernel("erfcinv")
def erfcinv64(q):
    low = ops.less_equal(q, 1.0)
    qq = ops.where(low, q, ops.subtract(2.0, q))  # exact for q in [1, 2]
    qq = ops.where(ops.logical_and(ops.greater_equal(qq, 0.0), ops.less_equal(qq, 1.0)), qq, 1.0)
    x = _erfinv_core(ops.subtract(1.0, qq), qq)
    x = ops.where(low, x, ops.negative(x))
    inside = ops.logical_and(ops.greater_equal(q, 0.0), ops.less_equal(q, 2.0))
    return ops.where(inside, x, np.nan)


@erfcinv64.defpartials
def _erfcinv64_partials(q, out):
    return [lambda: ops.multiply(-math.sqrt(math.pi) / 2.0, ops.exp(ops.multiply(out, out)))]


def polygamma64(n, x):
    """The n-th derivative of digamma for whole n >= 0 (elementwise): digamma, trigamma, and for n >= 2
    (-1)^(n+1) n! zeta(n + 1, x); NaN for other n."""
    whole = ops.logical_and(ops.equal(n, ops.floor(n)), ops.greater_equal(n, 2.0))
    nn = ops.where(whole, n, 2.0)
    sign = ops.where(ops.equal(ops.remainder(nn, 2.0), 1.0), 1.0, -1.0)
    general = ops.multiply(ops.multiply(sign, ops.exp(gammaln64(ops.add(nn, 1.0)))), zeta64(ops.add(nn, 1.0), x))
    out = ops.where(whole, general, np.nan)
    return ops.where(ops.equal(n, 0.0), digamma64(x), ops.where(ops.equal(n, 1.0), trigamma64(x), out))


def random_gamma_grad64(a, x):
    """d x / d a for a Gamma(a, 1) sample x at a fixed CDF value (implicit reparameterization):
    -(dP/da) / (dP/dx), dP/dx being the Gamma(a) density x^(a-1) e^-x / Gamma(a)."""
    xs = ops.maximum(x, np.finfo(np.float64).tiny)
    log_density = ops.subtract(_log_gamma_density_front(a, xs), ops.log(xs))
    return ops.negative(ops.divide(igamma_grad_a64(a, xs), ops.exp(log_density)))


# XLA's float32 erf_inv (Giles' approximation): the polynomial in w = -log1p(-x^2) - 2.5 below 5, in
# sqrt(w) - 3 above.
_ERFINV_LT5 = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
               -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_GE5 = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
               0.00943887047, 1.00167406, 2.83297682)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def fma32(a, b, c):
    """a * b + c for float32 rounded once, as XLA's fused multiply-add (the float64 product is exact)."""
    return ops.asarray(ops.add(ops.multiply(ops.asarray(a), ops.asarray(b)), ops.asarray(c)), _F32)


@kernel("erf_inv32", np.float32)
def erf_inv32(x):
    """XLA's float32 erf_inv, operation for operation (kiln.random.normal's draws are JAX's through it)."""
    w = ops.negative(ops.log1p(ops.negative(ops.multiply(x, x))))
    lt = ops.less(w, np.float32(5.0))
    w = ops.where(lt, ops.subtract(w, np.float32(2.5)), ops.subtract(ops.sqrt(w), np.float32(3.0)))
    p = ops.where(lt, np.float32(_ERFINV_LT5[0]), np.float32(_ERFINV_GE5[0]))
    for a, b in zip(_ERFINV_LT5[1:], _ERFINV_GE5[1:]):
        p = fma32(p, w, ops.where(lt, np.float32(a), np.float32(b)))  # XLA fuses each step
    return ops.where(ops.equal(ops.abs(x), np.float32(1)), ops.multiply(x, np.float32(np.inf)), ops.multiply(p, x))


@erf_inv32.defpartials
def _erf_inv32_partials(x, out):
    return [lambda: ops.multiply(np.float32(math.sqrt(math.pi) / 2), ops.exp(ops.multiply(out, out)))]


# ---------------------------------------------------------------------------------------- lax's functions


def _operands(name: str, *xs):
    """lax's operands (a Python scalar takes the array's dtype): floating point, of one dtype and shape;
    (the operands in float64, their dtype)."""
    xs = api_operands(*xs)
    avals = [get_aval(x) for x in xs]
    dtype = avals[0].dtype
    if not dtypes.is_float(dtype):
        raise TypeError(f"{name}: operands must be floating-point; got {dtype}")
    if any(a.dtype != dtype for a in avals):
        raise TypeError(f"{name}: operands must have one dtype; got {', '.join(str(a.dtype) for a in avals)}")
    if any(a.shape != avals[0].shape for a in avals):
        raise TypeError(f"{name}: operands must have one shape; got {', '.join(str(a.shape) for a in avals)}")
    return [ops.asarray(x, _F64) for x in xs], dtype


def _narrow(y, dtype):
    return y if get_aval(y).dtype == dtype else prims.convert.bind(y, new_dtype=dtype)


def lgamma(x):
    """log|Gamma(x)| (inf at the poles 0, -1, -2, ...); its derivative is digamma."""
    (x,), dtype = _operands("lgamma", x)
    return _narrow(gammaln64(x), dtype)


def digamma(x):
    """The logarithmic derivative of Gamma (scipy's values at the poles); its derivative is polygamma(1, x)."""
    (x,), dtype = _operands("digamma", x)
    return _narrow(digamma64(x), dtype)


def polygamma(m, x):
    """The m-th derivative of digamma, m whole and >= 0 (an array of x's dtype, elementwise; NaN elsewhere)."""
    (m, x), dtype = _operands("polygamma", m, x)
    return _narrow(polygamma64(m, x), dtype)


def zeta(x, q):
    """The Hurwitz zeta function sum_k (q + k)^-x for x > 1 (NaN for x < 1, and for q < -2)."""
    (x, q), dtype = _operands("zeta", x, q)
    return _narrow(zeta64(x, q), dtype)


def erf_inv(x):
    """The inverse of erf on [-1, 1] (+-1 give +-inf, NaN outside). float32, float16 and bfloat16 by XLA's
    float32 polynomial (JAX's values, about 2 float32 ulp); float64 to a few ulp. The derivative is
    sqrt(pi)/2 exp(erf_inv(x)^2)."""
    (x,) = api_operands(x)
    dtype = get_aval(x).dtype
    if not dtypes.is_float(dtype):
        raise TypeError(f"erf_inv: operands must be floating-point; got {dtype}")
    if dtype == _F64:
        return erfinv64(x)
    return _narrow(erf_inv32(ops.asarray(x, _F32)), dtype)


def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x); derivatives: igamma_grad_a in a,
    x^(a-1) e^-x / Gamma(a) in x."""
    (a, x), dtype = _operands("igamma", a, x)
    return _narrow(gammainc64(a, x), dtype)


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x), accurate where it is small."""
    (a, x), dtype = _operands("igammac", a, x)
    return _narrow(gammaincc64(a, x), dtype)


def igamma_grad_a(a, x):
    """d igamma(a, x) / d a."""
    (a, x), dtype = _operands("igamma_grad_a", a, x)
    return _narrow(igamma_grad_a64(a, x), dtype)


def random_gamma_grad(a, x):
    """The derivative in a of a Gamma(a, 1) sample x drawn by inverting the CDF at a fixed point:
    -(d igamma(a, x) / d a) / (the Gamma(a) density at x)."""
    (a, x), dtype = _operands("random_gamma_grad", a, x)
    return _narrow(random_gamma_grad64(a, x), dtype)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b); the derivative in x is exact, those in a and b are
    float64 central differences (relative accuracy about 1e-9)."""
    (a, b, x), dtype = _operands("betainc", a, b, x)
    return _narrow(betainc64(a, b, x, ops.subtract(1.0, x)), dtype)


def bessel_i0e(x):
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0."""
    (x,), dtype = _operands("bessel_i0e", x)
    return _narrow(bessel_i_scaled(x, 0), dtype)


def bessel_i1e(x):
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1 (odd in x)."""
    (x,), dtype = _operands("bessel_i1e", x)
    return _narrow(odd_extension(x, bessel_i_scaled(x, 1)), dtype)
