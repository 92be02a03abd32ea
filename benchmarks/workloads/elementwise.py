"""Elementwise chain: tanh(x * a + b) * c over a long f32 vector.

One pass over memory with a transcendental per element: a fused compiler
reads x once and writes once, where numpy makes a temporary per operation.
a, b and c are 0-d f32 arguments (not constants) so nothing folds away.
"""
import numpy as np

from .base import Size, Workload


def make_inputs(p, rng):
    x = rng.standard_normal(p["n"], dtype=np.float32)
    return x, np.float32(0.75), np.float32(-0.25), np.float32(1.5)


def fn(ops, x, a, b, c):
    return (ops.np.tanh(x * a + b) * c,)


WORKLOADS = [
    Workload(
        name="elementwise",
        description="tanh(x*a+b)*c on an f32 vector (a, b, c: 0-d f32 arguments)",
        make_inputs=make_inputs,
        fn=fn,
        sizes=(Size("1M", {"n": 1_000_000}), Size("10M", {"n": 10_000_000})),
        quick_sizes=(Size("1K", {"n": 1000}),),
        tolerance=1e-5,
    )
]
