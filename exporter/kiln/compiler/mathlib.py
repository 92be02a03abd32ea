"""Vectorizable math functions written in LLVM IR: no libm, no branches.

Each function is an internal, always-inlined scalar function built from
arithmetic, bit operations and selects, so that LLVM's loop vectorizer can
widen it inside a kernel's loop. Special values (NaN, ±inf, overflow,
underflow, subnormals) are handled with selects.

To add a function: write `_name_f32(m, x)` / `_name_f64(m, x)` bodies over a
`_Math` helper and register them in `_IMPLS`.

Accuracy (tests/compiler/test_mathlib.py, dense grids over the whole range):
exp, log, tanh: at most 1 ulp measured for f32 and f64 (the tests allow 2-3);
pow f32 is computed in f64 (correctly rounded nearly always); pow f64 uses
exp(y*log|x|) in f64 and loses about log2(|y*log(x)|) bits for large results.
"""
from __future__ import annotations

import math
from typing import Callable

from llvmlite import ir

from .codegen.intrinsics import call_binary, call_unary
from .codegen.types import F32, F64, I32, I64, int_const


class _Math:
    """Arithmetic helpers over one float type (float or double) on an IRBuilder."""

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type):
        self.b = builder
        self.ty = ty
        self.ity = I32 if ty == F32 else I64
        self.mant_bits = 23 if ty == F32 else 52
        self.bias = 127 if ty == F32 else 1023

    def c(self, v: float) -> ir.Constant:
        return ir.Constant(self.ty, float(v))

    def ic(self, v: int) -> ir.Constant:
        return int_const(self.ity, v)

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def sel(self, cond, a, b):
        return self.b.select(cond, a, b)

    def abs(self, a):
        return call_unary(self.b, "fabs", a)

    def copysign(self, mag, sign):
        return call_binary(self.b, "copysign", mag, sign)

    def bits(self, a):
        return self.b.bitcast(a, self.ity)

    def from_bits(self, a):
        return self.b.bitcast(a, self.ty)

    def horner(self, x, coeffs):
        """coeffs[0]*x^(n-1) + ... + coeffs[-1]."""
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.add(self.mul(acc, x), self.c(k))
        return acc

    def pow2i(self, n):
        """2**n for an integer n in the normal exponent range."""
        shifted = self.b.shl(self.b.add(n, self.ic(self.bias)), self.ic(self.mant_bits))
        return self.from_bits(shifted)

    def round_to_int(self, x):
        """(float, int) nearest integer to x for |x| < 2**(mantissa-1), by the magic-number trick."""
        magic = self.c(1.5 * 2.0**self.mant_bits)
        t = self.add(x, magic)
        as_float = self.sub(t, magic)
        as_int = self.b.sub(self.bits(t), self.bits(magic))
        return as_float, as_int


def _exp(m: _Math, x):
    f32 = m.ty == F32
    hi, lo = (88.8, -104.0) if f32 else (709.9, -745.2)
    xs = m.sel(m.gt(x, m.c(hi)), m.c(hi), x)
    xs = m.sel(m.lt(xs, m.c(lo)), m.c(lo), xs)
    xs = m.sel(m.isnan(x), m.c(0.0), xs)
    n_f, n_i = m.round_to_int(m.mul(xs, m.c(1.0 / math.log(2.0))))
    if f32:
        ln2_hi, ln2_lo = 0.693359375, -2.12194440e-4
    else:
        ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
    r = m.sub(m.sub(xs, m.mul(n_f, m.c(ln2_hi))), m.mul(n_f, m.c(ln2_lo)))
    if f32:
        p = m.horner(r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1])
        y = m.add(m.add(m.mul(m.mul(r, r), p), r), m.c(1.0))
    else:
        y = m.horner(r, [1.0 / math.factorial(k) for k in range(13, -1, -1)])
    n1 = m.b.ashr(n_i, m.ic(1))
    n2 = m.b.sub(n_i, n1)
    result = m.mul(m.mul(y, m.pow2i(n1)), m.pow2i(n2))
    result = m.sel(m.gt(x, m.c(hi)), m.c(math.inf), result)
    result = m.sel(m.lt(x, m.c(lo)), m.c(0.0), result)
    return m.sel(m.isnan(x), x, result)


def _split_exponent(m: _Math, x):
    """(f, e) with x = (1+f) * 2**e and 1+f in [sqrt(1/2), sqrt(2)), for finite x > 0."""
    b = m.b
    smallest_normal = 2.0 ** (1 - m.bias)
    prescale = m.mant_bits + 1
    small = m.lt(x, m.c(smallest_normal))
    xs = m.sel(small, m.mul(x, m.c(2.0**prescale)), x)
    bits = m.bits(xs)
    e = b.sub(b.lshr(bits, m.ic(m.mant_bits)), m.ic(m.bias))
    e = b.sub(e, b.select(small, m.ic(prescale), m.ic(0)))
    mant_mask = (1 << m.mant_bits) - 1
    mant = m.from_bits(b.or_(b.and_(bits, m.ic(mant_mask)), m.ic(m.bias << m.mant_bits)))
    big = m.gt(mant, m.c(math.sqrt(2.0)))
    mant = m.sel(big, m.mul(mant, m.c(0.5)), mant)
    e = b.add(e, b.zext(big, m.ity))
    return m.sub(mant, m.c(1.0)), b.sitofp(e, m.ty)


