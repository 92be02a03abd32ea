"""Array creation: array, asarray, zeros, ones, full and their _like forms."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.array import as_array
from ..core.trace import current_graph_trace
from ..lax import prims
from ._base import asarray as _asarray, aval, broadcast_to


def _shape(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def _weak(x):
    """x weakly typed: an array made without dtype= has numpy's default dtype alone, and the dtype of
    the arrays it meets otherwise, as a Python number (docs/numpy.md, "Default dtypes")."""
    return prims.convert.bind(x, new_dtype=aval(x).dtype, weak_type=True)


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with fill_value (a broadcast, never a stored constant, when traced).

    Without dtype=, a Python number gives numpy's dtype (float64, int64), weakly typed when traced."""
    shape = _shape(shape)
    weak = dtype is None and dtypes.is_python_scalar(fill_value)
    if dtype is None:
        dtype = aval(fill_value).dtype if hasattr(fill_value, "aval") else np.asarray(fill_value).dtype
    value = _asarray(fill_value, dtypes.canonical(dtype))
    if isinstance(value, np.ndarray) and current_graph_trace() is None:
        out = np.full(shape, value, dtype=value.dtype)
        return _weak(out) if weak else out
    return broadcast_to(_weak(value) if weak else value, shape)


def zeros(shape, dtype=None):
    """numpy.zeros; without dtype= float64, weakly typed when traced (see full)."""
    return full(shape, 0.0 if dtype is None else np.zeros((), dtype), dtype)


def ones(shape, dtype=None):
    """numpy.ones; without dtype= float64, weakly typed when traced (see full)."""
    return full(shape, 1.0 if dtype is None else np.ones((), dtype), dtype)


def full_like(a, fill_value, dtype=None, shape=None):
    """numpy.full_like; without dtype= the result keeps a's weak type too, as JAX's (so the state an
    optimizer builds with zeros_like of a weakly typed parameter promotes as the parameter does)."""
    a_aval = aval(a)
    out = full(a_aval.shape if shape is None else shape, fill_value, dtype or a_aval.dtype)
    return _weak(out) if dtype is None and a_aval.weak_type else out


def zeros_like(a, dtype=None, shape=None):
    return full_like(a, 0, dtype, shape)


def ones_like(a, dtype=None, shape=None):
    return full_like(a, 1, dtype, shape)


def array(object, dtype=None, *, copy=True, order="K", ndmin=0):
    """numpy.array: eagerly a new numpy array (copy=None: only where needed; copy=False: never, as asarray);
    traced arrays are immutable, so never copied. ndmin prepends dimensions of size 1."""
    x = _copied(object, dtype, copy, "array")
    missing = int(ndmin) - aval(x).ndim
    if missing > 0:
        from .shape import reshape

        x = reshape(x, (1,) * missing + aval(x).shape)
    return x


def asarray(a, dtype=None, order=None, *, copy=None):
    """numpy.asarray. copy=True copies an eager array; copy=False refuses to, raising ValueError where a
    conversion is needed, as numpy. Traced arrays are immutable, so copy= changes nothing for them."""
    return _copied(a, dtype, copy, "asarray")


def _copied(a, dtype, copy, where):
    x = _asarray(a, dtype)
    if isinstance(x, np.ndarray):
        if copy is False and x is not a and not (isinstance(a, np.ndarray) and x.base is a):
            raise ValueError(f"{where}: unable to avoid a copy while creating an array as requested (copy=False); "
                             "pass copy=None to allow one")
        if copy and (x is a or x.base is a):
            x = x.copy()
    if dtype is None and _python_numbers_only(a):
        # numpy's dtype (float64, int64), weakly typed like the numbers themselves; a concrete (weak) kiln array
        # when traced too, so that it still works where a concrete value is needed
        return as_array(x, weak=True)
    return x


def empty(shape, dtype=None):
    """numpy.empty: kiln has no uninitialized arrays; this is zeros."""
    return zeros(shape, dtype)


def empty_like(a, dtype=None, shape=None):
    return zeros_like(a, dtype, shape)


def _python_numbers_only(a) -> bool:
    """A Python number, or a (nested) list or tuple of nothing else."""
    if isinstance(a, (list, tuple)):
        return bool(a) and all(_python_numbers_only(e) for e in a)
    return dtypes.is_python_scalar(a)


def _traced() -> bool:
    return current_graph_trace() is not None


def _static_scalar(value, fn: str, what: str):
    if hasattr(value, "aval"):
        raise TypeError(f"{fn}: `{what}` must be a concrete number (the result's length must be known when "
                        "tracing); pass it as a Python number or a static argument")
    return value


