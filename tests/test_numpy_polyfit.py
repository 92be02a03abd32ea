"""kiln.numpy.polyfit against numpy.polyfit: every option (w, rcond, full, cov, cov='unscaled'), 1-D and 2-D y,
float64 and float32 data, gradients against float64 central differences, the rank warning and the errors,
eagerly, under kiln.jit and exported through the standalone kiln-run."""
import warnings

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import eager_jit_and_kiln_run
from references import numerical_grad

R = np.random.default_rng(20261123)
X = np.linspace(-1.0, 2.0, 20)
Y = 3 * X ** 3 - X + 0.5 + 0.01 * R.standard_normal(20)
Y2 = np.stack([Y, 2 * Y + 1 + 0.01 * R.standard_normal(20)], axis=1)
W = R.uniform(0.5, 2.0, 20)
OPTIONS = [{}, {"w": W}, {"rcond": 1e-3}, {"full": True}, {"cov": True}, {"cov": "unscaled"}, {"w": W, "cov": True}]


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


def _check(got, want, rtol):
    got, want = _tuple(got), _tuple(want)
    assert len(got) == len(want)
    for g, v in zip(got, want):
        g = np.asarray(g)
        assert g.shape == np.shape(v), (g.shape, np.shape(v))
        if g.ndim:  # the scalars rank and rcond are numpy's Python numbers, kiln's 0-d arrays
            assert g.dtype == np.asarray(v).dtype, (g.dtype, np.asarray(v).dtype)
        np.testing.assert_allclose(g, v, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("y", [Y, Y2], ids=["1d", "2d"])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_against_numpy(y, options):
    want = np.polyfit(X, y, 3, **options)
    _check(knp.polyfit(X, y, 3, **options), want, 1e-9)
    _check(kiln.jit(lambda x, v: knp.polyfit(x, v, 3, **options))(X, y), want, 1e-9)


def test_float32_data_and_integer_data():
    """numpy's dtypes: the Vandermonde matrix is float64, so are the coefficients."""
    x32, y32 = X.astype(np.float32), Y.astype(np.float32)
    _check(knp.polyfit(x32, y32, 2), np.polyfit(x32, y32, 2), 1e-9)
    _check(knp.polyfit(np.arange(6), np.arange(6) ** 2, 2), np.polyfit(np.arange(6), np.arange(6) ** 2, 2), 1e-9)


def test_rank_deficient_fit_warns_eagerly():
    with pytest.warns(np.exceptions.RankWarning, match="Polyfit may be poorly conditioned"):
        knp.polyfit(np.ones(5), np.arange(5.0), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        knp.polyfit(np.ones(5), np.arange(5.0), 2, full=True)  # full=True reports the rank instead
        kiln.jit(lambda x, y: knp.polyfit(x, y, 2))(np.ones(5), np.arange(5.0))  # the rank is traced


def test_gradient_in_y_and_x():
    loss = lambda x, y: knp.sum(knp.polyfit(x, y, 2) * np.array([1.0, -2.0, 0.5]))  # noqa: E731
    ref = lambda x, y: float(np.sum(np.polyfit(x, y, 2) * np.array([1.0, -2.0, 0.5])))  # noqa: E731
    x, y = X[:8], Y[:8]
    np.testing.assert_allclose(kiln.grad(loss, argnums=1)(x, y), numerical_grad(lambda v: ref(x, v), y), rtol=1e-6)
    np.testing.assert_allclose(kiln.grad(loss)(x, y), numerical_grad(lambda v: ref(v, y), x), rtol=1e-5, atol=1e-8)


def test_exported_through_kiln_run(tmp_path):
    eager_jit_and_kiln_run(lambda x, y, w: knp.polyfit(x, y, 3, w=w, cov=True),
                           lambda x, y, w: np.polyfit(x, y, 3, w=w, cov=True), X, Y2, W, tmp_path=tmp_path, tol=1e-9)


@pytest.mark.parametrize("call, error, message", [
    (lambda: knp.polyfit(X, Y, -1), ValueError, "polyfit: expected deg >= 0"),
    (lambda: knp.polyfit(X[:, None], Y, 2), TypeError, "polyfit: expected 1D vector for x"),
    (lambda: knp.polyfit(np.zeros(0), np.zeros(0), 1), TypeError, "polyfit: expected non-empty vector for x"),
    (lambda: knp.polyfit(X, np.zeros((20, 2, 2)), 2), TypeError, "polyfit: expected 1D or 2D array for y"),
    (lambda: knp.polyfit(X, Y[:5], 2), TypeError, "polyfit: expected x and y to have same length"),
    (lambda: knp.polyfit(X, Y, 2, w=W[:, None]), TypeError, "polyfit: expected a 1-d array for weights"),
    (lambda: knp.polyfit(X, Y, 2, w=W[:5]), TypeError, "polyfit: expected w and y to have the same length"),
    (lambda: knp.polyfit(X[:3], Y[:3], 2, cov=True), ValueError, "the number of data points must exceed order"),
])
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()
