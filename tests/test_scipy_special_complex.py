"""kiln.scipy.special's complex functions against scipy.special: wofz (the Faddeeva function) across the plane
(both half-planes, the real axis, large |z|) and sph_harm_y (degrees to 40, every order, negative and too
large orders), in single and double precision, eagerly, under kiln.jit and through kiln-run; gradients of real
losses against float64 central differences; the errors with their messages.

Tolerances (docs/scipy.md): wofz |w - scipy| <= 5e-14 |scipy| in complex128, 4 eps(float32) |scipy| in
complex64; sph_harm_y |Y - scipy| <= 1e-13 (degrees <= 40; |Y| <= 2 there), 1e-6 in complex64."""
import numpy as np
import pytest
import scipy.special as sp

import kiln
import kiln.lax as lax
import kiln.numpy as knp
import kiln.scipy.special as ks
from kiln_tools import kiln_run_exported
from references import numerical_grad

RNG = np.random.default_rng(17)


def relative(got, want, tol, dtype):
    got = np.asarray(got)
    assert got.dtype == dtype and got.shape == np.shape(want), (got.dtype, got.shape, np.shape(want))
    err = np.abs(got.astype(np.complex128) - want) / np.abs(want)
    assert np.all(err <= tol), (float(np.max(err)), want.flat[np.argmax(err)])


def plane():
    x = np.concatenate([RNG.uniform(-8, 8, 1500), 10 ** RNG.uniform(-3, 4, 400) * RNG.choice([-1, 1], 400),
                        RNG.uniform(-30, 30, 200), [0.0, 1e-300, 5.5, -7.9]])
    y = np.concatenate([10 ** RNG.uniform(-9, 1.5, 1500), 10 ** RNG.uniform(-3, 4, 400), np.zeros(200),
                        [0.0, 0.0, 1e-12, 2.9e-5]])
    lower = np.stack([RNG.uniform(-5, 5, 600), -RNG.uniform(0, 4, 600)], axis=1)
    return np.concatenate([x + 1j * y, lower[:, 0] + 1j * lower[:, 1]])


@pytest.mark.parametrize("dtype, tol", [(np.complex128, 5e-14), (np.complex64, 4 * 2 ** -23)],
                         ids=["complex128", "complex64"])
def test_wofz_against_scipy(dtype, tol):
    z = plane().astype(dtype)
    want = sp.wofz(z.astype(np.complex128))
    relative(ks.wofz(z), want, tol, dtype)
    relative(kiln.jit(ks.wofz)(z), want, tol, dtype)


def test_wofz_real_inputs_and_real_axis():
    x = RNG.uniform(-12, 12, 300)
    got = np.asarray(kiln.jit(ks.wofz)(x))
    relative(got, sp.wofz(x), 5e-14, np.complex128)
    np.testing.assert_allclose(got.real, np.exp(-x * x), rtol=4e-16, atol=0)  # each part, not just |w|
    relative(ks.wofz(x.astype(np.float32)), sp.wofz(x), 4 * 2 ** -23, np.complex64)  # JAX's complex64
    relative(ks.wofz(np.arange(-3, 4)), sp.wofz(np.arange(-3.0, 4.0)), 5e-14, np.complex128)


def test_wofz_kiln_run(tmp_path):
    z = plane()[::7]
    relative(kiln_run_exported(ks.wofz, z, tmp_path=tmp_path)[0], sp.wofz(z), 5e-14, np.complex128)


def test_wofz_gradient_of_a_real_loss():
    """d/dx of sum(c1 Re w(x + i y) + c2 Im w(x + i y)) through the complex primitives."""
    x, y = RNG.uniform(-3, 3, 6), RNG.uniform(-1, 2, 6)
    c1, c2 = RNG.standard_normal(6), RNG.standard_normal(6)

    def loss(a, b):
        w = ks.wofz(lax.complex(a, b))
        return knp.sum(knp.real(w) * c1 + knp.imag(w) * c2)

    for arg in (0, 1):
        got = kiln.grad(loss, argnums=arg)(x, y)
        other = (x, y)[1 - arg]
        want = numerical_grad(lambda v: np.asarray(loss(v, other) if arg == 0 else loss(other, v)), (x, y)[arg])
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-7, atol=1e-8)
    # the complex derivative is w' = -2 z w + 2i/sqrt(pi): its real part is d Re w / dx
    z = x + 1j * y
    dw = -2 * z * sp.wofz(z) + 2j / np.sqrt(np.pi)
    got = kiln.grad(lambda a: knp.sum(knp.real(ks.wofz(lax.complex(a, y)))))(x)
    np.testing.assert_allclose(np.asarray(got), dw.real, rtol=1e-12, atol=1e-13)


