"""kiln.scipy.linalg's schur, rsf2csf, sqrtm and funm against scipy.linalg: Schur forms by their defining
properties (a Schur form is not unique: block order and signs may differ from LAPACK's), rsf2csf, sqrtm and
funm by value, in float32 and float64, eagerly, under jit, exported through kiln-run; errors."""
import numpy as np
import pytest
import scipy.linalg as sl

import kiln
import kiln.numpy as knp
import kiln.scipy._linalg_extra
import kiln.scipy.linalg as kl
from kiln.transforms.jvp import DifferentiationError
from kiln_tools import check_like_numpy, kiln_run_exported

FLOATS = [np.float32, np.float64]
# Residual/orthogonality bound: 10 n eps (relative to max|a|); measured at most 5.1 n eps over 560 random,
# integer, tridiagonal and repeated-root companion matrices (n = 2..13, float32 and float64).
SCHUR_TOL = {np.float32: 10 * np.finfo(np.float32).eps, np.float64: 10 * np.finfo(np.float64).eps}


def _hard_matrices():
    rng = np.random.default_rng(0)
    skew = rng.standard_normal((6, 6))
    sym = rng.standard_normal((6, 6))
    return {
        "random4": rng.standard_normal((4, 4)), "random7": rng.standard_normal((7, 7)),
        "random12": rng.standard_normal((12, 12)), "zero": np.zeros((4, 4)), "identity": np.eye(3),
        "jordan": np.eye(5, k=1) + 2 * np.eye(5), "cyclic permutation": np.roll(np.eye(6), 1, 0),
        "symmetric": sym + sym.T, "skew": skew - skew.T, "companion": sl.companion([1.0, -10, 35, -50, 24]),
        "upper triangular": np.triu(rng.standard_normal((5, 5))), "rotation": np.array([[0.0, -1], [1, 0]]),
        "scaled up": 1e6 * rng.standard_normal((5, 5)), "scaled down": 1e-6 * rng.standard_normal((5, 5)),
        "hilbert": sl.hilbert(6), "one": np.array([[3.0]]), "two real": np.array([[1.0, 2], [3, 4]]),
    }


HARD = _hard_matrices()


def _eigenvalue_distance(got, want):
    return max(np.min(np.abs(g - want)) for g in got) if len(got) else 0.0


def _check_real_schur(a, t, z, dtype):
    n, tol = a.shape[0], SCHUR_TOL[dtype] * max(a.shape[0], 1)
    assert t.dtype == dtype and z.dtype == dtype and t.shape == z.shape == a.shape
    t, z, a = (np.asarray(x, np.float64) for x in (t, z, a))
    scale = max(np.abs(a).max(), np.finfo(dtype).tiny)
    np.testing.assert_allclose(z @ t @ z.T, a, atol=tol * scale)
    np.testing.assert_allclose(z.T @ z, np.eye(n), atol=tol)
    assert np.all(np.tril(t, -2) == 0)
    sub = np.diag(t, -1)
    assert not np.any((sub[:-1] != 0) & (sub[1:] != 0)), "2x2 blocks must not overlap"
    for i in np.flatnonzero(sub):  # a 2x2 block: complex eigenvalues, scipy's standard form
        assert abs(t[i, i] - t[i + 1, i + 1]) <= tol * scale and t[i, i + 1] * t[i + 1, i] < 0
    want = np.linalg.eigvals(a)
    assert _eigenvalue_distance(np.linalg.eigvals(t), want) <= 1e3 * tol * scale


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(HARD))
def test_real_schur_properties(dtype, name):
    a = HARD[name].astype(dtype)
    _check_real_schur(a, *kl.schur(a), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_schur_under_jit_and_complex_output(dtype):
    a = HARD["random7"].astype(dtype)
    t, z = kiln.jit(kl.schur)(a)
    _check_real_schur(a, t, z, dtype)
    ct, cz = kiln.jit(lambda x: kl.schur(x, output="complex"))(a)
    cdtype = np.result_type(dtype, np.complex64)
    assert ct.dtype == cz.dtype == cdtype
    ct, cz = np.asarray(ct, np.complex128), np.asarray(cz, np.complex128)
    tol = SCHUR_TOL[dtype] * 7
    assert np.all(np.tril(ct, -1) == 0)
    np.testing.assert_allclose(cz @ ct @ cz.conj().T, a, atol=tol * np.abs(a).max())
    np.testing.assert_allclose(cz.conj().T @ cz, np.eye(7), atol=tol)
    assert _eigenvalue_distance(np.diag(ct), np.linalg.eigvals(a.astype(np.float64))) <= 1e3 * tol


@pytest.mark.parametrize("output", ["real", "complex"])
def test_schur_batches_over_leading_axes(output):
    a = np.stack([HARD["random4"], HARD["companion"][:4, :4], np.roll(np.eye(4), 1, 0)]).reshape(3, 1, 4, 4)
    for fn in (kl.schur, kiln.jit(kl.schur, static_argnames="output")):
        t, z = fn(a, output=output)
        assert t.shape == z.shape == a.shape and t.dtype == (np.float64 if output == "real" else np.complex128)
        for k in range(3):  # each a Schur form of its matrix (not necessarily the unbatched call's: not unique)
            one_t, one_z = np.asarray(t)[k, 0], np.asarray(z)[k, 0]
            if output == "real":
                _check_real_schur(a[k, 0], one_t, one_z, np.float64)
            else:
                assert np.all(np.tril(one_t, -1) == 0)
                np.testing.assert_allclose(one_z @ one_t @ one_z.conj().T, a[k, 0], atol=1e-13)
                np.testing.assert_allclose(one_z.conj().T @ one_z, np.eye(4), atol=1e-13)
    empty = kl.schur(np.ones((0, 3, 3)), output=output)
    assert [x.shape for x in empty] == [(0, 3, 3)] * 2


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 4, 6])
def test_rsf2csf_matches_scipy(dtype, n):
    a = np.random.default_rng(n).standard_normal((n, n))
    t, z = (x.astype(dtype) for x in sl.schur(a))
    want = tuple(x.astype(np.result_type(dtype, np.complex64)) for x in sl.rsf2csf(t.astype(np.float64),
                                                                                   z.astype(np.float64)))
    tol = {np.float32: 1e-5, np.float64: 1e-13}[dtype]
    check_like_numpy(kl.rsf2csf(t, z), want, tol)
    check_like_numpy(kiln.jit(kl.rsf2csf)(t, z), want, tol)


