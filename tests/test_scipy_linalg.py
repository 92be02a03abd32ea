"""kiln.scipy.linalg against scipy.linalg: values, dtypes and shapes eagerly and under jit (float32 and
float64), batched operands, gradients against float64 central differences, a kiln-run export, errors."""
import numpy as np
import pytest
import scipy.linalg as sl

import kiln
import kiln.numpy as knp
import kiln.scipy.linalg as kl
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

TOL = {np.float32: 2e-4, np.float64: 1e-10}
FLOATS = [np.float32, np.float64]


def spd(rng, n, dtype=np.float64):
    a = rng.standard_normal((n, n))
    return (a @ a.T / n + np.eye(n)).astype(dtype)


def general(rng, shape, dtype=np.float64):
    return (rng.standard_normal(shape) + 2 * np.eye(shape[-2], shape[-1])).astype(dtype)


def in_dtype(fn, dtype):
    """The scipy reference computed in float64 and returned in dtype (scipy keeps float32 too)."""
    def ref(*args):
        out = fn(*[np.asarray(a, np.float64) if isinstance(a, np.ndarray) else a for a in args])
        return tuple(_cast(o, dtype) for o in out) if isinstance(out, tuple) else _cast(out, dtype)
    return ref


def _cast(x, dtype):
    x = np.asarray(x)
    return x.astype(dtype) if x.dtype.kind == "f" else x


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_reads_the_chosen_triangle(dtype, lower):
    x = spd(np.random.default_rng(0), 4, dtype)
    x[0 if lower else 3, 3 if lower else 0] = 5.0  # the triangle scipy does not read
    eager_and_jit(lambda a: kl.cholesky(a, lower=lower), in_dtype(lambda a: sl.cholesky(a, lower=lower), dtype), x,
                  tol=TOL[dtype])


@pytest.mark.parametrize("lower", [False, True])
def test_cho_factor_and_cho_solve(lower):
    rng = np.random.default_rng(1)
    x, b, v = spd(rng, 4), rng.standard_normal((4, 2)), rng.standard_normal(4)
    c, flag = kl.cho_factor(x, lower=lower)
    assert flag is lower
    want = sl.cho_factor(x, lower=lower)[0]
    mask = np.tril(np.ones((4, 4), bool)) if lower else np.triu(np.ones((4, 4), bool))
    np.testing.assert_allclose(np.asarray(c)[mask], want[mask], atol=1e-12)
    for rhs in (b, v):
        eager_and_jit(lambda a, y: kl.cho_solve(kl.cho_factor(a, lower=lower), y),
                      lambda a, y: sl.cho_solve(sl.cho_factor(a, lower=lower), y), x, rhs, tol=1e-10)


@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_solve_triangular_every_trans_code(trans, lower, unit_diagonal):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 4)) + 3 * np.eye(4), rng.standard_normal((4, 3))
    got = kl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)
    check_like_numpy(got, sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal), 1e-10)


