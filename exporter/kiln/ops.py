"""jax.ops: segment reductions, as graph networks (jraph) and other sparse code use them.

``segment_sum(data, segment_ids, num_segments)`` is ``out[segment_ids[i]] += data[i]`` into an array of
``num_segments`` rows (``data.shape[1:]`` each), that is ``zeros(...).at[segment_ids].add(data)``; segment_prod,
segment_max and segment_min likewise, starting from their operation's identity (1, -inf / the integer's
minimum / False, +inf / the integer's maximum / True), which is what an empty segment gets, as in JAX.

As in JAX: ids outside ``[0, num_segments)`` (negative ones included: they are not counted from the end) are
dropped in the default mode (``"fill"``/``"drop"``/``"promise_in_bounds"``), clamped into range with
``mode="clip"``; ``num_segments`` may be left out only for concrete ids (it is then ``max(ids) + 1``);
``bucket_size`` reduces each bucket of that many consecutive entries first and the buckets' results with
``sum``/``prod``/``max``/``min`` then (JAX's option for a more accurate sum or product); ``indices_are_sorted``
and ``unique_indices`` are hints that change nothing here, and ``out_sharding`` is accepted and unused (one host).
"""
from __future__ import annotations as _annotations

import math as _math
import operator as _operator

import numpy as _np

from .core import dtypes as _dtypes
from .core.trace import Tracer as _Tracer

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]

_MODES = (None, "fill", "drop", "promise_in_bounds", "clip")


def _identity(op: str, dtype: _np.dtype):
    if op == "add":
        return 0
    if op == "mul":
        return 1
    top = op == "min"  # min starts from the largest value, max from the smallest
    if dtype == _np.bool_:
        return top
    if _dtypes.is_int(dtype):
        info = _np.iinfo(dtype)
        return info.max if top else info.min
    return _math.inf if top else -_math.inf


def _segment(name, op, reducer, data, segment_ids, num_segments, bucket_size, mode):
    import kiln.numpy as knp

    data, ids = knp.asarray(data), knp.asarray(segment_ids)
    if not _dtypes.is_int(ids.dtype):
        raise TypeError(f"{name}: segment_ids must be integers, got {ids.dtype}")
    if ids.ndim != 1 or data.ndim < 1 or data.shape[0] != ids.shape[0]:
        raise ValueError(f"{name}: segment_ids must be 1-D with one id per row of data, got segment_ids of shape "
                         f"{tuple(ids.shape)} and data of shape {tuple(data.shape)}")
    mode = getattr(mode, "value", mode)  # a kiln.lax.GatherScatterMode
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be one of {_MODES}, got {mode!r}")
    if num_segments is None:
        if isinstance(ids, _Tracer):
            raise TypeError(f"{name}: num_segments must be given (a Python int) when segment_ids are traced: the "
                            "result's length must be known when tracing")
        num_segments = int(_np.max(_np.asarray(ids))) + 1 if ids.size else 0
    if isinstance(num_segments, _Tracer):
        raise TypeError(f"{name}: num_segments must be a concrete integer (the result's length must be known when "
                        "tracing); pass it as a Python int or a static argument")
    num_segments = _operator.index(num_segments)
    if num_segments < 0:
        raise ValueError(f"{name}: num_segments must be non-negative, got {num_segments}")
    if mode == "clip":
        ids = knp.clip(ids, 0, max(num_segments - 1, 0))
    else:  # out-of-range ids go to an extra row, cut off at the end
        ids = knp.where((ids >= 0) & (ids < num_segments), ids, num_segments)
    identity = _identity(op, _np.dtype(data.dtype))
    if bucket_size is None:
        out = knp.full((num_segments + 1,) + tuple(data.shape[1:]), identity, data.dtype)
        return getattr(out.at[ids], op)(data)[:num_segments]
    bucket_size = _operator.index(bucket_size)
    if bucket_size < 1:
        raise ValueError(f"{name}: bucket_size must be positive, got {bucket_size}")
    buckets = max(-(-ids.shape[0] // bucket_size), 1)
    out = knp.full((buckets, num_segments + 1) + tuple(data.shape[1:]), identity, data.dtype)
    out = getattr(out.at[_np.arange(ids.shape[0]) // bucket_size, ids], op)(data)
    return reducer(out[:, :num_segments], axis=0).astype(data.dtype)


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                bucket_size=None, mode=None, out_sharding=None):
    """The sum of data's rows per segment id (jax.ops.segment_sum); an empty segment is 0."""
    import kiln.numpy as knp

    return _segment("segment_sum", "add", knp.sum, data, segment_ids, num_segments, bucket_size, mode)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                 bucket_size=None, mode=None, out_sharding=None):
    """The product of data's rows per segment id (jax.ops.segment_prod); an empty segment is 1."""
    import kiln.numpy as knp

    return _segment("segment_prod", "mul", knp.prod, data, segment_ids, num_segments, bucket_size, mode)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                bucket_size=None, mode=None, out_sharding=None):
    """The maximum of data's rows per segment id (jax.ops.segment_max); an empty segment is -inf (the integer
    dtype's minimum, False)."""
    import kiln.numpy as knp

    return _segment("segment_max", "max", knp.max, data, segment_ids, num_segments, bucket_size, mode)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                bucket_size=None, mode=None, out_sharding=None):
    """The minimum of data's rows per segment id (jax.ops.segment_min); an empty segment is +inf (the integer
    dtype's maximum, True)."""
    import kiln.numpy as knp

    return _segment("segment_min", "min", knp.min, data, segment_ids, num_segments, bucket_size, mode)
