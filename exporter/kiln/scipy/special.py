"""kiln.scipy.special: scipy.special's functions over kiln arrays (JAX's jax.scipy.special).

Every function is composed from kiln.numpy and kiln.lax operations, so it runs eagerly (numpy arrays in,
numpy arrays out), under kiln.jit and in exported modules alike. float16, bfloat16 and float32 inputs are
computed in float64 and rounded once to their own dtype; integer and bool inputs give float64 (float32 for
Python numbers in traced code, as JAX's weak types). docs/scipy.md states the accuracy of each function.
"""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as knp
from ..core import dtypes
from ..core.trace import is_eager
from ..lax.control_flow import while_loop
from ..lax.math_prims import erf as _lax_erf
from ..lax.math_prims import erfc as _lax_erfc
from ..numpy._base import aval, broadcast_all, convert, normalize_axes, promote
from ..transforms.api import stop_gradient
from ..transforms.custom import custom_jvp

__all__ = [
    "logsumexp", "softmax", "log_softmax", "expit", "logit", "erf", "erfc", "erfinv", "erfcinv", "ndtr",
    "ndtri", "log_ndtr", "gammaln", "digamma", "psi", "polygamma", "betaln", "xlogy", "xlog1py", "entr",
    "gammainc", "gammaincc", "betainc", "gamma", "gammasgn", "beta", "factorial", "multigammaln", "rel_entr",
    "kl_div", "i0", "i0e", "i1", "i1e", "zeta", "loggamma", "comb", "poch", "boxcox", "boxcox1p", "bernoulli",
    "erfcx", "exp1", "expn", "expi", "spence",
]


# --- operands ---------------------------------------------------------------------------

def float_operands(where: str, *xs):
    """(operands in float64, the result dtype), broadcast together: the common float dtype of the float arrays
    among the operands; float64 where the arrays are integers or bools (Python floats beside them do not make it
    float32, as in scipy), and for Python numbers alone eagerly (float32 traced, as JAX's weak types)."""
    ops = promote(*xs)
    dtype = aval(ops[0]).dtype
    strong = [aval(x) for x in xs if not dtypes.is_python_scalar(x) and not aval(x).weak_type]
    if not dtypes.is_float(dtype) or (strong and not any(dtypes.is_float(a.dtype) for a in strong)):
        dtype = np.dtype(np.float64 if strong or is_eager() else np.float32)  # ints, or Python numbers traced
    ops = broadcast_all(*[convert(o, np.float64) for o in ops], where=where)
    return ops, dtypes.canonical(dtype)


def narrow(y, dtype):
    """y rounded once to the result dtype."""
    return y if aval(y).dtype == dtype else convert(y, dtype)


def _wide(x):
    """(x in its compute dtype, the result dtype) for the reductions: float16/bfloat16 in float32, the
    per-row sums in float64 (_row_dtype)."""
    x = knp.asarray(x)
    dtype = aval(x).dtype
    if not dtypes.is_float(dtype):
        dtype = np.dtype(np.float32 if aval(x).weak_type and not is_eager() else np.float64)
        x = convert(x, dtype)
    if dtype.itemsize == 2:
        x = convert(x, np.float32)
    return x, dtypes.canonical(dtype)


# --- logsumexp, softmax, log_softmax -----------------------------------------------------

def _row_dtype(dtype):
    """Where per-row sums and logs are kept: float64 for float32 rows (cheap: once per row, or plain arithmetic
    per element), so that the results round once."""
    return np.dtype(np.float64) if dtype == np.float32 else dtype


def _shifted(x, axes):
    """(d, lo, m): x - max = d + lo exactly (Knuth's two-sum; lo is 0 where x - max is infinite or NaN), and the
    max as a row, infinite maxima replaced by 0."""
    m = stop_gradient(knp.max(x, axis=axes, keepdims=True))
    m = knp.where(knp.less(knp.abs(m), np.inf), m, knp.zeros_like(m))
    d = knp.subtract(x, m)
    back = knp.subtract(d, x)
    lo = knp.add(knp.subtract(x, knp.subtract(d, back)), knp.subtract(knp.negative(m), back))
    return d, knp.where(knp.isfinite(lo), lo, knp.zeros_like(lo)), m


def _exp_shifted(d, lo):
    """exp(x - max) = exp(d) (1 + lo) to first order: without lo, the rounding of x - max costs up to
    |x - max| / 2 ulp."""
    e = knp.exp(d)
    return knp.add(e, knp.multiply(e, lo))


