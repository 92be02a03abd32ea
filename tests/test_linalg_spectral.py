"""kiln.lax.linalg's orthogonal and spectral family (qr, eigh, svd) and kiln.numpy.linalg on it (qr, svd,
svdvals, eigh, eigvalsh, pinv, lstsq, matrix_rank, cond): values, dtypes and shapes against numpy (LAPACK)
eagerly, under jit and through kiln-run; vmap; gradients against float64 central differences; the
accuracy bound of docs/linalg.md; error messages.

Eigen- and singular vectors are unique up to the sign of each column (kiln's Jacobi picks other signs
than LAPACK), so they are compared after fix_signs or through sign-free quantities (reconstructions,
projectors). qr's signs are LAPACK's and are compared directly."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.lax import linalg as lax_linalg
from kiln_tools import check_like_numpy, eager_and_jit, kiln_run_exported
from references import numerical_grad

TOL = {np.float32: 3e-5, np.float64: 1e-11}
FLOATS = [np.float32, np.float64]


def symmetric(rng, shape, dtype=np.float64):
    a = rng.standard_normal(shape)
    return ((a + np.swapaxes(a, -1, -2)) / 2).astype(dtype)


def fix_signs(v):
    """Each column (last axis indexes columns) scaled by the sign of its largest-magnitude entry."""
    v = np.asarray(v)
    idx = np.argmax(np.abs(v), axis=-2)[..., None, :]
    return v * np.sign(np.take_along_axis(v, idx, axis=-2))


def transpose(x):
    return np.swapaxes(np.asarray(x), -1, -2)


def reconstruct_svd(u, s, vh):
    u, s, vh = (np.asarray(t, np.float64) for t in (u, s, vh))
    k = s.shape[-1]
    return (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]


def orthogonality(q):
    """max |q^T q - I| over the columns of q."""
    q = np.asarray(q, np.float64)
    return np.abs(transpose(q) @ q - np.eye(q.shape[-1])).max()


# ---- lax.linalg.qr ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (5, 3), (3, 5), (2, 3, 4, 3)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_qr_matches_lapack_eagerly(dtype, shape, full_matrices):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    mode = "complete" if full_matrices else "reduced"
    check_like_numpy(lax_linalg.qr(x, full_matrices=full_matrices), tuple(np.linalg.qr(x, mode)), TOL[dtype])


def test_qr_under_jit_and_a_column_already_reduced():
    x = np.random.default_rng(1).standard_normal((5, 4))
    x[1:, 0] = 0.0  # LAPACK leaves such a column alone (no reflection): r[0, 0] keeps x's sign
    x[0, 0] = 3.0
    eager_and_jit(lambda a: lax_linalg.qr(a, full_matrices=False), lambda a: tuple(np.linalg.qr(a)), x,
                  tol=TOL[np.float64])
    assert lax_linalg.qr(x)[1][0, 0] == 3.0


def test_qr_of_a_rank_deficient_matrix_stays_orthogonal():
    x = np.outer(np.arange(1.0, 6.0), np.ones(4))
    q, r = lax_linalg.qr(x)
    assert orthogonality(q) < 1e-14
    np.testing.assert_allclose(q @ r, x, atol=1e-13)


# ---- lax.linalg.eigh -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (6, 6), (2, 3, 4, 4)])
def test_eigh_matches_lapack_eagerly(dtype, shape):
    a = symmetric(np.random.default_rng(2), shape, dtype)
    v, w = lax_linalg.eigh(a)
    want_w, want_v = np.linalg.eigh(a)
    check_like_numpy(w, want_w, TOL[dtype])
    check_like_numpy(fix_signs(v), fix_signs(want_v), 10 * TOL[dtype])
    assert v.dtype == dtype and orthogonality(v) < 20 * np.finfo(dtype).eps * shape[-1]


@pytest.mark.parametrize("lower", [True, False])
def test_eigh_reads_one_triangle_without_symmetrize_input(lower):
    a = symmetric(np.random.default_rng(3), (5, 5))
    garbage = a + (np.triu if lower else np.tril)(np.full((5, 5), 9.0), 1 if lower else -1)
    _, w = lax_linalg.eigh(garbage, lower=lower, symmetrize_input=False)
    check_like_numpy(w, np.linalg.eigvalsh(a), TOL[np.float64])
    _, w_sym = lax_linalg.eigh(garbage)  # (x + x^T) / 2 by default
    check_like_numpy(w_sym, np.linalg.eigvalsh((garbage + garbage.T) / 2), TOL[np.float64])


def test_eigh_unsorted_gives_the_same_spectrum():
    a = symmetric(np.random.default_rng(4), (6, 6))
    v, w = lax_linalg.eigh(a, sort_eigenvalues=False)
    np.testing.assert_allclose(np.sort(w), np.linalg.eigvalsh(a), atol=1e-12)
    np.testing.assert_allclose((v * w) @ v.T, a, atol=1e-12)


def test_eigh_of_repeated_and_zero_eigenvalues():
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((6, 6)))
    a = (q * np.array([0.0, 0.0, 1.0, 1.0, 1.0, -2.0])) @ q.T
    v, w = kiln.jit(lax_linalg.eigh)(a)
    np.testing.assert_allclose(w, [-2, 0, 0, 1, 1, 1], atol=1e-14)
    np.testing.assert_allclose((v * w) @ v.T, a, atol=1e-14)
    assert orthogonality(v) < 1e-14


# ---- lax.linalg.svd --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (6, 3), (3, 5), (2, 5, 4)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_matches_lapack_eagerly(dtype, shape, full_matrices):
    x = np.random.default_rng(6).standard_normal(shape).astype(dtype)
    u, s, vh = lax_linalg.svd(x, full_matrices=full_matrices)
    want_u, want_s, want_vh = np.linalg.svd(x, full_matrices=full_matrices)
    check_like_numpy(s, want_s, TOL[dtype])
    assert u.shape == want_u.shape and vh.shape == want_vh.shape and u.dtype == vh.dtype == dtype
    k = min(shape[-2:])
    check_like_numpy(fix_signs(u[..., :k]), fix_signs(want_u[..., :k]), 10 * TOL[dtype])
    np.testing.assert_allclose(reconstruct_svd(u, s, vh), x, atol=10 * TOL[dtype])
    eps = np.finfo(dtype).eps
    assert orthogonality(u) < 20 * eps * max(shape[-2:]) and orthogonality(transpose(vh)) < 20 * eps * max(shape[-2:])
    check_like_numpy(lax_linalg.svd(x, compute_uv=False), want_s, TOL[dtype])


def test_svd_of_rank_deficient_matrices_completes_the_bases():
    rng = np.random.default_rng(7)
    for x in (rng.standard_normal((6, 2)) @ rng.standard_normal((2, 4)), np.zeros((4, 3))):
        u, s, vh = lax_linalg.svd(x)
        np.testing.assert_allclose(s, np.linalg.svd(x, compute_uv=False), atol=1e-13)
        np.testing.assert_allclose(reconstruct_svd(u, s, vh), x, atol=1e-13)
        assert orthogonality(u) < 1e-14 and orthogonality(transpose(vh)) < 1e-14


def test_svd_under_jit_wide_and_tall():
    x = np.random.default_rng(8).standard_normal((3, 5)).astype(np.float32)

    def parts(a):
        u, s, vh = lax_linalg.svd(a, full_matrices=False)
        return s, u @ vh  # the polar factor does not depend on the signs

    def reference(a):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return s, u @ vh

    eager_and_jit(parts, reference, x, tol=1e-5)
    check_like_numpy(parts(x.T.copy()), reference(x.T.copy()), 1e-5)


def test_eager_rounds_equal_compiled_rounds():
    """Eagerly the Jacobi rounds run as numpy (kiln.lax._jacobi's mirror), compiled as lax kernels: the same
    algorithm, so even the signs of the vectors agree and values differ only by rounding."""
    rng = np.random.default_rng(30)
    a = rng.standard_normal((2, 7, 7))
    s = a + np.swapaxes(a, -1, -2)
    eager, compiled = lax_linalg.eigh(s), kiln.jit(lax_linalg.eigh)(s)
    check_like_numpy(eager, compiled, 1e-13)
    eager, compiled = lax_linalg.svd(a[:, :, :5]), kiln.jit(lax_linalg.svd)(a[:, :, :5])
    check_like_numpy(eager, compiled, 1e-13)


# ---- accuracy bound (docs/linalg.md) ---------------------------------------------------------------

def _test_matrices(rng, n):
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    yield rng.standard_normal((n, n))
    yield (q * np.logspace(0, -10, n)) @ q.T                        # graded
    yield rng.standard_normal((n, 3)) @ rng.standard_normal((3, n))  # rank 3


@pytest.mark.parametrize("dtype", FLOATS)
def test_accuracy_bound_against_lapack(dtype):
    """Errors within 5 n eps |a|_2: eigenvalues and singular values against LAPACK's (computed in float64
    from the same rounded input), residuals |a v - v w| and |a - u s vh|, and orthogonality (5 n eps).
    Eagerly (the graph that kernels compile; jit's results are compared with numpy in the other tests)."""
    n, eps = 12, np.finfo(dtype).eps
    eigh, svd, qr = lax_linalg.eigh, lax_linalg.svd, lax_linalg.qr
    for a in _test_matrices(np.random.default_rng(9), n):
        a = a.astype(dtype)
        s = (a + a.T) / 2
        a64, s64 = a.astype(np.float64), s.astype(np.float64)
        bound = 5 * n * eps * np.linalg.norm(a64, 2)
        v, w = (t.astype(np.float64) for t in eigh(s))
        assert np.abs(w - np.linalg.eigvalsh(s64)).max() <= bound
        assert np.linalg.norm(s64 @ v - v * w, 2) <= bound and orthogonality(v) <= 5 * n * eps
        u, sv, vh = (t.astype(np.float64) for t in svd(a))
        assert np.abs(sv - np.linalg.svd(a64, compute_uv=False)).max() <= bound
        assert np.linalg.norm(reconstruct_svd(u, sv, vh) - a64, 2) <= bound
        assert max(orthogonality(u), orthogonality(vh.T)) <= 5 * n * eps
        q, r = (t.astype(np.float64) for t in qr(a))
        assert np.linalg.norm(q @ r - a64, 2) <= bound and orthogonality(q) <= 5 * n * eps


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_extreme_scales_neither_overflow_nor_underflow(scale):
    rng = np.random.default_rng(28)
    a = rng.standard_normal((5, 4))
    s = symmetric(rng, (5, 5))
    np.testing.assert_allclose(lax_linalg.eigh(s * scale)[1] / scale, np.linalg.eigvalsh(s), atol=1e-13)
    np.testing.assert_allclose(lax_linalg.svd(a * scale, compute_uv=False) / scale,
                               np.linalg.svd(a, compute_uv=False), atol=1e-13)


def test_non_finite_input_gives_nan_and_terminates():
    s = symmetric(np.random.default_rng(29), (4, 4))
    s[1, 2] = s[2, 1] = np.nan
    assert np.isnan(kiln.jit(lambda a: lax_linalg.eigh(a)[1])(s)).all()
    assert np.isnan(lax_linalg.svd(s, compute_uv=False)).all()
    s[1, 2] = s[2, 1] = np.inf
    assert np.isnan(lax_linalg.eigh(s)[1]).all()


# ---- vmap --------------------------------------------------------------------------------------------

def test_vmap_over_a_middle_axis():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((4, 3, 4))
    s = x + np.swapaxes(x, 0, 2)  # s[:, k, :] symmetric for each k
    w = kiln.vmap(lambda a: lax_linalg.eigh(a)[1], in_axes=1)(s)
    check_like_numpy(w, np.linalg.eigvalsh(np.moveaxis(s, 1, 0)), TOL[np.float64])
    sv = kiln.vmap(lambda a: lax_linalg.svd(a, compute_uv=False), in_axes=1)(x)
    check_like_numpy(sv, np.linalg.svd(np.moveaxis(x, 1, 0), compute_uv=False), TOL[np.float64])
    r = kiln.vmap(lambda a: lax_linalg.qr(a)[1], in_axes=2)(x)
    check_like_numpy(r, np.linalg.qr(np.moveaxis(x, 2, 0), "complete")[1], TOL[np.float64])


def test_jax_keywords_are_accepted():
    """Ported JAX code passes these; kiln has one algorithm each, so they change nothing."""
    rng = np.random.default_rng(27)
    x, a = rng.standard_normal((4, 3)), rng.standard_normal((4, 4))
    check_like_numpy(lax_linalg.qr(x, use_magma=None), lax_linalg.qr(x))
    check_like_numpy(lax_linalg.eigh(a, implementation=None), lax_linalg.eigh(a))
    check_like_numpy(lax_linalg.svd(x, algorithm=None), lax_linalg.svd(x))
    symmetric_part = (a + a.T) / 2
    check_like_numpy(knp.linalg.eigvalsh(a, symmetrize_input=True), np.linalg.eigvalsh(symmetric_part), 1e-12)
    check_like_numpy(knp.linalg.eigh(a, UPLO=None).eigenvalues, np.linalg.eigvalsh(a, "L"), 1e-12)


# ---- gradients -----------------------------------------------------------------------------------

def _weights(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("shape,full_matrices", [((4, 4), True), ((5, 3), False), ((5, 3), True), ((3, 5), True),
                                                   ((3, 5), False), ((2, 4, 2), True)])
def test_qr_gradient(shape, full_matrices):
    x = np.random.default_rng(11).standard_normal(shape)
    mode = "complete" if full_matrices else "reduced"
    q_shape, r_shape = (t.shape for t in np.linalg.qr(x, mode))
    wq, wr = _weights(q_shape, 1), _weights(r_shape, 2)

    def f(a):
        q, r = lax_linalg.qr(a, full_matrices=full_matrices)
        return knp.sum(q * wq) + knp.sum(r * wr)

    def ref(a):
        q, r = np.linalg.qr(a, mode)
        return np.sum(q * wq) + np.sum(r * wr)

    np.testing.assert_allclose(kiln.grad(f)(x), numerical_grad(ref, x), atol=1e-7)


def test_eigh_gradient():
    a = symmetric(np.random.default_rng(12), (5, 5))
    ww, wv = _weights(5, 3), _weights((5, 5), 4)

    def f(x):
        v, w = lax_linalg.eigh(x)
        return knp.sum(w * ww) + knp.sum((v * v) * wv)  # v*v does not depend on the signs

    def ref(x):
        w, v = np.linalg.eigh((x + x.T) / 2)
        return np.sum(w * ww) + np.sum((v * v) * wv)

    np.testing.assert_allclose(kiln.grad(f)(a), numerical_grad(ref, a), atol=1e-7)


def test_eigh_jvp_of_degenerate_eigenvalues_is_not_finite_for_vectors():
    """JAX's caveat: the eigenvector derivative divides by eigenvalue gaps, so repeated eigenvalues give
    inf/NaN there; the eigenvalue derivative stays finite."""
    a, da = np.eye(3), symmetric(np.random.default_rng(13), (3, 3))
    (v, _), (dv, dw) = kiln.jvp(lax_linalg.eigh, (a,), (da,))
    np.testing.assert_allclose(dw, np.diagonal(v.T @ da @ v), atol=1e-12)
    assert not np.all(np.isfinite(dv))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_svd_gradient(shape):
    x = np.random.default_rng(14).standard_normal(shape)
    k = min(shape)
    ws, wp = _weights(k, 5), _weights(shape, 6)

    def f(a):
        u, s, vh = lax_linalg.svd(a, full_matrices=False)
        return knp.sum(s * ws) + knp.sum((u @ vh) * wp) + knp.sum((u[:, :1] @ vh[:1]) * wp)

    def ref(a):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return np.sum(s * ws) + np.sum((u @ vh) * wp) + np.sum((u[:, :1] @ vh[:1]) * wp)

    np.testing.assert_allclose(kiln.grad(f)(x), numerical_grad(ref, x), atol=1e-7)
    g = kiln.grad(lambda a: knp.sum(lax_linalg.svd(a, compute_uv=False) * ws))(x)
    np.testing.assert_allclose(g, numerical_grad(lambda a: np.sum(np.linalg.svd(a, compute_uv=False) * ws), x),
                               atol=1e-7)


def test_svd_gradient_of_full_matrices_rectangular_is_refused():
    with pytest.raises(NotImplementedError, match="svd: the derivative of full_matrices=True"):
        kiln.grad(lambda a: knp.sum(lax_linalg.svd(a)[0]))(np.eye(4, 2))


# ---- kiln.numpy.linalg -------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape,dtype", [((5, 3), np.float64), ((3, 5), np.float32), ((2, 4, 4), np.int64)])
def test_numpy_qr_modes(mode, shape, dtype):
    x = np.random.default_rng(15).integers(-5, 6, shape).astype(dtype) + np.eye(*shape[-2:], dtype=dtype)
    got, want = knp.linalg.qr(x, mode), np.linalg.qr(x, mode)
    tol = TOL[np.float32 if dtype == np.float32 else np.float64] * 10
    if mode == "r":
        check_like_numpy(got, want, tol)
    else:
        assert type(got).__name__ == "QRResult"
        check_like_numpy((got.Q, got.R), (want.Q, want.R), tol)


def test_numpy_svd_and_svdvals():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((2, 5, 3))
    got, want = knp.linalg.svd(x), np.linalg.svd(x)
    assert type(got).__name__ == "SVDResult" and got.U.shape == want.U.shape and got.Vh.shape == want.Vh.shape
    check_like_numpy(got.S, want.S, TOL[np.float64])
    np.testing.assert_allclose(reconstruct_svd(*got), x, atol=1e-12)
    check_like_numpy(knp.linalg.svd(x, compute_uv=False), np.linalg.svd(x, compute_uv=False), TOL[np.float64])
    ints = rng.integers(-4, 5, (4, 3))
    check_like_numpy(knp.linalg.svdvals(ints), np.linalg.svdvals(ints), TOL[np.float64])
    check_like_numpy(knp.linalg.svdvals(x.astype(np.float32)), np.linalg.svdvals(x.astype(np.float32)), TOL[np.float32])


def test_numpy_svd_hermitian_follows_numpy():
    s = symmetric(np.random.default_rng(17), (2, 4, 4))
    got, want = knp.linalg.svd(s, hermitian=True), np.linalg.svd(s, hermitian=True)
    check_like_numpy(got.S, want.S, TOL[np.float64])
    np.testing.assert_allclose(reconstruct_svd(*got), s, atol=1e-12)
    check_like_numpy(fix_signs(got.U), fix_signs(want.U), 1e-10)
    check_like_numpy(knp.linalg.svd(s, hermitian=True, compute_uv=False),
                     np.linalg.svd(s, hermitian=True, compute_uv=False), TOL[np.float64])


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_numpy_eigh_and_eigvalsh(uplo):
    rng = np.random.default_rng(18)
    a = rng.standard_normal((2, 5, 5))  # not symmetric: numpy reads one triangle
    got, want = knp.linalg.eigh(a, UPLO=uplo), np.linalg.eigh(a, UPLO=uplo)
    assert type(got).__name__ == "EighResult"
    check_like_numpy(got.eigenvalues, want.eigenvalues, TOL[np.float64])
    check_like_numpy(fix_signs(got.eigenvectors), fix_signs(want.eigenvectors), 1e-10)
    check_like_numpy(knp.linalg.eigvalsh(a.astype(np.float32), uplo), np.linalg.eigvalsh(a.astype(np.float32), uplo),
                     TOL[np.float32])
    ints = rng.integers(-3, 4, (4, 4))
    check_like_numpy(knp.linalg.eigvalsh(ints), np.linalg.eigvalsh(ints), TOL[np.float64])


def test_numpy_pinv():
    rng = np.random.default_rng(19)
    x = rng.standard_normal((2, 5, 3))
    check_like_numpy(knp.linalg.pinv(x), np.linalg.pinv(x), 1e-10)
    low = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 4))
    check_like_numpy(knp.linalg.pinv(low), np.linalg.pinv(low), 1e-10)
    check_like_numpy(knp.linalg.pinv(low, rtol=None), np.linalg.pinv(low, rtol=None), 1e-10)
    check_like_numpy(knp.linalg.pinv(x, rcond=0.5), np.linalg.pinv(x, rcond=0.5), 1e-10)
    check_like_numpy(knp.linalg.pinv(x, rtol=np.array([0.5, 0.1])), np.linalg.pinv(x, rtol=np.array([0.5, 0.1])), 1e-10)
    s = symmetric(rng, (4, 4))
    check_like_numpy(knp.linalg.pinv(s, hermitian=True), np.linalg.pinv(s, hermitian=True), 1e-10)
    check_like_numpy(knp.linalg.pinv(x.astype(np.float32)), np.linalg.pinv(x.astype(np.float32)), 1e-4)


