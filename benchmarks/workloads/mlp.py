"""A 3-layer MLP (784-512-512-10, f32): forward pass and one SGD training step.

The forward pass is three dense layers (tanh, then relu written as
maximum(z, 0)): matmuls with fused bias and activation epilogues. The
training step takes value_and_grad of a mean-squared-error loss through the
same network and applies an SGD update, so it measures kiln's reverse mode
compiled through kiln.jit (transposed matmuls, reductions for the biases).
numpy's version of the step is backpropagation written by hand.
"""
import numpy as np

from .base import Size, Workload

LEARNING_RATE = 0.1


def make_params(p, rng):
    dims = p["dims"]
    params = []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        params.append(rng.standard_normal((fan_in, fan_out), dtype=np.float32) / np.float32(np.sqrt(fan_in)))
        params.append(rng.standard_normal(fan_out, dtype=np.float32) * np.float32(0.1))
    return params


def make_forward_inputs(p, rng):
    params = make_params(p, rng)
    x = rng.standard_normal((p["batch"], p["dims"][0]), dtype=np.float32)
    return (*params, x)


def make_train_inputs(p, rng):
    *params, x = make_forward_inputs(p, rng)
    y = rng.standard_normal((p["batch"], p["dims"][-1]), dtype=np.float32)
    return (*params, x, y)


def forward(xnp, params, x):
    w1, b1, w2, b2, w3, b3 = params
    h1 = xnp.tanh(x @ w1 + b1)
    h2 = xnp.maximum(h1 @ w2 + b2, 0.0)
    return h2 @ w3 + b3


def forward_fn(ops, w1, b1, w2, b2, w3, b3, x):
    return (forward(ops.np, (w1, b1, w2, b2, w3, b3), x),)


def train_fn(ops, w1, b1, w2, b2, w3, b3, x, y):
    params = (w1, b1, w2, b2, w3, b3)

    def loss(params, x, y):
        return ops.np.mean((forward(ops.np, params, x) - y) ** 2)

    value, grads = ops.value_and_grad(loss)(params, x, y)
    return (value, *(p - LEARNING_RATE * g for p, g in zip(params, grads)))


def train_numpy(w1, b1, w2, b2, w3, b3, x, y):
    """The same step with backpropagation written out in numpy (the reference)."""
    z1 = x @ w1 + b1
    h1 = np.tanh(z1)
    z2 = h1 @ w2 + b2
    h2 = np.maximum(z2, 0.0)
    out = h2 @ w3 + b3
    diff = out - y
    loss = np.mean(diff ** 2)
    d_out = (2.0 / diff.size) * diff
    g_w3, g_b3 = h2.T @ d_out, d_out.sum(axis=0)
    d_z2 = (d_out @ w3.T) * (z2 > 0)
    g_w2, g_b2 = h1.T @ d_z2, d_z2.sum(axis=0)
    d_z1 = (d_z2 @ w2.T) * (1.0 - h1 * h1)
    g_w1, g_b1 = x.T @ d_z1, d_z1.sum(axis=0)
    params = (w1, b1, w2, b2, w3, b3)
    grads = (g_w1, g_b1, g_w2, g_b2, g_w3, g_b3)
    return (np.float32(loss), *(p - np.float32(LEARNING_RATE) * g for p, g in zip(params, grads)))


def train_compare_view(inputs, outputs):
    """(loss, gradients): the update divided back out, so gradient errors are not hidden
    under the scale of the parameters."""
    loss, *new = outputs
    old = inputs[:6]
    return (np.asarray(loss),
            *((np.asarray(p, np.float64) - np.asarray(n, np.float64)) / LEARNING_RATE for p, n in zip(old, new)))


FULL = (Size("b256", {"batch": 256, "dims": (784, 512, 512, 10)}),)
INFERENCE = (Size("b1", {"batch": 1, "dims": (784, 512, 512, 10)}),
             Size("b64", {"batch": 64, "dims": (784, 512, 512, 10)}), *FULL)
TRAIN = (Size("b128", {"batch": 128, "dims": (784, 512, 512, 10)}), *FULL)
QUICK = (Size("b4-tiny", {"batch": 4, "dims": (6, 5, 5, 3)}),)

WORKLOADS = [
    Workload("mlp_forward", "MLP 784-512-512-10 forward (tanh, relu)", make_forward_inputs,
             forward_fn, INFERENCE, QUICK, tolerance=1e-4),
    Workload("mlp_train", "value_and_grad of the MLP's MSE loss + SGD update", make_train_inputs,
             train_fn, TRAIN, QUICK, tolerance=1e-4, numpy_fn=train_numpy, needs=("grad",),
             compare_view=train_compare_view),
]
