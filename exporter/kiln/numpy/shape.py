"""Shape manipulation: reshape, transpose, broadcast_to, expand_dims, squeeze, stack."""
from __future__ import annotations

import numpy as np

from ..lax import prims
from ._base import asarray, aval, broadcast_to as _broadcast_to, normalize_axes, promote


def reshape(a, newshape, order="C"):
    """numpy.reshape (C order) with one -1 allowed."""
    if order != "C":
        raise ValueError(f"reshape: only order='C' is supported, got order={order!r}")
    x = asarray(a)
    av = aval(x)
    shape = (newshape,) if isinstance(newshape, (int, np.integer)) else tuple(int(d) for d in newshape)
    if shape.count(-1) > 1:
        raise ValueError("reshape: can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or av.size % known:
            raise ValueError(f"reshape: cannot reshape array of size {av.size} into shape {shape}")
        shape = tuple(av.size // known if d == -1 else d for d in shape)
    if int(np.prod(shape, dtype=np.int64)) != av.size:
        raise ValueError(f"reshape: cannot reshape array of size {av.size} into shape {shape}")
    if shape == av.shape:
        return x
    return prims.reshape.bind(x, new_shape=shape)


def transpose(a, axes=None):
    x = asarray(a)
    nd = aval(x).ndim
    perm = tuple(reversed(range(nd))) if axes is None else tuple(int(p) % nd if nd else int(p) for p in axes)
    if sorted(perm) != list(range(nd)):
        raise ValueError(f"transpose: axes {axes} don't match an array of {nd} dimensions")
    if perm == tuple(range(nd)):
        return x
    return prims.transpose.bind(x, permutation=perm)


def broadcast_to(array, shape):
    return _broadcast_to(asarray(array), tuple(shape))


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


def stack(arrays, axis=0):
    """numpy.stack, built from broadcasts and selects so it fuses into one kernel."""
    xs = promote(*[asarray(a) for a in arrays])
    if not xs:
        raise ValueError("stack: need at least one array to stack")
    shape = aval(xs[0]).shape
    for x in xs:
        if aval(x).shape != shape:
            raise ValueError(f"stack: all input arrays must have the same shape, got {shape} and {aval(x).shape}")
    nd = len(shape) + 1
    (ax,) = normalize_axes(axis, nd, "stack")
    out_shape = shape[:ax] + (len(xs),) + shape[ax:]
    index = prims.iota.bind(shape=out_shape, dimension=ax, dtype=np.dtype(np.int32))
    dims = tuple(i for i in range(nd) if i != ax)
    result = prims.broadcast_in_dim.bind(xs[0], shape=out_shape, broadcast_dimensions=dims)
    for k, x in enumerate(xs[1:], start=1):
        here = prims.eq.bind(index, prims.broadcast_in_dim.bind(np.asarray(k, np.int32), shape=out_shape, broadcast_dimensions=()))
        spread = prims.broadcast_in_dim.bind(x, shape=out_shape, broadcast_dimensions=dims)
        result = prims.select.bind(here, spread, result)
    return result
