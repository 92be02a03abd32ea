"""Array creation: array, asarray, zeros, ones, full and their _like forms."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import current_graph_trace
from ._base import asarray as _asarray, aval, broadcast_to


def _shape(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with fill_value (a broadcast, never a stored constant, when traced)."""
    shape = _shape(shape)
    if dtype is None:
        dtype = aval(fill_value).dtype if hasattr(fill_value, "aval") else np.asarray(fill_value).dtype
    value = _asarray(fill_value, dtypes.canonical(dtype))
    if isinstance(value, np.ndarray) and current_graph_trace() is None:
        return np.full(shape, value, dtype=value.dtype)
    return broadcast_to(value, shape)


def zeros(shape, dtype=float):
    return full(shape, np.zeros((), np.dtype(dtype)), np.dtype(dtype))


def ones(shape, dtype=float):
    return full(shape, np.ones((), np.dtype(dtype)), np.dtype(dtype))


def full_like(a, fill_value, dtype=None):
    return full(aval(a).shape, fill_value, dtype or aval(a).dtype)


def zeros_like(a, dtype=None):
    return full_like(a, 0, dtype)


def ones_like(a, dtype=None):
    return full_like(a, 1, dtype)


def array(object, dtype=None):
    return _asarray(object, dtype)


def asarray(a, dtype=None):
    return _asarray(a, dtype)
