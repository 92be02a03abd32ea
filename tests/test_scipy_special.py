"""kiln.scipy.special against scipy.special: values over wide ranges (tails included) in float64 and float32,
special values, dtypes, logsumexp's forms, gradients against float64 central differences, eagerly, under
kiln.jit and exported through the standalone kiln-run."""
import numpy as np
import pytest
import scipy.special as ss

import kiln
import kiln.scipy.special as ks
from kiln_tools import eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad, ulps

RNG = np.random.default_rng(20261123)


def _real_line(n=200):
    r = np.random.default_rng(7)
    return np.concatenate([r.uniform(-30, 30, n), 10 ** r.uniform(-300, 300, n), -(10 ** r.uniform(-10, 5, n // 2)),
                           np.linspace(0.25, 3.0, 56), [1.0, 2.0, 0.5, 1.5, 10.0, 9.99, 1e-300]])


def _probabilities(n=200):
    r = np.random.default_rng(8)
    return np.concatenate([r.uniform(0, 1, n), 10 ** r.uniform(-300, 0, n), 1 - 10 ** r.uniform(-16, 0, n // 2),
                           10 ** r.uniform(-323.5, -308, n // 4), [0.5, 0.25, 0.75, 1e-300, 5e-324]])


def _relative_error(got, want):
    return np.abs(got - want) / np.maximum(np.abs(want), np.finfo(np.float64).tiny)


def _check_float64(name, x, rel, absolute=0.0, args=()):
    got, want = getattr(ks, name)(*args, x), getattr(ss, name)(*args, x)
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    err = np.abs(got[finite] - want[finite])
    assert np.all(err <= rel * np.abs(want[finite]) + absolute), (name, x[finite][np.argmax(err / (rel * np.abs(want[finite]) + absolute + 1e-300))])


# bounds in relative error over _real_line (with an absolute part near the functions' zeros, where their
# values come out of a cancellation: lgamma at its negative roots, digamma at 1.4616 and its negative roots)
FLOAT64_BOUNDS = {
    "gammaln": (2e-15, 1e-14), "digamma": (6e-15, 4e-15), "expit": (1e-15, 0.0), "erf": (1e-15, 0.0),
    "erfc": (1e-13, 1e-300), "ndtr": (5e-13, 1e-300), "log_ndtr": (5e-13, 0.0), "entr": (1e-15, 0.0),
}


def test_erfc_tail_against_high_precision():
    """scipy's erfc is itself off by 6e-14 near x = 25 (the bound above allows for it); against Decimal kiln's
    is within 4 ulp down to where it underflows."""
    from decimal import Decimal, localcontext

    from references import decimal_erfc

    x = np.linspace(5.0, 26.5, 40)
    with localcontext() as ctx:
        ctx.prec = 40
        want = np.array([float(decimal_erfc(Decimal(float(v)))) for v in x])
    assert ulps(ks.erfc(x), want).max() <= 4


@pytest.mark.parametrize("name", sorted(FLOAT64_BOUNDS))
def test_float64_real_line(name):
    rel, absolute = FLOAT64_BOUNDS[name]
    _check_float64(name, _real_line(), rel, absolute)


def test_digamma_near_negative_poles_against_exact_recurrence():
    """digamma(x) = digamma(x + n) - sum_k 1/(x + k), the sum in exact rationals: kiln keeps 1e-15 next to the
    poles, where scipy's psi loses up to 2e-13 (its tan(pi x) is not reduced exactly)."""
    from fractions import Fraction

    x = np.array([-1.99964901, -6.99898649, -2.99680566, -0.0001234, -11.5000001, -3.0000002])
    n = np.ceil(-x).astype(int) + 1
    want = np.array([ss.digamma(v + k) - float(sum(Fraction(1) / (Fraction(float(v)) + j) for j in range(k)))
                     for v, k in zip(x, n)])
    np.testing.assert_allclose(ks.digamma(x), want, rtol=2e-15)


@pytest.mark.parametrize("name, transform, max_ulps", [
    ("ndtri", lambda p: p, 6), ("erfinv", lambda p: 2 * p - 1, 4), ("erfcinv", lambda p: 2 * p, 6),
    ("logit", lambda p: p, 2)])
def test_float64_inverse_functions_in_ulps(name, transform, max_ulps):
    arg = transform(_probabilities())
    got, want = getattr(ks, name)(arg), getattr(ss, name)(arg)
    finite = np.isfinite(want)
    assert ulps(got[finite], want[finite]).max() <= max_ulps
    np.testing.assert_array_equal(got[~finite], want[~finite])


@pytest.mark.parametrize("name", ["gammaln", "digamma", "expit", "erf", "erfc", "ndtr", "log_ndtr", "entr"])
def test_float32_is_correctly_rounded_on_the_grid(name):
    """float32 is computed in float64 and rounded once: within 1 ulp of scipy's float64 value rounded."""
    x = np.concatenate([RNG.uniform(-30, 30, 300), 10 ** RNG.uniform(-30, 30, 200)]).astype(np.float32)
    got = getattr(ks, name)(x)
    want = getattr(ss, name)(x.astype(np.float64)).astype(np.float32)
    assert got.dtype == np.float32
    both = np.isfinite(want) & np.isfinite(got)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    assert ulps(got[both], want[both]).max() <= 1


@pytest.mark.parametrize("name, transform", [("ndtri", lambda p: p), ("erfinv", lambda p: 2 * p - 1),
                                             ("erfcinv", lambda p: 2 * p), ("logit", lambda p: p)])
def test_float32_inverse_functions(name, transform):
    p = np.concatenate([RNG.uniform(0, 1, 300), 10 ** RNG.uniform(-37, 0, 200)]).astype(np.float32)
    arg = transform(p)
    got = getattr(ks, name)(arg)
    want = getattr(ss, name)(arg.astype(np.float64)).astype(np.float32)
    finite = np.isfinite(want)
    assert got.dtype == np.float32 and ulps(got[finite], want[finite]).max() <= 1


SPECIAL_VALUES = np.array([0.0, -0.0, -1.0, -2.0, -3.5, 1.0, 2.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 1e300])


@pytest.mark.parametrize("name", ["gammaln", "digamma", "expit", "erf", "erfc", "ndtr", "log_ndtr", "entr"])
def test_special_values(name):
    got, want = getattr(ks, name)(SPECIAL_VALUES), getattr(ss, name)(SPECIAL_VALUES)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", ["ndtri", "erfinv", "erfcinv", "logit"])
def test_inverse_special_values(name):
    x = np.array([0.0, 1.0, 2.0, -1.0, -0.5, 0.5, 1.5, np.nan, np.inf])
    np.testing.assert_array_equal(getattr(ks, name)(x), getattr(ss, name)(x))


def test_dtypes():
    assert ks.gammaln(np.arange(1, 4, dtype=np.int32)).dtype == np.float64
    assert ks.erfinv(np.array([0.5], np.float16)).dtype == np.float16
    assert ks.expit(np.array([True])).dtype == np.float64
    assert ks.xlogy(np.float32(2), np.array([3.0], np.float32)).dtype == np.float32
    assert kiln.jit(ks.digamma)(np.array([2.0], np.float32)).dtype == np.float32
    assert np.asarray(kiln.jit(lambda: ks.erf(1.0))()).dtype == np.float32  # a lone Python number traced: weak
    np.testing.assert_allclose(ks.erf(1.0), ss.erf(1.0), rtol=1e-15)


def test_xlogy_xlog1py():
    x = np.array([0.0, 0.0, 1.0, 2.5, -1.0, 0.0, 3.0])
    y = np.array([0.0, -1.0, 0.0, 3.0, 2.0, np.inf, -1.0])
    np.testing.assert_allclose(ks.xlogy(x, y), ss.xlogy(x, y), rtol=1e-15)
    np.testing.assert_allclose(ks.xlog1py(x, y), ss.xlog1py(x, y), rtol=1e-15)
    eager_and_jit(ks.xlogy, ss.xlogy, x[:, None], np.abs(y[None, 2:4]) + 0.5)


def test_betaln_with_one_large_argument():
    """Where b is large and a small, gammaln(a) + gammaln(b) - gammaln(a + b) would lose eps * b log b to
    cancellation (scipy's betaln is 4e-8 off at (0.143, 629815)); kiln's Stirling difference keeps 1e-13,
    checked against the same difference in 50-digit Decimal."""
    import math
    from decimal import Decimal, localcontext

    pairs = [(0.14294564523488218, 629815.1846288379), (0.5, 1e6), (3.0, 50.0), (1e-3, 1e5), (25.0, 40.0)]
    bernoulli_terms = [Decimal(1) / 12, Decimal(-1) / 360, Decimal(1) / 1260, Decimal(-1) / 1680, Decimal(1) / 1188]
    with localcontext() as ctx:
        ctx.prec = 50
        pi = Decimal("3.14159265358979323846264338327950288419716939937510")

        def stirling_lgamma(v):
            w = 1 / v
            correction = sum(c * w ** (2 * i + 1) for i, c in enumerate(bernoulli_terms))
            return (v - Decimal("0.5")) * v.ln() - v + (2 * pi).ln() / 2 + correction

        want = [float(Decimal(math.lgamma(a)) + stirling_lgamma(Decimal(b)) - stirling_lgamma(Decimal(a) + Decimal(b)))
                for a, b in pairs]
    a, b = np.array(pairs).T
    np.testing.assert_allclose(ks.betaln(a, b), want, rtol=1e-13)
    np.testing.assert_allclose(ks.betaln(b, a), want, rtol=1e-13)  # symmetric
    np.testing.assert_allclose(kiln.grad(lambda v: ks.betaln(v, 1e6))(0.5), ss.digamma(0.5) - ss.digamma(1e6 + 0.5),
                               rtol=1e-12)


def test_betaln_polygamma():
    a = np.array([0.5, 1.0, 3.5, 20.0, 100.0])
    b = np.array([[0.25], [2.0], [7.5]])
    # gammaln(a) + gammaln(b) - gammaln(a + b): the error is absolute, of the size of gammaln(a + b)'s rounding
    np.testing.assert_allclose(ks.betaln(a, b), ss.betaln(a, b), rtol=0, atol=4e-16 * np.abs(ss.gammaln(a + b)).max())
    x = np.concatenate([np.linspace(0.1, 30, 50), -np.linspace(0.1, 5.3, 20)])
    np.testing.assert_allclose(ks.polygamma(1, x), ss.polygamma(1, x), rtol=1e-13)
    np.testing.assert_allclose(ks.polygamma(0, x), ss.polygamma(0, x), rtol=1e-13, atol=4e-15)
    assert ks.psi is ks.digamma


@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"axis": (0, 2)}, {"axis": -1, "keepdims": True},
                                    {"axis": 1, "b": "weights"}, {"axis": None, "b": "weights", "return_sign": True},
                                    {"axis": 2, "b": "signed", "return_sign": True}, {"axis": 2, "b": "signed"},
                                    {"axis": 1, "return_sign": True, "keepdims": True}])
def test_logsumexp_forms(kwargs):
    a = RNG.standard_normal((2, 3, 4)) * 10
    a[0, 0, :] = -np.inf
    kwargs = dict(kwargs)
    if kwargs.get("b") == "weights":
        kwargs["b"] = RNG.uniform(0, 2, (3, 1))
    elif kwargs.get("b") == "signed":
        kwargs["b"] = RNG.standard_normal((2, 3, 4))
    with np.errstate(divide="ignore", invalid="ignore"):
        want = ss.logsumexp(a, **kwargs)
    got = ks.logsumexp(a, **kwargs)
    if kwargs.get("return_sign"):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
        np.testing.assert_array_equal(got[1], want[1])
    else:
        np.testing.assert_allclose(got, want, rtol=1e-14)
        assert np.shape(got) == np.shape(want)
    jitted = kiln.jit(lambda a: ks.logsumexp(a, **kwargs))(a)
    for g, w in zip(np.atleast_1d(*(jitted if isinstance(jitted, tuple) else (jitted,))),
                    np.atleast_1d(*(want if isinstance(want, tuple) else (want,)))):
        np.testing.assert_allclose(g, w, rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logsumexp_rows_with_infinities_and_nan_match_scipy(dtype):
    """A +inf entry makes its row's logsumexp +inf (not NaN), an all -inf row -inf, a NaN NaN; log_softmax and
    softmax give scipy's values on the same rows."""
    x = np.array([[1, np.inf, 2, 0], [np.inf, np.inf, 0, 1], [-np.inf, -np.inf, 1, 0], [-np.inf] * 4,
                  [np.nan, 1, 2, 0], [np.inf, -np.inf, 0, 3], [0, 1, 2, 3]], dtype)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for kiln_fn, scipy_fn in [(ks.logsumexp, ss.logsumexp), (ks.log_softmax, ss.log_softmax),
                                  (ks.softmax, ss.softmax)]:
            want = scipy_fn(x, axis=1).astype(dtype)
            np.testing.assert_allclose(kiln_fn(x, axis=1), want, rtol=1e-6)
            np.testing.assert_allclose(kiln.jit(lambda v, f=kiln_fn: f(v, axis=1))(x), want, rtol=1e-6)
        weights = np.full(x.shape, 2.0, dtype)
        np.testing.assert_allclose(ks.logsumexp(x, axis=1, b=weights), ss.logsumexp(x, axis=1, b=weights), rtol=1e-6)


def test_softmax_log_softmax_default_axis_is_none():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    eager_and_jit(ks.softmax, lambda x: ss.softmax(x).astype(np.float32), x)
    eager_and_jit(lambda x: ks.log_softmax(x, axis=0), lambda x: ss.log_softmax(x, axis=0).astype(np.float32), x)
    eager_and_jit(lambda x: ks.logsumexp(x, axis=1), lambda x: ss.logsumexp(x, axis=1).astype(np.float32), x)


def test_logsumexp_where():
    x = RNG.standard_normal((3, 4))
    mask = x > 0
    mask[1] = False
    want = [np.log(np.sum(np.exp(row[keep]))) if keep.any() else -np.inf for row, keep in zip(x, mask)]
    np.testing.assert_allclose(ks.logsumexp(x, axis=1, where=mask), want, rtol=1e-14)
    np.testing.assert_allclose(kiln.jit(lambda v, w: ks.logsumexp(v, axis=1, where=w))(x, mask), want, rtol=1e-14)
    b = RNG.uniform(0.5, 2, (3, 4))
    np.testing.assert_allclose(ks.logsumexp(x, axis=0, b=b, where=mask), ss.logsumexp(x, axis=0, b=b * mask), rtol=1e-14)
    grad = kiln.grad(lambda v: ks.logsumexp(v, where=mask))(x)
    np.testing.assert_allclose(grad, np.where(mask, np.exp(x - ss.logsumexp(x, b=mask)), 0.0), rtol=1e-13)
    with pytest.raises(TypeError, match="logsumexp: argument where must be a boolean array, got dtype float64"):
        ks.logsumexp(x, where=x)


def test_kiln_nn_forwards_to_special():
    import kiln.nn as nn

    assert nn.logsumexp is ks.logsumexp  # as jax.nn.logsumexp is jax.scipy.special.logsumexp
    x = RNG.standard_normal((3, 4))
    np.testing.assert_array_equal(nn.softmax(x), ks.softmax(x, axis=-1))
    np.testing.assert_array_equal(nn.log_softmax(x, axis=0), ks.log_softmax(x, axis=0))
    np.testing.assert_array_equal(nn.logsumexp(x), ks.logsumexp(x))


def _all_functions(x, p):
    return (ks.gammaln(x), ks.digamma(x), ks.erf(x), ks.erfc(x), ks.expit(x), ks.ndtr(x), ks.log_ndtr(x),
            ks.entr(x), ks.ndtri(p), ks.erfinv(2 * p - 1), ks.erfcinv(2 * p), ks.logit(p), ks.xlogy(p, x),
            ks.xlog1py(x, p), ks.betaln(p, p + 1), ks.polygamma(1, p), ks.logsumexp(x, axis=0))


def _all_references(x, p):
    return (ss.gammaln(x), ss.digamma(x), ss.erf(x), ss.erfc(x), ss.expit(x), ss.ndtr(x), ss.log_ndtr(x),
            ss.entr(x), ss.ndtri(p), ss.erfinv(2 * p - 1), ss.erfcinv(2 * p), ss.logit(p), ss.xlogy(p, x),
            ss.xlog1py(x, p), ss.betaln(p, p + 1), ss.polygamma(1, p), ss.logsumexp(x, axis=0))


def test_eager_jit_and_kiln_run(tmp_path):
    """float32 in, float32 out; the kernels compute in float64 (the float64 values are tested eagerly above,
    with the same code)."""
    dtype = np.float32
    x = np.array([[-25.5, -3.7, -0.2, 1e-8, 0.7], [1.46, 2.0, 5.5, 12.0, 40.0]], dtype)
    p = np.array([[1e-30, 0.01, 0.3, 0.5, 0.99], [0.999999, 0.2, 0.7, 0.05, 0.6]], dtype)

    def want(x, p):
        return tuple(np.asarray(r).astype(dtype) for r in _all_references(x.astype(np.float64), p.astype(np.float64)))

    eager_jit_and_kiln_run(_all_functions, want, x, p, tmp_path=tmp_path, tol=1e-6)


@pytest.mark.parametrize("name, x", [
    ("gammaln", [0.3, 1.0, 2.5, 14.0, -2.5]), ("digamma", [0.3, 1.5, 12.0, -0.7]),
    ("erfinv", [-0.9, 0.1, 0.99]), ("erfcinv", [0.01, 1.2, 1.9]), ("ndtri", [1e-3, 0.4, 0.97]),
    ("log_ndtr", [-30.0, -3.0, 0.5, 2.0]), ("ndtr", [-3.0, 0.5]), ("expit", [-5.0, 0.0, 3.0]),
    ("logit", [0.1, 0.5, 0.8]), ("entr", [0.2, 2.0]), ("erf", [-0.5, 1.2]), ("erfc", [0.5, 3.0])])
def test_gradients(name, x):
    x = np.array(x)
    fn = getattr(ks, name)
    want = numerical_grad(lambda v: np.sum(getattr(ss, name)(v)), x)
    got = kiln.grad(lambda v: fn(v).sum())(x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(kiln.jit(kiln.grad(lambda v: fn(v).sum()))(x), want, rtol=1e-6, atol=1e-9)


def test_gradients_of_two_argument_functions():
    x, y = np.array([0.5, 2.0, 3.0]), np.array([1.5, 0.3, 4.0])
    for kfn, sfn in [(ks.xlogy, ss.xlogy), (ks.xlog1py, ss.xlog1py), (ks.betaln, ss.betaln)]:
        gx, gy = kiln.grad(lambda a, b: kfn(a, b).sum(), argnums=(0, 1))(x, y)
        np.testing.assert_allclose(gx, numerical_grad(lambda v: sfn(v, y).sum(), x), rtol=1e-6)
        np.testing.assert_allclose(gy, numerical_grad(lambda v: sfn(x, v).sum(), y), rtol=1e-6)
    # at x == 0 xlogy's derivative in x is log(y) (JAX's rule), in y it is 0
    gx, gy = kiln.grad(lambda a, b: ks.xlogy(a, b).sum(), argnums=(0, 1))(np.array([0.0]), np.array([2.0]))
    np.testing.assert_allclose(gx, [np.log(2.0)]) and np.testing.assert_allclose(gy, [0.0])


def test_logsumexp_gradient_with_weights():
    a, b = RNG.standard_normal((3, 4)), RNG.uniform(0.1, 2, (3, 4))
    want = numerical_grad(lambda v: ss.logsumexp(v, axis=1, b=b).sum(), a)
    np.testing.assert_allclose(kiln.grad(lambda v: ks.logsumexp(v, axis=1, b=b).sum())(a), want, rtol=1e-6)
    want = numerical_grad(lambda v: (ss.softmax(v, axis=0) ** 2).sum(), a)
    np.testing.assert_allclose(kiln.grad(lambda v: (ks.softmax(v, axis=0) ** 2).sum())(a), want, rtol=1e-6)


def test_second_derivative_of_gammaln_is_trigamma():
    x = np.array([0.4, 3.0, 11.0, -1.5])
    got = kiln.grad(lambda v: kiln.grad(lambda w: ks.gammaln(w).sum())(v).sum())(x)
    np.testing.assert_allclose(got, ss.polygamma(1, x), rtol=1e-12)


def test_gamma_family():
    x = np.array([0.0, -0.0, -1.0, -2.5, -1.5, -0.5, 1.0, np.inf, -np.inf, np.nan, 3.5, 170.5, -170.5, 1e-300, 0.3])
    np.testing.assert_array_equal(ks.gammasgn(x), ss.gammasgn(x))
    np.testing.assert_allclose(ks.gamma(x), ss.gamma(x), rtol=2e-13)
    grid = np.linspace(0.5, 171.5, 500)
    np.testing.assert_allclose(ks.gamma(grid), ss.gamma(grid), rtol=3e-13)  # exp(gammaln) near the overflow
    a, b = np.array([1.0, -0.5, 2.0, 0.3, 50.0]), np.array([2.0, 3.0, -1.5, 40.0, 60.0])
    np.testing.assert_allclose(ks.beta(a, b), ss.beta(a, b), rtol=5e-13)  # exp(betaln): its cancellation
    n = np.array([-1.0, 0.0, 3.0, 4.5, 170.0, 171.0])
    np.testing.assert_allclose(ks.factorial(n), ss.factorial(n), rtol=1e-13)
    a = np.array([1.5, 3.5, 10.0, 200.0])
    np.testing.assert_allclose(ks.multigammaln(a, 3), [ss.multigammaln(v, 3) for v in a], rtol=1e-14)
    np.testing.assert_allclose(kiln.grad(lambda v: ks.gamma(v))(3.5), ss.gamma(3.5) * ss.digamma(3.5), rtol=1e-13)
    eager_and_jit(lambda v: (ks.gamma(v), ks.gammasgn(v), ks.multigammaln(v, 2)),
                  lambda v: (ss.gamma(v), ss.gammasgn(v), np.array([ss.multigammaln(t, 2) for t in v])),
                  np.array([1.5, 2.5, 7.0]), tol=1e-13)


def test_rel_entr_kl_div():
    x = np.array([0.0, 0.0, 1.0, 1.0, -1.0, 0.0, 0.3, np.nan, 2.0])
    y = np.array([0.0, 1.0, 0.0, 2.0, 1.0, -1.0, 0.7, 1.0, np.inf])
    with np.errstate(divide="ignore", invalid="ignore"):
        for name in ("rel_entr", "kl_div"):
            np.testing.assert_allclose(getattr(ks, name)(x, y), getattr(ss, name)(x, y), rtol=1e-15)
    p, q = np.array([0.2, 0.5, 1.5]), np.array([0.4, 0.1, 2.0])
    for name in ("rel_entr", "kl_div"):
        got = kiln.grad(lambda v: getattr(ks, name)(v, q).sum())(p)
        np.testing.assert_allclose(got, numerical_grad(lambda v: getattr(ss, name)(v, q).sum(), p), rtol=1e-7)


@pytest.mark.parametrize("name", ["i0", "i0e", "i1", "i1e"])
def test_bessel_i(name):
    """Within 4e-15 relative of scipy over [-60, 60] and up to 3000 (the power series below 40, the
    asymptotic series above); the scaled forms stay finite where I0 and I1 overflow."""
    x = np.concatenate([RNG.uniform(-60, 60, 400), 10 ** RNG.uniform(-300, 3.5, 400), [39.999, 40.0, 713.0, 714.0]])
    got, want = getattr(ks, name)(x), getattr(ss, name)(x)
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=4e-15, atol=0)
    if name in ("i0", "i1"):  # scipy overflows from 709.8, exp(x) * i0e(x); kiln's I0 and I1 reach 713.9
        over = ~finite & (np.abs(x) < 713.9)
        scaled = getattr(ss, name + "e")(x[over])
        np.testing.assert_allclose(np.log(np.abs(got[over])), np.abs(x[over]) + np.log(np.abs(scaled)), rtol=1e-15)
        finite |= over
    np.testing.assert_array_equal(got[~finite], want[~finite])
    special = np.array([0.0, -0.0, np.nan, np.inf, -np.inf])  # scipy: NaN for I0 and I1 at +-inf, 0 scaled
    np.testing.assert_array_equal(getattr(ks, name)(special), getattr(ss, name)(special))
    eager_and_jit(getattr(ks, name), getattr(ss, name), np.array([-45.0, -3.0, 0.5, 12.0, 50.0], np.float32))
    points = np.array([-2.3, 0.4, 7.0, 41.0])
    scale = np.abs(getattr(ss, name)(points))  # values from 0.2 to 1e16: each term of the sum weighed alike
    got = kiln.grad(lambda v: (getattr(ks, name)(v) / scale).sum())(points)
    np.testing.assert_allclose(got, numerical_grad(lambda v: (getattr(ss, name)(v) / scale).sum(), points), rtol=1e-7)


def test_i0_agrees_with_kiln_numpy_i0():
    x = np.linspace(-50, 50, 101)
    np.testing.assert_allclose(ks.i0(x), kiln.numpy.i0(x), rtol=2e-15)


def test_zeta_and_polygamma():
    x, q = 1 + 10 ** RNG.uniform(-3, 1.5, 300), 10 ** RNG.uniform(-3, 3, 300)
    np.testing.assert_allclose(ks.zeta(x, q), ss.zeta(x, q), rtol=2e-15)
    edge_x = np.array([2.0, 3.0, 1.5, 1.0, 0.5, 2.0, 2.0, 2.0])
    edge_q = np.array([1.0, 2.5, 0.5, 1.0, 1.0, 0.0, -1.5, -1.0])
    np.testing.assert_allclose(ks.zeta(edge_x, edge_q), ss.zeta(edge_x, edge_q), rtol=1e-14)
    np.testing.assert_allclose(ks.zeta(np.array([2.0, 4.0])), ss.zeta([2.0, 4.0]), rtol=1e-15)
    v = np.concatenate([10 ** RNG.uniform(-3, 3, 200), -RNG.uniform(0.01, 1.99, 50)])
    for n in (2, 3, 5):
        np.testing.assert_allclose(ks.polygamma(n, v), ss.polygamma(n, v), rtol=2e-15)
    np.testing.assert_allclose(kiln.grad(lambda t: ks.polygamma(1, t))(2.5), ss.polygamma(2, 2.5), rtol=1e-12)
    eager_and_jit(lambda a, b: (ks.zeta(a, b), ks.polygamma(3, b)), lambda a, b: (ss.zeta(a, b), ss.polygamma(3, b)),
                  np.array([2.0, 3.5, 7.0]), np.array([0.3, 1.0, 20.0]), tol=1e-14)


def test_small_functions():
    np.testing.assert_allclose(ks.loggamma(np.array([-2.5, 0.5, 3.0])), ss.loggamma([-2.5, 0.5, 3.0]), rtol=1e-15)
    n, k = np.array([5.0, 5.0, 5.0, -1.0, 3.5, 30.0]), np.array([2.0, 6.0, -1.0, 1.0, 1.5, 11.0])
    np.testing.assert_allclose(ks.comb(n, k), ss.comb(n, k), rtol=1e-13)
    keep = n >= 0  # scipy's repetition=True gives NaN for a negative N
    np.testing.assert_allclose(ks.comb(n[keep], k[keep], repetition=True), ss.comb(n[keep], k[keep], repetition=True),
                               rtol=1e-13)
    z, m = np.array([1.0, 2.5, -2.5, 0.0, -1.0, 3.0]), np.array([3.0, 2.0, 2.0, 1.0, 2.0, 0.0])
    np.testing.assert_allclose(ks.poch(z, m), ss.poch(z, m), rtol=1e-13)
    exact = [1, -1 / 2, 1 / 6, 0, -1 / 30, 0, 1 / 42, 0, -1 / 30, 0, 5 / 66, 0, -691 / 2730]
    np.testing.assert_array_equal(ks.bernoulli(12), exact)  # scipy's own values are 2e-12 off by B_12
    np.testing.assert_allclose(ks.bernoulli(12), ss.bernoulli(12), rtol=1e-11)
    x = 10 ** RNG.uniform(-5, 1, 200)
    for lmbda in (0.3, -0.7, 0.0, 2.0):
        np.testing.assert_allclose(ks.boxcox(x, lmbda), ss.boxcox(x, lmbda), rtol=1e-14)
        np.testing.assert_allclose(ks.boxcox1p(x, lmbda), ss.boxcox1p(x, lmbda), rtol=1e-14)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(ks.boxcox(np.array([0.0, -1.0]), 0.5), ss.boxcox([0.0, -1.0], 0.5))
    eager_and_jit(lambda a, b: (ks.comb(a, b), ks.poch(a, b), ks.boxcox(a, 0.4), ks.loggamma(a)),
                  lambda a, b: (ss.comb(a, b), ss.poch(a, b), ss.boxcox(a, 0.4), ss.loggamma(a)),
                  np.array([4.0, 7.5, 12.0]), np.array([2.0, 3.0, 0.5]), tol=1e-13)


def test_erfcx():
    """Within 6 ulp of scipy from -2 up (erfc's 4 and the exponential's) and of Decimal on the negative side, where scipy's erfcx is up to 500 ulp
    off (kiln squares x exactly before the exponential)."""
    from decimal import Decimal, localcontext

    from references import decimal_erfc

    x = np.concatenate([RNG.uniform(-2, 60, 500), 10 ** RNG.uniform(-300, 300, 200), [26.0, 26.0001]])
    assert ulps(ks.erfcx(x), ss.erfcx(x)).max() <= 6
    negative = np.concatenate([RNG.uniform(-26.5, -2, 20), [-4.854000604908231]])
    with localcontext() as ctx:
        ctx.prec = 50
        want = np.array([float(decimal_erfc(Decimal(float(v))) * (Decimal(float(v)) ** 2).exp()) for v in negative])
    assert ulps(ks.erfcx(negative), want).max() <= 6
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -27.5])
    np.testing.assert_array_equal(ks.erfcx(special), ss.erfcx(special))
    eager_and_jit(ks.erfcx, ss.erfcx, np.array([-3.0, 0.1, 5.0, 30.0, 1e5]), tol=1e-14)
    np.testing.assert_allclose(kiln.grad(lambda v: ks.erfcx(v))(1.3),
                               numerical_grad(lambda v: ss.erfcx(v[0]), np.array([1.3])), rtol=1e-7)


def test_exponential_integrals():
    x = np.concatenate([10 ** RNG.uniform(-10, 2.8, 400), RNG.uniform(0, 5, 200), [1.0, 1.0000001]])
    for n in (0, 1, 2, 3, 5, 10, 30):
        got, want = ks.expn(n, x), ss.expn(n, x)
        shown = want > 0
        np.testing.assert_allclose(got[shown], want[shown], rtol=2e-14)  # the fraction's steps just above x = 1
    np.testing.assert_allclose(ks.exp1(x), ss.exp1(x), rtol=2e-14)
    xi = np.concatenate([RNG.uniform(-50, 39, 300), 10 ** RNG.uniform(-10, 2.85, 100), -(10 ** RNG.uniform(-10, 2.8, 100))])
    np.testing.assert_allclose(ks.expi(xi), ss.expi(xi), rtol=2e-14)
    edges_n = np.array([0.0, 1.0, 2.0, 5.0, 0.0, 1.0, 2.0, -1.0, 2.0, 2.0])
    edges_x = np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, -1.0, np.inf])
    np.testing.assert_allclose(ks.expn(edges_n, edges_x), ss.expn(edges_n, edges_x), rtol=1e-14)
    special = np.array([0.0, -1.0, 1.0, 50.0, -800.0, 800.0, -np.inf, np.nan])
    np.testing.assert_allclose(ks.expi(special), ss.expi(special), rtol=1e-14)
    eager_and_jit(lambda v: (ks.expn(3, v), ks.exp1(v), ks.expi(v)), lambda v: (ss.expn(3, v), ss.exp1(v), ss.expi(v)),
                  np.array([0.3, 1.5, 7.0, 60.0]), tol=2e-14)
    np.testing.assert_allclose(kiln.grad(lambda v: ks.expi(v))(2.5), np.exp(2.5) / 2.5, rtol=1e-13)
    np.testing.assert_allclose(kiln.grad(lambda v: ks.exp1(v))(0.5), -np.exp(-0.5) / 0.5, rtol=1e-13)
    for n in (0, 1, 3):
        np.testing.assert_allclose(kiln.grad(lambda v: ks.expn(n, v))(1.7),
                                   numerical_grad(lambda v: ss.expn(n, v[0]), np.array([1.7])), rtol=1e-7)


