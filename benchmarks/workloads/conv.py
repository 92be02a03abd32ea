"""Convolution: a 3x3 'SAME' convolution over an NHWC image with a bias and relu, f32; and max pooling.

56x56x64 -> 64 channels is a ResNet stage's inner convolution: about 0.23 GFLOP
a call, compute-bound when done as a matrix product over the 3x3x64 patch of
each output pixel. numpy's reference sums the nine shifted matmuls.

Max pooling 3x3, stride 2, 'SAME' over a 128x28x28x32 NHWC batch (a small CNN's
first pooling) and its gradient (the cotangent shared among each window's
maxima; random inputs have no ties, so every system picks the same position).
numpy's references take the nine shifted strided slices.
"""
import numpy as np

from .base import Size, Workload


def make_inputs(p, rng):
    n, h, w, c = p["image"]
    k = p["out"]
    x = rng.standard_normal((n, h, w, c), dtype=np.float32)
    kernel = rng.standard_normal((3, 3, c, k), dtype=np.float32) / np.float32(np.sqrt(9 * c))
    bias = rng.standard_normal(k, dtype=np.float32) * np.float32(0.1)
    return x, kernel, bias


def conv_relu(ops, x, kernel, bias):
    y = ops.lax.conv_general_dilated(x, kernel, window_strides=(1, 1), padding="SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return (ops.np.maximum(y + bias, 0.0),)


def conv_relu_numpy(x, kernel, bias):
    n, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    y = np.zeros((n, h, w, kernel.shape[-1]), np.float32)
    for i in range(3):
        for j in range(3):
            y += padded[:, i:i + h, j:j + w, :] @ kernel[i, j]
    return (np.maximum(y + bias, np.float32(0.0)),)


WORKLOADS = [
    Workload("conv_nhwc", "3x3 SAME conv + bias + relu, NHWC/HWIO f32", make_inputs, conv_relu,
             (Size("1x56x56x64", {"image": (1, 56, 56, 64), "out": 64}),),
             (Size("1x6x5x3", {"image": (1, 6, 5, 3), "out": 4}),), tolerance=1e-4,
             numpy_fn=conv_relu_numpy, needs=("lax",)),
]


POOL = dict(window=(1, 3, 3, 1), strides=(1, 2, 2, 1))


def make_pool_inputs(p, rng):
    n, h, w, c = p["image"]
    return (rng.standard_normal((n, h, w, c), dtype=np.float32),)


def make_pool_grad_inputs(p, rng):
    """The operand and the cotangent of the pooled result."""
    (x,) = make_pool_inputs(p, rng)
    n, h, w, c = x.shape
    return x, rng.standard_normal((n, -(-h // 2), -(-w // 2), c), dtype=np.float32)


def _pool(ops, x):
    return ops.lax.reduce_window(x, -np.inf, ops.lax.max, POOL["window"], POOL["strides"], "SAME")


def max_pool(ops, x):  # one argument: an unused one is dropped by jax.export, so IREE's function has none for it
    return (_pool(ops, x),)


def max_pool_grad(ops, x, ct):
    _, g = ops.value_and_grad(lambda v: ops.np.sum(_pool(ops, v) * ct))(x)
    return (g,)


def _pool_taps_numpy(x):
    """The padded operand (-inf: SAME pads one row/column after for even sizes) and the nine strided views."""
    n, h, w, c = x.shape
    oh, ow = -(-h // 2), -(-w // 2)
    ph, pw = max((oh - 1) * 2 + 3 - h, 0), max((ow - 1) * 2 + 3 - w, 0)
    padded = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)), constant_values=-np.inf)
    taps = [(i, j, padded[:, i:i + 2 * oh - 1:2, j:j + 2 * ow - 1:2, :]) for i in range(3) for j in range(3)]
    return padded, taps, (ph // 2, pw // 2)


def max_pool_numpy(x):
    _, taps, _ = _pool_taps_numpy(x)
    return (np.maximum.reduce([t for _, _, t in taps]),)


def max_pool_grad_numpy(x, ct):
    padded, taps, (top, left) = _pool_taps_numpy(x)
    m = np.maximum.reduce([t for _, _, t in taps])
    hits = [t == m for _, _, t in taps]
    share = ct / np.sum(hits, axis=0)
    g = np.zeros(padded.shape, np.float32)
    oh, ow = m.shape[1:3]
    for (i, j, _), hit in zip(taps, hits):
        g[:, i:i + 2 * oh - 1:2, j:j + 2 * ow - 1:2, :] += np.where(hit, share, np.float32(0.0))
    n, h, w, c = x.shape
    return (g[:, top:top + h, left:left + w, :],)


POOL_SIZES = (Size("128x28x28x32", {"image": (128, 28, 28, 32)}),)
POOL_QUICK = (Size("2x7x6x10", {"image": (2, 7, 6, 10)}),)

WORKLOADS += [
    Workload("maxpool_nhwc", "3x3/2 SAME max pooling, NHWC f32", make_pool_inputs, max_pool, POOL_SIZES, POOL_QUICK,
             tolerance=1e-6, numpy_fn=max_pool_numpy, needs=("lax",)),
    Workload("maxpool_grad_nhwc", "gradient of 3x3/2 SAME max pooling, NHWC f32", make_pool_grad_inputs, max_pool_grad,
             POOL_SIZES, POOL_QUICK, tolerance=1e-5, numpy_fn=max_pool_grad_numpy, needs=("lax", "grad")),
]
