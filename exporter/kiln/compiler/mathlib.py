"""Vectorizable math functions written in LLVM IR: no libm, no branches.

Each function is an internal, always-inlined scalar function built from
arithmetic, bit operations and selects, so that LLVM's loop vectorizer can
widen it inside a kernel's loop. Special values (NaN, ±inf, overflow,
underflow, subnormals) are handled with selects.

To add a function: write `_name_f32(m, x)` / `_name_f64(m, x)` bodies over a
`_Math` helper and register them in `_IMPLS`.

Accuracy (tests/compiler/test_mathlib.py, dense grids over the whole range; docs/accuracy.md):
exp, log: at most 1 ulp measured for f32 and f64, tanh 2 ulp (f32) and 1 (f64), log1p 1 (f32);
f32 exp, log, log1p and tanh evaluate their polynomials with multiply-adds (_Math.fma: fused where the target
has FMA, so x86-64 without it differs in the last bits; docs/targets.md), checked on every f32 input by
tests/exhaustive_float32.py;
pow f32 is computed in f64 (correctly rounded nearly always); pow f64 uses
exp(y*log|x|) in f64 and loses about log2(|y*log(x)|) bits for large results.
"""
from __future__ import annotations

import math
from typing import Callable

from llvmlite import ir

from .codegen.intrinsics import call_binary, call_unary, fmuladd, intrinsic
from .codegen.pipeline import TARGET_ATTR
from .codegen.types import F32, F64, I1, I32, I64, int_const


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

    def fma(self, a, b, c):
        """a*b + c: llvm.fmuladd, one rounding where the target has FMA (x86-64-v3/v4, aarch64, riscv64),
        two on x86-64 without it (x86-64-v2; docs/targets.md)."""
        return fmuladd(self.b, a, b, c)

    def horner(self, x, coeffs, fused: bool = False):
        """coeffs[0]*x^(n-1) + ... + coeffs[-1]; `fused`: each step one multiply-add (self.fma)."""
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.fma(acc, x, self.c(k)) if fused else self.add(self.mul(acc, x), self.c(k))
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


# (exp(r) - 1 - r) / r^2 on |r| <= ln2/2, a minimax fit of the relative error of exp(r) (Lawson's algorithm on
# 4000 Chebyshev nodes, coefficients rounded to float32): at most 3.9e-9 (0.07 ulp) relative error.
_EXPM1_F32_P = [0.0013814609264954925, 0.008368710987269878, 0.04166838899254799, 0.1666652113199234,
                0.4999999403953552]


def _exp(m: _Math, x):
    """exp(x) = 2^n * exp(r), |r| <= ln2/2 (Cody-Waite). x is clamped to [lo, hi], where exp already overflows
    to inf and underflows to 0 when rounded, so no select fixes the result afterwards. A NaN x goes through
    the arithmetic as NaN (its n is garbage, but the product is NaN) and is returned as x itself."""
    f32 = m.ty == F32
    hi, lo = (88.8, -104.0) if f32 else (709.9, -745.2)
    xs = m.sel(m.gt(x, m.c(hi)), m.c(hi), x)
    xs = m.sel(m.lt(xs, m.c(lo)), m.c(lo), xs)
    if f32:
        # float32: multiply-adds (m.fma), fused where the target has FMA
        magic = m.c(1.5 * 2.0**23)
        k = m.fma(xs, m.c(1.0 / math.log(2.0)), magic)
        n_f, n_i = m.sub(k, magic), m.b.sub(m.bits(k), m.bits(magic))
        r = m.fma(n_f, m.c(2.12194440e-4), m.fma(n_f, m.c(-0.693359375), xs))
        y = m.add(m.fma(m.mul(r, r), m.horner(r, _EXPM1_F32_P, fused=True), r), m.c(1.0))
    else:
        n_f, n_i = m.round_to_int(m.mul(xs, m.c(1.0 / math.log(2.0))))
        ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
        r = m.sub(m.sub(xs, m.mul(n_f, m.c(ln2_hi))), m.mul(n_f, m.c(ln2_lo)))
        y = m.horner(r, [1.0 / math.factorial(k) for k in range(13, -1, -1)])
    result = _exact_scale(m, y, n_i)
    return m.sel(m.isnan(x), x, result)


def _exact_scale(m: _Math, y, n_i):
    """y * 2^n rounded once, for y in [1/2, 2) and n in exp's range ([-150, 128] float32, [-1075, 1024]
    float64): (y * 2^n1) * 2^n2 with n1 = n >> 1, n2 = n - n1, where the first product is exact (normal),
    so the second's rounding is the only one. On AVX-512 targets llvm.ldexp, one vscalefps/vscalefpd,
    scales with the same single rounding (bit for bit the same result, subnormal and overflow included)
    for 9 -> 3 instructions a vector; elsewhere ldexp becomes a libm call per lane, so the products stay."""
    target = getattr(m.b.module, TARGET_ATTR, None)
    if target is not None and target.arch == "x86_64" and target.has_feature("avx512f"):
        fn = intrinsic(m.b.module, "ldexp", m.ty, [m.ty, m.ity], [m.ty, m.ity])
        return m.b.call(fn, [y, n_i])
    n1 = m.b.ashr(n_i, m.ic(1))
    n2 = m.b.sub(n_i, n1)
    return m.mul(m.mul(y, m.pow2i(n1)), m.pow2i(n2))


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


# (log(1+f) - f + f^2/2) / f^3 on [sqrt(1/2) - 1, sqrt(2) - 1]: a minimax fit of the relative error of log(1+f)
# (Lawson's algorithm on Chebyshev nodes, float32 coefficients), within 6.5e-9 (0.11 ulp)
_LOG_F32_P = [-0.07634488493204117, 0.12761573493480682, -0.13160184025764465, 0.14201758801937103,
              -0.16623356938362122, 0.20001226663589478, -0.2500081956386566, 0.3333333134651184]


def _log(m: _Math, x):
    f, ef = _split_exponent(m, x)
    if m.ty == F32:
        z = m.mul(f, f)
        # log(1+f) = f - f^2/2 + f^3 * P(f) (_LOG_F32_P); multiply-adds (m.fma), fused where the target has
        # FMA; ef * ln2_hi is exact either way
        p = m.horner(f, _LOG_F32_P, fused=True)
        y = m.fma(ef, m.c(-2.12194440e-4), m.mul(m.mul(p, f), z))
        y = m.fma(z, m.c(-0.5), y)
        r = m.fma(ef, m.c(0.693359375), m.add(f, y))
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
    if m.ty == F32:
        return _tanh_f32(m, x)
    ax = m.abs(x)
    z = m.mul(x, x)
    p = m.horner(z, [-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3])
    q = m.horner(z, [1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3])
    small = m.add(x, m.mul(x, m.div(m.mul(z, p), q)))
    e = _exp(m, m.mul(ax, m.c(2.0)))
    large = m.sub(m.c(1.0), m.div(m.c(2.0), m.add(e, m.c(1.0))))
    return m.sel(m.lt(ax, m.c(0.625)), small, m.copysign(large, x))


