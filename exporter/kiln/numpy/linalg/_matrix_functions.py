"""numpy.linalg functions that need no factorization of their own: trace and diagonal over the last two axes,
the norms (singular values from _decompositions.svdvals for ord 2, -2 and 'nuc'), vecdot, cross and
multi_dot."""
from __future__ import annotations

import math

import numpy as np

from ...core import dtypes
from .. import products
from .._base import asarray, aval, convert, normalize_axes
from ..array_math import cross as _numpy_cross
from ..elementwise import abs as abs_
from ..elementwise import equal, multiply, not_equal, power, sqrt, where
from ..reductions import max as max_
from ..reductions import min as min_
from ..reductions import sum as sum_
from ..shape import expand_dims, moveaxis, reshape
from ._decompositions import svdvals

__all__ = ["diagonal", "trace", "norm", "vector_norm", "matrix_norm", "vecdot", "cross", "multi_dot"]

LinAlgError = np.linalg.LinAlgError


def diagonal(x, /, *, offset=0):
    """numpy.linalg.diagonal: the diagonals of the matrices in the last two axes (numpy.diagonal's
    default is the first two)."""
    return products.diagonal(x, offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset=0, dtype=None):
    """numpy.linalg.trace: the traces of the matrices in the last two axes."""
    return products.trace(x, offset, axis1=-2, axis2=-1, dtype=dtype)


# --- norms --------------------------------------------------------------------------------

def _inexact(x, ord=None, matrix=False, where="norm"):
    """x as numpy's norms see it: floats keep their dtype, integers and bools become float64, complex
    values their magnitudes (every vector norm, and the matrix norms other than 2, -2 and 'nuc', depend
    only on them)."""
    x = asarray(x)
    if dtypes.is_complex(aval(x).dtype):
        if matrix and ord in (2, -2, "nuc"):
            raise NotImplementedError(f"{where}: the ord={ord!r} norm of a complex matrix needs a complex SVD, "
                                      "which kiln has not written")
        return abs_(x)
    return x if dtypes.is_float(aval(x).dtype) else convert(x, np.float64)


def _euclidean(x, axes, keepdims):
    """sqrt(sum(x^2)) with a zero gradient where the sum is 0 (the subgradient; JAX's sqrt gives NaN there)."""
    s = sum_(multiply(x, x), axis=axes, keepdims=keepdims)
    zero = equal(s, 0)
    return where(zero, 0.0, sqrt(where(zero, 1.0, s)))


def _vector_norm(x, ord, axes, keepdims, fn):  # noqa: A002 - numpy's name
    if isinstance(ord, str):
        raise ValueError(f"{fn}: invalid norm order {ord!r} for vectors")
    if ord is None or ord == 2:
        return _euclidean(x, axes, keepdims)
    if ord == math.inf:
        return max_(abs_(x), axis=axes, keepdims=keepdims)
    if ord == -math.inf:
        return min_(abs_(x), axis=axes, keepdims=keepdims)
    if ord == 0:
        return sum_(not_equal(x, 0).astype(aval(x).dtype), axis=axes, keepdims=keepdims)
    if ord == 1:
        return sum_(abs_(x), axis=axes, keepdims=keepdims)
    try:
        p = float(ord)
    except (TypeError, ValueError):
        raise ValueError(f"{fn}: invalid norm order {ord!r} for vectors") from None
    dtype = aval(x).dtype
    with np.errstate(divide="ignore"):
        total = sum_(power(abs_(x), np.asarray(p, dtype)), axis=axes, keepdims=keepdims)
        return power(total, np.asarray(1.0 / p, dtype))


def _singular_values(x, row, col):
    return svdvals(moveaxis(x, (row, col), (-2, -1)))


