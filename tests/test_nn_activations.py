"""jax.nn's activations that kiln.nn gained (elu, celu, selu, leaky_relu, glu, hard_*, soft_sign, squareplus,
sparse_*, mish, log1mexp, logmeanexp, identity, tanh): values and dtypes against numpy references of JAX's
formulas, eagerly, under jit and through kiln-run; gradients against float64 central differences."""
import math

import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(x, 0)


REFERENCES = {
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "celu": lambda x: np.maximum(x, 0) + np.expm1(np.minimum(x, 0)),
    "selu": lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0))),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "hard_tanh": lambda x: np.clip(x, -1, 1),
    "hard_sigmoid": lambda x: np.clip(x + 3, 0, 6) / 6,
    "hard_silu": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "hard_swish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
    "soft_sign": lambda x: x / (np.abs(x) + 1),
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "sparse_plus": lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4)),
    "sparse_sigmoid": lambda x: np.clip(x + 1, 0, 2) / 2,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "tanh": np.tanh,
    "identity": lambda x: x,
}
X64 = np.array([-30.0, -3.0, -1.5, -1.0, -0.25, 0.0, 0.3, 1.0, 2.5, 30.0])


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_values_float64_and_float32(name):
    fn, ref = getattr(nn, name), REFERENCES[name]
    eager_and_jit(fn, ref, X64)
    x32 = X64.astype(np.float32)
    eager_and_jit(fn, lambda x: ref(x.astype(np.float64)).astype(np.float32), x32, tol=3e-6)


@pytest.mark.parametrize("name", ["elu", "selu", "mish", "hard_silu", "squareplus"])
def test_half_types_compute_in_float32(name):
    fn, ref = getattr(nn, name), REFERENCES[name]
    for dtype in (np.float16, ml_dtypes.bfloat16):
        x = X64[1:-1].astype(dtype)
        eager_and_jit(fn, lambda v: ref(v.astype(np.float64)).astype(dtype), x)


def test_integer_input_gives_float32():
    x = np.arange(-3, 4, dtype=np.int32)
    eager_and_jit(nn.elu, lambda v: REFERENCES["elu"](v.astype(np.float64)).astype(np.float32), x)
    eager_and_jit(nn.hard_tanh, lambda v: np.clip(v, -1, 1).astype(np.float32), x)


def test_parameters():
    x = X64
    eager_and_jit(lambda v: nn.elu(v, 0.5), lambda v: np.where(v > 0, v, 0.5 * np.expm1(np.minimum(v, 0))), x)
    eager_and_jit(lambda v: nn.celu(v, 2.0), lambda v: np.maximum(v, 0) + 2 * np.expm1(np.minimum(v, 0) / 2), x)
    eager_and_jit(lambda v: nn.leaky_relu(v, negative_slope=0.2), lambda v: np.where(v >= 0, v, 0.2 * v), x)
    eager_and_jit(lambda v: nn.squareplus(v, b=1), lambda v: (v + np.sqrt(v * v + 1)) / 2, x)
    x32 = x.astype(np.float32)
    eager_and_jit(lambda v: nn.leaky_relu(v, 0.2), lambda v: np.where(v >= 0, v, np.float32(0.2) * v), x32)


def test_glu():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 6))
    eager_and_jit(nn.glu, lambda v: v[:, :3] * _sigmoid(v[:, 3:]), x)
    eager_and_jit(lambda v: nn.glu(v, axis=0), lambda v: v[:1] * _sigmoid(v[1:2]), x[:2])
    with pytest.raises(ValueError, match="glu: the size 5 of axis -1 must be even"):
        nn.glu(np.ones((2, 5)))
    with pytest.raises(ValueError, match="glu: axis 2 is out of bounds for an array of 2 dimensions"):
        nn.glu(np.ones((2, 4)), axis=2)


def test_log1mexp_and_logmeanexp():
    x = np.array([1e-8, 1e-3, 0.5, math.log(2.0), 1.0, 5.0, 40.0])
    want = np.array([math.log(-math.expm1(-v)) for v in x])
    eager_and_jit(nn.log1mexp, lambda v: want, x)
    rng = np.random.default_rng(1)
    m = rng.standard_normal((3, 4)) * 10

    def lme(v, axis=None, keepdims=False):
        top = np.max(v, axis=axis, keepdims=True)
        out = np.log(np.mean(np.exp(v - top), axis=axis, keepdims=True)) + top
        return out if keepdims else np.squeeze(out, axis=axis)

    eager_and_jit(nn.logmeanexp, lme, m)
    eager_and_jit(lambda v: nn.logmeanexp(v, axis=1, keepdims=True), lambda v: lme(v, 1, True), m)
    eager_and_jit(lambda v: nn.logmeanexp(v, axis=0), lambda v: lme(v, 0).astype(np.float32), m.astype(np.float32),
                  tol=1e-5)
    with pytest.raises(ValueError, match="logmeanexp: the `where` mask is not supported"):
        nn.logmeanexp(m, where=m > 0)


@pytest.mark.parametrize("name", ["elu", "celu", "selu", "leaky_relu", "soft_sign", "squareplus", "sparse_plus",
                                  "mish", "hard_silu", "log1mexp"])
def test_gradients_match_central_differences(name):
    fn = getattr(nn, name)
    x = np.array([0.2, 0.7, 1.6, 3.0]) if name == "log1mexp" else np.array([-2.3, -0.6, 0.4, 1.7])
    g = kiln.grad(lambda v: knp.sum(fn(v)))(x)
    want = numerical_grad(lambda v: np.sum(np.asarray(fn(v))), x)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)
    gj = kiln.jit(kiln.grad(lambda v: knp.sum(fn(v))))(x)
    np.testing.assert_allclose(gj, want, rtol=1e-6, atol=1e-8)


def test_glu_gradient():
    x = np.array([[0.3, -1.2, 0.8, 2.0]])
    g = kiln.grad(lambda v: knp.sum(nn.glu(v)))(x)
    np.testing.assert_allclose(g, numerical_grad(lambda v: np.sum(np.asarray(nn.glu(v))), x), rtol=1e-6)


def test_exported_through_kiln_run(tmp_path):
    x = X64.astype(np.float32)

    def several(v):
        return nn.elu(v), nn.selu(v), nn.leaky_relu(v), nn.hard_tanh(v), nn.mish(v), nn.glu(v)

    def reference(v):
        w = v.astype(np.float64)
        outs = [REFERENCES[n](w) for n in ("elu", "selu", "leaky_relu", "hard_tanh", "mish")]
        outs.append(w[:5] * _sigmoid(w[5:]))
        return [o.astype(np.float32) for o in outs]

    eager_jit_and_kiln_run(several, reference, x, tmp_path=tmp_path, tol=3e-6)


def test_vmap():
    x = np.random.default_rng(2).standard_normal((3, 4))
    got = kiln.vmap(nn.glu)(x)
    check_like_numpy(got, x[:, :2] * _sigmoid(x[:, 2:]))
