"""kiln.lax.linalg's triangular family (cholesky, triangular_solve, lu, lu_pivots_to_permutation) and
kiln.numpy.linalg on it (cholesky, solve, inv, det, slogdet, matrix_power, tensorsolve, tensorinv):
values, dtypes and shapes against numpy/scipy (LAPACK) eagerly, under jit and through kiln-run; vmap;
gradients against float64 central differences; the accuracy bound of docs/linalg.md; error messages."""
import numpy as np
import pytest
import scipy.linalg as sl

import kiln
import kiln.numpy as knp
from kiln.lax import _linalg_triangular as traced
from kiln.lax import linalg as lax_linalg
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run, kiln_run_exported
from references import numerical_grad, numerical_hessian

TOL = {np.float32: 2e-5, np.float64: 1e-11}
FLOATS = [np.float32, np.float64]


def spd(rng, shape, dtype=np.float64):
    """Well-conditioned symmetric positive definite matrices."""
    a = rng.standard_normal(shape)
    n = shape[-1]
    return (a @ np.swapaxes(a, -1, -2) / n + np.eye(n)).astype(dtype)


def general(rng, shape, dtype=np.float64):
    """Random matrices kept away from singular by a diagonal shift."""
    return (rng.standard_normal(shape) + 2 * np.eye(shape[-2], shape[-1])).astype(dtype)


def batched(fn, *arrays):
    """numpy reference applied matrix by matrix over the leading axes (same batch shape)."""
    batch = arrays[0].shape[:-2]
    outs = [fn(*[a[idx] for a in arrays]) for idx in np.ndindex(*batch)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack(o).reshape(batch + o[0].shape) for o in zip(*outs))
    return np.stack(outs).reshape(batch + outs[0].shape)


def scipy_triangular_solve(a, b, left_side, lower, transpose_a, unit_diagonal):
    if left_side:
        return sl.solve_triangular(a, b, trans=int(transpose_a), lower=lower, unit_diagonal=unit_diagonal)
    # x op(a) = b  <=>  op(a)^T x^T = b^T
    return sl.solve_triangular(a, b.T, trans=int(not transpose_a), lower=lower, unit_diagonal=unit_diagonal).T


# ---- lax.linalg.cholesky -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (2, 3, 4, 4)])
def test_cholesky_matches_numpy(dtype, shape):
    x = spd(np.random.default_rng(0), shape, dtype)
    eager_and_jit(lax_linalg.cholesky, np.linalg.cholesky, x, tol=TOL[dtype])


@pytest.mark.parametrize("n", [5, 37])
def test_traced_and_eager_implementations_agree(n):
    """The graph the compiler inlines (evaluated op by op here) and the numpy eager implementation."""
    rng = np.random.default_rng(26)
    s, a = spd(rng, (2, n, n)), rng.standard_normal((2, n, n))
    check_like_numpy(traced._cholesky_impl(s), lax_linalg.cholesky(s), 1e-12)
    check_like_numpy(traced._cholesky_impl(s - 2 * np.eye(n)), lax_linalg.cholesky(s - 2 * np.eye(n)))
    check_like_numpy(traced._lu_impl(a), lax_linalg.lu(a), 1e-11)
    singular = a.copy()
    singular[:, :, 2] = singular[:, :, 0]
    check_like_numpy(traced._lu_impl(singular), lax_linalg.lu(singular), 1e-11)


def test_cholesky_symmetrize_input_false_reads_the_lower_triangle():
    x = spd(np.random.default_rng(1), (4, 4))
    garbage = x + np.triu(np.full((4, 4), 7.0), 1)
    check_like_numpy(lax_linalg.cholesky(garbage, symmetrize_input=False), np.linalg.cholesky(x), TOL[np.float64])
    sym = (garbage + garbage.T) / 2
    check_like_numpy(lax_linalg.cholesky(sym), lax_linalg.cholesky(garbage), TOL[np.float64])


