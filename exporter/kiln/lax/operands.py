"""Operands of kiln.lax and kiln.numpy functions: conversion, dtype promotion and broadcasting.

kiln.numpy builds numpy's semantics on these (it re-exports them from kiln.numpy._base); they live
here so that kiln.lax's own functions accept the same operands without importing kiln.numpy.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.array import as_array
from ..core.aval import reject_masked
from ..core.trace import Tracer, current_graph_trace, get_aval, is_eager
from . import prims, structural_prims


def asarray(x, dtype=None):
    """A kiln operand: tracers stay tracers, everything else becomes a numpy array."""
    if isinstance(x, Tracer):
        return x if dtype is None or x.dtype == np.dtype(dtype) else convert(x, dtype)
    if isinstance(x, (list, tuple)) and any(isinstance(e, Tracer) for e in _flat(x)):
        return _stack([_weak_element(e) if dtype is None else asarray(e, dtype) for e in x])
    reject_masked(x)
    if dtype is not None and dtypes.is_int(np.dtype(dtype)):
        src = np.asarray(x)
        if dtypes.is_float(src.dtype):  # float -> int as compiled code converts (saturating, NaN -> 0)
            return convert(src, dtype)
    if isinstance(x, np.ndarray) and (dtype is None or x.dtype == np.dtype(dtype)):
        arr = x  # a kiln array stays one, with its weak type
    else:
        arr = np.asarray(x, dtype=dtype)
    dtypes.canonical(arr.dtype)
    if dtype is None and _numbers_only(x):
        # Python numbers (or nested lists of them) stay weak through whatever takes them as an array operand
        # (broadcast_to(1e10, s), reshape(0.5, ...), concatenate([x, [0.0]]), ...), as in JAX: a concrete weak
        # kiln array, numpy's dtype alone and the dtype of the first array it meets
        return as_array(arr, weak=True)
    return arr


def _numbers_only(x) -> bool:
    if isinstance(x, (list, tuple)):
        return bool(x) and all(_numbers_only(e) for e in x)
    return dtypes.is_python_scalar(x)


def _weak_element(e):
    """An element of a list that holds traced arrays: Python numbers, and rows made only of them, stay
    weak (promote gives them the traced elements' dtype), as in JAX."""
    if dtypes.is_python_scalar(e):
        return e
    numbers = list(_flat(e)) if isinstance(e, (list, tuple)) else None
    if not numbers or not all(dtypes.is_python_scalar(v) for v in numbers):
        return asarray(e)
    d, _ = dtypes.result_type(*[(dtypes.python_scalar_dtype(v), True) for v in numbers])
    arr = np.asarray(e, d)
    return prims.convert.bind(arr, new_dtype=d, weak_type=True) if current_graph_trace() is not None else arr


def _flat(x):
    for e in x:
        if isinstance(e, (list, tuple)):
            yield from _flat(e)
        else:
            yield e


def _stack(operands):
    """The operands (of one shape) joined along a new leading axis: numpy.stack(operands) for asarray."""
    xs = promote(*operands)
    shape = get_aval(xs[0]).shape
    for x in xs:
        if get_aval(x).shape != shape:
            raise ValueError(f"stack: all input arrays must have the same shape, got {shape} and {get_aval(x).shape}")
    rows = [prims.reshape.bind(x, new_shape=(1,) + shape) for x in xs]
    return rows[0] if len(rows) == 1 else structural_prims.concatenate(rows, 0)


def convert(x, dtype):
    dtype = dtypes.canonical(dtype)
    if isinstance(x, Tracer):
        if x.dtype == dtype and not x.aval.weak_type:
            return x
        return prims.convert.bind(x, new_dtype=dtype)
    arr = np.asarray(x)
    if arr.dtype == dtype:
        return arr.copy() if arr is x else arr
    return prims.convert.bind(arr, new_dtype=dtype)  # the compiled conversion's rules (float -> int saturates)


def promote(*operands):
    """Converts operands to their common dtype (numpy rules, Python scalars weak).

    Python numbers with no array among them take numpy's dtype (int64, float64) eagerly, as numpy
    computes them; traced they stay int32/float32. Either way the result stays weakly typed, as in JAX
    (docs/numpy.md), as it is where a weak operand of a higher kind decides the dtype (dtypes.result_type): a weak kiln array, like a Python number, takes the dtype of the arrays it meets.
    """
    infos = [(get_aval(o).dtype, get_aval(o).weak_type) for o in operands]
    target, weak = dtypes.result_type(*infos)
    if weak and is_eager() and all(w for _, w in infos):
        target = dtypes.numpy_scalar_dtype(target)
    out = [_to_dtype(o, target) for o in operands]
    if weak:  # the result is weak, as in JAX (eagerly: weakly typed kiln arrays), also where a weak value of a
        # higher kind decides it (int32 array * 0.5 is a weak float32, so it then takes a float16 array's dtype)
        out = [o if isinstance(o, Tracer) and o.aval.weak_type else convert_weak(o, target) for o in out]
    return out


def weak_float_dtype() -> np.dtype:
    """The float dtype weakly typed integers become (sqrt(2), 1 / 2): numpy's float64 eagerly, JAX's
    float32 traced (docs/numpy.md, "Python scalars and operators")."""
    return np.dtype(np.float64 if is_eager() else np.float32)


def convert_weak(x, dtype):
    """x converted to dtype and weakly typed (it promotes like a Python number)."""
    return prims.convert.bind(x, new_dtype=dtypes.canonical(dtype), weak_type=True)


def _to_dtype(x, dtype):
    if isinstance(x, Tracer):
        return x if x.dtype == dtype else prims.convert.bind(x, new_dtype=dtype)
    if dtypes.is_python_scalar(x):
        return np.asarray(x, dtype=dtype)
    arr = np.asarray(x)
    return arr if arr.dtype == dtype else arr.astype(dtype)


def broadcast_shapes(*shapes, where: str = "") -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        prefix = f"{where}: " if where else ""
        raise ValueError(f"{prefix}shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together") from None


def broadcast_to(x, shape):
    """numpy broadcasting of x to `shape` (trailing alignment)."""
    a = get_aval(x)
    shape = tuple(shape)
    if a.shape == shape:
        return x
    if a.ndim > len(shape):
        raise ValueError(f"cannot broadcast {a.shape} to {shape}")
    lead = len(shape) - a.ndim
    for i, d in enumerate(a.shape):
        if d not in (1, shape[lead + i]):
            raise ValueError(f"cannot broadcast {a.shape} to {shape}")
    return prims.broadcast_in_dim.bind(x, shape=shape, broadcast_dimensions=tuple(range(lead, len(shape))))


def broadcast_all(*operands, where: str = ""):
    shape = broadcast_shapes(*[get_aval(o).shape for o in operands], where=where)
    return [broadcast_to(o, shape) for o in operands]
