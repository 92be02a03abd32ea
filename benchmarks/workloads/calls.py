"""The cost of a call itself (issue 9 §2): a tiny function, where the time is the per-call overhead
of kiln.jit / jax.jit (argument conversion, dispatch, result wrapping), and the sum of a 64 MB
vector, where a call that copies its argument or result would cost a multiple of the kernel's
memory traffic."""
import numpy as np

from .base import Size, Workload


def make_small(p, rng):
    return (rng.standard_normal(p["n"], dtype=np.float32), rng.standard_normal(p["n"], dtype=np.float32))


def add_scaled(ops, x, y):
    return (x + 2.0 * y,)


def make_large(p, rng):
    return (rng.random(p["n"], dtype=np.float32),)


def total(ops, x):
    return (ops.np.sum(x),)


WORKLOADS = [
    Workload("call_overhead", "x + 2*y on 4-element f32 vectors: the per-call overhead", make_small, add_scaled,
             (Size("4", {"n": 4}),), (Size("4", {"n": 4}),), tolerance=1e-6),
    Workload("sum_64mb", "sum of a 64 MB f32 vector: a call that copies its argument shows here", make_large, total,
             (Size("64MB", {"n": 16 * 1024 * 1024}),), (Size("4K", {"n": 1024}),), tolerance=1e-4,
             bytes_moved=lambda p: 4 * p["n"] + 4),
]