def test_cholesky_not_positive_definite_is_all_nan_per_matrix():
    x = np.stack([spd(np.random.default_rng(2), (3, 3)), -np.eye(3)])
    for out in (lax_linalg.cholesky(x), kiln.jit(lax_linalg.cholesky)(x)):
        out = np.asarray(out)
        assert np.isnan(out[1]).all()
        np.testing.assert_allclose(out[0], np.linalg.cholesky(x[0]), atol=1e-12)


def test_cholesky_gradient_and_vmap():
    rng = np.random.default_rng(3)
    x, w = spd(rng, (4, 4)), rng.standard_normal((4, 4))

    def f(a):
        return knp.sum(lax_linalg.cholesky(a) * w)

    want = numerical_grad(lambda a: np.sum(np.linalg.cholesky((a + a.T) / 2) * w), x)
    np.testing.assert_allclose(kiln.grad(f)(x), want, atol=1e-7)
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(x), want, atol=1e-7)
    xs = spd(rng, (3, 4, 4))
    np.testing.assert_allclose(kiln.vmap(lax_linalg.cholesky)(xs), np.linalg.cholesky(xs), atol=1e-12)
    np.testing.assert_allclose(kiln.jit(kiln.vmap(lax_linalg.cholesky, in_axes=1, out_axes=2))(np.moveaxis(xs, 0, 1)),
                               np.moveaxis(np.linalg.cholesky(xs), 0, 2), atol=1e-12)


# ---- lax.linalg.triangular_solve -----------------------------------------------------------------

FLAGS = [(left, lower, trans, unit) for left in (True, False) for lower in (True, False)
         for trans in (False, True) for unit in (False, True)]


def _triangular_operands(rng, batch, m, n, left_side, dtype=np.float64):
    a = rng.standard_normal(batch + (m, m)) + 3 * np.eye(m)
    b = rng.standard_normal(batch + ((m, n) if left_side else (n, m)))
    return a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize("left_side,lower,transpose_a,unit_diagonal", FLAGS)
def test_triangular_solve_every_flag_against_scipy(left_side, lower, transpose_a, unit_diagonal):
    a, b = _triangular_operands(np.random.default_rng(4), (2,), 4, 3, left_side)
    flags = dict(left_side=left_side, lower=lower, transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    want = batched(lambda x, y: scipy_triangular_solve(x, y, **flags), a, b)
    check_like_numpy(lax_linalg.triangular_solve(a, b, **flags), want, 1e-10)
    check_like_numpy(traced._triangular_solve_impl(a, b, conjugate_a=False, **flags), want, 1e-10)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("left_side,lower,transpose_a", [(True, True, False), (False, False, True)])
def test_triangular_solve_jit(dtype, left_side, lower, transpose_a):
    a, b = _triangular_operands(np.random.default_rng(5), (), 5, 2, left_side, dtype)
    flags = dict(left_side=left_side, lower=lower, transpose_a=transpose_a)

    def want(x, y):
        return scipy_triangular_solve(x.astype(np.float64), y.astype(np.float64), unit_diagonal=False,
                                      **flags).astype(dtype)

    eager_and_jit(lambda x, y: lax_linalg.triangular_solve(x, y, **flags), want, a, b, tol=TOL[dtype] * 10)


@pytest.mark.parametrize("left_side,lower,transpose_a", [(True, True, False), (True, False, True),
                                                         (False, True, True), (False, False, False)])
def test_triangular_solve_gradients(left_side, lower, transpose_a):
    rng = np.random.default_rng(6)
    a, b = _triangular_operands(rng, (), 3, 2, left_side)
    w = rng.standard_normal(b.shape)
    flags = dict(left_side=left_side, lower=lower, transpose_a=transpose_a)

    def f(x, y):
        return knp.sum(lax_linalg.triangular_solve(x, y, **flags) * w)

    def ref(x, y):
        return np.sum(scipy_triangular_solve(x, y, unit_diagonal=False, **flags) * w)

    ga, gb = kiln.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, numerical_grad(lambda x: ref(x, b), a), atol=1e-7)
    np.testing.assert_allclose(gb, numerical_grad(lambda y: ref(a, y), b), atol=1e-7)
    assert np.all(np.asarray(ga)[~(np.tril if lower else np.triu)(np.ones((3, 3), bool))] == 0)


