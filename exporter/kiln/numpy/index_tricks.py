"""numpy's index helpers: mgrid, ogrid, r_, c_, s_, index_exp, mask_indices, and put/place (which return the
new array: kiln arrays are immutable, so as in jax.numpy they need inplace=False).

mgrid and ogrid depend only on their (static) slices: they are numpy's arrays, weakly typed when traced
(as knp.arange). r_ and c_ join traced arrays too.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer, current_graph_trace
from ._base import asarray, aval, convert
from .creation import _weak
from .indexing import at, take
from .shape import concatenate, ravel, reshape

s_ = np.s_
index_exp = np.index_exp


def _constant(values):
    out = np.asarray(values)
    return _weak(out)


class _Grid:
    """mgrid / ogrid: numpy's grids of the slices' values (a complex step is a number of points)."""

    def __init__(self, sparse):
        self._numpy = np.ogrid if sparse else np.mgrid
        self._name = "ogrid" if sparse else "mgrid"

    def __getitem__(self, key):
        for part in (key if isinstance(key, tuple) else (key,)):
            if isinstance(part, slice) and any(isinstance(v, Tracer) for v in (part.start, part.stop, part.step)):
                raise TypeError(f"{self._name}: slice bounds must be Python numbers (the grid's shape depends on them)")
        out = self._numpy[key]
        return tuple(_constant(g) for g in out) if isinstance(out, (tuple, list)) else _constant(out)


mgrid = _Grid(sparse=False)
ogrid = _Grid(sparse=True)


class _Concatenator:
    """r_ / c_: slices become ranges (numpy's rules), numbers one-element arrays, arrays at least 1-D, joined
    along the axis of a leading directive string ('0', '-1', ... ; c_ joins columns)."""

    def __init__(self, columns):
        self._columns = columns
        self._name = "c_" if columns else "r_"

    def __getitem__(self, key):
        items = list(key) if isinstance(key, tuple) else [key]
        axis = -1 if self._columns else 0
        if items and isinstance(items[0], str):
            directive = items.pop(0)
            try:
                axis = int(directive.split(",")[0])
            except ValueError:
                raise ValueError(f"{self._name}: only an integer axis directive such as '0' or '-1' is supported, "
                                 f"got {directive!r}") from None
        if not items:
            return np.zeros(0)
        from .aliases import result_type

        raw = [np.r_[v] if isinstance(v, slice) else v if dtypes.is_python_scalar(v) else asarray(v) for v in items]
        target = result_type(*raw)
        parts = []
        for v in raw:
            x = convert(asarray(v), target)
            if aval(x).ndim == 0:
                x = reshape(x, (1, 1) if self._columns else (1,))
            elif self._columns and aval(x).ndim == 1:
                x = reshape(x, (aval(x).shape[0], 1))
            parts.append(x)
        return concatenate(parts, axis=axis)


r_ = _Concatenator(columns=False)
c_ = _Concatenator(columns=True)


def mask_indices(n, mask_func, k=0, *, size=None):
    """numpy.mask_indices: the (rows, cols) where mask_func(ones((n, n)), k) is nonzero (numpy arrays: they
    depend on n, k and the function only)."""
    from .shape import tril, triu

    mask_func = {triu: np.triu, tril: np.tril}.get(getattr(mask_func, "__kiln_unwrapped__", mask_func), mask_func)  # numpy's own, so traced code gets constants
    mask = mask_func(np.ones((int(n), int(n)), int), k)
    if isinstance(mask, Tracer):
        raise TypeError("mask_indices: mask_func gave a traced array; inside a traced function pass a numpy function "
                        "(np.triu) or call mask_indices outside it: the indices depend on n and k only")
    rows, cols = np.nonzero(np.asarray(mask) != 0)
    if size is not None:  # jax.numpy's size=: the first `size` pairs, padded with 0
        rows, cols = (np.pad(v[:size], (0, max(size - v.size, 0))) for v in (rows, cols))
    return rows, cols


def put(a, ind, v, mode=None, *, inplace=True):
    """numpy.put, returning the new array (say inplace=False, as jax.numpy): the flattened a gets v (repeated
    as needed) at ind. mode 'raise' (concrete indices), 'wrap', 'clip'; the default raises for concrete
    out-of-range indices and drops traced ones, as x.at[].set."""
    if inplace:
        raise ValueError("put: kiln arrays are immutable, so values cannot be put in place; call "
                         "put(a, ind, v, inplace=False) and use the array it returns")
    if mode not in (None, "raise", "wrap", "clip"):
        raise ValueError(f"put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    x = asarray(a)
    flat = ravel(x)
    size = aval(flat).shape[0]
    idx = ind if isinstance(ind, Tracer) else np.asarray(ind)
    idx = ravel(asarray(idx))
    if mode == "wrap":
        from .math import remainder

        idx = remainder(idx, size)
    elif mode == "clip":
        from .math import clip

        idx = clip(idx, 0, size - 1)
    elif mode == "raise" and isinstance(idx, Tracer):
        raise ValueError("put: mode='raise' needs concrete indices (a traced index cannot raise); pass mode='clip' "
                         "or 'wrap', or leave mode=None to drop out-of-range traced indices")
    values = ravel(convert(asarray(v), aval(x).dtype))
    count, given = aval(idx).shape[0], aval(values).shape[0]
    if given == 0:
        return x
    values = take(values, np.arange(count) % given)
    return reshape(at(flat)[idx].set(values), aval(x).shape)


def place(arr, mask, vals, *, inplace=True):
    """numpy.place, returning the new array (say inplace=False, as jax.numpy): the elements where mask is
    True take vals in order, repeated as needed. The mask may be traced."""
    if inplace:
        raise ValueError("place: kiln arrays are immutable, so values cannot be placed in place; call "
                         "place(arr, mask, vals, inplace=False) and use the array it returns")
    from .elementwise import subtract, where
    from .reductions import cumsum

    x = asarray(arr)
    m = asarray(mask)
    if aval(m).shape != aval(x).shape:
        raise ValueError(f"place: mask and data must be the same size, got shapes {aval(m).shape} and {aval(x).shape}")
    m = convert(m, np.bool_)
    values = ravel(convert(asarray(vals), aval(x).dtype))
    given = aval(values).shape[0]
    if given == 0:
        if not isinstance(m, Tracer) and not np.any(m):
            return x
        raise ValueError("place: cannot insert from an empty array")
    order = cumsum(ravel(convert(m, np.int64)))
    from .math import remainder

    picked = take(values, remainder(subtract(order, 1), given))
    return where(m, reshape(picked, aval(x).shape), x)


__all__ = ["mgrid", "ogrid", "r_", "c_", "s_", "index_exp", "mask_indices", "put", "place"]
