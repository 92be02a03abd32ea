"""kiln.numpy reductions: numpy's initial= and where= (eagerly and under kiln.jit, against numpy), and mean, var
and std dividing in float64 and rounding once."""
import math

import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.numpy as knp

RNG = np.random.default_rng(31)
AXES = [(None, False), (1, True), ((0, 2), False), (-1, False), ((), False)]


def _both(fn, *args):
    return [np.asarray(fn(*args)), np.asarray(kiln.jit(fn)(*args))]


def _assert_like_numpy(got, want, rtol):
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def _data(dtype):
    x = RNG.standard_normal((3, 4, 5)) * 4
    return x.astype(dtype) if np.dtype(dtype).kind == "f" else np.rint(x).astype(dtype)


def _mask():
    m = RNG.random((3, 4, 5)) < 0.6
    m[0, 0] = False  # an all-False slice along the last axis
    return m


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:Degrees of freedom", "ignore:invalid value")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int8])
@pytest.mark.parametrize("axis,keepdims", AXES)
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "all", "any", "var", "std"])
def test_where_matches_numpy(name, axis, keepdims, dtype):
    x, mask = _data(dtype), _mask()
    f = lambda v, m: getattr(knp, name)(v, axis=axis, keepdims=keepdims, where=m)  # noqa: E731
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x, axis=axis, keepdims=keepdims, where=mask)
        if dtype == np.float32:  # numpy adds float32 in float32; kiln in float64: compare with float64, rounded
            want = np.asarray(getattr(np, name)(x.astype(np.float64), axis=axis, keepdims=keepdims, where=mask)).astype(want.dtype)
        for got in _both(f, x, mask):
            _assert_like_numpy(got, want, 1e-6 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
@pytest.mark.parametrize("axis,keepdims", AXES)
@pytest.mark.parametrize("name", ["max", "min", "sum", "prod"])
def test_initial_matches_numpy(name, axis, keepdims, dtype):
    x = _data(dtype) if dtype != np.uint8 else RNG.integers(0, 9, (3, 4, 5)).astype(np.uint8)
    initial = {"max": 2, "min": 1, "sum": 3, "prod": 2}[name]
    f = lambda v: getattr(knp, name)(v, axis=axis, keepdims=keepdims, initial=initial)  # noqa: E731
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims, initial=initial)
    for got in _both(f, x):
        _assert_like_numpy(got, want, 1e-6 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("name", ["max", "min", "sum", "prod"])
def test_initial_and_where_together_and_empty_slices(name):
    x, mask = _data(np.float32), _mask()
    f = lambda v, m: getattr(knp, name)(v, axis=-1, where=m, initial=0.5)  # noqa: E731
    for got in _both(f, x, mask):
        _assert_like_numpy(got, getattr(np, name)(x, axis=-1, where=mask, initial=0.5), 1e-6)
    empty = np.zeros((3, 0), np.float32)
    g = lambda v: getattr(knp, name)(v, axis=1, initial=-1.5)  # noqa: E731
    for got in _both(g, empty):
        _assert_like_numpy(got, getattr(np, name)(empty, axis=1, initial=-1.5), 0)


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value")
def test_where_broadcasts_and_is_traced():
    x = _data(np.float64)
    row_mask = np.array([True, False, True, True, False])
    np.testing.assert_allclose(kiln.jit(lambda v, m: knp.sum(v, axis=-1, where=m))(x, row_mask),
                               np.sum(x, axis=-1, where=row_mask), rtol=1e-13)
    # a mask computed inside the function
    f = kiln.jit(lambda v: knp.mean(v, axis=0, where=v > 0))
    np.testing.assert_allclose(f(x), np.mean(x, axis=0, where=x > 0), rtol=1e-13)


def test_where_errors():
    x, mask = _data(np.float32), _mask()
    with pytest.raises(ValueError, match="does not have an identity.*initial"):
        knp.max(x, where=mask)
    with pytest.raises(ValueError, match="does not have an identity.*initial"):
        kiln.jit(lambda v, m: knp.min(v, axis=0, where=m))(x, mask)
    with pytest.raises(TypeError, match="where= must be a boolean array"):
        knp.sum(x, where=np.ones((3, 4, 5), np.int32))
    with pytest.raises(ValueError, match="does not broadcast"):
        knp.sum(x, where=np.ones((2, 5), bool))
    with pytest.raises(ValueError, match="initial must be a scalar"):
        knp.sum(x, initial=np.ones(3))


def test_where_gradients_against_finite_differences():
    x, mask = RNG.standard_normal((3, 5)), RNG.random((3, 5)) < 0.5
    mask[:, 0] = True
    w = RNG.standard_normal(3)

    def loss(v):
        return knp.sum(knp.mean(v * v, axis=1, where=mask) * w) + knp.sum(knp.max(v, axis=1, where=mask, initial=-9.0))

    def loss_np(v):
        return float(np.sum(np.mean(v * v, axis=1, where=mask) * w) + np.sum(np.max(v, axis=1, where=mask, initial=-9.0)))

    eps, fd = 1e-6, np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        fd[idx] = (loss_np(x + e) - loss_np(x - e)) / (2 * eps)
    np.testing.assert_allclose(kiln.grad(loss)(x), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(x), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.dtype(ml_dtypes.bfloat16)], ids=["float32", "float16", "bfloat16"])
