"""kiln.lax's special functions (lgamma, digamma, polygamma, zeta, erf_inv, igamma, igammac, igamma_grad_a,
random_gamma_grad, betainc, bessel_i0e, bessel_i1e) against scipy in float64 and float32, their derivative
rules against float64 central differences, vmap, the operand errors, eagerly, under kiln.jit and exported
through the standalone kiln-run. kiln.scipy.special and kiln.random call these (test_scipy_special.py and
test_random.py cover them there)."""
import numpy as np
import pytest
import scipy.special as ss

import kiln
import kiln.lax as lax
from kiln_tools import eager_jit_and_kiln_run
from references import numerical_grad

R = np.random.default_rng(20261123)
X = np.concatenate([R.uniform(0.01, 30, 40), 10 ** R.uniform(-5, 3, 20), -R.uniform(0.05, 20, 20)])
A = np.concatenate([R.uniform(0.05, 20, 40), 10 ** R.uniform(-2, 2.5, 20)])
AX = A * R.uniform(0.1, 3, A.size)
P = np.concatenate([R.uniform(-1, 1, 40), [-0.999999, 0.9999999, 0.0, 1e-8, -0.5, 0.5]])


def _rel(got, want, absolute=0.0):
    """The largest error relative to |want| + absolute / bound (the absolute part counts near the zeros, where the
    value comes out of a cancellation: lgamma at its negative roots, digamma at its roots)."""
    ok = np.isfinite(want)
    return np.max(np.abs(got[ok] - want[ok]) / np.maximum(np.abs(want[ok]) + absolute, 1e-300))


