"""Scalar code for each elementwise primitive, with numpy's semantics, plus loads and stores.

Values are held in their dtype's compute type (bool as i1, f16 as float). The
loop vectorizer widens this scalar code; everything here is branch-free.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ...core.primitive import lookup
from .. import mathlib
from . import bits
from .half import bf16_to_float, float_to_bf16, float_to_half, half_to_float, round_to_half
from .intrinsics import call_binary, call_unary, fp_to_int_saturating
from .types import F32, F64, I1, DTypeInfo, info, int_const

# Storage-only float types: loaded into float, computed in float, rounded when stored.
_NARROW = ("f16", "bf16")


def round_to_narrow(b: ir.IRBuilder, value: ir.Value, name: str) -> ir.Value:
    if name == "f16":
        return round_to_half(b, value)
    return bf16_to_float(b, float_to_bf16(b, value))


class UnsupportedPrimitive(NotImplementedError):
    """A primitive that has no kernel code generation."""


def load(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, dtype) -> ir.Value:
    d = info(dtype)
    raw = b.load(b.gep(base, [offset], inbounds=True, source_etype=d.storage), typ=d.storage)
    if d.kind == "b":
        return b.icmp_unsigned("!=", raw, ir.Constant(d.storage, 0))
    if d.name == "f16":
        return half_to_float(b, raw)
    if d.name == "bf16":
        return bf16_to_float(b, raw)
    return raw


def store(b: ir.IRBuilder, base: ir.Value, offset: ir.Value, value: ir.Value, dtype) -> None:
    d = info(dtype)
    if d.kind == "b":
        value = b.zext(value, d.storage)
    elif d.name == "f16":
        value = float_to_half(b, value)
    elif d.name == "bf16":
        value = float_to_bf16(b, value)
    b.store(value, b.gep(base, [offset], inbounds=True, source_etype=d.storage))


def _float_max(b, x, y, is_max: bool):
    return call_binary(b, "maximum" if is_max else "minimum", x, y)


def _int_minmax(b, d: DTypeInfo, x, y, is_max: bool):
    if d.kind == "b":
        return b.or_(x, y) if is_max else b.and_(x, y)
    base = ("smax" if is_max else "smin") if d.is_signed else ("umax" if is_max else "umin")
    return call_binary(b, base, x, y)


def _int_div(b, d: DTypeInfo, x, y):
    zero = ir.Constant(y.type, 0)
    one = ir.Constant(y.type, 1)
    is_zero = b.icmp_unsigned("==", y, zero)
    if not d.is_signed:
        return b.select(is_zero, zero, b.udiv(x, b.select(is_zero, one, y)))
    minus_one = b.icmp_signed("==", y, ir.Constant(y.type, -1))
    safe = b.select(b.or_(is_zero, minus_one), one, y)
    q = b.sdiv(x, safe)
    q = b.select(minus_one, b.sub(zero, x), q)
    return b.select(is_zero, zero, q)


def _int_rem(b, d: DTypeInfo, x, y):
    """C remainder (the sign of x) without undefined behaviour: x % 0 is 0 (numpy's value) and
    x % -1 is 0 (INT_MIN % -1 overflows in srem), both computed as x % 1."""
    zero = ir.Constant(y.type, 0)
    one = ir.Constant(y.type, 1)
    is_zero = b.icmp_unsigned("==", y, zero)
    if not d.is_signed:
        return b.urem(x, b.select(is_zero, one, y))
    minus_one = b.icmp_signed("==", y, ir.Constant(y.type, -1))
    return b.srem(x, b.select(b.or_(is_zero, minus_one), one, y))


def _int_pow(b, d: DTypeInfo, x, y):
    one = ir.Constant(x.type, 1)
    if d.is_signed:
        y = b.select(b.icmp_signed("<", y, ir.Constant(y.type, 0)), ir.Constant(y.type, 0), y)
    result, base = one, x
    bits = d.bits - 1 if d.is_signed else d.bits
    for k in range(bits):
        bit = b.trunc(b.lshr(y, ir.Constant(y.type, k)), I1)
        result = b.select(bit, b.mul(result, base), result)
        if k + 1 < bits:
            base = b.mul(base, base)
    return result


def _compare(b, d: DTypeInfo, op: str, x, y):
    if d.is_float:
        return b.fcmp_unordered("!=", x, y) if op == "!=" else b.fcmp_ordered(op, x, y)
    if d.is_signed:
        return b.icmp_signed(op, x, y)
    return b.icmp_unsigned(op, x, y)


_COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def convert(b: ir.IRBuilder, x: ir.Value, src, dst) -> ir.Value:
    """numpy astype semantics; float -> int truncates, NaN -> 0, saturates."""
    s, t = info(src), info(dst)
    if s.name == t.name:
        return x
    if t.kind == "b":
        if s.is_float:
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if t.is_float:
        if s.is_float:
            if t.name in _NARROW:
                narrowed = b.fptrunc(x, F32) if x.type == F64 else x
                return round_to_narrow(b, narrowed, t.name)
            if x.type == t.compute:
                return x
            return b.fpext(x, t.compute) if t.compute == F64 else b.fptrunc(x, t.compute)
        if s.is_signed:
            return b.sitofp(x, t.compute)
        return b.uitofp(x, t.compute)
    if s.is_float:
        return fp_to_int_saturating(b, x, t.compute, t.is_signed)
    if s.bits == t.bits:
        return x
    if s.bits > t.bits:
        return b.trunc(x, t.compute)
    return b.sext(x, t.compute) if s.is_signed else b.zext(x, t.compute)


def emit(b: ir.IRBuilder, name: str, params: dict, args: list[ir.Value], in_dtypes: list, out_dtype) -> ir.Value:
    """Code for one elementwise primitive application."""
    d = info(in_dtypes[-1]) if in_dtypes else info(out_dtype)
    out = info(out_dtype)
    value = _emit(b, name, params, args, d, in_dtypes, out_dtype)
    if out.name in _NARROW and not lookup(name).traits.exact_in_narrow:
        value = round_to_narrow(b, value, out.name)
    return value


def _emit(b, name, params, args, d: DTypeInfo, in_dtypes, out_dtype):
    x = args[0] if args else None
    y = args[1] if len(args) > 1 else None
    if name == "convert":
        return convert(b, x, in_dtypes[0], params["new_dtype"])
    if name == "bitcast":
        return bits.bitcast(b, x, in_dtypes[0], params["new_dtype"])
    if name == "reduce_precision":
        return bits.reduce_precision(b, x, in_dtypes[0], params["exponent_bits"], params["mantissa_bits"])
    if name == "select":
        return b.select(args[0], args[1], args[2])
    if name in _COMPARISONS:
        return _compare(b, d, _COMPARISONS[name], x, y)
    if name in _BITWISE:
        return _bitwise(b, name, d, x, y)
    if name == "integer_pow":
        return _integer_pow(b, d, x, params["y"])
    if name == "sign":
        return _sign(b, d, x)
    if d.kind == "b":
        if name in ("add", "max"):
            return b.or_(x, y)
        if name in ("mul", "min"):
            return b.and_(x, y)
        raise UnsupportedPrimitive(f"{name} on bool")
    if d.is_float:
        return _emit_float(b, name, args)
    return _emit_int(b, name, d, x, y)


def _emit_float(b, name, args):
    x = args[0] if args else None
    y = args[1] if len(args) > 1 else None
    if name == "add":
        return b.fadd(x, y)
    if name == "sub":
        return b.fsub(x, y)
    if name == "mul":
        return b.fmul(x, y)
    if name == "div":
        return b.fdiv(x, y)
    if name == "neg":
        return b.fneg(x)
    if name == "abs":
        return call_unary(b, "fabs", x)
    if name in ("max", "min"):
        return _float_max(b, x, y, name == "max")
    math = lookup(name).traits.math  # the primitive's mathlib function (OpTraits.math)
    if math is not None:
        return mathlib.call(b, math, *args)
    raise UnsupportedPrimitive(f"no kernel code for float {name}")


def _emit_int(b, name, d: DTypeInfo, x, y):
    if name == "add":
        return b.add(x, y)
    if name == "sub":
        return b.sub(x, y)
    if name == "mul":
        return b.mul(x, y)
    if name == "div":
        return _int_div(b, d, x, y)
    if name == "rem":
        return _int_rem(b, d, x, y)
    if name == "pow":
        return _int_pow(b, d, x, y)
    if name == "neg":
        return b.sub(ir.Constant(x.type, 0), x)
    if name == "abs":
        if not d.is_signed:
            return x
        return b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.sub(ir.Constant(x.type, 0), x), x)
    if name in ("max", "min"):
        return _int_minmax(b, d, x, y, name == "max")
    if name in ("floor", "ceil", "trunc", "round"):
        return x
    raise UnsupportedPrimitive(f"no kernel code for integer {name}")


_BITWISE = ("and", "or", "xor", "not", "shift_left", "shift_right")


def _bitwise(b, name, d: DTypeInfo, x, y):
    """Bitwise ops on integers and bools. Shifts follow numpy: a count outside [0, bits)
    gives 0 (left, or right of a non-negative value) or -1 (right of a negative value)."""
    if name == "and":
        return b.and_(x, y)
    if name == "or":
        return b.or_(x, y)
    if name == "xor":
        return b.xor(x, y)
    if name == "not":
        return b.xor(x, ir.Constant(x.type, -1) if d.kind != "b" else ir.Constant(I1, 1))
    zero = ir.Constant(x.type, 0)
    in_range = b.icmp_unsigned("<", y, ir.Constant(y.type, d.bits))
    safe = b.select(in_range, y, zero)
    if name == "shift_left":
        return b.select(in_range, b.shl(x, safe), zero)
    if d.is_signed:
        fill = b.select(b.icmp_signed("<", x, zero), ir.Constant(x.type, -1), zero)
        return b.select(in_range, b.ashr(x, safe), fill)
    return b.select(in_range, b.lshr(x, safe), zero)


def _integer_pow(b, d: DTypeInfo, x, n: int):
    """x**n by repeated squaring for a static integer n (floats: 1/x**-n for n < 0)."""
    mul = b.fmul if d.is_float else b.mul
    one = ir.Constant(x.type, 1.0 if d.is_float else 1)
    result, base, k = None, x, abs(n)
    while k:
        if k & 1:
            result = base if result is None else mul(result, base)
        k >>= 1
        if k:
            base = mul(base, base)
    if result is None:
        result = one
    if n < 0:
        result = b.fdiv(one, result)
    return result


def _sign(b, d: DTypeInfo, x):
    if d.kind == "b":
        return x
    zero = ir.Constant(x.type, 0.0 if d.is_float else 0)
    one = ir.Constant(x.type, 1.0 if d.is_float else 1)
    if d.is_float:
        pos = b.select(b.fcmp_ordered(">", x, zero), one, zero)
        out = b.select(b.fcmp_ordered("<", x, zero), ir.Constant(x.type, -1.0), pos)
        return b.select(b.fcmp_unordered("uno", x, x), x, out)
    pos = b.select(b.icmp_signed(">", x, zero) if d.is_signed else b.icmp_unsigned(">", x, zero), one, zero)
    if not d.is_signed:
        return pos
    return b.select(b.icmp_signed("<", x, zero), ir.Constant(x.type, -1), pos)


def literal(value: np.ndarray, dtype) -> ir.Constant:
    """A compute-typed constant for a scalar literal."""
    d = info(dtype)
    v = np.asarray(value).item()
    if d.is_float:
        return ir.Constant(d.compute, float(v))
    if d.kind == "b":
        return ir.Constant(I1, int(bool(v)))
    return int_const(d.compute, int(v))