def _tanh_f32(m: _Math, x):
    """tanh(|x|) = e / (e + 2) with e = expm1(2|x|): one path for every x, no second branch to select from.

    2|x| is clamped to 19, where the quotient already rounds to 1. expm1(t) = 2^n * expm1(r) + (2^n - 1)
    with t = n*ln2 + r, |r| <= ln2/2 (Cody-Waite: n*ln2_hi is exact) and expm1(r) = r + r^2 * P(r). A
    rounding error in e shrinks by 2/(e + 2) in the quotient; the rounding of e + 2 does not, so it is
    corrected (without it, 3 ulp at small |x|). Every float32 input is within 2 ulp (the exhaustive sweep
    is in docs/accuracy.md). Tiny x gives 2|x| / 2, exactly |x|; NaN propagates through the arithmetic.
    Multiply-adds are llvm.fmuladd (m.fma): about 27 vector operations where the target has FMA."""
    t = m.mul(m.abs(x), m.c(2.0))
    t = m.sel(m.gt(t, m.c(19.0)), m.c(19.0), t)
    magic = m.c(1.5 * 2.0**23)
    k = m.fma(t, m.c(1.0 / math.log(2.0)), magic)
    n_f = m.sub(k, magic)
    n_i = m.b.sub(m.bits(k), m.bits(magic))
    r = m.fma(n_f, m.c(-0.693359375), t)
    r = m.fma(n_f, m.c(2.12194440e-4), r)
    p = m.horner(r, _EXPM1_F32_P, fused=True)
    scale = m.pow2i(n_i)
    e = m.fma(scale, m.fma(m.mul(r, r), p, r), m.sub(scale, m.c(1.0)))
    d = m.add(e, m.c(2.0))
    big = m.gt(e, m.c(2.0))
    err = m.sub(m.sel(big, m.c(2.0), e), m.sub(d, m.sel(big, e, m.c(2.0))))  # e + 2 = d + err exactly (Fast2Sum)
    q = m.div(e, d)
    # e / (d + err) = q * (1 - err / d), and 1 / d = (1 - q) / 2
    q = m.fma(m.b.fneg(m.mul(q, err)), m.fma(q, m.c(-0.5), m.c(0.5)), q)
    return m.copysign(q, x)


def _has_fma(m: _Math) -> bool:
    """Whether the target has a fused multiply-add instruction (x86-64 with FMA: v3, v4; aarch64; riscv64 with
    F), so that llvm.fma is one instruction (elsewhere it is a libm call)."""
    target = getattr(m.b.module, TARGET_ATTR, None)
    if target is None:
        return False
    if target.arch == "x86_64":
        return target.has_feature("fma")
    return target.arch == "aarch64" or (target.arch == "riscv64" and target.has_feature("f"))


def _split_f32(v: float) -> tuple[float, float]:
    """(hi, lo): v as the sum of two float32 (hi = v rounded to float32, lo = the rest rounded)."""
    import numpy as np

    hi = float(np.float32(v))
    return hi, float(np.float32(v - hi))


def _gelu_z_double_float(m: _Math, x):
    """-|z| = a (K1 + K3 a^2), a = -min(|x|, GELU_CLAMP), as two float32 hi + lo (|lo| up to 3 ulp(hi)), to 2^-45
    relative (measured on 3 million x; the float64 version: 2^-52), with fused multiply-adds (llvm.fma: a
    product's rounding error exactly) on float32 vectors, where the float64 version took two conversions in and
    two out per vector and half the lanes per operation (1M gelu on one thread of a Zen 4: 0.82 -> 0.54 ms).
    K1 and K3 are float32 pairs (to 2^-48); a^2 and k3h a^2 are exact pairs (their error terms from an fma),
    k1h + k3h a^2 a Fast2Sum (exact), the small terms' roundings 2^-24 of their size; the product with a is exact
    again. Only for targets with FMA (_has_fma): without it llvm.fma is a libm call."""
    from ..lax.math_prims import GELU_CLAMP, GELU_K1, GELU_K3

    fma = intrinsic(m.b.module, "fma", m.ty, [m.ty] * 3, [m.ty])

    def fused(a, b_, c):
        return m.b.call(fma, [a, b_, c])

    neg = m.b.fneg
    k1h, k1l = _split_f32(GELU_K1)
    k3h, k3l = _split_f32(GELU_K3)
    na = m.b.fneg(m.abs(x))
    # max(-|x|, -GELU_CLAMP), a select that compiles to one max; NaN x gives -GELU_CLAMP (gelu's result is NaN
    # through x itself)
    a = m.sel(m.gt(na, m.c(-GELU_CLAMP)), na, m.c(-GELU_CLAMP))
    s = m.mul(a, a)
    s_l = fused(a, a, neg(s))  # a^2 = s + s_l exactly
    p = m.mul(s, m.c(k3h))
    p_l = fused(s, m.c(k3h), neg(p))  # s k3h = p + p_l exactly
    p_l = fused(s_l, m.c(k3h), fused(s, m.c(k3l), p_l))  # K3 a^2 = p + p_l (to 2^-47 of p)
    t = m.add(m.c(k1h), p)
    # k1h + p = t + t_err exactly: Fast2Sum, the larger operand first (a max and a min: 4 operations, the
    # two-sum's 5 adds were 4% slower)
    big = m.gt(p, m.c(k1h))
    t_err = m.add(m.sub(m.sel(big, p, m.c(k1h)), t), m.sel(big, m.c(k1h), p))
    t_l = m.add(m.add(p_l, m.c(k1l)), t_err)  # K1 + K3 a^2 = t + t_l
    z = m.mul(t, a)
    z_l = fused(t_l, a, fused(t, a, neg(z)))  # -|z| = z + z_l
    return z, z_l


def _gelu_exp(m: _Math, x):
    """exp(-|z|) 2^s for float32 x, the exp of kiln.nn.gelu's float32 tanh form (lax.math_prims.gelu_exp32):
    z = K1 xc + K3 xc^3 with xc = x clamped to +-12.5, s = 64 for x < -8.5 (where exp(-|z|), or gelu, could be
    subnormal) and 0 elsewhere; 0 where n + s < -126 below (exp(-|z|) 2^s under about 2^-126: x > 9.6 or
    x < -11.7, where gelu is x or -0 and its derivative 1 or -0).

    -|z| is computed as two float32, hi + lo: where the target has a fused multiply-add (x86-64-v3/v4, aarch64,
    riscv64), in double-float32 arithmetic (_gelu_z_double_float, to 2^-45 relative; |lo| up to 3 ulp(hi));
    elsewhere (x86-64-v2) in float64 (to 2^-50) and split (the float64 difference is exact). A float32 z would be
    off by about |z| 2^-24, and exp(z) by as much relative (100 ulp at x = -10).
    exp(hi + lo) = 2^n exp(r) with n = round(hi / ln2) and r = (hi - n ln2_hi) + (lo - n ln2_lo): the first
    difference exact (Cody-Waite), the second small, so r is rounded once and lo costs one float32 add;
    exp(r) = 1 + s, s = r + r^2 P(r) with float32 exp's polynomial, and the result (1 + s) 2^n is one
    multiply-add, rounded once. The shift s joins n, and 2^n is built from n's bits (0 where n + s < -126): the
    argument needs no clamp (-|z| >= -160). NaN gives NaN. Multiply-adds are llvm.fmuladd (fused where the target
    has FMA: x86-64 without it differs in the last bits, docs/targets.md)."""
    if m.ty != F32:
        raise TypeError("mathlib.gelu_exp is float32 only")
    from ..lax.math_prims import GELU_CLAMP, GELU_DEEP, GELU_K1, GELU_K3

    b = m.b
    if _has_fma(m):
        hi, lo = _gelu_z_double_float(m, x)
    else:
        w = _Math(b, F64)
        xc = m.sel(m.lt(x, m.c(-GELU_CLAMP)), m.c(-GELU_CLAMP), m.sel(m.gt(x, m.c(GELU_CLAMP)), m.c(GELU_CLAMP), x))
        a = b.fpext(b.fneg(m.abs(xc)), F64)  # -|xc|: z's sign is x's
        z = w.mul(w.fma(w.mul(a, a), w.c(GELU_K3), w.c(GELU_K1)), a)  # -|z|
        hi = b.fptrunc(z, F32)
        lo = b.fptrunc(w.sub(z, b.fpext(hi, F64)), F32)
    deep = m.lt(x, m.c(GELU_DEEP))
    # k = hi / ln2 + 1.5 2^23 + 127 + s: n + 127 + s is in its low mantissa bits, its shift by 23 is 2^(n + s)
    magic = m.sel(deep, m.c(1.5 * 2.0**23 + 127 + 64), m.c(1.5 * 2.0**23 + 127))
    k = m.fma(hi, m.c(1.0 / math.log(2.0)), magic)
    n_f = m.sub(k, magic)
    # r = (hi - n ln2_hi) + (lo - n ln2_lo): the first exact, the second small (|n ln2_lo| < 0.05), so r is
    # rounded once
    r = m.add(m.fma(n_f, m.c(-0.693359375), hi), m.fma(n_f, m.c(2.12194440e-4), lo))
    s = m.fma(m.mul(r, r), m.horner(r, _EXPM1_F32_P, fused=True), r)  # exp(r) - 1
    biased = m.sel(m.lt(k, m.c(1.5 * 2.0**23)), m.c(1.5 * 2.0**23), k)  # n + 127 + s >= 0 (0: the product is 0)
    scale = m.from_bits(b.shl(m.bits(biased), m.ic(23)))
    return m.fma(s, scale, scale)


