"""Descriptive statistics of scipy.stats over kiln arrays: sem, mode, rankdata."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import numpy as knp
from ...core import dtypes
from ...numpy._base import aval, convert, normalize_axes
from ...transforms.api import vmap

__all__ = ["sem", "mode", "rankdata", "ModeResult"]


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """scipy.stats.sem: the standard error of the mean, std(a, ddof) / sqrt(n) along axis (None: the whole
    array). Only nan_policy='propagate' (NaN in, NaN out) is supported."""
    if nan_policy != "propagate":
        raise NotImplementedError(f"sem: nan_policy={nan_policy!r} is not supported; only 'propagate' (filter NaN "
                                  "first, e.g. with kiln.numpy.nanstd)")
    x = knp.asarray(a)
    if not dtypes.is_float(aval(x).dtype):
        x = convert(x, np.float64)
    if axis is None:
        x, axis = knp.reshape(x, (-1,)), 0
    axes = normalize_axes(axis, aval(x).ndim, "sem")
    n = int(np.prod([aval(x).shape[i] for i in axes]))
    return knp.divide(knp.std(x, axis=axes, ddof=ddof, keepdims=keepdims), np.sqrt(n).astype(aval(x).dtype))


class ModeResult(NamedTuple):
    """scipy.stats.mode's result: the most frequent value and how often it occurs."""

    mode: object
    count: object


def _along_last(fn, x, axis, keepdims_axis=None):
    """fn applied to every 1-D slice of x along axis (vmapped over the others), as (results with the slice's axis
    gone (or kept, keepdims_axis) or replaced by fn's vector output)."""
    nd = aval(x).ndim
    moved = knp.moveaxis(x, axis, -1)
    batch = aval(moved).shape[:-1]
    flat = knp.reshape(moved, (-1, aval(moved).shape[-1]))
    outs = vmap(fn)(flat)
    outs = outs if isinstance(outs, tuple) else (outs,)
    shaped = []
    for out in outs:
        out = knp.reshape(out, batch + aval(out).shape[1:])
        if aval(out).ndim == nd:  # a vector per slice: put the axis back
            out = knp.moveaxis(out, -1, axis)
        elif keepdims_axis is not None:
            out = knp.expand_dims(out, keepdims_axis)
        shaped.append(out)
    return tuple(shaped)


def _slice_mode(v):
    s = knp.sort(v)
    counts = knp.subtract(knp.searchsorted(s, s, side="right"), knp.searchsorted(s, s, side="left"))
    best = knp.argmax(counts)  # the first, so the smallest of the most frequent values, as scipy
    return s[best], convert(counts[best], np.int64)


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """scipy.stats.mode: ModeResult(the most frequent value along axis (the smallest among ties), its count);
    axis=None looks at the whole array. Only nan_policy='propagate' is supported."""
    if nan_policy != "propagate":
        raise NotImplementedError(f"mode: nan_policy={nan_policy!r} is not supported; only 'propagate'")
    x = knp.asarray(a)
    if aval(x).size == 0:
        raise ValueError("mode: argument a is empty; scipy gives NaN there, kiln needs at least one value")
    if axis is None:
        nd = aval(x).ndim
        value, count = mode(knp.reshape(x, (-1,)), 0)
        if keepdims:
            value, count = knp.reshape(value, (1,) * nd), knp.reshape(count, (1,) * nd)
        return ModeResult(value, count)
    axis = normalize_axes(axis, aval(x).ndim, "mode")[0]
    value, count = _along_last(_slice_mode, x, axis, keepdims_axis=axis if keepdims else None)
    return ModeResult(value, count)


_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


def _slice_ranks(method):
    def ranks(v):
        s = knp.sort(v)
        if method == "ordinal":
            order = knp.argsort(v, stable=True)
            return knp.add(knp.argsort(order, stable=True), 1).astype(np.int64)
        if method == "dense":
            new_value = knp.concatenate([knp.ones((1,), np.int64),
                                         knp.not_equal(s[1:], s[:-1]).astype(np.int64)])
            return knp.take(knp.cumsum(new_value), knp.searchsorted(s, v, side="left")).astype(np.int64)
        low = knp.add(knp.searchsorted(s, v, side="left"), 1).astype(np.int64)
        high = knp.searchsorted(s, v, side="right").astype(np.int64)
        if method == "min":
            return low
        if method == "max":
            return high
        return knp.multiply(knp.add(low, high).astype(np.float64), 0.5)

    return ranks


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """scipy.stats.rankdata: ranks from 1, ties by method ('average' gives float64, the others int64); axis=None
    ranks the flattened array. NaN in a slice makes its ranks NaN ('propagate', as scipy), so float input gives
    float64 ranks for every method (as JAX; scipy's dtype depends on whether a NaN is present)."""
    if method not in _RANK_METHODS:
        raise ValueError(f"rankdata: method must be one of {', '.join(_RANK_METHODS)}, got {method!r}")
    if nan_policy != "propagate":
        raise NotImplementedError(f"rankdata: nan_policy={nan_policy!r} is not supported; only 'propagate'")
    x = knp.asarray(a)
    if axis is None:
        x, axis = knp.reshape(x, (-1,)), 0
    axis = normalize_axes(axis, aval(x).ndim, "rankdata")[0]
    (ranks,) = _along_last(_slice_ranks(method), x, axis)
    if dtypes.is_float(aval(x).dtype):
        has_nan = knp.any(knp.isnan(x), axis=axis, keepdims=True)
        ranks = knp.where(has_nan, np.nan, ranks.astype(np.float64))
    return ranks
