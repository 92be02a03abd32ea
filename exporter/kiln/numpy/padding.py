"""numpy.pad's statistic modes ('maximum', 'minimum', 'mean', 'median', with stat_length), 'linear_ramp'
(with end_values) and 'empty'; kiln.numpy.pad (shape.py) hands these modes here.

As numpy, the axes are padded one after the other, so the statistics of a later axis see the padding
already added along the earlier ones. Integer results of 'mean' and 'median' are rounded half to even,
as numpy rounds them.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ._base import aval, broadcast_to, convert
from .creation import linspace
from .indexing import sort
from .reductions import max as max_, mean, min as min_
from .shape import _slice_axis, concatenate, flip

STAT_MODES = ("maximum", "minimum", "mean", "median")


def _pairs(value, nd, name):
    """numpy's per-axis (before, after) pairs from a scalar, a pair, or one pair per axis."""
    v = np.asarray(value)
    if v.ndim > 2 or (v.ndim == 2 and v.shape[1] != 2) or (v.ndim == 1 and v.size not in (1, 2)):
        raise ValueError(f"pad: `{name}` must be a scalar, a (before, after) pair or one pair per axis, got shape {v.shape}")
    return np.broadcast_to(v.reshape((1, -1) if v.ndim == 1 else v.shape), (nd, 2))


def pad_more(x, widths, mode, stat_length, end_values):
    nd = aval(x).ndim
    lengths = _pairs(-1 if stat_length is None else stat_length, nd, "stat_length") if mode in STAT_MODES else None
    ends = _pairs(end_values, nd, "end_values") if mode == "linear_ramp" else None
    for ax, (a, b) in enumerate(widths):
        if not (a or b):
            continue
        n = aval(x).shape[ax]
        if mode == "empty":
            parts = [_filled(x, ax, a, 0), x, _filled(x, ax, b, 0)]
        elif n == 0:
            raise ValueError(f"pad: can't extend empty axis {ax} using modes other than 'constant' or 'empty'")
        elif mode == "linear_ramp":
            parts = [_ramp(x, ax, a, ends[ax][0], before=True), x, _ramp(x, ax, b, ends[ax][1], before=False)]
        else:
            parts = [_stat(x, ax, a, int(lengths[ax][0]), mode, before=True), x,
                     _stat(x, ax, b, int(lengths[ax][1]), mode, before=False)]
        x = concatenate([p for p in parts if p is not None], axis=ax)
    return x


def _filled(x, ax, count, value):
    if not count:
        return None
    shape = list(aval(x).shape)
    shape[ax] = count
    return broadcast_to(np.asarray(value, aval(x).dtype), tuple(shape))


def _stat(x, ax, count, length, mode, before):
    if not count:
        return None
    n = aval(x).shape[ax]
    if length == 0:
        raise ValueError(f"pad: stat_length of 0 yields no value for padding (axis {ax})")
    if length < 0 and length != -1:
        raise ValueError(f"pad: stat_length must be non-negative, got {length}")
    length = n if length == -1 else min(length, n)
    chunk = _slice_axis(x, ax, 0, length) if before else _slice_axis(x, ax, n - length, n)
    d = aval(x).dtype
    if mode == "maximum":
        value = max_(chunk, axis=ax, keepdims=True)
    elif mode == "minimum":
        value = min_(chunk, axis=ax, keepdims=True)
    else:
        value = mean(chunk, axis=ax, keepdims=True) if mode == "mean" else _median(chunk, ax)
        if not dtypes.is_float(d):
            from .math import round as round_

            value = round_(value)
        value = convert(value, d)
    shape = list(aval(x).shape)
    shape[ax] = count
    return broadcast_to(value, tuple(shape))


def _median(chunk, ax):
    ordered = sort(chunk, axis=ax)
    n = aval(chunk).shape[ax]
    middle = _slice_axis(ordered, ax, (n - 1) // 2, n // 2 + 1)
    return mean(middle, axis=ax, keepdims=True)


def _ramp(x, ax, count, end_value, before):
    """numpy's linear_ramp: `count` values from end_value toward the edge (the edge itself excluded)."""
    if not count:
        return None
    n = aval(x).shape[ax]
    edge = _slice_axis(x, ax, 0, 1) if before else _slice_axis(x, ax, n - 1, n)
    start = broadcast_to(np.asarray(end_value).astype(aval(x).dtype), aval(edge).shape)
    ramp = linspace(start, edge, count, endpoint=False, dtype=aval(x).dtype, axis=ax)
    shape = list(aval(x).shape)
    shape[ax] = count
    from .shape import reshape

    ramp = reshape(ramp, tuple(shape))
    return ramp if before else flip(ramp, ax)