def _log_sum_exp_shifted(x, axes):
    """(d, lo, m, log(sum(exp(x - m)))), the sums and the log in the row dtype: the log as log1p((k - 1) + t),
    with k the number of maxima and t the sum of the other terms, so that a dominant maximum keeps the log's
    relative accuracy (log(1 + 1e-20) is 1e-20, not 0). The maxima enter t as d (1 + d (1/2 + d/6)) = 0, whose
    derivatives at 0 are those of exp(d) - 1."""
    d, lo, m = _shifted(x, axes)
    row = _row_dtype(aval(x).dtype)
    e = _exp_shifted(d, lo)
    top = knp.equal(d, 0)
    near = knp.multiply(d, knp.add(knp.multiply(d, knp.add(knp.multiply(d, 1.0 / 6.0), 0.5)), 1.0))
    t = knp.sum(knp.where(top, near, e), axis=axes, keepdims=True, dtype=row)
    k = knp.sum(top, axis=axes, keepdims=True, dtype=row)
    return d, lo, m, knp.log1p(knp.add(knp.subtract(k, 1.0), t))


def _weighted_log_sum_exp(x, b, axes):
    """(log|sum(b exp(x))|, sign of the sum) as rows: terms with b == 0 are left out (as -inf)."""
    row = _row_dtype(aval(x).dtype)
    x = knp.where(knp.equal(b, 0), -np.inf, x)
    m = stop_gradient(knp.max(x, axis=axes, keepdims=True))
    m = knp.where(knp.isfinite(m), m, knp.zeros_like(m))
    s = knp.sum(knp.multiply(convert(b, row), knp.exp(convert(knp.subtract(x, m), row))), axis=axes, keepdims=True)
    sign = knp.sign(s)
    return knp.add(knp.log(knp.abs(s)), convert(m, row)), sign


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False):
    """scipy.special.logsumexp: log(sum(b * exp(a), axis)), the max subtracted first. With b, a negative sum
    gives NaN unless return_sign=True, which returns (log|sum|, sign of the sum) as scipy does."""
    x, dtype = _wide(a)
    if b is not None:
        b = knp.asarray(b)
        x, b = broadcast_all(x, convert(b, aval(x).dtype), where="logsumexp")
    axes = normalize_axes(axis, aval(x).ndim, "logsumexp")
    if b is None:
        if axes:
            _, _, m, log_s = _log_sum_exp_shifted(x, axes)
            out = knp.add(convert(m, aval(log_s).dtype), log_s)
        else:
            out = x
        sign = knp.where(knp.equal(out, -np.inf), 0.0, 1.0)
    else:
        out, sign = _weighted_log_sum_exp(x, b, axes)
        if not return_sign:
            out = knp.where(knp.less(sign, 0), np.nan, out)
    if not keepdims and axes:
        out, sign = knp.squeeze(out, axis=axes), knp.squeeze(sign, axis=axes)
    return (narrow(out, dtype), narrow(convert(sign, aval(out).dtype), dtype)) if return_sign else narrow(out, dtype)


def softmax(x, axis=None):
    """scipy.special.softmax: exp(x) / sum(exp(x), axis), the max subtracted first (the sums of float32 rows
    in float64). scipy's default axis=None normalizes over the whole array (kiln.nn.softmax's is -1)."""
    x, dtype = _wide(x)
    axes = normalize_axes(axis, aval(x).ndim, "softmax")
    d, lo, _ = _shifted(x, axes)
    e = _exp_shifted(d, lo)
    return narrow(knp.divide(e, knp.sum(e, axis=axes, keepdims=True)), dtype)


def log_softmax(x, axis=None):
    """scipy.special.log_softmax: x - logsumexp(x, axis, keepdims=True), as (x - max) - log(sum(exp(x - max))),
    the log and the subtraction in float64 for float32 x (rounded once)."""
    x, dtype = _wide(x)
    axes = normalize_axes(axis, aval(x).ndim, "log_softmax")
    d, lo, _, log_s = _log_sum_exp_shifted(x, axes)
    row = aval(log_s).dtype
    return narrow(knp.add(knp.subtract(convert(d, row), log_s), convert(lo, row)), dtype)


# --- logistic -----------------------------------------------------------------------------

def expit(x):
    """1 / (1 + exp(-x)) with e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) below (both tails keep their
    relative accuracy; nothing overflows)."""
    (x,), dtype = float_operands("expit", x)
    pos = knp.greater_equal(x, 0)
    e = knp.exp(knp.where(pos, knp.negative(x), x))
    return narrow(knp.where(pos, knp.reciprocal(knp.add(e, 1.0)), knp.divide(e, knp.add(e, 1.0))), dtype)


