"""Functions whose output shape depends on the data: nonzero, argwhere, flatnonzero, one-argument
where, unique, extract and compress.

On concrete (numpy) inputs they are numpy's functions. On traced inputs the number of results is
only known when the program runs, so the output shape cannot be fixed while tracing: these raise
DataDependentShapeError, unless a static `size=` is given (as in JAX), in which case the first
`size` results are returned and the rest is padded with `fill_value`.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.errors import ConcretizationError
from ..core.trace import Tracer
from ..lax import prims
from ..lax import structural_prims as sp
from ..lax.math_prims import P
from ._base import asarray, aval, convert

_INDEX = np.dtype(np.int64)  # numpy's index dtype (intp), eagerly and traced


class DataDependentShapeError(ConcretizationError, TypeError):
    """A function whose output shape would depend on the values of a traced array."""


def _is_traced(*xs) -> bool:
    return any(isinstance(x, Tracer) for x in xs)


def _data_dependent(fn: str, instead: str):
    return DataDependentShapeError(
        f"{fn} on a traced array is not supported without a static size: its output shape depends on the data "
        f"(known only when the compiled program runs). {instead}")


_NONZERO_HINT = ("Use knp.where(condition, x, y) to keep the input's shape, a concrete (numpy) array, or pass "
                 "size=N (a Python int) to get the first N results padded with fill_value")


def _check_size(fn, size):
    if isinstance(size, Tracer):
        raise TypeError(f"{fn}: size must be a Python int (it fixes the output shape), got a traced value")
    size = int(size)
    if size < 0:
        raise ValueError(f"{fn}: size must be >= 0, got {size}")
    return size


def _full(shape, value, dtype):
    return prims.broadcast_in_dim.bind(np.asarray(value).astype(dtype), shape=tuple(shape), broadcast_dimensions=())


def _iota(n, dtype=_INDEX):
    return prims.iota.bind(shape=(n,), dimension=0, dtype=np.dtype(dtype))


def _pad_concrete(values, size, fill, axis=0):
    """numpy `values` cut or padded along axis 0 to `size` entries of `fill`."""
    values = np.asarray(values)
    n = values.shape[0]
    if n >= size:
        return values[:size]
    pad = np.full((size - n,) + values.shape[1:], fill, dtype=values.dtype)
    return np.concatenate([values, pad.astype(values.dtype)], axis=0)


def _fills(fn, fill_value, ndim):
    """One fill value per dimension (a scalar is used for all)."""
    if fill_value is None:
        return [0] * ndim
    if isinstance(fill_value, (tuple, list)):
        if len(fill_value) != ndim:
            raise ValueError(f"{fn}: fill_value must be a scalar or a tuple of {ndim} values (one per dimension), "
                             f"got {len(fill_value)}")
        return list(fill_value)
    if np.ndim(fill_value) != 0:
        raise ValueError(f"{fn}: fill_value must be a scalar or a tuple of {ndim} values, got shape {np.shape(fill_value)}")
    return [fill_value] * ndim


def _flat_true_positions(mask, size):
    """(positions, count) for a traced 1-D bool mask: the flat positions of the first `size` True elements
    (in order; entries past the count are 0) and the number of True elements (int64 scalar)."""
    n = aval(mask).shape[0]
    ones = convert(mask, _INDEX)
    rank = sp.cumsum_p.bind(ones, axis=0, reverse=False) if n else ones  # 1-based rank of each True element
    # each True element goes to slot rank-1; False elements go to slot `size` (out of range: dropped)
    slot = prims.select.bind(mask, prims.sub.bind(rank, _full((n,), 1, _INDEX)), _full((n,), size, _INDEX))
    positions = sp.scatter_p.bind(_full((size,), 0, _INDEX), prims.reshape.bind(slot, new_shape=(n, 1)), _iota(n),
                                  axes=(0,), update="set", mode="drop")
    count = prims.reduce_sum.bind(ones, axes=(0,))
    return positions, count


def _valid_slots(size, count):
    return prims.lt.bind(_iota(size), prims.broadcast_in_dim.bind(count, shape=(size,), broadcast_dimensions=()))


def _as_mask(x):
    return x if aval(x).dtype == np.bool_ else prims.ne.bind(x, _full(aval(x).shape, 0, aval(x).dtype))


def nonzero(a, *, size=None, fill_value=None):
    """numpy.nonzero: a tuple of int64 index arrays, one per dimension, of the nonzero elements (C order).

    Traced input needs a static size=N (as in jax.numpy.nonzero): the first N indices, padded with
    fill_value (default 0; a scalar or one value per dimension) when there are fewer.
    """
    x = asarray(a)
    shape = aval(x).shape
    if not shape:
        raise ValueError("nonzero: calling nonzero on 0d arrays is not allowed; use knp.atleast_1d(x).nonzero() instead")
    fills = _fills("nonzero", fill_value, len(shape)) if size is not None else None
    if not _is_traced(x):
        out = np.nonzero(x)
        if size is None:
            return out
        size = _check_size("nonzero", size)
        return tuple(_pad_concrete(o, size, f) for o, f in zip(out, fills))
    if size is None:
        raise _data_dependent("nonzero", _NONZERO_HINT)
    size = _check_size("nonzero", size)
    from .shape import reshape

    mask = reshape(_as_mask(x), (-1,))
    flat, count = _flat_true_positions(mask, size)
    valid = _valid_slots(size, count)
    out = []
    for d in reversed(range(len(shape))):  # unravel the flat position, last dimension first
        n = shape[d]
        if n:
            coord = prims.sub.bind(flat, prims.mul.bind(prims.div.bind(flat, _full((size,), n, _INDEX)),
                                                        _full((size,), n, _INDEX)))
            flat = prims.div.bind(flat, _full((size,), n, _INDEX))
        else:
            coord = _full((size,), 0, _INDEX)
        out.append(prims.select.bind(valid, coord, _full((size,), fills[d], _INDEX)))
    return tuple(reversed(out))


def flatnonzero(a, *, size=None, fill_value=None):
    """numpy.flatnonzero: int64 indices of the nonzero elements of the flattened array (traced: size=N)."""
    from .shape import ravel

    x = asarray(a)
    if not _is_traced(x):
        out = np.flatnonzero(x)
        return out if size is None else _pad_concrete(out, _check_size("flatnonzero", size), _fills("flatnonzero", fill_value, 1)[0])
    if size is None:
        raise _data_dependent("flatnonzero", _NONZERO_HINT)
    return nonzero(ravel(x), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """numpy.argwhere: (N, ndim) int64 indices of the nonzero elements (traced: size=N, as in JAX)."""
    x = asarray(a)
    nd = aval(x).ndim
    if not _is_traced(x):
        out = np.argwhere(x)
        if size is None:
            return out
        size = _check_size("argwhere", size)
        fills = _fills("argwhere", fill_value, nd)
        out = _pad_concrete(out, size, 0)
        n = min(size, int(np.count_nonzero(x)))
        for d, f in enumerate(fills):
            out[n:, d] = f
        return out
    if size is None:
        raise _data_dependent("argwhere", _NONZERO_HINT)
    size = _check_size("argwhere", size)
    if nd == 0:
        return _full((size, 0), 0, _INDEX)
    from .shape import stack

    return stack(nonzero(x, size=size, fill_value=fill_value), axis=1)


def where_one_arg(condition, size, fill_value):
    """knp.where(condition): nonzero(condition)."""
    c = asarray(condition)
    if _is_traced(c) and size is None:
        raise _data_dependent(
            "where(condition) with one argument (it is nonzero(condition))",
            "Use the three-argument knp.where(condition, x, y) to keep the input's shape, a concrete (numpy) "
            "condition, or knp.where(condition, size=N) to get the first N indices padded with fill_value")
    return nonzero(c, size=size, fill_value=fill_value)


def _fill_selected(values, valid, fill_value, dtype):
    va = aval(values)
    valid = prims.broadcast_in_dim.bind(valid, shape=va.shape, broadcast_dimensions=(0,))
    return prims.select.bind(valid, values, _full(va.shape, fill_value, dtype))


def extract(condition, arr, *, size=None, fill_value=0):
    """numpy.extract: the elements of ravel(arr) where ravel(condition) is nonzero.

    Traced input needs a static size=N (as in jax.numpy.extract): the first N such elements, padded with
    fill_value (default 0).
    """
    from .shape import ravel

    c, x = asarray(condition), asarray(arr)
    if not _is_traced(c, x):
        out = np.extract(c, x)
        return out if size is None else _pad_concrete(out, _check_size("extract", size), fill_value)
    if size is None:
        raise _data_dependent("extract", "Use knp.where(condition, arr, fill) to keep the shape, a concrete (numpy) "
                                         "condition, or size=N to get the first N elements padded with fill_value")
    size = _check_size("extract", size)
    c, x = ravel(c), ravel(x)
    n, m = aval(c).shape[0], aval(x).shape[0]
    if n > m:
        raise ValueError(f"extract: condition has {n} elements but arr only {m}")
    mask = _as_mask(c)
    flat, count = _flat_true_positions(mask, size)
    taken = sp.gather_p.bind(x, prims.reshape.bind(flat, new_shape=(size, 1)), axes=(0,), mode="clip") if m else \
        _full((size,), 0, aval(x).dtype)
    return _fill_selected(taken, _valid_slots(size, count), fill_value, aval(x).dtype)


def compress(condition, a, axis=None, *, size=None, fill_value=0):
    """numpy.compress: the slices of `a` along axis (the flattened array if None) where the 1-D condition is
    nonzero; a shorter condition leaves the remaining slices out.

    Traced input needs a static size=N (as in jax.numpy.compress): N slices, padded with fill_value.
    """
    from .shape import moveaxis, ravel

    c, x = asarray(condition), asarray(a)
    if not _is_traced(c, x):
        out = np.compress(c, x, axis=axis)
        if size is None:
            return out
        size = _check_size("compress", size)
        ax = 0 if axis is None else axis
        return np.moveaxis(_pad_concrete(np.moveaxis(out, ax, 0), size, fill_value), 0, ax)
    if size is None:
        raise _data_dependent("compress", "Use knp.where(condition, a, fill) with a broadcast condition to keep the "
                                          "shape, a concrete (numpy) condition, or size=N to get N slices padded "
                                          "with fill_value")
    size = _check_size("compress", size)
    if aval(c).ndim != 1:
        raise ValueError(f"compress: condition must be a 1-d array, got shape {aval(c).shape}")
    if axis is None:
        x, axis = ravel(x), 0
    from ._base import normalize_axes

    (ax,) = normalize_axes(axis, aval(x).ndim, "compress")
    n, m = aval(c).shape[0], aval(x).shape[ax]
    if n > m:
        raise ValueError(f"compress: condition has {n} elements but axis {ax} only {m}; with a traced condition "
                         "kiln cannot check that the extra elements are False, so cut the condition to the axis length")
    flat, count = _flat_true_positions(_as_mask(c), size)
    moved = moveaxis(x, ax, 0)
    if m:
        taken = sp.gather_p.bind(moved, prims.reshape.bind(flat, new_shape=(size, 1)), axes=(0,), mode="clip")
    else:
        taken = _full((size,) + aval(moved).shape[1:], 0, aval(x).dtype)
    return moveaxis(_fill_selected(taken, _valid_slots(size, count), fill_value, aval(x).dtype), 0, ax)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           size=None, fill_value=None):
    """numpy.unique (sorted unique values; return_index/return_inverse/return_counts as in numpy).

    Traced input needs a static size=N (as in jax.numpy.unique) and axis=None: the N smallest unique
    values, padded with fill_value (default: the smallest unique value); the padded entries of the
    index output are 0 and of the counts 0. NaNs count as one value when equal_nan (the default).
    """
    x = asarray(ar)
    if size is not None and axis is not None:
        raise NotImplementedError("unique: size= together with axis= is not supported; use axis=None (the flattened array)")
    if not _is_traced(x):
        out = np.unique(x, return_index=return_index, return_inverse=return_inverse, return_counts=return_counts,
                        axis=axis, equal_nan=equal_nan)
        if size is None:
            return out
        size = _check_size("unique", size)
        parts = list(out) if isinstance(out, tuple) else [out]
        vals = parts[0]
        fill = vals[0] if fill_value is None and vals.size else (0 if fill_value is None else fill_value)
        parts[0] = _pad_concrete(vals, size, fill)
        k = 1
        if return_index:
            parts[k] = _pad_concrete(parts[k], size, 0)
            k += 1
        if return_inverse:
            k += 1
        if return_counts:
            parts[k] = _pad_concrete(parts[k], size, 0)
        return parts[0] if len(parts) == 1 else tuple(parts)
    if size is None:
        raise _data_dependent("unique", "Use a concrete (numpy) array, or size=N (a Python int) to get the N "
                                        "smallest unique values padded with fill_value")
    size = _check_size("unique", size)
    return _unique_traced(x, return_index, return_inverse, return_counts, equal_nan, size, fill_value)


def _unique_traced(x, return_index, return_inverse, return_counts, equal_nan, size, fill_value):
    from .shape import reshape

    shape = aval(x).shape
    dt = aval(x).dtype
    flat = reshape(x, (-1,))
    n = aval(flat).shape[0]
    iota = _iota(n)
    if n == 0:
        vals = _full((size,), 0 if fill_value is None else fill_value, dt)
        outs = [vals]
        if return_index:
            outs.append(_full((size,), 0, _INDEX))
        if return_inverse:
            outs.append(_full(shape, 0, _INDEX))
        if return_counts:
            outs.append(_full((size,), 0, _INDEX))
        return outs[0] if len(outs) == 1 else tuple(outs)
    svals, perm = sp.sort_p.bind(flat, iota, dimension=0, num_keys=2)  # stable: equal values keep their order
    # start of each run of equal values (NaNs form one run when equal_nan)
    prev = sp.pad_p.bind(sp.slice_p.bind(svals, start_indices=(0,), limit_indices=(n - 1,), strides=(1,)),
                         padding_config=((1, 0, 0),), padding_value=sp._scalar_for(dt, 0))
    differs = prims.ne.bind(svals, prev)
    if dtypes.is_float(dt) and equal_nan:
        both_nan = _and(prims.ne.bind(svals, svals), prims.ne.bind(prev, prev))
        differs = _and(differs, _not(both_nan))
    first = prims.eq.bind(iota, _full((n,), 0, _INDEX))
    starts = _or(differs, first)
    group = prims.sub.bind(sp.cumsum_p.bind(convert(starts, _INDEX), axis=0, reverse=False), _full((n,), 1, _INDEX))
    count = prims.add.bind(prims.reduce_max.bind(group, axes=(0,)), np.asarray(1, _INDEX))
    # slot of each run start: its group number when it fits in `size`, else dropped
    slot = prims.select.bind(starts, group, _full((n,), size, _INDEX))
    slot2 = prims.reshape.bind(slot, new_shape=(n, 1))
    valid = _valid_slots(size, count)
    vals = sp.scatter_p.bind(_full((size,), 0, dt), slot2, svals, axes=(0,), update="set", mode="drop")
    if fill_value is None:  # the smallest unique value, as in JAX
        smallest = prims.reshape.bind(sp.slice_p.bind(svals, start_indices=(0,), limit_indices=(1,), strides=(1,)),
                                      new_shape=())
        fill = prims.broadcast_in_dim.bind(smallest, shape=(size,), broadcast_dimensions=())
    else:
        fill = _full((size,), fill_value, dt)
    vals = prims.select.bind(valid, vals, fill)
    outs = [vals]
    if return_index:
        # the first element of each run in the stable sort has the smallest original index
        outs.append(sp.scatter_p.bind(_full((size,), 0, _INDEX), slot2, perm, axes=(0,), update="set", mode="drop"))
    if return_inverse:
        inv = sp.scatter_p.bind(_full((n,), 0, _INDEX), prims.reshape.bind(perm, new_shape=(n, 1)), group, axes=(0,),
                                update="set", mode="drop")
        outs.append(prims.reshape.bind(inv, new_shape=shape) if shape != (n,) else inv)
    if return_counts:
        outs.append(sp.scatter_p.bind(_full((size,), 0, _INDEX), prims.reshape.bind(group, new_shape=(n, 1)),
                                      _full((n,), 1, _INDEX), axes=(0,), update="add", mode="drop"))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _and(p, q):
    return P["and"].bind(p, q)


def _or(p, q):
    return P["or"].bind(p, q)


def _not(p):
    return P["not"].bind(p)


__all__ = ["DataDependentShapeError", "nonzero", "flatnonzero", "argwhere", "extract", "compress", "unique"]
