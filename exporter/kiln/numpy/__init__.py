"""kiln.numpy: numpy's API over kiln arrays; works eagerly, under kiln.jit, and in Programs."""
from numpy import bool_, float16, float32, float64, int8, int16, int32, int64, uint8, dtype, pi, e, inf, nan, newaxis

from . import _methods
from .creation import (
    arange, array, asarray, empty, empty_like, eye, full, full_like, identity, linspace, ones, ones_like, zeros,
    zeros_like,
)
from .elementwise import (
    abs, absolute, add, astype, divide, equal, exp, floor_divide, mod, remainder, greater, greater_equal, less, less_equal, log,
    maximum, minimum, multiply, negative, not_equal, power, sqrt, subtract, tanh, true_divide, where,
)
from .math import (  # noqa: E402  (float floor_divide/remainder replace the integer-only ones)
    arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, around, bitwise_and, bitwise_not, bitwise_or, bitwise_xor,
    ceil, clip, cos, cosh, erf, exp2, expm1, float_power, floor, floor_divide, fmax, fmin, fmod, invert, isfinite, isinf,
    isnan, left_shift, log10, log1p, log2, logical_and, logical_not, logical_or, logical_xor, mod, nan_to_num,
    reciprocal, remainder, right_shift, rint, round, round_, rsqrt, sign, sin, sinh, square, tan, trunc,
)
from .linalg import diag, diagonal, dot, einsum, inner, matmul, outer, tensordot, trace, vdot
from .reductions import (
    all, amax, amin, any, argmax, argmin, cumprod, cumsum, max, mean, min, prod, std, sum, var,
)
from .shape import (
    array_split, atleast_1d, atleast_2d, broadcast_to, concatenate, expand_dims, flip, fliplr, flipud, hstack,
    moveaxis, pad, ravel, repeat, reshape, roll, split, squeeze, stack, swapaxes, tile, transpose, tril, triu, vstack,
)
from .indexing import IndexingError, argsort, at, sort, take, take_along_axis

_methods.install()