# (lax function, scipy reference, operands, float64 bound on the relative error; lgamma and digamma: relative to
# |value| + 1, for their zeros)
CASES = {
    "lgamma": (lambda x: lax.lgamma(x), ss.gammaln, (X,), 1e-14),
    "digamma": (lambda x: lax.digamma(x), ss.digamma, (X,), 1e-13),
    "polygamma": (lambda m, x: lax.polygamma(m, x), lambda m, x: ss.polygamma(m.astype(int), x),
                  (np.repeat([0.0, 1.0, 2.0, 3.0, 5.0], 12), np.tile(R.uniform(0.1, 25, 12), 5)), 1e-13),
    "zeta": (lambda s, q: lax.zeta(s, q), ss.zeta, (R.uniform(1.1, 12, 30), R.uniform(0.05, 30, 30)), 1e-13),
    "erf_inv": (lambda p: lax.erf_inv(p), ss.erfinv, (P,), 1e-14),
    "igamma": (lambda a, x: lax.igamma(a, x), ss.gammainc, (A, AX), 1e-12),
    "igammac": (lambda a, x: lax.igammac(a, x), ss.gammaincc, (A, AX), 1e-12),
    "betainc": (lambda a, b, x: lax.betainc(a, b, x), ss.betainc,
                (A[:30], A[30:], R.uniform(0, 1, 30)), 1e-12),
    "bessel_i0e": (lambda x: lax.bessel_i0e(x), ss.i0e, (np.concatenate([X, -X, [0.0, 500.0]]),), 1e-15),
    "bessel_i1e": (lambda x: lax.bessel_i1e(x), ss.i1e, (np.concatenate([X, -X, [0.0, 500.0]]),), 1e-14),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_against_scipy(name):
    fn, ref, args, bound = CASES[name]
    got, want = fn(*args), ref(*args)
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert _rel(np.asarray(got), want, 1.0 if name in ("lgamma", "digamma") else 0.0) <= bound


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32_rounds_the_float64_value(name):
    """float32 operands give float32 results within a float32 rounding of scipy's value (erf_inv: XLA's float32
    polynomial, within 2e-6 relative)."""
    fn, ref, args, _ = CASES[name]
    args32 = tuple(a.astype(np.float32) for a in args)
    got, want = fn(*args32), ref(*(a.astype(np.float64) for a in args32))
    assert got.dtype == np.float32
    bound = 2e-6 if name == "erf_inv" else 2 ** -23
    assert _rel(np.asarray(got, np.float64), want.astype(np.float32).astype(np.float64)) <= bound


def test_special_values():
    inf, nan = np.inf, np.nan
    np.testing.assert_array_equal(lax.lgamma(np.array([0.0, -1.0, -2.0, inf, 1.0, 2.0])), [inf, inf, inf, inf, 0, 0])
    np.testing.assert_array_equal(lax.erf_inv(np.array([-1.0, 1.0, 0.0, 1.5])), [-inf, inf, 0.0, nan])
    np.testing.assert_array_equal(lax.erf_inv(np.array([-1.0, 1.0, 0.0], np.float32)), [-inf, inf, 0.0])
    p = lax.igamma(np.array([1.0, 2.0, 3.0, -1.0]), np.array([0.0, inf, 2.0, 1.0]))
    np.testing.assert_array_equal(p[np.array([0, 1, 3])], [0.0, 1.0, nan])
    np.testing.assert_array_equal(lax.igamma_grad_a(np.array([1.0, 2.0, -1.0]), np.array([0.0, inf, 1.0])), [0, 0, nan])
    np.testing.assert_array_equal(lax.betainc(np.array([2.0, 2.0, -1.0]), np.array([3.0, 3.0, 1.0]),
                                              np.array([0.0, 1.0, 0.5])), [0.0, 1.0, nan])
    assert np.isnan(lax.polygamma(np.array([1.5]), np.array([2.0]))).all()
    assert np.isnan(lax.zeta(np.array([0.5]), np.array([2.0]))).all()


def test_igamma_grad_a_against_central_differences():
    a, x = np.array([0.3, 1.0, 2.5, 7.0, 40.0, 300.0]), np.array([0.05, 2.0, 1.0, 9.0, 38.0, 310.0])
    h = 1e-6 * a
    want = (ss.gammainc(a + h, x) - ss.gammainc(a - h, x)) / (2 * h)
    np.testing.assert_allclose(lax.igamma_grad_a(a, x), want, rtol=1e-6)


def test_random_gamma_grad_is_the_implicit_derivative():
    """d x / d a at a fixed CDF value p = P(a, x): the derivative of scipy's inverse gammaincinv(a, p) in a."""
    a, x = np.array([0.2, 1.0, 3.5, 12.0]), np.array([0.01, 0.7, 4.0, 10.0])
    p, h = ss.gammainc(a, x), 1e-6 * a
    want = (ss.gammaincinv(a + h, p) - ss.gammaincinv(a - h, p)) / (2 * h)
    np.testing.assert_allclose(lax.random_gamma_grad(a, x), want, rtol=1e-5)


# function of float64 operands, the operand to differentiate, its points, the other operands
GRADIENTS = [
    ("lgamma", lambda x: lax.lgamma(x), lambda x: ss.gammaln(x), [0.3, 2.5, 14.0, -2.5]),
    ("digamma", lambda x: lax.digamma(x), lambda x: ss.digamma(x), [0.3, 1.5, 12.0, -0.7]),
    ("polygamma", lambda x: lax.polygamma(np.full(x.shape, 2.0), x), lambda x: ss.polygamma(2, x), [0.5, 3.0, 11.0]),
    ("zeta", lambda q: lax.zeta(np.full(q.shape, 3.0), q), lambda q: ss.zeta(3.0, q), [0.5, 2.0, 20.0]),
    ("erf_inv", lambda p: lax.erf_inv(p), lambda p: ss.erfinv(p), [-0.9, 0.1, 0.99]),
    ("igamma in x", lambda x: lax.igamma(np.full(x.shape, 2.5), x), lambda x: ss.gammainc(2.5, x), [0.5, 2.0, 7.0]),
    ("igamma in a", lambda a: lax.igamma(a, np.full(a.shape, 2.0)), lambda a: ss.gammainc(a, 2.0), [0.5, 2.0, 7.0]),
    ("igammac in a", lambda a: lax.igammac(a, np.full(a.shape, 2.0)), lambda a: ss.gammaincc(a, 2.0), [0.5, 7.0]),
    ("betainc in x", lambda x: lax.betainc(np.full(x.shape, 2.0), np.full(x.shape, 3.5), x),
     lambda x: ss.betainc(2.0, 3.5, x), [0.1, 0.5, 0.9]),
    ("betainc in a", lambda a: lax.betainc(a, np.full(a.shape, 3.5), np.full(a.shape, 0.4)),
     lambda a: ss.betainc(a, 3.5, 0.4), [0.5, 2.0, 6.0]),
    ("bessel_i0e", lambda x: lax.bessel_i0e(x), lambda x: ss.i0e(x), [-3.0, 0.5, 45.0]),
    ("bessel_i1e", lambda x: lax.bessel_i1e(x), lambda x: ss.i1e(x), [-3.0, 0.5, 45.0]),
]


@pytest.mark.parametrize("name, kfn, sfn, x", GRADIENTS, ids=[g[0] for g in GRADIENTS])
def test_gradients(name, kfn, sfn, x):
    x = np.array(x)
    want = numerical_grad(lambda v: np.sum(sfn(v)), x)
    np.testing.assert_allclose(kiln.grad(lambda v: kfn(v).sum())(x), want, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(kiln.jit(kiln.grad(lambda v: kfn(v).sum()))(x), want, rtol=1e-6, atol=1e-10)


def test_second_derivative_of_lgamma_is_trigamma():
    x = np.array([0.4, 3.0, 15.0])
    d2 = kiln.grad(lambda v: kiln.grad(lambda w: lax.lgamma(w).sum())(v).sum())(x)
    np.testing.assert_allclose(d2, ss.polygamma(1, x), rtol=1e-10)


def test_vmap():
    a, x = R.uniform(0.5, 5, (3, 4)), R.uniform(0.1, 6, (3, 4))
    np.testing.assert_allclose(kiln.vmap(lax.igamma)(a, x), ss.gammainc(a, x), rtol=1e-13)
    np.testing.assert_allclose(kiln.vmap(lax.lgamma, in_axes=1, out_axes=1)(x), ss.gammaln(x), rtol=1e-14)
    np.testing.assert_allclose(kiln.vmap(lambda v: lax.igamma(v, x[0]))(a), ss.gammainc(a, x[0]), rtol=1e-13)


@pytest.mark.parametrize("call, message", [
    (lambda: lax.lgamma(np.array([1, 2])), "lgamma: operands must be floating-point; got int64"),
    (lambda: lax.erf_inv(np.array([1, 2], np.int32)), "erf_inv: operands must be floating-point; got int32"),
    (lambda: lax.igamma(np.ones(2, np.float32), np.ones(2)),
     "igamma: operands must have one dtype; got float32, float64"),
    (lambda: lax.betainc(np.ones(2), np.ones(3), np.ones(2)), "betainc: operands must have one shape"),
])
def test_operand_errors(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def _all(x, a, p):
    return (lax.lgamma(x), lax.digamma(x), lax.polygamma(x * 0 + 2, x), lax.zeta(x + 1, a), lax.erf_inv(p),
            lax.igamma(a, x), lax.igammac(a, x), lax.igamma_grad_a(a, x), lax.random_gamma_grad(a, x),
            lax.betainc(a, x, p * p), lax.bessel_i0e(x - 3), lax.bessel_i1e(x - 3))


def _all_references(x, a, p):
    h = 1e-6 * a
    pa = ss.gammainc(a, x)
    return (ss.gammaln(x), ss.digamma(x), ss.polygamma(2, x), ss.zeta(x + 1, a), ss.erfinv(p), pa,
            ss.gammaincc(a, x), (ss.gammainc(a + h, x) - ss.gammainc(a - h, x)) / (2 * h),
            (ss.gammaincinv(a + h, pa) - ss.gammaincinv(a - h, pa)) / (2 * h), ss.betainc(a, x, p * p),
            ss.i0e(x - 3), ss.i1e(x - 3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_jit_and_kiln_run(dtype, tmp_path):
    x = np.array([[0.3, 1.7, 4.0], [9.5, 12.0, 25.0]], dtype)
    a = np.array([[0.5, 2.0, 3.5], [8.0, 11.0, 30.0]], dtype)
    p = np.array([[-0.9, -0.2, 0.0], [0.3, 0.75, 0.99]], dtype)

    def want(x, a, p):
        return tuple(np.asarray(r).astype(dtype) for r in _all_references(*(v.astype(np.float64) for v in (x, a, p))))

    eager_jit_and_kiln_run(_all, want, x, a, p, tmp_path=tmp_path, tol=2e-6 if dtype == np.float32 else 1e-6)
