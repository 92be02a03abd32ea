"""Reductions over axes (int, tuple or None) with keepdims, as in numpy."""
from __future__ import annotations

import numpy as np

from ..lax import prims
from ._base import asarray, aval, convert, normalize_axes, numpy_result_dtype



def _reduce(prim, name, x, axis, keepdims, dtype=None):
    x = asarray(x)
    a = aval(x)
    axes = normalize_axes(axis, a.ndim, name)
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype(name, a.dtype)
    if out_dtype != a.dtype:
        x = convert(x, out_dtype)
    if not axes:
        return x
    if prim is not prims.reduce_sum:
        for ax in axes:
            if a.shape[ax] == 0:
                raise ValueError(f"{name}: zero-size array to reduction operation {name} which has no identity")
    out = prim.bind(x, axes=axes)
    if keepdims:
        kept = tuple(1 if i in axes else d for i, d in enumerate(a.shape))
        out = prims.reshape.bind(out, new_shape=kept)
    return out


def sum(a, axis=None, dtype=None, keepdims=False):
    """numpy.sum; integers and bools accumulate in numpy's wider integer dtype."""
    return _reduce(prims.reduce_sum, "sum", a, axis, keepdims, dtype)


def max(a, axis=None, keepdims=False):
    return _reduce(prims.reduce_max, "max", a, axis, keepdims)


def min(a, axis=None, keepdims=False):
    return _reduce(prims.reduce_min, "min", a, axis, keepdims)


amax = max
amin = min


def mean(a, axis=None, dtype=None, keepdims=False):
    """numpy.mean: the sum divided by the count, in numpy's result dtype."""
    x = asarray(a)
    av = aval(x)
    axes = normalize_axes(axis, av.ndim, "mean")
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype("mean", av.dtype)
    count = int(np.prod([av.shape[i] for i in axes], dtype=np.int64))
    total = _reduce(prims.reduce_sum, "mean", convert(x, out_dtype), axes, keepdims, out_dtype)
    from .elementwise import true_divide

    return convert(true_divide(total, np.asarray(count, out_dtype)), out_dtype)
