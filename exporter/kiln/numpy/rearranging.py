"""Rearranging and combining arrays: append/insert/delete, block, column_stack/row_stack/dstack,
hsplit/vsplit/dsplit, rot90, rollaxis, broadcast_arrays/broadcast_shapes, put_along_axis, trim_zeros.

Positions and sizes are static, as shapes are; the arrays may be traced. Functions that would write in
place in numpy (put_along_axis) return a new array and, as in jax.numpy, need inplace=False.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer
from ._base import asarray, aval, broadcast_shapes as _broadcast_shapes, broadcast_to, convert, normalize_axes
from .elementwise import where
from .indexing import at, take
from .shape import concatenate, flip, moveaxis, ravel, reshape, split, transpose, vstack


def _axis(axis, ndim, name):
    return normalize_axes(axis, ndim, name)[0]


def append(arr, values, axis=None):
    """numpy.append: values joined after arr (both flattened when axis is None)."""
    x, v = asarray(arr), asarray(values)
    if axis is None:
        return concatenate([ravel(x), ravel(v)])
    return concatenate([x, v], axis=axis)


def _static_positions(obj, n, name):
    if isinstance(obj, Tracer):
        raise TypeError(f"{name}: the positions `obj` must be concrete (the output shape depends on them); "
                        "pass a Python int, slice or a numpy array")
    if isinstance(obj, slice):
        return np.arange(n)[obj], False
    positions = np.asarray(obj)
    if positions.dtype == np.bool_:
        if positions.shape != (n,):
            raise ValueError(f"{name}: a boolean `obj` must have the axis length {n}, got shape {positions.shape}")
        return np.nonzero(positions)[0], False
    if positions.dtype.kind not in "iu" and positions.size:
        raise IndexError(f"{name}: positions must be integers, got {positions.dtype}")
    return positions.astype(np.int64), positions.ndim == 0


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """numpy.delete: positions given as an int, slice, sequence or boolean mask. Traced positions (as in
    jax.numpy) are a scalar, or an integer array with assume_unique_indices=True (so the result's length is
    known); traced positions out of range delete nothing."""
    x = asarray(arr)
    if axis is None:
        x, axis = ravel(x), 0
    ax = _axis(axis, aval(x).ndim, "delete")
    n = aval(x).shape[ax]
    if isinstance(obj, Tracer):
        return _delete_traced(x, obj, ax, n, assume_unique_indices)
    positions, _ = _static_positions(obj, n, "delete")
    if positions.size and (positions.min() < -n or positions.max() >= n):
        bad = positions.min() if positions.min() < -n else positions.max()
        raise IndexError(f"delete: index {bad} is out of bounds for axis {ax} with size {n}")
    keep = np.ones(n, np.bool_)
    keep[positions % n if n else positions] = False
    return take(x, np.nonzero(keep)[0], axis=ax)


def _delete_traced(x, obj, ax, n, unique):
    from .selection import nonzero

    if not dtypes.is_int(aval(obj).dtype):
        raise TypeError(f"delete: traced positions must be integers, got {aval(obj).dtype}")
    if aval(obj).ndim > 0 and not unique:
        raise ValueError("delete: traced positions must be a scalar, or an array with assume_unique_indices=True "
                         "(the result's length must not depend on repeated values)")
    flat = ravel(obj)
    keep = at(np.ones(n, np.bool_))[flat].set(np.zeros(aval(flat).shape, np.bool_))
    (kept,) = nonzero(keep, size=n - aval(flat).shape[0])
    return take(x, kept, axis=ax)


def insert(arr, obj, values, axis=None):
    """numpy.insert: an int inserts values as a block before that index, a sequence or slice inserts one
    slice of values before each position; values take arr's dtype. A traced index (as in jax.numpy) must be
    a scalar; out of range it is clamped into [0, n]."""
    x = asarray(arr)
    if axis is None:
        x, axis = ravel(x), 0
    nd = aval(x).ndim
    ax = _axis(axis, nd, "insert")
    n = aval(x).shape[ax]
    if isinstance(obj, Tracer):
        return _insert_traced(x, obj, values, ax, n)
    positions, scalar = _static_positions(obj, n, "insert")
    if positions.size and (positions.min() < -n or positions.max() > n):
        bad = positions.min() if positions.min() < -n else positions.max()
        raise IndexError(f"insert: index {bad} is out of bounds for axis {ax} with size {n}")
    positions = np.where(positions < 0, positions + n, positions)
    v = convert(asarray(values), aval(x).dtype)
    if aval(v).ndim < nd:
        v = reshape(v, (1,) * (nd - aval(v).ndim) + aval(v).shape)
    if scalar:  # numpy: values go in as a block of their own length along axis
        v = moveaxis(v, 0, ax)
        count = aval(v).shape[ax]
        positions = np.full(count, positions.item())
    else:
        count = positions.size
    slab = list(aval(x).shape)
    slab[ax] = count
    v = broadcast_to(v, tuple(slab))
    order = np.argsort(positions, kind="stable")
    new_at = positions[order] + np.arange(count)
    source = np.empty(n + count, np.int64)
    is_new = np.zeros(n + count, np.bool_)
    is_new[new_at] = True
    source[new_at] = n + order
    source[~is_new] = np.arange(n)
    return take(concatenate([x, v], axis=ax), source, axis=ax)


def _insert_traced(x, obj, values, ax, n):
    """insert at a traced scalar index: every output position reads arr or values through one gather."""
    from .elementwise import add, greater_equal, less, subtract
    from .math import clip, logical_and

    if aval(obj).ndim != 0 or not dtypes.is_int(aval(obj).dtype):
        raise TypeError("insert: a traced index must be an integer scalar (the result's length must not depend "
                        "on its values)")
    nd = aval(x).ndim
    v = convert(asarray(values), aval(x).dtype)
    if aval(v).ndim < nd:
        v = reshape(v, (1,) * (nd - aval(v).ndim) + aval(v).shape)
    v = moveaxis(v, 0, ax)
    count = aval(v).shape[ax]
    slab = list(aval(x).shape)
    slab[ax] = count
    v = broadcast_to(v, tuple(slab))
    i = convert(obj, np.int64)
    i = clip(where(less(i, 0), add(i, n), i), 0, n)
    p = np.arange(n + count)
    is_new = logical_and(greater_equal(p, i), less(p, add(i, count)))
    source = where(is_new, add(subtract(p, i), n), where(less(p, i), p, subtract(p, count)))
    return take(concatenate([x, v], axis=ax), source, axis=ax)


def block(arrays):
    """numpy.block: nested lists of arrays joined along the last axis at the innermost level, the one before
    it a level up, and so on; every block first gets the result's number of dimensions (leading 1s)."""
    depth = _list_depth(arrays, ())
    leaves = list(_leaves(arrays))
    nd = max([depth] + [aval(asarray(x)).ndim for x in leaves])

    def build(item, level):
        if isinstance(item, list):
            return concatenate([build(e, level + 1) for e in item], axis=level - depth)
        x = asarray(item)
        return reshape(x, (1,) * (nd - aval(x).ndim) + aval(x).shape)

    return build(arrays, 0)