def test_numpy_lstsq():
    rng = np.random.default_rng(20)
    a, b, bs = rng.standard_normal((6, 3)), rng.standard_normal(6), rng.standard_normal((6, 2))
    low = rng.standard_normal((6, 2)) @ rng.standard_normal((2, 3))
    for args in ((a, b), (a, bs), (a.T.copy(), bs[:3]), (low, bs), (a, bs, 0.9), (a, bs, -1)):
        check_like_numpy(knp.linalg.lstsq(*args), np.linalg.lstsq(*args), 1e-10)
    ints = rng.integers(-4, 5, (5, 3))
    check_like_numpy(knp.linalg.lstsq(ints, b[:5]), np.linalg.lstsq(ints, b[:5]), 1e-10)


def test_numpy_lstsq_under_jit_always_computes_residuals():
    rng = np.random.default_rng(21)
    bs = rng.standard_normal((6, 2))
    low = rng.standard_normal((6, 2)) @ rng.standard_normal((2, 3))
    x, residuals, rank, s = kiln.jit(knp.linalg.lstsq)(low, bs)
    want_x = np.linalg.lstsq(low, bs)[0]
    np.testing.assert_allclose(x, want_x, atol=1e-10)
    assert rank == 2 and rank.dtype == np.int32
    np.testing.assert_allclose(residuals, np.sum((bs - low @ want_x) ** 2, axis=0), atol=1e-10)


