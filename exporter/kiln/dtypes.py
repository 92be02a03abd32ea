"""jax.dtypes over kiln's dtypes.

kiln keeps numpy's dtypes and promotion (docs/numpy.md): float64 and int64 exist whatever
``jax_enable_x64`` says, so ``canonicalize_dtype`` returns the dtype itself (a kiln dtype; others are an
error) where JAX without x64 narrows float64 to float32. ``result_type`` is kiln.numpy.result_type (Python
numbers are weak). ``float0`` is JAX's dtype of integer inputs' tangents, defined for programs that name it:
kiln's transforms never make float0 tangents (``allow_int=True`` is an error, docs/jax_compat.md).
"""
from __future__ import annotations

import numpy as np

from kiln.core import dtypes as _dtypes
from kiln.numpy import bfloat16, finfo, iinfo, issubdtype
from kiln.numpy import result_type as _result_type
from kiln.numpy.aliases import _dtype_and_weak


class TypePromotionError(TypeError):
    """JAX's error for a promotion its strict mode refuses. kiln never raises it: its promotion is numpy's,
    which combines any two of its dtypes (an unsupported dtype is kiln.core.dtypes.DTypeError, a TypeError)."""


float0 = np.dtype([("float0", np.void, 0)])

__all__ = ["TypePromotionError", "bfloat16", "canonicalize_dtype", "finfo", "float0", "iinfo", "issubdtype",
           "itemsize_bits", "result_type", "scalar_type_of"]


def canonicalize_dtype(dtype, allow_extended_dtype: bool = False) -> np.dtype:
    """The numpy dtype kiln computes `dtype` in: `dtype` itself when kiln supports it (float64 stays float64),
    else a TypeError naming the dtypes kiln has."""
    return _dtypes.canonical(dtype)


def result_type(*args, return_weak_type_flag: bool = False):
    """The dtype kiln.numpy gives an operation on `args` (arrays, dtypes, Python numbers); with
    ``return_weak_type_flag=True`` also whether the result is weakly typed, as JAX's (Python numbers alone,
    or a weak number of a higher kind than the arrays: an int32 array and 0.5 give a weak float32)."""
    dtype = np.dtype(_result_type(*args))
    if return_weak_type_flag:
        return dtype, bool(args) and _dtypes.result_type(*[_dtype_and_weak(a) for a in args])[1]
    return dtype


def scalar_type_of(x) -> type:
    """The Python type (bool, int, float, complex) whose values have `x`'s kind of dtype."""
    dtype = np.dtype(x.dtype) if hasattr(x, "dtype") else np.dtype(_result_type(x))
    if dtype == np.bool_:
        return bool
    if np.issubdtype(dtype, np.integer):
        return int
    if _dtypes.is_float(dtype):
        return float
    if np.issubdtype(dtype, np.complexfloating):
        return complex
    raise TypeError(f"scalar_type_of: no Python scalar type for dtype {dtype}")


def itemsize_bits(dtype) -> int:
    """The number of bits one element of `dtype` takes (bool: 8)."""
    return np.dtype(dtype).itemsize * 8
