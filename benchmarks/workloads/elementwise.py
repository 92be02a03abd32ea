"""Elementwise chain: tanh(x * a + b) * c + x over a long f32 vector.

One pass over memory with a transcendental per element: a fused compiler
reads x once and writes once, where numpy makes a temporary per operation.
a, b and c are 0-d f32 arguments (not constants) so nothing folds away. At
16M elements (64 MB) a fresh output per call shows as page faults per call.
"""
import numpy as np

from .base import Size, Workload


def make_inputs(p, rng):
    x = rng.standard_normal(p["n"], dtype=np.float32)
    return x, np.float32(0.75), np.float32(-0.25), np.float32(1.5)


def fn(ops, x, a, b, c):
    return (ops.np.tanh(x * a + b) * c + x,)


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
    )
]