def test_mean_of_constant_rows_is_exact(dtype):
    """The float64 sum is divided in float64 and rounded once: a constant row's mean is the constant, so x - mean
    and standardize give exactly 0 (the float32 sum rounded before dividing gave -2.4e-7 and -7.5e-5)."""
    import kiln.nn as nn

    values = RNG.uniform(-1e3, 1e3, 200).astype(dtype)
    for n in (3, 7, 10, 1000):
        x = np.repeat(values[:, None], n, axis=1)
        for got in _both(lambda v: v - knp.mean(v, axis=1, keepdims=True), x):
            assert np.all(got.astype(np.float32) == 0), n
        for got in _both(lambda v: (knp.var(v, axis=1), knp.std(v, axis=1))[0], x):
            assert np.all(got.astype(np.float32) == 0), n
        for got in _both(nn.standardize, x):
            assert np.all(got.astype(np.float32) == 0), n


def test_float32_mean_var_std_round_once():
    """float32 mean, var and std are the float64 results of the float32 data, rounded once to float32."""
    x = (RNG.standard_normal((64, 33)) * 10 + 3).astype(np.float32)
    x64 = x.astype(np.float64)
    for fn, want in [(lambda v: knp.mean(v, axis=1), x64.mean(1)), (lambda v: knp.var(v, axis=1), x64.var(1)),
                     (lambda v: knp.std(v, axis=1, ddof=1), x64.std(1, ddof=1)), (lambda v: knp.mean(v), x64.mean())]:
        for got in _both(fn, x):
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, np.asarray(want).astype(np.float32))
    # integers: numpy's float64 mean
    i = RNG.integers(-1000, 1000, (5, 7)).astype(np.int32)
    for got in _both(lambda v: knp.mean(v, axis=0), i):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, i.mean(0), rtol=1e-15)
    with np.errstate(invalid="ignore"):
        assert math.isnan(float(knp.mean(np.ones(3, np.float32), where=np.zeros(3, bool))))


def test_array_methods_pass_initial_and_where():
    x = _data(np.float32)
    m = _mask()
    fn = lambda v: (v.sum(axis=1, where=m), v.max(axis=2, initial=1.0), v.min(initial=-1.0, where=m),  # noqa: E731
                    v.prod(axis=0, where=m), v.mean(where=m), v.var(axis=2, where=m), v.std(where=m),
                    (v > 0).all(where=m), (v > 0).any(axis=1, where=m))
    with np.errstate(all="ignore"):
        want = [np.sum(x, axis=1, where=m), np.max(x, axis=2, initial=1.0), np.min(x, initial=-1.0, where=m),
                np.prod(x, axis=0, where=m), np.mean(x, where=m), np.var(x, axis=2, where=m), np.std(x, where=m),
                np.all(x > 0, where=m), np.any(x > 0, axis=1, where=m)]
        got = kiln.jit(fn)(x)
    for g, w in zip(got, want):
        _assert_like_numpy(np.asarray(g), w, rtol=1e-5)
