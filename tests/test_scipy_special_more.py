"""kiln.scipy.special's sici, fresnel, owens_t, bessel_jn, hyp1f1 and hyp2f1 against scipy in float64 (bounds as
in docs/scipy.md) and float32, special values, gradients against float64 central differences, eagerly, under
kiln.jit and exported through the standalone kiln-run."""
from fractions import Fraction

import numpy as np
import pytest
import scipy.special as ss

import kiln
import kiln.scipy.special as ks
from kiln_tools import eager_jit_and_kiln_run
from references import numerical_grad

R = np.random.default_rng(20261124)
LINE = np.concatenate([R.uniform(-30, 30, 200), 10 ** R.uniform(-8, 4, 100), -(10 ** R.uniform(-8, 4, 50)),
                       [2.0, 1.5, 0.6165054856207162, 1e-300]])
A, B, C = R.uniform(0.1, 10, 80), R.uniform(0.1, 10, 80), R.uniform(0.1, 10, 80)


def _check(got, want, rel, absolute=0.0):
    got = np.asarray(got)
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    err = np.abs(got[finite] - want[finite])
    assert np.all(err <= rel * np.abs(want[finite]) + absolute), np.max(err / (rel * np.abs(want[finite]) + absolute))


def test_sici():
    si, ci = ks.sici(LINE)
    want_si, want_ci = ss.sici(LINE)
    _check(si, want_si, 4e-15)
    _check(ci, want_ci, 4e-15, 5e-16)  # absolute near Ci's zeros
    si, ci = ks.sici(np.array([0.0, np.inf, -np.inf, np.nan]))
    np.testing.assert_array_equal(si, [0.0, np.pi / 2, -np.pi / 2, np.nan])
    np.testing.assert_array_equal(ci, [-np.inf, 0.0, np.nan, np.nan])


def test_fresnel():
    """Against scipy up to |x| = 100; beyond, scipy's cephes loses digits in cos(pi x^2 / 2) (6e-13 at 9e3,
    1e-11 at 4e5), so kiln is checked against the asymptotic series with the argument reduced in exact
    rationals."""
    x = LINE[np.abs(LINE) <= 100]
    s, c = ks.fresnel(x)
    want_s, want_c = ss.fresnel(x)
    _check(s, want_s, 4e-14)
    _check(c, want_c, 4e-14)
    big = np.array([250.3, 9104.935147464614, 2.5e4, 4.34392194404e5, 7.649e6, 3.1e7])
    s, c = ks.fresnel(big)
    for v, sv, cv in zip(big, np.asarray(s), np.asarray(c)):
        turn = float((Fraction(v) ** 2 / 2) % 2)  # pi x^2 / 2 = pi * turn, exactly reduced
        sin, cos = np.sin(np.pi * turn), np.cos(np.pi * turn)
        f, g = (1 - 3 / (np.pi * v * v) ** 2) / (np.pi * v), 1 / (np.pi ** 2 * v ** 3)
        np.testing.assert_allclose([sv, cv], [0.5 - f * cos - g * sin, 0.5 + f * sin - g * cos], rtol=2e-15)
    np.testing.assert_array_equal(np.asarray(ks.fresnel(np.array([np.inf, -np.inf, 0.0]))),
                                  [[0.5, -0.5, 0.0], [0.5, -0.5, 0.0]])


def test_owens_t():
    h = np.concatenate([R.uniform(-8, 8, 300), [0.0, 0.0, 5.0, 37.0]])
    a = np.concatenate([R.uniform(-3, 3, 200), 10 ** R.uniform(-3, 3, 100), [0.5, np.inf, -np.inf, 0.1]])
    _check(ks.owens_t(h, a), ss.owens_t(h, a), 5e-14)
    np.testing.assert_array_equal(ks.owens_t(np.array([1.0, np.nan]), np.array([0.0, 1.0])), [0.0, np.nan])


