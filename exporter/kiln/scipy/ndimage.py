"""kiln.scipy.ndimage: map_coordinates with nearest (order 0) and linear (order 1) interpolation (JAX's
jax.scipy.ndimage).

The modes are JAX's, which are scipy's grid modes: 'constant' is scipy's 'grid-constant' (a corner outside
the array contributes cval), 'wrap' is 'grid-wrap' (period = the size); 'nearest', 'mirror' and 'reflect'
are scipy's. scipy's own names 'grid-constant', 'grid-wrap' and 'grid-mirror' (= 'reflect') are accepted.
"""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

from .. import lax
from .. import numpy as knp
from ..core import dtypes
from ..numpy._base import aval

__all__ = ["map_coordinates"]


def _mirror(index, size: int):
    """Reflection about the edge elements (scipy 'mirror': ... 2 1 | 0 1 2 ... n-1 | n-2 ...)."""
    if size == 1:
        return knp.zeros_like(index)
    period = 2 * (size - 1)
    return (size - 1) - knp.abs(index % period - (size - 1))


def _reflect(index, size: int):
    """Reflection about the edges (scipy 'reflect' = 'grid-mirror': ... 1 0 | 0 1 ... n-1 | n-1 n-2 ...)."""
    folded = index % (2 * size)
    return knp.where(folded < size, folded, 2 * size - 1 - folded)


_INDEX = {
    "constant": lambda index, size: knp.clip(index, 0, size - 1),  # read in bounds, replaced by cval
    "nearest": lambda index, size: knp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}
_ALIASES = {"grid-constant": "constant", "grid-wrap": "wrap", "grid-mirror": "reflect"}


def _nodes(coordinate, order: int):
    """[(integer index, weight)] of one axis's interpolation at coordinate."""
    if order == 0:
        return [(lax.round(coordinate).astype(np.int32), None)]
    lower = knp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):  # noqa: A002 - scipy's name
    """input interpolated at the points coordinates[0..ndim-1] (arrays of one shape, the result's): the
    nearest element (order 0, halves rounded away from zero) or multilinear (order 1). Integer inputs give
    rounded (half away from zero) results of their dtype."""
    x = knp.asarray(input)
    shape = aval(x).shape
    if len(coordinates) != len(shape):
        raise ValueError(f"map_coordinates: coordinates must be a sequence of length input.ndim = {len(shape)}; "
                         f"got {len(coordinates)}")
    mode = _ALIASES.get(mode, mode)
    if mode not in _INDEX:
        raise NotImplementedError(f"map_coordinates: mode {mode!r} is not supported; the modes are "
                                  f"{sorted(_INDEX) + sorted(_ALIASES)}")
    if order not in (0, 1):
        raise NotImplementedError(f"map_coordinates: order {order!r} is not supported; order 0 (nearest) and 1 "
                                  "(linear) are, as JAX's")
    dtype = aval(x).dtype
    work = dtype if dtypes.is_inexact(dtype) else np.dtype(np.float64)
    coords = [knp.asarray(c) for c in coordinates]
    coords = [c if dtypes.is_float(aval(c).dtype) else c.astype(work) for c in coords]
    axes = []
    for c, size in zip(coords, shape):
        axis = []
        for index, weight in _nodes(c, order):
            inside = (index >= 0) & (index < size) if mode == "constant" else None
            axis.append((_INDEX[mode](index, size), inside, weight))
        axes.append(axis)
    total = None
    for corner in itertools.product(*axes):
        indices, insides, weights = zip(*corner)
        value = x[tuple(indices)]
        if mode == "constant":
            value = knp.where(functools.reduce(operator.and_, insides), value, knp.asarray(cval).astype(dtype))
        value = value.astype(work)
        present = [w for w in weights if w is not None]
        if present:
            value = functools.reduce(operator.mul, present).astype(work) * value
        total = value if total is None else total + value
    if not dtypes.is_inexact(dtype):
        total = lax.round(total)
    return total.astype(dtype)
