"""Accuracy of the composite functions (kiln.nn and the float power) compiled with kiln.jit, in ulp of the
result dtype, on dense grids; and of the float16 / bfloat16 storage types over every finite value.

- float32: the reference is float64 (stable formulas, math.erfc), rounded to float32.
- float64: the reference is computed with Python's decimal module to 40 digits (exp, ln, a series or continued
  fraction for erfc), rounded to float64.
- float16 and bfloat16: every finite value; the reference is the float64 result rounded to the storage type.
  docs/accuracy.md claims these are computed in float32 and rounded once (at most the float32 error plus half
  an ulp of the storage type): the bound is 1 ulp of the storage type for every function.

The bounds (BOUNDS_*) are the ones stated in docs/accuracy.md: a little above what was measured.
KILN_ACCURACY_REPORT=1 pytest -s tests/test_nn_accuracy.py prints the measured errors instead of asserting."""
import math
import os
from decimal import Decimal, localcontext

import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.numpy as knp
from references import PI_DECIMAL, decimal_erfc, ulps

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(2024)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# ----------------------------------------------------------------------------- ulp distance

def max_ulps(got, want, x, label):
    """The largest ulp error over the finite reference values (NaN and infinities must match exactly)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (label, got.dtype, want.dtype, got.shape, want.shape)
    gnan, wnan = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
    assert np.array_equal(gnan, wnan), (label, "NaN differs at", np.asarray(x)[gnan != wnan][:8])
    winf = np.isinf(want.astype(np.float64))
    assert np.array_equal(got[winf], want[winf]), (label, "infinities differ at", np.asarray(x)[winf][got[winf] != want[winf]][:8])
    finite = ~wnan & ~winf
    if not finite.any():
        return 0, None
    d = ulps(got[finite], want[finite])
    worst = int(np.argmax(d))
    return int(d[worst]), np.asarray(x)[finite][worst]


def ulps_or_zero(got, want):
    """ulps() where the reference is finite, 0 elsewhere (max_ulps checks NaN and infinities)."""
    got, want = np.asarray(got), np.asarray(want)
    finite = np.isfinite(want.astype(np.float64))
    d = np.zeros(want.shape, np.int64)
    d[finite] = ulps(got[finite], want[finite])
    return d


def check(got, want, x, bound, label):
    """Asserts every ulp error is within `bound`: a number, or a function of x giving one bound per point."""
    if callable(bound):
        with np.errstate(invalid="ignore", over="ignore"):
            limit = np.broadcast_to(bound(np.asarray(x, np.float64)), np.shape(want))
        over = np.where(np.isfinite(limit), ulps_or_zero(got, want) - limit, -np.inf)
        worst, at = max_ulps(got, want, x, label)
        if os.environ.get("KILN_ACCURACY_REPORT"):
            print(f"\nMEASURED {label}: {worst} ulp at x={at!r}; the closest to its bound is {over.max():.2f} ulp from it")
            return worst
        assert over.max() <= 0, f"{label}: {over.max():.2f} ulp over the bound at x={np.asarray(x)[np.argmax(over)]!r}"
        return worst
    worst, at = max_ulps(got, want, x, label)
    if os.environ.get("KILN_ACCURACY_REPORT"):  # print the measured errors (for docs/accuracy.md) instead
        print(f"\nMEASURED {label}: {worst} ulp at x={at!r} (bound {bound})")
        return worst
    assert worst <= bound, f"{label}: {worst} ulp at x={at!r} (bound {bound})"
    return worst


# ----------------------------------------------------------------------------- float64 references (stable)

def _sigmoid64(x):
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _erfc64(x):
    return np.frompyfunc(math.erfc, 1, 1)(x).astype(np.float64)


def _erf64(x):
    return np.frompyfunc(math.erf, 1, 1)(x).astype(np.float64)


REF64 = {
    "sigmoid": _sigmoid64,
    "log_sigmoid": lambda x: -np.logaddexp(0.0, -x),
    "silu": lambda x: x * _sigmoid64(x),
    "softplus": lambda x: np.logaddexp(0.0, x),
    "gelu_tanh": lambda x: x * _sigmoid64(2 * SQRT_2_OVER_PI * (x + 0.044715 * x**3)),
    "gelu_exact": lambda x: 0.5 * x * _erfc64(-x / math.sqrt(2.0)),
}
NN = {
    "sigmoid": nn.sigmoid, "log_sigmoid": nn.log_sigmoid, "silu": nn.silu, "softplus": nn.softplus,
    "gelu_tanh": lambda v: nn.gelu(v, approximate=True), "gelu_exact": lambda v: nn.gelu(v, approximate=False),
}


# ----------------------------------------------------------------------------- 40-digit references (decimal)




def _dec(fn, x, prec=40):
    out = np.empty(len(x), np.float64)
    with localcontext() as ctx:
        ctx.prec = prec
        ctx.Emin, ctx.Emax = -10**6, 10**6
        for i, v in enumerate(np.asarray(x, np.float64)):
            out[i] = float(fn(Decimal(float(v)))) if np.isfinite(v) else np.nan
    return out


def _d_exp(x):
    return x.exp()


def _d_log1p(e):
    """log(1 + e) for 0 <= e <= 1 (the series where 1 + e would lose e's digits)."""
    return e - e * e / 2 + e * e * e / 3 if e < Decimal("1e-12") else (1 + e).ln()


def _d_sigmoid(x):
    return 1 / (1 + (-x).exp()) if x >= 0 else x.exp() / (1 + x.exp())


def _d_softplus(x):
    return max(x, Decimal(0)) + _d_log1p((-abs(x)).exp())


def _d_gelu_tanh(x):
    return x * _d_sigmoid(2 * (2 / PI_DECIMAL).sqrt() * (x + Decimal("0.044715") * x**3))


REF_DEC = {
    "sigmoid": _d_sigmoid,
    "log_sigmoid": lambda x: -_d_softplus(-x),
    "silu": lambda x: x * _d_sigmoid(x),
    "softplus": _d_softplus,
    "gelu_tanh": _d_gelu_tanh,
    "gelu_exact": lambda x: x / 2 * decimal_erfc(-x / Decimal(2).sqrt()),
}


# ----------------------------------------------------------------------------- grids

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, np.inf, -np.inf, np.nan]


