"""kiln.numpy: numpy's API over kiln arrays; works eagerly, under kiln.jit, and in Programs.

Eagerly the functions return kiln.Array (immutable read-only numpy arrays, like jax.Array); traced
(under kiln.jit, grad, vmap, in a Program) they return traced arrays. See docs/numpy.md for where kiln differs from numpy.
"""
import numpy as np  # noqa: E402
from numpy import bool_, dtype, e, float16, float32, float64, inf, int8, int16, int32, int64, nan, newaxis, pi, uint8
from numpy import uint, uint16, uint32, uint64  # noqa: E402,F401
from numpy import complex64, complex128, complexfloating  # noqa: E402,F401
from numpy import complex128 as complex_, complex64 as csingle, complex128 as cdouble  # noqa: E402,F401  (JAX's aliases)
from numpy import generic, inexact, floating, integer, number, signedinteger, unsignedinteger  # noqa: F401

from ..core.dtypes import BFLOAT16 as _BFLOAT16, SUPPORTED as _SUPPORTED

bfloat16 = _BFLOAT16.type  # ml_dtypes.bfloat16: a storage type, computed in float32
bool = bool_  # noqa: A001  (numpy 2 and jax.numpy spell it knp.bool too)

from . import _methods  # noqa: E402
from .creation import (  # noqa: E402
    arange, array, asarray, empty, empty_like, eye, full, full_like, identity, linspace, ones, ones_like, zeros,
    zeros_like,
)
from .elementwise import (  # noqa: E402
    abs, absolute, add, astype, divide, equal, exp, floor_divide, mod, remainder, greater, greater_equal, less, less_equal, log,
    maximum, minimum, multiply, negative, not_equal, power, sqrt, subtract, tanh, true_divide, where,
)
from .math import (  # noqa: E402  (float floor_divide/remainder replace the integer-only ones)
    arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, around, bitwise_and, bitwise_not, bitwise_or, bitwise_xor,
    ceil, clip, cos, cosh, divmod, erf, exp2, expm1, fix, float_power, floor, floor_divide, fmax, fmin, fmod, invert,
    isfinite, isinf, isnan, left_shift, log10, log1p, log2, logical_and, logical_not, logical_or, logical_xor, mod,
    nan_to_num, reciprocal, remainder, right_shift, rint, round, round_, rsqrt, sign, sin, sinh, square, tan, trunc,
)
from .products import diag, diagonal, dot, einsum, inner, matmul, outer, tensordot, trace, vdot  # noqa: E402
from . import linalg  # noqa: E402  (numpy.linalg semantics; the module is a package)
from . import fft  # noqa: E402  (numpy.fft's functions)
from .reductions import (  # noqa: E402
    all, amax, amin, any, argmax, argmin, cumprod, cumsum, max, mean, min, prod, std, sum, var,
)
# The submodule kiln.numpy.shape (reshape, transpose, ...) stays importable as `from kiln.numpy.shape
# import ...`; the name kiln.numpy.shape itself is numpy's shape() function, bound below.
from .shape import (  # noqa: E402
    array_split, atleast_1d, atleast_2d, broadcast_to, concatenate, expand_dims, flip, fliplr, flipud, hstack,
    matrix_transpose, moveaxis, pad, ravel, repeat, reshape, roll, split, squeeze, stack, swapaxes, tile, transpose,
    tril, triu, vstack,
)
from .indexing import IndexingError, argsort, at, sort, take, take_along_axis  # noqa: E402
from .selection import (  # noqa: E402
    DataDependentShapeError, argwhere, compress, extract, flatnonzero, nonzero, unique,
)
from .introspection import finfo, iinfo, issubdtype, ndim, shape, size  # noqa: E402

from .statistics import *  # noqa: E402,F401,F403
from .searching import *  # noqa: E402,F401,F403
from .construction import *  # noqa: E402,F401,F403
from .rearranging import *  # noqa: E402,F401,F403
from .conditional import *  # noqa: E402,F401,F403
from .aliases import *  # noqa: E402,F401,F403
from .more_math import *  # noqa: E402,F401,F403
from .array_math import *  # noqa: E402,F401,F403
from .polynomials import *  # noqa: E402,F401,F403
from .index_tricks import *  # noqa: E402,F401,F403
from .functional import *  # noqa: E402,F401,F403
from .bits import *  # noqa: E402,F401,F403
from .ufuncs import *  # noqa: E402,F401,F403  (last: the public ufunc names are ufunc objects)

_methods.install()


def from_dlpack(x, /, *, device=None, copy=None):
    """numpy.from_dlpack: a kiln array over the memory of any DLPack exporter (a kiln array, a numpy array,
    a torch CPU tensor, ...), without a copy unless copy=True."""
    return np.from_dlpack(x, device=device, copy=copy)


from ..core.array import wrap_namespace as _wrap_namespace  # noqa: E402

_wrap_namespace(globals())

# numpy dtypes that kiln cannot compile: a clear error instead of a bare AttributeError
_UNSUPPORTED_DTYPES = ("longdouble",
                       "float128", "clongdouble", "str_", "bytes_", "object_", "datetime64", "timedelta64")


def __getattr__(name):
    if name in _UNSUPPORTED_DTYPES:
        raise AttributeError(f"kiln.numpy.{name}: kiln does not support the dtype {name} "
                             f"(supported: {', '.join(str(d) for d in _SUPPORTED)})")
    raise AttributeError(f"module 'kiln.numpy' has no attribute {name!r}")