def test_triangular_solve_forward_mode_and_vmap():
    rng = np.random.default_rng(7)
    a, b = _triangular_operands(rng, (), 3, 2, True)
    ta, tb = rng.standard_normal(a.shape), rng.standard_normal(b.shape)

    def f(x, y):
        return lax_linalg.triangular_solve(x, y, left_side=True, lower=True)

    eps = 1e-6
    want = (sl.solve_triangular(a + eps * ta, b + eps * tb, lower=True)
            - sl.solve_triangular(a - eps * ta, b - eps * tb, lower=True)) / (2 * eps)
    _, tangent = kiln.jvp(f, (a, b), (ta, tb))
    np.testing.assert_allclose(tangent, want, atol=1e-7)
    bs = rng.standard_normal((4, 3, 2))
    np.testing.assert_allclose(kiln.vmap(f, in_axes=(None, 0))(a, bs), [sl.solve_triangular(a, y, lower=True) for y in bs],
                               atol=1e-12)
    as_ = rng.standard_normal((4, 3, 3)) + 3 * np.eye(3)
    np.testing.assert_allclose(kiln.jit(kiln.vmap(f, in_axes=(0, None)))(as_, b),
                               [sl.solve_triangular(x, b, lower=True) for x in as_], atol=1e-12)


# ---- blocked variants (more than 32 rows: panels of 16) ------------------------------------------------

@pytest.mark.parametrize("left_side,lower,transpose_a,unit_diagonal", FLAGS)
def test_blocked_triangular_solve_every_flag(left_side, lower, transpose_a, unit_diagonal):
    a, b = _triangular_operands(np.random.default_rng(21), (2,), 37, 3, left_side)
    a += 5 * np.eye(37)
    flags = dict(left_side=left_side, lower=lower, transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    want = batched(lambda x, y: scipy_triangular_solve(x, y, **flags), a, b)
    check_like_numpy(traced._triangular_solve_impl(a, b, conjugate_a=False, **flags), want, 1e-10)
    check_like_numpy(lax_linalg.triangular_solve(a, b, **flags), want, 1e-10)


@pytest.mark.parametrize("dtype", FLOATS)
def test_blocked_cholesky_and_solve_under_jit(dtype):
    rng = np.random.default_rng(22)
    x = spd(rng, (2, 50, 50), dtype)
    x[1] -= 3 * np.eye(50, dtype=dtype)  # not positive definite
    b = rng.standard_normal((2, 50, 2)).astype(dtype)

    def fn(a, y):
        factor = lax_linalg.cholesky(a)
        return factor, lax_linalg.triangular_solve(factor[:1], y[:1], left_side=True, lower=True)

    for factor, solved in (fn(x, b), kiln.jit(fn)(x, b)):
        want = np.linalg.cholesky(x[0].astype(np.float64))
        np.testing.assert_allclose(np.asarray(factor[0], np.float64), want, rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
        assert np.isnan(factor[1]).all()
        np.testing.assert_allclose(np.asarray(solved[0], np.float64), sl.solve_triangular(want, b[0], lower=True),
                                   rtol=TOL[dtype] * 20, atol=TOL[dtype] * 20)


def test_blocked_cholesky_gradient():
    rng = np.random.default_rng(23)
    x, w = spd(rng, (34, 34)), rng.standard_normal((34, 34))
    got = kiln.grad(lambda a: knp.sum(lax_linalg.cholesky(a) * w))(x)
    want = numerical_grad(lambda a: np.sum(np.linalg.cholesky((a + a.T) / 2) * w), x)
    np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("n", [37, 48])
def test_blocked_lu_matches_lapack_pivots_included(n):
    x = np.random.default_rng(24).standard_normal((2, n, n))
    check_like_numpy(traced._lu_impl(x), batched(scipy_lu, x), 1e-10)
    check_like_numpy(lax_linalg.lu(x), batched(scipy_lu, x), 1e-10)


def test_blocked_lu_singular_under_jit_and_gradient():
    rng = np.random.default_rng(25)
    x = rng.standard_normal((35, 35))
    x[:, 7] = 2 * x[:, 3]
    lu, _, perm = kiln.jit(lax_linalg.lu)(x)
    assert np.isfinite(lu).all() and np.abs(np.diag(lu)).min() < 1e-12
    np.testing.assert_allclose((np.tril(lu, -1) + np.eye(35)) @ np.triu(lu), x[perm], atol=1e-12)
    y, w = general(rng, (34, 34)), rng.standard_normal((34, 34))
    got = kiln.grad(lambda a: knp.sum(lax_linalg.lu(a)[0] * w))(y)
    np.testing.assert_allclose(got, numerical_grad(lambda a: np.sum(sl.lu_factor(a)[0] * w), y), atol=1e-6)


# ---- lax.linalg.lu --------------------------------------------------------------------------------

def scipy_lu(x):
    lu, piv = sl.lu_factor(x)
    m = x.shape[0]
    perm = np.arange(m)
    for i, p in enumerate(piv):
        perm[[i, p]] = perm[[p, i]]
    return lu, piv.astype(np.int32), perm.astype(np.int32)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5)])
