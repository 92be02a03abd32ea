"""Shape and dtype queries: shape, ndim, size, finfo, iinfo, issubdtype (traced arrays included)."""
from __future__ import annotations

import builtins

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer


def _shape_of(a) -> tuple[int, ...]:
    if isinstance(a, Tracer):
        return a.aval.shape
    return np.shape(a)


def shape(a) -> tuple[int, ...]:
    """numpy.shape: the shape of an array, a traced array, a nested list or a scalar (a tuple of ints)."""
    return tuple(_shape_of(a))


def ndim(a) -> int:
    """numpy.ndim: the number of dimensions."""
    return len(_shape_of(a))


def size(a, axis=None) -> int:
    """numpy.size: the number of elements (along `axis`, an int or a tuple of ints, if given)."""
    s = _shape_of(a)
    if axis is None:
        return int(np.prod(s, dtype=np.int64))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    total = 1
    for ax in axes:
        ax = int(ax)
        if not -len(s) <= ax < len(s):
            raise ValueError(f"size: axis {ax} is out of bounds for an array of {len(s)} dimensions")
        total *= s[ax]
    return total


def _dtype_of(x) -> np.dtype:
    if isinstance(x, Tracer):
        return x.aval.dtype
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    return np.dtype(x)


def finfo(dtype):
    """numpy.finfo for kiln's float dtypes, bfloat16 included (ml_dtypes.finfo); accepts arrays too."""
    d = _dtype_of(dtype)
    if d == dtypes.BFLOAT16:
        import ml_dtypes

        return ml_dtypes.finfo(ml_dtypes.bfloat16)
    return np.finfo(d)


def iinfo(dtype):
    """numpy.iinfo for kiln's integer dtypes; accepts arrays too."""
    return np.iinfo(_dtype_of(dtype))


def issubdtype(arg1, arg2) -> bool:
    """numpy.issubdtype, with bfloat16 a floating type (as in jax.numpy)."""
    d = _dtype_of(arg1) if not (isinstance(arg1, type) and issubclass(arg1, np.generic) and arg1 in _ABSTRACT) else arg1
    if isinstance(d, np.dtype) and d == dtypes.BFLOAT16:
        if isinstance(arg2, type) and arg2 in (np.floating, np.inexact, np.number, np.generic):
            return True
        try:
            return np.dtype(arg2) == dtypes.BFLOAT16
        except TypeError:
            return False
    return builtins.bool(np.issubdtype(d, arg2))


_ABSTRACT = (np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact, np.floating)

__all__ = ["shape", "ndim", "size", "finfo", "iinfo", "issubdtype"]
