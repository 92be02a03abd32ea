"""Reductions over a 2-D f32 matrix: column sums, row sums, a row softmax, a layer norm and a row logsumexp.

Sum over axis 0 (strided across rows) and axis 1 (contiguous rows) stress the
two reduction layouts; the softmax (max, subtract, exp, sum, divide per row)
needs two reductions feeding elementwise work, the usual fusion test; the
layer norm (mean, variance, normalize, scale and shift per row) is the other
row-fused reduction of every transformer; logsumexp (max, then the sum of exp(x - max)) reads the
rows and writes one value per row: a row-fused kernel bound by its reads.
"""
import numpy as np

from .base import Size, Workload

SIZES = (Size("1024x1024", {"shape": (1024, 1024)}), Size("4096x4096", {"shape": (4096, 4096)}))
ROW_SIZES = (Size("1024x4096", {"shape": (1024, 4096)}), Size("4096x4096", {"shape": (4096, 4096)}))
EPSILON = 1e-5
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


def logsumexp(ops, x):
    xnp = ops.np
    m = xnp.max(x, axis=1, keepdims=True)
    return ((m + xnp.log(xnp.sum(xnp.exp(x - m), axis=1, keepdims=True)))[:, 0],)


def make_layernorm(p, rng):
    (x,) = make_normal(p, rng)
    n = p["shape"][-1]
    return x, rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)


def layernorm(ops, x, gamma, beta):
    xnp = ops.np
    mean = xnp.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    var = xnp.mean(centered * centered, axis=-1, keepdims=True)
    return (centered / xnp.sqrt(var + EPSILON) * gamma + beta,)


def _matrix_bytes(p) -> int:
    rows, cols = p["shape"]
    return 4 * rows * cols


WORKLOADS = [
    Workload("sum_axis0", "sum(x, axis=0) on f32 [0,1) values", make_uniform, sum_axis0, SIZES, QUICK,
             tolerance=1e-5, bytes_moved=lambda p: _matrix_bytes(p) + 4 * p["shape"][1]),
    Workload("sum_axis1", "sum(x, axis=1) on f32 [0,1) values", make_uniform, sum_axis1, SIZES, QUICK,
             tolerance=1e-5, bytes_moved=lambda p: _matrix_bytes(p) + 4 * p["shape"][0]),
    Workload("softmax", "row softmax: exp(x - max(x,1)) / sum(exp(...),1) on f32", make_normal, softmax,
             ROW_SIZES, QUICK, tolerance=1e-5, bytes_moved=lambda p: 2 * _matrix_bytes(p)),
    Workload("logsumexp", "row logsumexp: max(x,1) + log(sum(exp(x - max),1)) on f32", make_normal, logsumexp,
             ROW_SIZES, QUICK, tolerance=1e-5, bytes_moved=lambda p: _matrix_bytes(p) + 4 * p["shape"][0]),
    Workload("layernorm", "row layer norm (mean, variance, scale, shift) on f32", make_layernorm, layernorm,
             ROW_SIZES, QUICK, tolerance=1e-4,
             bytes_moved=lambda p: 2 * _matrix_bytes(p) + 2 * 4 * p["shape"][1]),  # x, result; gamma, beta
]
