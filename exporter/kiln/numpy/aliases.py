"""numpy 2's array-API names (acos, concat, permute_dims, pow, vecdot, matvec, unstack, isdtype, ...) and the
dtype and type queries (result_type, promote_types, can_cast, isscalar, iscomplexobj, ..., knp.ndarray).

The aliases are the functions they name; the queries follow kiln's promotion (docs/numpy.md: Python
numbers are weak), which is numpy 2's for the dtypes kiln has.
"""
from __future__ import annotations

import abc

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer
from ._base import asarray, aval, normalize_axes, promote
from .math import (
    arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, invert, left_shift, power, right_shift,
)
from .shape import concatenate, moveaxis, transpose

acos = arccos
acosh = arccosh
asin = arcsin
asinh = arcsinh
atan = arctan
atan2 = arctan2
atanh = arctanh
pow = power  # noqa: A001  (numpy 2's name)
bitwise_left_shift = left_shift
bitwise_right_shift = right_shift
bitwise_invert = invert


def concat(arrays, /, *, axis=0):
    """numpy.concat (the array API's concatenate; axis=None flattens)."""
    return concatenate(arrays, axis=axis)


def permute_dims(a, /, axes):
    """numpy.permute_dims: transpose with the permutation required."""
    return transpose(a, axes)


def unstack(x, /, *, axis=0):
    """numpy.unstack: the slices along axis, as a tuple."""
    v = asarray(x)
    if aval(v).ndim == 0:
        raise ValueError("unstack: input must be at least 1-d, got a 0-d array")
    ax = normalize_axes(axis, aval(v).ndim, "unstack")[0]
    moved = moveaxis(v, ax, 0)
    return tuple(moved[i] for i in range(aval(moved).shape[0]))


def _products():
    from . import products

    return products


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """numpy.vecdot: the dot product of vectors along axis, broadcast over the other axes (a matmul of
    1-row by 1-column matrices, so integers keep their dtype as in numpy); precision= and
    preferred_element_type= as jax.numpy's matmul."""
    a, b = promote(asarray(x1), asarray(x2))
    if aval(a).ndim == 0 or aval(b).ndim == 0:
        raise ValueError("vecdot: inputs must be at least 1-d")
    a = moveaxis(a, normalize_axes(axis, aval(a).ndim, "vecdot")[0], -1)
    b = moveaxis(b, normalize_axes(axis, aval(b).ndim, "vecdot")[0], -1)
    if aval(a).shape[-1] != aval(b).shape[-1]:
        raise ValueError(f"vecdot: the vectors' lengths differ along axis {axis}: {aval(a).shape[-1]} and {aval(b).shape[-1]}")
    out = _products().matmul(a[..., None, :], b[..., :, None], precision=precision,
                             preferred_element_type=preferred_element_type)
    return out[..., 0, 0]


def matvec(x1, x2, /):
    """numpy.matvec: matrices (..., m, n) times vectors (..., n), broadcast over the leading axes."""
    a, b = asarray(x1), asarray(x2)
    if aval(a).ndim < 2 or aval(b).ndim < 1:
        raise ValueError(f"matvec: needs a matrix and a vector, got shapes {aval(a).shape} and {aval(b).shape}")
    return _products().matmul(a, b[..., :, None])[..., 0]


def vecmat(x1, x2, /):
    """numpy.vecmat: vectors (..., n) times matrices (..., n, m), broadcast over the leading axes."""
    a, b = asarray(x1), asarray(x2)
    if aval(a).ndim < 1 or aval(b).ndim < 2:
        raise ValueError(f"vecmat: needs a vector and a matrix, got shapes {aval(a).shape} and {aval(b).shape}")
    return _products().matmul(a[..., None, :], b)[..., 0, :]


def _dtype_and_weak(x):
    if dtypes.is_python_scalar(x):
        return dtypes.python_scalar_dtype(x), True
    if isinstance(x, Tracer):
        return x.aval.dtype, x.aval.weak_type
    if isinstance(x, (list, tuple)):
        return asarray(x).dtype, False
    if _is_array_like(x):
        return dtypes.canonical(x.dtype), False
    return dtypes.canonical(x), False


def _is_array_like(x) -> bool:
    """An array or scalar object with a dtype (numpy's, or another array type's), not a dtype or type itself."""
    return hasattr(x, "dtype") and not isinstance(x, (type, np.dtype, str))


def result_type(*arrays_and_dtypes):
    """numpy.result_type with kiln's promotion, so it names the dtype kiln.numpy computes in: Python numbers
    are weak (they take the arrays' dtype unless of a higher kind, and then float32/int32: an int32 array and
    2.5 give float32 where numpy says float64); alone they give numpy's float64/int64/bool, as eagerly."""
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    infos = [_dtype_and_weak(x) for x in arrays_and_dtypes]
    target, _ = dtypes.result_type(*infos)
    return dtypes.numpy_scalar_dtype(target) if all(w for _, w in infos) else target


def promote_types(type1, type2):
    """numpy.promote_types for kiln's dtypes (bfloat16 as in JAX: with integers it stays bfloat16)."""
    target, _ = dtypes.result_type((dtypes.canonical(type1), False), (dtypes.canonical(type2), False))
    return target


def can_cast(from_, to, casting="safe"):
    """numpy.can_cast for a dtype or an array (traced arrays included) to a dtype."""
    if dtypes.is_python_scalar(from_):
        raise TypeError("can_cast: a Python number has no dtype of its own (numpy 2 rejects it too); pass a dtype")
    source = np.dtype(from_.dtype) if _is_array_like(from_) else np.dtype(from_)
    return bool(np.can_cast(source, np.dtype(to), casting))


