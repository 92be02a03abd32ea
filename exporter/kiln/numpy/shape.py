"""Shape manipulation: reshape, transpose, broadcasting, joining, splitting, tiling, flipping, padding."""
from __future__ import annotations

import numpy as np

from ..core.trace import Tracer
from ..lax import prims
from ..lax import structural_prims as sp
from ._base import asarray, aval, broadcast_to as _broadcast_to, normalize_axes, promote


def reshape(a, newshape=None, order="C", *, shape=None):
    """numpy.reshape with one -1 allowed; order 'C' (row-major) or 'F' (column-major: the elements are read
    and placed with the first index changing fastest). `shape` is numpy 2's name for newshape."""
    if shape is not None:
        if newshape is not None:
            raise TypeError("reshape: give either shape or newshape, not both")
        newshape = shape
    if newshape is None:
        raise TypeError("reshape: missing the new shape")
    if order == "F":
        x = asarray(a)
        target = _resolve_shape(aval(x).size, newshape)
        return transpose(_reshape_c(transpose(x), tuple(reversed(target))))
    if order != "C":
        raise ValueError(f"reshape: order must be 'C' or 'F', got {order!r} ('A' depends on memory layout, "
                         "which kiln arrays do not have)")
    return _reshape_c(asarray(a), newshape)


