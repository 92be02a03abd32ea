"""kiln.nn against numpy references: eagerly and under kiln.jit; gradients against central
finite differences (float64); vmap against a Python loop."""
import math

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.numpy as knp
from references import numerical_grad

RNG = np.random.default_rng(11)
_erf = np.vectorize(math.erf)
_erfc = np.vectorize(math.erfc)


def np_logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def np_softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name, kiln fn, numpy reference, f32 tolerance
ACTIVATIONS = [
    ("relu", nn.relu, lambda x: np.maximum(x, 0), 0),
    ("relu6", nn.relu6, lambda x: np.clip(x, 0, 6), 0),
    ("gelu_tanh", nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))), 2e-6),
    ("gelu_exact", lambda x: nn.gelu(x, approximate=False), lambda x: 0.5 * x * _erfc(-x / np.sqrt(2)), 2e-6),
    ("silu", nn.silu, lambda x: x / (1 + np.exp(-x)), 2e-6),
    ("sigmoid", nn.sigmoid, lambda x: 1 / (1 + np.exp(-x)), 2e-6),
    ("log_sigmoid", nn.log_sigmoid, lambda x: -np.logaddexp(0, -x), 2e-6),
    ("softplus", nn.softplus, lambda x: np.logaddexp(x, 0), 2e-6),
    ("softmax", nn.softmax, np_softmax, 2e-6),
    ("log_softmax", nn.log_softmax, lambda x: x - np_logsumexp(x, -1, True), 2e-6),
    ("logsumexp", nn.logsumexp, np_logsumexp, 2e-6),
    ("standardize", nn.standardize, lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), 1e-5),
]


@pytest.mark.parametrize("name,fn,ref,tol", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_values_eager_and_jit(name, fn, ref, tol):
    x = (RNG.standard_normal((3, 7)) * 4).astype(np.float32)
    x[0, :3] = [0.0, 40.0, -40.0]
    want = ref(x.astype(np.float64))
    for got in (fn(x), kiln.jit(fn)(x)):
        assert np.asarray(got).dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=tol, atol=max(tol, 1e-7))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(kiln.jit(fn)(x64), ref(x64), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,fn,ref,tol", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_gradients_against_finite_differences(name, fn, ref, tol):
    x = RNG.standard_normal((2, 5)) * 2
    r = RNG.standard_normal(np.shape(fn(x)))
    loss = lambda v: knp.sum(fn(v) * r)  # noqa: E731
    g = kiln.grad(loss)(x)
    np.testing.assert_allclose(g, numerical_grad(lambda v: float(np.sum(np.asarray(fn(v)) * r)), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(x), g, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,fn,ref,tol", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_vmap_against_loop(name, fn, ref, tol):
    xs = RNG.standard_normal((4, 3, 5))
    np.testing.assert_allclose(kiln.vmap(fn, in_axes=1)(np.moveaxis(xs, 0, 1)), np.stack([fn(x) for x in xs]), rtol=1e-12)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, True), ((0, 2), False), (-1, True), ((), False)])