def _list_depth(item, where):
    if isinstance(item, tuple):
        raise TypeError(f"block: arrays{''.join(f'[{i}]' for i in where)} is a tuple; only lists can be used to "
                        "arrange blocks")
    if not isinstance(item, list):
        return 0
    if not item:
        raise ValueError(f"block: list arrays{''.join(f'[{i}]' for i in where)} cannot be empty")
    depths = [_list_depth(e, where + (i,)) for i, e in enumerate(item)]
    if len(set(depths)) != 1:
        raise ValueError(f"block: list depths are mismatched inside arrays{''.join(f'[{i}]' for i in where)}")
    return 1 + depths[0]


def _leaves(item):
    if isinstance(item, list):
        for e in item:
            yield from _leaves(e)
    else:
        yield item


def atleast_3d(*arys):
    """numpy.atleast_3d: (N,) becomes (1, N, 1) and (M, N) becomes (M, N, 1)."""
    out = []
    for a in arys:
        x = asarray(a)
        shape = aval(x).shape
        if len(shape) == 0:
            x = reshape(x, (1, 1, 1))
        elif len(shape) == 1:
            x = reshape(x, (1, shape[0], 1))
        elif len(shape) == 2:
            x = reshape(x, shape + (1,))
        out.append(x)
    return out[0] if len(out) == 1 else tuple(out)


def column_stack(tup):
    """numpy.column_stack: 1-D arrays become columns, then everything joins along axis 1."""
    cols = []
    for a in tup:
        x = asarray(a)
        cols.append(reshape(x, (aval(x).size, 1)) if aval(x).ndim < 2 else x)
    return concatenate(cols, axis=1)


def row_stack(tup):
    """numpy.row_stack: vstack."""
    return vstack(tup)


def dstack(tup):
    """numpy.dstack: joined along the third axis after atleast_3d."""
    return concatenate([atleast_3d(a) for a in tup], axis=2)


def _split_along(name, ary, sections, axis, min_ndim):
    x = asarray(ary)
    if aval(x).ndim < min_ndim:
        raise ValueError(f"{name} only works on arrays of {min_ndim} or more dimensions, got shape {aval(x).shape}")
    return split(x, sections, axis)


