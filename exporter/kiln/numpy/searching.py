"""Searching, sorting and sets: searchsorted, partition, lexsort, isin, the set functions, isclose/allclose/array_equal.

Like kiln.numpy.selection, the functions whose output length depends on the data (the set functions,
unique_values, ...) are numpy's on concrete inputs and need a static `size=` on traced ones (as in JAX).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..core import dtypes
from ..lax import control_flow, prims
from ..lax import structural_prims as sp
from ._base import asarray, aval, broadcast_shapes, convert, normalize_axes, promote
from .creation import full, zeros
from .elementwise import (
    abs, add, equal, floor_divide, greater_equal, less, less_equal, multiply, subtract, where,
)
from .indexing import argsort, take
from .math import isfinite, isnan, logical_and, logical_not, logical_or
from .reductions import all, sum
from .selection import _check_size, _data_dependent, _is_traced, _pad_concrete, extract, unique
from .shape import concatenate, ravel, reshape

_INDEX = np.dtype(np.int64)

# ----------------------------------------------------------------------------- ordering with NaN last


def _nan_less(x, y):
    """x < y in numpy's sort order, where NaN is larger than every number."""
    if not dtypes.is_float(aval(x).dtype):
        return less(x, y)
    return logical_or(less(x, y), logical_and(isnan(y), logical_not(isnan(x))))


def _goes_before(side):
    """The predicate `a[i] comes before v` whose count is searchsorted's answer for `side`."""
    if side == "left":
        return _nan_less
    return lambda a_i, v: logical_not(_nan_less(v, a_i))


_SEARCH_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """numpy.searchsorted: int64 indices where v's elements would be inserted into the sorted 1-D `a`
    (NaN sorts last, as in numpy.sort).

    method (jax.numpy's keyword): 'scan' is a binary search in a loop, 'scan_unrolled' the same search
    unrolled, 'sort' sorts a and v together (for many v), 'compare_all' compares every v with every element of
    a (fast for small a, memory len(a) * v.size).
    """
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in _SEARCH_METHODS:
        raise ValueError(f"searchsorted: method must be one of {', '.join(map(repr, _SEARCH_METHODS))}, got {method!r}")
    a, v = promote(a, v)
    if aval(a).ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-dimensional, got shape {aval(a).shape}")
    if sorter is not None:
        sorter = asarray(sorter)
        if aval(sorter).shape != aval(a).shape or not dtypes.is_int(aval(sorter).dtype):
            raise ValueError(f"searchsorted: sorter must be integer indices of a's shape {aval(a).shape}, "
                             f"got {aval(sorter)}")
        a = take(a, sorter, mode="clip")
    n = aval(a).shape[0]
    shape = aval(v).shape
    if n == 0:
        return zeros(shape, _INDEX)
    before = _goes_before(side)
    if method == "compare_all":
        return sum(convert(before(a, reshape(v, shape + (1,))), _INDEX), axis=-1)
    if method == "sort":
        return _search_by_sorting(a, v, side)
    return _binary_search(a, v, before, unrolled=method == "scan_unrolled")


def _binary_search(a, v, before, unrolled):
    """The number of leading elements of `a` for which before(a[i], v) holds, for every v (that predicate is
    monotone on a sorted `a`): n.bit_length() halvings of the interval [lo, hi)."""
    n = aval(a).shape[0]
    shape = aval(v).shape
    one = np.asarray(1, _INDEX)

    def halve(_, bounds):
        lo, hi = bounds
        active = less(lo, hi)
        mid = floor_divide(add(lo, hi), np.asarray(2, _INDEX))
        right = before(take(a, mid, mode="clip"), v)
        return (where(logical_and(active, right), add(mid, one), lo),
                where(logical_and(active, logical_not(right)), mid, hi))

    bounds = (zeros(shape, _INDEX), full(shape, n, _INDEX))
    if unrolled:
        for i in range(n.bit_length()):
            bounds = halve(i, bounds)
    else:
        bounds = control_flow.fori_loop(0, n.bit_length(), halve, bounds)
    return bounds[0]


