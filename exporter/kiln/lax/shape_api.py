"""jax.lax's shape and selection helpers that JAX programs call: expand_dims, squeeze, full, full_like,
broadcast, broadcast_to_rank, slice_in_dim, index_in_dim, collapse, split, dynamic_update_index_in_dim,
batch_matmul, select_n and top_k, over kiln.lax's primitives (no promotion, as jax.lax)."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import get_aval
from . import prims
from .api import _axis, dot_general, dynamic_update_slice_in_dim
from .operands import asarray
from .operands import broadcast_shapes as _broadcast_shapes
from .structural_prims import concatenate
from .structural_prims import reduce_prod_p, rev
from .structural_prims import slice as _slice
from .structural_prims import sort as _sort

__all__ = ["expand_dims", "squeeze", "full", "full_like", "broadcast", "broadcast_to_rank", "slice_in_dim",
           "index_in_dim", "collapse", "split", "dynamic_update_index_in_dim", "batch_matmul", "select_n", "top_k",
           "reduce_prod", "reduce_and", "reduce_or", "empty", "broadcast_shapes", "broadcast_like", "stack", "unstack",
           "tile", "approx_max_k", "approx_min_k"]


def _reshape(x, shape):
    return prims.reshape.bind(x, new_shape=tuple(int(d) for d in shape))


def expand_dims(array, dimensions):
    """array with size-1 axes inserted at `dimensions` (positions in the result)."""
    x = asarray(array)
    shape = list(get_aval(x).shape)
    out_ndim = len(shape) + len(dimensions)
    for d in sorted(_axis("expand_dims", d, out_ndim) for d in dimensions):
        shape.insert(d, 1)
    return _reshape(x, shape)


def squeeze(array, dimensions):
    """array without the size-1 axes at `dimensions`."""
    x = asarray(array)
    shape = get_aval(x).shape
    drop = {_axis("squeeze", d, len(shape)) for d in dimensions}
    for d in drop:
        if shape[d] != 1:
            raise ValueError(f"squeeze: dimension {d} has size {shape[d]}, not 1 (shape {shape})")
    return _reshape(x, [n for i, n in enumerate(shape) if i not in drop])


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with fill_value (dtype: fill_value's, a Python float being float32)."""
    value = asarray(fill_value) if dtype is None else asarray(fill_value, dtypes.canonical(dtype))
    a = get_aval(value)
    if a.shape:
        raise TypeError(f"full: fill_value must be a scalar; got shape {a.shape}")
    if a.weak_type:
        value = prims.convert.bind(value, new_dtype=a.dtype)
    return prims.broadcast_in_dim.bind(value, shape=tuple(int(d) for d in shape), broadcast_dimensions=())


def full_like(x, fill_value, dtype=None, shape=None):
    """full of x's shape and dtype (or those given)."""
    a = get_aval(asarray(x))
    return full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None else dtype)


def broadcast(operand, sizes):
    """operand with new leading axes of `sizes`."""
    x = asarray(operand)
    nd = get_aval(x).ndim
    sizes = tuple(int(s) for s in sizes)
    return prims.broadcast_in_dim.bind(x, shape=sizes + get_aval(x).shape,
                                       broadcast_dimensions=tuple(range(len(sizes), len(sizes) + nd)))


def broadcast_to_rank(x, rank: int):
    """x with leading size-1 axes up to `rank` dimensions."""
    x = asarray(x)
    nd = get_aval(x).ndim
    return x if nd >= rank else broadcast(x, (1,) * (rank - nd))


def slice_in_dim(operand, start_index, limit_index, stride: int = 1, axis: int = 0):
    """operand[start:limit:stride] along one axis (None bounds: the ends; negative ones count from the end)."""
    x = asarray(operand)
    shape = get_aval(x).shape
    axis = _axis("slice_in_dim", axis, len(shape))
    size = shape[axis]
    start = 0 if start_index is None else int(start_index)
    limit = size if limit_index is None else int(limit_index)
    start, limit = (start + size if start < 0 else start), (limit + size if limit < 0 else limit)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, int(stride)
    return _slice(x, starts, limits, strides)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """The element `index` (static) along axis, as a size-1 axis if keepdims."""
    x = asarray(operand)
    shape = get_aval(x).shape
    axis = _axis("index_in_dim", axis, len(shape))
    index = int(index)
    if not -shape[axis] <= index < shape[axis]:
        raise IndexError(f"index_in_dim: index {index} is out of bounds for axis {axis} of size {shape[axis]}")
    index %= shape[axis]
    out = slice_in_dim(x, index, index + 1, 1, axis)
    return out if keepdims else _reshape(out, shape[:axis] + shape[axis + 1:])


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """operand with the axes start_dimension..stop_dimension-1 merged into one."""
    x = asarray(operand)
    shape = get_aval(x).shape
    start = _axis("collapse", start_dimension, len(shape))
    stop = len(shape) if stop_dimension is None else int(stop_dimension)
    stop = stop + len(shape) if stop < 0 else stop
    if not start <= stop <= len(shape):
        raise ValueError(f"collapse: stop_dimension {stop_dimension} must be between start_dimension {start} and "
                         f"{len(shape)}")
    merged = int(np.prod(shape[start:stop], dtype=np.int64))
    return _reshape(x, shape[:start] + (merged,) + shape[stop:])