def test_logsumexp_softmax_axes(axis, keepdims):
    x = RNG.standard_normal((3, 4, 5))
    f = lambda v: nn.logsumexp(v, axis=axis, keepdims=keepdims)  # noqa: E731
    want = x if axis == () else np_logsumexp(x, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(kiln.jit(f)(x), want, rtol=1e-12)
    if axis not in (None, ()):
        np.testing.assert_allclose(kiln.jit(lambda v: nn.softmax(v, axis=axis))(x), np_softmax(x, axis=axis), rtol=1e-12)


def test_numerical_stability():
    x = np.array([[1000.0, 0.0, -1000.0], [-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, 1.0]])
    lse = kiln.jit(lambda v: nn.logsumexp(v, axis=-1))(x)
    np.testing.assert_allclose(lse, [1000.0, -np.inf, np.logaddexp(0.0, 1.0)])
    np.testing.assert_allclose(kiln.jit(nn.softmax)(x[[0, 2]]), np_softmax(x[[0, 2]]))
    big = np.array([-800.0, 800.0])
    np.testing.assert_allclose(kiln.jit(nn.softplus)(big), [0.0, 800.0])
    np.testing.assert_allclose(kiln.jit(nn.sigmoid)(big), [0.0, 1.0])
    np.testing.assert_allclose(kiln.grad(lambda v: knp.sum(nn.sigmoid(v)))(big), [0.0, 0.0])
    g = kiln.grad(lambda v: knp.sum(nn.logsumexp(v, axis=-1)))(x[:1])
    np.testing.assert_allclose(g, [[1.0, 0.0, 0.0]])


def test_one_hot():
    labels = np.array([[0, 3], [2, -1]], np.int32)
    want = (labels[..., None] == np.arange(4)).astype(np.float32)
    np.testing.assert_array_equal(nn.one_hot(labels, 4), want)
    np.testing.assert_array_equal(kiln.jit(lambda v: nn.one_hot(v, 4))(labels), want)
    got = kiln.jit(lambda v: nn.one_hot(v, 4, dtype=np.int8, axis=0))(labels)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, np.moveaxis(want, -1, 0).astype(np.int8))
    with pytest.raises(TypeError, match="integer"):
        nn.one_hot(np.ones(3, np.float32), 4)


def test_standardize_with_given_statistics():
    x = RNG.standard_normal((4, 6))
    mean, var = x.mean(0, keepdims=True), x.var(0, keepdims=True)
    f = lambda v, m, s: nn.standardize(v, axis=0, mean=m, variance=s, epsilon=1e-3)  # noqa: E731
    np.testing.assert_allclose(kiln.jit(f)(x, mean, var), (x - mean) / np.sqrt(var + 1e-3), rtol=1e-12)


def test_cross_entropy_training_gradient():
    """log_softmax + one_hot: the gradient of mean cross-entropy is (softmax - one_hot) / n."""
    logits = RNG.standard_normal((5, 3))
    labels = np.array([0, 2, 1, 1, 0])

    def loss(z):
        return -knp.mean(knp.sum(nn.log_softmax(z) * nn.one_hot(labels, 3, dtype=np.float64), axis=-1))

    want = (np_softmax(logits) - np.eye(3)[labels]) / 5
    np.testing.assert_allclose(kiln.grad(loss)(logits), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(logits), want, rtol=1e-12, atol=1e-14)


# ----------------------------------------------------------------------------- stable activations: tails, derivatives

def _sigmoid64(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _gelu_tanh_parts(x):
    k, a = 2 * math.sqrt(2 / math.pi), 0.044715
    s = _sigmoid64(k * (x + a * x**3))
    return s, k * (1 + 3 * a * x * x)


# name, function, first derivative, second derivative (float64, stable forms)
DERIVATIVES = [
    ("sigmoid", nn.sigmoid, lambda x: _sigmoid64(x) * _sigmoid64(-x),
     lambda x: _sigmoid64(x) * _sigmoid64(-x) * (_sigmoid64(-x) - _sigmoid64(x))),
    ("log_sigmoid", nn.log_sigmoid, lambda x: _sigmoid64(-x), lambda x: -_sigmoid64(x) * _sigmoid64(-x)),
    ("softplus", nn.softplus, _sigmoid64, lambda x: _sigmoid64(x) * _sigmoid64(-x)),
    ("silu", nn.silu, lambda x: _sigmoid64(x) + x * _sigmoid64(x) * _sigmoid64(-x),
     lambda x: _sigmoid64(x) * _sigmoid64(-x) * (2 + x * (_sigmoid64(-x) - _sigmoid64(x)))),
    ("gelu_exact", lambda v: nn.gelu(v, approximate=False),
     lambda x: 0.5 * _erfc(-x / math.sqrt(2)) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
     lambda x: (2 - x * x) * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)),
    ("gelu_tanh", nn.gelu, lambda x: _gelu_tanh_parts(x)[0] + x * _gelu_tanh_parts(x)[0] * (1 - _gelu_tanh_parts(x)[0]) * _gelu_tanh_parts(x)[1],
     None),
]
TAIL_POINTS = np.array([-700.0, -100.0, -30.0, -17.5, -5.0, -1.0, -1e-3, -0.0, 0.0, 1e-3, 1.0, 5.0, 17.5, 30.0, 100.0])


