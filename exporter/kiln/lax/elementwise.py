"""jax.lax's elementwise functions beyond kiln.lax.api's arithmetic: trigonometric and hyperbolic functions,
exp2/expm1/log1p, rounding, sign, is_finite, logistic, square, reciprocal and the bitwise operations, with
jax.lax's strict dtypes (no promotion; Python scalars take the array operand's dtype)."""
from __future__ import annotations

import enum

import numpy as np

from ..core import dtypes
from ..core.trace import get_aval
from . import prims
from .api import _binary, _operands, _unary
from .math_prims import P

__all__ = [
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "exp2", "expm1", "log1p",
    "floor", "ceil", "round", "RoundingMethod", "sign", "is_finite", "logistic", "square", "reciprocal",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right_arithmetic",
]

(sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, exp2, expm1, log1p, floor, ceil, sign) = (
    _unary(P[name]) for name in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh",
                                 "atanh", "exp2", "expm1", "log1p", "floor", "ceil", "sign"))
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


def logistic(x):
    """1 / (1 + exp(-x))."""
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
