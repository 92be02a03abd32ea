"""Shared machinery of kiln.numpy: operands, promotion and broadcasting (those three from kiln.lax.operands)."""
from __future__ import annotations

import functools

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer, get_aval
from ..lax.operands import (  # noqa: F401
    asarray, broadcast_all, broadcast_shapes, broadcast_to, convert, convert_weak, promote, weak_float_dtype,
)


def is_array(x) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic))


aval = get_aval


@functools.lru_cache(maxsize=None)
def numpy_result_dtype(fn_name: str, *in_dtypes: np.dtype) -> np.dtype:
    """The dtype numpy's own `fn_name` gives for these input dtypes."""
    fn = getattr(np, fn_name)
    args = [np.ones((1,), d) for d in in_dtypes]
    with np.errstate(all="ignore"):
        return dtypes.canonical(np.asarray(fn(*args)).dtype)


def promote_inexact(*operands):
    """promote, then integer and bool results to float64 (numpy's dtype for a float result of integers);
    float and complex dtypes stay (JAX's promote_dtypes_inexact)."""
    out = promote(*operands)
    d = get_aval(out[0]).dtype
    return out if dtypes.is_inexact(d) else [convert(o, np.float64) for o in out]


def normalize_axes(axis, ndim: int, where: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(f"{where}: axis {a} is out of bounds for an array of {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: repeated axis in {axis}")
    return tuple(sorted(out))
