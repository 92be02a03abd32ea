"""Building arrays: meshgrid, logspace, geomspace, indices, tri and the triangle/diagonal index helpers,
diagflat, fill_diagonal, ix_, unravel_index/ravel_multi_index, copy, resize.

Sizes are static (Python ints). Index helpers whose result depends only on shapes (tril_indices,
diag_indices, ...) return numpy arrays in both modes, as constants. Built from kiln.numpy's functions, so
each works eagerly, under kiln.jit and in Programs.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer, current_graph_trace
from ..lax import prims
from ._base import asarray, aval, broadcast_to, convert, normalize_axes
from .creation import _weak, linspace
from .elementwise import add, multiply, power, where
from .indexing import at, take
from .shape import concatenate, moveaxis, ravel, reshape


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """numpy.meshgrid: coordinate arrays from 1-D coordinate vectors; indexing 'xy' (Cartesian: the first two
    axes swapped) or 'ij' (matrix); sparse=True leaves them unbroadcast. Returns a tuple, as numpy 2."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: valid values for `indexing` are 'xy' and 'ij', got {indexing!r}")
    vectors = [ravel(asarray(x)) for x in xi]
    n = len(vectors)
    shapes = []
    for i in range(n):
        shape = [1] * n
        shape[i] = aval(vectors[i]).shape[0]
        if indexing == "xy" and n > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        shapes.append(tuple(shape))
    grids = [reshape(v, s) for v, s in zip(vectors, shapes)]
    if sparse:
        return tuple(grids)
    full = tuple(max(s[k] for s in shapes) for k in range(n))
    return tuple(broadcast_to(g, full) for g in grids)


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """numpy.logspace: base ** linspace(start, stop, num); start, stop and base may be arrays."""
    exponents = linspace(start, stop, num, endpoint, axis=axis)
    if dtypes.is_python_scalar(base):  # in the exponents' dtype (a weak float64 stays float64 and weak)
        out = power(np.asarray(base, aval(exponents).dtype), exponents)
        out = _weak(out) if aval(exponents).weak_type else out
    else:
        bases = asarray(base)
        if aval(bases).ndim:
            ax = normalize_axes(axis, aval(exponents).ndim, "logspace")[0]
            bases = reshape(bases, aval(bases).shape[:ax] + (1,) + aval(bases).shape[ax:])
        out = power(bases, exponents)
    return out if dtype is None else convert(out, dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """numpy.geomspace: a geometric progression from start to stop (the ends exact), in float64 unless
    dtype= says otherwise; start and stop must not be 0 (checked when they are concrete)."""
    for name, v in (("start", start), ("stop", stop)):
        if not isinstance(v, Tracer) and np.any(np.asarray(v) == 0):
            raise ValueError(f"geomspace: geometric sequence cannot include zero ({name} is 0)")
    from .math import log10, sign

    f64 = np.dtype(np.float64)
    s, e = convert(asarray(start), f64), convert(asarray(stop), f64)
    shape = tuple(np.broadcast_shapes(aval(s).shape, aval(e).shape))
    s, e = broadcast_to(s, shape), broadcast_to(e, shape)
    out_sign = sign(s)
    s, e = multiply(s, out_sign), multiply(e, out_sign)
    result = logspace(log10(s), log10(e), num, endpoint, base=10.0)
    if num > 0:
        result = at(result)[0].set(s)
        if num > 1 and endpoint:
            result = at(result)[-1].set(e)
    result = multiply(out_sign, result)
    if axis != 0:
        result = moveaxis(result, 0, axis)
    return result if dtype is None else convert(result, dtype)


def indices(dimensions, dtype=None, sparse=False):
    """numpy.indices: an index grid of shape (len(dimensions), *dimensions), or a tuple of broadcastable
    index vectors with sparse=True."""
    dims = tuple(int(d) for d in dimensions)
    d = dtypes.canonical(int if dtype is None else dtype)
    out = []
    for i, n in enumerate(dims):
        shape = tuple(n if k == i else 1 for k in range(len(dims)))
        grid = _iota(shape, i, d)
        out.append(grid if sparse else broadcast_to(grid, dims))
    if sparse:
        return tuple(out)
    if not out:
        return np.zeros((0,), d)
    return concatenate([reshape(g, (1,) + dims) for g in out], axis=0)


def _iota(shape, dimension, dtype):
    if current_graph_trace() is None:
        return np.broadcast_to(np.arange(shape[dimension], dtype=dtype).reshape(
            [-1 if k == dimension else 1 for k in range(len(shape))]), shape).copy()
    return prims.iota.bind(shape=tuple(shape), dimension=dimension, dtype=np.dtype(dtype))


def tri(N, M=None, k=0, dtype=None):
    """numpy.tri: ones at and below the k-th diagonal. Without dtype= float64, weakly typed when traced
    (as knp.eye)."""
    M = N if M is None else M
    n, m = int(N), int(M)
    if dtype is None:
        return _weak(tri(n, m, k, np.float64))
    d = dtypes.canonical(dtype)
    if current_graph_trace() is None:
        return np.tri(n, m, k, dtype=d)
    rows, cols = _iota((n, m), 0, np.int32), _iota((n, m), 1, np.int32)
    below = prims.le.bind(prims.sub.bind(cols, rows), broadcast_to(np.int32(k), (n, m)))
    return convert(below, d)


def tril_indices(n, k=0, m=None):
    """numpy.tril_indices: (rows, cols) of the lower triangle (int64 numpy arrays: they depend on shapes only)."""
    return np.tril_indices(int(n), int(k), None if m is None else int(m))


def triu_indices(n, k=0, m=None):
    """numpy.triu_indices: (rows, cols) of the upper triangle (int64 numpy arrays)."""
    return np.triu_indices(int(n), int(k), None if m is None else int(m))


def _matrix_shape(arr, name):
    shape = aval(asarray(arr)).shape
    if len(shape) != 2:
        raise ValueError(f"{name}: input array must be 2-d, got shape {shape}")
    return shape


def tril_indices_from(arr, k=0):
    n, m = _matrix_shape(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    n, m = _matrix_shape(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def diag_indices(n, ndim=2):
    """numpy.diag_indices: ndim copies of arange(n) (int64 numpy arrays)."""
    return np.diag_indices(int(n), int(ndim))


def diag_indices_from(arr):
    """numpy.diag_indices_from: the main diagonal's indices of an array whose dimensions are all equal."""
    shape = aval(asarray(arr)).shape
    if len(shape) < 2:
        raise ValueError(f"diag_indices_from: input array must be at least 2-d, got shape {shape}")
    if len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions of input must be of equal length, got shape {shape}")
    return diag_indices(shape[0], len(shape))


def diagflat(v, k=0):
    """numpy.diagflat: the flattened input on the k-th diagonal of a square matrix."""
    from .products import diag

    return diag(ravel(asarray(v)), k)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """numpy.fill_diagonal, returning a new array: kiln arrays are immutable, so as in jax.numpy the call
    must say inplace=False and use the result. val is repeated along the diagonal as numpy repeats it;
    wrap=True continues the diagonal of a tall matrix after every N+1 rows, as numpy."""
    if inplace:
        raise ValueError("fill_diagonal: kiln arrays are immutable, so the diagonal cannot be filled in place; "
                         "call fill_diagonal(a, val, inplace=False) and use the array it returns")
    x = asarray(a)
    shape = aval(x).shape
    if len(shape) < 2:
        raise ValueError(f"fill_diagonal: array must be at least 2-d, got shape {shape}")
    if len(shape) == 2:
        step = shape[1] + 1
        end = None if wrap else shape[1] * shape[1]
    else:
        if len(set(shape)) != 1:
            raise ValueError(f"fill_diagonal: all dimensions of input must be of equal length, got shape {shape}")
        step = 1 + int(np.cumprod(shape[:-1]).sum())
        end = None
    positions = np.arange(aval(x).size)[:end:step]
    values = ravel(asarray(val, aval(x).dtype) if not isinstance(val, Tracer) else convert(val, aval(x).dtype))
    count = aval(values).shape[0]
    if count == 0:
        return x
    values = take(values, np.arange(len(positions)) % count)
    return reshape(at(ravel(x))[positions].set(values), shape)


def ix_(*args):
    """numpy.ix_: open-mesh index arrays; boolean vectors become their nonzero positions (so they must be
    concrete)."""
    out = []
    n = len(args)
    for i, seq in enumerate(args):
        v = asarray(seq) if isinstance(seq, Tracer) else np.asarray(seq)
        if isinstance(v, np.ndarray) and v.size == 0 and v.dtype.kind == "f":
            v = v.astype(np.intp)
        if aval(v).ndim != 1:
            raise ValueError(f"ix_: cross index must be 1 dimensional, got shape {aval(v).shape} for argument {i}")
        if dtypes.is_bool(aval(v).dtype):
            if isinstance(v, Tracer):
                from .selection import DataDependentShapeError

                raise DataDependentShapeError("ix_: a traced boolean vector: its output shape depends on the data; "
                                              "pass the positions (knp.nonzero(mask, size=N)) instead")
            v = np.nonzero(v)[0]
        out.append(reshape(v, (1,) * i + (aval(v).shape[0],) + (1,) * (n - i - 1)))
    return tuple(out)


def unravel_index(indices, shape, order="C"):
    """numpy.unravel_index: flat indices to a tuple of coordinate arrays (int64). Concrete out-of-range
    indices raise ValueError as numpy; traced ones are clamped into range, as jax.numpy."""
    from .math import floor_divide, remainder

    dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if order not in ("C", "F"):
        raise ValueError(f"unravel_index: order must be 'C' or 'F', got {order!r}")
    size = int(np.prod(dims, dtype=np.int64))
    if isinstance(indices, Tracer):
        flat = convert(indices, np.int64)
        if not dtypes.is_int(aval(indices).dtype):
            raise TypeError(f"unravel_index: indices must be integers, got {aval(indices).dtype}")
        from .math import clip

        flat = clip(where(flat < 0, add(flat, size), flat), 0, max(size - 1, 0))
    else:
        flat = np.asarray(indices)
        if flat.dtype.kind not in "iu":
            raise TypeError(f"unravel_index: indices must be integers, got {flat.dtype}")
        if flat.size and (flat.min() < 0 or flat.max() >= size):
            bad = flat.min() if flat.min() < 0 else flat.max()
            raise ValueError(f"unravel_index: index {bad} is out of bounds for array with size {size}")
        flat = flat.astype(np.int64)
    out = []
    for d in (reversed(dims) if order == "C" else dims):
        out.append(remainder(flat, d) if d else flat)
        flat = floor_divide(flat, d) if d else flat
    return tuple(reversed(out)) if order == "C" else tuple(out)


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    """numpy.ravel_multi_index: a tuple of coordinate arrays to flat indices (int64). mode 'raise' (concrete
    indices only), 'wrap' or 'clip'; one mode per dimension allowed."""
    from .math import clip, remainder

    dims = tuple(int(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: parameter multi_index must be a sequence of length {len(dims)}")
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    strides = np.cumprod((1,) + (dims[::-1] if order == "C" else dims)[:-1])
    strides = strides[::-1] if order == "C" else strides
    total = None
    for i, (idx, d, m, s) in enumerate(zip(multi_index, dims, modes, strides)):
        if m not in ("raise", "wrap", "clip"):
            raise ValueError(f"ravel_multi_index: clipmode must be 'raise', 'wrap' or 'clip', got {m!r}")
        v = convert(asarray(idx), np.int64)
        if m == "raise":
            if isinstance(v, Tracer):
                raise ValueError("ravel_multi_index: mode='raise' needs concrete indices (a traced index cannot "
                                 "raise); pass mode='clip' or 'wrap'")
            if v.size and (v.min() < 0 or v.max() >= d):
                raise ValueError(f"ravel_multi_index: invalid entry in coordinates array (dimension {i} has size {d})")
        elif m == "wrap":
            v = remainder(v, d)
        else:
            v = clip(v, 0, d - 1)
        term = multiply(v, np.int64(s))
        total = term if total is None else add(total, term)
    return total if dtype is None else convert(total, dtype)


def copy(a, order="K"):
    """numpy.copy: eagerly a new numpy array; traced, the array itself (kiln arrays are immutable)."""
    x = asarray(a)
    return x.copy() if isinstance(x, np.ndarray) else x


def resize(a, new_shape):
    """numpy.resize: the flattened array repeated (or cut) to fill new_shape; an empty array gives zeros."""
    x = ravel(asarray(a))
    shape = (int(new_shape),) if isinstance(new_shape, (int, np.integer)) else tuple(int(d) for d in new_shape)
    if any(d < 0 for d in shape):
        raise ValueError("resize: all elements of `new_shape` must be non-negative")
    size = int(np.prod(shape, dtype=np.int64))
    n = aval(x).shape[0]
    if n == 0 or size == 0:
        return broadcast_to(np.zeros((), aval(x).dtype), shape)
    return reshape(take(x, np.arange(size) % n), shape)


__all__ = [
    "meshgrid", "logspace", "geomspace", "indices", "tri", "tril_indices", "triu_indices", "tril_indices_from",
    "triu_indices_from", "diag_indices", "diag_indices_from", "diagflat", "fill_diagonal", "ix_", "unravel_index",
    "ravel_multi_index", "copy", "resize",
]
