"""The rest of numpy's elementwise math: logaddexp, hypot, cbrt, copysign, signbit, ldexp/frexp/modf,
gcd/lcm, sinc, heaviside, i0, angle conversions and the real-input complex helpers.

Each is composed from kiln's primitives, so it works eagerly (numpy arrays in, numpy arrays out), under
kiln.jit and in Programs, and differentiates where numpy's function is differentiable. Without a bit-cast
primitive, kiln reads the sign of a float from comparisons: the sign of -0.0 is seen (1/x < 0) but the sign
bit of a NaN is not (signbit(-nan) is False; numpy says True).
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..lax import complex_prims, control_flow, prims
from ..lax.math_prims import P
from ..lax.more_api import cbrt as lax_cbrt
from ..lax.more_api import frexp64, nextafter as lax_nextafter, times_power_of_two
from ._base import asarray, aval, broadcast_all, convert, normalize_axes, promote
from .elementwise import _float_operands, _full
from .math import _full_bool, _integer_operands


def _float_pair(name, x1, x2):
    a, b = _float_operands(name, x1, x2)
    return broadcast_all(a, b, where=name)


def _select(cond, a, b):
    return prims.select.bind(cond, a, b)


def _is_nan(x):
    return prims.ne.bind(x, x)


def _is_inf(x):
    return prims.eq.bind(prims.abs.bind(x), _full(x, np.inf))


def logaddexp(x1, x2):
    """numpy.logaddexp: log(exp(x1) + exp(x2)) without overflow (max + log1p(exp(-|x1 - x2|)))."""
    a, b = _float_pair("logaddexp", x1, x2)
    return _log_add(a, b, lambda d: P["log1p"].bind(prims.exp.bind(d)))


def logaddexp2(x1, x2):
    """numpy.logaddexp2: log2(2**x1 + 2**x2) without overflow."""
    a, b = _float_pair("logaddexp2", x1, x2)
    return _log_add(a, b, lambda d: prims.mul.bind(P["log1p"].bind(P["exp2"].bind(d)), _full(d, 1 / np.log(2))))


def _log_add(a, b, log_one_plus):
    biggest = prims.max.bind(a, b)
    delta = prims.sub.bind(a, b)
    # equal infinities give NaN for delta: the answer is then a + b (inf, -inf), as for NaN inputs
    safe = _select(_is_nan(delta), _full(delta, 0.0), delta)
    out = prims.add.bind(biggest, log_one_plus(prims.neg.bind(prims.abs.bind(safe))))
    return _select(_is_nan(delta), prims.add.bind(a, b), out)


def hypot(x1, x2):
    """numpy.hypot: sqrt(x1**2 + x2**2) scaled by the larger magnitude so it does not overflow; an
    infinite operand gives inf even next to a NaN, as in numpy."""
    a, b = _float_pair("hypot", x1, x2)
    a, b = prims.abs.bind(a), prims.abs.bind(b)
    big, small = prims.max.bind(a, b), prims.min.bind(a, b)
    zero = prims.eq.bind(big, _full(big, 0.0))
    safe_big = _select(zero, _full(big, 1.0), big)
    ratio = prims.div.bind(small, safe_big)
    out = prims.mul.bind(big, prims.sqrt.bind(prims.add.bind(_full(big, 1.0), prims.mul.bind(ratio, ratio))))
    out = _select(zero, _full(big, 0.0), out)
    return _select(P["or"].bind(_is_inf(a), _is_inf(b)), _full(big, np.inf), out)


def cbrt(x):
    """numpy.cbrt: the real cube root (negative for negative x): kiln.lax.cbrt on the float operand."""
    (a,) = _float_operands("cbrt", x)
    return lax_cbrt(a)


def signbit(x):
    """numpy.signbit: True where x is negative, -0.0 included (the sign bit of a NaN is not visible to kiln)."""
    (a,) = promote(x)
    d = aval(a).dtype
    if dtypes.is_bool(d):
        return _full_bool(a, False)
    negative = prims.lt.bind(a, _full(a, 0))
    if not dtypes.is_float(d):
        return negative
    zero = prims.eq.bind(a, _full(a, 0.0))
    negative_zero = P["and"].bind(zero, prims.lt.bind(prims.div.bind(_full(a, 1.0), a), _full(a, 0.0)))
    return P["or"].bind(negative, negative_zero)


def copysign(x1, x2):
    """numpy.copysign: |x1| with the sign of x2 (-0.0 counts as negative; a NaN x2 as positive)."""
    a, b = _float_pair("copysign", x1, x2)
    magnitude = prims.abs.bind(a)
    return _select(signbit(b), prims.neg.bind(magnitude), magnitude)


def ldexp(x1, x2):
    """numpy.ldexp: x1 * 2**x2 for an integer x2, in the float dtype numpy gives x1; exact
    (kiln.lax.more_api.times_power_of_two)."""
    n = x2 if hasattr(x2, "aval") else np.asarray(x2)
    if not (dtypes.is_int(aval(n).dtype) or dtypes.is_bool(aval(n).dtype)):
        raise TypeError(f"ldexp: the exponent x2 must be an integer array, got {aval(n).dtype}")
    (a,) = _float_operands("sqrt", x1)  # numpy_result_dtype cannot call ldexp with one operand
    a, n = broadcast_all(a, convert(n, np.int64), where="ldexp")
    return convert(times_power_of_two(convert(a, np.float64), n), aval(a).dtype)


def frexp(x):
    """numpy.frexp: (mantissa, exponent) with x = mantissa * 2**exponent and 0.5 <= |mantissa| < 1;
    zeros, infinities and NaN give (x, 0). The exponent is int32, as numpy's (kiln.lax.more_api.frexp64)."""
    (a,) = _float_operands("sqrt", x)  # numpy_result_dtype cannot read frexp's pair
    mantissa, exponent, regular = frexp64(convert(a, np.float64))
    mantissa = _select(regular, convert(mantissa, aval(a).dtype), a)
    return mantissa, convert(_select(regular, exponent, _full(exponent, 0)), np.int32)


