"""Descriptive statistics of scipy.stats over kiln arrays: sem."""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ...core import dtypes
from ...numpy._base import aval, convert, normalize_axes

__all__ = ["sem"]


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
