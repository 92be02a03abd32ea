"""Array creation: array, asarray, zeros, ones, full and their _like forms."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import current_graph_trace
from ._base import asarray as _asarray, aval, broadcast_to


def _shape(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def full(shape, fill_value, dtype=None):
    """An array of `shape` filled with fill_value (a broadcast, never a stored constant, when traced)."""
    shape = _shape(shape)
    if dtype is None:
        dtype = aval(fill_value).dtype if hasattr(fill_value, "aval") else np.asarray(fill_value).dtype
    value = _asarray(fill_value, dtypes.canonical(dtype))
    if isinstance(value, np.ndarray) and current_graph_trace() is None:
        return np.full(shape, value, dtype=value.dtype)
    return broadcast_to(value, shape)


def zeros(shape, dtype=float):
    return full(shape, np.zeros((), np.dtype(dtype)), np.dtype(dtype))


def ones(shape, dtype=float):
    return full(shape, np.ones((), np.dtype(dtype)), np.dtype(dtype))


def full_like(a, fill_value, dtype=None):
    return full(aval(a).shape, fill_value, dtype or aval(a).dtype)


def zeros_like(a, dtype=None):
    return full_like(a, 0, dtype)


def ones_like(a, dtype=None):
    return full_like(a, 1, dtype)


def array(object, dtype=None):
    return _asarray(object, dtype)


def asarray(a, dtype=None):
    return _asarray(a, dtype)


def empty(shape, dtype=float):
    """numpy.empty: kiln has no uninitialized arrays; this is zeros."""
    return zeros(shape, dtype)


def empty_like(a, dtype=None):
    return zeros_like(a, dtype)


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
    if not _traced():
        return ref.astype(out_dtype) if dtype is None else np.arange(*[v for v in (start, stop, step) if v is not None], dtype=out_dtype)
    from ..lax import prims

    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    n = ref.size
    if dtypes.is_int(out_dtype) and all(float(v) == int(v) for v in (start, step)):
        iota = prims.iota.bind(shape=(n,), dimension=0, dtype=out_dtype)
        scaled = prims.mul.bind(iota, broadcast_to(np.asarray(step, out_dtype), (n,)))
        return prims.add.bind(scaled, broadcast_to(np.asarray(start, out_dtype), (n,)))
    f64 = np.dtype(np.float64)
    iota = prims.iota.bind(shape=(n,), dimension=0, dtype=f64)
    values = prims.add.bind(prims.mul.bind(iota, broadcast_to(np.asarray(step, f64), (n,))), broadcast_to(np.asarray(start, f64), (n,)))
    return prims.convert.bind(values, new_dtype=out_dtype)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """numpy.linspace for scalar start/stop (traced values allowed) and a concrete num."""
    from ..lax import prims
    from .elementwise import add, multiply, subtract, true_divide, where

    num = int(_static_scalar(num, "linspace", "num"))
    if num < 0:
        raise ValueError(f"linspace: number of samples, {num}, must be non-negative")
    if axis != 0:
        raise ValueError("linspace: only axis=0 is supported")
    for v in (start, stop):
        if hasattr(v, "aval") and v.aval.shape != ():
            raise TypeError("linspace: array-valued start/stop are not supported; use scalars")
    out_dtype = dtypes.canonical(dtype) if dtype is not None else np.dtype(np.float64)
    if not hasattr(start, "aval") and not hasattr(stop, "aval") and not _traced():
        return np.linspace(start, stop, num, endpoint, retstep, out_dtype)
    f64 = np.dtype(np.float64)
    s, e = _asarray(start, f64), _asarray(stop, f64)
    div = (num - 1) if endpoint else num
    delta = subtract(e, s)
    iota = prims.iota.bind(shape=(num,), dimension=0, dtype=f64)
    step = true_divide(delta, np.float64(div)) if div > 0 else delta
    y = add(multiply(iota, step), s) if div > 0 else add(multiply(iota, delta), s)
    if endpoint and num > 1:
        last = prims.eq.bind(iota, broadcast_to(np.float64(num - 1), (num,)))
        y = where(last, e, y)
    y = _asarray(y, out_dtype)
    return (y, step) if retstep else y


def eye(N, M=None, k=0, dtype=float):
    """numpy.eye: ones on the k-th diagonal (an iota comparison when traced)."""
    M = N if M is None else M
    dtype = dtypes.canonical(dtype)
    if not _traced():
        return np.eye(N, M, k, dtype)
    from ..lax import prims

    shape = (int(N), int(M))
    i = prims.iota.bind(shape=shape, dimension=0, dtype=np.dtype(np.int32))
    j = prims.iota.bind(shape=shape, dimension=1, dtype=np.dtype(np.int32))
    on = prims.eq.bind(prims.sub.bind(j, i), broadcast_to(np.int32(k), shape))
    return prims.convert.bind(on, new_dtype=dtype)


def identity(n, dtype=float):
    return eye(n, dtype=dtype)
