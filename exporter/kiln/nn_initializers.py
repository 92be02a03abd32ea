"""kiln.nn.initializers: jax.nn.initializers over kiln.random (the same draws as JAX for the same key).

    init = kiln.nn.initializers.glorot_normal()
    w = init(kiln.random.key(0), (784, 128), np.float32)

Each factory returns an initializer `init(key, shape, dtype=None)`; dtype defaults to float32 (JAX's default
float).
"""
from __future__ import annotations

import math
from typing import Protocol

import numpy as np

from . import numpy as knp
from . import random
from .core import dtypes

__all__ = [
    "Initializer", "zeros", "ones", "constant", "uniform", "normal", "truncated_normal", "variance_scaling",
    "glorot_uniform", "glorot_normal", "xavier_uniform", "xavier_normal", "lecun_uniform", "lecun_normal",
    "he_uniform", "he_normal", "kaiming_uniform", "kaiming_normal", "orthogonal",
    "delta_orthogonal",
]

# the standard deviation of a standard normal truncated to (-2, 2)
_TRUNCATED_STDDEV = 0.87962566103423978


class Initializer(Protocol):
    """What the factories return: init(key, shape, dtype=None) -> an array of that shape and dtype."""

    def __call__(self, key, shape, dtype=None):
        ...


def _float_dtype(dtype, where: str) -> np.dtype:
    dtype = np.dtype(np.float32) if dtype is None else dtypes.canonical(dtype)
    if not dtypes.is_float(dtype):
        raise TypeError(f"{where}: dtype must be floating-point; got {dtype}")
    return dtype


def _shape(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def zeros(key, shape, dtype=None):
    """Zeros of shape and dtype (float32 by default); the key is not used."""
    return knp.zeros(_shape(shape), np.float32 if dtype is None else dtype)


def ones(key, shape, dtype=None):
    """Ones of shape and dtype (float32 by default); the key is not used."""
    return knp.ones(_shape(shape), np.float32 if dtype is None else dtype)


def constant(value, dtype=None):
    """An initializer filling with `value`."""

    def init(key, shape, dtype=dtype):
        return knp.full(_shape(shape), value, np.float32 if dtype is None else dtype)

    return init


def uniform(scale=1e-2, dtype=None):
    """An initializer drawing uniformly from [0, scale)."""

    def init(key, shape, dtype=dtype):
        dtype = _float_dtype(dtype, "uniform initializer")
        return knp.multiply(random.uniform(key, _shape(shape), dtype), np.asarray(scale, dtype))

    return init


def normal(stddev=1e-2, dtype=None):
    """An initializer drawing from a normal distribution of mean 0 and standard deviation stddev."""

    def init(key, shape, dtype=dtype):
        dtype = _float_dtype(dtype, "normal initializer")
        return knp.multiply(random.normal(key, _shape(shape), dtype), np.asarray(stddev, dtype))

    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer drawing stddev x a standard normal truncated to (lower, upper) (no variance correction)."""

    def init(key, shape, dtype=dtype):
        dtype = _float_dtype(dtype, "truncated_normal initializer")
        draws = random.truncated_normal(key, lower, upper, _shape(shape), dtype)
        return knp.multiply(draws, np.asarray(stddev, dtype))

    return init


def _size(shape, axes) -> int:
    return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)


def _fans(shape, in_axis, out_axis, batch_axis) -> tuple[float, float]:
    """(fan_in, fan_out): the in and out sizes times the receptive field (the axes in none of the three)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"variance_scaling: can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with the default in_axis; it must be at least 2-D or give in_axis")
    in_size, out_size, batch_size = _size(shape, in_axis), _size(shape, out_axis), _size(shape, batch_axis)
    receptive_field = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field, out_size * receptive_field


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def variance_scaling(scale, mode: str, distribution: str, in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """An initializer whose draws have variance scale / n, n the fan_in, fan_out, their mean (fan_avg) or
    geometric mean (fan_geo_avg); drawn from a truncated normal (rescaled to that variance), a normal or a
    uniform distribution. Axes other than in_axis, out_axis and batch_axis are a convolution's receptive field."""
    if mode not in _MODES:
        raise ValueError(f"variance_scaling: invalid mode {mode!r}; expected one of {list(_MODES)}")
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"variance_scaling: invalid distribution {distribution!r}; expected one of "
                         f"{list(_DISTRIBUTIONS)}")

    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        dtype = _float_dtype(dtype, "variance_scaling initializer")
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = np.asarray(scale / denominator, dtype)
        if distribution == "truncated_normal":
            stddev = knp.divide(knp.sqrt(variance), np.asarray(_TRUNCATED_STDDEV, dtype))
            return knp.multiply(random.truncated_normal(key, -2, 2, shape, dtype), stddev)
        if distribution == "normal":
            return knp.multiply(random.normal(key, shape, dtype), knp.sqrt(variance))
        return knp.multiply(random.uniform(key, shape, dtype, -1), knp.sqrt(knp.multiply(variance, 3)))

    return init


