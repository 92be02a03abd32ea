"""Elementwise math primitives: transcendental functions, rounding, remainders, bitwise ops.

Each primitive is registered here with everything it has: eager numpy
implementation, abstract evaluation, JVP rule and batching rule (none is
linear, so none has a transpose rule). Kernel code comes from
kiln.compiler.codegen.scalar_ops and kiln.compiler.mathlib by primitive name.

float16 and bfloat16 are storage types: eagerly as in kernels, values are
computed in float32 and rounded once to the storage type.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, instantiate
from ..core.trace import get_aval
from ..transforms.batching import move_batch_axis
from ..transforms.jvp import tangent_aval
from . import prims
from .accuracy import check_accuracy
from .operands import asarray, broadcast_to
from .prims import ShapeError, _elementwise

__all__ = ["rsqrt", "erf", "erfc", "integer_pow", "clamp", "atan2", "rem"]


def _float_only(d):
    return dtypes.is_float(d)


def _int_or_bool(d):
    return dtypes.is_int(d) or dtypes.is_bool(d)


def _int_only(d):
    return dtypes.is_int(d)


def _not_bool(d):
    return not dtypes.is_bool(d)


def _widen(fn):
    """numpy's fn, computing float16/bfloat16 in float32 (the result is cast back by the caller)."""

    def impl(*xs):
        xs = [np.asarray(x) for x in xs]
        if xs and xs[0].dtype.itemsize == 2 and dtypes.is_float(xs[0].dtype):
            xs = [x.astype(np.float32) for x in xs]
        return fn(*xs)

    return impl


def _erf_numpy(x):
    x = np.asarray(x)
    flat = np.array([math.erf(float(v)) if not np.isnan(v) else np.nan for v in x.ravel()], dtype=np.float64)
    return flat.reshape(x.shape)


def _erfc_numpy(x):
    x = np.asarray(x)
    flat = np.array([math.erfc(float(v)) if not np.isnan(v) else np.nan for v in x.ravel()], dtype=np.float64)
    return flat.reshape(x.shape)


def _shift_left(x, n):
    x, n = np.asarray(x), np.asarray(n)
    bits = x.dtype.itemsize * 8
    ok = (n >= 0) & (n < bits)
    return np.where(ok, np.left_shift(x, np.where(ok, n, 0).astype(x.dtype)), np.zeros((), x.dtype))


def _shift_right(x, n):
    x, n = np.asarray(x), np.asarray(n)
    bits = x.dtype.itemsize * 8
    ok = (n >= 0) & (n < bits)
    fill = np.where(x < 0, np.array(-1).astype(x.dtype), np.zeros((), x.dtype)) if x.dtype.kind == "i" else np.zeros((), x.dtype)
    return np.where(ok, np.right_shift(x, np.where(ok, n, 0).astype(x.dtype)), fill)