@pytest.mark.parametrize("dtype", FLOATS)
def test_solve_triangular_jit_vector_and_batch(dtype):
    rng = np.random.default_rng(3)
    a, v = (rng.standard_normal((4, 4)) + 3 * np.eye(4)).astype(dtype), rng.standard_normal(4).astype(dtype)
    eager_and_jit(lambda x, y: kl.solve_triangular(x, y, lower=True), in_dtype(
        lambda x, y: sl.solve_triangular(x, y, lower=True), dtype), a, v, tol=TOL[dtype])
    ab = np.stack([a, a.T])
    bb = rng.standard_normal((2, 4, 2)).astype(dtype)
    want = np.stack([sl.solve_triangular(x.astype(np.float64), y, trans=1) for x, y in zip(ab, bb)]).astype(dtype)
    check_like_numpy(kl.solve_triangular(ab, bb, trans="T"), want, TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
def test_lu_forms(dtype, shape):
    x = np.random.default_rng(4).standard_normal(shape).astype(dtype)
    eager_and_jit(kl.lu, in_dtype(sl.lu, dtype), x, tol=TOL[dtype])
    check_like_numpy(kl.lu(x, permute_l=True), in_dtype(lambda a: sl.lu(a, permute_l=True), dtype)(x), TOL[dtype])
    p, l_, u = kl.lu(x, p_indices=True)
    wp, wl, wu = sl.lu(x.astype(np.float64), p_indices=True)
    np.testing.assert_array_equal(p, wp)
    assert np.asarray(p).dtype == np.int32


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_factor_and_lu_solve(dtype, trans):
    rng = np.random.default_rng(5)
    a, b = general(rng, (4, 4), dtype), rng.standard_normal((4, 2)).astype(dtype)
    check_like_numpy(kl.lu_factor(a), in_dtype(sl.lu_factor, dtype)(a), TOL[dtype])
    eager_and_jit(lambda x, y: kl.lu_solve(kl.lu_factor(x), y, trans=trans),
                  in_dtype(lambda x, y: sl.lu_solve(sl.lu_factor(x), y, trans=trans), dtype), a, b, tol=TOL[dtype])


@pytest.mark.parametrize("assume_a", ["gen", "sym", "her", "pos", "general", "symmetric", "positive definite"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_assume_a(assume_a, lower):
    rng = np.random.default_rng(6)
    x = spd(rng, 4)
    x[(0, 3) if lower else (3, 0)] += 0.5  # the triangle not read (for sym/pos)
    b = rng.standard_normal((4, 2))
    got = kl.solve(x, b, assume_a=assume_a, lower=lower)
    check_like_numpy(got, sl.solve(x, b, assume_a=assume_a, lower=lower), 1e-10)


def test_solve_transposed_vector_and_jit():
    rng = np.random.default_rng(7)
    a, v = general(rng, (4, 4), np.float32), rng.standard_normal(4).astype(np.float32)
    eager_and_jit(lambda x, y: kl.solve(x, y, transposed=True),
                  in_dtype(lambda x, y: sl.solve(x, y, transposed=True), np.float32), a, v, tol=TOL[np.float32])


@pytest.mark.parametrize("dtype", FLOATS)
def test_inv_det(dtype):
    a = general(np.random.default_rng(8), (4, 4), dtype)
    eager_and_jit(kl.inv, in_dtype(sl.inv, dtype), a, tol=TOL[dtype])
    eager_and_jit(kl.det, lambda x: np.asarray(sl.det(x.astype(np.float64))).astype(dtype), a, tol=TOL[dtype])


@pytest.mark.parametrize("scale", [0.01, 1.0, 8.0, 60.0])
def test_expm_float64(scale):
    a = np.random.default_rng(9).standard_normal((5, 5)) * scale / np.sqrt(5)
    want = sl.expm(a)
    got = np.asarray(kl.expm(a))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-11 * max(1, scale), atol=1e-13 * np.abs(want).max())


def test_expm_float32_jit_and_special_matrices():
    a = np.random.default_rng(10).standard_normal((4, 4)).astype(np.float32)
    eager_and_jit(kl.expm, in_dtype(sl.expm, np.float32), a, tol=2e-5)
    check_like_numpy(kl.expm(np.zeros((3, 3))), np.eye(3), 1e-15)
    nilpotent = np.triu(np.ones((3, 3)), 1)
    check_like_numpy(kl.expm(nilpotent), sl.expm(nilpotent), 1e-14)
    batch = np.stack([a, 3 * a]).astype(np.float64)
    check_like_numpy(kl.expm(batch), np.stack([sl.expm(m) for m in batch]), 1e-11)


def test_block_diag():
    args = (np.ones((2, 2)), 3, [1, 2], np.arange(6).reshape(2, 3))
    check_like_numpy(kl.block_diag(*args), sl.block_diag(*args))
    check_like_numpy(kl.block_diag(np.ones((2, 2), np.float32), np.eye(1, dtype=np.float32)),
                     sl.block_diag(np.ones((2, 2), np.float32), np.eye(1, dtype=np.float32)))
    check_like_numpy(kl.block_diag(), sl.block_diag())
    eager_and_jit(lambda x, y: kl.block_diag(x, y), sl.block_diag, np.ones((1, 2), np.float32), np.ones((2, 1), np.int32))


def test_gradients_against_finite_differences():
    rng = np.random.default_rng(11)
    s, a, b = spd(rng, 3), general(rng, (3, 3)), rng.standard_normal((3, 2))
    w = rng.standard_normal((3, 3))
    cases = [
        (lambda x: knp.sum(kl.cholesky(x) * w), lambda x: np.sum(sl.cholesky(x) * w), s),
        (lambda x: knp.sum(kl.cho_solve(kl.cho_factor(x, lower=True), b) ** 2),
         lambda x: np.sum(sl.cho_solve(sl.cho_factor(x, lower=True), b) ** 2), s),
        (lambda x: knp.sum(kl.solve_triangular(x, b, trans=1) * b), lambda x: np.sum(sl.solve_triangular(x, b, trans=1) * b), a),
        (lambda x: knp.sum(kl.lu_solve(kl.lu_factor(x), b) ** 2), lambda x: np.sum(sl.lu_solve(sl.lu_factor(x), b) ** 2), a),
        (lambda x: knp.sum(kl.lu(x)[1] * w), lambda x: np.sum(sl.lu(x)[1] * w), a),
        (lambda x: knp.sum(kl.solve(x, b, assume_a="pos") ** 2), lambda x: np.sum(sl.solve(x, b, assume_a="pos") ** 2), s),
        (kl.det, sl.det, a),
        (lambda x: knp.sum(kl.expm(x) * w), lambda x: np.sum(sl.expm(x) * w), a / 2),
        (lambda x: knp.sum(kl.expm(x) * w), lambda x: np.sum(sl.expm(x) * w), a * 3),
    ]
    for kfn, nfn, x in cases:
        np.testing.assert_allclose(kiln.grad(kfn)(x), numerical_grad(nfn, x), rtol=1e-6, atol=1e-6)


def test_expm_gradient_under_jit_and_vmap():
    rng = np.random.default_rng(12)
    xs, w = rng.standard_normal((2, 3, 3)), rng.standard_normal((3, 3))

    def f(x):
        return knp.sum(kl.expm(x) * w)

    g = kiln.jit(kiln.vmap(kiln.grad(f)))(xs)
    for gi, x in zip(g, xs):
        np.testing.assert_allclose(gi, numerical_grad(lambda y: np.sum(sl.expm(y) * w), x), rtol=1e-6, atol=1e-6)


def test_program_with_scipy_linalg_runs_in_kiln_run(tmp_path):
    rng = np.random.default_rng(13)
    s, b = spd(rng, 4), rng.standard_normal((4, 2))

    def fn(x, y):
        return kl.cho_solve(kl.cho_factor(x), y), kl.expm(x / 4), kl.lu_solve(kl.lu_factor(x), y, trans=1)

    def ref(x, y):
        return sl.cho_solve(sl.cho_factor(x), y), sl.expm(x / 4), sl.lu_solve(sl.lu_factor(x), y, trans=1)

    eager_jit_and_kiln_run(fn, ref, s, b, tmp_path=tmp_path, tol=1e-10)


def test_singular_and_indefinite_input_give_nan_or_inf():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert not np.isfinite(kl.solve(singular, np.ones(2))).all()
    assert not np.isfinite(kl.lu_solve(kl.lu_factor(singular), np.ones(2))).all()
    assert float(kl.det(singular)) == 0.0
    assert np.isnan(kl.cholesky(-np.eye(2))).all()
    assert np.isnan(kl.solve(-np.eye(2), np.ones(2), assume_a="pos")).all()


def test_errors_name_function_and_argument():
    with pytest.raises(np.linalg.LinAlgError, match=r"scipy.linalg.cholesky: Last 2 dimensions of the array must "
                                                     r"be square, argument a has shape \(2, 3\)"):
        kl.cholesky(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"scipy.linalg.solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', "
                                         r"got 3"):
        kl.solve_triangular(np.eye(2), np.ones(2), trans=3)
    with pytest.raises(ValueError, match=r"scipy.linalg.solve_triangular: incompatible dimensions: a has shape "
                                         r"\(2, 2\), b has shape \(3,\)"):
        kl.solve_triangular(np.eye(2), np.ones(3))
    with pytest.raises(ValueError, match=r"scipy.linalg.lu_solve: trans must be"):
        kl.lu_solve(kl.lu_factor(np.eye(2)), np.ones(2), trans="X")
    with pytest.raises(ValueError, match=r"scipy.linalg.solve: assume_a must be one of"):
        kl.solve(np.eye(2), np.ones(2), assume_a="banded")
    with pytest.raises(ValueError, match=r"scipy.linalg.lu: expected a 2-D array \(or a batch of them\) for a, got "
                                         r"shape \(3,\)"):
        kl.lu(np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match=r"scipy.linalg.expm: Last 2 dimensions"):
        kl.expm(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"scipy.linalg.block_diag: argument 1 has 3 dimensions"):
        kl.block_diag(np.eye(2), np.ones((1, 1, 1)))
    with pytest.raises(TypeError, match=r"scipy.linalg.inv: array type float16 is unsupported"):
        kl.inv(np.eye(2, dtype=np.float16))


# ---- qr, eigh, svd: scipy's forms over kiln.numpy.linalg's spectral factorizations ----------------------

@pytest.mark.parametrize("mode", ["full", "economic", "r"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_qr_modes(mode, shape):
    a = np.random.default_rng(14).standard_normal(shape)
    got, want = kl.qr(a, mode=mode), sl.qr(a, mode=mode)
    assert isinstance(got, tuple) and len(got) == len(want)
    check_like_numpy(got, want, 1e-10)


def test_eigh_standard_generalized_and_subsets():
    rng = np.random.default_rng(15)
    a = rng.standard_normal((4, 4))
    b = spd(rng, 4)
    for lower in (True, False):
        w, v = kl.eigh(a, lower=lower)
        wr, vr = sl.eigh(a, lower=lower)
        check_like_numpy(w, wr, 1e-10)
        np.testing.assert_allclose(np.abs(v), np.abs(vr), atol=1e-9)
    sym = (a + a.T) / 2
    w, v = kiln.jit(lambda x, y: kl.eigh(x, y))(sym, b)
    wr, vr = sl.eigh(sym, b)
    np.testing.assert_allclose(w, wr, atol=1e-10)
    np.testing.assert_allclose(np.abs(v), np.abs(vr), atol=1e-9)
    np.testing.assert_allclose(np.asarray(v).T @ b @ np.asarray(v), np.eye(4), atol=1e-10)
    check_like_numpy(kl.eigh(sym, eigvals_only=True, subset_by_index=(1, 2)),
                     sl.eigh(sym, eigvals_only=True, subset_by_index=(1, 2)), 1e-10)
    g = kiln.grad(lambda x: knp.sum(kl.eigh(x, b, eigvals_only=True) * np.arange(4.0)))(sym)
    want = numerical_grad(lambda x: np.sum(sl.eigh((x + x.T) / 2, b, eigvals_only=True) * np.arange(4.0)), sym)
    np.testing.assert_allclose((np.asarray(g) + np.asarray(g).T) / 2, want, atol=1e-6)


@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_forms(full_matrices):
    a = np.random.default_rng(16).standard_normal((5, 3))
    u, s, vh = kl.svd(a, full_matrices=full_matrices)
    ur, sr, vhr = sl.svd(a, full_matrices=full_matrices)
    check_like_numpy(s, sr, 1e-10)
    assert np.shape(u) == ur.shape and np.shape(vh) == vhr.shape
    np.testing.assert_allclose(np.asarray(u)[:, :3] * s @ vh, a, atol=1e-10)
    check_like_numpy(kl.svd(a, compute_uv=False), sl.svd(a, compute_uv=False), 1e-10)


def test_spectral_errors():
    with pytest.raises(NotImplementedError, match=r"scipy.linalg.qr: pivoting=True"):
        kl.qr(np.eye(2), pivoting=True)
    with pytest.raises(ValueError, match=r"scipy.linalg.qr: mode must be 'full', 'economic' or 'r', got 'raw'"):
        kl.qr(np.eye(2), mode="raw")
    with pytest.raises(NotImplementedError, match=r"scipy.linalg.eigh: subset_by_value"):
        kl.eigh(np.eye(2), subset_by_value=(0, 1))
    with pytest.raises(NotImplementedError, match=r"scipy.linalg.eigh: only type=1"):
        kl.eigh(np.eye(2), np.eye(2), type=2)
    with pytest.raises(ValueError, match=r"scipy.linalg.eigh: subset_by_index \(1, 3\) must satisfy"):
        kl.eigh(np.eye(2), subset_by_index=(1, 3))


# ---- special matrices, polar, expm_frechet, eigh_tridiagonal ----------------------------------------------

SPECIAL = [
    ("toeplitz", ([1, 2, 3],)), ("toeplitz", ([1.0, 2, 3], [9.0, 5, 6, 7])), ("toeplitz", (np.arange(6.0).reshape(2, 3),)),
    ("hankel", ([1, 2, 3],)), ("hankel", ([1, 2, 3], [3, 4, 5, 6])), ("circulant", (np.arange(6.0).reshape(2, 3),)),
    ("hilbert", (4,)), ("helmert", (4,)), ("helmert", (4, True)), ("hadamard", (8,)),
    ("leslie", ([0.1, 2, 1], [0.2, 0.8])), ("leslie", ([1, 2, 1], [2, 3])), ("companion", ([1, -10, 31, -30],)),
    ("fiedler", ([1, 4, 12, 45],)),
] + [("convolution_matrix", ([1.0, 2, 3, 4], n, mode)) for mode in ("full", "same", "valid") for n in (2, 6)]


@pytest.mark.parametrize("name,args", SPECIAL)
def test_special_matrices(name, args):
    check_like_numpy(getattr(kl, name)(*args), getattr(sl, name)(*args))


def test_special_matrices_trace_and_differentiate():
    c, r = np.arange(3.0), np.arange(4.0) + 1
    eager_and_jit(kl.toeplitz, sl.toeplitz, c, r)
    eager_and_jit(lambda x: kl.companion(x), sl.companion, np.array([2.0, -3.0, 1.0, 5.0]))
    w = np.random.default_rng(17).standard_normal((3, 4))
    got = kiln.grad(lambda x: knp.sum(kl.toeplitz(x, r) * w))(c)
    np.testing.assert_allclose(got, numerical_grad(lambda x: np.sum(sl.toeplitz(x, r) * w), c), atol=1e-8)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("shape", [(4, 4), (5, 3)])
def test_polar(side, shape):
    a = np.random.default_rng(18).standard_normal(shape)
    check_like_numpy(kl.polar(a, side), sl.polar(a, side), 1e-10)


def test_expm_frechet_and_eigh_tridiagonal():
    rng = np.random.default_rng(19)
    a, e = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    eager_and_jit(kl.expm_frechet, sl.expm_frechet, a, e, tol=1e-10)
    check_like_numpy(kl.expm_frechet(a, e, compute_expm=False), sl.expm_frechet(a, e, compute_expm=False), 1e-10)
    d, off = rng.standard_normal(5), rng.standard_normal(4)
    eager_and_jit(lambda x, y: kl.eigh_tridiagonal(x, y, eigvals_only=True),
                  lambda x, y: sl.eigh_tridiagonal(x, y, eigvals_only=True), d, off, tol=1e-10)
    check_like_numpy(kl.eigh_tridiagonal(d, off, eigvals_only=True, select="i", select_range=(1, 3)),
                     sl.eigh_tridiagonal(d, off, eigvals_only=True, select="i", select_range=(1, 3)), 1e-10)


def test_special_and_matrix_function_errors():
    with pytest.raises(ValueError, match=r"scipy.linalg.hadamard: n must be a positive power of 2, got 6"):
        kl.hadamard(6)
    with pytest.raises(TypeError, match=r"scipy.linalg.hilbert: argument n must be an integer, got 2.5"):
        kl.hilbert(2.5)
    with pytest.raises(ValueError, match=r"scipy.linalg.leslie: s must have one element fewer than f"):
        kl.leslie([1, 2], [1, 2])
    with pytest.raises(ValueError, match=r"scipy.linalg.companion: the length of a must be at least 2, got 1"):
        kl.companion([1.0])
    with pytest.raises(ValueError, match=r"scipy.linalg.convolution_matrix: mode must be 'full', 'same' or 'valid'"):
        kl.convolution_matrix([1.0], 2, "wrap")
    with pytest.raises(ValueError, match=r"scipy.linalg.polar: side must be 'right' or 'left', got 'up'"):
        kl.polar(np.eye(2), "up")
    with pytest.raises(ValueError, match=r"scipy.linalg.expm_frechet: A and E must have the same shape"):
        kl.expm_frechet(np.eye(2), np.eye(3))
    with pytest.raises(NotImplementedError, match=r"scipy.linalg.eigh_tridiagonal: only eigvals_only=True"):
        kl.eigh_tridiagonal(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match=r"scipy.linalg.eigh_tridiagonal: d must be 1-D of length n and e of length"):
        kl.eigh_tridiagonal(np.ones(3), np.ones(3), eigvals_only=True)