def _search_by_sorting(a, v, side):
    """One stable sort of a and v together, a query placed before (left) or after (right) the equal elements
    of a; each query's answer is the number of elements of a sorted before it."""
    n, shape = aval(a).shape[0], aval(v).shape
    queries = ravel(v)
    total = n + aval(queries).shape[0]
    is_element = concatenate([np.ones((n,), _INDEX), zeros(aval(queries).shape, _INDEX)])
    tie = is_element if side == "left" else subtract(np.asarray(1, _INDEX), is_element)
    iota = prims.iota.bind(shape=(total,), dimension=0, dtype=_INDEX)
    order = sp.sort_p.bind(concatenate([a, queries]), tie, iota, dimension=0, num_keys=3)[-1]
    element_sorted = take(is_element, order, mode="clip")
    elements_before = subtract(sp.cumsum_p.bind(element_sorted, axis=0, reverse=False), element_sorted)
    sorted_position = sp.scatter(zeros((total,), _INDEX), reshape(order, (total, 1)), iota, (0,), "set", "drop")
    return reshape(take(elements_before, sorted_position[n:], mode="clip"), shape)


# ----------------------------------------------------------------------------- sorting


def sorted_values(x, axis):
    """x's values sorted along axis (NaN last): a one-key sort, which equal values need no index operand for
    (knp.sort carries one to be stable), so it runs about twice as fast."""
    x = asarray(x)
    (ax,) = normalize_axes(axis, aval(x).ndim, "sort")
    return sp.sort_p.bind(x, dimension=ax, num_keys=1)[0]


def lexsort(keys, axis=-1):
    """numpy.lexsort: int64 indices that sort by the last key, then the one before it, ... (stable)."""
    if isinstance(keys, (list, tuple)):
        keys = [asarray(k) for k in keys]
    else:
        keys = asarray(keys)
        if aval(keys).ndim == 0:
            raise ValueError("lexsort: keys must be a sequence of arrays or an array of at least 1 dimension, "
                             "got a 0-d array")
        keys = [keys[i] for i in range(aval(keys).shape[0])]
    if not keys:
        raise TypeError("lexsort: need at least one key")
    shape = aval(keys[0]).shape
    for k in keys:
        if aval(k).shape != shape:
            raise ValueError(f"lexsort: all keys need the same shape, got {shape} and {aval(k).shape}")
    if not shape:
        return np.asarray(0, _INDEX)
    (ax,) = normalize_axes(axis, len(shape), "lexsort")
    iota = prims.iota.bind(shape=shape, dimension=ax, dtype=_INDEX)
    return sp.sort_p.bind(*keys[::-1], iota, dimension=ax, num_keys=len(keys) + 1)[-1]  # iota: stable


def _kth_checked(name, kth, n):
    if _is_traced(kth):
        raise TypeError(f"{name}: kth must be concrete (Python ints): it decides where the partition puts elements")
    ks = np.atleast_1d(np.asarray(kth))
    if not dtypes.is_int(ks.dtype) or ks.ndim != 1:
        raise TypeError(f"{name}: kth must be an integer or a sequence of integers, got {kth!r}")
    for k in ks:
        if not -n <= k < n:
            raise ValueError(f"{name}: kth(={int(k)}) out of bounds ({n})")


def partition(a, kth, axis=-1):
    """numpy.partition by a full (stable) sort: the k-th element of every slice is where a sort puts it, the
    smaller ones before and the larger ones after, for every kth (numpy's contract; numpy's own order of the
    other elements is unspecified)."""
    x = asarray(a)
    if axis is None:
        x, axis = ravel(x), -1
    (ax,) = normalize_axes(axis, aval(x).ndim, "partition")
    _kth_checked("partition", kth, aval(x).shape[ax])
    return sorted_values(x, ax)


def argpartition(a, kth, axis=-1):
    """numpy.argpartition by a full (stable) argsort: int64 indices satisfying numpy's contract."""
    x = asarray(a)
    if axis is None:
        x, axis = ravel(x), -1
    (ax,) = normalize_axes(axis, aval(x).ndim, "argpartition")
    _kth_checked("argpartition", kth, aval(x).shape[ax])
    return argsort(x, axis=ax)


# ----------------------------------------------------------------------------- comparisons


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy.isclose: |a - b| <= atol + rtol * |b| elementwise; infinities are close only to themselves."""
    x, y = promote(a, b)
    if not dtypes.is_float(aval(x).dtype):
        x, y = convert(x, np.float64), convert(y, np.float64)
    dt = aval(x).dtype
    tol = add(np.asarray(atol, dt), multiply(np.asarray(rtol, dt), abs(y)))
    close = logical_and(less_equal(abs(subtract(x, y)), tol), isfinite(y))
    close = logical_or(close, equal(x, y))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(x), isnan(y)))
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy.allclose: all(isclose(...)) as a bool scalar (a traced one under jit)."""
    return all(isclose(a, b, rtol, atol, equal_nan))