def logit(p):
    """log(p / (1 - p)): log1p((2p - 1) / (1 - p)) on [1/4, 3/4] (2p - 1 is exact there, so the result keeps its
    relative accuracy near p = 1/2), log(p) - log1p(-p) outside; 0 -> -inf, 1 -> inf, outside [0, 1] NaN."""
    (p,), dtype = float_operands("logit", p)
    middle = knp.logical_and(knp.greater_equal(p, 0.25), knp.less_equal(p, 0.75))
    pm = knp.where(middle, p, 0.5)
    near = knp.log1p(knp.divide(knp.subtract(knp.multiply(pm, 2.0), 1.0), knp.subtract(1.0, pm)))
    po = knp.where(middle, 0.1, p)
    inside = knp.logical_and(knp.greater_equal(po, 0.0), knp.less_equal(po, 1.0))
    po = knp.where(inside, po, 0.1)
    with np.errstate(divide="ignore"):
        far = knp.subtract(knp.log(po), knp.log1p(knp.negative(po)))
    far = knp.where(inside, far, np.nan)
    return narrow(knp.where(middle, near, knp.where(knp.isnan(p), p, far)), dtype)


# --- error function and the normal distribution's functions ---------------------------------

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erf(x):
    """The error function (kiln's erf primitive: float64 within 2 ulp, docs/accuracy.md)."""
    (x,), dtype = float_operands("erf", x)
    return narrow(_lax_erf(x), dtype)


def erfc(x):
    """1 - erf(x), accurate in the right tail (kiln's erfc primitive)."""
    (x,), dtype = float_operands("erfc", x)
    return narrow(_lax_erfc(x), dtype)