def _f32_grid():
    """Every 8191st float32 bit pattern (all binades, subnormals, the largest values), their negatives, and
    [-120, 120] in steps of 1/512 (where the activations' tails are)."""
    positive = np.arange(0, 0x7F800000, 8191, dtype=np.int64).astype(np.uint32).view(np.float32)
    dense = np.arange(-120 * 512, 120 * 512 + 1) / 512.0
    return np.concatenate([positive, -positive, dense, SPECIAL]).astype(np.float32)


def _f64_grid():
    """About 4000 points: [-60, 60] evenly, out to the subnormal tail of sigmoid (-745), tiny and huge |x|."""
    g = [np.linspace(-60, 60, 2001), np.linspace(-750, 750, 601), np.geomspace(1e-300, 1, 150), np.geomspace(1, 1e300, 150)]
    g = np.concatenate(g)
    return np.concatenate([g, -g[-300:], [0.0, -0.0, 0.5, -0.5, np.inf, -np.inf, np.nan]])


# Values at -inf and +inf: x * sigmoid(x) and the gelus are -inf * 0 = NaN at -inf, as their formulas (and JAX).
AT_INF = {"sigmoid": (0.0, 1.0), "log_sigmoid": (-np.inf, -0.0), "silu": (np.nan, np.inf), "softplus": (0.0, np.inf),
          "gelu_tanh": (np.nan, np.inf), "gelu_exact": (np.nan, np.inf)}