def arange(start, stop=None, step=None, dtype=None):
    """numpy.arange with concrete bounds (numpy's dtypes: int64 for ints, float64 for floats)."""
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        _static_scalar(v, "arange", name)
    ref = np.arange(start, stop, step) if step is not None else np.arange(start, stop) if stop is not None else np.arange(start)
    out_dtype = dtypes.canonical(dtype if dtype is not None else ref.dtype)
    if dtype is None:  # numpy's dtype, weakly typed (see full)
        return _weak(arange(start, stop, step, out_dtype))
    if not _traced():
        return ref.astype(out_dtype) if dtype is None else np.arange(*[v for v in (start, stop, step) if v is not None], dtype=out_dtype)
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    n = ref.size
    if dtypes.is_int(out_dtype):
        # numpy's rule: the length comes from the (float) step; the first two values are cast to the dtype
        # (truncated toward zero) and the rest are first + i*(second - first) in the dtype's wrapping
        # arithmetic, so arange(0, 5, 0.5, dtype=int) is ten zeros (a negative step of an unsigned dtype wraps)
        first, second = int(start), int(start + step)
        iota = prims.iota.bind(shape=(n,), dimension=0, dtype=out_dtype)
        wrapped = [np.asarray(v).astype(out_dtype) for v in (second - first, first)]
        scaled = prims.mul.bind(iota, broadcast_to(wrapped[0], (n,)))
        return prims.add.bind(scaled, broadcast_to(wrapped[1], (n,)))
    f64 = np.dtype(np.float64)
    iota = prims.iota.bind(shape=(n,), dimension=0, dtype=f64)
    values = prims.add.bind(prims.mul.bind(iota, broadcast_to(np.asarray(step, f64), (n,))), broadcast_to(np.asarray(start, f64), (n,)))
    return prims.convert.bind(values, new_dtype=out_dtype)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """numpy.linspace; start and stop may be arrays (traced or not, broadcast together: the samples run
    along a new axis `axis`), num is a concrete int.

    The result dtype is numpy's: float64 for Python numbers and integer arrays, else the floating dtype of
    start/stop (float32 arrays give float32); an integer `dtype` floors the samples, as numpy does.
    Computed in float64 and rounded once.
    """
    from .elementwise import add, multiply, subtract, true_divide, where

    num = int(_static_scalar(num, "linspace", "num"))
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    if not hasattr(start, "aval") and not hasattr(stop, "aval") and not _traced():
        out = np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
        if dtype is None and dtypes.is_python_scalar(start) and dtypes.is_python_scalar(stop):
            return (_weak(out[0]), out[1]) if retstep else _weak(out)  # numpy's float64, weakly typed
        return out
    s, e = _asarray(start), _asarray(stop)
    work = _linspace_dtype(start, stop)
    out_dtype = dtypes.canonical(dtype) if dtype is not None else work
    f64 = np.dtype(np.float64)
    wide = np.dtype(np.complex128) if dtypes.is_complex(work) else f64  # computed in float64 parts
    s, e = _asarray(s, wide), _asarray(e, wide)
    bshape = tuple(np.broadcast_shapes(aval(s).shape, aval(e).shape))
    nd = len(bshape) + 1
    if not -nd <= int(axis) < nd:
        raise ValueError(f"linspace: axis {axis} is out of bounds for a result of {nd} dimensions")
    ax = int(axis) % nd
    s, e = broadcast_to(s, bshape), broadcast_to(e, bshape)
    div = (num - 1) if endpoint else num
    delta = subtract(e, s)
    step = true_divide(delta, np.float64(div)) if div > 0 else broadcast_to(np.asarray(np.nan, wide), bshape)
    shape = (num,) + bshape  # a leading sample axis, moved to `axis` at the end
    iota = prims.iota.bind(shape=shape, dimension=0, dtype=f64)
    s, e = broadcast_to(s, shape), broadcast_to(e, shape)
    y = add(multiply(iota, broadcast_to(step if div > 0 else delta, shape)), s)
    if endpoint and num > 1:
        last = prims.eq.bind(iota, broadcast_to(np.float64(num - 1), shape))
        y = where(last, e, y)
    if dtypes.is_int(out_dtype):
        from .math import floor

        y = floor(y)
    y = _asarray(y, out_dtype)
    if dtype is None and dtypes.is_python_scalar(start) and dtypes.is_python_scalar(stop):
        y = _weak(y)  # numpy's float64, weakly typed (see full)
    if ax != 0:
        from .shape import moveaxis

        y = moveaxis(y, 0, ax)
    return (y, _asarray(step, work)) if retstep else y


def _linspace_dtype(start, stop):
    """numpy's linspace dtype: float64 (complex128 with a complex end) unless a strong (array) start/stop is
    floating or complex, then that dtype."""
    ends = [aval(v).dtype for v in (start, stop)]
    complex_end = any(dtypes.is_complex(d) for d in ends)
    strong = [aval(v).dtype for v in (start, stop)
              if not dtypes.is_python_scalar(v)]
    strong = [d for d in strong if dtypes.is_inexact(d)]
    if not strong:
        return np.dtype(np.complex128 if complex_end else np.float64)
    work = dtypes.canonical(dtypes.result_type(*[(d, False) for d in strong])[0])
    return dtypes.complex_dtype(work) if complex_end else work


def eye(N, M=None, k=0, dtype=None):
    """numpy.eye: ones on the k-th diagonal (an iota comparison when traced); without dtype= float64,
    weakly typed (see full)."""
    M = N if M is None else M
    if dtype is None:
        return _weak(eye(N, M, k, np.float64))
    dtype = dtypes.canonical(dtype)
    if not _traced():
        return np.eye(N, M, k, dtype)
    shape = (int(N), int(M))
    i = prims.iota.bind(shape=shape, dimension=0, dtype=np.dtype(np.int32))
    j = prims.iota.bind(shape=shape, dimension=1, dtype=np.dtype(np.int32))
    on = prims.eq.bind(prims.sub.bind(j, i), broadcast_to(np.int32(k), shape))
    return prims.convert.bind(on, new_dtype=dtype)


def identity(n, dtype=None):
    return eye(n, dtype=dtype)