def _log_erfc(x):
    """log(erfc(x)) for x >= 0; beyond 26, where erfc nears the subnormals, from the asymptotic series
    erfc(x) = exp(-x^2) / (x sqrt(pi)) sum_n (-1)^n (2n-1)!! / (2x^2)^n (8 terms: the next is below 1e-19)."""
    far = knp.greater(x, 26.0)
    xf = knp.where(far, x, 26.0)
    u = knp.reciprocal(knp.multiply(knp.multiply(xf, xf), 2.0))
    series = _horner(u, [(-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(9)])
    asymptotic = knp.subtract(knp.subtract(knp.log(series), knp.multiply(xf, xf)),
                              knp.add(knp.log(xf), 0.5 * math.log(math.pi)))
    return knp.where(far, asymptotic, knp.log(_lax_erfc(knp.where(far, 26.0, x))))


def _erfinv_core(y, q):
    """x >= 0 with erf(x) = y, where q = 1 - y is given exactly (y in [0, 1], q in [0, 1]): Winitzki's closed
    form (relative error below 2e-3) refined by two Halley steps (q is used in the tail, so it keeps its relative
    accuracy down to the smallest subnormal)."""
    safe_q = knp.where(knp.greater(q, 0.0), q, 0.5)
    log_term = knp.log(knp.multiply(safe_q, knp.subtract(2.0, safe_q)))  # log(1 - y^2)
    a = 0.147
    c = knp.add(2.0 / (math.pi * a), knp.multiply(log_term, 0.5))
    x = knp.sqrt(knp.maximum(knp.subtract(knp.sqrt(knp.subtract(knp.multiply(c, c), knp.divide(log_term, a))), c), 0.0))
    tail = knp.less(q, 0.5)
    log_q = knp.log(safe_q)
    for _ in range(2):
        x2 = knp.multiply(x, x)
        # Halley's steps (cubic convergence), in the body on erf(x) - y, in the tail on log(erfc(x)) - log(q),
        # which is nearly linear in x^2 (on erfc(x) - q they converge slowly where x is large)
        u = knp.divide(knp.subtract(_lax_erf(x), y), knp.multiply(_TWO_OVER_SQRT_PI, knp.exp(knp.negative(x2))))
        body = knp.subtract(x, knp.divide(u, knp.add(1.0, knp.multiply(x, u))))
        log_erfc = _log_erfc(x)
        slope = knp.multiply(-_TWO_OVER_SQRT_PI, knp.exp(knp.subtract(knp.negative(x2), log_erfc)))  # g'
        g = knp.subtract(log_erfc, log_q)
        curvature = knp.multiply(slope, knp.subtract(knp.multiply(x, -2.0), slope))  # g''
        step = knp.divide(g, slope)
        halley = knp.divide(step, knp.subtract(1.0, knp.divide(knp.multiply(step, curvature), knp.multiply(slope, 2.0))))
        x = knp.where(tail, knp.subtract(x, halley), body)
    return knp.where(knp.equal(q, 0.0), np.inf, x)


@custom_jvp
def _erfinv64(y):
    ay = knp.abs(y)
    x = _erfinv_core(ay, knp.subtract(1.0, ay))
    x = knp.where(knp.greater(ay, 1.0), np.nan, x)
    return knp.where(knp.less(y, 0), knp.negative(x), knp.where(knp.equal(y, 0), y, x))


@_erfinv64.defjvp
def _erfinv64_jvp(primals, tangents):
    (y,), (dy,) = primals, tangents
    x = _erfinv64(y)
    return x, knp.multiply(dy, knp.multiply(math.sqrt(math.pi) / 2.0, knp.exp(knp.multiply(x, x))))


def erfinv(y):
    """The inverse of erf on [-1, 1] (±1 -> ±inf, outside NaN); float64 within a few ulp (docs/scipy.md).
    The derivative is sqrt(pi)/2 exp(erfinv(y)^2)."""
    (y,), dtype = float_operands("erfinv", y)
    return narrow(_erfinv64(y), dtype)


@custom_jvp
def _erfcinv64(q):
    low = knp.less_equal(q, 1.0)
    qq = knp.where(low, q, knp.subtract(2.0, q))  # exact for q in [1, 2]
    qq = knp.where(knp.logical_and(knp.greater_equal(qq, 0.0), knp.less_equal(qq, 1.0)), qq, 1.0)
    x = _erfinv_core(knp.subtract(1.0, qq), qq)
    x = knp.where(low, x, knp.negative(x))
    inside = knp.logical_and(knp.greater_equal(q, 0.0), knp.less_equal(q, 2.0))
    return knp.where(inside, x, np.nan)


@_erfcinv64.defjvp
def _erfcinv64_jvp(primals, tangents):
    (q,), (dq,) = primals, tangents
    x = _erfcinv64(q)
    return x, knp.multiply(dq, knp.multiply(-math.sqrt(math.pi) / 2.0, knp.exp(knp.multiply(x, x))))


def erfcinv(q):
    """The inverse of erfc on [0, 2] (0 -> inf, 2 -> -inf, outside NaN), accurate in the tail (q down to 1e-308)."""
    (q,), dtype = float_operands("erfcinv", q)
    return narrow(_erfcinv64(q), dtype)


def ndtr(x):
    """The standard normal CDF, erfc(-x/sqrt(2)) / 2 (JAX's formula: the rounding of x/sqrt(2) costs a relative
    2 x^2 2^-53 in the left tail)."""
    (x,), dtype = float_operands("ndtr", x)
    return narrow(knp.multiply(_lax_erfc(knp.multiply(x, -_SQRT1_2)), 0.5), dtype)


def ndtri(p):
    """The standard normal quantile, -sqrt(2) erfcinv(2p): 0 -> -inf, 1 -> inf, outside [0, 1] NaN."""
    (p,), dtype = float_operands("ndtri", p)
    return narrow(knp.multiply(_erfcinv64(knp.multiply(p, 2.0)), -math.sqrt(2.0)), dtype)


def _log_ndtr_asymptotic(x):
    """log Phi(x) for x <= -20: -x^2/2 - log(-x) - log(2 pi)/2 + log(1 - 1/x^2 + 3/x^4 - 15/x^6 ...), ten terms
    of the series (the next is below 1e-17)."""
    z = knp.reciprocal(knp.multiply(x, x))
    total = 0.0
    for k in range(10, 0, -1):  # Horner in z: sum_k (-1)^k (2k-1)!! z^k
        coeff = (-1) ** k * math.prod(range(1, 2 * k, 2))
        total = knp.multiply(z, knp.add(total, coeff))
    series = knp.log1p(total)
    return knp.add(knp.subtract(knp.subtract(knp.multiply(knp.multiply(x, x), -0.5), knp.log(knp.negative(x))),
                                0.5 * math.log(2 * math.pi)), series)


def log_ndtr(x):
    """log of the standard normal CDF: log1p(-ndtr(-x)) for x > 0, log(ndtr(x)) down to -20, the asymptotic
    series below (log_ndtr(-1e5) = -5.0e9 as scipy)."""
    (x,), dtype = float_operands("log_ndtr", x)
    right = knp.greater(x, 0.0)
    deep = knp.less(x, -20.0)
    xr = knp.where(right, x, 1.0)
    xm = knp.where(knp.logical_or(right, deep), -1.0, x)
    xd = knp.where(deep, x, -30.0)
    r = knp.log1p(knp.multiply(_lax_erfc(knp.multiply(xr, _SQRT1_2)), -0.5))
    m = knp.log(knp.multiply(_lax_erfc(knp.multiply(xm, -_SQRT1_2)), 0.5))
    out = knp.where(right, r, knp.where(deep, _log_ndtr_asymptotic(xd), m))
    return narrow(knp.where(knp.isnan(x), x, out), dtype)


# --- gamma function family -----------------------------------------------------------------

_EULER = 0.57721566490153286060651209008240243


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
_LGAMMA2_COEFFS = [0.0, 1.0 - _EULER] + [(-1) ** k * _zeta_minus_one(k) / k for k in range(2, 33)]

# Stirling's series of lgamma(y) - ((y - 1/2) log y - y + log(2 pi)/2) in 1/y, for y >= 10: B_2k / (2k (2k-1) y^(2k-1)).
_STIRLING = [1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400]


def _horner(t, coeffs):
    """sum coeffs[k] t^k."""
    total = coeffs[-1]
    for c in coeffs[-2::-1]:
        total = knp.add(knp.multiply(total, t), c)
    return total


def _lgamma_near_two(t):
    return _horner(t, _LGAMMA2_COEFFS)


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
    stirling = knp.multiply(w, _horner(knp.multiply(w, w), _STIRLING))
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
    return knp.multiply(r, _horner(r2, _SIN_PI)), _horner(r2, _COS_PI)


@custom_jvp
def _gammaln64(x):
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


@_gammaln64.defjvp
def _gammaln64_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _gammaln64(x), knp.multiply(dx, _digamma64(x))


def gammaln(x):
    """log|Gamma(x)|; inf at the poles 0, -1, -2, ...; the derivative is digamma."""
    (x,), dtype = float_operands("gammaln", x)
    return narrow(_gammaln64(x), dtype)


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
    at_y = knp.add(knp.subtract(knp.log(yf), knp.divide(0.5, yf)), _horner(w2, _DIGAMMA_ASYMPTOTIC))
    return knp.subtract(knp.where(finite, at_y, np.inf), s)


@custom_jvp
def _digamma64(x):
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


@_digamma64.defjvp
def _digamma64_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _digamma64(x), knp.multiply(dx, _trigamma64(x))


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
                   knp.multiply(w, _horner(knp.multiply(w, w), _TRIGAMMA_ASYMPTOTIC)))
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
    return narrow(_digamma64(x), dtype)


