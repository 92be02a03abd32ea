"""kiln.scipy.linalg's dft, pascal, invpascal, invhilbert, fiedler_companion, qr_multiply, solve_sylvester and
hessenberg against scipy.linalg: values, dtypes and shapes eagerly and under jit (float32 and float64),
batches, gradients against float64 central differences, a kiln-run export, errors."""
import numpy as np
import pytest
import scipy.linalg as sl

import kiln
import kiln.numpy as knp
import kiln.scipy._linalg_extra
import kiln.scipy.linalg as kl
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

TOL = {np.float32: 2e-4, np.float64: 1e-10}
FLOATS = [np.float32, np.float64]


@pytest.mark.parametrize("n", [0, 1, 2, 7])
@pytest.mark.parametrize("scale", [None, "sqrtn", "n"])
def test_dft(n, scale):
    check_like_numpy(kl.dft(n, scale), sl.dft(n, scale), 1e-13)


@pytest.mark.parametrize("name", ["pascal", "invpascal"])
@pytest.mark.parametrize("kind", ["symmetric", "lower", "upper"])
@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("n", [0, 1, 5, 34])
def test_pascal_and_invpascal(name, kind, exact, n):
    got, want = getattr(kl, name)(n, kind, exact), getattr(sl, name)(n, kind, exact)
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got, want)
    else:  # kiln rounds the exact integers once; scipy's float binomials may be one ulp off
        np.testing.assert_allclose(got, want, rtol=2e-15)


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("n", [0, 1, 4, 14])
def test_invhilbert(exact, n):
    got, want = kl.invhilbert(n, exact), sl.invhilbert(n, exact)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-15)
    if n and not exact and n <= 8:
        np.testing.assert_allclose(got @ kl.hilbert(n), np.eye(n), atol=1e-6)


@pytest.mark.parametrize("coefficients", [[1.0, 2, 3, 4, 5, 6], [2.0, 3, 4, 5, 6, 7, 8], [1.0, 2], [3.0, 1, 2],
                                          [2.0], [1, -6, 11, -6]])
def test_fiedler_companion(coefficients):
    a = np.array(coefficients)
    eager_and_jit(kl.fiedler_companion, sl.fiedler_companion, a)


def test_fiedler_companion_batch_float32_and_gradient():
    a = np.random.default_rng(0).standard_normal((3, 6)) + np.array([3.0, 0, 0, 0, 0, 0])
    check_like_numpy(kl.fiedler_companion(a), np.stack([sl.fiedler_companion(x) for x in a]))
    check_like_numpy(kl.fiedler_companion(a[0].astype(np.float32)),
                     sl.fiedler_companion(a[0]).astype(np.float32), 1e-6)
    w = np.random.default_rng(1).standard_normal((5, 5))
    got = kiln.grad(lambda x: knp.sum(kl.fiedler_companion(x) * w))(a[0])
    np.testing.assert_allclose(got, numerical_grad(lambda x: np.sum(sl.fiedler_companion(x) * w), a[0]), atol=1e-7)
    roots = np.sort_complex(np.linalg.eigvals(np.asarray(kl.fiedler_companion(np.array([1.0, -6, 11, -6])))))
    np.testing.assert_allclose(roots, [1, 2, 3], atol=1e-10)


QR_CASES = [((5, 3), "right", (5,)), ((5, 3), "right", (2, 5)), ((5, 3), "left", (3,)), ((5, 3), "left", (3, 2)),
            ((3, 5), "right", (3,)), ((3, 5), "right", (2, 3)), ((3, 5), "left", (3,)), ((3, 5), "left", (3, 2))]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,mode,c_shape", QR_CASES)
def test_qr_multiply(dtype, shape, mode, c_shape):
    rng = np.random.default_rng(2)
    a, c = rng.standard_normal(shape).astype(dtype), rng.standard_normal(c_shape).astype(dtype)
    want = tuple(x.astype(dtype) for x in sl.qr_multiply(a.astype(np.float64), c.astype(np.float64), mode))
    eager_and_jit(lambda x, y: kl.qr_multiply(x, y, mode), lambda x, y: want, a, c, tol=TOL[dtype])
    check_like_numpy(kl.qr_multiply(a, c, mode, conjugate=True), want, TOL[dtype])


def test_qr_multiply_gradient():
    rng = np.random.default_rng(3)
    a, c = rng.standard_normal((4, 3)), rng.standard_normal((2, 4))
    w = rng.standard_normal((2, 3))
    got = kiln.grad(lambda x: knp.sum(kl.qr_multiply(x, c)[0] * w))(a)
    np.testing.assert_allclose(got, numerical_grad(lambda x: np.sum(sl.qr_multiply(x, c)[0] * w), a), atol=1e-7)


