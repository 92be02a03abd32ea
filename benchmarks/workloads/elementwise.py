"""Elementwise chain: tanh(x * a + b) * c + x over a long f32 vector.

One pass over memory with a transcendental per element: a fused compiler
reads x once and writes once, where numpy makes a temporary per operation.
a, b and c are 0-d f32 arguments (not constants) so nothing folds away. At
16M elements (64 MB) a fresh output per call shows as page faults per call.

gelu: GELU in its tanh form (kiln.nn.gelu, jax.nn.gelu) over a long f32 vector of N(0, 3^2) values, so that
the left tail (where kiln keeps the error within a few ulp, docs/accuracy.md) is a fair share of the inputs.
"""
import numpy as np

from .base import Size, Workload


def make_inputs(p, rng):
    x = rng.standard_normal(p["n"], dtype=np.float32)
    return x, np.float32(0.75), np.float32(-0.25), np.float32(1.5)


def fn(ops, x, a, b, c):
    return (ops.np.tanh(x * a + b) * c + x,)


def make_gelu_inputs(p, rng):
    return (rng.standard_normal(p["n"], dtype=np.float32) * np.float32(3),)


def gelu_fn(ops, x):
    return (ops.gelu(x),)


WORKLOADS = [
    Workload(
        name="elementwise",
        description="tanh(x*a+b)*c+x on an f32 vector (a, b, c: 0-d f32 arguments)",
        make_inputs=make_inputs,
        fn=fn,
        sizes=(Size("1M", {"n": 1_000_000}), Size("16M", {"n": 16 * 1024 * 1024})),
        quick_sizes=(Size("1K", {"n": 1000}),),
        tolerance=1e-5,
        bytes_moved=lambda p: 2 * 4 * p["n"] + 3 * 4,  # read x, write the result; a, b, c
    ),
    Workload(
        name="gelu",
        description="gelu(x), tanh form, on an f32 vector of N(0, 9) values",
        make_inputs=make_gelu_inputs,
        fn=gelu_fn,
        sizes=(Size("1M", {"n": 1_000_000}), Size("16M", {"n": 16 * 1024 * 1024})),
        quick_sizes=(Size("1K", {"n": 1000}),),
        tolerance=1e-5,
        bytes_moved=lambda p: 2 * 4 * p["n"],  # read x, write the result
    ),
]
