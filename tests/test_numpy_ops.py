"""Each kiln.numpy op against numpy: eagerly, and compiled by kiln.jit and run in the C runtime."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp

RNG = np.random.default_rng(1234)


def _data(shape, dtype, positive=False):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if dtype.kind in "iu":
        low = 1 if positive else -5
        return RNG.integers(low, 6, size=shape).astype(dtype)
    x = RNG.standard_normal(shape).astype(dtype)
    return np.abs(x) + 0.1 if positive else x


def _check(kiln_fn, numpy_fn, *args, mode, rtol=None, atol=None):
    expected = numpy_fn(*args)
    if mode == "eager":
        got = kiln_fn(*args)
    else:
        got = kiln.jit(kiln_fn)(*args)
    for e, g in zip(_as_list(expected), _as_list(got)):
        e, g = np.asarray(e), np.asarray(g)
        assert g.shape == e.shape, (g.shape, e.shape)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        if e.dtype.kind == "f":
            tol = {np.float32: 2e-6, np.float64: 1e-12}.get(e.dtype.type, 1e-3)
            np.testing.assert_allclose(g, e, rtol=rtol or tol * 4, atol=atol or tol)
        else:
            np.testing.assert_array_equal(g, e)


def _as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


MODES = ["eager", "jit"]

BINARY = [
    ("add", knp.add, np.add), ("subtract", knp.subtract, np.subtract),
    ("multiply", knp.multiply, np.multiply), ("maximum", knp.maximum, np.maximum),
    ("minimum", knp.minimum, np.minimum),
]
COMPARE = [
    ("equal", knp.equal, np.equal), ("not_equal", knp.not_equal, np.not_equal),
    ("less", knp.less, np.less), ("less_equal", knp.less_equal, np.less_equal),
    ("greater", knp.greater, np.greater), ("greater_equal", knp.greater_equal, np.greater_equal),
]
DTYPES = [np.float32, np.float64, np.int32, np.int64]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kfn,nfn", BINARY + COMPARE, ids=[b[0] for b in BINARY + COMPARE])
def test_binary_with_broadcasting(name, kfn, nfn, dtype, mode):
    a = _data((4, 1, 5), dtype)
    b = _data((3, 1), dtype)
    _check(kfn, nfn, a, b, mode=mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_divide_and_power(dtype, mode):
    a = _data((3, 4), dtype)
    b = _data((4,), dtype, positive=True)
    _check(knp.divide, np.divide, a, b, mode=mode)
    _check(lambda x, y: x / y, np.divide, a, b, mode=mode)
    _check(knp.power, np.power, np.abs(a), b, mode=mode, rtol=1e-5)
    _check(lambda x, y: abs(x) ** y, lambda x, y: np.abs(x) ** y, a, b, mode=mode, rtol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_integer_true_divide_gives_float64_like_numpy(mode):
    a = _data((6,), np.int32)
    b = _data((6,), np.int32, positive=True)
    _check(knp.divide, np.divide, a, b, mode=mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sqrt", "negative", "abs"])
def test_unary(name, dtype, mode):
    positive = name in ("log", "sqrt")
    x = _data((5, 7), dtype, positive=positive) * (3 if name in ("exp", "tanh") else 1)
    _check(getattr(knp, name), getattr(np, name), x, mode=mode, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_operators_and_methods(mode):
    x = _data((3, 4), np.float32)
    w = _data((4, 2), np.float32)
    _check(lambda a, b: (-a @ b).T, lambda a, b: (-a @ b).T, x, w, mode=mode)
    _check(lambda a: (a * 2 - 1).astype(np.int32), lambda a: (a * 2 - 1).astype(np.int32), x, mode=mode)
    _check(lambda a: a.reshape(2, 6).sum(axis=0), lambda a: a.reshape(2, 6).sum(axis=0), x, mode=mode)
    _check(lambda a: (a > 0, abs(a), a.mean(), a.max(axis=1, keepdims=True)),
           lambda a: (a > 0, abs(a), a.mean(), a.max(axis=1, keepdims=True)), x, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_where_and_astype(mode):
    x = _data((3, 4), np.float32)
    _check(lambda a: knp.where(a > 0, a, 0.0), lambda a: np.where(a > 0, a, np.float32(0)), x, mode=mode)
    _check(lambda a: knp.astype(a, np.float64), lambda a: a.astype(np.float64), x, mode=mode)
    _check(lambda a: knp.astype(a > 0, np.int32), lambda a: (a > 0).astype(np.int32), x, mode=mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axis", [None, 0, 1, 2, (0, 2), -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(axis, keepdims, mode):
    x = _data((3, 4, 5), np.float32)
    for name in ("sum", "max", "min", "mean"):
        _check(lambda a: getattr(knp, name)(a, axis=axis, keepdims=keepdims),
               lambda a: getattr(np, name)(a, axis=axis, keepdims=keepdims), x, mode=mode, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_integer_sum_widens_like_numpy(mode):
    x = _data((4, 5), np.int32)
    _check(lambda a: knp.sum(a, axis=1), lambda a: np.sum(a, axis=1), x, mode=mode)
    _check(lambda a: knp.sum(a > 0), lambda a: np.sum(a > 0), x, mode=mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)),
                                    ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 2)), ((4,), (4,))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_matmul_and_dot(shapes, dtype, mode):
    a, b = _data(shapes[0], dtype), _data(shapes[1], dtype)
    _check(knp.matmul, np.matmul, a, b, mode=mode, rtol=1e-5, atol=1e-5)
    if len(shapes[1]) <= 2:
        _check(knp.dot, np.dot, a, b, mode=mode, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_shape_ops(mode):
    x = _data((2, 3, 4), np.float32)
    _check(lambda a: knp.transpose(a, (2, 0, 1)), lambda a: np.transpose(a, (2, 0, 1)), x, mode=mode)
    _check(lambda a: knp.reshape(a, (4, -1)), lambda a: np.reshape(a, (4, -1)), x, mode=mode)
    _check(lambda a: knp.expand_dims(a, 1), lambda a: np.expand_dims(a, 1), x, mode=mode)
    _check(lambda a: knp.broadcast_to(a, (5, 2, 3, 4)),
           lambda a: np.broadcast_to(a, (5, 2, 3, 4)), x, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_creation(mode):
    x = _data((2, 3), np.float32)
    _check(lambda a: a + knp.ones((2, 3), np.float32), lambda a: a + np.ones((2, 3), np.float32), x, mode=mode)
    _check(lambda a: a * knp.zeros_like(a) + knp.full((3,), 2.5, np.float32),
           lambda a: a * np.zeros_like(a) + np.full((3,), 2.5, np.float32), x, mode=mode)
    _check(lambda a: a + knp.asarray(np.arange(3, dtype=np.float32)),
           lambda a: a + np.arange(3, dtype=np.float32), x, mode=mode)


@pytest.mark.parametrize("mode", MODES)
def test_bool_and_small_int_dtypes(mode):
    a = _data((4, 3), np.bool_)
    b = _data((4, 3), np.bool_)
    _check(lambda x, y: x == y, np.equal, a, b, mode=mode)
    i8 = _data((4, 3), np.int8)
    _check(lambda x: x + x, lambda x: x + x, i8, mode=mode)