def test_lu_matches_lapack(dtype, shape):
    x = np.random.default_rng(8).standard_normal(shape).astype(dtype)
    eager_and_jit(lax_linalg.lu, lambda a: batched(scipy_lu, a) if a.ndim > 2 else scipy_lu(a), x, tol=TOL[dtype] * 10)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (2, 4, 2)])
def test_lu_rectangular_reconstructs(shape):
    x = np.random.default_rng(9).standard_normal(shape)
    lu, pivots, perm = lax_linalg.lu(x)
    m, n = shape[-2:]
    k = min(m, n)
    l_ = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
    u = np.triu(lu[..., :k, :])
    np.testing.assert_allclose(np.take_along_axis(x, perm[..., None], axis=-2), l_ @ u, atol=1e-12)
    assert pivots.shape == shape[:-2] + (k,) and pivots.dtype == np.int32 and perm.dtype == np.int32
    np.testing.assert_array_equal(lax_linalg.lu_pivots_to_permutation(pivots, m), perm)


def test_lu_singular_finishes_with_a_zero_pivot():
    x = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    lu, _, perm = kiln.jit(lax_linalg.lu)(x)
    assert np.isfinite(lu).all()
    assert np.abs(np.diag(lu)).min() == 0
    l_, u = np.tril(lu, -1) + np.eye(3), np.triu(lu)
    np.testing.assert_allclose(x[perm], l_ @ u, atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 4), (3, 4), (4, 3)])
def test_lu_gradient(shape):
    rng = np.random.default_rng(10)
    x = general(rng, shape)
    w = rng.standard_normal(shape)

    def ref(a):
        return np.sum(sl.lu_factor(a)[0] * w) if shape[0] == shape[1] else np.sum(scipy_lu_rect(a) * w)

    got = kiln.grad(lambda a: knp.sum(lax_linalg.lu(a)[0] * w))(x)
    np.testing.assert_allclose(got, numerical_grad(ref, x), atol=1e-7)


def scipy_lu_rect(a):
    _, l_, u = sl.lu(a)
    k = min(a.shape)
    out = np.zeros(a.shape)
    out[:, :k] += np.tril(l_, -1)[:, :k]
    out[:k, :] += np.triu(u)
    return out


def test_lu_vmap_and_grad_under_jit():
    xs = general(np.random.default_rng(11), (3, 4, 4))
    lu, pivots, perm = kiln.jit(kiln.vmap(lax_linalg.lu))(xs)
    want = batched(scipy_lu, xs)
    check_like_numpy((lu, pivots, perm), want, 1e-11)
    g = kiln.jit(kiln.grad(lambda a: knp.sum(kiln.vmap(lax_linalg.lu)(a)[0] ** 2)))(xs)
    np.testing.assert_allclose(g, numerical_grad(lambda a: np.sum(batched(scipy_lu, a)[0] ** 2), xs), atol=1e-6)


