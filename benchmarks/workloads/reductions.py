"""Reductions over a 2-D f32 matrix: column sums, row sums and a row softmax.

Sum over axis 0 (strided across rows) and axis 1 (contiguous rows) stress the
two reduction layouts; the softmax (max, subtract, exp, sum, divide per row)
needs two reductions feeding elementwise work, the usual fusion test.
"""
import numpy as np

from .base import Size, Workload

SIZES = (Size("1024x1024", {"shape": (1024, 1024)}), Size("4096x4096", {"shape": (4096, 4096)}))
QUICK = (Size("8x16", {"shape": (8, 16)}),)


def make_uniform(p, rng):
    return (rng.random(p["shape"], dtype=np.float32),)


def make_normal(p, rng):
    return (rng.standard_normal(p["shape"], dtype=np.float32) * np.float32(3.0),)


def sum_axis0(ops, x):
    return (ops.np.sum(x, axis=0),)


def sum_axis1(ops, x):
    return (ops.np.sum(x, axis=1),)


def softmax(ops, x):
    xnp = ops.np
    e = xnp.exp(x - xnp.max(x, axis=1, keepdims=True))
    return (e / xnp.sum(e, axis=1, keepdims=True),)


WORKLOADS = [
    Workload("sum_axis0", "sum(x, axis=0) on f32 [0,1) values", make_uniform, sum_axis0, SIZES, QUICK,
             tolerance=1e-5),
    Workload("sum_axis1", "sum(x, axis=1) on f32 [0,1) values", make_uniform, sum_axis1, SIZES, QUICK,
             tolerance=1e-5),
    Workload("softmax", "row softmax: exp(x - max(x,1)) / sum(exp(...),1) on f32", make_normal, softmax,
             SIZES, QUICK, tolerance=1e-5),
]