def test_spence():
    """Within 4e-15 of scipy over [0, 5] and up to 1e300, and within 2 ulp of the Decimal series of Li2(1 - x)
    where scipy's own value is 2.7e-15 off (x = 1.958)."""
    from decimal import Decimal, localcontext

    x = np.concatenate([RNG.uniform(0, 5, 500), 10 ** RNG.uniform(-300, 300, 200)])
    np.testing.assert_allclose(ks.spence(x), ss.spence(x), rtol=4e-15)
    points = np.array([1.958373997269514, 1.7, 0.3, 1.4, 0.05, 1.99])
    want = []
    with localcontext() as ctx:
        ctx.prec = 40
        for v in points:
            y, total, term = 1 - Decimal(float(v)), Decimal(0), Decimal(1)
            for k in range(1, 5000):
                term *= y
                total += term / (k * k)
                if abs(term) < Decimal(10) ** -38:
                    break
            want.append(float(total))
    assert ulps(ks.spence(points), np.array(want)).max() <= 2
    edges = np.array([0.0, 0.5, 1.0, 2.0, -1.0, np.nan])
    exact = [np.pi ** 2 / 6, np.pi ** 2 / 12 - np.log(2) ** 2 / 2, 0.0, -np.pi ** 2 / 12, np.nan, np.nan]
    np.testing.assert_allclose(ks.spence(edges), exact, rtol=3e-16)  # scipy is 10 ulp off at 0.5 and 2
    eager_and_jit(ks.spence, ss.spence, np.array([0.1, 0.9, 1.7, 30.0]), tol=1e-14)
    np.testing.assert_allclose(kiln.grad(lambda v: ks.spence(v))(2.5), np.log(2.5) / (1 - 2.5), rtol=1e-14)


