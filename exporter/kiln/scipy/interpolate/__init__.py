"""kiln.scipy.interpolate: RegularGridInterpolator (JAX's jax.scipy.interpolate), linear and nearest
interpolation on a rectilinear grid of any dimension.

The interpolator is a pytree (its grid, values and fill value are leaves), so it can be passed into
kiln.jit functions and vmapped like JAX's.
"""
from __future__ import annotations

import itertools

import numpy as np

from ... import numpy as knp
from ...core import dtypes
from ...core.pytree import register_pytree_node
from ...numpy._base import aval, promote_inexact

__all__ = ["RegularGridInterpolator"]

_METHODS = ("linear", "nearest")


class RegularGridInterpolator:
    """scipy.interpolate.RegularGridInterpolator(points, values, method="linear", bounds_error=False,
    fill_value=nan): points are the strictly ascending coordinates of each of values' first len(points)
    axes (later axes are carried along). A query outside the grid gives fill_value, or with fill_value=None
    is extrapolated from the edge cells. bounds_error=True is refused, as JAX does (a traced query cannot
    raise)."""

    def __init__(self, points, values, method="linear", bounds_error=False, fill_value=np.nan):
        if method not in _METHODS:
            raise ValueError(f"RegularGridInterpolator: method must be 'linear' or 'nearest'; got {method!r}")
        if bounds_error:
            raise NotImplementedError("RegularGridInterpolator: bounds_error=True is not supported (a query inside "
                                      "kiln.jit cannot raise); check bounds before calling, or give a fill_value")
        values = knp.asarray(values)
        if not dtypes.is_inexact(aval(values).dtype):
            values = values.astype(np.float64)
        if len(points) > aval(values).ndim:
            raise ValueError(f"RegularGridInterpolator: there are {len(points)} point arrays, but values has "
                             f"{aval(values).ndim} dimensions")
        grid = []
        for axis, p in enumerate(points):
            p = knp.asarray(p)
            if aval(p).ndim != 1:
                raise ValueError(f"RegularGridInterpolator: the points in dimension {axis} must be 1-dimensional")
            if aval(p).shape[0] != aval(values).shape[axis]:
                raise ValueError(f"RegularGridInterpolator: there are {aval(p).shape[0]} points and "
                                 f"{aval(values).shape[axis]} values in dimension {axis}")
            if aval(p).shape[0] < 1:
                raise ValueError(f"RegularGridInterpolator: dimension {axis} has no points")
            if isinstance(p, np.ndarray) and np.any(np.diff(p) <= 0):
                raise ValueError(f"RegularGridInterpolator: the points in dimension {axis} must be strictly "
                                 "ascending")
            grid.append(p)
        self.grid = tuple(grid)
        self.values = values
        self.method = method
        self.bounds_error = bounds_error
        self.fill_value = fill_value

    def __call__(self, xi, method=None):
        """The interpolated values at xi: an array (..., ndim) of points, or a tuple of ndim coordinate arrays
        that broadcast together. A 1-d xi is read as consecutive points of ndim coordinates (scipy's and JAX's
        rule: one point (ndim,) gives one value of shape (1,); a 1-d grid's xi (k,) gives k values)."""
        method = self.method if method is None else method
        if method not in _METHODS:
            raise ValueError(f"RegularGridInterpolator: method must be 'linear' or 'nearest'; got {method!r}")
        ndim = len(self.grid)
        if isinstance(xi, (tuple, list)):
            coords = knp.broadcast_arrays(*[knp.asarray(c) for c in xi])
            if len(coords) != ndim:
                raise ValueError(f"RegularGridInterpolator: the query has {len(coords)} coordinates; the grid has "
                                 f"{ndim} dimensions")
            xi = knp.stack(coords, axis=-1)
        xi = knp.asarray(xi)
        if aval(xi).ndim == 1 and aval(xi).shape[0] % ndim == 0:  # scipy's and JAX's: points of ndim coordinates
            xi = xi.reshape(-1, ndim)
        if aval(xi).ndim == 0 or aval(xi).shape[-1] != ndim:
            raise ValueError(f"RegularGridInterpolator: the requested points have dimension "
                             f"{aval(xi).shape[-1] if aval(xi).ndim else 0}, but this interpolator has dimension {ndim}")
        values = self.values
        xi, _ = promote_inexact(xi, knp.zeros((), aval(values).dtype))
        query_shape = aval(xi).shape[:-1]
        flat = xi.reshape(-1, ndim)
        indices, weights, outside = [], [], None
        for axis, g in enumerate(self.grid):
            x = flat[:, axis]
            g = g.astype(aval(x).dtype)
            n = aval(g).shape[0]
            i = knp.clip(knp.searchsorted(g, x, side="right") - 1, 0, max(n - 2, 0))
            if n > 1:
                t = (x - g[i]) / (g[i + 1] - g[i])
            else:
                t = knp.zeros_like(x)
            indices.append(i)
            weights.append(t)
            beyond = (x < g[0]) | (x > g[n - 1]) | knp.isnan(x)
            outside = beyond if outside is None else outside | beyond
        extra = aval(values).shape[ndim:]
        if method == "nearest":
            corner = tuple(knp.where(t <= 0.5, i, knp.minimum(i + 1, aval(g).shape[0] - 1))
                           for i, t, g in zip(indices, weights, self.grid))
            result = values[corner]
        else:
            result = None
            for corner in itertools.product((0, 1), repeat=ndim):
                index, weight = [], None
                for axis, side in enumerate(corner):
                    n = aval(self.grid[axis]).shape[0]
                    t = weights[axis]
                    index.append(knp.minimum(indices[axis] + side, n - 1))
                    w = t if side else 1 - t
                    weight = w if weight is None else weight * w
                term = values[tuple(index)] * weight.reshape(weight.shape + (1,) * len(extra)).astype(aval(values).dtype)
                result = term if result is None else result + term
        if self.fill_value is not None:
            fill = knp.asarray(self.fill_value).astype(aval(result).dtype)
            result = knp.where(outside.reshape(outside.shape + (1,) * len(extra)), fill, result)
        return result.reshape(query_shape + extra)


register_pytree_node(
    RegularGridInterpolator,
    lambda r: ((r.grid, r.values, r.fill_value), (r.method, r.bounds_error)),
    lambda aux, children: _rebuild(aux, children),
)


def _rebuild(aux, children):
    grid, values, fill_value = children
    out = object.__new__(RegularGridInterpolator)
    out.grid, out.values, out.fill_value = tuple(grid), values, fill_value
    out.method, out.bounds_error = aux
    return out