def _sqrt(m: _Math, x):
    return call_unary(m.b, "sqrt", x)


def _is_integer(m: _Math, y):
    # rint(y) == y, inline: llvm.trunc is a libm call (trunc) on x86-64 without SSE4.1
    return m.eq(_rint(m, y), y)


def _is_odd_integer(m: _Math, y):
    half = m.mul(y, m.c(0.5))
    return m.b.and_(_is_integer(m, y), m.b.not_(_is_integer(m, half)))


def _pow_core(m: _Math, x, y):
    """x**y with C99 special cases (f64: fdlibm's algorithm; f32 operands arrive widened to f64)."""
    b = m.b
    ax = m.abs(x)
    if m.ty == F64:
        r = _pow_positive_f64(m, ax, y)
        finite_y = m.lt(m.abs(y), m.c(math.inf))
        regular = b.and_(b.and_(m.gt(ax, m.c(0.0)), m.lt(ax, m.c(math.inf))), finite_y)
        grows = b.icmp_unsigned("==", m.gt(ax, m.c(1.0)), m.gt(y, m.c(0.0)))
        r = m.sel(regular, r, m.sel(grows, m.c(math.inf), m.c(0.0)))
        r = m.sel(m.isnan(x), x, r)
    else:
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


def _with_high_word(m: _Math, v, high):
    """v with its upper 32 encoding bits replaced by `high` (an i64 holding 32 bits)."""
    b = m.b
    return m.from_bits(b.or_(b.shl(high, m.ic(32)), b.and_(m.bits(v), m.ic(0xFFFFFFFF))))


def _pow_positive_f64(m: _Math, ax, y):
    """ax**y for finite ax > 0 and finite y, within 1 ulp: fdlibm's e_pow.c without branches.

    log2(ax) is computed as t1 + t2 with about 64 bits, y is split so that y*log2(ax) is
    the exact-enough pair p_h + p_l, and 2**(p_h + p_l) is evaluated with a correction
    term, so the error does not grow with |y * log(ax)| as exp(y*log(ax)) does.
    """
    b = m.b
    # --- log2(ax) = n + t1 + t2
    tiny = m.lt(ax, m.c(2.0**-1022))
    ax = m.sel(tiny, m.mul(ax, m.c(2.0**53)), ax)
    ix = b.lshr(m.bits(ax), m.ic(32))
    n = b.sub(b.ashr(ix, m.ic(20)), m.ic(0x3FF))
    n = b.sub(n, b.select(tiny, m.ic(53), m.ic(0)))
    j = b.and_(ix, m.ic(0xFFFFF))
    ix = b.or_(j, m.ic(0x3FF00000))
    upper = b.icmp_signed(">=", j, m.ic(0xBB67A))  # mantissa >= sqrt(3): take the next binade
    k1 = b.and_(b.icmp_signed(">", j, m.ic(0x3988E)), b.not_(upper))  # sqrt(3/2) <= mantissa < sqrt(3)
    n = b.add(n, b.zext(upper, m.ity))
    ix = b.sub(ix, b.select(upper, m.ic(0x00100000), m.ic(0)))
    ax = _with_high_word(m, ax, ix)
    bp = m.sel(k1, m.c(1.5), m.c(1.0))
    dp_h = m.sel(k1, m.c(5.84962487220764160156e-01), m.c(0.0))
    dp_l = m.sel(k1, m.c(1.35003920212974897128e-08), m.c(0.0))
    u = m.sub(ax, bp)
    v = m.div(m.c(1.0), m.add(ax, bp))
    ss = m.mul(u, v)
    s_h = _high_word(m, ss)
    t_h_high = b.add(b.add(b.or_(b.ashr(ix, m.ic(1)), m.ic(0x20000000)), m.ic(0x00080000)),
                     b.select(k1, m.ic(1 << 18), m.ic(0)))
    t_h = m.from_bits(b.shl(t_h_high, m.ic(32)))
    t_l = m.sub(ax, m.sub(t_h, bp))
    s_l = m.mul(v, m.sub(m.sub(u, m.mul(s_h, t_h)), m.mul(s_h, t_l)))
    s2 = m.mul(ss, ss)
    r = m.mul(m.mul(s2, s2), m.horner(s2, [2.06975017800338417784e-01, 2.30660745775561754067e-01,
                                           2.72728123808534006489e-01, 3.33333329818377432918e-01,
                                           4.28571428578550184252e-01, 5.99999999999994648725e-01]))
    r = m.add(r, m.mul(s_l, m.add(s_h, ss)))
    s2 = m.mul(s_h, s_h)
    t_h = _high_word(m, m.add(m.add(m.c(3.0), s2), r))
    t_l = m.sub(r, m.sub(m.sub(t_h, m.c(3.0)), s2))
    u = m.mul(s_h, t_h)
    v = m.add(m.mul(s_l, t_h), m.mul(t_l, ss))
    p_h = _high_word(m, m.add(u, v))
    p_l = m.sub(v, m.sub(p_h, u))
    z_h = m.mul(m.c(9.61796700954437255859e-01), p_h)  # cp_h + cp_l = 2/(3 ln 2)
    z_l = m.add(m.add(m.mul(m.c(-7.02846165095275826516e-09), p_h), m.mul(p_l, m.c(9.61796693925975554329e-01))), dp_l)
    t = b.sitofp(n, F64)
    t1 = _high_word(m, m.add(m.add(m.add(z_h, z_l), dp_h), t))
    t2 = m.sub(z_l, m.sub(m.sub(m.sub(t1, t), dp_h), z_h))
    # --- y * log2(ax) = p_h + p_l
    y1 = _high_word(m, y)
    p_l = m.add(m.mul(m.sub(y, y1), t1), m.mul(y, t2))
    p_h = m.mul(y1, t1)
    z = m.add(p_l, p_h)
    overflow = b.or_(m.gt(z, m.c(1024.0)),
                     b.and_(_ge(m, z, m.c(1024.0)), m.gt(m.add(p_l, m.c(8.0085662595372944372e-17)), m.sub(z, p_h))))
    underflow = b.or_(m.lt(z, m.c(-1075.0)), b.and_(_le(m, z, m.c(-1075.0)), _le(m, p_l, m.sub(z, p_h))))
    # --- 2**(p_h + p_l) = 2**n * 2**(remainder)
    zc = _clamp(m, z, -1100.0, 1100.0)
    n_f, n_i = m.round_to_int(zc)
    p_h = m.sub(m.sel(m.eq(zc, z), p_h, m.c(0.0)), n_f)
    t = _high_word(m, m.add(p_l, p_h))
    u = m.mul(t, m.c(6.93147182464599609375e-01))
    v = m.add(m.mul(m.sub(p_l, m.sub(t, p_h)), m.c(6.93147180559945286227e-01)),
              m.mul(t, m.c(-1.90465429995776804525e-09)))
    zz = m.add(u, v)
    w = m.sub(v, m.sub(zz, u))
    t = m.mul(zz, zz)
    t1 = m.sub(zz, m.mul(t, m.horner(t, [4.13813679705723846039e-08, -1.65339022054652515390e-06,
                                        6.61375632143793436117e-05, -2.77777777770155933842e-03,
                                        1.66666666666666019037e-01])))
    r = m.sub(m.div(m.mul(zz, t1), m.sub(t1, m.c(2.0))), m.add(w, m.mul(zz, w)))
    result = _scale_pow2(m, m.sub(m.c(1.0), m.sub(r, zz)), n_i)
    result = m.sel(overflow, m.c(math.inf), result)
    return m.sel(underflow, m.c(0.0), result)


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