def split(operand, sizes, axis: int = 0) -> list:
    """operand cut along axis into consecutive pieces of `sizes` (which must add up to the axis' size)."""
    x = asarray(operand)
    shape = get_aval(x).shape
    axis = _axis("split", axis, len(shape))
    sizes = [int(s) for s in sizes]
    if sum(sizes) != shape[axis]:
        raise ValueError(f"split: sizes {sizes} add up to {sum(sizes)}, not the size {shape[axis]} of axis {axis}")
    starts = np.cumsum([0] + sizes[:-1])
    return [slice_in_dim(x, int(s), int(s) + n, 1, axis) for s, n in zip(starts, sizes)]


def dynamic_update_index_in_dim(operand, update, index, axis: int):
    """operand with `update` written at (traced) `index` along axis; update may lack that axis."""
    x, u = asarray(operand), asarray(update)
    nd = get_aval(x).ndim
    axis = _axis("dynamic_update_index_in_dim", axis, nd)
    if get_aval(u).ndim == nd - 1:
        u = expand_dims(u, (axis,))
    return dynamic_update_slice_in_dim(x, u, index, axis)


def batch_matmul(lhs, rhs, precision=None):
    """Matrix products over leading batch axes: (..., m, k) x (..., k, n) -> (..., m, n), equal ranks >= 2."""
    x, y = asarray(lhs), asarray(rhs)
    nd = get_aval(x).ndim
    if nd < 2 or nd != get_aval(y).ndim:
        raise ValueError(f"batch_matmul: operands must have the same rank >= 2; got shapes {get_aval(x).shape} and "
                         f"{get_aval(y).shape}")
    batch = tuple(range(nd - 2))
    return dot_general(x, y, (((nd - 1,), (nd - 2,)), (batch, batch)), precision=precision)


def select_n(which, *cases):
    """cases[which] elementwise: which is bool (two cases) or int32 in [0, len(cases))."""
    if not cases:
        raise ValueError("select_n: needs at least one case")
    which = asarray(which)
    cases = [asarray(c) for c in cases]
    if len(cases) == 1:
        return cases[0]
    w = get_aval(which)
    shape = get_aval(cases[0]).shape
    if w.shape != shape and w.shape != ():
        raise TypeError(f"select_n: which has shape {w.shape}; the cases have {shape}")
    if w.shape == () and shape:
        which = prims.broadcast_in_dim.bind(which, shape=shape, broadcast_dimensions=())
    if dtypes.is_bool(w.dtype):
        if len(cases) != 2:
            raise TypeError(f"select_n: a bool which selects between two cases; got {len(cases)}")
        return prims.select.bind(which, cases[1], cases[0])
    out = cases[0]
    for k, case in enumerate(cases[1:], start=1):
        at = prims.eq.bind(which, prims.broadcast_in_dim.bind(np.asarray(k, w.dtype), shape=shape,
                                                              broadcast_dimensions=()) if shape else
                           np.asarray(k, w.dtype))
        out = prims.select.bind(at, case, out)
    return out


def top_k(operand, k: int, *, axis: int = -1):
    """(the k largest values along axis, in descending order, and their indices as int32); among equal values
    the lower index comes first, as in JAX."""
    x = asarray(operand)
    shape = get_aval(x).shape
    if not shape:
        raise TypeError("top_k: the operand must have at least one dimension")
    axis = _axis("top_k", axis, len(shape))
    k = int(k)
    if not 0 <= k <= shape[axis]:
        raise ValueError(f"top_k: k {k} must be between 0 and the size {shape[axis]} of axis {axis}")
    index = prims.iota.bind(shape=shape, dimension=axis, dtype=np.dtype(np.int32))
    neg_index = prims.neg.bind(index)
    values, _, order = _sort([x, neg_index, index], dimension=axis, num_keys=2)
    n = shape[axis]
    top = [slice_in_dim(v, n - k, n, 1, axis) for v in (values, order)]
    return tuple(rev(v, (axis,)) for v in top)


