"""kiln.numpy: numpy's API over kiln arrays; works eagerly, under kiln.jit, and in Programs."""
from numpy import bool_, float16, float32, float64, int8, int16, int32, int64, uint8, dtype, pi, e, inf, nan, newaxis

from . import _methods
from .creation import array, asarray, full, full_like, ones, ones_like, zeros, zeros_like
from .elementwise import (
    abs, absolute, add, astype, divide, equal, exp, floor_divide, mod, remainder, greater, greater_equal, less, less_equal, log,
    maximum, minimum, multiply, negative, not_equal, power, sqrt, subtract, tanh, true_divide, where,
)
from .linalg import dot, matmul
from .reductions import amax, amin, max, mean, min, sum
from .shape import broadcast_to, expand_dims, reshape, squeeze, stack, transpose

_methods.install()
