"""numpy's math over whole arrays and axes: differences and gradients, cross and Kronecker products,
1-D convolution and correlation, interpolation, the trapezoid rule, numpy 2's cumulative_sum/prod,
Vandermonde matrices and polynomial evaluation.

Shapes are static, so sizes, modes and axes are Python values; the array operands may be traced. Built from
kiln.numpy's own functions, so every function works eagerly, under kiln.jit and in Programs, and has
gradients where numpy's result is differentiable.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ._base import asarray, aval, broadcast_shapes, broadcast_to, convert, normalize_axes, promote
from .elementwise import (
    add, equal, less, maximum, minimum, multiply, not_equal, subtract, true_divide, where,
)
from .indexing import take
from .reductions import any as any_, cumprod, cumsum, sum as sum_
from .searching import searchsorted
from .shape import _slice_axis, concatenate, flip, moveaxis, reshape, stack


def _inexact(dtype) -> np.dtype:
    """numpy's floating dtype for a result computed from `dtype` (integers and bool: float64)."""
    return np.dtype(dtype) if dtypes.is_float(dtype) else np.dtype(np.float64)


def _axis(axis, ndim, where_):
    (ax,) = normalize_axes(axis, ndim, where_)
    return ax


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """numpy.diff: the n-th discrete difference along axis (booleans compare with !=, as numpy);
    prepend/append are joined first (a scalar is broadcast to one slice)."""
    x = asarray(a)
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"diff: order n must be a non-negative int, got {n!r}")
    if aval(x).ndim == 0:
        raise ValueError("diff: requires input that is at least one dimensional")
    ax = _axis(axis, aval(x).ndim, "diff")
    if n == 0:
        return x
    parts = []
    for extra in (prepend, x, append):
        if extra is None:
            continue
        extra = asarray(extra)
        if extra is not x and aval(extra).ndim == 0:
            shape = list(aval(x).shape)
            shape[ax] = 1
            extra = broadcast_to(extra, tuple(shape))
        parts.append(extra)
    x = concatenate(parts, axis=ax) if len(parts) > 1 else x
    op = not_equal if dtypes.is_bool(aval(x).dtype) else subtract
    for _ in range(n):
        size = aval(x).shape[ax]
        x = op(_slice_axis(x, ax, 1, max(size, 1)), _slice_axis(x, ax, 0, max(size - 1, 0)))
    return x


def ediff1d(ary, to_end=None, to_begin=None):
    """numpy.ediff1d: differences of the flattened array, with to_begin/to_end (in the array's dtype) around."""
    x = reshape(asarray(ary), (-1,))
    d = aval(x).dtype
    parts = [subtract(x[1:], x[:-1])]
    if to_begin is not None:
        parts.insert(0, reshape(convert(asarray(to_begin), d), (-1,)))
    if to_end is not None:
        parts.append(reshape(convert(asarray(to_end), d), (-1,)))
    return concatenate(parts) if len(parts) > 1 else parts[0]


def gradient(f, *varargs, axis=None, edge_order=None):
    """numpy.gradient: second-order central differences inside, one-sided first- or second-order
    (edge_order) differences at the ends. Spacing per axis: a scalar step, or the coordinates (1-D, one
    per element). One axis gives an array, several a tuple, as numpy 2. Integer input gives float64."""
    x = asarray(f)
    nd = aval(x).ndim
    axes = normalize_axes(axis, nd, "gradient") if axis is not None else tuple(range(nd))
    if axis is not None and not isinstance(axis, (tuple, list)):
        axes = (_axis(axis, nd, "gradient"),)
    edge_order = 1 if edge_order is None else edge_order
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and aval(asarray(varargs[0])).ndim == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError(f"gradient: expected 0, 1 or {len(axes)} spacings (one per axis), got {len(varargs)}")
    out_dtype = _inexact(aval(x).dtype)
    x = convert(x, out_dtype)
    results = [_gradient_axis(x, ax, h, edge_order) for ax, h in zip(axes, spacings)]
    return results[0] if len(results) == 1 else tuple(results)