def _reduce_axes(where: str, x, axes) -> tuple[int, ...]:
    nd = get_aval(x).ndim
    return tuple(sorted({_axis(where, a, nd) for a in axes}))


def reduce_prod(operand, axes):
    """The product over `axes`."""
    x = asarray(operand)
    return reduce_prod_p.bind(x, axes=_reduce_axes("reduce_prod", x, axes))


def _bool_reduction(where: str, prim, operand, axes):
    x = asarray(operand)
    if not dtypes.is_bool(get_aval(x).dtype):
        raise TypeError(f"{where}: kiln reduces bool operands only; got {get_aval(x).dtype}")
    axes = _reduce_axes(where, x, axes)
    if any(get_aval(x).shape[a] == 0 for a in axes):
        identity = where == "reduce_and"
        shape = tuple(d for i, d in enumerate(get_aval(x).shape) if i not in axes)
        return prims.broadcast_in_dim.bind(np.asarray(identity), shape=shape, broadcast_dimensions=())
    return prim.bind(x, axes=axes)


def reduce_and(operand, axes):
    """Whether every element over `axes` is True (bool operands)."""
    return _bool_reduction("reduce_and", prims.reduce_min, operand, axes)


def reduce_or(operand, axes):
    """Whether any element over `axes` is True (bool operands)."""
    return _bool_reduction("reduce_or", prims.reduce_max, operand, axes)


def empty(shape, dtype):
    """An array of shape and dtype (zeros: kiln has no uninitialized arrays)."""
    return full(shape, np.zeros((), dtypes.canonical(dtype)))


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """numpy's broadcast of shapes."""
    return _broadcast_shapes(*[tuple(int(d) for d in s) for s in shapes], where="broadcast_shapes")


def broadcast_like(arr, like_arr):
    """arr broadcast (new leading axes) to the shape of like_arr."""
    x = asarray(arr)
    target = get_aval(asarray(like_arr)).shape
    nd = get_aval(x).ndim
    return prims.broadcast_in_dim.bind(x, shape=target, broadcast_dimensions=tuple(range(len(target) - nd,
                                                                                         len(target))))


def stack(operands, axis: int = 0):
    """The operands (of one shape) stacked along a new axis."""
    xs = [asarray(x) for x in operands]
    if not xs:
        raise ValueError("stack: needs at least one operand")
    nd = get_aval(xs[0]).ndim + 1
    axis = _axis("stack", axis, nd)
    return concatenate([expand_dims(x, (axis,)) for x in xs], axis)


def unstack(x, axis: int = 0) -> tuple:
    """The slices of x along axis, as a tuple."""
    x = asarray(x)
    shape = get_aval(x).shape
    axis = _axis("unstack", axis, len(shape))
    return tuple(index_in_dim(x, i, axis, keepdims=False) for i in range(shape[axis]))


def tile(operand, reps):
    """operand repeated reps[i] times along axis i (len(reps) == ndim)."""
    x = asarray(operand)
    shape = get_aval(x).shape
    reps = tuple(int(r) for r in reps)
    if len(reps) != len(shape):
        raise ValueError(f"tile: reps {reps} needs one entry per dimension of an array of shape {shape}")
    spread = tuple(d for pair in zip(reps, shape) for d in pair)
    x = prims.broadcast_in_dim.bind(x, shape=spread, broadcast_dimensions=tuple(range(1, 2 * len(shape), 2)))
    return _reshape(x, [r * d for r, d in zip(reps, shape)])


def approx_max_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """top_k along reduction_dimension: kiln's answer is exact (recall 1)."""
    return top_k(operand, k, axis=reduction_dimension)


def approx_min_k(operand, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True):
    """(the k smallest values along reduction_dimension in ascending order, their int32 indices), exactly; among
    equal values the lower index first."""
    x = asarray(operand)
    shape = get_aval(x).shape
    axis = _axis("approx_min_k", reduction_dimension, len(shape))
    k = int(k)
    if not 0 <= k <= shape[axis]:
        raise ValueError(f"approx_min_k: k {k} must be between 0 and the size {shape[axis]} of axis {axis}")
    index = prims.iota.bind(shape=shape, dimension=axis, dtype=np.dtype(np.int32))
    values, order = _sort([x, index], dimension=axis, num_keys=2)
    return slice_in_dim(values, 0, k, 1, axis), slice_in_dim(order, 0, k, 1, axis)