def _equal_elements(x, y, equal_nan):
    x, y = promote(x, y)
    same = equal(x, y)
    if equal_nan and dtypes.is_float(aval(x).dtype):
        same = logical_or(same, logical_and(isnan(x), isnan(y)))
    return same


def array_equal(a1, a2, equal_nan=False):
    """numpy.array_equal: same shape and equal elements (NaNs equal when equal_nan). Shapes are static, so
    a shape mismatch gives False without looking at the values."""
    x, y = asarray(a1), asarray(a2)
    if aval(x).shape != aval(y).shape:
        return np.bool_(False)
    return all(_equal_elements(x, y, equal_nan))


def array_equiv(a1, a2):
    """numpy.array_equiv: broadcastable shapes and equal elements."""
    x, y = asarray(a1), asarray(a2)
    try:
        broadcast_shapes(aval(x).shape, aval(y).shape, where="array_equiv")
    except ValueError:
        return np.bool_(False)
    return all(equal(x, y))


# ----------------------------------------------------------------------------- membership and sets


def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """numpy.isin: whether each element occurs in test_elements (NaN never does). A binary search over the
    sorted test elements; assume_unique and kind are accepted and change nothing."""
    if kind not in (None, "sort", "table"):
        raise ValueError(f"isin: kind must be None, 'sort' or 'table', got {kind!r}")
    x, tests = promote(element, test_elements)
    tests = sorted_values(ravel(tests), 0)
    if aval(tests).shape[0] == 0:
        found = full(aval(x).shape, False, np.bool_)
    else:
        at = searchsorted(tests, x)
        found = equal(take(tests, at, mode="clip"), x)
    return logical_not(found) if invert else found


def _first_slots(values, keep, size, fill_value):
    """The first `size` entries of `values` where `keep`, in order, padded with fill_value (default: the first
    kept value, or 0 when none is kept)."""
    if fill_value is not None:
        return extract(keep, values, size=size, fill_value=fill_value)
    out = extract(keep, values, size=size, fill_value=0)
    if size == 0:
        return out
    count = sum(convert(keep, _INDEX))
    first = take(out, np.asarray(0, _INDEX), mode="clip")
    smallest = where(greater_equal(count, np.asarray(1, _INDEX)), first, np.zeros((), aval(values).dtype))
    slots = prims.iota.bind(shape=(size,), dimension=0, dtype=_INDEX)
    return where(less(slots, count), out, smallest)


def _set_inputs(name, ar1, ar2, size):
    x, y = promote(ar1, ar2)
    x, y = ravel(x), ravel(y)
    if _is_traced(x, y) and size is None:
        raise _data_dependent(name, "Use concrete (numpy) arrays, or size=N (a Python int) to get the first N "
                                    "values padded with fill_value")
    return x, y, (None if size is None else _check_size(name, size))