def _gradient_axis(x, ax, spacing, edge_order):
    n = aval(x).shape[ax]
    if n < edge_order + 1:
        raise ValueError("gradient: shape of array too small to calculate a numerical gradient, at least "
                         f"(edge_order + 1) = {edge_order + 1} elements are required along axis {ax}")
    d = aval(x).dtype

    def part(lo, hi):
        return _slice_axis(x, ax, lo % n if lo < 0 else lo, n + hi if hi <= 0 else hi)

    def along(v):  # a 1-D array of spacings placed on axis ax
        shape = [1] * aval(x).ndim
        shape[ax] = aval(v).shape[0]
        return reshape(convert(v, d), tuple(shape))

    step = _uniform_step(spacing, n, ax)
    if step is not None:
        h = convert(asarray(step), d)
        inner = true_divide(subtract(part(2, 0), part(0, -2)), convert(multiply(h, 2), d))
        if edge_order == 1:
            first = true_divide(subtract(part(1, 2), part(0, 1)), h)
            last = true_divide(subtract(part(-1, 0), part(-2, -1)), h)
        else:
            first = true_divide(add(add(multiply(part(0, 1), -1.5), multiply(part(1, 2), 2.0)), multiply(part(2, 3), -0.5)), h)
            last = true_divide(add(add(multiply(part(-3, -2), 0.5), multiply(part(-2, -1), -2.0)), multiply(part(-1, 0), 1.5)), h)
    else:
        dx = convert(diff(asarray(spacing)), d)
        dx1, dx2 = along(dx[:-1]), along(dx[1:])
        total = add(dx1, dx2)
        ca = true_divide(-dx2, multiply(dx1, total))
        cb = true_divide(subtract(dx2, dx1), multiply(dx1, dx2))
        cc = true_divide(dx1, multiply(dx2, total))
        inner = add(add(multiply(ca, part(0, -2)), multiply(cb, part(1, -1))), multiply(cc, part(2, 0)))
        if edge_order == 1:
            first = true_divide(subtract(part(1, 2), part(0, 1)), along(dx[:1]))
            last = true_divide(subtract(part(-1, 0), part(-2, -1)), along(dx[-1:]))
        else:
            first = _second_order_edge(part(0, 1), part(1, 2), part(2, 3), along(dx[0:1]), along(dx[1:2]), start=True)
            last = _second_order_edge(part(-3, -2), part(-2, -1), part(-1, 0), along(dx[-2:-1]), along(dx[-1:]), start=False)
    return convert(concatenate([first, inner, last], axis=ax), d)


def _second_order_edge(f0, f1, f2, dx1, dx2, start):
    total = add(dx1, dx2)
    if start:
        ca = true_divide(-add(multiply(dx1, 2.0), dx2), multiply(dx1, total))
        cb = true_divide(total, multiply(dx1, dx2))
        cc = true_divide(-dx1, multiply(dx2, total))
    else:
        ca = true_divide(dx2, multiply(dx1, total))
        cb = true_divide(-total, multiply(dx1, dx2))
        cc = true_divide(add(multiply(dx2, 2.0), dx1), multiply(dx2, total))
    return add(add(multiply(ca, f0), multiply(cb, f1)), multiply(cc, f2))


def _uniform_step(spacing, n, ax):
    """The step when the spacing is a scalar (traced or not) or evenly spaced concrete coordinates (numpy's
    test), else None."""
    if hasattr(spacing, "aval"):
        if aval(spacing).ndim == 0:
            return spacing
        _check_coordinates(spacing, n, ax)
        return None
    coords = np.asarray(spacing)
    if coords.ndim == 0:
        return coords
    _check_coordinates(coords, n, ax)
    steps = np.diff(coords)
    return steps[0] if (steps == steps[0]).all() else None