SQRTM_TOL = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", ["spd", "general", "negative eigenvalues", "one"])
def test_sqrtm_matches_scipy(dtype, case):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 5))
    a = {"spd": x @ x.T + np.eye(5), "general": x + 5 * np.eye(5), "negative eigenvalues": -np.diag([1.0, 4, 9]),
         "one": np.array([[4.0]])}[case].astype(dtype)
    want = sl.sqrtm(a.astype(np.float64)).astype(np.result_type(dtype, np.complex64))
    scale = max(1.0, np.abs(want).max())
    check_like_numpy(kl.sqrtm(a), want, SQRTM_TOL[dtype] * scale)
    check_like_numpy(kiln.jit(kl.sqrtm)(a), want, SQRTM_TOL[dtype] * scale)
    root = np.asarray(kl.sqrtm(a), np.complex128)
    np.testing.assert_allclose(root @ root, a, atol=SQRTM_TOL[dtype] * scale ** 2)


def test_sqrtm_of_a_real_matrix_with_complex_root_and_singular():
    a = HARD["random4"]
    root = np.asarray(kl.sqrtm(a))
    np.testing.assert_allclose(root, sl.sqrtm(a), atol=1e-12)
    np.testing.assert_allclose(root @ root, a, atol=1e-12)
    singular = np.array([[1.0, 1.0], [0.0, 0.0]])
    with pytest.warns(sl.LinAlgWarning, match="singular"):
        want = sl.sqrtm(singular)
    check_like_numpy(kl.sqrtm(singular), want.astype(np.complex128), 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fname", ["exp", "sin", "cos"])
def test_funm_matches_scipy(dtype, fname):
    a = np.random.default_rng(6).standard_normal((6, 6)).astype(dtype)
    want = sl.funm(a.astype(np.float64), getattr(np, fname)).astype(np.result_type(dtype, np.complex64))
    tol = {np.float32: 2e-5, np.float64: 1e-12}[dtype] * max(1.0, np.abs(want).max())
    check_like_numpy(kl.funm(a, getattr(knp, fname)), want, tol)
    check_like_numpy(kiln.jit(lambda x: kl.funm(x, getattr(knp, fname)))(a), want, tol)
    if fname == "exp":
        np.testing.assert_allclose(np.asarray(kl.funm(a, knp.exp)), sl.expm(a.astype(np.float64)), atol=10 * tol)


def test_funm_error_estimate_like_scipy():
    a = np.random.default_rng(7).standard_normal((5, 5))
    f, err = kl.funm(a, knp.sin, disp=False)
    f_want, err_want = sl.funm(a, np.sin, disp=False)
    np.testing.assert_allclose(np.asarray(f), f_want, atol=1e-12)
    assert err.dtype == np.float64 and np.isclose(float(err), err_want, rtol=1e-3, atol=1e-15)
    close = np.array([[1.0, 1.0], [0.0, 1.0 + 1e-9]])
    assert float(kl.funm(close, knp.exp, disp=False)[1]) > 1e-9  # close eigenvalues: a large error estimate


def test_program_with_schur_functions_runs_in_kiln_run(tmp_path, monkeypatch):
    monkeypatch.setattr(kiln.scipy._linalg_extra, "KRONECKER_MAX", 0)  # solve_sylvester by Bartels-Stewart
    a = HARD["random4"]
    b = a @ a.T + np.eye(4)

    def fn(x, y):
        t, z = kl.schur(x)
        return t, z, kl.sqrtm(y), kl.funm(x, knp.exp), kl.schur(x, output="complex")[0], kl.solve_sylvester(x, y, y)

    eager = [np.asarray(v) for v in fn(a, b)]
    got = kiln_run_exported(fn, a, b, tmp_path=tmp_path)
    check_like_numpy(got, eager, 1e-12)
    _check_real_schur(a, got[0], got[1], np.float64)
    np.testing.assert_allclose(got[2], sl.sqrtm(b), atol=1e-12)
    np.testing.assert_allclose(got[3], sl.expm(a), atol=1e-12)
    np.testing.assert_allclose(got[5], sl.solve_sylvester(a, b, b), atol=1e-12)


def test_errors_name_function_and_argument():
    with pytest.raises(ValueError, match=r"scipy.linalg.schur: output must be 'real' or 'complex', got 'r'"):
        kl.schur(np.eye(2), output="r")
    with pytest.raises(np.linalg.LinAlgError, match=r"scipy.linalg.schur: Last 2 dimensions of the array must be "
                                                     r"square, argument a has shape \(2, 3\)"):
        kl.schur(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"scipy.linalg.sqrtm: expected one square matrix \(2-D\) for A, got shape "
                                         r"\(2, 2, 2\)"):
        kl.sqrtm(np.ones((2, 2, 2)))
    with pytest.raises(TypeError, match=r"scipy.linalg.schur: unsupported dtype complex128"):
        kl.schur(np.eye(2, dtype=np.complex128))
    with pytest.raises(NotImplementedError, match=r"scipy.linalg.sqrtm: the blocked version \(blocksize > 1\)"):
        kl.sqrtm(np.eye(2), blocksize=2)
    with pytest.raises(ValueError, match=r"scipy.linalg.funm: expected one square matrix \(2-D\) for A"):
        kl.funm(np.ones((1, 2, 2)), knp.exp)
    with pytest.raises(ValueError, match=r"scipy.linalg.rsf2csf: T must be a square 2-D matrix, got shape \(2, 3\)"):
        kl.rsf2csf(np.ones((2, 3)), np.eye(2))
    with pytest.raises(ValueError, match=r"scipy.linalg.rsf2csf: T and Z must have the same shape, got \(2, 2\) and "
                                         r"\(3, 3\)"):
        kl.rsf2csf(np.eye(2), np.eye(3))
    with pytest.raises(TypeError, match=r"scipy.linalg.rsf2csf: T and Z must be float32/float64 \(or complex\) "
                                        r"matrices, got int64 and float64"):
        kl.rsf2csf(np.eye(2, dtype=np.int64), np.eye(2))


def test_schur_family_has_no_reverse_mode_derivative():
    """As JAX's (schur has no differentiation rule there): the QR iterations' while_loop refuses."""
    with pytest.raises(DifferentiationError, match=r"reverse-mode differentiation of while_loop is not "
                                                    r"supported"):
        kiln.grad(lambda x: knp.sum(kl.schur(x)[0]))(HARD["random4"])


def test_non_finite_input_gives_nan_schur():
    t, z = kl.schur(np.array([[1.0, np.nan], [2.0, 3.0]]))
    assert np.isnan(np.asarray(t)).any() and np.isnan(np.asarray(z)).any()