def test_bessel_jn():
    """J_0 .. J_v stacked first, for |z| up to 25 (Miller's recurrence from n_iter = 50), small |z| included
    (kiln rescales the recurrence), z = 0 exactly."""
    z = np.concatenate([R.uniform(-25, 25, (4, 30)).ravel(), [0.0, 1e-8, 1e-3, -2.0]])
    got = ks.bessel_jn(z, v=6)
    want = np.stack([ss.jv(n, z) for n in range(7)])
    assert got.shape == (7,) + z.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=5e-13)
    got2 = ks.bessel_jn(z.reshape(2, -1), v=2, n_iter=60)
    assert got2.shape == (3, 2, z.size // 2)
    np.testing.assert_allclose(got2, want[:3].reshape(3, 2, -1), rtol=1e-12, atol=5e-13)


def test_hyp1f1():
    x = np.concatenate([R.uniform(-60, 60, 50), R.uniform(-400, 400, 30)])
    _check(ks.hyp1f1(A, B, x), ss.hyp1f1(A, B, x), 2e-12)
    # JAX's conventions at a = 0, a = b, b = 0
    np.testing.assert_array_equal(ks.hyp1f1(np.array([0.0, 2.5, 1.0, 0.0]), np.array([3.0, 2.5, 0.0, 0.0]), 2.0),
                                  [1.0, np.exp(2.0), np.inf, 1.0])


def test_hyp2f1():
    """Relative 1e-10 against scipy, whose own error reaches 4e-11 at some x < 0 (2F1(5.52, 4.96; 9.94; -2.19):
    scipy 3.9e-11 off a 40-digit value, kiln 1.5e-15); for x < 0 with c - a and c - b both negative the series'
    terms cancel to a small result, and the bound there is 1e-9 (docs/scipy.md)."""
    x = np.concatenate([R.uniform(-10, 1, 70), [0.95, 0.99, 0.5, 0.9, 0.91, 0.97, 0.999, -50.0, 1.0, 0.0]])
    got, want = ks.hyp2f1(A, B, C, x), ss.hyp2f1(A, B, C, x)
    cancelling = (x < 0) & (C - A < 0) & (C - B < 0)
    _check(np.asarray(got)[~cancelling], want[~cancelling], 1e-10)
    _check(np.asarray(got)[cancelling], want[cancelling], 1e-9)
    np.testing.assert_array_equal(ks.hyp2f1(np.array([1.0, 1.0, 0.5, 1.0]), np.array([2.0, 2.0, 1.0, 0.0]),
                                            np.array([3.0, 3.0, 3.0, 2.0]), np.array([1.5, 1.0, 1.0, 0.3]))[:2],
                                  [np.inf, np.inf])
    np.testing.assert_allclose(ks.hyp2f1(0.5, 1.0, 3.0, 1.0), ss.hyp2f1(0.5, 1.0, 3.0, 1.0), rtol=1e-14)


@pytest.mark.parametrize("name, fn, ref, x", [
    ("si", lambda x: ks.sici(x)[0], lambda x: ss.sici(x)[0], [-3.0, 0.5, 7.0]),
    ("ci", lambda x: ks.sici(x)[1], lambda x: ss.sici(x)[1], [0.3, 2.5, 9.0]),
    ("fresnel_s", lambda x: ks.fresnel(x)[0], lambda x: ss.fresnel(x)[0], [-1.2, 0.4, 3.0]),
    ("fresnel_c", lambda x: ks.fresnel(x)[1], lambda x: ss.fresnel(x)[1], [-1.2, 0.4, 3.0]),
    ("owens_t_h", lambda h: ks.owens_t(h, 0.7), lambda h: ss.owens_t(h, 0.7), [-1.0, 0.3, 2.0]),
    ("owens_t_a", lambda a: ks.owens_t(1.3, a), lambda a: ss.owens_t(1.3, a), [-2.0, 0.4, 3.0]),
    ("bessel_jn", lambda z: ks.bessel_jn(z, v=3)[3], lambda z: ss.jv(3, z), [-4.0, 0.5, 9.0]),
    ("hyp1f1_x", lambda x: ks.hyp1f1(1.5, 2.5, x), lambda x: ss.hyp1f1(1.5, 2.5, x), [-3.0, 0.5, 4.0]),
    ("hyp1f1_a", lambda a: ks.hyp1f1(a, 2.5, 1.5), lambda a: ss.hyp1f1(a, 2.5, 1.5), [0.5, 3.0]),
    ("hyp1f1_b", lambda b: ks.hyp1f1(1.5, b, -1.5), lambda b: ss.hyp1f1(1.5, b, -1.5), [0.5, 3.0]),
    ("hyp2f1_x", lambda x: ks.hyp2f1(0.5, 1.5, 2.5, x), lambda x: ss.hyp2f1(0.5, 1.5, 2.5, x), [-2.0, 0.3, 0.95]),
    ("hyp2f1_c", lambda c: ks.hyp2f1(0.5, 1.5, c, 0.4), lambda c: ss.hyp2f1(0.5, 1.5, c, 0.4), [1.2, 4.0]),
])
def test_gradients(name, fn, ref, x):
    x = np.array(x)
    want = numerical_grad(lambda v: np.sum(ref(v)), x)
    np.testing.assert_allclose(kiln.grad(lambda v: fn(v).sum())(x), want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(kiln.jit(kiln.grad(lambda v: fn(v).sum()))(x), want, rtol=1e-6, atol=1e-9)


def test_float32_rounds_the_float64_value():
    x = np.array([-3.7, 0.2, 1.4, 2.6, 11.0], np.float32)
    a, b = np.array([0.5, 1.0, 2.0, 3.5, 0.7], np.float32), np.array([1.5, 0.3, 4.0, 2.0, 5.0], np.float32)
    for got, want in [(ks.sici(x)[0], ss.sici(x.astype(float))[0]), (ks.fresnel(x)[1], ss.fresnel(x.astype(float))[1]),
                      (ks.owens_t(x, a), ss.owens_t(x.astype(float), a.astype(float))),
                      (ks.hyp1f1(a, b, x), ss.hyp1f1(a.astype(float), b.astype(float), x.astype(float))),
                      (ks.hyp2f1(a, b, b + 1, x / 12), ss.hyp2f1(*(v.astype(float) for v in (a, b, b + 1, x / 12)))),
                      (ks.bessel_jn(x, v=1), np.stack([ss.jv(n, x.astype(float)) for n in (0, 1)]))]:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want.astype(np.float32), rtol=2 ** -23, atol=1e-7)


def test_bessel_jn_errors():
    with pytest.raises(ValueError, match=r"bessel_jn: need 0 <= v <= n_iter, got v=-1, n_iter=50"):
        ks.bessel_jn(np.ones(2), v=-1)
    with pytest.raises(ValueError, match=r"bessel_jn: need 0 <= v <= n_iter, got v=9, n_iter=5"):
        ks.bessel_jn(np.ones(2), v=9, n_iter=5)


def _all(x, a, b):
    return (*ks.sici(x), *ks.fresnel(x), ks.owens_t(x, a), ks.bessel_jn(x, v=2), ks.hyp1f1(a, b, x),
            ks.hyp2f1(a, b, b + 1.0, x / 12.0))


def _all_references(x, a, b):
    return (*ss.sici(x), *ss.fresnel(x), ss.owens_t(x, a), np.stack([ss.jv(n, x) for n in range(3)]),
            ss.hyp1f1(a, b, x), ss.hyp2f1(a, b, b + 1.0, x / 12.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_jit_and_kiln_run(dtype, tmp_path):
    x = np.array([[-3.7, 0.2, 1.4], [2.6, 6.0, 11.0]], dtype)
    a = np.array([[0.5, 1.0, 2.0], [3.5, 0.7, 1.2]], dtype)
    b = np.array([[1.5, 0.3, 4.0], [2.0, 5.0, 0.9]], dtype)

    def want(x, a, b):
        return tuple(np.asarray(r).astype(dtype) for r in _all_references(*(v.astype(np.float64) for v in (x, a, b))))

    eager_jit_and_kiln_run(_all, want, x, a, b, tmp_path=tmp_path, tol=2e-6 if dtype == np.float32 else 1e-9)


def test_polygamma_with_an_array_order(tmp_path):
    """jax.scipy.special.polygamma takes an array of orders (elementwise, through kiln.lax.polygamma); a Python
    integer order keeps the exact n! path."""
    n, x = np.array([0, 1, 2, 3, 4, 1]), np.array([0.7, 2.5, 11.0, 0.3, 6.0, -1.5])
    eager_jit_and_kiln_run(lambda m, v: ks.polygamma(m, v), lambda m, v: ss.polygamma(m, v), n, x,
                           tmp_path=tmp_path, tol=1e-12)
    np.testing.assert_array_equal(np.isnan(ks.polygamma(np.array([1.5, -1.0]), np.array([2.0, 2.0]))), [True, True])
    np.testing.assert_allclose(kiln.grad(lambda v: ks.polygamma(np.array([2.0]), v).sum())(np.array([1.5])),
                               ss.polygamma(3, 1.5), rtol=1e-10)