def _named(scale, mode, distribution, doc):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                                batch_axis=batch_axis, dtype=dtype)

    factory.__doc__ = doc
    return factory


glorot_uniform = _named(1.0, "fan_avg", "uniform", "variance_scaling(1.0, 'fan_avg', 'uniform') (Glorot & Bengio).")
glorot_normal = _named(1.0, "fan_avg", "truncated_normal",
                       "variance_scaling(1.0, 'fan_avg', 'truncated_normal') (Glorot & Bengio).")
lecun_uniform = _named(1.0, "fan_in", "uniform", "variance_scaling(1.0, 'fan_in', 'uniform') (LeCun).")
lecun_normal = _named(1.0, "fan_in", "truncated_normal", "variance_scaling(1.0, 'fan_in', 'truncated_normal') (LeCun).")
he_uniform = _named(2.0, "fan_in", "uniform", "variance_scaling(2.0, 'fan_in', 'uniform') (He et al.).")
he_normal = _named(2.0, "fan_in", "truncated_normal", "variance_scaling(2.0, 'fan_in', 'truncated_normal') (He et al.).")
for _factory, _name in ((glorot_uniform, "glorot_uniform"), (glorot_normal, "glorot_normal"),
                        (lecun_uniform, "lecun_uniform"), (lecun_normal, "lecun_normal"),
                        (he_uniform, "he_uniform"), (he_normal, "he_normal")):
    _factory.__name__ = _factory.__qualname__ = _name
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def _random_orthogonal(key, n: int, m: int, dtype):
    """An n x m matrix with orthonormal columns (n >= m) or rows, uniformly distributed (Mezzadri 2007), as
    jax.random.orthogonal: the Q of a normal matrix's QR, its columns' signs fixed by R's diagonal."""
    z = random.normal(key, (max(n, m), min(n, m)), dtype)
    work = np.float32 if dtype.itemsize == 2 else dtype  # float16/bfloat16 factorized in float32
    q, r = knp.linalg.qr(knp.astype(z, work))
    q = knp.astype(knp.multiply(q, knp.expand_dims(knp.sign(knp.linalg.diagonal(r)), -2)), dtype)
    return knp.transpose(q) if n < m else q


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of (scaled) orthogonal matrices: the shape flattened to (rows, shape[column_axis]) has
    orthonormal columns (or rows, where there are fewer rows than columns)."""

    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        dtype = _float_dtype(dtype, "orthogonal initializer")
        if len(shape) < 2:
            raise ValueError(f"orthogonal initializer requires at least a 2-D shape; got {shape}")
        if any(d == 0 for d in shape):
            return knp.zeros(shape, dtype)
        axis = column_axis % len(shape)
        n_cols = shape[axis]
        n_rows = math.prod(shape) // n_cols
        q = _random_orthogonal(key, n_rows, n_cols, dtype)
        q = knp.reshape(q, shape[:axis] + shape[axis + 1:] + (n_cols,))
        return knp.multiply(knp.moveaxis(q, -1, axis), np.asarray(scale, dtype))

    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer of 1-, 2- or 3-D convolution kernels (spatial..., in, out) that are zero except at the
    spatial centre, which holds an orthogonal (in, out) matrix (Xiao et al. 2018); needs in <= out."""

    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        dtype = _float_dtype(dtype, "delta_orthogonal initializer")
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"delta_orthogonal initializer requires a 3-D, 4-D or 5-D shape; got {shape}")
        if shape[-1] < shape[-2]:
            raise ValueError(f"delta_orthogonal initializer: fan_in {shape[-2]} must be less than or equal to "
                             f"fan_out {shape[-1]}")
        centre = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)(key, shape[-2:])
        spatial = shape[:-2]
        one_hot = np.zeros(spatial, dtype)
        one_hot[tuple((k - 1) // 2 for k in spatial)] = 1
        return knp.multiply(one_hot.reshape(spatial + (1, 1)), centre)

    return init
