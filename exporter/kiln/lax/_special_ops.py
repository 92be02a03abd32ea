"""The numpy-style arithmetic that kiln.lax's special functions (special_math.py) are written in, on lax's
primitives: operands are arrays of one shape, 0-d arrays and Python or numpy scalars (broadcast to that shape);
a scalar takes the dtype of the first array operand, float64 where there is none (the kernels compute in
float64). It keeps the kernels readable as formulas without kiln.numpy, which sits above lax."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import get_aval
from . import prims
from .math_prims import P
from .shape_api import reduce_and

_F64 = np.dtype(np.float64)


def _is_scalar(x) -> bool:
    return dtypes.is_python_scalar(x) or isinstance(x, np.generic)


def _operands(*xs):
    arrays = [x for x in xs if not _is_scalar(x)]
    dtype = get_aval(arrays[0]).dtype if arrays else _F64
    out = [np.asarray(x, dtype) if _is_scalar(x) else x for x in xs]
    shape = next((get_aval(x).shape for x in out if get_aval(x).shape), ())
    return [prims.broadcast_in_dim.bind(x, shape=shape, broadcast_dimensions=()) if shape and not get_aval(x).shape
            else x for x in out]


def _binary(prim):
    return lambda x, y: prim.bind(*_operands(x, y))


def _unary(prim):
    return lambda x: prim.bind(*_operands(x))


add, subtract, multiply, divide, power = (_binary(p) for p in (prims.add, prims.sub, prims.mul, prims.div, prims.pow))
maximum, minimum = _binary(prims.max), _binary(prims.min)
less, less_equal, greater, greater_equal, equal, not_equal = (
    _binary(p) for p in (prims.lt, prims.le, prims.gt, prims.ge, prims.eq, prims.ne))
logical_and, logical_or = _binary(P["and"]), _binary(P["or"])
logical_not = _unary(P["not"])
negative, abs, exp, log, sqrt = (  # noqa: A001
    _unary(p) for p in (prims.neg, prims.abs, prims.exp, prims.log, prims.sqrt))
log1p, floor, rint = _unary(P["log1p"]), _unary(P["floor"]), _unary(P["round"])  # round: halves to even


def remainder(x, y):
    """x - y floor(x / y), the sign of y (numpy's remainder), exact for the kernels' whole numbers."""
    return subtract(x, multiply(y, floor(divide(x, y))))


def reciprocal(x):
    return divide(1.0, x)


def where(condition, x, y):
    x, y = _operands(x, y)
    shape = get_aval(condition).shape or get_aval(x).shape
    condition, x, y = (prims.broadcast_in_dim.bind(v, shape=shape, broadcast_dimensions=())
                       if shape and not get_aval(v).shape else v for v in (condition, x, y))
    return prims.select.bind(condition, x, y)


def isnan(x):
    return not_equal(x, x)


def isinf(x):
    return equal(abs(x), np.inf)


def isfinite(x):
    return less(abs(x), np.inf)


def asarray(x, dtype=_F64):
    x = np.asarray(x, dtype) if _is_scalar(x) else x
    return x if get_aval(x).dtype == dtype else prims.convert.bind(x, new_dtype=np.dtype(dtype))


def full_like(x, value, dtype=None):
    dtype = np.dtype(dtype or get_aval(x).dtype)
    return prims.broadcast_in_dim.bind(np.asarray(value, dtype), shape=get_aval(x).shape, broadcast_dimensions=())


def ones_like(x):
    return full_like(x, 1)


def zeros_like(x, dtype=None):
    return full_like(x, 0, dtype)


def all(x):  # noqa: A001
    return reduce_and(x, tuple(range(len(get_aval(x).shape))))


def horner(t, coeffs):
    """sum coeffs[k] t^k."""
    total = coeffs[-1]
    for c in coeffs[-2::-1]:
        total = add(multiply(total, t), c)
    return total
