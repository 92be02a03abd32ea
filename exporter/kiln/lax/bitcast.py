"""jax.lax's bit-level conversions: bitcast_convert_type (an array's bits read as another dtype; between
widths the last axis splits or joins, in little-endian order as JAX's CPU arrays) and reduce_precision (a
float rounded to fewer exponent and mantissa bits, XLA's definition).

Two primitives, elementwise in kernels (kiln.compiler.codegen.bits works on the stored bits):
- bitcast(x, new_dtype): one width to the same width. Not differentiable (zero tangent), as JAX's.
- reduce_precision(x, exponent_bits, mantissa_bits): linear in JAX's sense (its tangent and cotangent
  are reduced the same way), the straight-through rule quantization-aware training relies on.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from ..core.trace import get_aval
from ..transforms.jvp import tangent_aval
from . import prims
from .math_prims import P
from .operands import asarray, promote
from .prims import ShapeError, _elementwise_rule, defjvp_zero
from .structural_prims import concatenate, slice_p

__all__ = ["bitcast_convert_type", "reduce_precision"]


def _check_bitcast_dtype(name: str, d: np.dtype) -> None:
    if dtypes.is_bool(d) or dtypes.is_complex(d):
        raise TypeError(f"bitcast_convert_type: {name} dtype {d} has no bit pattern kiln reinterprets "
                        "(bool and complex are refused; use an integer or float dtype)")


bitcast_p = register(Primitive("bitcast"))
bitcast_p.def_traits(fusion="elementwise", exact_in_narrow=True)
bitcast_p.weak_from_operands = False


@bitcast_p.def_abstract_eval
def _bitcast_abstract(x, *, new_dtype):
    for name, d in (("the operand's", x.dtype), ("the new", np.dtype(new_dtype))):
        _check_bitcast_dtype(name, d)
    if x.dtype.itemsize != np.dtype(new_dtype).itemsize:
        raise ShapeError(f"bitcast: {x.dtype} and {new_dtype} differ in width (bitcast_convert_type splits or "
                         "joins the last axis for that)")
    return ShapedArray(x.shape, new_dtype, False)


@bitcast_p.def_impl
def _bitcast_impl(x, *, new_dtype):
    return np.asarray(x).copy(order="C").view(new_dtype)


defjvp_zero(bitcast_p)
bitcast_p.batching_rule = _elementwise_rule(bitcast_p)


def _unsigned(itemsize: int) -> np.dtype:
    return np.dtype(f"uint{itemsize * 8}")


def bitcast_convert_type(operand, new_dtype):
    """operand's bits read as new_dtype. Same width: the same shape. To a dtype k times narrower: a new last
    axis of k (the lowest-addressed part first, as on little-endian machines). From a k times narrower
    dtype: the last axis must be k, and is joined."""
    x = asarray(operand)
    src, dst = get_aval(x).dtype, dtypes.canonical(new_dtype)
    _check_bitcast_dtype("the operand's", src)
    _check_bitcast_dtype("the new", dst)
    if src.itemsize == dst.itemsize:
        return x if src == dst else bitcast_p.bind(x, new_dtype=dst)
    wide, narrow = (src, dst) if src.itemsize > dst.itemsize else (dst, src)
    ratio, part_bits = wide.itemsize // narrow.itemsize, narrow.itemsize * 8
    wide_uint, narrow_uint = _unsigned(wide.itemsize), _unsigned(narrow.itemsize)
    shape = get_aval(x).shape
    if src.itemsize > dst.itemsize:
        bits = bitcast_convert_type(x, wide_uint)
        parts = []
        for k in range(ratio):
            part = prims.convert.bind(_shift_right(bits, k * part_bits), new_dtype=narrow_uint)
            parts.append(prims.reshape.bind(bitcast_convert_type(part, dst), new_shape=shape + (1,)))
        return concatenate(parts, len(shape))
    if not shape or shape[-1] != ratio:
        raise ShapeError(f"bitcast_convert_type: {src} to {dst} joins {ratio} elements, so the operand's last "
                         f"axis must be {ratio}; its shape is {shape}")
    bits = bitcast_convert_type(x, narrow_uint)
    out = None
    for k in range(ratio):
        start = [0] * len(shape)
        start[-1] = k
        limit = list(shape)
        limit[-1] = k + 1
        part = slice_p.bind(bits, start_indices=tuple(start), limit_indices=tuple(limit),
                            strides=(1,) * len(shape))
        part = prims.reshape.bind(prims.convert.bind(part, new_dtype=wide_uint), new_shape=shape[:-1])
        part = _shift_left(part, k * part_bits)
        out = part if out is None else _bitwise_or(out, part)
    return bitcast_convert_type(out, dst)


def _constant_like(x, value):
    aval = get_aval(x)
    return np.full(aval.shape, value, aval.dtype)


def _shift_right(x, n: int):
    return x if n == 0 else P["shift_right"].bind(x, _constant_like(x, n))


def _shift_left(x, n: int):
    return x if n == 0 else P["shift_left"].bind(x, _constant_like(x, n))


def _bitwise_or(x, y):
    return P["or"].bind(x, y)


def _float_format(d: np.dtype) -> tuple[int, int]:
    """(exponent bits, mantissa bits) of a float dtype."""
    mantissa = int(ml_dtypes.finfo(d).nmant)
    return d.itemsize * 8 - 1 - mantissa, mantissa


reduce_precision_p = register(Primitive("reduce_precision"))
reduce_precision_p.def_traits(fusion="elementwise", exact_in_narrow=True, cost=4)


@reduce_precision_p.def_abstract_eval
def _reduce_precision_abstract(x, *, exponent_bits, mantissa_bits):
    if not dtypes.is_float(x.dtype):
        raise ShapeError(f"reduce_precision: the operand must be floating-point; got {x.dtype}")
    return x


@reduce_precision_p.def_impl
def _reduce_precision_impl(x, *, exponent_bits, mantissa_bits):
    """numpy mirror of kiln.compiler.codegen.bits.reduce_precision, on the stored bits."""
    x = np.asarray(x).copy(order="C")
    width = x.dtype.itemsize * 8
    src_exponent, src_mantissa = _float_format(x.dtype)
    u = _unsigned(x.dtype.itemsize).type
    bits = x.view(u).copy()
    sign_mask, exponent_mask = u(1 << (width - 1)), u(((1 << src_exponent) - 1) << src_mantissa)
    is_nan = (bits & ~sign_mask) > exponent_mask
    with np.errstate(over="ignore"):
        if mantissa_bits < src_mantissa:
            shift = src_mantissa - mantissa_bits
            last_kept = u(1 << shift)
            odd = (bits & last_kept) >> u(shift)
            bits = (bits + odd + u((1 << shift >> 1) - 1)) & ~u((1 << shift) - 1)
        if exponent_bits < src_exponent:
            src_bias, reduced_bias = (1 << (src_exponent - 1)) - 1, (1 << (exponent_bits - 1)) - 1
            exponent = bits & exponent_mask
            signed_zero = bits & sign_mask
            bits = np.where(exponent > u((src_bias + reduced_bias) << src_mantissa), signed_zero | exponent_mask,
                            bits)
            bits = np.where(exponent <= u((src_bias - reduced_bias) << src_mantissa), signed_zero, bits)
    return np.where(is_nan, x, bits.astype(u).view(x.dtype))


def _reduce_precision_jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    out = reduce_precision_p.bind(x, **params)
    if isinstance(t, Zero):
        return out, Zero(tangent_aval(get_aval(out)))
    return out, reduce_precision_p.bind(t, **params)


reduce_precision_p.jvp_rule = _reduce_precision_jvp
reduce_precision_p.transpose_rule = lambda ct, x, **params: [reduce_precision_p.bind(ct, **params)]
reduce_precision_p.batching_rule = _elementwise_rule(reduce_precision_p)


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """operand rounded (to nearest even) to mantissa_bits explicit mantissa bits, then to ±inf above and ±0
    at or below the normal range of exponent_bits exponent bits, still in operand's dtype (XLA's
    ReducePrecision: subnormals of the reduced format flush to zero; a NaN is kept as it is (also with no mantissa
    bits, as JAX's)). reduce_precision(x, 8, 7) is x rounded to bfloat16's precision, (5, 10) to float16's."""
    # a Python number is weakly typed (as JAX's; kiln's float64 eagerly, float32 traced)
    (x,) = promote(operand)
    d = get_aval(x).dtype
    if not dtypes.is_float(d):
        raise TypeError(f"reduce_precision: the operand must be floating-point; got {d}")
    for name, value, least in (("exponent_bits", exponent_bits, 1), ("mantissa_bits", mantissa_bits, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise TypeError(f"reduce_precision: {name} must be an int >= {least}; got {value!r}")
    src_exponent, src_mantissa = _float_format(d)
    exponent_bits, mantissa_bits = min(int(exponent_bits), src_exponent), min(int(mantissa_bits), src_mantissa)
    if (exponent_bits, mantissa_bits) == (src_exponent, src_mantissa):
        return x
    return reduce_precision_p.bind(x, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)