def modf(x):
    """numpy.modf: (fractional part, integral part), both with the sign of x; modf(inf) is (0.0, inf)."""
    (a,) = _float_operands("modf", x)
    whole = P["trunc"].bind(a)
    fraction = _select(_is_inf(a), _full(a, 0.0), prims.sub.bind(a, whole))
    return copysign(fraction, a), whole


def _gcd_pair(a, b):
    """Euclid's algorithm on |a|, |b|, all elements stepped together until every remainder is 0."""
    zero = _full(a, 0)

    def step(state):
        x, y = state
        return _select(prims.ne.bind(y, zero), y, x), P["rem"].bind(x, y)

    return control_flow.while_loop(_any_nonzero, step, (prims.abs.bind(a), prims.abs.bind(b)))[0]


def _any_nonzero(state):
    from .reductions import any as any_

    y = state[1]
    return any_(prims.ne.bind(y, _full(y, 0)))


def gcd(x1, x2):
    """numpy.gcd of integers: the non-negative greatest common divisor (gcd(0, 0) is 0)."""
    a, b = _integer_operands("gcd", x1, x2)
    if dtypes.is_bool(aval(a).dtype):
        a, b = convert(a, np.int8), convert(b, np.int8)
    a, b = broadcast_all(a, b, where="gcd")
    return _gcd_pair(a, b)


def lcm(x1, x2):
    """numpy.lcm of integers: |x1 // gcd(x1, x2) * x2|, 0 when either is 0."""
    a, b = _integer_operands("lcm", x1, x2)
    if dtypes.is_bool(aval(a).dtype):
        a, b = convert(a, np.int8), convert(b, np.int8)
    a, b = broadcast_all(a, b, where="lcm")
    g = _gcd_pair(a, b)
    zero = _full(g, 0)
    is_zero = prims.eq.bind(g, zero)
    safe = _select(is_zero, _full(g, 1), g)
    out = prims.abs.bind(prims.mul.bind(prims.div.bind(prims.abs.bind(a), safe), prims.abs.bind(b)))
    return _select(is_zero, zero, out)


def sinc(x):
    """numpy.sinc: sin(pi x) / (pi x), 1 at x = 0 (with derivative 0 there)."""
    (a,) = _float_operands("sinc", x)
    at_zero = prims.eq.bind(a, _full(a, 0.0))
    scaled = prims.mul.bind(_select(at_zero, _full(a, 1.0), a), _full(a, np.pi))
    return _select(at_zero, _full(a, 1.0), prims.div.bind(P["sin"].bind(scaled), scaled))


def _scale(name, factor):
    def fn(x):
        (a,) = _float_operands(name, x)
        return prims.mul.bind(a, _full(a, factor))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"numpy.{name}: x * {factor!r}; integer inputs become floats as in numpy."
    return fn