def _log(m: _Math, x):
    f, ef = _split_exponent(m, x)
    if m.ty == F32:
        z = m.mul(f, f)
        p = m.horner(f, [7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
                         -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1])
        y = m.mul(m.mul(p, f), z)
        y = m.add(y, m.mul(ef, m.c(-2.12194440e-4)))
        y = m.sub(y, m.mul(z, m.c(0.5)))
        r = m.add(m.add(f, y), m.mul(ef, m.c(0.693359375)))
    else:
        hfsq = m.mul(m.mul(f, f), m.c(0.5))
        s = m.div(f, m.add(f, m.c(2.0)))
        z = m.mul(s, s)
        w = m.mul(z, z)
        t1 = m.mul(w, m.horner(w, [1.531383769920937332e-01, 2.222219843214978396e-01, 3.999999999940941908e-01]))
        t2 = m.mul(z, m.horner(w, [1.479819860511658591e-01, 1.818357216161805012e-01, 2.857142874366239149e-01,
                                   6.666666666666735130e-01]))
        big_r = m.add(t2, t1)
        inner = m.add(m.mul(s, m.add(hfsq, big_r)), m.mul(ef, m.c(1.90821492927058770002e-10)))
        r = m.sub(m.mul(ef, m.c(6.93147180369123816490e-01)), m.sub(m.sub(hfsq, inner), f))
    r = m.sel(m.eq(x, m.c(math.inf)), x, r)
    r = m.sel(m.eq(x, m.c(0.0)), m.c(-math.inf), r)
    r = m.sel(m.lt(x, m.c(0.0)), m.c(math.nan), r)
    return m.sel(m.isnan(x), x, r)


def _tanh(m: _Math, x):
    ax = m.abs(x)
    z = m.mul(x, x)
    if m.ty == F32:
        p = m.horner(z, [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1])
        small = m.add(x, m.mul(m.mul(x, z), p))
    else:
        p = m.horner(z, [-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3])
        q = m.horner(z, [1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3])
        small = m.add(x, m.mul(x, m.div(m.mul(z, p), q)))
    e = _exp(m, m.mul(ax, m.c(2.0)))
    large = m.sub(m.c(1.0), m.div(m.c(2.0), m.add(e, m.c(1.0))))
    return m.sel(m.lt(ax, m.c(0.625)), small, m.copysign(large, x))


def _sqrt(m: _Math, x):
    return call_unary(m.b, "sqrt", x)


def _is_integer(m: _Math, y):
    return m.eq(call_unary(m.b, "trunc", y), y)


def _is_odd_integer(m: _Math, y):
    half = m.mul(y, m.c(0.5))
    return m.b.and_(_is_integer(m, y), m.b.not_(_is_integer(m, half)))


def _pow_core(m: _Math, x, y):
    """x**y by exp(y*log|x|) with C99 special cases, in m's float type."""
    b = m.b
    ax = m.abs(x)
    r = _exp(m, m.mul(y, _log(m, ax)))
    odd = _is_odd_integer(m, y)
    negative_base = b.icmp_signed("<", m.bits(x), m.ic(0))
    r = m.sel(b.and_(negative_base, odd), b.fneg(r), r)
    finite_negative = b.and_(m.lt(x, m.c(0.0)), m.gt(x, m.c(-math.inf)))
    finite_y = m.lt(m.abs(y), m.c(math.inf))
    r = m.sel(b.and_(b.and_(finite_negative, finite_y), b.not_(_is_integer(m, y))), m.c(math.nan), r)
    r = m.sel(b.and_(m.eq(ax, m.c(1.0)), b.not_(finite_y)), m.c(1.0), r)
    r = m.sel(m.isnan(y), y, r)
    r = m.sel(m.eq(x, m.c(1.0)), m.c(1.0), r)
    return m.sel(m.eq(y, m.c(0.0)), m.c(1.0), r)


def _pow(m: _Math, x, y):
    if m.ty == F32:
        wide = _Math(m.b, F64)
        r = _pow_core(wide, m.b.fpext(x, F64), m.b.fpext(y, F64))
        return m.b.fptrunc(r, F32)
    return _pow_core(m, x, y)


_IMPLS: dict[str, tuple[int, Callable]] = {
    "exp": (1, _exp),
    "log": (1, _log),
    "tanh": (1, _tanh),
    "sqrt": (1, _sqrt),
    "pow": (2, _pow),
}


def supported() -> list[str]:
    return sorted(_IMPLS)


def call(builder: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """Calls math function `name` (defined once per module, internal, always inlined)."""
    arity, impl = _IMPLS[name]
    ty = args[0].type
    if ty not in (F32, F64) or len(args) != arity:
        raise TypeError(f"mathlib.{name} takes {arity} float or double operands, got {[str(a.type) for a in args]}")
    module = builder.module
    fname = f"kiln.math.{name}.{'f32' if ty == F32 else 'f64'}"
    fn = module.globals.get(fname)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ty, [ty] * arity), name=fname)
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        fn.attributes.add("nounwind")
        inner = ir.IRBuilder(fn.append_basic_block("entry"))
        inner.ret(impl(_Math(inner, ty), *fn.args))
    return builder.call(fn, list(args))