def test_sph_harm_y_against_scipy():
    n = RNG.integers(0, 12, 600)
    m = RNG.integers(-13, 14, 600)  # |m| > n gives 0, as scipy
    theta, phi = RNG.uniform(0, np.pi, 600), RNG.uniform(-7, 7, 600)
    want = sp.sph_harm_y(n, m, theta, phi)
    for got in (ks.sph_harm_y(n, m, theta, phi),
                kiln.jit(lambda a, b, c, d: ks.sph_harm_y(a, b, c, d, n_max=11))(n, m, theta, phi)):
        assert np.asarray(got).dtype == np.complex128
        np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1e-13)
    assert np.all(np.asarray(ks.sph_harm_y(n, m, theta, phi))[np.abs(m) > n] == 0)


def test_sph_harm_y_high_degree_broadcasting_and_float32():
    m = np.arange(-41, 42)[:, None]
    theta = np.array([0.0, 1e-3, 0.7, np.pi / 2, 3.0, np.pi])
    np.testing.assert_allclose(ks.sph_harm_y(40, m, theta, 0.3), sp.sph_harm_y(40, m, theta, 0.3), rtol=0,
                               atol=1e-13)
    t32, p32 = theta.astype(np.float32), np.float32(1.1)
    got = kiln.jit(lambda a, b: ks.sph_harm_y(np.arange(6)[:, None], 2, a, b))(t32, p32)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(got), sp.sph_harm_y(np.arange(6)[:, None], 2, t32.astype(np.float64), 1.1),
                               rtol=0, atol=1e-6)
    # a negative degree, or one above n_max, gives 0 rather than reading past the table
    np.testing.assert_array_equal(ks.sph_harm_y(np.array([-1, 5]), 0, 0.5, 0.5, n_max=3), [0, 0])


def test_sph_harm_y_kiln_run(tmp_path):
    n, m = RNG.integers(0, 6, 40), RNG.integers(-6, 7, 40)
    theta, phi = RNG.uniform(0, np.pi, 40), RNG.uniform(0, 2 * np.pi, 40)
    got = kiln_run_exported(lambda a, b, c, d: ks.sph_harm_y(a, b, c, d, n_max=5), n, m, theta, phi,
                            tmp_path=tmp_path)[0]
    np.testing.assert_allclose(got, sp.sph_harm_y(n, m, theta, phi), rtol=0, atol=1e-13)


def test_sph_harm_y_gradient_in_the_angles():
    n, m = np.array([0, 1, 3, 4, 6]), np.array([0, -1, 2, -4, 5])
    theta, phi = RNG.uniform(0.2, 2.9, 5), RNG.uniform(0, 6, 5)

    def loss(t, p):
        y = ks.sph_harm_y(n, m, t, p)
        return knp.sum(knp.real(y) * 1.5 - knp.imag(y) * knp.arange(5.0))

    for arg, v in ((0, theta), (1, phi)):
        got = kiln.grad(loss, argnums=arg)(theta, phi)
        want = numerical_grad(lambda u: np.asarray(loss(u, phi) if arg == 0 else loss(theta, u)), v)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("call, error, message", [
    (lambda: ks.sph_harm_y(2, 1, 0.3, 0.2, diff_n=1), NotImplementedError, "sph_harm_y: only diff_n=0 is supported"),
    (lambda: ks.sph_harm_y(2.0, 1, 0.3, 0.2), TypeError, "sph_harm_y: n must be an integer array, got dtype float"),
    (lambda: ks.sph_harm_y(2, np.float32(1), 0.3, 0.2), TypeError, "sph_harm_y: m must be an integer array"),
    (lambda: kiln.jit(lambda n: ks.sph_harm_y(n, 0, 0.3, 0.2))(np.int32(2)), ValueError,
     "sph_harm_y: n is traced; pass n_max"),
    (lambda: ks.sph_harm_y(2, 0, 0.3, 0.2, n_max=-1), ValueError, "sph_harm_y: n_max must be non-negative, got -1"),
])
def test_errors(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)