@pytest.mark.parametrize("name,fn,d1,d2", DERIVATIVES, ids=[d[0] for d in DERIVATIVES])
def test_stable_activation_derivatives(name, fn, d1, d2):
    """First (and second) derivatives of the stable forms, relative to the analytic ones in float64 over both
    tails and at 0 exactly (where the select between the two branches sits); central differences at moderate x."""
    x = TAIL_POINTS
    grad = kiln.grad(lambda v: knp.sum(fn(v)))
    with np.errstate(all="ignore"):
        want = d1(x)
    for got in (grad(x), kiln.jit(grad)(x)):
        np.testing.assert_allclose(got, want, rtol=2e-13 if name != "gelu_tanh" else 1e-10, atol=0)
    moderate = np.array([-3.0, -0.7, -1e-4, 0.0, 1e-4, 0.6, 2.5])
    fd = numerical_grad(lambda v: float(np.sum(np.asarray(fn(v)))), moderate, eps=1e-6)
    np.testing.assert_allclose(grad(moderate), fd, rtol=1e-7, atol=1e-9)
    if d2 is not None:
        second = kiln.jit(kiln.grad(lambda v: knp.sum(grad(v))))
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(second(x), d2(x), rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_left_tails_keep_relative_accuracy(dtype):
    """sigmoid = 0.5 (1 + tanh(x/2)) cancelled to 0 below x = -17 (float32); log(sigmoid) was -inf."""
    x = np.array([-87.0 if dtype == np.float32 else -700.0, -80.0, -30.0, -20.0, -18.0, -10.0], dtype)  # normal results
    f = kiln.jit(lambda v: (nn.sigmoid(v), nn.log_sigmoid(v), knp.log(nn.sigmoid(v)), nn.silu(v), nn.softplus(v),
                            nn.gelu(v / 10, approximate=False), nn.gelu(v / 10)))
    sig, logsig, log_of_sig, silu, softplus, gelu_exact, gelu_tanh = f(x)
    x64 = x.astype(np.float64)
    rtol = 4e-7 if dtype == np.float32 else 4e-15
    np.testing.assert_allclose(sig, np.exp(x64 - np.log1p(np.exp(x64))), rtol=rtol)
    np.testing.assert_allclose(logsig, x64 - np.log1p(np.exp(x64)), rtol=rtol)
    np.testing.assert_allclose(log_of_sig, x64 - np.log1p(np.exp(x64)), rtol=rtol)
    np.testing.assert_allclose(silu, x64 * np.exp(x64 - np.log1p(np.exp(x64))), rtol=rtol)
    np.testing.assert_allclose(softplus, np.log1p(np.exp(x64)), rtol=rtol)
    z = x64 / 10
    np.testing.assert_allclose(gelu_exact, 0.5 * z * _erfc(-z / math.sqrt(2)), rtol=rtol * 20)
    np.testing.assert_allclose(gelu_tanh, z * _sigmoid64(2 * math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)), rtol=rtol * 20)


def test_relu_nan_and_signed_zero():
    x = np.array([np.nan, -0.0, 0.0, -1.0, 2.0, 7.0, -np.inf, np.inf], np.float32)
    for f in (nn.relu, kiln.jit(nn.relu)):
        got = np.asarray(f(x))
        np.testing.assert_array_equal(got, np.maximum(x, 0))  # NaN propagates, as numpy.maximum and JAX
        assert not np.signbit(got[1])
    for f in (nn.relu6, kiln.jit(nn.relu6)):
        np.testing.assert_array_equal(f(x), np.clip(x, 0, 6))
    ints = np.array([-3, 0, 4, 9], np.int32)
    assert kiln.jit(nn.relu6)(ints).dtype == nn.relu6(ints).dtype == np.int32
    np.testing.assert_array_equal(kiln.jit(nn.relu)(ints), [0, 0, 4, 9])
    np.testing.assert_array_equal(kiln.grad(lambda v: knp.sum(nn.relu(v)))(np.array([-1.0, 0.0, 2.0])), [0, 0, 1])


def _dtype_cases():
    import ml_dtypes

    return [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32), np.dtype(np.float64)]