def test_lu_pivots_to_permutation_batched_and_jit():
    pivots = np.array([[2, 2, 3], [0, 3, 3]], np.int32)

    def ref(p):
        perm = np.arange(5)
        for i, j in enumerate(p):
            perm[[i, j]] = perm[[j, i]]
        return perm.astype(np.int32)

    want = np.stack([ref(p) for p in pivots])
    eager_and_jit(lambda p: lax_linalg.lu_pivots_to_permutation(p, 5), lambda p: want, pivots)


# ---- errors of the primitives ----------------------------------------------------------------------

def test_primitive_errors_name_function_and_argument():
    with pytest.raises(ValueError, match=r"cholesky: argument x must be a batch of square matrices"):
        lax_linalg.cholesky(np.ones((2, 3)))
    with pytest.raises(TypeError, match=r"cholesky: argument x must be a floating-point array"):
        lax_linalg.cholesky(np.eye(3, dtype=np.int32))
    with pytest.raises(ValueError, match=r"lu: argument x must have at least 2 dimensions"):
        lax_linalg.lu(np.ones(3))
    with pytest.raises(ValueError, match=r"triangular_solve: b of shape \(4, 2\) must have 3 rows"):
        lax_linalg.triangular_solve(np.eye(3), np.ones((4, 2)), left_side=True)
    with pytest.raises(ValueError, match=r"triangular_solve: a and b must have the same batch shape"):
        lax_linalg.triangular_solve(np.ones((2, 3, 3)), np.ones((3, 3, 2)), left_side=True)
    with pytest.raises(TypeError, match=r"triangular_solve: a and b must have the same dtype"):
        lax_linalg.triangular_solve(np.eye(3), np.ones((3, 2), np.float32), left_side=True)
    with pytest.raises(TypeError, match=r"lu_pivots_to_permutation: argument pivots must be an integer array"):
        lax_linalg.lu_pivots_to_permutation(np.ones(3), 4)
    with pytest.raises(ValueError, match=r"lu_pivots_to_permutation: 3 pivots do not fit a permutation of size 2"):
        lax_linalg.lu_pivots_to_permutation(np.zeros(3, np.int32), 2)


# ---- accuracy bound (docs/linalg.md) ----------------------------------------------------------------

@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
def test_accuracy_bound_against_lapack(dtype, compiled):
    """Relative max-norm difference from LAPACK (float64) at most n * eps * cond(A); backward error of
    cholesky and lu at most n * eps. Eagerly (numpy implementation) and compiled (the blocked forms)."""
    rng = np.random.default_rng(12)
    n, eps = 40, np.finfo(dtype).eps
    a, s, b = rng.standard_normal((n, n)), spd(rng, (n, n)), rng.standard_normal((n, 3))
    bound_a, bound_s = n * eps * np.linalg.cond(a), n * eps * np.linalg.cond(s)
    lower = np.linalg.cholesky(s)

    def factorizations(a_, s_, lower_, b_):
        return (lax_linalg.cholesky(s_), *lax_linalg.lu(a_),
                lax_linalg.triangular_solve(lower_, b_, left_side=True, lower=True),
                knp.linalg.solve(a_, b_), knp.linalg.inv(a_))

    run = kiln.jit(factorizations) if compiled else factorizations
    factor, lu, _, perm, solved, x, inverse = run(*(m.astype(dtype) for m in (a, s, lower, b)))

    def rel(got, want):
        return np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max()

    assert rel(factor, lower) <= bound_s
    f64 = np.asarray(factor, np.float64)
    assert rel(f64 @ f64.T, s) <= n * eps
    assert rel(lu, sl.lu_factor(a)[0]) <= bound_a
    lu64 = np.asarray(lu, np.float64)
    assert rel((np.tril(lu64, -1) + np.eye(n)) @ np.triu(lu64), a[np.asarray(perm)]) <= n * eps
    assert rel(solved, sl.solve_triangular(lower, b, lower=True)) <= bound_s
    assert rel(x, np.linalg.solve(a, b)) <= bound_a
    assert rel(inverse, np.linalg.inv(a)) <= bound_a