def hsplit(ary, indices_or_sections):
    """numpy.hsplit: split along axis 1 (axis 0 for 1-D arrays)."""
    x = asarray(ary)
    if aval(x).ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(x, indices_or_sections, 1 if aval(x).ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    return _split_along("vsplit", ary, indices_or_sections, 0, 2)


def dsplit(ary, indices_or_sections):
    return _split_along("dsplit", ary, indices_or_sections, 2, 3)


def rot90(m, k=1, axes=(0, 1)):
    """numpy.rot90: k quarter turns from the first toward the second of `axes`."""
    x = asarray(m)
    nd = aval(x).ndim
    axes = tuple(axes)
    if len(axes) != 2:
        raise ValueError("rot90: len(axes) must be 2")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == nd:
        raise ValueError("rot90: axes must be different")
    a0, a1 = (_axis(a, nd, "rot90") for a in axes)
    k = int(k) % 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a0), a1)
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return transpose(flip(x, a1), perm) if k == 1 else flip(transpose(x, perm), a1)


def rollaxis(a, axis, start=0):
    """numpy.rollaxis: axis moved to sit before position start (numpy's older moveaxis)."""
    x = asarray(a)
    n = aval(x).ndim
    ax = _axis(axis, n, "rollaxis")
    start = int(start)
    if not -n <= start <= n:
        raise ValueError(f"rollaxis: 'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in")
    start = start + n if start < 0 else start
    if ax < start:
        start -= 1
    if ax == start:
        return x
    order = [i for i in range(n) if i != ax]
    order.insert(start, ax)
    return transpose(x, order)


def broadcast_shapes(*shapes):
    """numpy.broadcast_shapes: the shape that all these shapes broadcast to."""
    norm = [(int(s),) if isinstance(s, (int, np.integer)) else tuple(int(d) for d in s) for s in shapes]
    return _broadcast_shapes(*norm, where="broadcast_shapes")


def broadcast_arrays(*args):
    """numpy.broadcast_arrays: the arrays broadcast to their common shape (a tuple, as numpy 2)."""
    xs = [asarray(a) for a in args]
    shape = _broadcast_shapes(*[aval(x).shape for x in xs], where="broadcast_arrays")
    return tuple(broadcast_to(x, shape) for x in xs)


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """numpy.put_along_axis, returning a new array: as in jax.numpy the call must say inplace=False. Indices
    broadcast against arr over the other axes (axis=None: the flattened array); traced out-of-range
    indices are dropped (as x.at[].set), jax.numpy's default; mode= 'drop' (or None) only."""
    if mode not in (None, "drop"):
        raise ValueError(f"put_along_axis: mode must be None or 'drop', got {mode!r}")
    if inplace:
        raise ValueError("put_along_axis: kiln arrays are immutable, so values cannot be put in place; call "
                         "put_along_axis(arr, indices, values, axis, inplace=False) and use the array it returns")
    x = asarray(arr)
    idx = indices if isinstance(indices, Tracer) else np.asarray(indices)
    if axis is None:
        flat = ravel(x)
        return reshape(at(flat)[ravel(idx)].set(ravel(broadcast_to(asarray(values), aval(idx).shape))),
                       aval(x).shape)
    nd = aval(x).ndim
    ax = _axis(axis, nd, "put_along_axis")
    if aval(idx).ndim != nd:
        raise ValueError(f"put_along_axis: `indices` and `arr` must have the same number of dimensions, got "
                         f"{aval(idx).ndim} and {nd}")
    shape = tuple(aval(idx).shape[d] if d == ax else _broadcast_shapes((aval(idx).shape[d],), (aval(x).shape[d],),
                                                                        where="put_along_axis")[0] for d in range(nd))
    key = []
    for d in range(nd):
        if d == ax:
            key.append(broadcast_to(idx, shape))
        else:
            grid = np.arange(shape[d]).reshape([-1 if k == d else 1 for k in range(nd)])
            key.append(np.broadcast_to(grid, shape))
    return at(x)[tuple(key)].set(broadcast_to(convert(asarray(values), aval(x).dtype), shape))


def trim_zeros(filt, trim="fb", axis=None):
    """numpy.trim_zeros: leading ('f') and/or trailing ('b') zeros cut off. The result's length depends on
    the values, so filt must be concrete."""
    if isinstance(filt, Tracer):
        from .selection import DataDependentShapeError

        raise DataDependentShapeError("trim_zeros: its output shape depends on the data, so a traced array cannot "
                                      "be trimmed; trim the concrete array, or keep the shape with knp.where")
    if trim not in ("f", "b", "fb", "bf", "F", "B", "FB", "BF"):
        raise ValueError(f"trim_zeros: unexpected character(s) in `trim`: {trim!r}")
    return np.trim_zeros(np.asarray(filt), trim) if axis is None else np.trim_zeros(np.asarray(filt), trim, axis)


__all__ = [
    "append", "delete", "insert", "block", "atleast_3d", "column_stack", "row_stack", "dstack", "hsplit", "vsplit",
    "dsplit", "rot90", "rollaxis", "broadcast_shapes", "broadcast_arrays", "put_along_axis", "trim_zeros",
]
