"""Reductions over axes (int, tuple or None) with keepdims, as in numpy; cumulative sums and products."""
from __future__ import annotations

import builtins

import numpy as np

from ..lax import prims
from ..lax import structural_prims as sp
from ..core import dtypes
from ._base import asarray, aval, convert, convert_weak, normalize_axes, numpy_result_dtype


def _keep(out, shape, axes, keepdims):
    if keepdims:
        kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
        out = prims.reshape.bind(out, new_shape=kept)
    return out


def _weak_as_input(out, x_aval, dtype):
    """out weakly typed when the operand was and no dtype= was asked for, as JAX's reductions: the sum
    of values computed from Python numbers alone still promotes like a Python number; strong with dtype=."""
    if dtype is not None:
        return convert(out, dtype) if aval(out).weak_type else out  # dtype= asks for a strong result
    return convert_weak(out, aval(out).dtype) if x_aval.weak_type else out


def _reduce(prim, name, x, axis, keepdims, dtype=None, initial=None, where=None):
    x = asarray(x)
    return _weak_as_input(_reduce_strong(prim, name, x, axis, keepdims, dtype, initial, where), aval(x), dtype)


def _reduce_strong(prim, name, x, axis, keepdims, dtype=None, initial=None, where=None):
    a = aval(x)
    axes = normalize_axes(axis, a.ndim, name)
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype(name, a.dtype)
    if out_dtype != a.dtype:
        x = convert(x, out_dtype)
    if where is not None:
        x = _masked(x, where, prim, name, initial)
    if initial is not None:
        initial = convert(asarray(initial), out_dtype)
        if aval(initial).shape != ():
            raise ValueError(f"{name}: initial must be a scalar, got shape {aval(initial).shape}")
    if not axes:
        return x if initial is None else _combine(prim, x, initial)
    if prim not in (prims.reduce_sum, sp.reduce_prod_p) and initial is None:
        for ax in axes:
            if a.shape[ax] == 0:
                raise ValueError(f"{name}: zero-size array to reduction operation {name} which has no identity")
    if initial is not None and builtins.any(a.shape[ax] == 0 for ax in axes):  # every slice is empty
        from ._base import broadcast_to

        kept = tuple(1 if i in axes else d for i, d in enumerate(a.shape))
        return broadcast_to(initial, kept if keepdims else tuple(d for i, d in enumerate(a.shape) if i not in axes))
    out = _keep(prim.bind(x, axes=axes), a.shape, axes, keepdims)
    return out if initial is None else _combine(prim, out, initial)


_COMBINE = {"reduce_sum": "add", "reduce_prod": "mul", "reduce_max": "max", "reduce_min": "min"}


def _combine(prim, out, initial):
    """out (op) initial, broadcast: numpy's `initial=` joins every reduced slice."""
    from ._base import broadcast_to

    return getattr(prims, _COMBINE[prim.name]).bind(out, broadcast_to(initial, aval(out).shape))


def _mask(where, shape, name):
    """A boolean `where=` mask broadcast to the operand's shape."""
    from ._base import broadcast_to

    mask = asarray(where)
    if aval(mask).dtype != np.bool_:
        raise TypeError(f"{name}: where= must be a boolean array, got {aval(mask).dtype}")
    try:
        return broadcast_to(mask, shape)
    except ValueError:
        raise ValueError(f"{name}: where= of shape {aval(mask).shape} does not broadcast to the operand's "
                         f"shape {shape}") from None


def _identity(prim, dtype, name, initial):
    if prim is prims.reduce_sum:
        return 0
    if prim is sp.reduce_prod_p:
        return 1
    if initial is None:
        op = "maximum" if prim is prims.reduce_max else "minimum"
        raise ValueError(f"{name}: reduction operation '{op}' does not have an identity, so to use a where mask "
                         f"one has to specify 'initial' (as numpy)")
    if dtypes.is_float(dtype):
        return -np.inf if prim is prims.reduce_max else np.inf
    if dtypes.is_bool(dtype):
        return prim is not prims.reduce_max
    info = np.iinfo(dtype)
    return info.min if prim is prims.reduce_max else info.max


