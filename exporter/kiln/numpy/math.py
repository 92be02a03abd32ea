"""numpy's elementwise math functions over kiln arrays (numpy promotion and broadcasting).

Integer and bool inputs of the float functions become floats as numpy makes
them (int8/uint8/bool -> float16, int16 -> float32, int32/int64 -> float64).
A Python number given alone is an array of numpy's default dtype (knp.sqrt(2) is
float64, as np.sqrt(2)); combined with arrays it is weak (see docs/numpy.md).
float16 and bfloat16 are computed in float32 and rounded to the storage type.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..lax import complex_prims, prims
from ..lax.math_prims import P, integer_pow_p
from ._base import asarray, aval, broadcast_all, convert, convert_weak, numpy_result_dtype, promote, weak_float_dtype
from .elementwise import _binary, _float_operands, _full, _named, _unary_float, where  # noqa: F401
from .elementwise import (  # noqa: F401  (re-exported with the rest of the math surface)
    absolute, add, divide, equal, exp, greater, greater_equal, less, less_equal, log, maximum, minimum, multiply,
    negative, not_equal, power, sqrt, subtract, tanh, true_divide,
)


exp2 = _unary_float("exp2", "exp2")
expm1 = _unary_float("expm1", "expm1")
log1p = _unary_float("log1p", "log1p")
log2 = _unary_float("log2", "log2")
log10 = _unary_float("log10", "log10")
sin = _unary_float("sin", "sin")
cos = _unary_float("cos", "cos")
tan = _unary_float("tan", "tan")
arcsin = _unary_float("asin", "arcsin")
arccos = _unary_float("acos", "arccos")
arctan = _unary_float("atan", "arctan")
sinh = _unary_float("sinh", "sinh")
cosh = _unary_float("cosh", "cosh")
arcsinh = _unary_float("asinh", "arcsinh")
arccosh = _unary_float("acosh", "arccosh")
arctanh = _unary_float("atanh", "arctanh")


arctan2 = _binary("atan2", "arctan2", " with broadcasting; integer inputs become floats as in numpy.", _float_operands)


def fmod(x1, x2):
    """numpy.fmod: the C remainder x1 - trunc(x1/x2)*x2, with the sign of x1. Integers stay integers
    (x % 0 gives 0, as numpy's value); booleans become int8, as in numpy."""
    a, b = promote(x1, x2)
    if dtypes.is_bool(aval(a).dtype):
        a, b = convert(a, np.int8), convert(b, np.int8)
    a, b = broadcast_all(a, b, where="fmod")
    return P["rem"].bind(a, b)


def _rounding(prim_name, name):
    prim = P[prim_name]

    def fn(x):
        (a,) = promote(x)
        d = aval(a).dtype
        if not dtypes.is_float(d):
            if name == "rint":  # numpy's rint has float loops only: bool/int8/uint8 -> float16, int16 -> float32, ...
                if aval(a).weak_type:
                    return convert_weak(a, weak_float_dtype())
                return convert(a, numpy_result_dtype("rint", d))
            return a
        return prim.bind(a)

    fn.__name__ = fn.__qualname__ = name  # Python names it in call errors
    fn.__doc__ = (f"numpy.{name}; integers and booleans are returned unchanged." if name != "rint" else
                  "numpy.rint (half to even); integers and booleans become the float dtype numpy gives "
                  "(bool/int8/uint8 -> float16, int16 -> float32, int32/int64 -> float64).")
    return fn


floor = _rounding("floor", "floor")
ceil = _rounding("ceil", "ceil")
trunc = _rounding("trunc", "trunc")
fix = trunc  # numpy.fix: round toward zero
rint = _rounding("round", "rint")


def round(a, decimals=0):  # noqa: A001 - numpy's name
    """numpy.round: half to even; `decimals` rounds to that many decimal places as numpy does
    (x * 10**decimals rounded, then divided back)."""
    if not isinstance(decimals, (int, np.integer)):
        raise TypeError(f"round: decimals must be a Python int, got {type(decimals).__name__}")
    (x,) = promote(a)
    d = aval(x).dtype
    if dtypes.is_complex(d):  # numpy rounds each part
        return complex_prims.complex(round(complex_prims.real(x), decimals), round(complex_prims.imag(x), decimals))
    if dtypes.is_bool(d):
        if decimals == 0:
            return rint(x)  # numpy: float16
        raise TypeError(f"round: numpy cannot round booleans to {decimals} decimals; convert to a number first")
    if not dtypes.is_float(d):
        if decimals >= 0:
            return x
        # numpy's integer rounding: in float64, x / 10**-decimals rounded half to even, scaled back, cast back
        wide = convert(x, np.float64)
        factor = _full(wide, 10.0 ** -decimals)
        return convert(prims.mul.bind(P["round"].bind(prims.div.bind(wide, factor)), factor), d)
    if decimals == 0:
        return P["round"].bind(x)
    factor = _full(x, 10.0 ** abs(decimals))
    if decimals > 0:
        return prims.div.bind(P["round"].bind(prims.mul.bind(x, factor)), factor)
    return prims.mul.bind(P["round"].bind(prims.div.bind(x, factor)), factor)


around = round
round_ = round


def sign(x):
    (a,) = promote(x)
    if dtypes.is_bool(aval(a).dtype):
        raise TypeError("sign: numpy has no sign for booleans; convert to an integer first")
    return P["sign"].bind(a)


def square(x):
    (a,) = promote(x)
    if dtypes.is_bool(aval(a).dtype):
        a = convert(a, np.int8)
    return prims.mul.bind(a, a)


def reciprocal(x):
    """numpy.reciprocal: 1/x; integers divide as integers (truncating; 1/0 gives 0); booleans become int8."""
    (a,) = promote(x)
    if dtypes.is_bool(aval(a).dtype):
        a = convert(a, np.int8)
    return prims.div.bind(_full(a, 1), a)


def rsqrt(x):
    (a,) = _float_operands("sqrt", x)
    return P["rsqrt"].bind(a)


def erf(x):
    (a,) = _float_operands("sqrt", x)
    return P["erf"].bind(a)


def _either_part(test, a, both=False):
    """test on the real and imaginary parts of a complex array: either (or both) true."""
    re, im = test(complex_prims.real(a)), test(complex_prims.imag(a))
    return P["and" if both else "or"].bind(re, im)


def isnan(x):
    (a,) = promote(x)
    if dtypes.is_complex(aval(a).dtype):
        return _either_part(isnan, a)
    if not dtypes.is_float(aval(a).dtype):
        return _full_bool(a, False)
    return prims.ne.bind(a, a)


def isinf(x):
    (a,) = promote(x)
    if dtypes.is_complex(aval(a).dtype):
        return _either_part(isinf, a)
    if not dtypes.is_float(aval(a).dtype):
        return _full_bool(a, False)
    return prims.eq.bind(prims.abs.bind(a), _full(a, np.inf))


def isfinite(x):
    (a,) = promote(x)
    if dtypes.is_complex(aval(a).dtype):
        return _either_part(isfinite, a, both=True)
    if not dtypes.is_float(aval(a).dtype):
        return _full_bool(a, True)
    return prims.lt.bind(prims.abs.bind(a), _full(a, np.inf))


def _full_bool(like, value):
    return prims.broadcast_in_dim.bind(np.asarray(value, np.bool_), shape=aval(like).shape, broadcast_dimensions=())


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """numpy.nan_to_num: NaN -> nan, +inf -> posinf (default the dtype's max), -inf -> neginf (its min)."""
    (a,) = promote(x)
    d = aval(a).dtype
    if not dtypes.is_float(d):
        return a
    info = _finfo(d)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = prims.select.bind(prims.ne.bind(a, a), _full(a, nan), a)
    out = prims.select.bind(prims.eq.bind(a, _full(a, np.inf)), _full(a, posinf), out)
    return prims.select.bind(prims.eq.bind(a, _full(a, -np.inf)), _full(a, neginf), out)


def _finfo(d):
    if d == dtypes.BFLOAT16:
        import ml_dtypes

        return ml_dtypes.finfo(ml_dtypes.bfloat16)
    return np.finfo(d)


def clip(a, a_min=None, a_max=None, *, min=None, max=None):  # noqa: A002 - numpy 2's and JAX's keywords
    """numpy.clip: min(max(a, a_min), a_max) with broadcasting; either bound may be None (both None: a itself).
    min= and max= are numpy 2's and jax.numpy's names for a_min and a_max."""
    if min is not None:
        if a_min is not None:
            raise TypeError("clip: give the lower bound once, as a_min or as min, not both")
        a_min = min
    if max is not None:
        if a_max is not None:
            raise TypeError("clip: give the upper bound once, as a_max or as max, not both")
        a_max = max
    out = a if dtypes.is_python_scalar(a) and (a_min is not None or a_max is not None) else asarray(a)  # stays weak
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


def _nan_ignoring(prim, name):
    def fn(x1, x2):
        a, b = promote(x1, x2)
        a, b = broadcast_all(a, b, where=name)
        out = prim.bind(a, b)
        if not dtypes.is_float(aval(a).dtype):
            return out
        out = prims.select.bind(prims.ne.bind(a, a), b, out)
        return prims.select.bind(prims.ne.bind(b, b), a, out)

    return _named(fn, name, f": like {name[1:]}imum but a NaN operand is ignored when the other is not NaN.")


fmax = _nan_ignoring(prims.max, "fmax")
fmin = _nan_ignoring(prims.min, "fmin")


def _as_bool(x):
    return x if aval(x).dtype == np.bool_ else convert(x, np.bool_)


def _bool_operands(name, *xs):
    return [_as_bool(x) for x in xs]


def _logical(prim_name, name):
    return _binary(prim_name, name, ": operands are converted to bool (nonzero is True).", _bool_operands)


logical_and = _logical("and", "logical_and")
logical_or = _logical("or", "logical_or")
logical_xor = _logical("xor", "logical_xor")


def logical_not(x):
    return P["not"].bind(_as_bool(x))


def _integer_operands(name, *xs):
    ops = promote(*xs)
    d = aval(ops[0]).dtype
    if dtypes.is_float(d):
        raise TypeError(f"{name}: only integer and boolean operands are supported (got {d}), as in numpy")
    return ops


def _bitwise(prim_name, name):
    return _binary(prim_name, name, " for integers and booleans.", _integer_operands)


bitwise_and = _bitwise("and", "bitwise_and")
bitwise_or = _bitwise("or", "bitwise_or")
bitwise_xor = _bitwise("xor", "bitwise_xor")


def invert(x):
    (a,) = _integer_operands("invert", x)
    return P["not"].bind(a)


bitwise_not = invert


def _shift_operands(name, *xs):
    ops = _integer_operands(name, *xs)
    return [convert(o, np.int8) for o in ops] if dtypes.is_bool(aval(ops[0]).dtype) else ops


def _shift(prim_name, name):
    return _binary(prim_name, name, " for integers. A shift count outside [0, bits) gives 0, or -1 when shifting "
                   "a negative value right (numpy's definition).", _shift_operands)


left_shift = _shift("shift_left", "left_shift")
right_shift = _shift("shift_right", "right_shift")


def _float_divmod(a, b):
    """numpy's float floor_divide and remainder (npy_divmod): mod has the sign of b."""
    zero, one = _full(a, 0.0), _full(a, 1.0)
    mod = P["rem"].bind(a, b)
    div = prims.div.bind(prims.sub.bind(a, mod), b)
    mod_nonzero = prims.ne.bind(mod, zero)
    fix = prims.ne.bind(prims.lt.bind(b, zero), prims.lt.bind(mod, zero))
    adjust = _and(mod_nonzero, fix)
    mod2 = prims.select.bind(adjust, prims.add.bind(mod, b), mod)
    div = prims.select.bind(adjust, prims.sub.bind(div, one), div)
    mod2 = prims.select.bind(mod_nonzero, mod2, _sign_zero(b))
    floordiv = P["floor"].bind(div)
    floordiv = prims.select.bind(prims.gt.bind(prims.sub.bind(div, floordiv), _full(a, 0.5)), prims.add.bind(floordiv, one), floordiv)
    quotient = prims.div.bind(a, b)
    floordiv = prims.select.bind(prims.ne.bind(div, zero), floordiv, _copysign_zero(quotient))
    b_zero = prims.eq.bind(b, zero)
    floordiv = prims.select.bind(b_zero, quotient, floordiv)
    mod2 = prims.select.bind(b_zero, mod, mod2)
    return floordiv, mod2


def _and(p, q):
    return P["and"].bind(p, q)


def _copysign_zero(x):
    """+0.0 or -0.0 with the sign of x (NaN gives +0.0)."""
    neg = prims.lt.bind(x, _full(x, 0.0))
    neg_zero = _neg_zero_like(x)
    return prims.select.bind(neg, neg_zero, _full(x, 0.0))


def _neg_zero_like(x):
    return prims.broadcast_in_dim.bind(np.asarray(-0.0).astype(aval(x).dtype), shape=aval(x).shape, broadcast_dimensions=())


def _sign_zero(b):
    """copysign(0, b), where b may be -0.0: signbit tested by 1/b < 0."""
    inv = prims.div.bind(_full(b, 1.0), b)
    return prims.select.bind(prims.lt.bind(inv, _full(b, 0.0)), _neg_zero_like(b), _full(b, 0.0))


def floor_divide(x1, x2):
    """numpy.floor_divide: integers round toward minus infinity (x // 0 is 0); floats as numpy's npy_divmod."""
    from . import elementwise

    a, b = promote(x1, x2)
    if dtypes.is_bool(aval(a).dtype):
        a, b = convert(a, np.int8), convert(b, np.int8)  # numpy: bool // bool is int8
    if not dtypes.is_float(aval(a).dtype):
        return elementwise.floor_divide(a, b)
    a, b = broadcast_all(a, b, where="floor_divide")
    return _float_divmod(a, b)[0]


def remainder(x1, x2):
    """numpy.remainder (and %): the result has the sign of the divisor; floats as numpy's npy_divmod."""
    from . import elementwise

    a, b = promote(x1, x2)
    if dtypes.is_bool(aval(a).dtype):
        a, b = convert(a, np.int8), convert(b, np.int8)  # numpy: bool % bool is int8
    if not dtypes.is_float(aval(a).dtype):
        return elementwise.remainder(a, b)
    a, b = broadcast_all(a, b, where="remainder")
    return _float_divmod(a, b)[1]


mod = remainder


def divmod(x1, x2):  # noqa: A001 - numpy's name
    """numpy.divmod: (floor_divide(x1, x2), remainder(x1, x2))."""
    return floor_divide(x1, x2), remainder(x1, x2)


divmod_ = divmod


def float_power(x1, x2):
    a, b = convert(x1, np.float64), convert(x2, np.float64)
    return power(a, b)


def power_operator(x, y):
    """`x ** y` on traced values: a Python int exponent of a float base multiplies
    (kiln.lax.integer_pow, exact like numpy's own small integer powers); otherwise numpy.power."""
    if isinstance(y, int) and not isinstance(y, bool) and abs(y) <= 64:
        (a,) = promote(x)
        if dtypes.is_float(aval(a).dtype):
            return integer_pow_p.bind(a, y=y)
    return power(x, y)


__all__ = [
    "exp2", "expm1", "log1p", "log2", "log10", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh",
    "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "floor", "ceil", "trunc", "fix", "rint", "round", "around", "round_",
    "sign", "square", "reciprocal", "rsqrt", "erf", "isnan", "isinf", "isfinite", "nan_to_num", "clip", "fmax", "fmin",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "invert", "left_shift", "right_shift", "floor_divide", "remainder", "mod", "fmod", "divmod", "float_power",
]