def _resolve_shape(size, newshape):
    shape = (newshape,) if isinstance(newshape, (int, np.integer)) else tuple(int(d) for d in newshape)
    if shape.count(-1) > 1:
        raise ValueError("reshape: can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot reshape array of size {size} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    if int(np.prod(shape, dtype=np.int64)) != size or any(d < 0 for d in shape):
        raise ValueError(f"reshape: cannot reshape array of size {size} into shape {shape}")
    return shape


def _reshape_c(x, newshape):
    av = aval(x)
    shape = _resolve_shape(av.size, newshape)
    if shape == av.shape:
        return x
    return prims.reshape.bind(x, new_shape=shape)


def ravel(a, order="C"):
    """numpy.ravel; order 'C' or 'F' ('K' and 'A' read as 'C': kiln arrays have no memory layout)."""
    return reshape(a, (-1,), "F" if order == "F" else "C" if order in ("C", "K", "A") else order)


def matrix_transpose(x):
    """numpy.matrix_transpose (x.mT): the last two axes swapped; x needs at least 2 dimensions."""
    x = asarray(x)
    if aval(x).ndim < 2:
        raise ValueError(f"matrix_transpose: input must have at least 2 dimensions, got shape {aval(x).shape}")
    return swapaxes(x, -1, -2)


def transpose(a, axes=None):
    x = asarray(a)
    nd = aval(x).ndim
    perm = tuple(reversed(range(nd))) if axes is None else tuple(int(p) % nd if nd else int(p) for p in axes)
    if sorted(perm) != list(range(nd)):
        raise ValueError(f"transpose: axes {axes} don't match an array of {nd} dimensions")
    if perm == tuple(range(nd)):
        return x
    return prims.transpose.bind(x, permutation=perm)


def swapaxes(a, axis1, axis2):
    x = asarray(a)
    nd = aval(x).ndim
    (i,), (j,) = normalize_axes(axis1, nd, "swapaxes"), normalize_axes(axis2, nd, "swapaxes")
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(x, perm)


def moveaxis(a, source, destination):
    x = asarray(a)
    nd = aval(x).ndim
    src = source if isinstance(source, (tuple, list)) else (source,)
    dst = destination if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise ValueError("moveaxis: `source` and `destination` arguments must have the same number of elements")
    src = [int(s) % nd if -nd <= int(s) < nd else _bad_axis("moveaxis", s, nd) for s in src]
    dst = [int(d) % nd if -nd <= int(d) < nd else _bad_axis("moveaxis", d, nd) for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError("moveaxis: repeated axis")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def _bad_axis(where, axis, nd):
    raise ValueError(f"{where}: axis {axis} is out of bounds for an array of {nd} dimensions")


def broadcast_to(array, shape):
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return _broadcast_to(asarray(array), shape)


def expand_dims(a, axis):
    x = asarray(a)
    av = aval(x)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_nd = av.ndim + len(axes)
    axes = normalize_axes(axes, out_nd, "expand_dims")
    dims = iter(av.shape)
    shape = tuple(1 if i in axes else next(dims) for i in range(out_nd))
    return reshape(x, shape)


def squeeze(a, axis=None):
    x = asarray(a)
    av = aval(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(av.shape) if d == 1)
    else:
        axes = normalize_axes(axis, av.ndim, "squeeze")
        for i in axes:
            if av.shape[i] != 1:
                raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size not equal to one (axis {i} has size {av.shape[i]})")
    return reshape(x, tuple(d for i, d in enumerate(av.shape) if i not in axes))


def atleast_1d(x):
    x = asarray(x)
    return reshape(x, (1,)) if aval(x).ndim == 0 else x


def atleast_2d(x):
    x = asarray(x)
    nd = aval(x).ndim
    return reshape(x, (1,) * (2 - nd) + aval(x).shape) if nd < 2 else x


def stack(arrays, axis=0):
    """numpy.stack: the arrays (same shape) joined along a new axis."""
    xs = promote(*[asarray(a) for a in arrays])
    if not xs:
        raise ValueError("stack: need at least one array to stack")
    shape = aval(xs[0]).shape
    for x in xs:
        if aval(x).shape != shape:
            raise ValueError(f"stack: all input arrays must have the same shape, got {shape} and {aval(x).shape}")
    (ax,) = normalize_axes(axis, len(shape) + 1, "stack")
    return concatenate([expand_dims(x, ax) for x in xs], axis=ax)


def concatenate(arrays, axis=0, dtype=None):
    """numpy.concatenate; axis=None flattens the arrays first."""
    xs = [asarray(a) for a in arrays]
    if not xs:
        raise ValueError("concatenate: need at least one array to concatenate")
    if axis is None:
        xs = [ravel(x) for x in xs]
        axis = 0
    xs = promote(*xs)
    if dtype is not None:
        from ._base import convert

        xs = [convert(x, dtype) for x in xs]
    nd = aval(xs[0]).ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    (ax,) = normalize_axes(axis, nd, "concatenate")
    first = aval(xs[0]).shape
    for x in xs:
        s = aval(x).shape
        if len(s) != nd or any(a != b for i, (a, b) in enumerate(zip(s, first)) if i != ax):
            raise ValueError(f"concatenate: all the input array dimensions except for the concatenation axis must match "
                             f"exactly, got shapes {first} and {s} along axis {ax}")
    if len(xs) == 1:
        return xs[0]
    return sp.concatenate(xs, ax)


def hstack(tup):
    xs = [atleast_1d(x) for x in tup]
    return concatenate(xs, axis=0 if aval(xs[0]).ndim == 1 else 1)


def vstack(tup):
    return concatenate([atleast_2d(x) for x in tup], axis=0)


def _slice_axis(x, axis, start, stop, step=1):
    av = aval(x)
    lo = [0] * av.ndim
    hi = list(av.shape)
    st = [1] * av.ndim
    lo[axis], hi[axis], st[axis] = start, stop, step
    if tuple(lo) == (0,) * av.ndim and tuple(hi) == av.shape and step == 1:
        return x
    return sp.slice(x, lo, hi, st)


def split(ary, indices_or_sections, axis=0):
    """numpy.split: equal sections (an int that divides the axis) or split points."""
    x = asarray(ary)
    av = aval(x)
    (ax,) = normalize_axes(axis, av.ndim, "split")
    n = av.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError("split: array split does not result in an equal division")
        points = [n // k * i for i in range(1, k)]
    else:
        points = [int(p) for p in indices_or_sections]
    bounds = [0] + points + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        lo = min(max(lo + n if lo < 0 else lo, 0), n)
        hi = min(max(hi + n if hi < 0 else hi, 0), n)
        out.append(_slice_axis(x, ax, lo, max(lo, hi)))
    return out


def array_split(ary, indices_or_sections, axis=0):
    x = asarray(ary)
    if not isinstance(indices_or_sections, (int, np.integer)):
        return split(x, indices_or_sections, axis)
    (ax,) = normalize_axes(axis, aval(x).ndim, "array_split")
    n, k = aval(x).shape[ax], int(indices_or_sections)
    if k <= 0:
        raise ValueError("array_split: number sections must be larger than 0")
    each, extra = divmod(n, k)
    sizes = [each + 1] * extra + [each] * (k - extra)
    return split(x, list(np.cumsum(sizes)[:-1]), ax)


def tile(A, reps):
    """numpy.tile, as a broadcast and a reshape (no copy until used)."""
    x = asarray(A)
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    nd = max(len(reps), aval(x).ndim)
    reps = (1,) * (nd - len(reps)) + reps
    x = reshape(x, (1,) * (nd - aval(x).ndim) + aval(x).shape)
    shape = aval(x).shape
    inter = tuple(v for r, d in zip(reps, shape) for v in (1, d))
    spread = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    y = _broadcast_to(reshape(x, inter), spread)
    return reshape(y, tuple(r * d for r, d in zip(reps, shape)))


def repeat(a, repeats, axis=None):
    """numpy.repeat with concrete repeats (the output shape depends on them)."""
    x = asarray(a)
    if axis is None:
        x, axis = ravel(x), 0
    av = aval(x)
    (ax,) = normalize_axes(axis, av.ndim, "repeat")
    if isinstance(repeats, Tracer):
        raise TypeError("repeat: `repeats` must be concrete (a Python int or numpy array): the output shape "
                        "depends on it; for a traced count use knp.where / gather with a fixed output size")
    reps = np.asarray(repeats)
    n = av.shape[ax]
    if reps.ndim == 0 or reps.size == 1:
        r = int(reps.reshape(-1)[0])
        if r < 0:
            raise ValueError("repeat: negative dimensions are not allowed")
        inter = av.shape[:ax + 1] + (1,) + av.shape[ax + 1:]
        spread = av.shape[:ax + 1] + (r,) + av.shape[ax + 1:]
        y = _broadcast_to(reshape(x, inter), spread)
        return reshape(y, av.shape[:ax] + (n * r,) + av.shape[ax + 1:])
    if reps.shape != (n,):
        raise ValueError(f"repeat: operands could not be broadcast together with shape ({n},) and {reps.shape}")
    from .indexing import take

    return take(x, np.repeat(np.arange(n, dtype=np.int64), reps), axis=ax)


def flip(m, axis=None):
    x = asarray(m)
    nd = aval(x).ndim
    axes = normalize_axes(axis, nd, "flip")
    if not axes:
        return x
    return sp.rev(x, axes)


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def roll(a, shift, axis=None):
    """numpy.roll; a traced shift is supported (a gather), a concrete one is two slices."""
    x = asarray(a)
    if axis is None:
        return reshape(roll(ravel(x), shift, 0), aval(x).shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError("roll: 'shift' and 'axis' should be scalars or 1D sequences of the same length")
    for s, ax in zip(shifts, axes):
        (ax,) = normalize_axes(ax, aval(x).ndim, "roll")
        n = aval(x).shape[ax]
        if n == 0:
            continue
        if isinstance(s, Tracer):
            from .elementwise import remainder, subtract
            from .indexing import take

            idx = remainder(subtract(prims.iota.bind(shape=(n,), dimension=0, dtype=np.dtype(np.int32)), asarray(s, np.int32)), n)
            x = take(x, idx, axis=ax)
            continue
        k = int(s) % n
        if k:
            x = concatenate([_slice_axis(x, ax, n - k, n), _slice_axis(x, ax, 0, n - k)], axis=ax)
    return x


def _pad_width(pad_width, nd):
    w = np.asarray(pad_width)
    if w.dtype.kind not in "iu":
        raise TypeError("pad: `pad_width` must be of integral type")
    w = np.broadcast_to(w.reshape((1, -1) if w.ndim == 1 else w.shape if w.ndim == 2 else (1, 1)), (nd, 2))
    if (w < 0).any():
        raise ValueError("pad: index can't contain negative values")
    return [(int(a), int(b)) for a, b in w]


def pad(array, pad_width, mode="constant", constant_values=0, *, stat_length=None, end_values=0):
    """numpy.pad for modes constant, edge, reflect, symmetric, wrap, and (in padding.py) maximum, minimum,
    mean, median (stat_length), linear_ramp (end_values) and empty (zeros)."""
    x = asarray(array)
    nd = aval(x).ndim
    widths = _pad_width(pad_width, nd)
    if mode in ("maximum", "minimum", "mean", "median", "linear_ramp", "empty"):
        from .padding import pad_more  # padding builds on this module

        return pad_more(x, widths, mode, stat_length, end_values)
    if mode == "constant":
        values = constant_values
        if isinstance(values, Tracer):
            if aval(values).shape != ():
                raise TypeError("pad: a traced constant_values must be a scalar")
            from .elementwise import where

            mask = sp.pad(np.ones(aval(x).shape, np.bool_), False, [(a, b, 0) for a, b in widths])
            body = sp.pad(x, 0, [(a, b, 0) for a, b in widths])
            return where(mask, body, asarray(values, aval(x).dtype))
        v = np.asarray(values)
        if v.ndim == 0:
            if not any(a or b for a, b in widths):
                return x
            return sp.pad(x, v.item(), [(a, b, 0) for a, b in widths])
        pairs = np.broadcast_to(v.reshape((1, -1) if v.ndim == 1 else v.shape), (nd, 2))
        for ax, ((a, b), (va, vb)) in enumerate(zip(widths, pairs)):
            for amount, val, before in ((a, va, True), (b, vb, False)):
                if amount:
                    config = [(0, 0, 0)] * nd
                    config[ax] = (amount, 0, 0) if before else (0, amount, 0)
                    x = sp.pad(x, val.item(), config)
        return x
    if mode not in ("edge", "reflect", "symmetric", "wrap"):
        raise ValueError(f"pad: mode {mode!r} is not supported; use 'constant', 'edge', 'reflect', 'symmetric', 'wrap', "
                         "'maximum', 'minimum', 'mean', 'median', 'linear_ramp' or 'empty'")
    for ax, (a, b) in enumerate(widths):
        if not (a or b):
            continue
        n = aval(x).shape[ax]
        if n == 0:
            raise ValueError(f"pad: can't extend empty axis {ax} using modes other than 'constant'")
        parts = []
        if mode == "edge":
            before = _edge(x, ax, 0, a)
            after = _edge(x, ax, n - 1, b)
        elif mode == "reflect":
            if n == 1:
                before, after = _edge(x, ax, 0, a), _edge(x, ax, 0, b)
            else:
                if a > n - 1 or b > n - 1:
                    raise ValueError(f"pad: mode 'reflect' with a pad width larger than the axis size minus one "
                                     f"({a}, {b} for size {n}) is not supported; pad in several steps instead")
                before = sp.rev(_slice_axis(x, ax, 1, a + 1), (ax,)) if a else None
                after = sp.rev(_slice_axis(x, ax, n - 1 - b, n - 1), (ax,)) if b else None
        elif mode == "symmetric":
            if a > n or b > n:
                raise ValueError(f"pad: mode 'symmetric' with a pad width larger than the axis size "
                                 f"({a}, {b} for size {n}) is not supported; pad in several steps instead")
            before = sp.rev(_slice_axis(x, ax, 0, a), (ax,)) if a else None
            after = sp.rev(_slice_axis(x, ax, n - b, n), (ax,)) if b else None
        else:
            if a > n or b > n:
                raise ValueError(f"pad: mode 'wrap' with a pad width larger than the axis size "
                                 f"({a}, {b} for size {n}) is not supported; pad in several steps instead")
            before = _slice_axis(x, ax, n - a, n) if a else None
            after = _slice_axis(x, ax, 0, b) if b else None
        parts = [p for p in (before, x, after) if p is not None]
        x = concatenate(parts, axis=ax)
    return x


def _edge(x, ax, index, count):
    if not count:
        return None
    edge = _slice_axis(x, ax, index, index + 1)
    shape = list(aval(x).shape)
    shape[ax] = count
    return _broadcast_to(edge, tuple(shape))


def _tri_mask(shape, k, lower):
    n, m = shape[-2], shape[-1]
    i = prims.iota.bind(shape=(n, m), dimension=0, dtype=np.dtype(np.int32))
    j = prims.iota.bind(shape=(n, m), dimension=1, dtype=np.dtype(np.int32))
    diff = prims.sub.bind(j, i)
    kk = prims.broadcast_in_dim.bind(np.int32(k), shape=(n, m), broadcast_dimensions=())
    return prims.le.bind(diff, kk) if lower else prims.ge.bind(diff, kk)


def tril(m, k=0):
    """numpy.tril: elements above the k-th diagonal zeroed (last two axes)."""
    return _tri(m, k, True)


def triu(m, k=0):
    return _tri(m, k, False)


def _tri(m, k, lower):
    from .elementwise import where

    x = asarray(m)
    shape = aval(x).shape
    if len(shape) == 0:
        raise ValueError(f"{'tril' if lower else 'triu'}: input must be at least 1-d, got a 0-d array")
    if len(shape) == 1:  # numpy: a 1-d input is broadcast to a square matrix of repeated rows
        shape = (shape[0], shape[0])
    mask = _tri_mask(shape, int(k), lower)
    return where(mask, x, np.zeros((), aval(x).dtype))