def test_numpy_matrix_rank():
    rng = np.random.default_rng(22)
    low = rng.standard_normal((3, 6, 2)) @ rng.standard_normal((3, 2, 5))
    for kwargs in ({}, {"tol": 1e-3}, {"rtol": 0.5}, {"tol": np.array([1e-3, 1e3, 1.0])}):
        check_like_numpy(knp.linalg.matrix_rank(low, **kwargs), np.linalg.matrix_rank(low, **kwargs))
    s = symmetric(rng, (4, 4))
    s[:, 0] = s[0, :] = 0
    check_like_numpy(knp.linalg.matrix_rank(s, hermitian=True), np.linalg.matrix_rank(s, hermitian=True))
    assert knp.linalg.matrix_rank(np.zeros(3)) == np.linalg.matrix_rank(np.zeros(3)) == 0
    assert knp.linalg.matrix_rank(np.ones(3)) == 1


@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", 1, -1, np.inf, -np.inf])
def test_numpy_cond(p):
    x = np.random.default_rng(23).standard_normal((2, 4, 4))
    check_like_numpy(knp.linalg.cond(x, p), np.linalg.cond(x, p), 1e-9)


def test_numpy_cond_of_a_singular_matrix_is_inf():
    assert knp.linalg.cond(np.zeros((3, 3)), 1) == np.linalg.cond(np.zeros((3, 3)), 1) == np.inf
    assert knp.linalg.cond(np.ones((3, 3)), "fro") == np.inf


