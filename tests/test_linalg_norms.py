"""kiln.numpy.linalg's norms (norm, vector_norm, matrix_norm), vecdot, cross and multi_dot against numpy:
every ord/axis/keepdims form, values, dtypes and shapes, eagerly, under kiln.jit and through kiln-run;
gradients against float64 central differences (at zero too); every error with its message."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

L = knp.linalg
RNG = np.random.default_rng(42)
X3 = RNG.standard_normal((3, 4, 5))

VECTOR_ORDS = [None, np.inf, -np.inf, 0, 1, -1, 2, 3, 0.5, -2.5]
MATRIX_ORDS = [None, "fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2]


def _all_ords(ords, axis, keepdims):
    """(kiln's function, numpy's) computing the norm for every ord at once: one compilation under jit."""
    return (lambda a: tuple(L.norm(a, o, axis, keepdims) for o in ords),
            lambda a: tuple(np.linalg.norm(a, o, axis, keepdims) for o in ords))


@pytest.mark.parametrize("axis, keepdims", [(0, False), (-1, True), ((1,), False), (2, True)])
def test_vector_ords(axis, keepdims):
    x = X3.copy()
    x[0, 0, :2] = 0.0
    with np.errstate(divide="ignore"):
        eager_and_jit(*_all_ords(VECTOR_ORDS, axis, keepdims), x)


@pytest.mark.parametrize("axis, keepdims", [((0, 1), False), ((2, 0), True), ((-1, -2), False), ((1, 2), True)])
def test_matrix_ords(axis, keepdims):
    kfn, nfn = _all_ords(MATRIX_ORDS, axis, keepdims)
    check_like_numpy(kfn(X3), nfn(X3), tol=1e-10)
    if axis == (2, 0):  # singular values under jit once (they compile slowly); the others are cheap
        eager_and_jit(kfn, nfn, X3, tol=1e-10)
    else:
        cheap = [o for o in MATRIX_ORDS if o not in (2, -2, "nuc")]
        eager_and_jit(*_all_ords(cheap, axis, keepdims), X3)


def test_axis_none_one_and_two_dimensional():
    with np.errstate(divide="ignore"):
        eager_and_jit(*_all_ords(VECTOR_ORDS, None, False), X3[0, 0])
    eager_and_jit(*_all_ords(MATRIX_ORDS, None, True), X3[0], tol=1e-10)


def test_flattened_default_and_dtypes():
    eager_and_jit(L.norm, np.linalg.norm, X3)
    eager_and_jit(lambda a: L.norm(a, keepdims=True), lambda a: np.linalg.norm(a, keepdims=True), X3)
    eager_and_jit(L.norm, np.linalg.norm, np.arange(-3, 5, dtype=np.int32))  # integers give float64
    eager_and_jit(lambda a: L.norm(a, 1), lambda a: np.linalg.norm(a, 1), np.array([True, False, True]))
    x32 = X3.astype(np.float32)
    for ord, axis in [(None, None), (3, 1), ("nuc", (0, 2)), (np.inf, (1, 2)), (0, -1)]:
        eager_and_jit(lambda a: L.norm(a, ord, axis), lambda a: np.linalg.norm(a, ord, axis), x32,
                      tol=1e-5 if ord == "nuc" else None)


@pytest.mark.parametrize("axis", [None, 1, (0, 2), (2, 1, 0)])
def test_vector_norm(axis):
    ords = [2, 1, np.inf, -np.inf, 0, 4, -1]
    for keepdims in (False, True):
        eager_and_jit(lambda a: tuple(L.vector_norm(a, axis=axis, keepdims=keepdims, ord=o) for o in ords),
                      lambda a: tuple(np.linalg.vector_norm(a, axis=axis, keepdims=keepdims, ord=o) for o in ords), X3)


def test_matrix_norm():
    ords = ["fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2]
    for keepdims in (False, True):
        kfn = lambda a: tuple(L.matrix_norm(a, keepdims=keepdims, ord=o) for o in ords)  # noqa: E731
        nfn = lambda a: tuple(np.linalg.matrix_norm(a, keepdims=keepdims, ord=o) for o in ords)  # noqa: E731
        check_like_numpy(kfn(X3), nfn(X3), tol=1e-10)
    eager_and_jit(kfn, nfn, X3, tol=1e-10)


def test_exported_through_kiln_run(tmp_path):
    def norms(x, v):
        return (L.norm(x, "nuc", (1, 2)), L.norm(x, -np.inf, (2, 1), keepdims=True),
                L.vector_norm(x, ord=3, axis=(0, 2)), L.matrix_norm(x, ord=-2), L.norm(v), L.norm(v, 0.5),
                L.vecdot(x, x[0]), L.cross(v[:3], x[..., :3]), L.multi_dot([v[:4], x[0], x[1].T, v[:4]]))

    def want(x, v):
        return (np.linalg.norm(x, "nuc", (1, 2)), np.linalg.norm(x, -np.inf, (2, 1), keepdims=True), np.linalg.vector_norm(x, ord=3, axis=(0, 2)),
                np.linalg.matrix_norm(x, ord=-2), np.linalg.norm(v), np.linalg.norm(v, 0.5),
                np.linalg.vecdot(x, x[0]), np.linalg.cross(v[:3], x[..., :3]),
                np.linalg.multi_dot([v[:4], x[0], x[1].T, v[:4]]))

    v = RNG.standard_normal(5).astype(np.float32)
    eager_jit_and_kiln_run(norms, want, X3.astype(np.float32), v, tmp_path=tmp_path, tol=2e-5)


@pytest.mark.parametrize("ord, axis", [(None, None), (2, 0), (1, 0), (np.inf, 0), (-np.inf, 0), (3, 0), (0.5, 0),
                                       ("fro", (0, 1)), ("nuc", (0, 1)), (2, (0, 1)), (-2, (1, 0)), (1, (0, 1)),
                                       (np.inf, (1, 0)), (-1, (0, 1))])
def test_gradients(ord, axis):
    x = RNG.standard_normal((4, 3)) if isinstance(axis, tuple) else RNG.standard_normal(5)
    want = numerical_grad(lambda a: np.linalg.norm(a, ord, axis).sum(), x)
    got = kiln.grad(lambda a: L.norm(a, ord, axis).sum())(x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    if ord in (None, 3, "nuc", -1):
        jitted = kiln.jit(kiln.grad(lambda a: L.norm(a, ord, axis).sum()))(x)
        np.testing.assert_allclose(jitted, want, rtol=1e-6, atol=1e-8)


def test_gradients_at_zero():
    """The 2-norm's and Frobenius norm's gradient at 0 is 0 (a subgradient; JAX gives NaN), the 1-norm's is
    sign(0) = 0 as in JAX; a zero row beside a non-zero one differentiates normally."""
    zero = np.zeros(4)
    for ord in (None, 2, 1):
        np.testing.assert_array_equal(kiln.grad(lambda a: L.norm(a, ord))(zero), zero)
        np.testing.assert_array_equal(kiln.jit(kiln.grad(lambda a: L.norm(a, ord)))(zero), zero)
    np.testing.assert_array_equal(kiln.grad(lambda a: L.norm(a, "fro"))(np.zeros((2, 3))), np.zeros((2, 3)))
    x = np.array([[0.0, 0.0], [3.0, 4.0]])
    np.testing.assert_allclose(kiln.grad(lambda a: L.norm(a, axis=1).sum())(x), [[0, 0], [0.6, 0.8]])


def test_half_precision():
    """float16 and bfloat16 keep their dtype (numpy's float16 rule) for every norm that needs no singular values."""
    import ml_dtypes

    x = X3[0]
    for dtype in (np.float16, ml_dtypes.bfloat16):
        a = x.astype(dtype)
        for ord, axis in [(None, None), (1, 0), ("fro", (0, 1)), (np.inf, 1), (3, 1), (-np.inf, (1, 0))]:
            for got in (L.norm(a, ord, axis), kiln.jit(lambda v: L.norm(v, ord, axis))(a)):
                assert np.asarray(got).dtype == dtype
                np.testing.assert_allclose(np.asarray(got, np.float64), np.linalg.norm(x, ord, axis), rtol=2e-2)


def test_vecdot_and_cross():
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((3, 4))
    eager_and_jit(L.vecdot, np.linalg.vecdot, a, b)
    eager_and_jit(lambda x, y: L.vecdot(x, y, axis=1), lambda x, y: np.linalg.vecdot(x, y, axis=1), a, b.T)
    eager_and_jit(L.vecdot, np.linalg.vecdot, np.arange(6).reshape(2, 3), np.arange(3))  # integers stay
    u, v = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 4))
    eager_and_jit(lambda x, y: L.cross(x, y.T), lambda x, y: np.linalg.cross(x, y.T), u, v)
    eager_and_jit(lambda x, y: L.cross(x, y, axis=0), lambda x, y: np.linalg.cross(x, y, axis=0), u.T, v)


