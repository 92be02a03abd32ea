"""Kernel code that works on a value's stored bits: lax.bitcast_convert_type between dtypes of one width and
lax.reduce_precision (a float rounded to fewer exponent and mantissa bits, XLA's definition)."""
from __future__ import annotations

import ml_dtypes
from llvmlite import ir

from .half import bf16_to_float, float_to_half, half_to_float
from .types import I16, I32, DTypeInfo, info, int_const


def stored_bits(b: ir.IRBuilder, value: ir.Value, d: DTypeInfo) -> ir.Value:
    """The exact bits a compute-typed value of dtype d has in memory, as an integer of d's width."""
    if not d.is_float:
        return value
    if d.name == "f16":
        return float_to_half(b, value, keep_nan_payload=True)
    if d.name == "bf16":
        return b.trunc(b.lshr(b.bitcast(value, I32), ir.Constant(I32, 16)), I16)
    return b.bitcast(value, ir.IntType(d.itemsize * 8))


def from_stored_bits(b: ir.IRBuilder, bits: ir.Value, d: DTypeInfo) -> ir.Value:
    """The compute-typed value of dtype d whose memory holds `bits`."""
    if not d.is_float:
        return bits
    if d.name == "f16":
        return half_to_float(b, bits)
    if d.name == "bf16":
        return bf16_to_float(b, bits)
    return b.bitcast(bits, d.compute)


def bitcast(b: ir.IRBuilder, x: ir.Value, src, dst) -> ir.Value:
    return from_stored_bits(b, stored_bits(b, x, info(src)), info(dst))


def reduce_precision(b: ir.IRBuilder, x: ir.Value, dtype, exponent_bits: int, mantissa_bits: int) -> ir.Value:
    """x rounded to nearest even at mantissa_bits, then overflowing to ±inf above and flushed to ±0 at or
    below the range of exponent_bits; a NaN stays x (also with no mantissa bits, as JAX's
    CPU result)."""
    d = info(dtype)
    bits = stored_bits(b, x, d)
    ty = bits.type
    width = d.itemsize * 8
    src_mantissa = int(ml_dtypes.finfo(dtype).nmant)
    src_exponent = width - 1 - src_mantissa

    def c(v: int) -> ir.Constant:
        return int_const(ty, v)

    exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
    sign_mask = 1 << (width - 1)
    is_nan = b.icmp_unsigned(">", b.and_(bits, c(~sign_mask)), c(exponent_mask))
    if mantissa_bits < src_mantissa:
        shift = src_mantissa - mantissa_bits
        last_kept = 1 << shift
        odd = b.lshr(b.and_(bits, c(last_kept)), c(shift))
        bias = b.add(odd, c((last_kept >> 1) - 1))
        bits = b.and_(b.add(bits, bias), c(~(last_kept - 1)))
    if exponent_bits < src_exponent:
        src_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = b.and_(bits, c(exponent_mask))
        overflows = b.icmp_unsigned(">", exponent, c((src_bias + reduced_bias) << src_mantissa))
        underflows = b.icmp_unsigned("<=", exponent, c((src_bias - reduced_bias) << src_mantissa))
        signed_zero = b.and_(bits, c(sign_mask))
        bits = b.select(overflows, b.or_(signed_zero, c(exponent_mask)), bits)
        bits = b.select(underflows, signed_zero, bits)
    return b.select(is_nan, x, from_stored_bits(b, bits, d))