def _padded(values, size, fill_value, default_first):
    """numpy's result cut or padded to `size` (when given) with fill_value: by default its first value (0 when
    it is empty) if default_first, else 0."""
    if size is None:
        return values
    if fill_value is None:
        fill_value = values[0] if default_first and values.size else 0
    return _pad_concrete(values, size, fill_value)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """numpy.union1d: the sorted unique values of both arrays. Traced: size=N (as in JAX), padded with
    fill_value (default: the smallest value)."""
    x, y, size = _set_inputs("union1d", ar1, ar2, size)
    return unique(concatenate([x, y]), size=size, fill_value=fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """numpy.setdiff1d: the sorted unique values of ar1 not in ar2 (with assume_unique, ar1's values in their
    order). Traced: size=N, padded with fill_value (default 0, as in JAX)."""
    x, y, size = _set_inputs("setdiff1d", ar1, ar2, size)
    if not _is_traced(x, y):
        return _padded(np.setdiff1d(x, y, assume_unique=assume_unique), size, fill_value, False)
    fill = 0 if fill_value is None else fill_value
    if aval(x).shape[0] == 0:
        return full((size,), fill, aval(x).dtype)
    if assume_unique:
        return extract(isin(x, y, invert=True), x, size=size, fill_value=fill)
    values, counts = unique(x, return_counts=True, size=aval(x).shape[0])
    real = greater_equal(counts, np.asarray(1, _INDEX))
    return extract(logical_and(real, isin(values, y, invert=True)), values, size=size, fill_value=fill)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None, fill_value=None):
    """numpy.intersect1d: the sorted values in both arrays; return_indices adds the index of each value's
    first occurrence in ar1 and in ar2. Traced: size=N, padded with fill_value (default: the smallest value
    of the intersection) and index 0."""
    x, y, size = _set_inputs("intersect1d", ar1, ar2, size)
    if not _is_traced(x, y):
        out = np.intersect1d(x, y, assume_unique=assume_unique, return_indices=return_indices)
        if size is None:
            return out
        if not return_indices:
            return _padded(out, size, fill_value, True)
        return (_padded(out[0], size, fill_value, True), _pad_concrete(out[1], size, 0),
                _pad_concrete(out[2], size, 0))
    n1, n2 = aval(x).shape[0], aval(y).shape[0]
    if n1 == 0 or n2 == 0:
        empty = full((size,), 0 if fill_value is None else fill_value, aval(x).dtype)
        return (empty, zeros((size,), _INDEX), zeros((size,), _INDEX)) if return_indices else empty
    values, first1, counts = unique(x, return_index=True, return_counts=True, size=n1)
    real = greater_equal(counts, np.asarray(1, _INDEX))
    keep = logical_and(real, isin(values, y))
    common = _first_slots(values, keep, size, fill_value)
    if not return_indices:
        return common
    in1 = extract(keep, first1, size=size, fill_value=0)
    order2 = argsort(y)  # stable: the first of equal values has the smallest index
    in2 = take(order2, searchsorted(take(y, order2), common), mode="clip")
    valid = less(prims.iota.bind(shape=(size,), dimension=0, dtype=_INDEX), sum(convert(keep, _INDEX)))
    return common, in1, where(valid, in2, np.zeros((), _INDEX))


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """numpy.setxor1d: the sorted unique values in exactly one of the arrays. Traced: size=N, padded with
    fill_value (default: the smallest value of the result)."""
    x, y, size = _set_inputs("setxor1d", ar1, ar2, size)
    if not _is_traced(x, y):
        return _padded(np.setxor1d(x, y, assume_unique=assume_unique), size, fill_value, True)
    parts, keeps = [], []
    for mine, other in ((x, y), (y, x)):
        n = aval(mine).shape[0]
        if n == 0:
            continue
        values, counts = unique(mine, return_counts=True, size=n)
        parts.append(values)
        keeps.append(logical_and(greater_equal(counts, np.asarray(1, _INDEX)), isin(values, other, invert=True)))
    if not parts:
        return full((size,), 0 if fill_value is None else fill_value, aval(x).dtype)
    values, keep = concatenate(parts), concatenate(keeps)
    order = argsort(values)
    return _first_slots(take(values, order), take(keep, order), size, fill_value)


# ----------------------------------------------------------------------------- numpy 2's unique_* functions

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def unique_values(x, /, *, size=None, fill_value=None):
    """numpy.unique_values: the sorted unique values (each NaN its own value, as numpy 2). Traced: size=N."""
    return _unique_named("unique_values", x, size, fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    """numpy.unique_counts: (values, counts). Traced: size=N; padded counts are 0."""
    return UniqueCountsResult(*_unique_named("unique_counts", x, size, fill_value, return_counts=True))


def unique_inverse(x, /, *, size=None, fill_value=None):
    """numpy.unique_inverse: (values, inverse_indices shaped like x). Traced: size=N."""
    return UniqueInverseResult(*_unique_named("unique_inverse", x, size, fill_value, return_inverse=True))


def unique_all(x, /, *, size=None, fill_value=None):
    """numpy.unique_all: (values, indices of first occurrences, inverse_indices, counts). Traced: size=N."""
    return UniqueAllResult(*_unique_named("unique_all", x, size, fill_value, return_index=True,
                                          return_inverse=True, return_counts=True))


def _unique_named(name, x, size, fill_value, **returns):
    x = asarray(x)
    if _is_traced(x) and size is None:
        raise _data_dependent(name, "Use a concrete (numpy) array, or size=N (a Python int) to get the N "
                                    "smallest unique values padded with fill_value")
    out = unique(x, equal_nan=False, size=size, fill_value=fill_value, **returns)
    if returns.get("return_inverse") and not _is_traced(x):
        parts = list(out)
        parts[2 if returns.get("return_index") else 1] = parts[2 if returns.get("return_index") else 1].reshape(
            aval(x).shape)
        out = tuple(parts)
    return out


__all__ = [
    "searchsorted", "lexsort", "partition", "argpartition", "isclose", "allclose", "array_equal", "array_equiv",
    "isin", "union1d", "setdiff1d", "intersect1d", "setxor1d", "unique_values", "unique_counts", "unique_inverse",
    "unique_all",
]