def _check_coordinates(coords, n, ax):
    if aval(coords).ndim != 1:
        raise ValueError("gradient: distances must be either scalars or 1d")
    if aval(coords).shape[0] != n:
        raise ValueError(f"gradient: when 1d, distances must match the length of the corresponding dimension "
                         f"(axis {ax} has {n}, got {aval(coords).shape[0]})")


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """numpy.cross of 3-vectors (or 2-vectors: their z component, a scalar per pair when both are 2-D
    vectors) along the given axes, broadcast over the others."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = promote(asarray(a), asarray(b))
    x = moveaxis(x, _axis(axisa, aval(x).ndim, "cross"), -1)
    y = moveaxis(y, _axis(axisb, aval(y).ndim, "cross"), -1)
    na, nb = aval(x).shape[-1], aval(y).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError(f"cross: incompatible dimensions for cross product (dimension must be 2 or 3), got {na} and {nb}")
    xs = [x[..., i] for i in range(na)]
    ys = [y[..., i] for i in range(nb)]
    if na == nb == 2:
        return subtract(multiply(xs[0], ys[1]), multiply(xs[1], ys[0]))
    zero = np.zeros((), aval(x).dtype)
    x0, x1, x2 = xs if na == 3 else (*xs, zero)
    y0, y1, y2 = ys if nb == 3 else (*ys, zero)
    cx = subtract(multiply(x1, y2), multiply(x2, y1))
    cy = subtract(multiply(x2, y0), multiply(x0, y2))
    cz = subtract(multiply(x0, y1), multiply(x1, y0))
    parts = promote(cx, cy, cz)
    shape = broadcast_shapes(*[aval(p).shape for p in parts], where="cross")
    out = stack([broadcast_to(p, shape) for p in parts], axis=-1)
    return moveaxis(out, -1, _axis(axisc, aval(out).ndim, "cross"))


def kron(a, b):
    """numpy.kron: the Kronecker product (a broadcast multiply of interleaved axes, then a reshape)."""
    x, y = asarray(a), asarray(b)
    nd = max(aval(x).ndim, aval(y).ndim)
    x = reshape(x, (1,) * (nd - aval(x).ndim) + aval(x).shape)
    y = reshape(y, (1,) * (nd - aval(y).ndim) + aval(y).shape)
    sx, sy = aval(x).shape, aval(y).shape
    spread_x = reshape(x, tuple(v for d in sx for v in (d, 1)))
    spread_y = reshape(y, tuple(v for d in sy for v in (1, d)))
    return reshape(multiply(spread_x, spread_y), tuple(p * q for p, q in zip(sx, sy)))


def _check_1d(name, **arrays):
    for label, v in arrays.items():
        if aval(v).ndim != 1:
            raise ValueError(f"{name}: `{label}` must be one-dimensional, got shape {aval(v).shape}")
        if aval(v).shape[0] == 0:
            raise ValueError(f"{name}: `{label}` cannot be empty")


def _full_convolution(x, kernel):
    """sum_j kernel[j] * x[k - j] for every k of the full output (a static gather of windows)."""
    n, m = aval(x).shape[0], aval(kernel).shape[0]
    padded = concatenate([np.zeros(m - 1, aval(x).dtype), x, np.zeros(m - 1, aval(x).dtype)])
    windows = take(padded, np.arange(n + m - 1)[:, None] + np.arange(m)[None, :], axis=0)
    products = multiply(windows, flip(kernel))
    if dtypes.is_bool(aval(products).dtype):
        return any_(products, axis=-1)
    return sum_(products, axis=-1, dtype=aval(products).dtype)


def _mode_window(full, mode, name, offset_same, short, long):
    sizes = {"full": short + long - 1, "same": long, "valid": long - short + 1}
    if mode not in sizes:
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    start = {"full": 0, "same": offset_same, "valid": short - 1}[mode]
    return full[start:start + sizes[mode]]


def _product_options(name, x, k, precision, preferred_element_type):
    """jax.numpy's precision= (checked; kiln computes at full precision) and preferred_element_type= (the
    dtype both operands are computed in)."""
    from ..lax.api import canonicalize_precision

    canonicalize_precision(precision, name)
    if preferred_element_type is None:
        return promote(asarray(x), asarray(k))
    return convert(asarray(x), preferred_element_type), convert(asarray(k), preferred_element_type)


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """numpy.convolve of two 1-D arrays (modes 'full', 'same', 'valid'), with numpy's dtype; precision= and
    preferred_element_type= as jax.numpy's."""
    x, k = _product_options("convolve", a, v, precision, preferred_element_type)
    _check_1d("convolve", a=x, v=k)
    n, m = aval(x).shape[0], aval(k).shape[0]
    if m > n:
        x, k, n, m = k, x, m, n
    return _mode_window(_full_convolution(x, k), mode, "convolve", (m - 1) // 2, m, n)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """numpy.correlate of two 1-D arrays: c[k] = sum_n a[n + k] * v[n] (modes 'valid', 'same', 'full');
    precision= and preferred_element_type= as jax.numpy's."""
    x, k = _product_options("correlate", a, v, precision, preferred_element_type)
    _check_1d("correlate", a=x, v=k)
    n, m = aval(x).shape[0], aval(k).shape[0]
    full = _full_convolution(x, flip(k))
    short, long = min(n, m), max(n, m)
    return _mode_window(full, mode, "correlate", (m - 1) // 2 if n >= m else n // 2, short, long)


def interp(x, xp, fp, left=None, right=None, period=None):
    """numpy.interp: piecewise-linear interpolation of (xp, fp) at x, in float64 as numpy; xp increasing.
    left/right (default fp[0], fp[-1]) outside; `period` wraps x and xp. The interval of each x is found
    by a binary search (knp.searchsorted)."""
    f64 = np.dtype(np.float64)
    xs, xps, fps = (convert(asarray(v), f64) for v in (x, xp, fp))
    if aval(xps).ndim != 1 or aval(fps).ndim != 1:
        raise ValueError("interp: data points xp and fp must be one-dimensional")
    if aval(xps).shape != aval(fps).shape:
        raise ValueError(f"interp: fp and xp are not of the same length ({aval(fps).shape[0]} and {aval(xps).shape[0]})")
    if aval(xps).shape[0] == 0:
        raise ValueError("interp: array of sample points is empty")
    if period is not None:
        from .indexing import argsort
        from .math import remainder

        if not hasattr(period, "aval") and float(period) == 0:
            raise ValueError("interp: period must be a non-zero value")
        p = abs(period) if not hasattr(period, "aval") else period
        xs, xps = remainder(xs, p), remainder(xps, p)
        order = argsort(xps)
        xps, fps = take(xps, order), take(fps, order)
        xps = concatenate([subtract(xps[-1:], p), xps, add(xps[:1], p)])
        fps = concatenate([fps[-1:], fps, fps[:1]])
        left = right = None
    n = aval(xps).shape[0]
    lo_value = fps[0] if left is None else convert(asarray(left), f64)
    hi_value = fps[-1] if right is None else convert(asarray(right), f64)
    if n == 1:
        out = broadcast_to(fps[0], aval(xs).shape)
    else:
        j = _clip_index(subtract(searchsorted(xps, xs, side="right"), 1), n - 2)
        x0, x1, f0, f1 = take(xps, j), take(xps, add(j, 1)), take(fps, j), take(fps, add(j, 1))
        slope = true_divide(subtract(f1, f0), subtract(x1, x0))
        out = add(multiply(slope, subtract(xs, x0)), f0)
        out = where(equal(xs, xps[-1]), fps[-1], out)
    out = where(less(xs, xps[0]), lo_value, out)
    return where(less(xps[-1], xs), hi_value, out)


def _clip_index(i, highest):
    return minimum(maximum(i, 0), highest)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """numpy.trapezoid: the trapezoid rule along axis, with sample points x (1-D, or y's shape) or the
    spacing dx. Integer samples give float64, as numpy."""
    ys = asarray(y)
    ax = _axis(axis, aval(ys).ndim, "trapezoid")
    n = aval(ys).shape[ax]
    if x is None:
        d = dx if dtypes.is_python_scalar(dx) else asarray(dx)
    else:
        xs = asarray(x)
        if aval(xs).ndim == 1:
            d = diff(xs)
            shape = [1] * aval(ys).ndim
            shape[ax] = aval(d).shape[0]
            d = reshape(d, tuple(shape))
        else:
            d = diff(xs, axis=ax)
    work = _inexact(aval(promote(ys, d)[0]).dtype if not dtypes.is_python_scalar(d) else aval(ys).dtype)
    ys = convert(ys, work)
    halves = multiply(add(_slice_axis(ys, ax, 1, max(n, 1)), _slice_axis(ys, ax, 0, max(n - 1, 0))), 0.5)
    return sum_(multiply(d, halves), axis=ax)


def _cumulative(fn, name, identity, x, axis, dtype, include_initial):
    v = asarray(x)
    nd = aval(v).ndim
    if axis is None:
        if nd > 1:
            raise ValueError(f"{name}: axis must be given for arrays with more than one dimension")
        if nd == 0:
            v, nd = reshape(v, (1,)), 1
        axis = 0
    ax = _axis(axis, nd, name)
    out = fn(v, axis=ax, dtype=dtype)
    if include_initial:
        shape = list(aval(out).shape)
        shape[ax] = 1
        out = concatenate([broadcast_to(np.asarray(identity, aval(out).dtype), tuple(shape)), out], axis=ax)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """numpy 2's cumulative_sum: cumsum that needs axis for n-D input and can start with a 0."""
    return _cumulative(cumsum, "cumulative_sum", 0, x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """numpy 2's cumulative_prod: cumprod that needs axis for n-D input and can start with a 1."""
    return _cumulative(cumprod, "cumulative_prod", 1, x, axis, dtype, include_initial)


def vander(x, N=None, increasing=False):
    """numpy.vander: columns are powers of x (decreasing unless increasing=True), made by running products
    as numpy does, in numpy's dtype: float64 for floats, int64 for integers and bool."""
    v = asarray(x)
    if aval(v).ndim != 1:
        raise ValueError("vander: x must be a one-dimensional array or sequence")
    n = aval(v).shape[0]
    cols = n if N is None else int(N)
    if cols < 0:
        raise ValueError(f"vander: N must be non-negative, got {cols}")
    d = np.dtype(np.float64 if dtypes.is_float(aval(v).dtype) else np.int64)
    v = convert(v, d)
    ones = broadcast_to(np.ones((), d), (n, min(cols, 1)))
    if cols <= 1:
        return ones
    powers = cumprod(broadcast_to(reshape(v, (n, 1)), (n, cols - 1)), axis=1)
    out = concatenate([ones, powers], axis=1)
    return out if increasing else flip(out, 1)


def polyval(p, x, *, unroll=16):
    """numpy.polyval: p[0] * x**(N-1) + ... + p[N-1] by Horner's rule, in the promoted dtype of p and x
    (jax.numpy's unroll= is accepted: the static loop is always unrolled)."""
    coefficients, points = asarray(p), asarray(x)
    if aval(coefficients).ndim != 1:
        raise ValueError(f"polyval: p must be one-dimensional, got shape {aval(coefficients).shape}")
    coefficients, points = promote(coefficients, points)
    y = broadcast_to(np.zeros((), aval(points).dtype), aval(points).shape)
    for i in range(aval(coefficients).shape[0]):
        y = add(multiply(y, points), coefficients[i])
    return y


__all__ = [
    "diff", "ediff1d", "gradient", "cross", "kron", "convolve", "correlate", "interp", "trapezoid",
    "cumulative_sum", "cumulative_prod", "vander", "polyval",
]