# 2/pi in 24-bit chunks: 2/pi = sum(c_j * 2**(-24*(j+1))).
_TWO_OVER_PI_24 = [10680707, 7228996, 1387004, 2578385, 16069853, 12639074, 9804092, 4427841, 16666979, 11263675, 12935607, 2387514, 4345298, 14681673, 3074569, 13734428, 16653803, 1880361, 10960616, 8533493, 3062596, 8710556, 7349940, 6258241, 3772886, 3769171, 3798172, 8675211, 12450088, 3874808, 9961438, 366607, 15675153, 9132554, 7151469, 3571407, 2607881, 12013382, 4155038, 6285869, 7677882, 13102053, 15825725, 473591, 9065106, 15363067, 6271263, 9264392, 5636912, 4652155]

# erfc(x)*exp(x*x) on [lo, hi) as a polynomial in (x - center) (Chebyshev interpolation, degree 22).
_ERFCX_PIECES = [
    (1.0, 2.0, 1.5, [
        0.3215854164543175, -0.16362291773256007, 0.0761510398554774, -0.03293090529956264,
        0.013377340953066719, -0.005145957547985026, 0.001886134877029727, -0.0006619300664115511,
        0.00022330994435309904, -7.265892219602478e-05, 2.2864312211836933e-05, -6.974991613473901e-06,
        2.066970798241859e-06, -5.960823796318859e-07, 1.6754960762492952e-07, -4.5967674741400005e-08,
        1.2324739302855718e-08, -3.2332508239131285e-09, 8.306365252118776e-10, -2.0850645581989275e-10,
        5.1528943054333397e-11, -1.3589015941169778e-11, 3.230668242250349e-12,
    ]),
    (2.0, 3.5, 2.75, [
        0.1936620962790687, -0.06323763756063484, 0.019758592987322864, -0.005934337896997976,
        0.0017195818852892143, -0.000482195084981055, 0.0001311818005304378, -3.469860957781248e-05,
        8.940156047861537e-06, -2.2473734325121738e-06, 5.519758217089632e-07, -1.326254403317518e-07,
        3.1209310016225536e-08, -7.199975880024481e-09, 1.6299113943096823e-09, -3.6236005680834034e-10,
        7.917629218379661e-11, -1.7019804351111807e-11, 3.5993861456072552e-12, -7.433034461222809e-13,
        1.5258190931576908e-13, -3.533079671122862e-14, 7.023979973210966e-15,
    ]),
    (3.5, 6.0, 4.75, [
        0.11630270721024731, -0.02350344859816315, 0.00466132636897234, -0.0009080988970296905,
        0.000173928304040655, -3.277578113463199e-05, 6.081114550384831e-06, -1.1115677200846998e-06,
        2.0029196999274442e-07, -3.559574725797621e-08, 6.242434113591605e-09, -1.0807609245924076e-09,
        1.848032643692948e-10, -3.122241271217265e-11, 5.213862435713925e-12, -8.608309029346642e-13,
        1.4058164751006972e-13, -2.2745817836350906e-14, 3.636844192893255e-15, -5.615208262625507e-16,
        8.809478187496013e-17, -1.73037535739829e-17, 2.6509339629864135e-18,
    ]),
]


# ---------------------------------------------------------------------------
# Functions added with the elementwise math surface. f32 versions run the f64
# algorithm and round once (`_widened`), which keeps them within 1 ulp; f64
# versions follow fdlibm's algorithms, written branch-free with selects.
# ---------------------------------------------------------------------------

def _widened(fn):
    """fn over f64; f32 operands are extended, computed in f64 and rounded once."""

    def impl(m: _Math, *args):
        if m.ty == F32:
            wide = _Math(m.b, F64)
            return m.b.fptrunc(fn(wide, *[m.b.fpext(a, F64) for a in args]), F32)
        return fn(m, *args)

    impl.__name__ = fn.__name__
    return impl


def _ge(m, a, b):
    return m.b.fcmp_ordered(">=", a, b)


def _le(m, a, b):
    return m.b.fcmp_ordered("<=", a, b)


def _clamp(m, x, lo, hi):
    x = m.sel(m.gt(x, m.c(hi)), m.c(hi), x)
    x = m.sel(m.lt(x, m.c(lo)), m.c(lo), x)
    return m.sel(m.isnan(x), m.c(0.0), x)


_INV_FACT = [1.0 / math.factorial(k) for k in range(20)]


def _exp_poly(m, r):
    """exp(r) for |r| <= ln2/2 in f64 (Taylor to degree 13)."""
    return m.horner(r, [1.0 / math.factorial(k) for k in range(13, -1, -1)])


def _scale_pow2(m, y, n_i):
    """y * 2**n for n in [-2100, 2100] (two factors keep each power of two in range)."""
    n1 = m.b.ashr(n_i, m.ic(1))
    return m.mul(m.mul(y, m.pow2i(n1)), m.pow2i(m.b.sub(n_i, n1)))


def _exp2(m, x):
    xs = _clamp(m, x, -1100.0, 1100.0)
    n_f, n_i = m.round_to_int(xs)
    r = m.mul(m.sub(xs, n_f), m.c(math.log(2.0)))
    res = _scale_pow2(m, _exp_poly(m, r), n_i)
    res = m.sel(m.gt(x, m.c(1024.0)), m.c(math.inf), res)
    res = m.sel(m.lt(x, m.c(-1080.0)), m.c(0.0), res)
    return m.sel(m.isnan(x), x, res)


_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10


def _expm1(m, x):
    xs = _clamp(m, x, -40.0, 40.0)
    n_f, n_i = m.round_to_int(m.mul(xs, m.c(1.0 / math.log(2.0))))
    r = m.sub(m.sub(xs, m.mul(n_f, m.c(_LN2_HI))), m.mul(n_f, m.c(_LN2_LO)))
    p = m.add(r, m.mul(m.mul(r, r), m.horner(r, _INV_FACT[14:1:-1])))
    scale = m.pow2i(n_i)
    res = m.add(m.mul(scale, p), m.sub(scale, m.c(1.0)))
    res = m.sel(m.gt(x, m.c(40.0)), _exp(m, x), res)
    res = m.sel(m.lt(x, m.c(-40.0)), m.c(-1.0), res)
    res = m.sel(m.eq(x, m.c(0.0)), x, res)
    return m.sel(m.isnan(x), x, res)


def _log1p(m, x):
    u = m.add(m.c(1.0), x)
    d = m.sub(u, m.c(1.0))
    res = m.mul(_log(m, u), m.div(x, d))
    res = m.sel(m.eq(d, m.c(0.0)), x, res)
    res = m.sel(m.eq(x, m.c(math.inf)), x, res)
    res = m.sel(m.eq(x, m.c(-1.0)), m.c(-math.inf), res)
    res = m.sel(m.lt(x, m.c(-1.0)), m.c(math.nan), res)
    return m.sel(m.isnan(x), x, res)


def _log1p_f32(m: _Math, x):
    """log1p in float32: log1p(x) = k*ln2 + log(1+f) + c/u with u = 1 + x rounded, u = 2^k * (1+f),
    1+f in [sqrt(1/2), sqrt(2)) (f exact), and c the rounding error of u (exact: musl's log1pf). For x in
    [sqrt(1/2) - 1, sqrt(2) - 1) the argument is x itself (k = 0, c = 0), so small x loses nothing. log(1+f)
    is float32 log's minimax polynomial (_log), evaluated with multiply-adds (m.fma). About 40 float32
    operations with one divide, where the float64 algorithm rounded once costs two float64 divides at half the
    vector width. Every float32 input is within 1 ulp (docs/accuracy.md)."""
    b = m.b
    u = m.add(m.c(1.0), x)
    iu = b.add(m.bits(u), m.ic(0x3F800000 - 0x3F3504F3))
    k = b.sub(b.lshr(iu, m.ic(23)), m.ic(127))
    f_u = m.sub(m.from_bits(b.add(b.and_(iu, m.ic(0x007FFFFF)), m.ic(0x3F3504F3))), m.c(1.0))
    two_up = b.icmp_signed(">=", k, m.ic(2))
    c = m.sel(two_up, m.sub(m.c(1.0), m.sub(u, x)), m.sub(x, m.sub(u, m.c(1.0))))
    small = b.and_(_ge(m, x, m.c(math.sqrt(0.5) - 1.0)), m.lt(x, m.c(math.sqrt(2.0) - 1.0)))
    f = m.sel(small, x, f_u)
    c = m.sel(small, m.c(0.0), m.div(c, u))
    ef = m.sel(small, m.c(0.0), b.sitofp(k, m.ty))
    z = m.mul(f, f)
    p = m.horner(f, _LOG_F32_P, fused=True)
    y = m.fma(ef, m.c(-2.12194440e-4), m.fma(m.mul(p, f), z, c))
    y = m.fma(z, m.c(-0.5), y)
    r = m.fma(ef, m.c(0.693359375), m.add(f, y))
    r = m.sel(m.eq(x, m.c(math.inf)), x, r)
    r = m.sel(m.eq(x, m.c(0.0)), x, r)  # keeps the sign of -0
    r = m.sel(m.eq(x, m.c(-1.0)), m.c(-math.inf), r)
    r = m.sel(m.lt(x, m.c(-1.0)), m.c(math.nan), r)
    return m.sel(m.isnan(x), x, r)