def test_numpy_functions_under_jit():
    """One compiled function for the numpy-level names (one compile keeps the test fast; the svd of x is
    shared by svdvals, matrix_rank, cond, pinv and lstsq)."""
    rng = np.random.default_rng(24)
    x, b = rng.standard_normal((2, 4, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)

    def names(lib, x, b):
        la = lib.linalg
        x_ls, _, rank, s_ls = la.lstsq(x[0], b)
        return (la.svdvals(x), la.pinv(x), la.matrix_rank(x), la.cond(x), la.cond(x, "fro"), la.eigvalsh(x, "U"),
                la.qr(x).R, x_ls, rank, s_ls)

    eager_and_jit(lambda x, b: names(knp, x, b), lambda x, b: names(np, x, b), x, b, tol=2e-4)


@pytest.mark.parametrize("name,shape", [("qr", (3, 0)), ("qr", (0, 2)), ("svd", (2, 0, 3)), ("svd", (3, 0)),
                                        ("svdvals", (0, 3)), ("eigh", (0, 0)), ("eigvalsh", (2, 0, 0)),
                                        ("pinv", (2, 0, 3)), ("matrix_rank", (2, 3, 0))])
def test_numpy_functions_of_empty_matrices(name, shape):
    x = np.zeros(shape)
    check_like_numpy(getattr(knp.linalg, name)(x), getattr(np.linalg, name)(x))
    if name == "svd":
        check_like_numpy(knp.linalg.svd(x, full_matrices=False), np.linalg.svd(x, full_matrices=False))
        check_like_numpy(kiln.jit(lambda a: lax_linalg.svd(a))(x), np.linalg.svd(x))
    if name == "qr":
        check_like_numpy(knp.linalg.qr(x, "complete"), np.linalg.qr(x, "complete"))


# ---- gradients of kiln.numpy.linalg -------------------------------------------------------------------

def test_numpy_gradients():
    rng = np.random.default_rng(25)
    x = rng.standard_normal((5, 3))
    s = symmetric(rng, (4, 4))
    b = rng.standard_normal(5)
    cases = [
        (lambda a: knp.sum(knp.linalg.pinv(a) * _weights((3, 5), 7)), lambda a: np.sum(np.linalg.pinv(a) * _weights((3, 5), 7)), x),
        (lambda a: knp.sum(knp.linalg.lstsq(a, b)[0] * _weights(3, 8)), lambda a: np.sum(np.linalg.lstsq(a, b)[0] * _weights(3, 8)), x),
        (lambda a: knp.sum(knp.linalg.svdvals(a) ** 2 * _weights(3, 9)), lambda a: np.sum(np.linalg.svdvals(a) ** 2 * _weights(3, 9)), x),
        (lambda a: knp.sum(knp.linalg.eigvalsh(a) * _weights(4, 10)), lambda a: np.sum(np.linalg.eigvalsh(a) * _weights(4, 10)), s),
        (lambda a: knp.linalg.cond(a), np.linalg.cond, x),
        (lambda a: knp.linalg.cond(a, "fro"), lambda a: np.linalg.cond(a, "fro"), s),
        (lambda a: knp.sum(knp.linalg.qr(a).Q * _weights((5, 3), 11)), lambda a: np.sum(np.linalg.qr(a).Q * _weights((5, 3), 11)), x),
    ]
    for f, ref, arg in cases:
        np.testing.assert_allclose(kiln.grad(f)(arg), numerical_grad(ref, arg), atol=1e-6)


@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv_gradient_with_repeated_singular_values(hermitian):
    """pinv has JAX's own JVP, which needs no gaps between singular values (the SVD's rule gives NaN at an
    identity or an orthogonal matrix); with hermitian the derivative follows the lower triangle read."""
    q, _ = np.linalg.qr(np.random.default_rng(31).standard_normal((3, 3)))
    w = _weights((3, 3), 12)
    for x in (np.eye(3), q @ q.T * 2.0 if hermitian else q):
        g = kiln.grad(lambda a: knp.sum(knp.linalg.pinv(a, hermitian=hermitian) * w))(x)
        want = numerical_grad(lambda a: np.sum(np.linalg.pinv(a, hermitian=hermitian) * w), x)
        np.testing.assert_allclose(g, want, atol=1e-7)


def test_lstsq_gradient_with_orthonormal_columns():
    """lstsq's x is pinv(a) @ b, so it shares pinv's gap-free derivative (orthonormal columns: all s = 1)."""
    q, _ = np.linalg.qr(np.random.default_rng(32).standard_normal((4, 3)))
    b, w = _weights(4, 13), _weights(3, 14)
    g = kiln.grad(lambda a: knp.sum(knp.linalg.lstsq(a, b)[0] * w))(q)
    np.testing.assert_allclose(g, numerical_grad(lambda a: np.sum(np.linalg.lstsq(a, b)[0] * w), q), atol=1e-7)


# ---- exported through kiln-run -------------------------------------------------------------------------

def test_program_with_pinv_and_eigh_of_a_batch_runs_in_kiln_run(tmp_path):
    rng = np.random.default_rng(26)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    s = symmetric(rng, (3, 4, 4), np.float32)

    def kfn(x, s):
        w, v = knp.linalg.eigh(s)
        return knp.linalg.pinv(x), w, (v * w[..., None, :]) @ knp.swapaxes(v, -1, -2)

    def nfn(x, s):
        w, v = np.linalg.eigh(s)
        return np.linalg.pinv(x), w, (v * w[..., None, :]) @ np.swapaxes(v, -1, -2)

    check_like_numpy(kfn(x, s), nfn(x, s), 1e-4)
    check_like_numpy(kiln_run_exported(kfn, x, s, tmp_path=tmp_path), nfn(x, s), 1e-4)


# ---- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,error,message", [
    (lambda: lax_linalg.qr(np.ones(3)), ValueError, "qr: argument x must have at least 2 dimensions"),
    (lambda: lax_linalg.qr(np.ones((2, 2), np.int32)), TypeError, "qr: argument x must be a floating-point array"),
    (lambda: lax_linalg.qr(np.ones((2, 2)), pivoting=True), NotImplementedError, "qr: pivoting=True"),
    (lambda: lax_linalg.eigh(np.ones((2, 3))), ValueError, "eigh: argument x must be a batch of square matrices"),
    (lambda: lax_linalg.eigh(np.ones((2, 2)), subset_by_index=(0, 1)), NotImplementedError, "eigh: subset_by_index"),
    (lambda: lax_linalg.svd(np.ones(2)), ValueError, "svd: argument x must have at least 2 dimensions"),
    (lambda: lax_linalg.svd(np.ones((2, 2)), subset_by_index=(0, 1)), NotImplementedError, "svd: subset_by_index"),
    (lambda: knp.linalg.qr(np.ones((2, 2)), "full"), ValueError, "qr: unrecognized mode 'full'"),
    (lambda: knp.linalg.qr(np.ones((2, 2)), "raw"), NotImplementedError, "qr: mode='raw'"),
    (lambda: knp.linalg.qr(np.ones(2)), np.linalg.LinAlgError, "qr: 1-dimensional array given for argument a"),
    (lambda: knp.linalg.svd(np.ones((2, 2), np.float16)), TypeError, "svd: argument a has dtype float16"),
    (lambda: knp.linalg.svd(np.ones((2, 3)), hermitian=True), np.linalg.LinAlgError, "svd: hermitian=True needs square"),
    (lambda: knp.linalg.cond(np.ones((2, 0, 0))), np.linalg.LinAlgError, "cond: not defined on empty arrays"),
    (lambda: knp.linalg.lstsq(np.ones((0, 2)), np.ones(0)), np.linalg.LinAlgError, "lstsq: argument a of shape"),
    (lambda: knp.linalg.eigh(np.ones((2, 3))), np.linalg.LinAlgError, "eigh: last 2 dimensions of argument a must be square"),
    (lambda: knp.linalg.eigh(np.eye(2), UPLO="X"), ValueError, "eigh: UPLO argument must be 'L' or 'U'"),
    (lambda: knp.linalg.eigvalsh(np.eye(2), UPLO="l"), ValueError, "eigvalsh: UPLO argument must be 'L' or 'U'"),
    (lambda: knp.linalg.pinv(np.eye(2), rcond=0.1, rtol=0.1), ValueError, "pinv: `rtol` and `rcond` can't be both set"),
    (lambda: knp.linalg.lstsq(np.ones((2, 2, 2)), np.ones(2)), np.linalg.LinAlgError,
     "lstsq: 3-dimensional array given for argument a"),
    (lambda: knp.linalg.lstsq(np.ones((3, 2)), np.ones((3, 2, 1))), np.linalg.LinAlgError,
     "lstsq: 3-dimensional array given for argument b"),
    (lambda: knp.linalg.lstsq(np.ones((3, 2)), np.ones(4)), np.linalg.LinAlgError, "lstsq: incompatible dimensions"),
    (lambda: knp.linalg.matrix_rank(np.ones((2, 2), bool).astype(np.float16)), TypeError, "matrix_rank: argument A"),
    (lambda: knp.linalg.cond(np.eye(2), 3), ValueError, "cond: invalid norm order 3"),
    (lambda: knp.linalg.cond(np.ones((2, 3)), 1), np.linalg.LinAlgError, "cond: last 2 dimensions of argument x"),
])
def test_errors_name_the_function_and_argument(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)").replace("`", ".")):
        call()