psi = digamma


def polygamma(n, x):
    """The n-th derivative of digamma for a static integer n >= 0: digamma, trigamma, and for n >= 2
    (-1)^(n+1) n! zeta(n + 1, x)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"polygamma: n must be a non-negative Python integer (the order), got {n!r}")
    (x,), dtype = float_operands("polygamma", x)
    if n == 0:
        return narrow(_digamma64(x), dtype)
    if n == 1:
        return narrow(_trigamma64(x), dtype)
    return narrow(knp.multiply((-1.0) ** (n + 1) * math.factorial(n), _zeta64(float(n + 1), x)), dtype)


def betaln(a, b):
    """log|B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)."""
    (a, b), dtype = float_operands("betaln", a, b)
    return narrow(knp.subtract(knp.add(_gammaln64(a), _gammaln64(b)), _gammaln64(knp.add(a, b))), dtype)


# --- x log y -----------------------------------------------------------------------------------

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


# --- regularized incomplete gamma functions --------------------------------------------------------

_MAX_ITERATIONS = 2000
_EPS = 2.0 ** -53


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
        return knp.logical_and(knp.less(n, _MAX_ITERATIONS), knp.logical_not(knp.all(done)))

    def step(state):
        n, term, total, f, c, d, done = state
        nf = knp.asarray(n, np.float64)
        # series
        term = knp.multiply(term, knp.divide(x, knp.add(a, nf)))
        total = knp.where(done, total, knp.add(total, term))  # converged elements stay as they are
        series_done = knp.less_equal(knp.abs(term), knp.multiply(knp.abs(total), _EPS))
        # continued fraction: b_n = x + 2n + 1 - a, a_n = -n (n - a)
        b_n = knp.add(knp.subtract(x, a), knp.add(knp.multiply(nf, 2.0), 1.0))
        a_n = knp.negative(knp.multiply(nf, knp.subtract(nf, a)))
        d = knp.add(b_n, knp.multiply(a_n, d))
        d = knp.reciprocal(knp.where(knp.less(knp.abs(d), tiny), tiny, d))
        c = knp.add(b_n, knp.divide(a_n, c))
        c = knp.where(knp.less(knp.abs(c), tiny), tiny, c)
        delta = knp.multiply(c, d)
        f = knp.where(done, f, knp.multiply(f, delta))
        fraction_done = knp.less_equal(knp.abs(knp.subtract(delta, 1.0)), _EPS)
        done = knp.logical_or(done, knp.where(series, series_done, fraction_done))
        return n + 1, term, total, f, c, d, done

    ones = knp.ones_like(x)
    b0 = knp.add(knp.subtract(x, a), 1.0)
    f0 = knp.where(knp.less(knp.abs(b0), tiny), tiny, b0)
    state = (np.int32(1), ones, ones, f0, f0, knp.zeros_like(x), knp.zeros_like(x, dtype=bool))
    _, _, total, f, _, _, _ = while_loop(not_done, step, state)
    log_front = knp.subtract(knp.subtract(knp.multiply(a, knp.log(x)), x), _gammaln64(a))  # x^a e^-x / Gamma(a)
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
    value = knp.exp(knp.subtract(knp.subtract(knp.multiply(knp.subtract(a, 1.0), knp.log(safe)), safe), _gammaln64(a)))
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


# --- regularized incomplete beta function ----------------------------------------------------------

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
        return knp.logical_and(knp.less(m, _MAX_ITERATIONS), knp.logical_not(knp.all(done)))

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
        done = knp.logical_or(done, knp.less_equal(knp.abs(knp.subtract(delta, 1.0)), _EPS))
        return m + 1, d, c, f, done

    first = knp.negative(knp.divide(knp.multiply(knp.add(a, b), x), knp.add(a, 1.0)))  # d_1
    d0 = knp.reciprocal(clamp_tiny(knp.add(1.0, first)))
    # Lentz's start, the fraction's value f and D both 1 / (1 + d_1), C = 1
    state = (np.int32(1), d0, knp.ones_like(x), d0, knp.zeros_like(x, dtype=bool))
    _, _, _, f, _ = while_loop(not_done, step, state)
    log_front = knp.subtract(knp.add(knp.multiply(a, knp.log(x)), knp.multiply(b, knp.log(y))),
                             knp.add(knp.log(a), _betaln64(a, b)))
    return knp.multiply(knp.exp(log_front), f)


def _betaln64(a, b):
    return knp.subtract(knp.add(_gammaln64(a), _gammaln64(b)), _gammaln64(knp.add(a, b)))


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
                                       knp.multiply(knp.subtract(b, 1.0), knp.log(ys))), _betaln64(a, b))
    return knp.where(ok, knp.exp(log_density), 0.0)


def _central_difference(fn, v):
    """d fn / d v by a float64 central difference with step 1e-5 max(v, 1)."""
    h = knp.multiply(knp.maximum(knp.abs(v), 1.0), 1e-5)
    return knp.divide(knp.subtract(fn(knp.add(v, h)), fn(knp.subtract(v, h))), knp.multiply(h, 2.0))


@custom_jvp
def _betainc64(a, b, x, y):
    """I_x(a, b) with y = 1 - x passed along exactly (callers that know 1 - x better than 1 - x rounds give it)."""
    return _betainc_both(a, b, x, y)


@_betainc64.defjvp
def _betainc64_jvp(primals, tangents):
    """x and y are one variable: the tangent of x is taken as (dx - dy) / 2, right both for y = 1 - x (dy = -dx)
    and for x = 1 - p, y = p (dx = -dp, dy = dp)."""
    (a, b, x, y), (da, db, dx, dy) = primals, tangents
    d_a = _central_difference(lambda v: _betainc_both(v, b, x, y), a)
    d_b = _central_difference(lambda v: _betainc_both(a, v, x, y), b)
    d_x = knp.multiply(knp.subtract(dx, dy), 0.5)
    dp = knp.add(knp.add(knp.multiply(da, d_a), knp.multiply(db, d_b)), knp.multiply(d_x, _d_dx_betainc(a, b, x, y)))
    return _betainc64(a, b, x, y), dp


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (JAX's argument order). The derivative in x is exact;
    those in a and b are float64 central differences (relative accuracy about 1e-9)."""
    (a, b, x), dtype = float_operands("betainc", a, b, x)
    return narrow(_betainc64(a, b, x, knp.subtract(1.0, x)), dtype)