def _log1p_any(m: _Math, x):
    """log1p: float32's own (_log1p_f32), float64's fdlibm-style _log1p."""
    return _log1p_f32(m, x) if m.ty == F32 else _log1p(m, x)


def _log_parts(m, x):
    """(log(1+f), e) with log(x) = e*ln2 + log(1+f), for finite x > 0 (f64, fdlibm's kernel)."""
    f, ef = _split_exponent(m, x)
    hfsq = m.mul(m.mul(f, f), m.c(0.5))
    s = m.div(f, m.add(f, m.c(2.0)))
    z = m.mul(s, s)
    w = m.mul(z, z)
    t1 = m.mul(w, m.horner(w, [1.531383769920937332e-01, 2.222219843214978396e-01, 3.999999999940941908e-01]))
    t2 = m.mul(z, m.horner(w, [1.479819860511658591e-01, 1.818357216161805012e-01, 2.857142874366239149e-01,
                               6.666666666666735130e-01]))
    l1p = m.sub(f, m.sub(hfsq, m.mul(s, m.add(hfsq, m.add(t2, t1)))))
    return l1p, ef


def _log_specials(m, x, r):
    r = m.sel(m.eq(x, m.c(math.inf)), x, r)
    r = m.sel(m.eq(x, m.c(0.0)), m.c(-math.inf), r)
    r = m.sel(m.lt(x, m.c(0.0)), m.c(math.nan), r)
    return m.sel(m.isnan(x), x, r)


def _log2(m, x):
    l1p, ef = _log_parts(m, x)
    r = m.add(m.add(m.mul(l1p, m.c(1.67517131648865118353e-10)), m.mul(l1p, m.c(1.44269504072144627571e+00))), ef)
    return _log_specials(m, x, r)


def _log10(m, x):
    l1p, ef = _log_parts(m, x)
    lo = m.add(m.mul(ef, m.c(3.69423907715893078616e-13)), m.mul(l1p, m.c(4.34294481903251816668e-01)))
    return _log_specials(m, x, m.add(m.mul(ef, m.c(3.01029995663611771306e-01)), lo))


# --- trigonometric functions -------------------------------------------------

_PIO2_HI, _PIO2_LO = 1.57079632679489655800e+00, 6.12323399573676603587e-17


def _two_over_pi_table(module) -> ir.GlobalVariable:
    name = "kiln.math.two_over_pi_24"
    table = module.globals.get(name)
    if table is None:
        ty = ir.ArrayType(I32, len(_TWO_OVER_PI_24))
        table = ir.GlobalVariable(module, ty, name=name)
        table.initializer = ir.Constant(ty, _TWO_OVER_PI_24)
        table.global_constant = True
        table.linkage = "internal"
    return table


def _round_at(m, v, quantum):
    """v rounded to a multiple of `quantum` (a power of two), for |v| < 2**51 * quantum."""
    magic = m.c(1.5 * 2.0**52 * quantum)
    return m.sub(m.add(v, magic), magic)


def _floor_small(m, v):
    r = _round_at(m, v, 1.0)
    return m.sel(m.gt(r, v), m.sub(r, m.c(1.0)), r)


def _reduce_pio2(m, x, narrow: bool):
    """(n mod 4 as i64, r) with x = n*pi/2 + r, |r| <= pi/4, for finite x (f64 arithmetic).

    Payne-Hanek reduction without branches: |x| = mant * 2**e with an integer
    mantissa (split in 26 + 27 bits, or 24 bits when `narrow`: an f32 input),
    multiplied by the 24-bit chunks of 2/pi that matter for this exponent
    (read from a table). Each product is exact; its value mod 4 is split into
    parts at 2**-46 and 2**-94 whose sums are exact, so that the fraction
    keeps full precision even when x is very close to a multiple of pi/2.
    """
    b = m.b
    table = _two_over_pi_table(b.module)
    bits = m.bits(m.abs(x))
    e = b.sub(b.lshr(bits, m.ic(52)), m.ic(1075))  # |x| = mant * 2**e, mant a 53-bit integer
    mant = b.or_(b.and_(bits, m.ic((1 << 52) - 1)), m.ic(1 << 52))
    if narrow:
        parts = [(b.lshr(mant, m.ic(29)), 29)]
    else:
        parts = [(b.lshr(mant, m.ic(27)), 27), (b.and_(mant, m.ic((1 << 27) - 1)), 0)]
    top_shift = parts[-1][1]  # the lowest part is the first whose products stop vanishing
    # the first chunk whose products with the top part do not vanish mod 4 (floor division)
    first = b.sub(b.sdiv(b.add(e, m.ic(top_shift - 2 + 24 * 100)), m.ic(24)), m.ic(101))
    first = b.select(b.icmp_signed("<", first, m.ic(0)), m.ic(0), first)
    count = 5 if narrow else 10
    first = b.select(b.icmp_signed(">", first, m.ic(len(_TWO_OVER_PI_24) - count)), m.ic(len(_TWO_OVER_PI_24) - count), first)
    hi = mid = tail = m.c(0.0)
    for j in range(count):
        index = b.add(first, m.ic(j))
        ptr = b.gep(table, [ir.Constant(I32, 0), index], inbounds=True)
        chunk = b.sitofp(b.load(ptr, typ=I32), F64)
        for part, shift in parts:
            # term = part * chunk * 2**(e + shift - 24*(index+1))
            k = b.sub(b.add(e, m.ic(shift)), b.mul(b.add(index, m.ic(1)), m.ic(24)))
            vanishes = b.icmp_signed(">=", k, m.ic(2))  # a multiple of 4
            k_safe = b.select(b.icmp_signed("<", k, m.ic(-1000)), m.ic(-1000), b.select(vanishes, m.ic(0), k))
            v = m.mul(m.mul(b.sitofp(part, F64), chunk), m.pow2i(k_safe))
            v = m.sub(v, m.mul(_floor_small(m, m.mul(v, m.c(0.25))), m.c(4.0)))
            v = m.sel(vanishes, m.c(0.0), v)
            v_hi = _round_at(m, v, 2.0**-46)
            rest = m.sub(v, v_hi)
            v_mid = _round_at(m, rest, 2.0**-94)
            hi = m.add(hi, v_hi)
            mid = m.add(mid, v_mid)
            tail = m.add(tail, m.sub(rest, v_mid))
    n = _round_at(m, hi, 1.0)
    frac = m.add(m.sub(hi, n), mid)
    r = m.add(m.mul(frac, m.c(_PIO2_HI)), m.add(m.mul(tail, m.c(_PIO2_HI)), m.mul(frac, m.c(_PIO2_LO))))
    n_i = b.fptosi(n, I64)
    negative = m.lt(x, m.c(0.0))
    r = m.sel(negative, b.fneg(r), r)
    n_i = b.select(negative, b.sub(ir.Constant(I64, 0), n_i), n_i)
    small = m.lt(m.abs(x), m.c(math.pi / 4))
    return b.select(small, ir.Constant(I64, 0), b.and_(n_i, ir.Constant(I64, 3))), m.sel(small, x, r)


