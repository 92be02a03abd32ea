"""Whole-program checks of fusion changes: gradients of small losses compiled with kiln.jit equal the
eager ones. (A row-fusion change that pulled the elementwise producer of a reduction into a row-fused
kernel gave garbage gradients for a linear regression's bias: reverted, and this guards it.)"""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp

RNG = np.random.default_rng(0)
X = RNG.standard_normal((64, 3)).astype(np.float32)
Y = X @ np.array([1.0, -2.0, 0.5], np.float32) + np.float32(0.3)


def mse(p, x, y):
    return knp.mean((x @ p["w"] + p["b"] - y) ** 2)


def softmax_xent(p, x, y):
    logits = x @ p["w"][:, None] * np.ones((1, 4), np.float32) + p["b"]
    e = knp.exp(logits - knp.max(logits, axis=-1, keepdims=True))
    return -knp.mean(knp.log(e / knp.sum(e, axis=-1, keepdims=True))[:, 0] * y)


@pytest.mark.parametrize("loss", [mse, softmax_xent])
def test_jit_gradients_equal_eager_ones(loss):
    params = {"w": np.array([0.1, -0.2, 0.3], np.float32), "b": np.float32(0.05)}
    value, grads = kiln.jit(kiln.value_and_grad(loss))(params, X, Y)
    with kiln.disable_jit():
        want_value, want = kiln.value_and_grad(loss)(params, X, Y)
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    for k in params:
        np.testing.assert_allclose(grads[k], want[k], rtol=1e-4, atol=1e-6, err_msg=k)
    # and against the closed form for the regression
    if loss is mse:
        r = X @ params["w"] + params["b"] - Y
        np.testing.assert_allclose(grads["b"], 2 * r.mean(), rtol=1e-4)
        np.testing.assert_allclose(grads["w"], 2 * X.T @ r / len(r), rtol=1e-4, atol=1e-6)