# --- Gamma itself and what is built from gammaln ----------------------------------------------------

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
    return knp.multiply(_gammasgn64(x), knp.exp(_gammaln64(x)))


def gamma(x):
    """Gamma(x) = gammasgn(x) exp(gammaln(x)) (as JAX): the exponential multiplies gammaln's absolute error,
    so the relative error grows to about 1e-13 near the overflow at 171.6."""
    (x,), dtype = float_operands("gamma", x)
    return narrow(_gamma64(x), dtype)


def beta(a, b):
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), as the signs times exp(betaln)."""
    (a, b), dtype = float_operands("beta", a, b)
    sign = knp.multiply(knp.multiply(_gammasgn64(a), _gammasgn64(b)), _gammasgn64(knp.add(a, b)))
    return narrow(knp.multiply(sign, knp.exp(_betaln64(a, b))), dtype)


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
        total = knp.add(total, _gammaln64(knp.subtract(a, 0.5 * j)))
    return narrow(total, dtype)


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


# --- modified Bessel functions of the first kind, orders 0 and 1 -----------------------------------

_BESSEL_SERIES_BELOW = 40.0  # kiln.numpy.i0's split: the power series below, the asymptotic series above
_BESSEL_SERIES_TERMS = 80
_BESSEL_ASYMPTOTIC_TERMS = 20


def _bessel_i_scaled(x, order: int):
    """exp(-|x|) I_order(|x|), order 0 or 1: the power series (x/2)^order sum_k (x^2/4)^k / (k! (k + order)!)
    (positive terms) times exp(-|x|) below 40; above, the asymptotic series
    (2 pi |x|)^(-1/2) sum_k (-1)^k prod_j (4 order^2 - (2j - 1)^2) / (k! (8|x|)^k), which needs no exponential."""
    ax = knp.abs(x)
    near = knp.less(ax, _BESSEL_SERIES_BELOW)
    xs = knp.where(near, ax, 0.0)
    quarter = knp.multiply(knp.multiply(xs, xs), 0.25)
    coeffs = [1.0 / (math.factorial(k) * math.factorial(k + order)) for k in range(_BESSEL_SERIES_TERMS)]
    series = _horner(quarter, coeffs)
    if order == 1:
        series = knp.multiply(series, knp.multiply(xs, 0.5))
    series = knp.multiply(series, knp.exp(knp.negative(xs)))
    xf = knp.where(near, _BESSEL_SERIES_BELOW, ax)
    w = knp.reciprocal(knp.multiply(xf, 8.0))
    asym_coeffs, c = [1.0], 1.0
    for k in range(1, _BESSEL_ASYMPTOTIC_TERMS):
        c *= -(4 * order * order - (2 * k - 1) ** 2) / k
        asym_coeffs.append(c)
    far = knp.divide(_horner(w, asym_coeffs), knp.sqrt(knp.multiply(xf, 2 * math.pi)))
    far = knp.where(knp.isinf(xf), 0.0, far)
    return knp.where(near, series, far)


def _odd(x, value):
    return knp.where(knp.less(x, 0.0), knp.negative(value), value)


def i0e(x):
    """exp(-|x|) I0(x), finite for every x (I0 itself overflows beyond 713)."""
    (x,), dtype = float_operands("i0e", x)
    return narrow(_bessel_i_scaled(x, 0), dtype)


def i1e(x):
    """exp(-|x|) I1(x) (odd in x)."""
    (x,), dtype = float_operands("i1e", x)
    return narrow(_odd(x, _bessel_i_scaled(x, 1)), dtype)


def _unscaled(x, order):
    """I_order(|x|) = exp(|x|) i_order_e(|x|), the exponential as exp(|x|/2)^2 so that it overflows only where
    the result does."""
    half = knp.exp(knp.multiply(knp.abs(x), 0.5))
    return knp.multiply(knp.multiply(_bessel_i_scaled(x, order), half), half)  # NaN at +-inf, as scipy


def i0(x):
    """The modified Bessel function I0: kiln.numpy.i0 (one implementation), in scipy's dtypes."""
    (x,), dtype = float_operands("i0", x)
    return narrow(knp.i0(x), dtype)