deg2rad = _scale("deg2rad", np.pi / 180)
radians = _scale("radians", np.pi / 180)
rad2deg = _scale("rad2deg", 180 / np.pi)
degrees = _scale("degrees", 180 / np.pi)


def heaviside(x1, x2):
    """numpy.heaviside: 0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0 (NaN stays NaN)."""
    a, b = _float_pair("heaviside", x1, x2)
    out = _select(prims.lt.bind(a, _full(a, 0.0)), _full(a, 0.0), _select(prims.gt.bind(a, _full(a, 0.0)), _full(a, 1.0), b))
    return _select(_is_nan(a), a, out)


def positive(x):
    """numpy.positive: +x (a copy numpy makes; kiln returns the value). Booleans are an error, as in numpy."""
    (a,) = promote(x)
    if dtypes.is_bool(aval(a).dtype):
        raise TypeError("positive: numpy has no positive for booleans; convert to a number first")
    return a


def conjugate(x):
    """numpy.conjugate: the complex conjugate; a real array is its own conjugate."""
    (a,) = promote(x)
    return complex_prims.conj(a) if dtypes.is_complex(aval(a).dtype) else a


conj = conjugate


def real(val):
    """numpy.real: the real part (float32 of complex64, float64 of complex128); a real array itself."""
    (a,) = promote(val)
    return complex_prims.real(a) if dtypes.is_complex(aval(a).dtype) else a


def imag(val):
    """numpy.imag: the imaginary part; zeros of a real array's shape and dtype."""
    (a,) = promote(val)
    return complex_prims.imag(a) if dtypes.is_complex(aval(a).dtype) else _full(a, 0)


_I0_SERIES_TERMS = 80
_I0_ASYMPTOTIC_FROM = 40.0
_I0_ASYMPTOTIC_TERMS = 20


def i0(x):
    """numpy.i0, the modified Bessel function of the first kind of order 0, in float64: its power series
    sum((x/2)**2k / k!**2) (all terms positive) below |x| = 40, the asymptotic series
    e**|x| / sqrt(2 pi |x|) * sum(((2k-1)!!)**2 / (k! (8|x|)**k)) above. numpy's dtype: float64 for
    integers, the float dtype otherwise."""
    (a,) = promote(x)
    d = aval(a).dtype
    if dtypes.is_bool(d):
        raise TypeError("i0: numpy has no i0 for booleans; convert to a number first")
    out_dtype = d if dtypes.is_float(d) else np.dtype(np.float64)
    wide = prims.abs.bind(convert(a, np.float64))
    small = prims.lt.bind(wide, _full(wide, _I0_ASYMPTOTIC_FROM))
    near = _select(small, wide, _full(wide, 0.0))
    quarter_square = prims.mul.bind(prims.mul.bind(near, near), _full(wide, 0.25))
    term, total = _full(wide, 1.0), _full(wide, 1.0)
    for k in range(1, _I0_SERIES_TERMS):
        term = prims.mul.bind(term, prims.div.bind(quarter_square, _full(wide, float(k * k))))
        total = prims.add.bind(total, term)
    far = _select(small, _full(wide, _I0_ASYMPTOTIC_FROM), wide)
    inverse = prims.div.bind(_full(wide, 1.0), prims.mul.bind(far, _full(wide, 8.0)))
    aterm, asum = _full(wide, 1.0), _full(wide, 1.0)
    for k in range(1, _I0_ASYMPTOTIC_TERMS):
        aterm = prims.mul.bind(aterm, prims.mul.bind(inverse, _full(wide, (2 * k - 1) ** 2 / k)))
        asum = prims.add.bind(asum, aterm)
    # e**|x| / sqrt(2 pi |x|) as exp(|x| / 2)**2 / ..., so it overflows only where the answer does
    half = prims.exp.bind(prims.mul.bind(far, _full(wide, 0.5)))
    scale = prims.div.bind(half, prims.sqrt.bind(prims.mul.bind(far, _full(wide, 2 * np.pi))))
    asymptotic = prims.mul.bind(prims.mul.bind(scale, asum), half)
    return convert(_select(small, total, asymptotic), out_dtype)


def fabs(x):
    """numpy.fabs: the absolute value as a float (integer inputs become numpy's float dtype)."""
    (a,) = _float_operands("fabs", x)
    return prims.abs.bind(a)


def isposinf(x):
    """numpy.isposinf: x == +inf (False for integers and booleans)."""
    (a,) = promote(x)
    if not dtypes.is_float(aval(a).dtype):
        return _full_bool(a, False)
    return prims.eq.bind(a, _full(a, np.inf))