def _fmod(x, y):
    """C fmod; integers: the sign of x, x % 0 == 0 (numpy's value, without its warning)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind in "iu":
        safe = np.where(y == 0, np.ones((), y.dtype), y)
        return np.where(y == 0, np.zeros((), x.dtype), np.fmod(x, safe))
    return np.fmod(x, y)


def _invert(x):
    x = np.asarray(x)
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


_UNARY_FLOAT = {
    "exp2": np.exp2, "expm1": np.expm1, "log1p": np.log1p, "log2": np.log2, "log10": np.log10,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": _erf_numpy, "erfc": _erfc_numpy, "rsqrt": lambda x: 1 / np.sqrt(x),
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.rint,
}
# These also take complex operands (kiln.compiler.complex_lowering computes them on the parts).
_COMPLEX_TOO = ("sin", "cos", "tan", "sinh", "cosh", "log2", "log10", "exp2", "expm1", "log1p")
# Per element cost (OpTraits.cost) of the mathlib functions computing them; 1 where not named.
_COST = {
    "exp2": 20, "expm1": 25, "log1p": 25, "log2": 20, "log10": 20, "sin": 40, "cos": 40, "tan": 45,
    "asin": 30, "acos": 30, "atan": 30, "sinh": 25, "cosh": 25, "asinh": 30, "acosh": 30, "atanh": 30,
    "erf": 30, "erfc": 35, "rsqrt": 5,
}
_ROUNDING = ("floor", "ceil", "trunc", "round")  # their float results are values of the operand's type
P = {name: _elementwise(name, _widen(fn), 1, accepts=dtypes.is_inexact if name in _COMPLEX_TOO else _float_only,
                        cost=_COST.get(name, 1), math=name, exact_in_narrow=name in _ROUNDING)
     for name, fn in _UNARY_FLOAT.items()}
P["sign"] = _elementwise("sign", _widen(np.sign), 1, accepts=_not_bool, exact_in_narrow=True)
P["atan2"] = _elementwise("atan2", _widen(np.arctan2), 2, accepts=_float_only, cost=35, math="atan2")
P["rem"] = _elementwise("rem", _widen(_fmod), 2, accepts=_not_bool, cost=40, math="fmod")
P["and"] = _elementwise("and", np.bitwise_and, 2, accepts=_int_or_bool)
P["or"] = _elementwise("or", np.bitwise_or, 2, accepts=_int_or_bool)
P["xor"] = _elementwise("xor", np.bitwise_xor, 2, accepts=_int_or_bool)
P["not"] = _elementwise("not", _invert, 1, accepts=_int_or_bool)
P["shift_left"] = _elementwise("shift_left", _shift_left, 2, accepts=_int_only)
P["shift_right"] = _elementwise("shift_right", _shift_right, 2, accepts=_int_only)

# gelu_exp32: exp(-|z|) 2^s of kiln.nn.gelu's float32 tanh form (nn._gelu_tanh32_parts; its kernel code is
# mathlib's gelu_exp), for float32 x: z = K1 xc + K3 xc^3, xc = x clamped to +-GELU_CLAMP, s = 64 for x < GELU_DEEP
# (where exp(-|z|) or gelu could be subnormal) and 0 elsewhere; 0 below about 2^-126 (where gelu is x or -0).
GELU_K1 = 2 * math.sqrt(2.0 / math.pi)  # gelu(x) = x sigmoid(z)
GELU_K3 = GELU_K1 * 0.044715
GELU_CLAMP = 12.5
GELU_DEEP = -8.5


def _gelu_exp_numpy(x):
    """float64 exp(-|z|) 2^s (rounded to float32 by the primitive), 0 below 2^-126 (the kernel flushes about
    there: a value the result of gelu does not see)."""
    x = np.asarray(x, np.float64)
    xc = np.where(x < -GELU_CLAMP, -GELU_CLAMP, np.where(x > GELU_CLAMP, GELU_CLAMP, x))
    a = np.abs(xc)
    e = np.exp(-(a * (a * a * GELU_K3 + GELU_K1)) + np.where(x < GELU_DEEP, 64 * math.log(2.0), 0.0))
    return np.where(e < 2.0 ** -126, 0.0, e)


P["gelu_exp32"] = _elementwise("gelu_exp32", _gelu_exp_numpy, 1, accepts=lambda d: d == np.float32, cost=30,
                               math="gelu_exp")

# integer_pow: x ** y for a static Python int y.
integer_pow_p = _elementwise("integer_pow", None, 1, accepts=_not_bool)


def _integer_pow_abstract(x, *, y):
    if not isinstance(y, int):
        raise ShapeError(f"integer_pow: the exponent must be a Python int, got {y!r}")
    if dtypes.is_bool(x.dtype):
        raise ShapeError("integer_pow does not accept dtype bool")
    if y < 0 and not dtypes.is_float(x.dtype):
        raise ShapeError(f"integer_pow: integers to negative integer powers ({y}) are not allowed; convert to float first")
    return x


def _integer_pow_impl(x, *, y):
    x = np.asarray(x)
    wide = x.astype(np.float32) if x.dtype.itemsize == 2 and dtypes.is_float(x.dtype) else x
    with np.errstate(all="ignore"):
        if y < 0:
            out = 1 / _power_by_squaring(wide, -y)
        else:
            out = _power_by_squaring(wide, y)
    return np.asarray(out).astype(x.dtype)


def _power_by_squaring(x, n):
    """x**n with the same multiplication order as the kernels (so ints wrap identically)."""
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if n:
            base = base * base
    return np.ones_like(x) if result is None else result


integer_pow_p.def_abstract_eval(_integer_pow_abstract)
integer_pow_p.def_impl(_integer_pow_impl)
P["integer_pow"] = integer_pow_p

globals().update({f"{name}_p": prim for name, prim in P.items()})


# --- the kiln.lax functions --------------------------------------------------------

def rsqrt(x, *, accuracy=None):
    """1/sqrt(x) for floats (the strict lax level: no promotion; accuracy=: lax/accuracy.py)."""
    check_accuracy("rsqrt", accuracy)
    return P["rsqrt"].bind(x)


def erf(x):
    """The error function, for floats."""
    return P["erf"].bind(x)


def erfc(x):
    """The complementary error function 1 - erf(x), for floats, accurate in the right tail (erfc(10) = 2.1e-45)."""
    return P["erfc"].bind(x)


def atan2(y, x):
    return P["atan2"].bind(y, x)


def rem(x, y):
    """C fmod: x - trunc(x/y)*y, with the sign of x; for integers rem(x, 0) is 0 (numpy's value)."""
    return P["rem"].bind(x, y)


def integer_pow(x, y: int):
    """x ** y for a static Python int y, by repeated multiplication."""
    return integer_pow_p.bind(x, y=int(y))


def clamp(min, x, max):  # noqa: A002 - lax's argument names
    """min <= result <= max elementwise; min and max are scalars or have x's shape (NaN stays NaN)."""
    x = asarray(x)
    a = get_aval(x)
    bounds = []
    for bound in (min, max):
        bound = asarray(bound, a.dtype) if not hasattr(bound, "aval") else bound
        if get_aval(bound).dtype != a.dtype:
            raise ShapeError(f"clamp: bound of dtype {get_aval(bound).dtype} for an operand of dtype {a.dtype}")
        if get_aval(bound).shape not in ((), a.shape):
            raise ShapeError(f"clamp: bounds must be scalars or of shape {a.shape}, got {get_aval(bound).shape}")
        bounds.append(broadcast_to(bound, a.shape))
    return prims.min.bind(prims.max.bind(x, bounds[0]), bounds[1])


# --- rules --------------------------------------------------------------------------

def _register_rules() -> None:

    def full_like(x, value):
        a = get_aval(x)
        return prims.broadcast_in_dim.bind(np.asarray(value).astype(a.dtype), shape=a.shape, broadcast_dimensions=())

    def scale(t, factor):
        return t if isinstance(t, Zero) else prims.mul.bind(t, factor)

    def mul(a, b):
        return prims.mul.bind(a, b)

    def div(a, b):
        return prims.div.bind(a, b)

    def add(a, b):
        return prims.add.bind(a, b)

    def sub(a, b):
        return prims.sub.bind(a, b)

    def unary(prim, derivative):
        def rule(primals, tangents, **params):
            (x,), (t,) = primals, tangents
            out = prim.bind(x, **params)
            return out, scale(t, derivative(x, out, **params))

        prim.jvp_rule = rule

    one = lambda x: full_like(x, 1.0)  # noqa: E731
    sq = lambda x: mul(x, x)  # noqa: E731
    unary(P["exp2"], lambda x, out: mul(out, full_like(x, math.log(2.0))))
    unary(P["expm1"], lambda x, out: add(out, one(x)))
    unary(P["log1p"], lambda x, out: div(one(x), add(x, one(x))))
    unary(P["log2"], lambda x, out: div(one(x), mul(x, full_like(x, math.log(2.0)))))
    unary(P["log10"], lambda x, out: div(one(x), mul(x, full_like(x, math.log(10.0)))))
    unary(P["sin"], lambda x, out: P["cos"].bind(x))
    unary(P["cos"], lambda x, out: prims.neg.bind(P["sin"].bind(x)))
    unary(P["tan"], lambda x, out: add(one(x), sq(out)))
    unary(P["asin"], lambda x, out: P["rsqrt"].bind(sub(one(x), sq(x))))
    unary(P["acos"], lambda x, out: prims.neg.bind(P["rsqrt"].bind(sub(one(x), sq(x)))))
    unary(P["atan"], lambda x, out: div(one(x), add(one(x), sq(x))))
    unary(P["sinh"], lambda x, out: P["cosh"].bind(x))
    unary(P["cosh"], lambda x, out: P["sinh"].bind(x))
    unary(P["asinh"], lambda x, out: P["rsqrt"].bind(add(sq(x), one(x))))
    unary(P["acosh"], lambda x, out: P["rsqrt"].bind(mul(sub(x, one(x)), add(x, one(x)))))
    unary(P["atanh"], lambda x, out: div(one(x), sub(one(x), sq(x))))
    unary(P["erf"], lambda x, out: mul(full_like(x, 2.0 / math.sqrt(math.pi)), prims.exp.bind(prims.neg.bind(sq(x)))))
    unary(P["erfc"], lambda x, out: mul(full_like(x, -2.0 / math.sqrt(math.pi)), prims.exp.bind(prims.neg.bind(sq(x)))))
    unary(P["rsqrt"], lambda x, out: mul(full_like(x, -0.5), div(out, x)))

    def gelu_exp_derivative(x, out):
        """d/dx exp(-|z|) 2^s = -z'(x) out for x >= 0 (at 0, the side gelu's formulas take), z'(x) out below, 0
        where x is clamped."""
        z_prime = add(mul(sq(x), full_like(x, 3 * GELU_K3)), full_like(x, GELU_K1))
        slope = prims.select.bind(prims.ge.bind(x, full_like(x, 0.0)), prims.neg.bind(z_prime), z_prime)
        inside = prims.le.bind(prims.abs.bind(x), full_like(x, GELU_CLAMP))
        return mul(prims.select.bind(inside, slope, full_like(x, 0.0)), out)

    unary(P["gelu_exp32"], gelu_exp_derivative)

    def integer_pow_derivative(x, out, *, y):
        if y == 0:
            return full_like(x, 0)
        return mul(full_like(x, y), integer_pow_p.bind(x, y=y - 1))

    unary(integer_pow_p, integer_pow_derivative)
    for name in ("floor", "ceil", "trunc", "round", "sign", "and", "or", "xor", "not", "shift_left", "shift_right"):
        prims.defjvp_zero(P[name])

    def atan2_rule(primals, tangents):
        (y, x), (ty, tx) = primals, tangents
        out = P["atan2"].bind(y, x)
        denom = add(sq(x), sq(y))
        t = Zero(tangent_aval(get_aval(out)))
        if not isinstance(ty, Zero):
            t = scale(ty, div(x, denom))
        if not isinstance(tx, Zero):
            dx = scale(tx, prims.neg.bind(div(y, denom)))
            t = dx if isinstance(t, Zero) else add(t, dx)
        return out, t

    P["atan2"].jvp_rule = atan2_rule

    def rem_rule(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        out = P["rem"].bind(x, y)
        t = tx
        if not isinstance(ty, Zero):
            dy = scale(ty, prims.neg.bind(P["trunc"].bind(div(x, y))))
            t = dy if isinstance(t, Zero) else add(instantiate(t, tangent_aval(get_aval(out))), dy)
        return out, t

    P["rem"].jvp_rule = rem_rule

    def batching(prim):
        def rule(values, dims, *, axis_size, **params):
            moved = [move_batch_axis(v, d, 0, axis_size) for v, d in zip(values, dims)]
            return prim.bind(*moved, **params), 0

        prim.batching_rule = rule

    for prim in P.values():
        batching(prim)


_register_rules()