EVERY_NN = {
    "relu": nn.relu, "relu6": nn.relu6, "sigmoid": nn.sigmoid, "log_sigmoid": nn.log_sigmoid, "silu": nn.silu,
    "softplus": nn.softplus, "gelu_tanh": nn.gelu, "gelu_exact": lambda v: nn.gelu(v, approximate=False),
    "softmax": nn.softmax, "log_softmax": nn.log_softmax, "logsumexp": lambda v: nn.logsumexp(v, axis=-1),
    "standardize": nn.standardize, "max_pool": lambda v: nn.max_pool(v, (2,)), "avg_pool": lambda v: nn.avg_pool(v, (2,)),
    "avg_pool_valid": lambda v: nn.avg_pool(v, (2,), padding="SAME", count_include_pad=False),
    "sum_pool": lambda v: nn.sum_pool(v, (2,)),
}


@pytest.mark.parametrize("dtype", _dtype_cases(), ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(EVERY_NN))
def test_result_dtype_is_the_same_eagerly_and_under_jit(name, dtype):
    """Eager results are numpy arrays, whose operators promote bfloat16 * 0.5 to float32; kiln.nn uses kiln.numpy
    functions, so every result keeps the input's float dtype in both modes (storage types computed in float32)."""
    fn = EVERY_NN[name]
    x = (RNG.standard_normal((2, 4, 3)) * 3).astype(dtype)
    eager, jitted = np.asarray(fn(x)), np.asarray(kiln.jit(fn)(x))
    assert eager.dtype == jitted.dtype == dtype, (eager.dtype, jitted.dtype)
    assert eager.shape == jitted.shape
    import ml_dtypes

    tol = 2 * float(ml_dtypes.finfo(dtype).eps) if dtype.itemsize == 2 else 64 * float(np.finfo(dtype).eps)
    np.testing.assert_allclose(eager.astype(np.float64), jitted.astype(np.float64), rtol=tol, atol=tol)


def test_storage_types_round_once():
    """float16 / bfloat16 activations are computed in float32 and rounded once: the float32 result rounded."""
    import ml_dtypes

    for dtype in (np.float16, ml_dtypes.bfloat16):
        x = np.linspace(-12, 12, 401).astype(dtype)
        for name in ("sigmoid", "log_sigmoid", "silu", "softplus", "gelu_tanh", "gelu_exact"):
            fn = EVERY_NN[name]
            got = kiln.jit(fn)(x)
            want = np.asarray(kiln.jit(fn)(x.astype(np.float32))).astype(dtype)
            assert np.array_equal(got.astype(np.float32), want.astype(np.float32)) or \
                np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)) /
                       np.maximum(np.abs(want.astype(np.float64)), 1e-30)) <= float(ml_dtypes.finfo(dtype).eps), name


def test_lax_erfc():
    from kiln.lax.math_prims import erfc

    x = np.array([-6.0, -1.0, -0.3, 0.0, 0.4, 0.75, 1.5, 3.0, 5.5, 9.0, 26.0, 27.5, 40.0, np.inf, -np.inf, np.nan])
    want = np.array([math.erfc(v) if not math.isnan(v) else math.nan for v in x])
    for got in (erfc(x), kiln.jit(erfc)(x)):
        np.testing.assert_allclose(got, want, rtol=5e-16, atol=0)
    x32 = x.astype(np.float32)
    np.testing.assert_array_equal(kiln.jit(erfc)(x32), want.astype(np.float32))
    g = kiln.grad(lambda v: knp.sum(erfc(v)))
    moderate = np.array([-2.0, -0.5, 0.0, 0.7, 2.2])
    np.testing.assert_allclose(g(moderate), numerical_grad(lambda v: float(np.sum(erfc(v))), moderate), rtol=1e-7)
    np.testing.assert_allclose(kiln.jit(g)(x[:12]), -2 / math.sqrt(math.pi) * np.exp(-x[:12] ** 2), rtol=1e-13)
    xs = RNG.standard_normal((3, 5))
    np.testing.assert_allclose(kiln.vmap(erfc, in_axes=1)(xs.T), np.stack([erfc(r) for r in xs]), rtol=1e-15)