# Largest error allowed, in ulp of the result dtype (docs/accuracy.md states these).
BOUNDS_F32 = {"sigmoid": 3, "log_sigmoid": 2, "silu": 4, "softplus": 2, "gelu_tanh": 4, "gelu_exact": 1}
# float64 gelu: the argument of sigmoid (tanh form) or erfc (exact form) is rounded, and the left tail multiplies
# that rounding by about 0.2 |x|^3 (tanh form) or 2 x^2 (exact form); float32 avoids it: the exact form is computed
# in float64, the tanh form takes z in float64 as two float32 (hi + lo) and exp(hi) (1 + lo) in float32.
BOUNDS_F64 = {"sigmoid": 3, "log_sigmoid": 3, "silu": 3, "softplus": 3,
              "gelu_tanh": lambda x: 8 + 0.2 * np.abs(np.minimum(x, 0)) ** 3, "gelu_exact": lambda x: 3 + 2 * x * x}


# float32 gelu (tanh form)'s derivative, in ulp of the scale of its terms s (1 + |x z' (1 - s)|) (it cancels to 0
# at x = -0.75, the minimum of gelu); tests/exhaustive_float32.py checks every float32 input against it.
GELU_GRAD_BOUND_F32 = 6


def gelu_tanh_derivative64(x):
    """(gelu'(x), the scale of its terms) in float64 for the tanh form: s (1 + x z' (1 - s)) and s (1 + |x z' (1 - s)|),
    s = sigmoid(z), z = 2 sqrt(2/pi) (x + 0.044715 x^3), z' = 2 sqrt(2/pi) (1 + 3 0.044715 x^2)."""
    x = np.asarray(x, np.float64)
    z = 2 * SQRT_2_OVER_PI * (x + 0.044715 * x**3)
    dz = 2 * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(z))
        s, one_minus = np.where(z >= 0, 1 / (1 + e), e / (1 + e)), np.where(z >= 0, e / (1 + e), 1 / (1 + e))
        t = x * dz * one_minus
        return s * (1 + t), s * (1 + np.abs(t))


def _gelu_f32_dense():
    """Every 389th float32 bit pattern with 2^-20 <= |x| <= 12 (about a million values: where float32 gelu is neither
    x/2 nor x nor 0), both signs."""
    lo, hi = np.float32(2.0 ** -20).view(np.uint32), np.float32(12).view(np.uint32)
    positive = np.arange(lo, hi + 1, 389, dtype=np.uint32).view(np.float32)
    return np.concatenate([positive, -positive])


def test_gelu_tanh_float32_dense_value_and_derivative():
    """float32 gelu (tanh form) and its derivative (kiln.grad, float32 throughout) on a dense sample of the range that
    matters, against float64: the value within BOUNDS_F32 ulp, the derivative within GELU_GRAD_BOUND_F32 ulp of its
    terms; and the derivatives (first and second) against central differences of the float32 value and derivative."""
    x = _gelu_f32_dense()
    fd_points = np.concatenate([np.linspace(-9.5, 6, 311), [-0.7524, 0.0, 1e-3]]).astype(np.float32)
    h = np.float32(2.0 ** -9) * np.maximum(np.abs(fd_points), 1).astype(np.float32)
    inputs = np.concatenate([x, fd_points, fd_points - h, fd_points + h])
    grad = kiln.grad(nn.gelu)
    values, first, second = kiln.jit(lambda v: (nn.gelu(v), kiln.vmap(grad)(v), kiln.vmap(kiln.grad(grad))(v)))(inputs)
    assert values.dtype == first.dtype == second.dtype == np.float32
    n, m = x.size, fd_points.size
    with np.errstate(all="ignore"):
        check(values[:n], REF64["gelu_tanh"](x.astype(np.float64)).astype(np.float32), x, BOUNDS_F32["gelu_tanh"],
              "gelu_tanh float32 dense")
    d, terms = gelu_tanh_derivative64(x)
    err = np.abs(first[:n].astype(np.float64) - d) / np.spacing(terms.astype(np.float32)).astype(np.float64)
    if os.environ.get("KILN_ACCURACY_REPORT"):
        print(f"\nMEASURED gelu_tanh derivative float32 dense: {err.max():.2f} ulp of its terms at x={x[np.argmax(err)]!r}")
    assert err.max() <= GELU_GRAD_BOUND_F32, (err.max(), x[np.argmax(err)])
    # central differences of the float32 kernels themselves (x +- h exact in float32)
    down, up = slice(n + m, n + 2 * m), slice(n + 2 * m, n + 3 * m)
    span = (2 * h).astype(np.float64)
    fd1 = (values[up].astype(np.float64) - values[down].astype(np.float64)) / span
    np.testing.assert_allclose(first[n:n + m], fd1, rtol=2e-3, atol=2e-4)
    fd2 = (first[up].astype(np.float64) - first[down].astype(np.float64)) / span
    np.testing.assert_allclose(second[n:n + m], fd2, rtol=2e-3, atol=2e-4)
    assert abs(float(second[n + m - 2]) - SQRT_2_OVER_PI) < 1e-6  # gelu"(0) = 2 sigmoid'(0) z'(0) = sqrt(2/pi)