@pytest.mark.parametrize("shapes", [[(3, 4), (4, 2)], [(10, 30), (30, 5), (5, 60)], [(40, 2), (2, 40), (40, 3)],
                                    [(5,), (5, 30), (30, 2), (2, 7), (7,)], [(6,), (6, 2), (2, 9)],
                                    [(6, 2), (2, 9), (9,)], [(4,), (4,)]])
def test_multi_dot(shapes):
    arrays = [RNG.standard_normal(s) for s in shapes]
    eager_and_jit(lambda *a: L.multi_dot(list(a)), lambda *a: np.linalg.multi_dot(list(a)), *arrays)


def test_multi_dot_uses_the_cheapest_order():
    from kiln.numpy.linalg._matrix_functions import _chain_order

    # (10x30)(30x5)(5x60): (AB)C costs 1500 + 3000, A(BC) 9000 + 18000
    assert _chain_order([10, 30, 5, 60])[0][2] == 1
    assert _chain_order([40, 2, 40, 3])[0][2] == 0  # A(BC): 240 + 240 beats (AB)C: 3200 + 4800
    arrays = [RNG.standard_normal(s) for s in [(3, 4), (4, 5), (5, 2)]]
    grads = kiln.grad(lambda a: L.multi_dot([a, arrays[1], arrays[2]]).sum())(arrays[0])
    np.testing.assert_allclose(grads, numerical_grad(lambda a: np.linalg.multi_dot([a, *arrays[1:]]).sum(), arrays[0]),
                               rtol=1e-7)