def _masked(x, where, prim, name, initial):
    """x with the elements outside `where` replaced by the reduction's identity."""
    from .elementwise import where as select

    a = aval(x)
    mask = _mask(where, a.shape, name)
    return select(mask, x, np.asarray(_identity(prim, a.dtype, name, initial), a.dtype))


def sum(a, axis=None, dtype=None, keepdims=False, *, initial=None, where=None):
    """numpy.sum; integers and bools accumulate in numpy's wider integer dtype. initial= is added to every
    result; where= (a boolean mask broadcast to a's shape) leaves out the elements where it is False."""
    return _reduce(prims.reduce_sum, "sum", a, axis, keepdims, dtype, initial, where)


def prod(a, axis=None, dtype=None, keepdims=False, *, initial=None, where=None):
    """numpy.prod; integers and bools multiply in numpy's wider integer dtype (wrapping like numpy)."""
    return _reduce(sp.reduce_prod_p, "prod", a, axis, keepdims, dtype, initial, where)


def max(a, axis=None, keepdims=False, *, initial=None, where=None):
    """numpy.max. initial= joins every slice (so empty slices are allowed); where= needs initial, as in numpy."""
    return _reduce(prims.reduce_max, "max", a, axis, keepdims, None, initial, where)


def min(a, axis=None, keepdims=False, *, initial=None, where=None):
    return _reduce(prims.reduce_min, "min", a, axis, keepdims, None, initial, where)


amax = max
amin = min


def _logical(a, axis, keepdims, is_all, where=None):
    x = asarray(a)
    av = aval(x)
    axes = normalize_axes(axis, av.ndim, "all" if is_all else "any")
    if av.dtype != np.bool_:
        from .elementwise import not_equal

        x = not_equal(x, np.zeros((), av.dtype))
    if where is not None:
        from .elementwise import where as select

        x = select(_mask(where, av.shape, "all" if is_all else "any"), x, np.asarray(is_all))
    if not axes:
        return x
    if builtins.any(av.shape[i] == 0 for i in axes):
        from .creation import full

        shape = tuple(1 if i in axes else d for i, d in enumerate(av.shape)) if keepdims else \
            tuple(d for i, d in enumerate(av.shape) if i not in axes)
        return full(shape, is_all, np.bool_)
    prim = prims.reduce_min if is_all else prims.reduce_max
    return _keep(prim.bind(x, axes=axes), av.shape, axes, keepdims)


def all(a, axis=None, keepdims=False, *, where=None):
    return _logical(a, axis, keepdims, True, where)


def any(a, axis=None, keepdims=False, *, where=None):
    return _logical(a, axis, keepdims, False, where)


def _accumulation_dtype(dtype):
    """Where mean, var and std add up and divide: float64 for every float narrower than that (and for the ints,
    whose mean numpy gives in float64)."""
    return np.dtype(np.float64) if dtypes.is_float(dtype) or dtypes.is_int(dtype) or dtypes.is_bool(dtype) \
        else np.dtype(dtype)


def _count(av, axes, keepdims, where, name, dtype):
    """The number of elements in each reduced slice: a Python int, or an array for a where= mask."""
    if where is None:
        return np.asarray(int(np.prod([av.shape[i] for i in axes], dtype=np.int64)), dtype)
    mask = convert(_mask(where, av.shape, name), dtype)
    return _reduce(prims.reduce_sum, name, mask, axes, keepdims, dtype)


def _mean_in(x, axes, keepdims, where, name, acc):
    """(the mean in the accumulation dtype, the counts): the sum and the division both in `acc`."""
    from .elementwise import true_divide

    av = aval(x)
    count = _count(av, axes, keepdims, where, name, acc)
    total = _reduce(prims.reduce_sum, name, convert(x, acc), axes, keepdims, acc, where=where)
    return true_divide(total, count), count


def mean(a, axis=None, dtype=None, keepdims=False, *, where=None):
    """numpy.mean: the sum divided by the count, both in float64 (for float32, float16, bfloat16 and ints),
    rounded once to numpy's result dtype. where= (a boolean mask) averages only the elements where it is True."""
    x = asarray(a)
    av = aval(x)
    axes = normalize_axes(axis, av.ndim, "mean")
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype("mean", av.dtype)
    m, _ = _mean_in(x, axes, keepdims, where, "mean", _accumulation_dtype(out_dtype))
    return _weak_as_input(convert(m, out_dtype), av, dtype)


