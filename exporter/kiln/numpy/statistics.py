"""numpy's statistics: the nan* reductions, average, median, percentile/quantile, ptp, cov, corrcoef, histogram, bincount, digitize, count_nonzero.

Written over kiln.numpy's own functions, so one code path computes eagerly (numpy arrays in and out) and
builds the graph under kiln.jit, grad and vmap. Checks that need the values (weights summing to zero, an
all-NaN slice for nanargmax, negative bincount input) raise eagerly as numpy does; traced, they follow JAX.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer
from ..lax import structural_prims as sp
from ._base import asarray, aval, broadcast_to, convert, normalize_axes, numpy_result_dtype
from .creation import arange, full, zeros
from .elementwise import (
    add, equal, greater_equal, less_equal, maximum, multiply, not_equal, sqrt, subtract, true_divide,
    where as select,
)
from .indexing import take_along_axis
from .math import ceil, clip, floor, isnan, logical_and, logical_not, rint
from .products import diagonal, dot
from .reductions import (
    all as _all, argmax, argmin, cumprod, cumsum, max as _max, mean, min as _min, prod, std, sum as _sum, var,
)
from .searching import searchsorted, sorted_values
from .selection import _check_size, _data_dependent
from .shape import atleast_2d, concatenate, moveaxis, ravel, reshape, squeeze, transpose

_INDEX = np.dtype(np.int64)
_F64 = np.dtype(np.float64)


def _traced(*xs) -> bool:
    return builtins.any(isinstance(x, Tracer) for x in xs)


def _is_float(x) -> bool:
    return dtypes.is_float(aval(x).dtype)


def _nan(dtype):
    return np.asarray(np.nan).astype(dtype)


def _without_nans(x, fill):
    """x with its NaNs replaced by `fill` (x itself when its dtype has no NaN)."""
    return select(isnan(x), np.asarray(fill).astype(aval(x).dtype), x) if _is_float(x) else x


def _present(x, where):
    """Where x holds a number (not NaN) and the where= mask, if any, is True."""
    present = logical_not(isnan(x))
    if where is not None:
        present = logical_and(present, broadcast_to(asarray(where), aval(x).shape))
    return present


def _reject_empty(name, x, axis):
    shape = aval(x).shape
    axes = normalize_axes(axis, len(shape), name)
    if builtins.any(shape[i] == 0 for i in axes):
        raise ValueError(f"{name}: zero-size array to reduction operation {name} which has no identity")


def _reject_out(name, out):
    if out is not None:
        raise NotImplementedError(f"{name}: out= is not supported (kiln arrays are immutable); use the result")


# ----------------------------------------------------------------------------- the nan* reductions


def nansum(a, axis=None, dtype=None, keepdims=False, *, initial=None, where=None):
    """numpy.nansum: the sum with NaNs counted as zero."""
    return _sum(_without_nans(asarray(a), 0), axis, dtype, keepdims, initial=initial, where=where)


def nanprod(a, axis=None, dtype=None, keepdims=False, *, initial=None, where=None):
    """numpy.nanprod: the product with NaNs counted as one."""
    return prod(_without_nans(asarray(a), 1), axis, dtype, keepdims, initial=initial, where=where)


def nanmean(a, axis=None, dtype=None, keepdims=False, *, where=None):
    """numpy.nanmean: the mean of the non-NaN elements (NaN for an all-NaN slice). NaNs are replaced before
    the sum, so gradients stay finite (zero at the NaNs)."""
    x = asarray(a)
    if not _is_float(x):
        return mean(x, axis, dtype, keepdims, where=where)
    return mean(_without_nans(x, 0), axis, dtype, keepdims, where=_present(x, where))


def nanvar(a, axis=None, dtype=None, ddof=0, keepdims=False, *, where=None):
    """numpy.nanvar: the variance of the non-NaN elements; NaN where fewer than ddof + 1 remain."""
    x = asarray(a)
    if not _is_float(x):
        return var(x, axis, dtype, ddof, keepdims, where=where)
    present = _present(x, where)
    out = var(_without_nans(x, 0), axis, dtype, ddof, keepdims, where=present)
    count = _sum(present, axis, _INDEX, keepdims)
    return select(less_equal(count, ddof), _nan(aval(out).dtype), out)


def nanstd(a, axis=None, dtype=None, ddof=0, keepdims=False, *, where=None):
    """numpy.nanstd: sqrt of nanvar, taken in float64 and rounded once."""
    x = asarray(a)
    if not _is_float(x):
        return std(x, axis, dtype, ddof, keepdims, where=where)
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype("nanstd", aval(x).dtype)
    return convert(sqrt(nanvar(x, axis, _F64, ddof, keepdims, where=where)), out_dtype)


def _nan_extreme(name, reduce, fill, a, axis, keepdims):
    x = asarray(a)
    _reject_empty(name, x, axis)
    if not _is_float(x):
        return reduce(x, axis, keepdims)
    out = reduce(_without_nans(x, fill), axis, keepdims)
    return select(_all(isnan(x), axis, keepdims), _nan(aval(x).dtype), out)


def nanmax(a, axis=None, out=None, keepdims=False):
    """numpy.nanmax: the maximum ignoring NaNs; NaN for an all-NaN slice."""
    _reject_out("nanmax", out)
    return _nan_extreme("nanmax", _max, -np.inf, a, axis, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False):
    """numpy.nanmin: the minimum ignoring NaNs; NaN for an all-NaN slice."""
    _reject_out("nanmin", out)
    return _nan_extreme("nanmin", _min, np.inf, a, axis, keepdims)


def _nan_arg(name, arg, fill, a, axis, keepdims):
    x = asarray(a)
    _reject_empty(name, x, axis)
    if not _is_float(x):
        return arg(x, axis, keepdims=keepdims)
    out = arg(_without_nans(x, fill), axis, keepdims=keepdims)
    all_nan = _all(isnan(x), axis, keepdims)
    if not _traced(all_nan):
        if np.any(all_nan):
            raise ValueError(f"{name}: All-NaN slice encountered")
        return out
    return select(all_nan, np.asarray(-1, _INDEX), out)


def nanargmax(a, axis=None, out=None, *, keepdims=False):
    """numpy.nanargmax. An all-NaN slice raises ValueError eagerly (numpy); traced it gives -1 (JAX)."""
    _reject_out("nanargmax", out)
    return _nan_arg("nanargmax", argmax, -np.inf, a, axis, keepdims)


def nanargmin(a, axis=None, out=None, *, keepdims=False):
    """numpy.nanargmin. An all-NaN slice raises ValueError eagerly (numpy); traced it gives -1 (JAX)."""
    _reject_out("nanargmin", out)
    return _nan_arg("nanargmin", argmin, np.inf, a, axis, keepdims)


def nancumsum(a, axis=None, dtype=None):
    """numpy.nancumsum: cumsum with NaNs counted as zero."""
    return cumsum(_without_nans(asarray(a), 0), axis, dtype)


def nancumprod(a, axis=None, dtype=None):
    """numpy.nancumprod: cumprod with NaNs counted as one."""
    return cumprod(_without_nans(asarray(a), 1), axis, dtype)


# ----------------------------------------------------------------------------- quantiles

_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_dtype(x_dtype, q, method):
    """numpy's result dtype: the input's for the methods that pick an element; else the float promotion of
    the input with q (a Python number is weak)."""
    if method in ("lower", "higher", "nearest"):
        return np.dtype(x_dtype)
    dt = np.dtype(x_dtype) if dtypes.is_python_scalar(q) else np.result_type(x_dtype, aval(q).dtype)
    return np.dtype(dt) if dtypes.is_float(dt) else _F64


def _lerp(a, b, diff, t):
    """a + diff t with diff = b - a, computed from the nearer end (as numpy) so that t = 1 gives b exactly."""
    return select(greater_equal(t, 0.5), subtract(b, multiply(diff, subtract(1.0, t))), add(a, multiply(diff, t)))


def _quantile(name, a, q, axis, method, keepdims, skip_nans, scale):
    """q-th quantiles (q / scale in [0, 1]) along `axis` (an int, a tuple, or None for all), from a sort.
    The result has q's shape followed by the reduced shape."""
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"{name}: method must be one of {', '.join(map(repr, _QUANTILE_METHODS))} (those jax.numpy "
                         f"supports), got {method!r}")
    x = asarray(a)
    qs = asarray(q)
    if not _traced(qs):
        qv = np.asarray(qs, _F64)
        if np.any(np.isnan(qv)) or np.any(qv < 0) or np.any(qv > scale):
            raise ValueError(f"{name}: q must be in the range [0, {scale}], got {q!r}")
    out_dtype = _quantile_dtype(aval(x).dtype, q, method)
    shape = aval(x).shape
    axes = normalize_axes(axis, len(shape), name)
    rest = [i for i in range(len(shape)) if i not in axes]
    rest_shape = tuple(shape[i] for i in rest)
    kept_shape = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keepdims else rest_shape
    q_shape = aval(qs).shape
    n = int(np.prod([shape[i] for i in axes], dtype=np.int64))
    if n == 0:
        return full(q_shape + kept_shape, np.nan, out_dtype)
    values = sorted_values(reshape(transpose(x, rest + list(axes)), rest_shape + (n,)), -1)
    k = int(np.prod(q_shape, dtype=np.int64))
    # positions in q's float dtype (float64 for Python numbers and integers), as numpy computes them
    position_dtype = aval(qs).dtype if _is_float(qs) and not dtypes.is_python_scalar(q) else _F64
    fraction = true_divide(reshape(convert(qs, position_dtype), (1,) * len(rest_shape) + (k,)),
                           np.asarray(scale, position_dtype))
    if skip_nans and _is_float(x):
        count = convert(_sum(logical_not(isnan(values)), -1, _INDEX, True), position_dtype)
    else:
        count = np.asarray(n, position_dtype)
    position = broadcast_to(multiply(fraction, subtract(count, 1.0)), rest_shape + (k,))

    def element(at):
        index = convert(clip(at, 0, n - 1), _INDEX)
        return take_along_axis(values, index, -1, mode="clip")

    below, above = floor(position), ceil(position)
    if method == "lower":
        out = element(below)
    elif method == "higher":
        out = element(above)
    elif method == "nearest":
        out = element(rint(position))
    else:
        t = subtract(position, below) if method == "linear" else select(equal(below, above), 0.0, 0.5)
        low, high = element(below), element(above)
        diff = convert(subtract(high, low), _F64)  # in the input's dtype first, as numpy
        out = _lerp(convert(low, _F64), convert(high, _F64), diff, convert(t, _F64))
    if _is_float(x):
        missing = equal(count, 0.0) if skip_nans else isnan(values[..., n - 1:])
        out = select(missing, _nan(aval(out).dtype), out)
    return convert(reshape(moveaxis(out, -1, 0), q_shape + kept_shape), out_dtype)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None,
             interpolation=None):
    """numpy.quantile for jax.numpy's methods (linear, lower, higher, midpoint, nearest); axis may be a tuple.
    A NaN in a slice makes its quantiles NaN."""
    return _quantile_entry("quantile", a, q, axis, out, method, keepdims, weights, interpolation, False, 1)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None,
               interpolation=None):
    """numpy.percentile: quantile of q / 100."""
    return _quantile_entry("percentile", a, q, axis, out, method, keepdims, weights, interpolation, False, 100)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None,
                interpolation=None):
    """numpy.nanquantile: quantiles of the non-NaN elements (NaN for an all-NaN slice)."""
    return _quantile_entry("nanquantile", a, q, axis, out, method, keepdims, weights, interpolation, True, 1)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                  weights=None, interpolation=None):
    """numpy.nanpercentile: nanquantile of q / 100."""
    return _quantile_entry("nanpercentile", a, q, axis, out, method, keepdims, weights, interpolation, True, 100)