def test_errors():
    with pytest.raises(ValueError, match="norm: invalid norm order 'fro' for vectors"):
        L.norm(np.ones(3), "fro")
    with pytest.raises(ValueError, match="norm: invalid norm order 3 for matrices"):
        L.norm(np.ones((2, 2)), 3)
    with pytest.raises(ValueError, match="norm: improper number of dimensions to norm"):
        L.norm(np.ones((2, 2, 2)), 2)
    with pytest.raises(ValueError, match="norm: improper number of dimensions to norm: axis=\\(0, 1, 2\\)"):
        L.norm(np.ones((2, 2, 2)), axis=(0, 1, 2))
    with pytest.raises(ValueError, match="norm: duplicate axes given"):
        L.norm(np.ones((2, 2)), axis=(1, -1))
    with pytest.raises(ValueError, match="norm: axis 2 is out of bounds"):
        L.norm(np.ones((2, 2)), axis=2)
    with pytest.raises(TypeError, match="norm: 'axis' must be None, an integer or a tuple"):
        L.norm(np.ones((2, 2)), axis=1.5j)
    with pytest.raises(ValueError, match="vector_norm: invalid norm order 'nuc' for vectors"):
        L.vector_norm(np.ones(3), ord="nuc")
    with pytest.raises(ValueError, match="matrix_norm: argument x must be at least 2-D"):
        L.matrix_norm(np.ones(3))
    with pytest.raises(ValueError, match="matrix_norm: invalid norm order 0 for matrices"):
        L.matrix_norm(np.ones((2, 2)), ord=0)
    with pytest.raises(ValueError, match="vecdot: x1 and x2 have vectors of lengths 3 and 2"):
        L.vecdot(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="cross: argument x2 must hold 3-dimensional vectors"):
        L.cross(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="multi_dot: expecting at least two arrays, got 1"):
        L.multi_dot([np.ones((2, 2))])
    with pytest.raises(np.linalg.LinAlgError, match="multi_dot: argument 1 is 3-dimensional"):
        L.multi_dot([np.ones((2, 2)), np.ones((2, 2, 2)), np.ones((2, 2))])
    with pytest.raises(TypeError, match="norm: ord='nuc' needs singular values, which linalg does not compute for "
                                        "dtype float16"):
        L.norm(np.ones((2, 2), np.float16), "nuc")
    with pytest.raises(TypeError, match="multi_dot: out= is not supported"):
        L.multi_dot([np.ones((2, 2))] * 2, out=np.ones((2, 2)))


def test_names_exported():
    for name in ("norm", "vector_norm", "matrix_norm", "vecdot", "cross", "multi_dot"):
        assert name in L.__all__ and callable(getattr(L, name))
    check_like_numpy(L.norm(np.float64(3.0)), np.linalg.norm(np.float64(3.0)))
