"""Elementwise functions with numpy's promotion and broadcasting."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import is_eager
from ..lax import pooling, prims
from ..lax.math_prims import P
from ._base import aval, broadcast_all, convert, convert_weak, numpy_result_dtype, promote, weak_float_dtype


def _promoted(name, *xs):
    return promote(*xs)


def _named(fn, name, doc):
    fn.__name__ = fn.__qualname__ = name  # Python names it in call errors
    fn.__doc__ = f"numpy.{name}{doc}"
    return fn


def _binary(prim, name, doc=" with broadcasting and type promotion.", operands=_promoted):
    """numpy's `name` of two operands: operands(name, x1, x2) (numpy's promotion unless given), broadcast
    together, then `prim` (a primitive, or its name in math_prims.P)."""
    prim = P[prim] if isinstance(prim, str) else prim

    def fn(x1, x2):
        a, b = operands(name, x1, x2)
        a, b = broadcast_all(a, b, where=name)
        return prim.bind(a, b)

    return _named(fn, name, doc)


add = _binary(prims.add, "add")
subtract = _binary(prims.sub, "subtract")
multiply = _binary(prims.mul, "multiply")
maximum = _binary(prims.max, "maximum")
minimum = _binary(prims.min, "minimum")
equal = _binary(prims.eq, "equal")
not_equal = _binary(prims.ne, "not_equal")
less = _binary(prims.lt, "less")
less_equal = _binary(prims.le, "less_equal")
greater = _binary(prims.gt, "greater")
greater_equal = _binary(prims.ge, "greater_equal")


def _float_operands(name, *xs):
    """Promotes, then moves integer and bool results to the float dtype numpy picks (complex stays complex)."""
    numbers_alone = all(aval(x).weak_type for x in xs)
    ops = promote(*xs)
    a = aval(ops[0])
    if not dtypes.is_inexact(a.dtype):
        if numbers_alone:  # numpy's float64 eagerly, JAX's float32 traced, still weak (a strong bool array
            # meeting a Python int is weak too, but divides as the int32 array it became)
            return [convert_weak(o, weak_float_dtype()) for o in ops]
        target = numpy_result_dtype(name, *([a.dtype] * len(ops)))
        ops = [convert(o, target) for o in ops]
    return ops


def true_divide(x1, x2):
    """numpy.true_divide: integers divide to floats."""
    a, b = _float_operands("true_divide", x1, x2)
    a, b = broadcast_all(a, b, where="divide")
    return prims.div.bind(a, b)


divide = true_divide


def power(x1, x2):
    a, b = promote(x1, x2)
    if dtypes.is_bool(aval(a).dtype):
        a, b = convert(a, np.int8), convert(b, np.int8)
    a, b = broadcast_all(a, b, where="power")
    return prims.pow.bind(a, b)


def _unary_float(prim, name):
    """numpy's `name` of one operand, integer and bool inputs made floats; `prim`: a primitive or its name in
    math_prims.P."""
    prim = P[prim] if isinstance(prim, str) else prim

    def fn(x):
        (a,) = _float_operands(name, x)
        return prim.bind(a)

    return _named(fn, name, "; integer inputs become floats as in numpy.")


exp = _unary_float(prims.exp, "exp")
log = _unary_float(prims.log, "log")
tanh = _unary_float(prims.tanh, "tanh")
sqrt = _unary_float(prims.sqrt, "sqrt")


def negative(x):
    (a,) = promote(x)
    if dtypes.is_bool(aval(a).dtype):
        raise TypeError("negative: the numpy boolean negative, the `-` operator, is not supported; use logical_not")
    return prims.neg.bind(a)


def absolute(x):
    (a,) = promote(x)
    if dtypes.is_bool(aval(a).dtype):
        return a
    return prims.abs.bind(a)


abs = absolute


def where(condition, x=None, y=None, *, size=None, fill_value=None):
    """numpy.where(condition, x, y) with broadcasting of all three.

    With only a condition it is nonzero(condition): on a traced condition that needs a static size=N,
    as in jax.numpy.where (see kiln.numpy.nonzero).
    """
    if x is None and y is None:
        from .selection import where_one_arg

        return where_one_arg(condition, size, fill_value)
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y should be given")
    if size is not None or fill_value is not None:
        raise ValueError("where: size and fill_value are only accepted with the one-argument form where(condition)")
    c = convert(condition, np.bool_) if aval(condition).dtype != np.bool_ else condition
    a, b = promote(x, y)
    c, a, b = broadcast_all(c, a, b, where="where")
    return prims.select.bind(c, a, b)


def astype(x, dtype):
    return convert(x, dtype)


def view(x, dtype=None, type=None):  # noqa: A002 - ndarray.view's keyword
    """ndarray.view(dtype) of a traced array, as jax.Array.view: x's bits read as dtype; between widths the
    last axis grows or shrinks by the ratio (numpy's rule; bool is read as uint8)."""
    from ..lax.bitcast import bitcast_convert_type

    if type is not None:
        raise TypeError("view: type= is not supported: a traced kiln array has one array type")
    if dtype is None:
        return x
    src, dst = aval(x).dtype, dtypes.canonical(dtype)
    shape = aval(x).shape
    if src.itemsize != dst.itemsize:
        if not shape:
            raise ValueError(f"view: a 0-d array cannot be viewed as a dtype of another width ({src} as {dst})")
        if (shape[-1] * src.itemsize) % dst.itemsize:
            raise ValueError(f"view: the last axis of shape {shape} in {src} is {shape[-1] * src.itemsize} bytes, "
                             f"not a multiple of {dst}'s {dst.itemsize}")
    if dtypes.is_bool(src):
        x, src = convert(x, np.uint8), np.dtype(np.uint8)
    target = np.dtype(np.uint8) if dtypes.is_bool(dst) else dst
    if src.itemsize > target.itemsize:
        out = bitcast_convert_type(x, target)
        out = prims.reshape.bind(out, new_shape=shape[:-1] + (shape[-1] * (src.itemsize // target.itemsize),))
    elif src.itemsize < target.itemsize:
        ratio = target.itemsize // src.itemsize
        grouped = prims.reshape.bind(x, new_shape=shape[:-1] + (shape[-1] // ratio, ratio))
        out = bitcast_convert_type(grouped, target)
    else:
        out = bitcast_convert_type(x, target)
    return convert(out, np.bool_) if dtypes.is_bool(dst) else out


def floor_divide(x1, x2):
    """numpy.floor_divide for integers: the quotient rounded toward minus infinity (0 when dividing by 0)."""
    a, b = promote(x1, x2)
    if not dtypes.is_int(aval(a).dtype):
        raise TypeError(f"floor_divide: only integer operands are supported so far, got {aval(a).dtype}")
    a, b = broadcast_all(a, b, where="floor_divide")
    q = prims.div.bind(a, b)
    zero = np.zeros((), aval(a).dtype)
    exact = prims.eq.bind(prims.mul.bind(q, b), a)
    signs_differ = prims.ne.bind(prims.lt.bind(a, _full(a, zero)), prims.lt.bind(b, _full(b, zero)))
    # no adjustment when the division is exact or the divisor is 0 (x // 0 is 0, numpy's value)
    exact = _or(exact, prims.eq.bind(b, _full(b, zero)))
    adjust = prims.select.bind(exact, _full(q, zero), prims.select.bind(signs_differ, _full(q, np.ones((), aval(a).dtype)), _full(q, zero)))
    return prims.sub.bind(q, adjust)


def _or(p, q):
    return P["or"].bind(p, q)


def remainder(x1, x2):
    """numpy.remainder for integers: the result has the sign of the divisor; x % 0 is 0 (numpy's value)."""
    a, b = promote(x1, x2)
    a, b = broadcast_all(a, b, where="remainder")
    zero = _full(b, np.zeros((), aval(b).dtype))
    r = prims.sub.bind(a, prims.mul.bind(floor_divide(a, b), b))
    return prims.select.bind(prims.eq.bind(b, zero), zero, r)


mod = remainder


def _full(like, value):
    return prims.broadcast_in_dim.bind(np.asarray(value, aval(like).dtype), shape=aval(like).shape, broadcast_dimensions=())

pooling.register_window_op(add, "add")
pooling.register_window_op(maximum, "max")
pooling.register_window_op(minimum, "min")
