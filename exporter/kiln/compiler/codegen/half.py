"""IEEE half and bfloat16 <-> single conversions in integer IR (no F16C, no libcalls; vectorizable)."""
from __future__ import annotations

from llvmlite import ir

from .types import F32, I16, I32


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def half_to_float(b: ir.IRBuilder, h16: ir.Value) -> ir.Value:
    h = b.zext(h16, I32)
    sign = b.shl(b.and_(h, _c(0x8000)), _c(16))
    magnitude = b.and_(h, _c(0x7FFF))
    exponent = b.lshr(magnitude, _c(10))
    normal = b.add(b.shl(magnitude, _c(13)), _c(0x38000000))
    special = b.or_(b.shl(magnitude, _c(13)), _c(0x7F800000))
    subnormal = b.bitcast(b.fmul(b.sitofp(magnitude, F32), ir.Constant(F32, 2.0**-24)), I32)
    bits = b.select(b.icmp_unsigned("==", exponent, _c(0x1F)), special, normal)
    bits = b.select(b.icmp_unsigned("==", exponent, _c(0)), subnormal, bits)
    return b.bitcast(b.or_(bits, sign), F32)


def float_to_half(b: ir.IRBuilder, f: ir.Value, *, keep_nan_payload: bool = False) -> ir.Value:
    """Round to nearest even; overflow to inf; NaN stays a quiet NaN, or with keep_nan_payload keeps the
    payload half_to_float gave it (a signaling NaN stays signaling: bitcast's exact bits)."""
    x = b.bitcast(f, I32)
    sign = b.and_(b.lshr(x, _c(16)), _c(0x8000))
    a = b.and_(x, _c(0x7FFFFFFF))
    payload = b.and_(b.lshr(a, _c(13)), _c(0x3FF))
    if keep_nan_payload:
        quiet = b.icmp_unsigned("==", payload, _c(0))
        nan = b.select(quiet, _c(0x7E00), b.or_(_c(0x7C00), payload))
    else:
        nan = b.or_(_c(0x7E00), payload)
    odd = b.and_(b.lshr(a, _c(13)), _c(1))
    normal = b.lshr(b.add(b.add(b.sub(a, _c(0x38000000)), _c(0xFFF)), odd), _c(13))
    tiny_sum = b.fadd(b.bitcast(a, F32), ir.Constant(F32, 0.5))
    subnormal = b.sub(b.bitcast(tiny_sum, I32), _c(0x3F000000))
    h = b.select(b.icmp_unsigned("<", a, _c(0x38800000)), subnormal, normal)
    h = b.select(b.icmp_unsigned(">=", a, _c(0x477FF000)), _c(0x7C00), h)
    h = b.select(b.icmp_unsigned(">", a, _c(0x7F800000)), nan, h)
    return b.trunc(b.or_(h, sign), I16)


def round_to_half(b: ir.IRBuilder, f: ir.Value) -> ir.Value:
    """A float rounded to the nearest half-precision value, still as float."""
    return half_to_float(b, float_to_half(b, f))


def bf16_to_float(b: ir.IRBuilder, raw: ir.Value) -> ir.Value:
    return b.bitcast(b.shl(b.zext(raw, I32), ir.Constant(I32, 16)), F32)


def float_to_bf16(b: ir.IRBuilder, f: ir.Value) -> ir.Value:
    """Round to nearest even (as ml_dtypes does); NaN stays a quiet NaN of the same sign."""
    x = b.bitcast(f, I32)
    odd = b.and_(b.lshr(x, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.lshr(b.add(b.add(x, ir.Constant(I32, 0x7FFF)), odd), ir.Constant(I32, 16))
    quiet = b.or_(b.lshr(x, ir.Constant(I32, 16)), ir.Constant(I32, 0x40))
    is_nan = b.fcmp_unordered("uno", f, f)
    return b.trunc(b.select(is_nan, quiet, rounded), I16)
