"""Convolution: a 3x3 'SAME' convolution over an NHWC image with a bias and relu, f32.

56x56x64 -> 64 channels is a ResNet stage's inner convolution: about 0.23 GFLOP
a call, compute-bound when done as a matrix product over the 3x3x64 patch of
each output pixel. numpy's reference sums the nine shifted matmuls.
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