def i1(x):
    """The modified Bessel function I1 (odd in x), by i1e's series; NaN at +-inf as scipy's."""
    (x,), dtype = float_operands("i1", x)
    return narrow(_odd(x, _unscaled(x, 1)), dtype)


# --- Hurwitz zeta and what is built on it ----------------------------------------------------------

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


def loggamma(x):
    """log(Gamma(x)) for real x > 0; NaN elsewhere (JAX's real branch; scipy continues it to complex values)."""
    (x,), dtype = float_operands("loggamma", x)
    return narrow(knp.where(knp.greater(x, 0.0), _gammaln64(knp.where(knp.greater(x, 0.0), x, 1.0)), np.nan), dtype)


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
    log_value = knp.subtract(knp.subtract(_gammaln64(knp.add(ns, 1.0)), _gammaln64(knp.add(ks, 1.0))),
                             _gammaln64(knp.add(knp.subtract(ns, ks), 1.0)))
    return narrow(knp.where(inside, knp.exp(log_value), 0.0), dtype)


def poch(z, m):
    """The rising factorial Gamma(z + m) / Gamma(z), as the signs times exp(gammaln(z + m) - gammaln(z)): 1 for
    m = 0, 0 where z is a pole and z + m is not (scipy's value); NaN where both are poles."""
    (z, m), dtype = float_operands("poch", z, m)
    zm = knp.add(z, m)
    value = knp.multiply(knp.multiply(_gammasgn64(zm), _gammasgn64(z)), knp.exp(knp.subtract(_gammaln64(zm), _gammaln64(z))))

    def pole(v):
        return knp.logical_and(knp.less_equal(v, 0.0), knp.equal(v, knp.floor(v)))

    value = knp.where(knp.logical_and(pole(z), knp.logical_not(pole(zm))), 0.0, value)
    return narrow(knp.where(knp.equal(m, 0.0), 1.0, value), dtype)


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


# --- scaled complementary error function --------------------------------------------------------------