def _kernel_sin(m, x):
    z = m.mul(x, x)
    p = m.horner(z, [1.58969099521155010221e-10, -2.50507602534068634195e-08, 2.75573137070700676789e-06,
                     -1.98412698298579493134e-04, 8.33333333332248946124e-03, -1.66666666666666324348e-01])
    return m.add(x, m.mul(m.mul(z, x), p))


def _kernel_cos(m, x):
    z = m.mul(x, x)
    r = m.mul(z, m.horner(z, [-1.13596475577881948265e-11, 2.08757232129817482790e-09, -2.75573143513906633035e-07,
                              2.48015872894767294178e-05, -1.38888888888741095749e-03, 4.16666666666666019037e-02]))
    hz = m.mul(z, m.c(0.5))
    w = m.sub(m.c(1.0), hz)
    return m.add(w, m.add(m.sub(m.sub(m.c(1.0), w), hz), m.mul(z, r)))


def _trig(kind: str):
    def fn(m: _Math, x):
        narrow = m.ty == F32
        w = _Math(m.b, F64) if narrow else m
        xd = m.b.fpext(x, F64) if narrow else x
        b = w.b
        finite = w.lt(w.abs(xd), w.c(math.inf))
        xs = w.sel(finite, xd, w.c(0.0))
        q, r = _reduce_pio2(w, xs, narrow)
        s, c = _kernel_sin(w, r), _kernel_cos(w, r)
        odd = b.trunc(q, I1)
        swap_sign = b.icmp_unsigned(">=", q, ir.Constant(I64, 2))
        if kind == "sin":
            res = w.sel(odd, c, s)
            res = w.sel(swap_sign, b.fneg(res), res)
        elif kind == "cos":
            res = w.sel(odd, s, c)
            flip = b.xor(swap_sign, odd)
            res = w.sel(flip, b.fneg(res), res)
        else:
            res = w.sel(odd, b.fneg(w.div(c, s)), w.div(s, c))
        if kind != "cos":
            res = w.sel(w.lt(w.abs(xd), w.c(2.0**-27)), xd, res)  # x itself (keeps -0.0)
        res = w.sel(finite, res, w.c(math.nan))
        res = w.sel(w.isnan(xd), xd, res)
        return m.b.fptrunc(res, F32) if narrow else res

    fn.__name__ = f"_{kind}"
    return fn


# --- inverse trigonometric functions (fdlibm) -----------------------------------

_PIO4_HI = 7.85398163397448278999e-01


def _asin_r(m, z):
    p = m.mul(z, m.horner(z, [3.47933107596021167570e-05, 7.91534994289814532176e-04, -4.00555345006794114027e-02,
                              2.01212532134862925881e-01, -3.25565818622400915405e-01, 1.66666666666666657415e-01]))
    q = m.horner(z, [7.70381505559019352791e-02, -6.88283971605453293030e-01, 2.02094576023350569471e+00,
                     -2.40339491173441421878e+00, 1.0])
    return m.div(p, q)


def _high_word(m, s):
    """s with its low 32 bits cleared."""
    return m.from_bits(m.b.and_(m.bits(s), m.ic(-(1 << 32))))


def _asin(m, x):
    ax = m.abs(x)
    small = m.add(x, m.mul(x, _asin_r(m, m.mul(x, x))))
    z = m.mul(m.sub(m.c(1.0), ax), m.c(0.5))
    s = call_unary(m.b, "sqrt", z)
    r = _asin_r(m, z)
    near_one = m.sub(m.c(_PIO2_HI), m.sub(m.mul(m.c(2.0), m.add(s, m.mul(s, r))), m.c(_PIO2_LO)))
    w = _high_word(m, s)
    c = m.div(m.sub(z, m.mul(w, w)), m.add(s, w))
    p = m.sub(m.mul(m.mul(m.c(2.0), s), r), m.sub(m.c(_PIO2_LO), m.mul(m.c(2.0), c)))
    q = m.sub(m.c(_PIO4_HI), m.mul(m.c(2.0), w))
    middle = m.sub(m.c(_PIO4_HI), m.sub(p, q))
    big = m.sel(_ge(m, ax, m.c(0.975)), near_one, middle)
    res = m.sel(m.lt(ax, m.c(0.5)), small, m.copysign(big, x))
    res = m.sel(m.gt(ax, m.c(1.0)), m.c(math.nan), res)
    return m.sel(m.isnan(x), x, res)


def _acos(m, x):
    ax = m.abs(x)
    small = m.sub(m.c(_PIO2_HI), m.sub(x, m.sub(m.c(_PIO2_LO), m.mul(x, _asin_r(m, m.mul(x, x))))))
    z = m.mul(m.sub(m.c(1.0), ax), m.c(0.5))
    s = call_unary(m.b, "sqrt", z)
    r = _asin_r(m, z)
    w = m.sub(m.mul(r, s), m.c(_PIO2_LO))
    negative = m.sub(m.c(math.pi), m.mul(m.c(2.0), m.add(s, w)))
    df = _high_word(m, s)
    c = m.div(m.sub(z, m.mul(df, df)), m.add(s, df))
    positive = m.mul(m.c(2.0), m.add(df, m.add(m.mul(r, s), c)))
    res = m.sel(m.lt(ax, m.c(0.5)), small, m.sel(m.lt(x, m.c(0.0)), negative, positive))
    res = m.sel(m.eq(x, m.c(1.0)), m.c(0.0), res)
    res = m.sel(m.gt(ax, m.c(1.0)), m.c(math.nan), res)
    return m.sel(m.isnan(x), x, res)


_ATAN_HI = [4.63647609000806093515e-01, 7.85398163397448278999e-01, 9.82793723247329054082e-01, 1.57079632679489655800e+00]
_ATAN_LO = [2.26987774529616870924e-17, 3.06161699786838301793e-17, 1.39033110312309984516e-17, 6.12323399573676603587e-17]
_AT = [3.33333333333329318027e-01, -1.99999999998764832476e-01, 1.42857142725034663711e-01, -1.11111104054623557880e-01,
       9.09088713343650656196e-02, -7.69187620504482999495e-02, 6.66107313738753120669e-02, -5.83357013379057348645e-02,
       4.97687799461593236017e-02, -3.65315727442169155270e-02, 1.62858201153657823623e-02]


def _atan(m, x):
    """fdlibm's atan: reduction to |t| < 7/16 around atan(0.5), atan(1), atan(1.5), atan(inf)."""
    ax = m.abs(x)
    one = m.c(1.0)
    t0 = m.div(m.sub(m.mul(m.c(2.0), ax), one), m.add(m.c(2.0), ax))
    t1 = m.div(m.sub(ax, one), m.add(ax, one))
    t2 = m.div(m.sub(ax, m.c(1.5)), m.add(one, m.mul(m.c(1.5), ax)))
    t3 = m.div(m.c(-1.0), m.sel(m.eq(ax, m.c(0.0)), one, ax))
    bands = [m.lt(ax, m.c(11.0 / 16)), m.lt(ax, m.c(19.0 / 16)), m.lt(ax, m.c(39.0 / 16))]
    tiny_band = m.lt(ax, m.c(7.0 / 16))
    t = m.sel(tiny_band, ax, m.sel(bands[0], t0, m.sel(bands[1], t1, m.sel(bands[2], t2, t3))))
    hi = m.sel(bands[0], m.c(_ATAN_HI[0]), m.sel(bands[1], m.c(_ATAN_HI[1]), m.sel(bands[2], m.c(_ATAN_HI[2]), m.c(_ATAN_HI[3]))))
    lo = m.sel(bands[0], m.c(_ATAN_LO[0]), m.sel(bands[1], m.c(_ATAN_LO[1]), m.sel(bands[2], m.c(_ATAN_LO[2]), m.c(_ATAN_LO[3]))))
    z = m.mul(t, t)
    w = m.mul(z, z)
    s1 = m.mul(z, m.horner(w, _AT[10::-2]))
    s2 = m.mul(w, m.horner(w, _AT[9::-2]))
    poly = m.mul(t, m.add(s1, s2))
    reduced = m.sub(hi, m.sub(m.sub(poly, lo), t))
    direct = m.sub(ax, m.mul(ax, m.add(s1, s2)))
    res = m.sel(tiny_band, direct, reduced)
    res = m.sel(m.lt(ax, m.c(2.0**-27)), ax, res)
    res = m.sel(m.gt(ax, m.c(2.0**66)), m.c(_PIO2_HI), res)
    res = m.copysign(res, x)
    return m.sel(m.isnan(x), x, res)