def _sylvester_operands(rng, m, n, dtype=np.float64):
    return (rng.standard_normal((m, m)).astype(dtype), (rng.standard_normal((n, n)) + 4 * np.eye(n)).astype(dtype),
            rng.standard_normal((m, n)).astype(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n", [(1, 1), (3, 4), (5, 2)])
def test_solve_sylvester(dtype, m, n):
    a, b, q = _sylvester_operands(np.random.default_rng(4), m, n, dtype)
    want = sl.solve_sylvester(a.astype(np.float64), b.astype(np.float64), q.astype(np.float64)).astype(dtype)
    eager_and_jit(kl.solve_sylvester, lambda *_: want, a, b, q, tol=10 * TOL[dtype])
    x = np.asarray(kl.solve_sylvester(a, b, q), np.float64)
    np.testing.assert_allclose(a @ x + x @ b, q, atol={np.float32: 1e-4, np.float64: 1e-12}[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n", [(1, 1), (3, 4), (5, 2)])
def test_solve_sylvester_bartels_stewart_path(dtype, m, n, monkeypatch):
    monkeypatch.setattr(kiln.scipy._linalg_extra, "KRONECKER_MAX", 0)
    a, b, q = _sylvester_operands(np.random.default_rng(9), m, n, dtype)
    want = sl.solve_sylvester(a.astype(np.float64), b.astype(np.float64), q.astype(np.float64)).astype(dtype)
    eager_and_jit(kl.solve_sylvester, lambda *_: want, a, b, q, tol=10 * TOL[dtype])


def test_solve_sylvester_large_takes_bartels_stewart():
    rng = np.random.default_rng(10)
    ops = [_sylvester_operands(rng, 20, 15) for _ in range(2)]
    assert 20 * 15 > kiln.scipy._linalg_extra.KRONECKER_MAX
    a, b, q = (np.stack(x) for x in zip(*ops))
    want = np.stack([sl.solve_sylvester(*o) for o in ops])
    eager_and_jit(kl.solve_sylvester, lambda *_: want, a, b, q, tol=1e-10)
    x = np.asarray(kl.solve_sylvester(*(o.astype(np.float32) for o in ops[0])), np.float64)
    np.testing.assert_allclose(ops[0][0] @ x + x @ ops[0][1], ops[0][2], atol=1e-4 * 20)


def test_solve_sylvester_batch_and_gradient():
    rng = np.random.default_rng(5)
    ops = [_sylvester_operands(rng, 3, 2) for _ in range(2)]
    a, b, q = (np.stack(x) for x in zip(*ops))
    check_like_numpy(kl.solve_sylvester(a, b, q), np.stack([sl.solve_sylvester(*o) for o in ops]), 1e-10)
    check_like_numpy(kl.solve_sylvester(a, b[0], q[0]), np.stack([sl.solve_sylvester(x, b[0], q[0]) for x in a]),
                     1e-10)
    w = rng.standard_normal((3, 2))
    a0, b0, q0 = ops[0]
    for i in range(3):
        def loss(*xs, i=i):
            return np.sum(sl.solve_sylvester(*xs) * w)
        got = kiln.grad(lambda *xs: knp.sum(kl.solve_sylvester(*xs) * w), argnums=i)(a0, b0, q0)
        want = numerical_grad(lambda x: loss(*[x if j == i else o for j, o in enumerate(ops[0])]), ops[0][i])
        np.testing.assert_allclose(got, want, atol=1e-7)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_hessenberg_matches_scipy(dtype, n):
    a = np.random.default_rng(6).standard_normal((n, n)).astype(dtype)
    ref = sl.hessenberg(a.astype(np.float64), calc_q=True)
    want = tuple(x.astype(dtype) for x in ref)
    eager_and_jit(lambda x: kl.hessenberg(x, calc_q=True), lambda x: want, a, tol=TOL[dtype])
    check_like_numpy(kl.hessenberg(a), want[0], TOL[dtype])
    h, q = (np.asarray(x, np.float64) for x in kl.hessenberg(a, calc_q=True))
    assert np.all(np.tril(h, -2) == 0)
    np.testing.assert_allclose(q @ h @ q.T, a, atol={np.float32: 1e-5, np.float64: 1e-12}[dtype])


def test_hessenberg_batch_and_already_reduced_columns():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 5, 5))
    a[1, 2:, 0] = 0.0  # column 0 already reduced: LAPACK's reflector is the identity (tau = 0)
    check_like_numpy(kl.hessenberg(a, calc_q=True), tuple(np.stack(x) for x in zip(
        *[sl.hessenberg(x, calc_q=True) for x in a])), 1e-10)


def test_program_with_the_new_functions_runs_in_kiln_run(tmp_path):
    rng = np.random.default_rng(8)
    a, b, q = _sylvester_operands(rng, 4, 3)
    c = rng.standard_normal((2, 4))

    def fn(x, y, z, w):
        return (*kl.hessenberg(x, calc_q=True), kl.solve_sylvester(x, y, z), kl.qr_multiply(x, w)[0],
                kl.fiedler_companion(x[0]))

    def ref(x, y, z, w):
        return (*sl.hessenberg(x, calc_q=True), sl.solve_sylvester(x, y, z), sl.qr_multiply(x, w)[0],
                sl.fiedler_companion(x[0]))

    eager_jit_and_kiln_run(fn, ref, a, b, q, c, tmp_path=tmp_path, tol=1e-10)


def test_errors_name_function_and_argument():
    with pytest.raises(ValueError, match=r"scipy.linalg.dft: scale must be None, 'sqrtn' or 'n', got 'm'"):
        kl.dft(3, "m")
    with pytest.raises(TypeError, match=r"scipy.linalg.dft: argument n must be an integer, got 2.5"):
        kl.dft(2.5)
    with pytest.raises(ValueError, match=r"scipy.linalg.pascal: kind must be 'symmetric', 'lower' or 'upper', "
                                         r"got 'left'"):
        kl.pascal(3, "left")
    with pytest.raises(ValueError, match=r"scipy.linalg.invpascal: kind must be"):
        kl.invpascal(3, "left")
    with pytest.raises(ValueError, match=r"scipy.linalg.pascal: exact=True needs n <= 34 .*got 35; use exact=False"):
        kl.pascal(35)
    with pytest.raises(ValueError, match=r"scipy.linalg.invpascal: exact=True needs n <= 34"):
        kl.invpascal(35)
    with pytest.raises(ValueError, match=r"scipy.linalg.invhilbert: exact=True needs n <= 14 .*got 15"):
        kl.invhilbert(15, exact=True)
    with pytest.raises(ValueError, match=r"scipy.linalg.invhilbert: argument n must be non-negative, got -1"):
        kl.invhilbert(-1)
    with pytest.raises(NotImplementedError, match=r"scipy.linalg.qr_multiply: pivoting=True"):
        kl.qr_multiply(np.eye(2), np.eye(2), pivoting=True)
    with pytest.raises(ValueError, match=r"scipy.linalg.qr_multiply: mode must be 'left' or 'right', got 'up'"):
        kl.qr_multiply(np.eye(2), np.eye(2), "up")
    with pytest.raises(ValueError, match=r"scipy.linalg.qr_multiply: array shapes are not compatible for c @ Q: a "
                                         r"has shape \(5, 3\) \(Q is \(5, 3\)\), c has shape \(2, 4\)"):
        kl.qr_multiply(np.ones((5, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"not compatible for Q @ c: .* c has shape \(4, 2\)"):
        kl.qr_multiply(np.ones((5, 3)), np.ones((4, 2)), "left")
    with pytest.raises(ValueError, match=r"scipy.linalg.solve_sylvester: q must have shape \(2, 3\) \(a's rows by "
                                         r"b's columns\), got \(3, 2\)"):
        kl.solve_sylvester(np.eye(2), np.eye(3), np.ones((3, 2)))
    with pytest.raises(np.linalg.LinAlgError, match=r"scipy.linalg.solve_sylvester: Last 2 dimensions of the array "
                                                     r"must be square, argument b has shape \(2, 3\)"):
        kl.solve_sylvester(np.eye(2), np.ones((2, 3)), np.ones((2, 2)))
    with pytest.raises(np.linalg.LinAlgError, match=r"scipy.linalg.hessenberg: Last 2 dimensions"):
        kl.hessenberg(np.ones((2, 3)))
    with pytest.raises(TypeError, match=r"scipy.linalg.hessenberg: unsupported dtype complex64"):
        kl.hessenberg(np.eye(2, dtype=np.complex64))


def test_singular_sylvester_gives_non_finite():
    assert not np.isfinite(kl.solve_sylvester(np.eye(2), -np.eye(2), np.ones((2, 2)))).all()