def _square_exactly(x):
    """(hi, lo) with hi + lo = x * x exactly (Veltkamp's split of x into two 26-bit halves)."""
    c = knp.multiply(x, 134217729.0)
    x_hi = knp.subtract(c, knp.subtract(c, x))
    x_lo = knp.subtract(x, x_hi)
    hi = knp.multiply(x, x)
    lo = knp.add(knp.add(knp.subtract(knp.multiply(x_hi, x_hi), hi), knp.multiply(knp.multiply(x_hi, x_lo), 2.0)),
                 knp.multiply(x_lo, x_lo))
    return hi, lo


def _erfcx_nonnegative(x):
    """exp(x^2) erfc(x) for x >= 0: with x^2 split exactly, exp(hi) (1 + lo) erfc(x) up to 26; beyond, the
    asymptotic series 1 / (x sqrt(pi)) sum_n (-1)^n (2n-1)!! / (2x^2)^n (8 terms)."""
    far = knp.greater(x, 26.0)
    xn = knp.where(far, 26.0, x)
    hi, lo = _square_exactly(xn)
    near = knp.multiply(knp.multiply(knp.exp(hi), knp.add(1.0, lo)), _lax_erfc(xn))
    xf = knp.where(far, x, 26.0)
    u = knp.reciprocal(knp.multiply(knp.multiply(xf, xf), 2.0))
    series = _horner(u, [(-1) ** n * math.prod(range(1, 2 * n, 2)) for n in range(9)])
    asymptotic = knp.divide(series, knp.multiply(xf, math.sqrt(math.pi)))
    return knp.where(far, knp.where(knp.isinf(xf), 0.0, asymptotic), near)


def erfcx(x):
    """The scaled complementary error function exp(x^2) erfc(x): 2 exp(x^2) - erfcx(-x) below 0 (overflowing
    where exp(x^2) does)."""
    (x,), dtype = float_operands("erfcx", x)
    ax = knp.abs(x)
    positive = _erfcx_nonnegative(ax)
    hi, lo = _square_exactly(knp.where(knp.less(x, 0.0), knp.minimum(ax, 27.0), 0.0))
    negative = knp.subtract(knp.multiply(knp.multiply(knp.exp(hi), knp.add(1.0, lo)), 2.0), positive)
    negative = knp.where(knp.greater(ax, 27.0), np.inf, negative)
    out = knp.where(knp.less(x, 0.0), negative, positive)
    return narrow(knp.where(knp.isnan(x), x, out), dtype)


# --- exponential integrals ---------------------------------------------------------------------------

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
    lead = knp.divide(knp.power(knp.negative(x), knp.subtract(n, 1.0)), knp.exp(_gammaln64(n)))
    return knp.subtract(knp.multiply(lead, knp.subtract(_digamma64(n), knp.log(x))), total)


def _en_fraction(n, x):
    """E_n(x) for x > 1: e^-x / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...))) by the modified
    Lentz method in one while_loop until every element converged (at most 2000 steps)."""
    tiny = 1e-300

    def not_done(state):
        i, _, _, _, done = state
        return knp.logical_and(knp.less(i, _MAX_ITERATIONS), knp.logical_not(knp.all(done)))

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
        return i + 1, c, d, f, knp.logical_or(done, knp.less_equal(knp.abs(knp.subtract(delta, 1.0)), _EPS))

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
    series = _horner(xs, [0.0] + [1.0 / (k * math.factorial(k)) for k in range(1, _EI_SERIES_TERMS)])
    at_near = knp.add(knp.add(_EULER, knp.log(xs)), series)
    far = knp.greater_equal(x, _EI_SERIES_BELOW)
    xf = knp.where(far, x, _EI_SERIES_BELOW)
    asymptotic = _horner(knp.reciprocal(xf), [float(math.factorial(k)) for k in range(_EI_ASYMPTOTIC_TERMS)])
    half = knp.exp(knp.multiply(xf, 0.5))
    at_far = knp.multiply(knp.multiply(knp.divide(half, xf), half), asymptotic)
    out = knp.where(negative, below, knp.where(near, at_near, knp.where(knp.equal(x, 0.0), -np.inf, at_far)))
    return knp.where(knp.isnan(x), x, out)


@_expi64.defjvp
def _expi64_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _expi64(x), knp.multiply(dx, knp.divide(knp.exp(x), x))


# --- Spence's function (the dilogarithm) -------------------------------------------------------------------

_DILOG_TERMS = 60  # |y| <= 1/2: the k-th term is below 2^-k / k^2


def _dilog_small(y):
    """Li2(y) = sum_k y^k / k^2 for |y| <= 1/2."""
    return knp.multiply(y, _horner(y, [1.0 / (k + 1) ** 2 for k in range(_DILOG_TERMS)]))


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
