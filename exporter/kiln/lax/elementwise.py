"""jax.lax's elementwise functions beyond kiln.lax.api's arithmetic: trigonometric and hyperbolic functions,
exp2/expm1/log1p, rounding, sign, is_finite, logistic, square, reciprocal and the bitwise operations, with
jax.lax's strict dtypes (no promotion; Python scalars take the array operand's dtype)."""
from __future__ import annotations

import enum

import numpy as np

from ..core import dtypes
from ..core.trace import get_aval
from . import prims
from .accuracy import check_accuracy
from .api import _binary, _operands, _unary
from .math_prims import P

__all__ = [
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp2", "expm1", "log1p",
    "floor", "ceil", "round", "RoundingMethod", "sign", "is_finite", "logistic", "square", "reciprocal",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "population_count", "clz",
]

_WITH_ACCURACY = {"sin", "cos", "tan", "exp2", "expm1", "log1p"}  # jax.lax's functions that take accuracy=
(sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, exp2, expm1, log1p, floor, ceil, sign) = (
    _unary(P[name], accuracy=name in _WITH_ACCURACY)
    for name in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp2",
                 "expm1", "log1p", "floor", "ceil", "sign"))
bitwise_and, bitwise_or, bitwise_xor = (_binary(P[name]) for name in ("and", "or", "xor"))
bitwise_not = _unary(P["not"])
shift_left = _binary(P["shift_left"])
shift_right_arithmetic = _binary(P["shift_right"])
for _fn, _name in ((bitwise_and, "bitwise_and"), (bitwise_or, "bitwise_or"), (bitwise_xor, "bitwise_xor"),
                   (bitwise_not, "bitwise_not"), (shift_right_arithmetic, "shift_right_arithmetic")):
    _fn.__name__ = _fn.__qualname__ = _name


class RoundingMethod(enum.IntEnum):
    """jax.lax.RoundingMethod: halves away from zero (lax.round's default) or to the nearest even."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):  # noqa: A001 - jax.lax's name
    """x rounded to an integral value; halves go away from zero unless rounding_method is TO_NEAREST_EVEN."""
    (x,) = _operands(x)
    if not dtypes.is_float(get_aval(x).dtype):
        raise TypeError(f"round: x must be floating-point; got {get_aval(x).dtype}")
    method = RoundingMethod(rounding_method)
    if method == RoundingMethod.TO_NEAREST_EVEN:
        return P["round"].bind(x)
    whole = P["trunc"].bind(x)
    fraction = prims.sub.bind(x, whole)  # exact
    up = prims.ge.bind(prims.abs.bind(fraction), _like(np.asarray(0.5, get_aval(x).dtype), x))
    return prims.select.bind(up, prims.add.bind(whole, P["sign"].bind(x)), whole)


def _like(value, x):
    shape = get_aval(x).shape
    return prims.broadcast_in_dim.bind(value, shape=shape, broadcast_dimensions=()) if shape else value


def is_finite(x):
    """Whether each element of floating-point x is neither infinite nor NaN."""
    (x,) = _operands(x)
    dtype = get_aval(x).dtype
    if not dtypes.is_float(dtype):
        raise TypeError(f"is_finite: x must be floating-point; got {dtype}")
    return prims.lt.bind(prims.abs.bind(x), _like(np.asarray(np.inf, dtype), x))


def logistic(x, *, accuracy=None):
    """1 / (1 + exp(-x)) (accuracy=: lax/accuracy.py)."""
    check_accuracy("logistic", accuracy)
    (x,) = _operands(x)
    one = _like(np.asarray(1, get_aval(x).dtype), x)
    return prims.div.bind(one, prims.add.bind(one, prims.exp.bind(prims.neg.bind(x))))


def square(x):
    """x * x."""
    (x,) = _operands(x)
    return prims.mul.bind(x, x)


def reciprocal(x):
    """1 / x."""
    (x,) = _operands(x)
    return prims.div.bind(_like(np.asarray(1, get_aval(x).dtype), x), x)


def _unsigned(dtype) -> np.dtype:
    return np.dtype(f"uint{dtype.itemsize * 8}")


def _integer_operand(where: str, x):
    (x,) = _operands(x)
    dtype = get_aval(x).dtype
    if not dtypes.is_int(dtype):
        raise TypeError(f"{where}: x must be an integer array; got {dtype}")
    return x, dtype


def _as(x, dtype):
    return x if get_aval(x).dtype == dtype else prims.convert.bind(x, new_dtype=np.dtype(dtype))


def _const_like(value, x):
    return _like(np.asarray(value, get_aval(x).dtype), x)


def shift_right_logical(x, y):
    """x shifted right by y with zeros shifted in (the bits of a signed x read as unsigned); shifts of the
    width or more give 0."""
    x, y = _operands(x, y)
    dtype = get_aval(x).dtype
    if not dtypes.is_int(dtype):
        raise TypeError(f"shift_right_logical: operands must be integers; got {dtype}")
    unsigned = _unsigned(dtype)
    out = P["shift_right"].bind(_as(x, unsigned), _as(y, unsigned))
    return _as(out, dtype)


def population_count(x):
    """The number of set bits of each element (of its two's-complement bits for signed x)."""
    x, dtype = _integer_operand("population_count", x)
    v = _as(x, _unsigned(dtype))
    bits = dtype.itemsize * 8
    pattern = lambda byte: int.from_bytes(bytes([byte]) * dtype.itemsize, "little")  # noqa: E731

    def shifted(value, n):
        return P["shift_right"].bind(value, _const_like(n, value))

    v = prims.sub.bind(v, P["and"].bind(shifted(v, 1), _const_like(pattern(0x55), v)))
    v = prims.add.bind(P["and"].bind(v, _const_like(pattern(0x33), v)),
                       P["and"].bind(shifted(v, 2), _const_like(pattern(0x33), v)))
    v = P["and"].bind(prims.add.bind(v, shifted(v, 4)), _const_like(pattern(0x0F), v))
    if bits > 8:
        v = shifted(prims.mul.bind(v, _const_like(pattern(0x01), v)), bits - 8)
    return _as(v, dtype)


def clz(x):
    """The number of leading zero bits of each element (the width for 0)."""
    x, dtype = _integer_operand("clz", x)
    y = _as(x, _unsigned(dtype))
    bits = dtype.itemsize * 8
    count = _const_like(bits, y)
    step = bits // 2
    while step:
        top = P["shift_right"].bind(y, _const_like(step, y))
        nonzero = prims.ne.bind(top, _const_like(0, y))
        count = prims.select.bind(nonzero, prims.sub.bind(count, _const_like(step, y)), count)
        y = prims.select.bind(nonzero, top, y)
        step //= 2
    return _as(prims.sub.bind(count, y), dtype)