def _atan2(m, y, x):
    b = m.b
    ax, ay = m.abs(x), m.abs(y)
    ratio = m.div(ay, ax)
    a = _atan(m, ratio)
    a = m.sel(m.gt(ratio, m.c(2.0**66)), m.c(_PIO2_HI), a)
    both_inf = b.and_(m.eq(ax, m.c(math.inf)), m.eq(ay, m.c(math.inf)))
    a = m.sel(both_inf, m.c(math.pi / 4), a)
    a = m.sel(b.and_(m.eq(ax, m.c(0.0)), m.eq(ay, m.c(0.0))), m.c(0.0), a)
    x_negative = b.icmp_signed("<", m.bits(x), m.ic(0))  # -0.0 counts as negative, as in C's atan2
    a = m.sel(x_negative, m.sub(m.c(math.pi), m.sub(a, m.c(1.2246467991473532e-16))), a)
    res = m.copysign(a, y)
    return m.sel(b.or_(m.isnan(x), m.isnan(y)), m.add(x, y), res)


# --- hyperbolic functions --------------------------------------------------------

def _sinh(m, x):
    ax = m.abs(x)
    em = _expm1(m, ax)
    small = m.mul(m.c(0.5), m.add(em, m.div(em, m.add(em, m.c(1.0)))))
    half = _exp(m, m.mul(ax, m.c(0.5)))
    large = m.mul(m.mul(half, m.c(0.5)), half)
    res = m.sel(m.lt(ax, m.c(22.0)), small, large)
    return m.sel(m.isnan(x), x, m.copysign(res, x))


def _cosh(m, x):
    ax = m.abs(x)
    e = _exp(m, ax)
    mid = m.add(m.mul(m.c(0.5), e), m.div(m.c(0.5), e))
    em = _expm1(m, ax)
    small = m.add(m.c(1.0), m.div(m.mul(em, em), m.mul(m.c(2.0), m.add(m.c(1.0), em))))
    half = _exp(m, m.mul(ax, m.c(0.5)))
    large = m.mul(m.mul(half, m.c(0.5)), half)
    res = m.sel(m.lt(ax, m.c(0.5 * math.log(2.0))), small, m.sel(m.lt(ax, m.c(22.0)), mid, large))
    return m.sel(m.isnan(x), x, res)


def _asinh(m, x):
    ax = m.abs(x)
    one = m.c(1.0)
    x2 = m.mul(ax, ax)
    root = call_unary(m.b, "sqrt", m.add(x2, one))
    big = m.add(_log(m, ax), m.c(math.log(2.0)))
    medium = _log(m, m.add(m.mul(m.c(2.0), ax), m.div(one, m.add(root, ax))))
    small = _log1p(m, m.add(ax, m.div(x2, m.add(one, root))))
    res = m.sel(m.gt(ax, m.c(2.0**28)), big, m.sel(m.gt(ax, m.c(2.0)), medium, small))
    res = m.sel(m.lt(ax, m.c(2.0**-28)), ax, res)
    return m.sel(m.isnan(x), x, m.copysign(res, x))


def _acosh(m, x):
    one = m.c(1.0)
    big = m.add(_log(m, x), m.c(math.log(2.0)))
    root = call_unary(m.b, "sqrt", m.sub(m.mul(x, x), one))
    medium = _log(m, m.sub(m.mul(m.c(2.0), x), m.div(one, m.add(x, root))))
    t = m.sub(x, one)
    small = _log1p(m, m.add(t, call_unary(m.b, "sqrt", m.add(m.mul(m.c(2.0), t), m.mul(t, t)))))
    res = m.sel(m.gt(x, m.c(2.0**28)), big, m.sel(m.gt(x, m.c(2.0)), medium, small))
    res = m.sel(m.lt(x, one), m.c(math.nan), res)
    return m.sel(m.isnan(x), x, res)


def _atanh(m, x):
    ax = m.abs(x)
    one = m.c(1.0)
    two_x = m.mul(m.c(2.0), ax)
    small = m.mul(m.c(0.5), _log1p(m, m.add(two_x, m.div(m.mul(two_x, ax), m.sub(one, ax)))))
    large = m.mul(m.c(0.5), _log1p(m, m.div(two_x, m.sub(one, ax))))
    res = m.sel(m.lt(ax, m.c(0.5)), small, large)
    res = m.sel(m.eq(ax, one), m.c(math.inf), res)
    res = m.sel(m.gt(ax, one), m.c(math.nan), m.copysign(res, x))
    return m.sel(m.isnan(x), x, res)


# --- erf ------------------------------------------------------------------------

def _erf(m, x):
    ax = m.abs(x)
    z = m.mul(x, x)
    # |x| < 1: 2/sqrt(pi) * sum (-1)^k x^(2k+1) / (k! (2k+1))
    series = [(-1) ** k / (math.factorial(k) * (2 * k + 1)) * 2.0 / math.sqrt(math.pi) for k in range(22)]
    small = m.mul(x, m.horner(z, series[::-1]))
    e = _exp(m, m.b.fneg(m.mul(ax, ax)))
    res = small
    for lo, hi, center, coeffs in _ERFCX_PIECES:
        erfc = m.mul(e, m.horner(m.sub(ax, m.c(center)), coeffs[::-1]))
        piece = m.copysign(m.sub(m.c(1.0), erfc), x)
        res = m.sel(_ge(m, ax, m.c(lo)), piece, res)
    res = m.sel(_ge(m, ax, m.c(6.0)), m.copysign(m.c(1.0), x), res)
    return m.sel(m.isnan(x), x, res)


# --- erfc -----------------------------------------------------------------------

# erfc(x)*exp(x*x) on [0.5, 1) as a polynomial in (x - 0.75) (Chebyshev interpolation, degree 18).
_ERFCX_HALF = (0.5, 1.0, 0.75, [
    0.5069376502931449, -0.3679726916557954, 0.2309581315512983, -0.1298360619948811, 0.06679054252756873,
    -0.03189726203968182, 0.014289198665935787, -0.00605153229720817, 0.0024376373607572304, -0.0009385120615031827,
    0.00034675066293774186, -0.00012335437420404118, 4.237247992925646e-05, -1.408849138567237e-05,
    4.543740821765102e-06, -1.423686828628303e-06, 4.343469484174286e-07, -1.324052006431111e-07,
    3.8393609740220065e-08,
])
# x*erfc(x)*exp(x*x) for x >= 6 as a polynomial in (u - 1/72), u = 1/x**2 in (0, 1/36] (Chebyshev, degree 11).
_ERFCX_TAIL_CENTER = 1.0 / 72.0
_ERFCX_TAIL = [
    0.5603505205560211, -0.27091619086158103, 0.3829492501570547, -0.8800565750205942, 2.7643699908538766,
    -10.908398293485666, 51.443889462740714, -280.5529411430269, 1727.7199994054793, -11817.455887201642,
    92396.71864023099, -755374.7157046796,
]