# ---- kiln.numpy.linalg -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_numpy_solve_inv_det_slogdet(dtype):
    rng = np.random.default_rng(13)
    a, b = general(rng, (2, 4, 4), dtype), rng.standard_normal((2, 4, 3)).astype(dtype)
    tol = TOL[dtype] * 10

    def kfn(x, y):
        return knp.linalg.solve(x, y), knp.linalg.inv(x), knp.linalg.det(x), *knp.linalg.slogdet(x)

    def nfn(x, y):
        return np.linalg.solve(x, y), np.linalg.inv(x), np.linalg.det(x), *np.linalg.slogdet(x)

    eager_and_jit(kfn, nfn, a, b, tol=tol)


@pytest.mark.parametrize("a_shape,b_shape", [((4, 4), (4,)), ((2, 4, 4), (4,)), ((4, 4), (2, 4, 3)),
                                             ((3, 1, 4, 4), (2, 4, 1)), ((2, 4, 4), (2, 4, 4))])
def test_numpy_solve_numpy2_shape_rules(a_shape, b_shape):
    rng = np.random.default_rng(14)
    a, b = general(rng, a_shape), rng.standard_normal(b_shape)
    check_like_numpy(knp.linalg.solve(a, b), np.linalg.solve(a, b), 1e-11)


def test_numpy_solve_b_that_numpy2_rejects():
    a, b = np.eye(4)[None].repeat(2, 0), np.ones((2, 4))
    with pytest.raises(ValueError):
        np.linalg.solve(a, b)
    with pytest.raises(ValueError, match=r"solve: b of shape \(2, 4\) does not match a of shape \(2, 4, 4\)"):
        knp.linalg.solve(a, b)


