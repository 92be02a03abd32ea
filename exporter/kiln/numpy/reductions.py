"""Reductions over axes (int, tuple or None) with keepdims, as in numpy; cumulative sums and products."""
from __future__ import annotations

import builtins

import numpy as np

from ..lax import prims
from ..lax import structural_prims as sp
from ..core import dtypes
from ._base import asarray, aval, convert, normalize_axes, numpy_result_dtype as _numpy_result_dtype


def numpy_result_dtype(name, dtype):
    """numpy's result dtype; unsigned sums and products numpy keeps in uint64 run in int64 (kiln has no uint64)."""
    try:
        return _numpy_result_dtype(name, dtype)
    except dtypes.DTypeError:
        return np.dtype(np.int64)


def _keep(out, shape, axes, keepdims):
    if keepdims:
        kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
        out = prims.reshape.bind(out, new_shape=kept)
    return out


def _reduce(prim, name, x, axis, keepdims, dtype=None):
    x = asarray(x)
    a = aval(x)
    axes = normalize_axes(axis, a.ndim, name)
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype(name, a.dtype)
    if out_dtype != a.dtype:
        x = convert(x, out_dtype)
    if not axes:
        return x
    if prim not in (prims.reduce_sum, sp.reduce_prod_p):
        for ax in axes:
            if a.shape[ax] == 0:
                raise ValueError(f"{name}: zero-size array to reduction operation {name} which has no identity")
    return _keep(prim.bind(x, axes=axes), a.shape, axes, keepdims)


def sum(a, axis=None, dtype=None, keepdims=False):
    """numpy.sum; integers and bools accumulate in numpy's wider integer dtype."""
    return _reduce(prims.reduce_sum, "sum", a, axis, keepdims, dtype)


def prod(a, axis=None, dtype=None, keepdims=False):
    """numpy.prod; integers and bools multiply in numpy's wider integer dtype (wrapping like numpy)."""
    return _reduce(sp.reduce_prod_p, "prod", a, axis, keepdims, dtype)


def max(a, axis=None, keepdims=False):
    return _reduce(prims.reduce_max, "max", a, axis, keepdims)


def min(a, axis=None, keepdims=False):
    return _reduce(prims.reduce_min, "min", a, axis, keepdims)


amax = max
amin = min


def _logical(a, axis, keepdims, is_all):
    x = asarray(a)
    av = aval(x)
    axes = normalize_axes(axis, av.ndim, "all" if is_all else "any")
    if av.dtype != np.bool_:
        from .elementwise import not_equal

        x = not_equal(x, np.zeros((), av.dtype))
    if not axes:
        return x
    if builtins.any(av.shape[i] == 0 for i in axes):
        from .creation import full

        shape = tuple(1 if i in axes else d for i, d in enumerate(av.shape)) if keepdims else \
            tuple(d for i, d in enumerate(av.shape) if i not in axes)
        return full(shape, is_all, np.bool_)
    prim = prims.reduce_min if is_all else prims.reduce_max
    return _keep(prim.bind(x, axes=axes), av.shape, axes, keepdims)


def all(a, axis=None, keepdims=False):
    return _logical(a, axis, keepdims, True)


def any(a, axis=None, keepdims=False):
    return _logical(a, axis, keepdims, False)


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


def var(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """numpy.var: mean squared deviation, divided by N - ddof."""
    from .elementwise import multiply, subtract, true_divide

    x = asarray(a)
    av = aval(x)
    axes = normalize_axes(axis, av.ndim, "var")
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype("var", av.dtype)
    x = convert(x, out_dtype)
    centered = subtract(x, mean(x, axes, out_dtype, keepdims=True))
    total = _reduce(prims.reduce_sum, "var", multiply(centered, centered), axes, keepdims, out_dtype)
    count = int(np.prod([av.shape[i] for i in axes], dtype=np.int64)) - int(ddof)
    return convert(true_divide(total, np.asarray(count, out_dtype)), out_dtype)


def std(a, axis=None, dtype=None, ddof=0, keepdims=False):
    from .elementwise import sqrt

    return sqrt(var(a, axis, dtype, ddof, keepdims))


def _arg(prim, name, a, axis, keepdims):
    x = asarray(a)
    av = aval(x)
    shape = av.shape
    if axis is None:
        from .shape import ravel

        x, ax = ravel(x), 0
    else:
        (ax,) = normalize_axes(axis, av.ndim, name)
    if aval(x).shape[ax] == 0:
        raise ValueError(f"{name}: attempt to get {name} of an empty sequence")
    out = prim.bind(x, axis=ax, index_dtype=np.dtype(np.int64))
    if keepdims:
        kept = (1,) * len(shape) if axis is None else tuple(1 if i == ax else d for i, d in enumerate(shape))
        out = prims.reshape.bind(out, new_shape=kept)
    return out


def argmax(a, axis=None, keepdims=False):
    """numpy.argmax (int64; the first maximum, NaN counts as the maximum)."""
    return _arg(sp.argmax_p, "argmax", a, axis, keepdims)


def argmin(a, axis=None, keepdims=False):
    return _arg(sp.argmin_p, "argmin", a, axis, keepdims)


def _cumulative(prim, name, a, axis, dtype):
    x = asarray(a)
    if axis is None:
        from .shape import ravel

        x, axis = ravel(x), 0
    av = aval(x)
    (ax,) = normalize_axes(axis, av.ndim, name)
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype(name, av.dtype)
    x = convert(x, out_dtype)
    return prim.bind(x, axis=ax, reverse=False)


def cumsum(a, axis=None, dtype=None):
    """numpy.cumsum; axis=None runs over the flattened array."""
    return _cumulative(sp.cumsum_p, "cumsum", a, axis, dtype)


def cumprod(a, axis=None, dtype=None):
    return _cumulative(sp.cumprod_p, "cumprod", a, axis, dtype)