def _erfc_core(m, x, exact_square: bool):
    """erfc over f64. |x| < 0.5: 1 - erf(x) by the series; 0.5 <= |x| < 6: exp(-x*x) times a piece of erfcx;
    |x| >= 6: exp(-x*x) * g(1/x**2) / x. exp(-x*x) is exp(-h*h) * exp(-l*(x+h)) with h = x's top 26 bits
    (h*h exact) and l = x - h when exact_square, so that the rounding of x*x (up to 28**2 * 2**-53) does not reach the
    result; f32 results do not need that. Negative x: 2 - erfc(-x)."""
    ax = m.abs(x)
    z = m.mul(ax, ax)
    series = [(-1) ** k / (math.factorial(k) * (2 * k + 1)) * 2.0 / math.sqrt(math.pi) for k in range(22)]
    small = m.sub(m.c(1.0), m.mul(ax, m.horner(z, series[::-1])))
    if exact_square:
        high = m.from_bits(m.b.and_(m.bits(ax), m.ic(-(1 << 27))))
        low = m.sub(ax, high)
        e_big = _exp(m, m.b.fneg(m.mul(high, high)))
        lo = m.b.fneg(m.mul(low, m.add(ax, high)))  # |lo| < 2**-25 * 28**2: exp(lo) - 1 by its series
        expm1_lo = m.mul(lo, m.add(m.c(1.0), m.mul(lo, m.add(m.c(0.5), m.mul(lo, m.c(1.0 / 6.0))))))
    else:
        e_big, expm1_lo = _exp(m, m.b.fneg(z)), None
    u = m.div(m.c(1.0), z)
    tail = m.div(m.horner(m.sub(u, m.c(_ERFCX_TAIL_CENTER)), _ERFCX_TAIL[::-1]), ax)
    scaled = tail
    for lo, hi, center, coeffs in reversed([_ERFCX_HALF] + _ERFCX_PIECES):
        piece = m.horner(m.sub(ax, m.c(center)), coeffs[::-1])
        scaled = m.sel(m.lt(ax, m.c(hi)), piece, scaled)
    res = m.mul(e_big, scaled if expm1_lo is None else m.add(scaled, m.mul(scaled, expm1_lo)))
    res = m.sel(m.lt(ax, m.c(0.5)), small, res)
    res = m.sel(_ge(m, ax, m.c(28.0)), m.c(0.0), res)  # erfc(28) < 1e-341: zero in f64 (and beyond: inf, huge)
    res = m.sel(m.lt(x, m.c(0.0)), m.sub(m.c(2.0), res), res)
    return m.sel(m.isnan(x), x, res)


def _erfc(m, x):
    if m.ty == F32:
        wide = _Math(m.b, F64)
        return m.b.fptrunc(_erfc_core(wide, m.b.fpext(x, F64), exact_square=False), F32)
    return _erfc_core(m, x, exact_square=True)


# --- rounding, remainder, rsqrt --------------------------------------------------

def _rint(m, x):
    """Round half to even (numpy.rint, numpy.round), by adding and removing 2**mantissa."""
    big = m.c(2.0**m.mant_bits)
    ax = m.abs(x)
    r = m.copysign(m.sub(m.add(ax, big), big), x)
    return m.sel(m.lt(ax, big), r, x)


def _floor(m, x):
    r = _rint(m, x)
    return m.copysign(m.sel(m.gt(r, x), m.sub(r, m.c(1.0)), r), x)


def _ceil(m, x):
    r = _rint(m, x)
    return m.copysign(m.sel(m.lt(r, x), m.add(r, m.c(1.0)), r), x)


def _trunc(m, x):
    r = _rint(m, x)
    return m.copysign(m.sel(m.gt(m.abs(r), m.abs(x)), m.sub(m.abs(r), m.c(1.0)), m.abs(r)), x)


def _rsqrt(m, x):
    return m.div(m.c(1.0), call_unary(m.b, "sqrt", x))


def _exponent(m, x):
    """floor(log2(x)) as an integer for finite x > 0 (subnormals included)."""
    b = m.b
    small = m.lt(x, m.c(2.0 ** (1 - m.bias)))
    xs = m.sel(small, m.mul(x, m.c(2.0**64)), x)
    e = b.sub(b.lshr(m.bits(xs), m.ic(m.mant_bits)), m.ic(m.bias))
    return b.sub(e, b.select(small, m.ic(64), m.ic(0)))


def _two_product_error(m, a, b_, p):
    """a*b - p exactly (Dekker), for p = fl(a*b) without overflow; splits by masking bits."""
    mask = m.ic(-(1 << 27))
    ah = m.from_bits(m.b.and_(m.bits(a), mask))
    al = m.sub(a, ah)
    bh = m.from_bits(m.b.and_(m.bits(b_), mask))
    bl = m.sub(b_, bh)
    return m.add(m.add(m.add(m.sub(m.mul(ah, bh), p), m.mul(ah, bl)), m.mul(al, bh)), m.mul(al, bl))


def _fmod(m, x, y):
    """C fmod: x - trunc(x/y)*y, exact. Reduces |x| by |y| * 2**s in rounds of at most
    `step` quotient bits, each exact: f64 uses Dekker's exact product, f32 runs in f64."""
    b = m.b
    narrow = m.ty == F32
    w = _Math(b, F64) if narrow else m
    ax = w.abs(b.fpext(x, F64) if narrow else x)
    ay = w.abs(b.fpext(y, F64) if narrow else y)
    finite = b.and_(w.lt(ax, w.c(math.inf)), b.and_(w.gt(ay, w.c(0.0)), b.not_(w.isnan(ay))))
    ax_s = w.sel(finite, ax, w.c(0.0))
    ay_s = w.sel(finite, ay, w.c(1.0))
    step = 28 if narrow else 50
    span = (128 + 149) if narrow else (1024 + 1074)
    rounds = (span + step - 1) // step + 1
    diff = b.sub(_exponent(w, w.sel(w.gt(ax_s, w.c(0.0)), ax_s, w.c(1.0))), _exponent(w, ay_s))
    r = ax_s
    for i in range(1, rounds + 1):
        s = b.sub(diff, w.ic(step * i))
        s = b.select(b.icmp_signed("<", s, w.ic(0)), w.ic(0), s)
        s1 = b.select(b.icmp_signed(">", s, w.ic(1000)), w.ic(1000), s)
        s2 = b.sub(s, s1)
        s2b = b.select(b.icmp_signed(">", s2, w.ic(1000)), w.ic(1000), s2)
        yk = w.mul(w.mul(w.mul(ay_s, w.pow2i(s1)), w.pow2i(s2b)), w.pow2i(b.sub(s2, s2b)))
        q = _trunc(w, w.div(r, yk))
        p = w.mul(q, yk)
        if narrow:
            r = w.sub(r, p)  # q*yk is exact: 24-bit yk times q < 2**29
        else:
            big = w.gt(r, w.c(2.0**900))
            scale = w.sel(big, w.c(2.0**-200), w.c(1.0))
            ys, rs = w.mul(yk, scale), w.mul(r, scale)
            ps = w.mul(q, ys)
            err = _two_product_error(w, q, ys, ps)
            r = w.mul(w.sub(w.sub(rs, ps), err), w.sel(big, w.c(2.0**200), w.c(1.0)))
        r = w.sel(w.lt(r, w.c(0.0)), w.add(r, yk), r)
        r = w.sel(_ge(w, r, yk), w.sub(r, yk), r)
    res = b.fptrunc(r, F32) if narrow else r
    res = m.copysign(res, x)
    res = m.sel(finite, res, m.c(math.nan))
    # |x| finite, y = ±inf: x itself
    return m.sel(b.and_(m.lt(m.abs(x), m.c(math.inf)), m.eq(m.abs(y), m.c(math.inf))), x, res)


_IMPLS.update({
    "exp2": (1, _widened(_exp2)),
    "expm1": (1, _widened(_expm1)),
    "log1p": (1, _log1p_any),
    "log2": (1, _widened(_log2)),
    "log10": (1, _widened(_log10)),
    "sin": (1, _trig("sin")),
    "cos": (1, _trig("cos")),
    "tan": (1, _trig("tan")),
    "asin": (1, _widened(_asin)),
    "acos": (1, _widened(_acos)),
    "atan": (1, _widened(_atan)),
    "atan2": (2, _widened(_atan2)),
    "sinh": (1, _widened(_sinh)),
    "cosh": (1, _widened(_cosh)),
    "asinh": (1, _widened(_asinh)),
    "acosh": (1, _widened(_acosh)),
    "atanh": (1, _widened(_atanh)),
    "erf": (1, _widened(_erf)),
    "erfc": (1, _erfc),
    "rsqrt": (1, _widened(_rsqrt)),
    "floor": (1, _floor),
    "ceil": (1, _ceil),
    "trunc": (1, _trunc),
    "round": (1, _rint),
    "fmod": (2, _fmod),
    "gelu_exp": (1, _gelu_exp),
})


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