def _every_activation(x):
    """(x, activation name -> its values at x), all computed by one compiled function."""
    outs = kiln.jit(lambda v: tuple(NN[name](v) for name in NN))(x)
    return x, dict(zip(NN, outs))


@pytest.fixture(scope="module")
def f32_results():
    return _every_activation(_f32_grid())


@pytest.mark.parametrize("name", list(NN))
def test_activation_float32_ulps(f32_results, name):
    x, outs = f32_results
    with np.errstate(all="ignore"):
        want = REF64[name](x.astype(np.float64)).astype(np.float32)
    check(outs[name], want, x, BOUNDS_F32[name], f"{name} float32")


@pytest.fixture(scope="module")
def f64_results():
    return _every_activation(_f64_grid())


@pytest.mark.parametrize("name", list(NN))
def test_activation_float64_ulps(f64_results, name):
    x, outs = f64_results
    want = _dec(REF_DEC[name], x)
    at_minus_inf, at_inf = AT_INF[name]
    want[x == -np.inf], want[x == np.inf] = at_minus_inf, at_inf
    check(outs[name], want, x, BOUNDS_F64[name], f"{name} float64")


# ----------------------------------------------------------------------------- power with non-integer exponents

EXPONENTS = [0.5, -0.5, 1.5, 2.5, 1 / 3, -1.7, 0.1, 7.3, 1e-3, -33.3, 100.5]


def _power_grid(dtype, step):
    positive = np.arange(0, 0x7F800000, step, dtype=np.int64).astype(np.uint32).view(np.float32).astype(dtype)
    if dtype == np.float64:
        positive = np.concatenate([np.geomspace(5e-324, 1.7e308, 400), np.linspace(0, 10, 101)])
    x = np.concatenate([positive, [0.0, np.inf, np.nan, 1.0, -1.0, -2.5]]).astype(dtype)
    xs, ys = np.meshgrid(x, np.asarray(EXPONENTS, dtype))
    return xs.ravel(), ys.ravel()


def _d_power(pair):
    x, y = pair
    if x < 0:
        return np.nan
    if x == 0:
        return 0.0 if y > 0 else np.inf
    with localcontext() as ctx:
        ctx.prec, ctx.Emin, ctx.Emax = 45, -10**6, 10**6
        return float((Decimal(float(y)) * Decimal(float(x)).ln()).exp())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_non_integer_exponent_ulps(dtype):
    x, y = _power_grid(dtype, 8191 * 4)
    got = kiln.jit(knp.power)(x, y)
    finite = np.isfinite(x)
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64))
    if dtype == np.float64:
        want[finite] = [_d_power(p) for p in zip(x[finite], y[finite])]
    with np.errstate(over="ignore"):
        want = want.astype(dtype)
    check(got, want, np.stack([x, y], 1), 1, f"power {np.dtype(dtype).name}")
    # a Python float exponent is weak: it keeps the array's dtype, eagerly and under jit
    assert kiln.jit(lambda v: knp.power(v, 0.5))(x[:8]).dtype == dtype == knp.power(x[:8], 0.5).dtype


# ----------------------------------------------------------------------------- softmax, log_softmax, logsumexp