def test_dawsn():
    """Within 5e-15 relative of scipy (the series' rounding grows with x^2 up to its end at 6.5: 25 ulp there;
    at most 12 below 3); odd, with signed zeros and the limits at +-inf."""
    x = np.concatenate([RNG.uniform(-15, 15, 600), 10 ** RNG.uniform(-300, 300, 200), [6.5, 6.4999999]])
    np.testing.assert_allclose(ks.dawsn(x), ss.dawsn(x), rtol=5e-15)
    small = RNG.uniform(-3, 3, 200)
    assert ulps(ks.dawsn(small), ss.dawsn(small)).max() <= 12
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    np.testing.assert_array_equal(ks.dawsn(special), ss.dawsn(special))
    np.testing.assert_array_equal(np.signbit(ks.dawsn(special[:4])), np.signbit(ss.dawsn(special[:4])))
    eager_and_jit(ks.dawsn, ss.dawsn, np.array([-8.0, -1.2, 0.3, 5.0, 40.0]), tol=5e-15)
    np.testing.assert_allclose(kiln.grad(lambda v: ks.dawsn(v))(1.3), 1 - 2 * 1.3 * ss.dawsn(1.3), rtol=1e-14)


def test_errors():
    with pytest.raises(ValueError, match="polygamma: n must be a non-negative Python integer \\(the order\\), got -1"):
        ks.polygamma(-1, np.ones(2))
    with pytest.raises(ValueError, match="comb: exact=True is not supported"):
        ks.comb(5, 2, exact=True)
    with pytest.raises(ValueError, match="bernoulli: n must be a non-negative Python integer, got 2.5"):
        ks.bernoulli(2.5)
    with pytest.raises(ValueError, match="logsumexp: axis 3 is out of bounds"):
        ks.logsumexp(np.ones((2, 2)), axis=3)
    with pytest.raises(ValueError, match="softmax: axis -3 is out of bounds"):
        ks.softmax(np.ones((2, 2)), axis=-3)
    with pytest.raises(ValueError, match="factorial: exact=True is not supported"):
        ks.factorial(np.arange(3), exact=True)
    with pytest.raises(ValueError, match="multigammaln: d must be a positive integer, got 0"):
        ks.multigammaln(np.ones(2), 0)
    with pytest.raises(ValueError, match="xlogy"):
        ks.xlogy(np.ones(2), np.ones(3))
