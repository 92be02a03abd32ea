"""A residual MLP training step: layer norm, GELU and reverse mode through many identical layers.

Each layer is ``h + gelu(layernorm(h) @ w + b)`` (the layer norm with a learned scale and shift,
GELU in its tanh form, JAX's default); the step is ``value_and_grad`` of the mean squared error
and an SGD update. The same ``loss`` is what benchmarks/export_time.py exports at 6 to 48
layers (its ``residual_mlp_program``). numpy's version of the step is the backpropagation written
out by hand (``train_numpy``, in float32 like the other systems), the reference every
system's loss and gradients are checked against.
"""
import math

import numpy as np

from .base import Size, Workload

LEARNING_RATE = 0.1
EPSILON = 1e-5
FIELDS = ("w", "b", "scale", "shift")  # the parameters of one layer, in input order
_K = math.sqrt(2.0 / math.pi)


def layer_params(flat) -> list[dict]:
    """(w0, b0, scale0, shift0, w1, ...) -> [{"w": w0, "b": b0, "scale": ..., "shift": ...}, ...]."""
    return [dict(zip(FIELDS, flat[i:i + len(FIELDS)])) for i in range(0, len(flat), len(FIELDS))]


def loss(xnp, gelu, params, x, y):
    """The mean squared error of the residual MLP: xnp is the array module, gelu its tanh GELU."""
    h = x
    for p in params:
        mean = xnp.mean(h, axis=-1, keepdims=True)
        var = xnp.mean((h - mean) ** 2, axis=-1, keepdims=True)
        z = (h - mean) / xnp.sqrt(var + EPSILON) * p["scale"] + p["shift"]
        h = h + gelu(z @ p["w"] + p["b"])
    return xnp.mean((h - y) ** 2)


def make_inputs(p, rng):
    width, batch = p["width"], p["batch"]
    flat = []
    for _ in range(p["layers"]):
        flat += [rng.standard_normal((width, width), dtype=np.float32) / np.float32(math.sqrt(width)),
                 rng.standard_normal(width, dtype=np.float32) * np.float32(0.1),
                 np.float32(1.0) + rng.standard_normal(width, dtype=np.float32) * np.float32(0.1),
                 rng.standard_normal(width, dtype=np.float32) * np.float32(0.1)]
    x = rng.standard_normal((batch, width), dtype=np.float32)
    y = rng.standard_normal((batch, width), dtype=np.float32)
    return (*flat, x, y)


def train_fn(ops, *inputs):
    *flat, x, y = inputs
    params = layer_params(flat)
    value, grads = ops.value_and_grad(lambda params, x, y: loss(ops.np, ops.gelu, params, x, y))(params, x, y)
    return (value, *(p[f] - LEARNING_RATE * g[f] for p, g in zip(params, grads) for f in FIELDS))


def _gelu(a):
    t = np.tanh(a.dtype.type(_K) * (a + a.dtype.type(0.044715) * a * a * a))
    return a.dtype.type(0.5) * a * (1 + t), t


def train_numpy(*inputs):
    """The step with the backward pass written out, in the inputs' precision (float32 for the
    benchmark, as the other systems compute; the test of it against central differences uses float64)."""
    dtype = np.result_type(*inputs)
    *flat, x, y = (np.asarray(a, dtype) for a in inputs)
    params = layer_params(flat)
    h, saved = x, []
    for p in params:
        centered = h - h.mean(axis=-1, keepdims=True)
        rstd = 1.0 / np.sqrt((centered ** 2).mean(axis=-1, keepdims=True) + EPSILON)
        n = centered * rstd
        z = n * p["scale"] + p["shift"]
        a = z @ p["w"] + p["b"]
        g, t = _gelu(a)
        saved.append((n, rstd, z, a, t))
        h = h + g
    diff = h - y
    value = np.mean(diff ** 2)
    dh = 2.0 * diff / diff.size
    grads = []
    for p, (n, rstd, z, a, t) in zip(reversed(params), reversed(saved)):
        da = dh * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * _K * (1 + 3 * 0.044715 * a * a)).astype(dh.dtype)
        dz = da @ p["w"].T
        dn = dz * p["scale"]
        dh = dh + rstd * (dn - dn.mean(axis=-1, keepdims=True) - n * (dn * n).mean(axis=-1, keepdims=True))
        grads.append({"w": z.T @ da, "b": da.sum(axis=0), "scale": (dz * n).sum(axis=0), "shift": dz.sum(axis=0)})
    grads.reverse()
    rate = dtype.type(LEARNING_RATE)
    return (dtype.type(value), *(np.asarray(p[f] - rate * g[f], dtype) for p, g in zip(params, grads) for f in FIELDS))


def compare_view(inputs, outputs):
    """(loss, gradients): the update divided back out, so gradient errors are not hidden under the
    scale of the parameters."""
    value, *new = outputs
    old = inputs[:len(new)]
    return (np.asarray(value),
            *((np.asarray(p, np.float64) - np.asarray(q, np.float64)) / LEARNING_RATE for p, q in zip(old, new)))


WORKLOADS = [
    Workload("residual_mlp_train", "value_and_grad of a residual MLP (layernorm, gelu) + SGD update",
             make_inputs, train_fn,
             (Size("L6-w128-b64", {"layers": 6, "width": 128, "batch": 64}),
              Size("L24-w128-b64", {"layers": 24, "width": 128, "batch": 64})),
             (Size("L3-w16-b8", {"layers": 3, "width": 16, "batch": 8}),),
             tolerance=1e-4, numpy_fn=train_numpy, needs=("grad",), compare_view=compare_view),
]