def _matrix_norm(x, ord, row, col, keepdims, fn):  # noqa: A002 - numpy's name
    nd = aval(x).ndim
    if ord in (2, -2, "nuc"):
        if aval(x).dtype not in (np.float32, np.float64):
            raise TypeError(f"{fn}: ord={ord!r} needs singular values, which linalg does not compute for dtype "
                            f"{aval(x).dtype} (numpy's rule); convert x to float32 or float64")
        s = _singular_values(x, row, col)
        out = {2: lambda: max_(s, axis=-1), -2: lambda: min_(s, axis=-1), "nuc": lambda: sum_(s, axis=-1)}[ord]()
    elif ord in (None, "fro", "f"):
        out = _euclidean(x, (row, col), False)
    elif ord in (1, -1, math.inf, -math.inf):
        summed, kept = (row, col) if ord in (1, -1) else (col, row)  # ord 1: column sums; inf: row sums
        sums = sum_(abs_(x), axis=summed)
        pick = max_ if ord in (1, math.inf) else min_
        out = pick(sums, axis=kept - 1 if kept > summed else kept)
    else:
        raise ValueError(f"{fn}: invalid norm order {ord!r} for matrices")
    if keepdims:
        out = expand_dims(out, tuple(sorted((row % nd, col % nd))))
    return out


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - numpy's name
    """numpy.linalg.norm: a vector norm over one axis (ord None/2, inf, -inf, 0, 1, -1 or any p), a matrix norm
    over two ('fro', 'nuc', inf, -inf, 1, -1, 2, -2), the 2-norm of the flattened array when ord and axis are
    None. Integers give float64. The gradient of the 2- and Frobenius norms at 0 is 0."""
    x = _inexact(x, ord, (axis is None and ord is not None and np.ndim(x) == 2) or (isinstance(axis, (tuple, list)) and len(axis) == 2))
    nd = aval(x).ndim
    if axis is None:
        if ord is None:
            out = _euclidean(reshape(x, (-1,)), (0,), False)
            return reshape(out, (1,) * nd) if keepdims else out
        if nd not in (1, 2):
            raise ValueError(f"norm: improper number of dimensions to norm: ord={ord!r} without axis needs a 1-D or "
                             f"2-D array, got {nd}-D")
        axis = tuple(range(nd))
    elif not isinstance(axis, (tuple, list)):
        try:
            axis = (int(axis),)
        except TypeError:
            raise TypeError(f"norm: 'axis' must be None, an integer or a tuple of integers, got {axis!r}") from None
    axis = tuple(axis)
    if len(axis) == 1:
        return _vector_norm(x, ord, normalize_axes(axis, nd, "norm"), keepdims, "norm")
    if len(axis) == 2:
        row, col = (normalize_axes(a, nd, "norm")[0] for a in axis)
        if row == col:
            raise ValueError(f"norm: duplicate axes given: {axis}")
        return _matrix_norm(x, ord, row, col, keepdims, "norm")
    raise ValueError(f"norm: improper number of dimensions to norm: axis={axis} names {len(axis)} axes (1 or 2)")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002 - numpy's name
    """numpy.linalg.vector_norm: the ord-norm of the vectors along axis (None: the whole array flattened; a
    tuple: those axes taken together)."""
    x = _inexact(x)
    nd = aval(x).ndim
    if axis is None:
        out = _vector_norm(reshape(x, (-1,)), ord, (0,), False, "vector_norm")
        return reshape(out, (1,) * nd) if keepdims else out
    axes = normalize_axes(axis, nd, "vector_norm")
    rest = [a for a in range(nd) if a not in axes]
    moved = moveaxis(x, axes, tuple(range(nd - len(axes), nd)))
    flat = reshape(moved, tuple(aval(x).shape[a] for a in rest) + (-1,))
    out = _vector_norm(flat, ord, (len(rest),), False, "vector_norm")
    return expand_dims(out, axes) if keepdims else out


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002 - numpy's name
    """numpy.linalg.matrix_norm: the ord-norm of the matrices in the last two axes."""
    x = _inexact(x, ord, True, "matrix_norm")
    if aval(x).ndim < 2:
        raise ValueError(f"matrix_norm: argument x must be at least 2-D, got shape {aval(x).shape}")
    return _matrix_norm(x, ord, aval(x).ndim - 2, aval(x).ndim - 1, keepdims, "matrix_norm")


# --- products ------------------------------------------------------------------------------

def vecdot(x1, x2, /, *, axis=-1):
    """numpy.linalg.vecdot: sum(x1 * x2) along axis (real inputs), broadcast over the other axes."""
    a, b = asarray(x1), asarray(x2)
    if aval(a).ndim == 0 or aval(b).ndim == 0:
        raise ValueError("vecdot: arguments x1 and x2 must be at least 1-D")
    a = moveaxis(a, normalize_axes(axis, aval(a).ndim, "vecdot")[0], -1)
    b = moveaxis(b, normalize_axes(axis, aval(b).ndim, "vecdot")[0], -1)
    if aval(a).shape[-1] != aval(b).shape[-1]:
        raise ValueError(f"vecdot: x1 and x2 have vectors of lengths {aval(a).shape[-1]} and {aval(b).shape[-1]}")
    return products.matmul(expand_dims(a, -2), expand_dims(b, -1))[..., 0, 0]


def cross(x1, x2, /, *, axis=-1):
    """numpy.linalg.cross: the cross product of 3-vectors along axis (numpy.cross also takes 2-vectors)."""
    a, b = asarray(x1), asarray(x2)
    for name, v in (("x1", a), ("x2", b)):
        shape = aval(v).shape
        k = normalize_axes(axis, len(shape), "cross")[0] if shape else None
        if k is None or shape[k] != 3:
            raise ValueError(f"cross: argument {name} must hold 3-dimensional vectors along axis {axis}, got shape "
                             f"{shape}")
    return _numpy_cross(a, b, axis=axis)


def _chain_order(dims):
    """split[i][j]: where the cheapest product of matrices i..j splits, for matrices i of shape
    (dims[i], dims[i + 1]) (the textbook dynamic programme; the first cheapest split wins, as numpy)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            best = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if best is None or c < best:
                    best, split[i][j] = c, k
            cost[i][j] = best
    return split


def multi_dot(arrays, *, out=None):
    """numpy.linalg.multi_dot: the product of a chain of matrices in the order that needs the fewest scalar
    multiplications; the first array may be a vector (a row), the last one too (a column)."""
    if out is not None:
        raise TypeError("multi_dot: out= is not supported (kiln arrays are immutable); use the returned value")
    arrays = [asarray(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError(f"multi_dot: expecting at least two arrays, got {len(arrays)}")
    if len(arrays) == 2:
        return products.dot(arrays[0], arrays[1])
    first_vector, last_vector = aval(arrays[0]).ndim == 1, aval(arrays[-1]).ndim == 1
    if first_vector:
        arrays[0] = expand_dims(arrays[0], 0)
    if last_vector:
        arrays[-1] = expand_dims(arrays[-1], 1)
    for i, a in enumerate(arrays):
        if aval(a).ndim != 2:
            raise LinAlgError(f"multi_dot: argument {i} is {aval(a).ndim}-dimensional; the chain needs 2-D arrays "
                              "(1-D allowed first and last)")
    dims = [aval(arrays[0]).shape[0]] + [aval(a).shape[1] for a in arrays]
    split = _chain_order(dims)

    def chain(i, j):
        if i == j:
            return arrays[i]
        k = split[i][j]
        return products.dot(chain(i, k), chain(k + 1, j))

    result = chain(0, len(arrays) - 1)
    if first_vector:
        result = result[0]
    if last_vector:
        result = result[..., 0]
    return result