def isneginf(x):
    """numpy.isneginf: x == -inf (False for integers and booleans)."""
    (a,) = promote(x)
    if not dtypes.is_float(aval(a).dtype):
        return _full_bool(a, False)
    return prims.eq.bind(a, _full(a, -np.inf))


def nextafter(x1, x2):
    """numpy.nextafter: the next float after x1 toward x2 in x1's dtype (kiln.lax.nextafter on the promoted
    operands); subnormals included, as numpy."""
    return lax_nextafter(*_float_pair("nextafter", x1, x2))


def spacing(x):
    """numpy.spacing: the distance from x to the next float away from zero (negative for x < 0; NaN for
    infinities)."""
    (a,) = _float_operands("spacing", x)
    direction = _select(prims.lt.bind(a, _full(a, 0.0)), _full(a, -np.inf), _full(a, np.inf))
    out = prims.sub.bind(nextafter(a, direction), a)
    return _select(_is_inf(a), _full(a, np.nan), out)


def bitwise_count(x):
    """numpy.bitwise_count: the number of 1 bits in |x| (uint8)."""
    (a,) = _integer_operands("bitwise_count", x)
    if dtypes.is_bool(aval(a).dtype):
        return convert(a, np.uint8)
    magnitude = prims.abs.bind(a) if np.dtype(aval(a).dtype).kind == "i" else a
    one = _full(magnitude, 1)
    total = _full(magnitude, 0)
    for bit in range(np.dtype(aval(a).dtype).itemsize * 8):
        shifted = P["shift_right"].bind(magnitude, _full(magnitude, bit))
        total = prims.add.bind(total, P["and"].bind(shifted, one))
    return convert(total, np.uint8)


def angle(z, deg=False):
    """numpy.angle: arctan2(imag(z), real(z)), in degrees with deg=True. A real array's angle is 0 for
    x >= 0 (and +0.0), pi for negative x (and -0.0), numpy's dtypes: arctan2(0, z)."""
    from .math import arctan2

    (a,) = promote(z)
    out = arctan2(imag(a), real(a)) if dtypes.is_complex(aval(a).dtype) else arctan2(0, z)
    return prims.mul.bind(out, _full(out, 180 / np.pi)) if deg else out


def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """numpy.unwrap: jumps between neighbours along axis larger than max(discont, period/2) are taken out
    by adding multiples of period (integers stay integers when the period is an integer)."""
    from .array_math import diff
    from .elementwise import where
    from .math import remainder
    from .reductions import cumsum
    from .shape import _slice_axis, concatenate

    x = asarray(p)
    ax = normalize_axes(axis, aval(x).ndim, "unwrap")[0]
    dd = diff(x, axis=ax)
    if discont is None:
        discont = period / 2
    work = aval(promote(dd, period)[0]).dtype
    if dtypes.is_int(aval(dd).dtype) and isinstance(period, float):
        work = np.dtype(np.float64)  # numpy's: integer phases with a float period unwrap in float64
    if dtypes.is_int(work):
        high, rest = divmod(period, 2)
        ambiguous = rest == 0
    else:
        high, ambiguous = period / 2, True
    dd = convert(dd, work)
    ddmod = prims.add.bind(remainder(prims.add.bind(dd, _full(dd, high)), period), _full(dd, -high))
    if ambiguous:
        boundary = P["and"].bind(prims.eq.bind(ddmod, _full(ddmod, -high)), prims.gt.bind(dd, _full(dd, 0)))
        ddmod = where(boundary, _full(ddmod, high), ddmod)
    correction = prims.sub.bind(ddmod, dd)
    correction = where(prims.lt.bind(prims.abs.bind(dd), _full(dd, discont)), _full(correction, 0), correction)
    x = convert(x, work)
    rest_part = prims.add.bind(_slice_axis(x, ax, 1, aval(x).shape[ax]), cumsum(correction, axis=ax))
    return concatenate([_slice_axis(x, ax, 0, min(1, aval(x).shape[ax])), rest_part], axis=ax)


__all__ = [
    "logaddexp", "logaddexp2", "hypot", "cbrt", "signbit", "copysign", "ldexp", "frexp", "modf", "gcd", "lcm",
    "sinc", "deg2rad", "radians", "rad2deg", "degrees", "heaviside", "positive", "conjugate", "conj", "real", "imag",
    "i0", "fabs", "isposinf", "isneginf", "nextafter", "spacing", "bitwise_count", "angle", "unwrap",
]
