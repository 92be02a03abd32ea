"""kiln.nn against numpy references: eagerly and under kiln.jit; gradients against central
finite differences (float64); vmap against a Python loop."""
import math

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.numpy as knp

RNG = np.random.default_rng(11)
_erf = np.vectorize(math.erf)


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
    ("gelu_exact", lambda x: nn.gelu(x, approximate=False), lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))), 2e-6),
    ("silu", nn.silu, lambda x: x / (1 + np.exp(-x)), 2e-6),
    ("sigmoid", nn.sigmoid, lambda x: 1 / (1 + np.exp(-x)), 2e-6),
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
    np.testing.assert_allclose(kiln.jit(fn)(x64), ref(x64), rtol=1e-12 if name != "gelu_exact" else 2e-7, atol=1e-12)


def numerical_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        g[idx] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


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