def test_numpy_dtypes_follow_numpy():
    ia = np.array([[2, 1], [1, 3]], np.int32)
    names = ("inv", "det", "cholesky")
    eager_and_jit(lambda x: [getattr(knp.linalg, n)(x) for n in names],
                  lambda x: [getattr(np.linalg, n)(x) for n in names], ia, tol=1e-12)
    check_like_numpy(knp.linalg.solve(ia, np.array([1, 2])), np.linalg.solve(ia, np.array([1, 2])), 1e-12)
    assert knp.linalg.matrix_power(ia, 3).dtype == np.linalg.matrix_power(ia, 3).dtype
    assert knp.linalg.inv(ia.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("upper", [False, True])
def test_numpy_cholesky_reads_one_triangle(upper):
    x = spd(np.random.default_rng(15), (2, 4, 4))
    if upper:
        x[..., 3, 0] = 9.0
    else:
        x[..., 0, 3] = 9.0
    eager_and_jit(lambda a: knp.linalg.cholesky(a, upper=upper), lambda a: np.linalg.cholesky(a, upper=upper), x,
                  tol=1e-12)


@pytest.mark.parametrize("n", [-3, -1, 0, 1, 2, 5])
def test_numpy_matrix_power(n):
    a = general(np.random.default_rng(16), (2, 3, 3)) / 2
    eager_and_jit(lambda x: knp.linalg.matrix_power(x, n), lambda x: np.linalg.matrix_power(x, n), a, tol=1e-10)


def test_numpy_tensorsolve_and_tensorinv():
    rng = np.random.default_rng(17)
    a = rng.standard_normal((2, 3, 6)) + np.eye(6).reshape(2, 3, 6)
    b = rng.standard_normal((2, 3))
    eager_and_jit(knp.linalg.tensorsolve, np.linalg.tensorsolve, a, b, tol=1e-10)
    c = rng.standard_normal((4, 6, 8, 3)) + np.eye(24).reshape(4, 6, 8, 3)
    check_like_numpy(knp.linalg.tensorinv(c), np.linalg.tensorinv(c), 1e-10)
    check_like_numpy(knp.linalg.tensorinv(c.reshape(24, 4, 6), ind=1), np.linalg.tensorinv(c.reshape(24, 4, 6), ind=1),
                     1e-10)
    d = rng.standard_normal((6, 2, 3)) + np.eye(6).reshape(6, 2, 3)
    check_like_numpy(knp.linalg.tensorsolve(d, b, axes=(0,)), np.linalg.tensorsolve(d, b, axes=(0,)), 1e-10)


def test_numpy_singular_input():
    s = np.array([[1.0, 2.0], [2.0, 4.0]])

    def fn(x):
        return knp.linalg.slogdet(x), knp.linalg.det(x), knp.linalg.inv(x)

    for (sign, logabsdet), det, inverse in (fn(s), kiln.jit(fn)(s)):
        assert float(sign) == 0.0 and not np.signbit(sign) and logabsdet == -np.inf
        assert float(det) == 0.0
        assert not np.isfinite(inverse).all()
    assert np.isnan(knp.linalg.cholesky(-np.eye(2))).all()


def test_numpy_gradients_against_finite_differences():
    rng = np.random.default_rng(18)
    a, b, w = general(rng, (3, 3)), rng.standard_normal((3, 2)), rng.standard_normal((3, 3))
    s = spd(rng, (3, 3))
    cases = [
        (lambda x: knp.sum(knp.linalg.solve(x, b) * w[:, :2]), lambda x: np.sum(np.linalg.solve(x, b) * w[:, :2]), a),
        (lambda y: knp.sum(knp.linalg.solve(a, y) ** 2), lambda y: np.sum(np.linalg.solve(a, y) ** 2), b),
        (lambda x: knp.sum(knp.linalg.inv(x) * w), lambda x: np.sum(np.linalg.inv(x) * w), a),
        (knp.linalg.det, np.linalg.det, a),
        (lambda x: knp.linalg.slogdet(x).logabsdet, lambda x: np.linalg.slogdet(x)[1], a),
        (lambda x: knp.sum(knp.linalg.cholesky(x) * w), lambda x: np.sum(np.linalg.cholesky(x) * w), s),
        (lambda x: knp.sum(knp.linalg.matrix_power(x, -2) * w), lambda x: np.sum(np.linalg.matrix_power(x, -2) * w), a),
    ]
    for kfn, nfn, x in cases:
        np.testing.assert_allclose(kiln.grad(kfn)(x), numerical_grad(nfn, x), rtol=1e-6, atol=1e-7)
    kfn, nfn, x = cases[4]
    np.testing.assert_allclose(kiln.jit(kiln.grad(kfn))(x), numerical_grad(nfn, x), rtol=1e-6, atol=1e-7)


def test_numpy_vmap_of_solve_and_slogdet():
    rng = np.random.default_rng(19)
    a, b = general(rng, (3, 4, 4)), rng.standard_normal((3, 4))
    got = kiln.vmap(knp.linalg.solve)(a, b)
    np.testing.assert_allclose(got, [np.linalg.solve(x, y) for x, y in zip(a, b)], atol=1e-12)
    sign, logabsdet = kiln.jit(kiln.vmap(knp.linalg.slogdet))(a)
    want = np.linalg.slogdet(a)
    np.testing.assert_allclose(sign, want.sign)
    np.testing.assert_allclose(logabsdet, want.logabsdet, atol=1e-12)


def test_program_solving_a_batched_system_and_slogdet_runs_in_kiln_run(tmp_path):
    rng = np.random.default_rng(20)
    a, b = general(rng, (3, 5, 5)), rng.standard_normal((3, 5, 2))

    def fn(x, y):
        sign, logabsdet = knp.linalg.slogdet(x)
        return knp.linalg.solve(x, y), sign, logabsdet, knp.linalg.cholesky(x @ knp.swapaxes(x, -1, -2))

    def ref(x, y):
        sign, logabsdet = np.linalg.slogdet(x)
        return np.linalg.solve(x, y), sign, logabsdet, np.linalg.cholesky(x @ np.swapaxes(x, -1, -2))

    eager_jit_and_kiln_run(fn, ref, a, b, tmp_path=tmp_path, tol=1e-10)
    f32 = kiln_run_exported(lambda x: lax_linalg.lu(x), a.astype(np.float32), tmp_path=tmp_path)
    check_like_numpy(f32, batched(scipy_lu, a.astype(np.float32)), 1e-4)


def test_numpy_errors_name_function_and_argument():
    with pytest.raises(np.linalg.LinAlgError, match=r"inv: Last 2 dimensions of the array must be square, "
                                                     r"argument a has shape \(2, 3\)"):
        knp.linalg.inv(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match=r"det: 1-dimensional array given for argument a"):
        knp.linalg.det(np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match=r"solve: Last 2 dimensions"):
        knp.linalg.solve(np.ones((2, 3)), np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match=r"slogdet: Last 2 dimensions"):
        knp.linalg.slogdet(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match=r"cholesky: Last 2 dimensions"):
        knp.linalg.cholesky(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match=r"matrix_power: Last 2 dimensions"):
        knp.linalg.matrix_power(np.ones((2, 3)), 2)
    with pytest.raises(TypeError, match=r"inv: array type float16 is unsupported in linalg"):
        knp.linalg.inv(np.eye(2, dtype=np.float16))
    with pytest.raises(TypeError, match=r"matrix_power: exponent n must be an integer, got 1.5"):
        knp.linalg.matrix_power(np.eye(2), 1.5)
    with pytest.raises(np.linalg.LinAlgError, match=r"tensorsolve: Input arrays must satisfy"):
        knp.linalg.tensorsolve(np.ones((2, 3, 4)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"tensorinv: Invalid ind argument 0"):
        knp.linalg.tensorinv(np.ones((2, 2)), ind=0)
    with pytest.raises(np.linalg.LinAlgError, match=r"tensorinv: a of shape \(2, 3\) is not square"):
        knp.linalg.tensorinv(np.ones((2, 3)), ind=1)


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (1, 1)])
def test_empty_and_one_by_one_matrices(shape):
    x = np.full(shape, 2.0)

    def kfn(a):
        return knp.linalg.det(a), *knp.linalg.slogdet(a), knp.linalg.inv(a), knp.linalg.cholesky(a)

    def nfn(a):
        return np.linalg.det(a), *np.linalg.slogdet(a), np.linalg.inv(a), np.linalg.cholesky(a)

    eager_and_jit(kfn, nfn, x, tol=1e-12)
    check_like_numpy(lax_linalg.lu(np.ones((3, 0))), (np.ones((3, 0)), np.zeros(0, np.int32), np.arange(3, dtype=np.int32)))