def var(a, axis=None, dtype=None, ddof=0, keepdims=False, *, where=None):
    """numpy.var: mean squared deviation, divided by N - ddof; computed in float64 and rounded once to
    numpy's result dtype."""
    from .elementwise import multiply, subtract, true_divide

    x = asarray(a)
    av = aval(x)
    axes = normalize_axes(axis, av.ndim, "var")
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype("var", av.dtype)
    acc = _accumulation_dtype(out_dtype)
    if dtypes.is_complex(av.dtype):  # |x - mean|^2: the mean in complex128, the squares real
        from .more_math import conjugate, real

        x = convert(x, np.complex128)
        m, count = _mean_in(x, axes, True, where, "var", np.dtype(np.complex128))
        count = convert(real(count), acc) if where is not None else np.real(count).astype(acc)
        centered = subtract(x, m)
        squares = real(multiply(centered, conjugate(centered)))
    else:
        x = convert(x, acc)
        m, count = _mean_in(x, axes, True, where, "var", acc)
        centered = subtract(x, m)
        squares = multiply(centered, centered)
    total = _reduce(prims.reduce_sum, "var", squares, axes, keepdims, acc, where=where)
    if where is None:
        count = np.asarray(int(count) - int(ddof), acc)
    else:
        count = subtract(count if keepdims else _drop(count, axes), np.asarray(ddof, acc))
    return _weak_as_input(convert(true_divide(total, count), out_dtype), av, dtype)


def _drop(x, axes):
    from .shape import squeeze

    return squeeze(x, axis=axes)


def std(a, axis=None, dtype=None, ddof=0, keepdims=False, *, where=None):
    """numpy.std: sqrt of var, taken in float64 and rounded once."""
    from .elementwise import sqrt

    x = asarray(a)
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype("std", aval(x).dtype)
    out = convert(sqrt(var(x, axis, _accumulation_dtype(out_dtype), ddof, keepdims, where=where)), out_dtype)
    return _weak_as_input(out, aval(x), dtype)


def _arg(prim, name, a, axis, keepdims):
    x = asarray(a)
    av = aval(x)
    shape = av.shape
    if axis is None:
        from .shape import ravel

        x, ax = ravel(x), 0
    else:
        (ax,) = normalize_axes(axis, av.ndim, name)
    if aval(x).shape[ax] == 0:
        raise ValueError(f"{name}: attempt to get {name} of an empty sequence")
    out = prim.bind(x, axis=ax, index_dtype=np.dtype(np.int64))
    if keepdims:
        kept = (1,) * len(shape) if axis is None else tuple(1 if i == ax else d for i, d in enumerate(shape))
        out = prims.reshape.bind(out, new_shape=kept)
    return out


def argmax(a, axis=None, keepdims=False):
    """numpy.argmax (int64; the first maximum, NaN counts as the maximum)."""
    return _arg(sp.argmax_p, "argmax", a, axis, keepdims)


def argmin(a, axis=None, keepdims=False):
    return _arg(sp.argmin_p, "argmin", a, axis, keepdims)


def _cumulative(prim, name, a, axis, dtype):
    x = asarray(a)
    if axis is None:
        from .shape import ravel

        x, axis = ravel(x), 0
    av = aval(x)
    (ax,) = normalize_axes(axis, av.ndim, name)
    out_dtype = np.dtype(dtype) if dtype is not None else numpy_result_dtype(name, av.dtype)
    return _weak_as_input(prim.bind(convert(x, out_dtype), axis=ax, reverse=False), av, dtype)


def cumsum(a, axis=None, dtype=None):
    """numpy.cumsum; axis=None runs over the flattened array."""
    return _cumulative(sp.cumsum_p, "cumsum", a, axis, dtype)


def cumprod(a, axis=None, dtype=None):
    return _cumulative(sp.cumprod_p, "cumprod", a, axis, dtype)