def _quantile_entry(name, a, q, axis, out, method, keepdims, weights, interpolation, skip_nans, scale):
    _reject_out(name, out)
    if weights is not None:
        raise NotImplementedError(f"{name}: weights= is not supported (numpy allows it only for "
                                  "method='inverted_cdf', which jax.numpy and kiln do not have)")
    if interpolation is not None:
        method = interpolation
    return _quantile(name, a, q, axis, method, keepdims, skip_nans, scale)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """numpy.median: the 0.5 quantile (float64 for integer input; NaN if a slice holds a NaN)."""
    _reject_out("median", out)
    return _quantile("median", a, 0.5, axis, "linear", keepdims, False, 1)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """numpy.nanmedian: the median of the non-NaN elements."""
    _reject_out("nanmedian", out)
    return _quantile("nanmedian", a, 0.5, axis, "linear", keepdims, True, 1)


# ----------------------------------------------------------------------------- averages, spread, covariance


def _weights_along(name, w, x_shape, axis):
    """Weights of the shape of `a` along `axis` (an int or a tuple, in the order given) reshaped to broadcast
    against `a`, as numpy.average does."""
    nd = len(x_shape)
    order = [int(a) % nd if -nd <= int(a) < nd else None for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    if None in order:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of {nd} dimensions")
    wanted = tuple(x_shape[i] for i in order)
    if aval(w).shape != wanted:
        raise ValueError(f"{name}: shape of weights {aval(w).shape} must match the shape of a along axis {axis}, "
                         f"{wanted}")
    w = reshape(w, wanted + (1,) * (nd - len(order)))
    return moveaxis(w, tuple(range(len(order))), tuple(order))


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """numpy.average: the weighted mean sum(a * w) / sum(w) along axis; returned=True adds sum(w) (broadcast to
    the average's shape). Weights summing to zero raise ZeroDivisionError eagerly; traced they give inf/NaN."""
    x = asarray(a)
    shape = aval(x).shape
    if weights is None:
        avg = mean(x, axis, keepdims=keepdims)
        if not returned:
            return avg
        count = np.prod([shape[i] for i in normalize_axes(axis, len(shape), "average")], dtype=np.int64)
        return avg, full(aval(avg).shape, count, aval(avg).dtype)
    w = asarray(weights)
    in_dtype = aval(x).dtype
    dt = np.result_type(in_dtype, aval(w).dtype, *([_F64] if not dtypes.is_float(in_dtype) else []))
    if aval(w).shape != shape:
        if axis is None:
            raise TypeError("average: axis must be specified when shapes of a and weights differ")
        w = _weights_along("average", w, shape, axis)
    w = convert(w, dt)
    total = _sum(multiply(convert(x, dt), w), axis, keepdims=keepdims)
    scale = _sum(w, axis, keepdims=keepdims)
    if not _traced(scale) and np.any(np.asarray(scale) == 0):
        raise ZeroDivisionError("average: weights sum to zero, can't be normalized")
    avg = true_divide(total, scale)
    return (avg, broadcast_to(scale, aval(avg).shape)) if returned else avg


def ptp(a, axis=None, out=None, keepdims=False):
    """numpy.ptp: max - min along axis (integers wrap, as in numpy)."""
    _reject_out("ptp", out)
    x = asarray(a)
    return subtract(_max(x, axis, keepdims), _min(x, axis, keepdims))


def count_nonzero(a, axis=None, *, keepdims=False):
    """numpy.count_nonzero: the number of nonzero (True) elements along axis, as int64."""
    x = asarray(a)
    nonzero = x if aval(x).dtype == np.bool_ else not_equal(x, np.zeros((), aval(x).dtype))
    return _sum(convert(nonzero, _INDEX), axis, _INDEX, keepdims)


def _observations(what, m, rowvar, dtype):
    x = asarray(m)
    if aval(x).ndim > 2:
        raise ValueError(f"cov: {what} has more than 2 dimensions")
    x = convert(atleast_2d(x), dtype)
    return transpose(x) if not rowvar and aval(x).shape[0] != 1 else x


def _checked_weights(kind, weights, n, dtype, integer):
    w = asarray(weights)
    if integer and not dtypes.is_int(aval(w).dtype):
        raise TypeError(f"cov: {kind} must be integer, got {aval(w).dtype}")
    if aval(w).ndim > 1:
        raise RuntimeError(f"cov: cannot handle multidimensional {kind} (shape {aval(w).shape})")
    if aval(w).shape[0] != n:
        raise RuntimeError(f"cov: incompatible numbers of samples ({n}) and {kind} ({aval(w).shape[0]})")
    if not _traced(w) and np.any(np.asarray(w) < 0):
        raise ValueError(f"cov: {kind} cannot be negative")
    return convert(w, dtype)


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    """numpy.cov: the covariance matrix of the variables (rows, or columns when rowvar=False), with frequency
    and analytic weights; float64 unless dtype= says otherwise (numpy's result). A 1-variable result is 0-d."""
    if ddof is not None and ddof != int(ddof):
        raise ValueError(f"cov: ddof must be an integer, got {ddof!r}")
    inputs = [asarray(m)] + ([] if y is None else [asarray(y)])
    dt = np.dtype(dtype) if dtype is not None else np.result_type(*[aval(i).dtype for i in inputs], _F64)
    xs = _observations("m", inputs[0], rowvar, dt)
    if y is not None:
        ys = _observations("y", inputs[1], rowvar, dt)
        if aval(ys).shape[1] != aval(xs).shape[1]:
            raise ValueError(f"cov: m and y have different numbers of observations ({aval(xs).shape[1]} and "
                             f"{aval(ys).shape[1]})")
        xs = concatenate([xs, ys], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    n = aval(xs).shape[1]
    w = None
    if fweights is not None:
        w = _checked_weights("fweights", fweights, n, dt, True)
    aw = None if aweights is None else _checked_weights("aweights", aweights, n, dt, False)
    if aw is not None:
        w = aw if w is None else multiply(w, aw)
    avg, w_sum = average(xs, axis=1, weights=w, returned=True)
    if w is None:
        fact = np.asarray(builtins.max(n - ddof, 0), dt)
    else:
        w_sum = w_sum[0]
        if ddof == 0:
            fact = w_sum
        elif aw is None:
            fact = subtract(w_sum, ddof)
        else:
            fact = subtract(w_sum, true_divide(multiply(ddof, _sum(multiply(w, aw))), w_sum))
        fact = maximum(fact, np.zeros((), dt))
    centered = subtract(xs, reshape(avg, (-1, 1)))
    weighted = centered if w is None else multiply(centered, w)
    return squeeze(true_divide(dot(centered, transpose(weighted)), fact))


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """numpy.corrcoef: the covariance normalized by the standard deviations, clipped to [-1, 1]."""
    for arr in (x, y):
        if arr is not None and aval(asarray(arr)).ndim > 2:
            raise ValueError(f"corrcoef: {'x' if arr is x else 'y'} has more than 2 dimensions")
    c = cov(x, y, rowvar, dtype=dtype)
    if aval(c).ndim == 0:
        return true_divide(c, c)
    spread = sqrt(diagonal(c))
    c = true_divide(true_divide(c, reshape(spread, (-1, 1))), reshape(spread, (1, -1)))
    return clip(c, -1, 1)


# ----------------------------------------------------------------------------- counting into bins


def _scatter_add(length, bins, updates, dtype):
    """zeros(length) with updates added at `bins` (1-D integer positions; those outside [0, length) dropped)."""
    n = aval(bins).shape[0]
    if n == 0 or length == 0:
        return zeros((length,), dtype)
    return sp.scatter(zeros((length,), dtype), reshape(bins, (n, 1)), convert(updates, dtype), (0,), "add", "drop")


def bincount(x, weights=None, minlength=0, *, length=None):
    """numpy.bincount: the count (or the summed weights, float64) of each value 0, 1, ... in the 1-D integer x.

    Traced x needs a static length=N (as in jax.numpy.bincount): N bins, larger values dropped and negative
    values counted in bin 0 (JAX's rule). Eagerly negative values raise ValueError, as in numpy.
    """
    xs = asarray(x)
    if not (dtypes.is_int(aval(xs).dtype) or dtypes.is_bool(aval(xs).dtype)):
        raise TypeError(f"bincount: x must be an array of non-negative integers, got {aval(xs).dtype}")
    if aval(xs).ndim != 1:
        raise ValueError(f"bincount: x must be 1-dimensional, got shape {aval(xs).shape}")
    minlength = operator.index(minlength)
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    w = None if weights is None else asarray(weights)
    if w is not None and aval(w).shape != aval(xs).shape:
        raise ValueError(f"bincount: weights must have x's shape {aval(xs).shape}, got {aval(w).shape}")
    if not _traced(xs) and xs.size and np.min(xs) < 0:
        raise ValueError("bincount: x must not hold negative values")
    if length is None:
        if _traced(xs):
            raise _data_dependent("bincount", "Pass length=N (a Python int, as in jax.numpy.bincount) to count the "
                                              "values 0..N-1 (larger values are dropped)")
        length = builtins.max(minlength, int(np.max(xs)) + 1 if xs.size else 0)
    else:
        length = _check_size("bincount", length)
    bins = maximum(convert(xs, _INDEX), np.zeros((), _INDEX))
    if w is None:
        return _scatter_add(length, bins, np.ones(aval(xs).shape, _INDEX), _INDEX)
    return _scatter_add(length, bins, w, _F64)


def digitize(x, bins, right=False):
    """numpy.digitize: int64 index of the bin of each x, for increasing or decreasing 1-D bins. Traced bins
    decide the direction from bins[-1] >= bins[0] (as jax.numpy) instead of checking monotonicity."""
    b = asarray(bins)
    if aval(b).ndim != 1:
        raise ValueError(f"digitize: bins must be 1-dimensional, got shape {aval(b).shape}")
    side = "left" if right else "right"
    n = aval(b).shape[0]
    if n == 0:
        return zeros(aval(asarray(x)).shape, _INDEX)
    backwards = subtract(np.asarray(n, _INDEX), searchsorted(b[::-1], x, side))
    if not _traced(b):
        steps = np.diff(np.asarray(b))
        if np.all(steps >= 0):
            return searchsorted(b, x, side)
        if np.all(steps <= 0):
            return backwards
        raise ValueError("digitize: bins must be monotonically increasing or decreasing")
    return select(greater_equal(b[n - 1], b[0]), searchsorted(b, x, side), backwards)


def _uniform_edges(name, x, count, range_, edge_dtype):
    """count + 1 equal-width edges over range_ (default: x's min and max), computed as numpy does: numpy.linspace
    (first + i * step, the last edge exactly the end) in x's float dtype, or in float64 for integers or a given
    range, rounded to edge_dtype."""
    work = (aval(x).dtype if _is_float(x) else _F64) if range_ is None else _F64
    if range_ is not None:
        if _traced(*range_):
            raise TypeError(f"{name}: range must be concrete (Python numbers): it fixes the bin edges when traced "
                            "arrays are compiled; pass the edges as bins= for traced bounds")
        first, last = (float(e) for e in range_)
        if first > last:
            raise ValueError(f"{name}: max must be larger than min in range parameter")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError(f"{name}: supplied range of [{first}, {last}] is not finite")
        first, last = np.asarray(first, work), np.asarray(last, work)
    elif aval(x).size == 0:
        first, last = np.asarray(0.0, work), np.asarray(1.0, work)
    else:
        first, last = convert(_min(x), work), convert(_max(x), work)
        if not _traced(first) and not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError(f"{name}: autodetected range of [{first}, {last}] is not finite")
    same = equal(first, last)
    first = select(same, subtract(first, 0.5), first)
    last = select(same, add(last, 0.5), last)
    step = true_divide(subtract(last, first), np.asarray(count, work))
    inner = add(multiply(arange(count, dtype=work), step), first)
    return convert(concatenate([inner, reshape(last, (1,))]), edge_dtype)


def _bin_edges(name, x, bins, range_, weights):
    if isinstance(bins, str):
        if _traced(x, weights):
            raise TypeError(f"{name}: bins={bins!r} chooses the number of bins from the data, which a traced array "
                            "does not have when the program is compiled; pass an int or the edges")
        return np.histogram_bin_edges(np.asarray(x), bins, range_, None if weights is None else np.asarray(weights))
    if not _traced(bins) and np.ndim(bins) == 0:
        try:
            count = operator.index(bins)
        except TypeError:
            raise TypeError(f"{name}: bins must be an integer, a string, or an array, got {bins!r}") from None
        if count < 1:
            raise ValueError(f"{name}: bins must be positive, when an integer (got {count})")
        return _uniform_edges(name, x, count, range_, aval(x).dtype if _is_float(x) else _F64)
    edges = asarray(bins)
    if aval(edges).ndim != 1:
        raise ValueError(f"{name}: bins must be 1-dimensional, got shape {aval(edges).shape}")
    if not _traced(edges) and np.any(np.diff(np.asarray(edges)) < 0):
        raise ValueError(f"{name}: bins must increase monotonically, when an array")
    return edges


def histogram_bin_edges(a, bins=10, range=None, weights=None):  # noqa: A002  (numpy's name)
    """numpy.histogram_bin_edges: the edges numpy.histogram uses (an estimator string needs a concrete a)."""
    return _bin_edges("histogram_bin_edges", ravel(asarray(a)), bins, range, weights)


def histogram(a, bins=10, range=None, density=None, weights=None):  # noqa: A002  (numpy's name)
    """numpy.histogram: (counts, edges). Bins are [e_i, e_i+1), the last one closed; values outside the edges
    (and NaNs) are left out. Counts are int64, or weights' dtype; density=True gives float64 densities.
    Under jit the bin count is static: an int or edges of a fixed length."""
    x = ravel(asarray(a))
    w = None if weights is None else asarray(weights)
    if w is not None and aval(w).shape != aval(asarray(a)).shape:
        raise ValueError(f"histogram: weights should have the same shape as a, got {aval(w).shape} and "
                         f"{aval(asarray(a)).shape}")
    edges = _bin_edges("histogram", x, bins, range, weights)
    n_bins = aval(edges).shape[0] - 1
    if n_bins < 1:
        raise ValueError("histogram: bins must hold at least two edges")
    at, inside = _bin_positions(x, edges)
    at = select(inside, at, np.asarray(n_bins, _INDEX))
    if w is None:
        counts = _scatter_add(n_bins, at, np.ones(aval(x).shape, _INDEX), _INDEX)
    else:
        counts = _scatter_add(n_bins, at, ravel(w), aval(w).dtype)
    if not density:
        return counts, edges
    widths = convert(subtract(edges[1:], edges[:n_bins]), _F64)
    counts = convert(counts, _F64)
    return true_divide(true_divide(counts, widths), _sum(counts)), edges


def _bin_positions(x, edges):
    """(the bin of each x among the edges' len - 1 bins, the last one closed; whether x lies inside the edges)."""
    n_bins = aval(edges).shape[0] - 1
    last = edges[n_bins]
    at = subtract(searchsorted(edges, x, "right"), np.asarray(1, _INDEX))
    at = select(equal(x, last), np.asarray(n_bins - 1, _INDEX), at)
    return at, logical_and(greater_equal(x, edges[0]), less_equal(x, last))


def _sample_columns(sample):
    """The D coordinate arrays of N points given as an (N, D) array, a 1-D array (D = 1) or a sequence of D arrays."""
    if isinstance(sample, (list, tuple)):
        columns = [ravel(asarray(c)) for c in sample]
    else:
        points = asarray(sample)
        if aval(points).ndim == 1:
            return [points]
        if aval(points).ndim != 2:
            raise ValueError(f"histogramdd: sample must be an (N, D) array or a sequence of D arrays, got shape "
                             f"{aval(points).shape}")
        columns = [points[:, i] for i in builtins.range(aval(points).shape[1])]
    if len({aval(c).shape for c in columns}) > 1:
        raise ValueError("histogramdd: the sample's coordinate arrays must have one length, got "
                         f"{[aval(c).shape[0] for c in columns]}")
    return columns


def _edges_of_dimension(i, column, bins, range_):
    """numpy.histogramdd's edges along dimension i: linspace for a count (float64 when range_ is given), or the
    given increasing edges."""
    if not _traced(bins) and np.ndim(bins) == 0:
        try:
            count = operator.index(bins)
        except TypeError:
            raise TypeError(f"histogramdd: bins[{i}] must be an integer or an array of edges, got {bins!r}") from None
        if count < 1:
            raise ValueError(f"histogramdd: bins[{i}] must be positive, when an integer (got {count})")
        edge_dtype = (aval(column).dtype if _is_float(column) else _F64) if range_ is None else _F64
        return _uniform_edges("histogramdd", column, count, range_, edge_dtype)
    edges = asarray(bins)
    if aval(edges).ndim != 1:
        raise ValueError(f"histogramdd: bins[{i}] must be a scalar or 1d array, got shape {aval(edges).shape}")
    if not _traced(edges) and np.any(np.diff(np.asarray(edges)) < 0):
        raise ValueError(f"histogramdd: bins[{i}] must be monotonically increasing, when an array")
    return edges


def histogramdd(sample, bins=10, range=None, density=None, weights=None):  # noqa: A002  (numpy's name)
    """numpy.histogramdd: (float64 counts of shape (bins_0, ..., bins_D-1), [edges along each dimension]). A point
    counts when every coordinate lies inside its edges (the last bin of each dimension closed)."""
    columns = _sample_columns(sample)
    dims = len(columns)
    n = aval(columns[0]).shape[0]
    try:
        per_dim = list(bins) if len(bins) == dims else None
    except TypeError:
        per_dim = [bins] * dims
    if per_dim is None:
        raise ValueError("histogramdd: the dimension of bins must be equal to the dimension of the sample x")
    ranges = [None] * dims if range is None else list(range)
    if len(ranges) != dims:
        raise ValueError("histogramdd: range argument must have one entry per dimension")
    w = None if weights is None else asarray(weights)
    if w is not None and aval(w).shape != (n,):
        raise ValueError(f"histogramdd: weights must have one entry per sample point ({n}), got shape {aval(w).shape}")
    edges = [_edges_of_dimension(i, c, b, r) for i, (c, b, r) in enumerate(zip(columns, per_dim, ranges))]
    shape = tuple(aval(e).shape[0] - 1 for e in edges)
    flat, inside = np.zeros((n,), _INDEX), np.ones((n,), np.bool_)
    for column, e, size in zip(columns, edges, shape):
        at, within = _bin_positions(column, e)
        flat = add(multiply(flat, np.asarray(size, _INDEX)), at)
        inside = logical_and(inside, within)
    total = int(np.prod(shape, dtype=np.int64))
    flat = select(inside, flat, np.asarray(total, _INDEX))
    hist = reshape(_scatter_add(total, flat, np.ones((n,), _F64) if w is None else w, _F64), shape)
    if density:
        hist = true_divide(hist, _sum(hist))
        for i, e in enumerate(edges):
            widths = convert(subtract(e[1:], e[:shape[i]]), _F64)
            hist = true_divide(hist, reshape(widths, tuple(shape[i] if j == i else 1 for j in builtins.range(dims))))
    return hist, edges


def histogram2d(x, y, bins=10, range=None, density=None, weights=None):  # noqa: A002  (numpy's name)
    """numpy.histogram2d: (float64 counts of shape (x bins, y bins), x edges, y edges); bins is a count, a pair of
    counts or edges, or one array of edges for both."""
    try:
        pair = len(bins) in (1, 2)
    except TypeError:
        pair = True
    if not pair:
        bins = [bins, bins]
    hist, (x_edges, y_edges) = histogramdd([x, y], bins, range, density, weights)
    return hist, x_edges, y_edges


__all__ = [
    "nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmin", "nanmax", "nanargmin", "nanargmax", "nancumsum",
    "nancumprod", "nanmedian", "nanpercentile", "nanquantile", "average", "median", "percentile", "quantile", "ptp",
    "cov", "corrcoef", "histogram", "histogram_bin_edges", "histogram2d", "histogramdd", "bincount", "digitize", "count_nonzero",
]