def test_second_derivatives_and_tensor_gradients():
    rng = np.random.default_rng(27)
    a = rng.standard_normal((3, 3)) + 2 * np.eye(3)
    hessian = kiln.hessian(lambda x: knp.linalg.slogdet(x.reshape(3, 3)).logabsdet)(a.ravel())
    want = numerical_hessian(lambda x: np.linalg.slogdet(x.reshape(3, 3))[1], a.ravel())
    np.testing.assert_allclose(hessian, want, atol=1e-6)
    t = rng.standard_normal((2, 3, 6)) + np.eye(6).reshape(2, 3, 6)
    b = rng.standard_normal((2, 3))
    got = kiln.grad(lambda x: knp.sum(knp.linalg.tensorsolve(x, b) ** 2))(t)
    np.testing.assert_allclose(got, numerical_grad(lambda x: np.sum(np.linalg.tensorsolve(x, b) ** 2), t), atol=1e-6)
    c = rng.standard_normal((2, 3, 6)).reshape(6, 2, 3) + np.eye(6).reshape(6, 2, 3)
    got = kiln.grad(lambda x: knp.sum(knp.linalg.tensorinv(x, ind=1) ** 2))(c)
    np.testing.assert_allclose(got, numerical_grad(lambda x: np.sum(np.linalg.tensorinv(x, ind=1) ** 2), c), atol=1e-5)