def _rows(n, seed=5):
    """Rows of 8: N(0, s) for s in 1, 4, 16; large offsets; a -inf entry; ties at the maximum."""
    rng = np.random.default_rng(seed)
    parts = [rng.standard_normal((n, 8)) * s for s in (1.0, 4.0, 16.0)]
    parts.append(1e4 + rng.standard_normal((n // 4, 8)))
    masked = rng.standard_normal((n // 4, 8)) * 4
    masked[:, 3] = -np.inf
    ties = rng.standard_normal((n // 4, 8))
    ties[:, :3] = 2.5
    return np.concatenate(parts + [masked, ties])


def _softmax_refs64(x):
    """In float64 (for float32 results): log(s) as log1p(s - 1), s - 1 summed without the maxima's 1s, so that a
    dominant maximum's log_softmax (about -exp(-gap)) is exact to float64's precision."""
    m = np.max(x, -1, keepdims=True)
    d = x - m
    e = np.exp(d)
    s = np.sum(e, -1, keepdims=True)
    log_s = np.log1p(np.sum(np.where(d == 0, 0.0, e), -1, keepdims=True) + (np.sum(d == 0, -1, keepdims=True) - 1))
    return {"softmax": e / s, "log_softmax": d - log_s, "logsumexp": (log_s + m)[..., 0]}


def _softmax_refs_dec(x):
    sm, ls, lse = np.empty_like(x), np.empty_like(x), np.empty(x.shape[0])
    with localcontext() as ctx:
        ctx.prec, ctx.Emin, ctx.Emax = 40, -10**6, 10**6
        for i, row in enumerate(x):
            d = [Decimal(float(v)) for v in row]
            m = max(v for v in d)
            e = [(v - m).exp() for v in d]
            s = sum(e)
            log_s = s.ln()
            sm[i] = [float(v / s) for v in e]
            ls[i] = [float((v - m) - log_s) for v in d]
            lse[i] = float(m + log_s)
    return {"softmax": sm, "log_softmax": ls, "logsumexp": lse}


SOFTMAX_FNS = {"softmax": nn.softmax, "log_softmax": nn.log_softmax, "logsumexp": lambda v: nn.logsumexp(v, axis=-1)}
# softmax and log_softmax: ulp of the result. logsumexp: ulp of max(|result|, |max of the row|): where the result
# is near 0 because the max and log(sum(exp(x - max))) cancel, the function itself is ill-conditioned (float32
# measured 11 ulp of the result on one of six random sets of rows, about 1 ulp of the scale).
BOUNDS_SOFTMAX = {"float32": {"softmax": 4, "log_softmax": 3, "logsumexp": 2},
                  "float64": {"softmax": 4, "log_softmax": 4, "logsumexp": 2}}


def _scaled_ulps(got, want, scale):
    """|got - want| in ulp of max(|want|, |scale|), where want is finite (NaN and infinities must match)."""
    max_ulps(got, want, scale, "logsumexp")
    finite = np.isfinite(want)
    ref = np.maximum(np.abs(want[finite].astype(np.float64)), np.abs(scale[finite].astype(np.float64)))
    err = np.abs(got[finite].astype(np.float64) - want[finite].astype(np.float64))
    return err / np.spacing(ref.astype(want.dtype)).astype(np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_family_ulps(dtype):
    x = _rows(6000 if dtype == np.float32 else 120).astype(dtype)
    outs = kiln.jit(lambda v: tuple(fn(v) for fn in SOFTMAX_FNS.values()))(x)
    if dtype == np.float32:
        with np.errstate(all="ignore"):
            refs = _softmax_refs64(x.astype(np.float64))
    else:
        refs = _softmax_refs_dec(np.where(np.isinf(x), -1e6, x))  # exp(-inf - m) = exp(-1e6 - m): 0 in float64
    bounds = BOUNDS_SOFTMAX[np.dtype(dtype).name]
    for name, got in zip(SOFTMAX_FNS, outs):
        want = refs[name].astype(dtype)
        label = f"{name} {np.dtype(dtype).name}"
        if name == "logsumexp":
            err = _scaled_ulps(got, want, np.max(x, axis=-1))
            if os.environ.get("KILN_ACCURACY_REPORT"):
                print(f"\nMEASURED {label}: {err.max():.2f} ulp of the scale, {max_ulps(got, want, x[:, 0], label)[0]} of the result")
            else:
                assert err.max() <= bounds[name], (label, err.max(), x[np.argmax(err)])
            continue
        if dtype == np.float64:
            want[np.isinf(x)] = {"softmax": 0.0, "log_softmax": -np.inf}[name]
        check(got, want, x, bounds[name], label)


# ----------------------------------------------------------------------------- float16 and bfloat16

def _all_finite(dtype):
    bits = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16)
    x = bits.view(dtype)
    return x[np.isfinite(x.astype(np.float32))]


STORAGE_FNS = {  # name: (kiln function, float64 reference)
    "exp": (knp.exp, np.exp), "exp2": (knp.exp2, np.exp2), "expm1": (knp.expm1, np.expm1), "log": (knp.log, np.log),
    "log2": (knp.log2, np.log2), "log10": (knp.log10, np.log10), "log1p": (knp.log1p, np.log1p),
    "sqrt": (knp.sqrt, np.sqrt), "rsqrt": (knp.rsqrt, lambda x: 1 / np.sqrt(x)), "reciprocal": (knp.reciprocal, lambda x: 1 / x),
    "sin": (knp.sin, np.sin), "cos": (knp.cos, np.cos), "tan": (knp.tan, np.tan), "arcsin": (knp.arcsin, np.arcsin),
    "arccos": (knp.arccos, np.arccos), "arctan": (knp.arctan, np.arctan), "sinh": (knp.sinh, np.sinh),
    "cosh": (knp.cosh, np.cosh), "tanh": (knp.tanh, np.tanh), "arcsinh": (knp.arcsinh, np.arcsinh),
    "arccosh": (knp.arccosh, np.arccosh), "arctanh": (knp.arctanh, np.arctanh), "erf": (knp.erf, _erf64),
    "power_0.75": (lambda v: knp.power(v, 0.75), lambda x: np.power(x, 0.75)),
    "power_-1.5": (lambda v: knp.power(v, -1.5), lambda x: np.power(x, -1.5)),
    **{name: (fn, REF64[name]) for name, fn in NN.items()},
}
BOUND_STORAGE = 1  # ulp of the storage type, every function


def _round_to(want64, dtype):
    """float64 rounded once to float16 or bfloat16. numpy rounds float64 to float16 directly; ml_dtypes rounds
    to bfloat16 through float32 (twice: 1 + 2**-8 + 2**-30 becomes 1), so a bfloat16 result moves to its
    neighbour where that is strictly closer."""
    with np.errstate(over="ignore"):
        out = want64.astype(dtype)
    if dtype != BF16:
        return out
    finite = np.isfinite(out.astype(np.float32))
    bits = out.view(np.uint16)
    best, gap = out.copy(), np.abs(out.astype(np.float64) - want64)
    for step in (1, -1):
        other = (bits.astype(np.int32) + step).astype(np.uint16).view(BF16)
        ok = finite & np.isfinite(other.astype(np.float32)) & (np.signbit(other.astype(np.float32)) == np.signbit(out.astype(np.float32)))
        with np.errstate(invalid="ignore"):
            closer = ok & (np.abs(other.astype(np.float64) - want64) < gap)
        best[closer] = other[closer]
        with np.errstate(invalid="ignore"):
            gap = np.where(closer, np.abs(other.astype(np.float64) - want64), gap)
    return best


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
def test_storage_types_every_finite_value(dtype):
    x = _all_finite(dtype)
    outs = kiln.jit(lambda v: tuple(fn(v) for fn, _ in STORAGE_FNS.values()))(x)
    x64 = x.astype(np.float64)
    worst = {}
    for (name, (_, ref)), got in zip(STORAGE_FNS.items(), outs):
        assert np.asarray(got).dtype == dtype, (name, np.asarray(got).dtype)
        with np.errstate(all="ignore"):
            want = _round_to(ref(x64), dtype)
        worst[name] = check(got, want, x, BOUND_STORAGE, f"{name} {dtype.name}")