def isscalar(element):
    """numpy.isscalar: True for Python numbers and numpy scalars. A traced 0-d array is True too, as in
    jax.numpy (it is what a scalar becomes under kiln.jit); an eager 0-d numpy array is False, as numpy."""
    if isinstance(element, Tracer):
        return element.aval.ndim == 0
    return bool(np.isscalar(element))


def iscomplexobj(x):
    """numpy.iscomplexobj: whether x has a complex dtype (traced arrays included)."""
    if isinstance(x, Tracer):
        return dtypes.is_complex(x.dtype)
    return bool(np.iscomplexobj(x))


def isrealobj(x):
    return not iscomplexobj(x)


def iscomplex(x):
    """numpy.iscomplex: where the imaginary part is nonzero (all False for a real array)."""
    v = asarray(x)
    if dtypes.is_complex(aval(v).dtype):
        from .more_math import imag
        return imag(v) != 0
    return _bool_full(v, False)


def isreal(x):
    """numpy.isreal: where the imaginary part is zero (all True for a real array)."""
    v = asarray(x)
    if dtypes.is_complex(aval(v).dtype):
        from .more_math import imag
        return imag(v) == 0
    return _bool_full(v, True)


def sort_complex(a):
    """numpy.sort_complex: sorted along the last axis in numpy's complex order (real parts, then imaginary
    parts, NaNs last), as complex: complex64 from int8/int16/uint8/uint16, complex128 from other real dtypes."""
    from .indexing import sort

    v = asarray(a)
    d = np.dtype(aval(v).dtype)
    if not dtypes.is_complex(d):
        v = v.astype(np.complex64 if d in (np.int8, np.int16, np.uint8, np.uint16) else np.complex128)
    return sort(v, axis=-1)


def _bool_full(like, value):
    from ._base import broadcast_to

    return broadcast_to(np.asarray(value), aval(like).shape)


_KINDS = {
    "bool": lambda d: dtypes.is_bool(d),
    "signed integer": lambda d: np.dtype(d).kind == "i",
    "unsigned integer": lambda d: np.dtype(d).kind == "u",
    "integral": lambda d: dtypes.is_int(d),
    "real floating": lambda d: dtypes.is_float(d),
    "complex floating": lambda d: np.dtype(d).kind == "c",
    "numeric": lambda d: dtypes.is_int(d) or dtypes.is_float(d) or np.dtype(d).kind == "c",
}


def isdtype(dtype, kind):
    """numpy.isdtype: whether dtype is of kind (a name such as 'real floating' or 'integral', a dtype, or a
    tuple of them); bfloat16 is a 'real floating' dtype, as in jax.numpy."""
    d = np.dtype(dtype)
    for k in (kind if isinstance(kind, tuple) else (kind,)):
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"isdtype: kind {k!r} is not a known kind name ({', '.join(map(repr, _KINDS))})")
            if _KINDS[k](d):
                return True
        elif d == np.dtype(k):
            return True
    return False


# numpy's other names for kiln's dtypes, and its abstract types (for issubdtype)
double, single, half = np.float64, np.float32, np.float16
float_ = np.float64
int_, intp, intc, longlong, short, byte, ubyte = np.int64, np.int64, np.int32, np.int64, np.int16, np.int8, np.uint8
character, flexible, complexfloating = np.character, np.flexible, np.complexfloating
euler_gamma = np.euler_gamma


def iterable(y):
    """numpy.iterable: whether y can be iterated (a traced array can when it has at least one dimension)."""
    if isinstance(y, Tracer):
        return y.aval.ndim > 0
    return bool(np.iterable(y))


# Printing and file I/O work on concrete arrays, so they are numpy's own (eager results are numpy arrays).
array_repr, array_str = np.array_repr, np.array_str
get_printoptions, set_printoptions, printoptions = np.get_printoptions, np.set_printoptions, np.printoptions
frombuffer, fromiter, fromstring, fromfile = np.frombuffer, np.fromiter, np.fromstring, np.fromfile
load, save, savez = np.load, np.save, np.savez
ComplexWarning = np.exceptions.ComplexWarning


def einsum_path(subscripts, *operands, optimize="greedy", einsum_call=False):
    """numpy.einsum_path: numpy's contraction order for operands of these shapes (traced arrays included: the
    path depends on shapes only). kiln's einsum contracts left to right whatever the path."""
    stand_ins = [np.broadcast_to(np.zeros((), np.float64), aval(x).shape) if isinstance(x, Tracer) else x
                 for x in operands]
    return np.einsum_path(subscripts, *stand_ins, optimize=optimize, einsum_call=einsum_call)


class ndarray(abc.ABC):  # noqa: N801  (numpy's name)
    """The array type for isinstance checks, as jax.Array is for JAX: eager results (numpy arrays) and
    traced arrays are instances. Other array types register themselves (ndarray.register(cls))."""


ndarray.register(np.ndarray)
ndarray.register(Tracer)


__all__ = [
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "pow", "bitwise_left_shift", "bitwise_right_shift",
    "bitwise_invert", "concat", "permute_dims", "unstack", "vecdot", "matvec", "vecmat", "result_type",
    "promote_types", "can_cast", "isscalar", "iscomplexobj", "isrealobj", "iscomplex", "isreal", "sort_complex", "isdtype", "ndarray",
    "double", "single", "half", "float_", "int_", "intp", "intc", "longlong", "short", "byte", "ubyte", "character",
    "flexible", "complexfloating", "euler_gamma", "iterable", "array_repr", "array_str", "get_printoptions",
    "set_printoptions", "printoptions", "frombuffer", "fromiter", "fromstring", "fromfile", "load", "save", "savez",
    "ComplexWarning", "einsum_path",
]
