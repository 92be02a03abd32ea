"""kiln.numpy, kiln.lax and kiln.nn inside exported Programs run by the standalone kiln-run,
against numpy (issue 3: every function family through the full path, for every dtype).

Each Program is exported once (module-scoped fixture) and each of its public functions is
called once by kiln-run with .npy inputs and outputs. The functions take and return
float64, float32, float16, bfloat16, int8, uint8, int32, int64 and bool arrays, 0-d
scalars, size-1 and empty arrays. kiln-run reads and writes bfloat16 as '<u2' (the raw
bits; numpy has no bfloat16), so bfloat16 arguments are saved as uint16 views and
bfloat16 results are loaded back as uint16 and viewed as ml_dtypes.bfloat16.

float16 and bfloat16 are storage types: their reference is computed in float32 from the
same inputs and rounded once (`widened`). Tolerances are per result dtype (TOL); integer
and bool results must match exactly.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import kiln.lax as lax
import kiln.nn as nn
import kiln.numpy as knp
from kiln import Program
from kiln_tools import run_kiln_run

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
STORAGE = (F16, BF16)
# (rtol, atol) per result dtype: the loosest family of tests/test_differential.py's TOLERANCES
# (matmul and transcendental functions), one ulp for the storage types
TOL = {F64: (1e-12, 1e-12), F32: (2e-5, 2e-5), F16: (2.0 ** -10, 1e-5), BF16: (2.0 ** -7, 1e-5)}

RNG = np.random.default_rng(2024)


def uniform(lo, hi, shape, dtype=np.float32):
    return RNG.uniform(lo, hi, shape).astype(np.float32 if dtype in STORAGE else dtype).astype(dtype)


def ints(lo, hi, shape, dtype):
    return RNG.integers(lo, hi, shape, endpoint=True).astype(dtype)


def widened(fn):
    """fn computed in float32 from float16/bfloat16 operands, float results rounded back to the
    operands' storage type (the reference for a storage type)."""
    def run(*args):
        store = next(a.dtype for a in args if isinstance(a, np.ndarray) and a.dtype in STORAGE)
        up = [a.astype(F32) if isinstance(a, np.ndarray) and a.dtype in STORAGE else a for a in args]
        return tuple(np.asarray(r).astype(store) if np.asarray(r).dtype.kind == "f" else r for r in fn(*up))
    return run


# ------------------------------------------------------------------------------------------- running

def call(path, tmp, fn, args, n_out):
    """Runs `fn` of the module at `path` with kiln-run: arguments and results through .npy files
    (bfloat16 arguments as their uint16 bits, '<u2')."""
    ins = []
    for j, a in enumerate(args):
        a = np.asarray(a)
        f = tmp / f"{fn}_in{j}.npy"
        np.save(f, a.view(np.uint16) if a.dtype == BF16 else a)
        ins.append(f"--input=@{f}")
    outs = [tmp / f"{fn}_out{j}.npy" for j in range(n_out)]
    run_kiln_run(f"--module={path}", f"--function={fn}", *ins, *[f"--output=@{o}" for o in outs])
    return [np.load(o) for o in outs]


def check(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} results, numpy {len(want)}"
    for n, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        label = f"{what} result {n}"
        if w.dtype == BF16:
            assert g.dtype in (np.uint16, np.dtype("V2")), f"{label}: bfloat16 comes back as 2-byte bits, got {g.dtype}"
            g = g.view(BF16)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{label}: {g.dtype}{g.shape}, numpy {w.dtype}{w.shape}"
        if w.dtype in TOL:
            rtol, atol = TOL[w.dtype]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=label)
        else:
            np.testing.assert_array_equal(g, w, err_msg=label)


def exported(program, tmp_path_factory, name):
    path = tmp_path_factory.mktemp(name) / f"{name}.vmfb"
    Program.get_compiled_artifact(program).save(path)
    return path, path.parent


# ------------------------------------------------------------------------------------------- elementwise

X32, P32, U32 = uniform(-3, 3, (2, 3)), uniform(0.1, 3, (2, 3)), uniform(-0.9, 0.9, (2, 3))
X64, P64, U64 = uniform(-3, 3, (3,), F64), uniform(0.1, 3, (3,), F64), uniform(-0.9, 0.9, (3,), F64)
Y64 = uniform(-3, 3, (2, 3), F64)
H, BH = uniform(-3, 3, (2, 3), F16), uniform(-3, 3, (2, 3), BF16)
I8, J8 = ints(-100, 100, (2, 3), np.int8), ints(1, 9, (2, 3), np.int8)
U8, V8 = ints(0, 255, (2, 3), np.uint8), ints(1, 9, (2, 3), np.uint8)
I32, J32 = ints(-1000, 1000, (2, 3), np.int32), ints(-9, 9, (2, 3), np.int32)
J32[J32 == 0] = 3
I64, J64 = ints(-2 ** 40, 2 ** 40, (2, 3), np.int64), ints(1, 9, (2, 3), np.int64)
B, C = RNG.random((2, 3)) > 0.5, RNG.random((2, 3)) > 0.5


def float_ops(M, x, p, u):
    """Every float elementwise function of the issue; x any, p positive, u in (-1, 1)."""
    return (M.exp(x), M.exp2(x), M.expm1(x), M.log(p), M.log1p(p), M.log2(p), M.log10(p), M.sqrt(p), M.square(x),
            M.reciprocal(p), M.sin(x), M.cos(x), M.tan(u), M.arcsin(u), M.arccos(u), M.arctan(x), M.arctan2(x, p),
            M.sinh(x), M.cosh(x), M.tanh(x), M.arcsinh(x), M.arccosh(p + 1), M.arctanh(u), M.floor(x), M.ceil(x),
            M.round(x), M.trunc(x), M.rint(x), M.sign(x), M.abs(x), M.negative(x), M.add(x, p), M.subtract(x, p),
            M.multiply(x, u), M.divide(x, p), M.true_divide(u, p), M.floor_divide(x, p), M.remainder(x, p),
            M.power(p, u), M.maximum(x, u), M.minimum(x, u), M.fmax(x, u), M.fmin(x, u), M.clip(x, -1, 1),
            M.isnan(M.log(x)), M.isinf(M.log(x * 0)), M.isfinite(M.log(x)), M.nan_to_num(M.log(x)),
            M.where(x > 0, x, u), M.equal(x, x[::-1]), M.not_equal(x, u), M.less(x, u), M.less_equal(x, u),
            M.greater(x, u), M.greater_equal(x, u), M.logical_and(x > 0, u > 0), M.logical_or(x > 0, u > 0),
            M.logical_xor(x > 0, u > 0), M.logical_not(x > 0), x * 2, 1 - x, x / 4)


def int_ops(M, a, b):
    """Every integer elementwise function of the issue; b has no zeros."""
    return (a + b, a - b, a * b, M.floor_divide(a, b), M.remainder(a, b), a // 3, a % 7, M.negative(a), M.abs(a),
            M.sign(a), M.square(a), M.maximum(a, b), M.minimum(a, b), M.bitwise_and(a, b), M.bitwise_or(a, b),
            M.bitwise_xor(a, b), M.bitwise_not(a), M.invert(a), M.left_shift(a, 2), M.right_shift(a, 1), a << b % 4,
            a >> 1, a & 0x0F, a == b, a != b, a < b, a <= b, a > b, a >= b, M.where(a > b, a, b), M.clip(a, 1, 50),
            M.true_divide(a, b), a + 1, a * 3)


def bool_ops(M, p, q):
    return (M.logical_and(p, q), M.logical_or(p, q), M.logical_xor(p, q), M.logical_not(p), p & q, p | q, p ^ q, ~p,
            p == q, p != q, p < q, p >= q, M.where(p, q, p), M.maximum(p, q), p + q, p * q)


def storage_ops(h, b, x):
    """float16 (h) and bfloat16 (b) arguments and results; x is float32."""
    return (x.astype(F16), knp.astype(x, BF16), knp.astype(h, F32), b.astype(F32), knp.astype(h, BF16),
            knp.exp(h), knp.tanh(h), knp.sqrt(knp.abs(h)), h * 2 + h, h / 4, knp.maximum(h, -1), knp.sin(b),
            knp.exp(b), knp.log1p(knp.abs(b)), b * 2.5, b + b, b - 1, knp.floor(b), h > 0, b <= 0)


def storage_reference(h, b, x):
    """Casts exactly; the math computed in float32 and rounded to the storage type."""
    return (x.astype(F16), x.astype(BF16), h.astype(F32), b.astype(F32), h.astype(BF16)) + \
        widened(lambda h32: (np.exp(h32), np.tanh(h32), np.sqrt(np.abs(h32)), h32 * 2 + h32, h32 / 4,
                             np.maximum(h32, -1)))(h) + \
        widened(lambda b32: (np.sin(b32), np.exp(b32), np.log1p(np.abs(b32)), b32 * 2.5, b32 + b32, b32 - 1,
                             np.floor(b32)))(b) + (h > 0, b.astype(F32) <= 0)


def promotion_ops(M, i8, u8, i32, i64, h, f32, f64, b, bh):
    """Mixed-dtype arrays (numpy's promotion) and weak Python scalars (JAX's)."""
    return (i8 + u8, i8 * i32, u8 + i64, i32 + f32, i64 * f32, h + f32, h + i8, u8 * h, b + i8, b * f64, f32 + f64,
            M.maximum(i8, h), M.where(b, i32, i64), i8 + 1, u8 - 1, h * 2, f32 + 1, i64 // 2)


def promotion_reference(i8, u8, i32, i64, h, f32, f64, b, bh):
    """numpy's promotion; where kiln follows JAX instead (a weak scalar of a higher category gives int32 or
    float32; bfloat16 with int32 or float16, which numpy cannot promote), that rule, written out."""
    with np.errstate(all="ignore"):
        w = promotion_ops(np, i8, u8, i32, i64, h, f32, f64, b, bh)
    weak = ((b + 1).astype(np.int32), i32.astype(F32) * np.float32(2.5), (bh.astype(F32) + i32).astype(BF16),
            bh.astype(F32) + h.astype(F32), (bh.astype(F32) * 3).astype(BF16))
    return w + weak


class Elementwise(Program, export_name="np_elementwise"):
    def floats(self, x=Program.like(X32), p=Program.like(P32), u=Program.like(U32), x64=Program.like(X64),
               p64=Program.like(P64), u64=Program.like(U64)):
        return float_ops(knp, x, p, u) + float_ops(knp, x64, p64, u64) + (
            lax.erf(x), lax.rsqrt(p), lax.integer_pow(x, 3), lax.integer_pow(p64, -2), lax.clamp(np.float32(-1), x, u),
            lax.erf(x64))

    def integers(self, a8=Program.like(I8), b8=Program.like(J8), au=Program.like(U8), bu=Program.like(V8),
                 a32=Program.like(I32), b32=Program.like(J32), a64=Program.like(I64), b64=Program.like(J64),
                 p=Program.like(B), q=Program.like(C)):
        return int_ops(knp, a8, b8) + int_ops(knp, au, bu) + int_ops(knp, a32, b32) + int_ops(knp, a64, b64) + \
            bool_ops(knp, p, q) + (lax.integer_pow(a8, 3), lax.clamp(np.int32(-5), a32, np.int32(5)))

    def storage(self, h=Program.like(H), b=Program.like(BH), x=Program.like(X32)):
        return storage_ops(h, b, x)

    def promotion(self, i8=Program.like(I8), u8=Program.like(U8), i32=Program.like(I32), i64=Program.like(I64),
                  h=Program.like(H), f32=Program.like(X32), f64=Program.like(Y64),
                  b=Program.like(B), bh=Program.like(BH)):
        return promotion_ops(knp, i8, u8, i32, i64, h, f32, f64, b, bh) + (
            b + 1, i32 * 2.5, bh + i32, bh + h, bh * 3)


@pytest.fixture(scope="module")
def elementwise(tmp_path_factory):
    return exported(Elementwise, tmp_path_factory, "np_elementwise")


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


def test_elementwise_floats(elementwise):
    path, tmp = elementwise
    with np.errstate(all="ignore"):
        want = float_ops(np, X32, P32, U32) + float_ops(np, X64, P64, U64) + (
            _erf(X32), (1 / np.sqrt(P32.astype(F64))).astype(F32), X32 ** 3, P64 ** -2.0,
            np.minimum(np.maximum(X32, -1), U32), _erf(X64))
    check(call(path, tmp, "floats", [X32, P32, U32, X64, P64, U64], len(want)), want, "floats")


def test_elementwise_integers_and_bools(elementwise):
    path, tmp = elementwise
    args = [I8, J8, U8, V8, I32, J32, I64, J64, B, C]
    with np.errstate(all="ignore"):
        want = int_ops(np, I8, J8) + int_ops(np, U8, V8) + int_ops(np, I32, J32) + int_ops(np, I64, J64) + \
            bool_ops(np, B, C) + (I8 ** 3, np.clip(I32, -5, 5))
    check(call(path, tmp, "integers", args, len(want)), want, "integers")


def test_elementwise_float16_bfloat16(elementwise):
    path, tmp = elementwise
    want = storage_reference(H, BH, X32)
    check(call(path, tmp, "storage", [H, BH, X32], len(want)), want, "storage")


def test_mixed_dtype_promotion_and_weak_scalars(elementwise):
    path, tmp = elementwise
    args = [I8, U8, I32, I64, H, X32, Y64, B, BH]
    want = promotion_reference(*args)
    check(call(path, tmp, "promotion", args, len(want)), want, "promotion")


# ------------------------------------------------------------------------------------------- reductions

R32, R64 = uniform(-2, 2, (2, 3, 4)), uniform(-2, 2, (2, 3, 4), F64)
RI32, RU8 = ints(-5, 5, (2, 3, 4), np.int32), ints(0, 9, (2, 3, 4), np.uint8)
RB, RH = RNG.random((2, 3, 4)) > 0.3, uniform(-2, 2, (2, 3, 4), F16)
RBH = uniform(-2, 2, (2, 3, 4), BF16)
EMPTY = np.zeros((0, 3), np.float32)
S64, S32, ONE = np.float64(1.25), np.int32(7), np.full((1, 1), 0.5, np.float32)


def reductions(M, x):
    """The reductions of the issue over int and tuple axes, keepdims, and the scans. The scans are left out for
    float16 / bfloat16: kiln rounds each partial sum / product to the storage type there (reported)."""
    out = (M.sum(x), M.sum(x, axis=(0, 2)), M.prod(x, axis=1, keepdims=True), M.max(x, axis=-1), M.min(x, axis=(1, 2)),
           M.argmax(x, axis=1), M.argmin(x), M.all(x, axis=0), M.any(x, axis=(0, 1), keepdims=True))
    if x.dtype not in STORAGE:
        out += (M.cumsum(x, axis=2), M.cumprod(x, axis=0), M.cumsum(x))
    return out


def float_reductions(M, x):
    return (M.mean(x, axis=(0, 2)), M.var(x, axis=1), M.std(x, keepdims=True), M.mean(x))


def edge_ops(M, s64, s32, e, one):
    """0-d arguments and results, empty and size-1 arrays."""
    return (M.exp(s64), s32 * 2 + 1, s64 + e, M.sum(e, axis=0), M.sum(e), M.prod(e), M.max(e, axis=1), e.T,
            M.concatenate([e, e]), M.squeeze(one), M.mean(one), M.argmax(one), one + s64, M.reshape(e, (3, 0)),
            M.cumsum(e, axis=0), M.sort(e, axis=0), M.any(e), M.all(e), s32 < 3, M.sum(one, keepdims=True))


class Reductions(Program, export_name="np_reductions"):
    def run(self, x32=Program.like(R32), x64=Program.like(R64), i32=Program.like(RI32), u8=Program.like(RU8),
            b=Program.like(RB), h=Program.like(RH), bh=Program.like(RBH)):
        out = ()
        for x in (x32, x64, i32, u8, b, h, bh):
            out += reductions(knp, x)
        for x in (x32, x64, i32, h, bh):
            out += float_reductions(knp, x)
        return out

    def edges(self, s64=Program.like(S64), s32=Program.like(S32), e=Program.like(EMPTY), one=Program.like(ONE)):
        return edge_ops(knp, s64, s32, e, one)


@pytest.fixture(scope="module")
def reductions_module(tmp_path_factory):
    return exported(Reductions, tmp_path_factory, "np_reductions")


def test_reductions_every_dtype(reductions_module):
    path, tmp = reductions_module
    want = ()
    for x in (R32, R64, RI32, RU8, RB):
        want += reductions(np, x)
    for x in (RH, RBH):
        want += widened(lambda a: reductions(np, a)[:9])(x)
    for x in (R32, R64, RI32):
        want += float_reductions(np, x)
    for x in (RH, RBH):
        want += widened(lambda a: float_reductions(np, a))(x)
    check(call(path, tmp, "run", [R32, R64, RI32, RU8, RB, RH, RBH], len(want)), want, "reductions")


def test_scalars_and_empty_arrays(reductions_module):
    path, tmp = reductions_module
    with np.errstate(all="ignore"):
        want = tuple(np.asarray(w) for w in edge_ops(np, S64, S32, EMPTY, ONE))
    got = call(path, tmp, "edges", [S64, S32, EMPTY, ONE], len(want))
    check(got, want, "edges")
    assert got[0].shape == () and got[1].shape == () and got[3].shape == (3,) and got[6].shape == (0,)


# ------------------------------------------------------------------------------------------- linear algebra and shapes

LA, LB, LV = uniform(-1, 1, (4, 2, 3)), uniform(-1, 1, (4, 3, 5)), uniform(-1, 1, (3,))
LA64, LI = uniform(-1, 1, (2, 3), F64), ints(-5, 5, (3, 3), np.int32)
LH = uniform(-1, 1, (3, 3), F16)
SX8 = ints(-100, 100, (2, 3, 4), np.int8)
SB = RNG.random((2, 3, 4)) > 0.5
SH = uniform(-2, 2, (2, 3, 4), F16)


def linalg(M, a, b, v, a64, i, h):
    return (a @ b, M.matmul(a[0], v), M.dot(a[0], b[0]), M.vdot(v, v), M.inner(a[0], a[1]), M.outer(v, v),
            M.tensordot(a, b, axes=([0, 2], [0, 1])), M.tensordot(a[0], b[0], axes=1), M.einsum("bij,bjk->bik", a, b),
            M.einsum("bij->j", a), M.einsum("ij,ij->i", a[0], a[1]), M.einsum("bqd,bkd->bqk", a, a), M.trace(b[0]),
            M.trace(b[0], 1), M.diag(v), M.diag(b[0], 1), a64 @ a64.T, M.dot(a64[0], a64[1]), M.outer(a64[0], a64[1]),
            i @ i, M.dot(i, i[0]), M.trace(i), M.diag(i, -1), M.vdot(i, i), M.outer(i[0], i[1]),
            M.tensordot(i, i, axes=2))


def linalg_f16(M, h):
    return (h @ h, M.dot(h[0], h[1]), M.trace(h), M.diag(h), M.einsum("ij,jk->ik", h, h.T))


def shape_ops(M, x):
    """Every shape function of the issue, on one (2, 3, 4) array."""
    return (M.reshape(x, (-1, 4)), M.ravel(x), x.T, M.transpose(x, (1, 0, 2)), M.swapaxes(x, 0, 2),
            M.moveaxis(x, 0, -1), M.expand_dims(x, 1), M.squeeze(x[:1]), M.broadcast_to(x[:, :1], (2, 5, 4)),
            M.concatenate([x, x], axis=2), M.stack([x, x], axis=1), M.hstack([x, x]), M.vstack([x, x]),
            *M.split(x, 2, axis=2), M.split(x, [1, 2], axis=1)[2], M.tile(x, (1, 2, 1)), M.repeat(x, 2, axis=1),
            M.repeat(x, 3), M.flip(x, 1), M.flip(x), M.roll(x, 1, axis=2), M.roll(x, -2), M.pad(x, ((0, 0), (1, 1), (2, 0))),
            M.pad(x, 1, mode="edge"), M.pad(x, ((0, 0), (1, 1), (2, 2)), mode="reflect"), M.triu(x), M.tril(x, -1),
            x.reshape(4, -1), x.sum(axis=0), x.astype(np.int32), M.atleast_2d(x[0, 0]))


class LinalgShapes(Program, export_name="np_linalg_shapes"):
    def linalg(self, a=Program.like(LA), b=Program.like(LB), v=Program.like(LV), a64=Program.like(LA64),
               i=Program.like(LI), h=Program.like(LH)):
        return linalg(knp, a, b, v, a64, i, h) + linalg_f16(knp, h)

    def shapes(self, x8=Program.like(SX8), b=Program.like(SB), h=Program.like(SH)):
        return shape_ops(knp, x8) + shape_ops(knp, b) + shape_ops(knp, h)


@pytest.fixture(scope="module")
def linalg_shapes(tmp_path_factory):
    return exported(LinalgShapes, tmp_path_factory, "np_linalg_shapes")


def test_linear_algebra(linalg_shapes):
    path, tmp = linalg_shapes
    want = linalg(np, LA, LB, LV, LA64, LI, LH) + widened(lambda h: linalg_f16(np, h))(LH)
    check(call(path, tmp, "linalg", [LA, LB, LV, LA64, LI, LH], len(want)), want, "linalg")


def test_shape_functions(linalg_shapes):
    path, tmp = linalg_shapes
    want = shape_ops(np, SX8) + shape_ops(np, SB) + shape_ops(np, SH)
    want = tuple(np.asarray(w) for w in want)
    check(call(path, tmp, "shapes", [SX8, SB, SH], len(want)), want, "shapes")


# ------------------------------------------------------------------------------------------- indexing, sorting, creation, lax

IX = uniform(-3, 3, (4, 5))
II, IJ = np.array([3, 0, -1], np.int32), np.array([[1, 3], [-1, 0]], np.int64)   # 3 and -1: one row twice
IK = np.int32(2)
IU = ints(0, 255, (4, 5), np.uint8)
IV = uniform(-3, 3, (3, 5))
MASK = np.array([True, False, True, False])


def indexing(M, x, i, j, k, u, v):
    """Basic and advanced indexing, functional updates, sorting, take; k is a traced int."""
    def at(key, op, val):
        if M is knp:
            return getattr(x.at[key], op)(val)
        out = x.copy()
        if op == "set":
            out[key] = val
        else:
            {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}[op].at(out, key, val)
        return out

    return (x[::2, ::-1], x[-1], x[1:-1, -2:], x[None, ..., 1], x[..., None], x[i], x[:, i], x[i, i], x[j], x[k],
            x[k, 1:3], x[MASK], x[i, 1:], at(i, "add", v), at((slice(1, 3), 0), "set", -1.0), at(i, "multiply", 2.0),
            at(i, "min", 0.0), at(i, "max", v), at(k, "set", 9.0), at(j, "add", 1.0),
            M.sort(x, axis=0), M.sort(u), M.argsort(x, axis=1), M.argsort(u, axis=0), M.take(x, i, axis=1),
            M.take(u, j), M.take_along_axis(x, M.argsort(x, axis=1), axis=1), u[i], u[k], x.T[k])


IDX_PRED = RNG.random((4, 5)) > 0.5


class IndexingCreationLax(Program, export_name="np_indexing"):
    def indexing(self, x=Program.like(IX), i=Program.like(II), j=Program.like(IJ), k=Program.like(IK),
                 u=Program.like(IU), v=Program.like(IV)):
        return indexing(knp, x, i, j, k, u, v)

    def creation(self, x=Program.like(X32), s=Program.like(np.float64(0))):
        return (knp.zeros((2,), np.float32), knp.ones((2, 2), np.int8), knp.ones_like(x), knp.zeros_like(x, np.bool_),
                knp.full((3,), 2.5, np.float32), knp.full((2,), 7), knp.full_like(x, 7), knp.full((2, 1), s),
                knp.arange(5), knp.arange(0.0, 1.0, 0.25, dtype=np.float32), knp.arange(6, 0, -2, dtype=np.int8),
                knp.linspace(0, 1, 5, dtype=np.float32), knp.linspace(-1, 1, 4, endpoint=False),
                knp.eye(3, 4, k=1, dtype=np.float32), knp.eye(2, dtype=np.int64), knp.identity(2, dtype=np.int32),
                knp.array([[1, 2], [3, 4]], dtype=np.int8), knp.asarray(x) + knp.zeros(3, np.float32),
                knp.empty((0, 2)), knp.zeros((2,), BF16) + 1, knp.ones((3,), np.float16),
                lax.iota(np.int32, 4), lax.broadcasted_iota(np.int64, (2, 3), 1))

    def lax_ops(self, x=Program.like(IX), k=Program.like(IK), p=Program.like(IDX_PRED), u=Program.like(IU)):
        return (lax.dynamic_slice(x, (k, k), (2, 2)), lax.dynamic_update_slice(x, knp.zeros((2, 2), np.float32), (k, -1)),
                lax.convert_element_type(x, np.int32), lax.convert_element_type(u, np.float16), lax.select(p, x, -x),
                lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), "VALID"),
                lax.reduce_window(x, 0.0, lax.add, (2, 3), (2, 1), "SAME"), lax.rsqrt(knp.abs(x) + 1),
                lax.erf(x), lax.integer_pow(u, 2), lax.clamp(np.uint8(10), u, np.uint8(200)))


@pytest.fixture(scope="module")
def indexing_module(tmp_path_factory):
    return exported(IndexingCreationLax, tmp_path_factory, "np_indexing")


def test_indexing_sorting_take(indexing_module):
    path, tmp = indexing_module
    # stable sorts: kiln's sort and argsort are stable, as numpy's kind="stable"
    want = list(indexing(np, IX, II, IJ, int(IK), IU, IV))
    want[22], want[23] = np.argsort(IX, axis=1, kind="stable"), np.argsort(IU, axis=0, kind="stable")
    check(call(path, tmp, "indexing", [IX, II, IJ, IK, IU, IV], len(want)), want, "indexing")


def test_creation(indexing_module):
    path, tmp = indexing_module
    s = np.float64(-1.5)
    want = (np.zeros((2,), np.float32), np.ones((2, 2), np.int8), np.ones_like(X32), np.zeros_like(X32, np.bool_),
            np.full((3,), 2.5, np.float32), np.full((2,), 7), np.full_like(X32, 7), np.full((2, 1), s),
            np.arange(5), np.arange(0.0, 1.0, 0.25, dtype=np.float32), np.arange(6, 0, -2, dtype=np.int8),
            np.linspace(0, 1, 5, dtype=np.float32), np.linspace(-1, 1, 4, endpoint=False),
            np.eye(3, 4, k=1, dtype=np.float32), np.eye(2, dtype=np.int64), np.identity(2, dtype=np.int32),
            np.array([[1, 2], [3, 4]], np.int8), X32 + np.zeros(3, np.float32), np.empty((0, 2)),
            np.ones((2,), BF16), np.ones((3,), np.float16), np.arange(4, dtype=np.int32),
            np.broadcast_to(np.arange(3), (2, 3)).astype(np.int64))
    check(call(path, tmp, "creation", [X32, s], len(want)), want, "creation")


def _window(x, op, init, wshape, strides, pads):
    xp = np.pad(x, pads, constant_values=init)
    rows = (xp.shape[0] - wshape[0]) // strides[0] + 1
    cols = (xp.shape[1] - wshape[1]) // strides[1] + 1
    return np.array([[op(xp[r * strides[0]:r * strides[0] + wshape[0], c * strides[1]:c * strides[1] + wshape[1]])
                      for c in range(cols)] for r in range(rows)], x.dtype)


def test_lax_functions(indexing_module):
    path, tmp = indexing_module
    k = int(IK)
    upd = IX.copy()
    upd[k:k + 2, 3:5] = 0   # start -1 counts from the end (5 - 1 = 4), then clamps to 5 - 2 = 3
    want = (IX[k:k + 2, k:k + 2], upd, IX.astype(np.int32), IU.astype(np.float16), np.where(IDX_PRED, IX, -IX),
            _window(IX, np.max, -np.inf, (2, 2), (1, 1), ((0, 0), (0, 0))),
            _window(IX, np.sum, 0.0, (2, 3), (2, 1), ((0, 0), (1, 1))),
            (1 / np.sqrt(np.abs(IX).astype(F64) + 1)).astype(F32), _erf(IX), IU * IU, np.clip(IU, 10, 200))
    check(call(path, tmp, "lax_ops", [IX, IK, IDX_PRED, IU], len(want)), want, "lax")


# ------------------------------------------------------------------------------------------- kiln.nn and convolution

NX = uniform(-6, 6, (3, 5))
NX64 = uniform(-6, 6, (3, 5), F64)
NH, NBH = uniform(-6, 6, (3, 5), F16), uniform(-6, 6, (3, 5), BF16)
LABELS = np.array([2, 0, 4, -1, 7], np.int64)   # -1 and 7: out of range, all zeros (as in JAX)
CX = uniform(-1, 1, (1, 2, 6, 5))              # NCHW
CW = uniform(-1, 1, (4, 2, 3, 2))              # OIHW
CXH = uniform(-1, 1, (2, 5, 5, 4))             # NHWC
CWH = uniform(-1, 1, (3, 3, 2, 4))             # HWIO, 2 groups
CXB = uniform(-2, 2, (2, 5, 5, 4), BF16)       # NHWC bfloat16, pooled


def nn_reference(x):
    x64 = x.astype(np.float64)
    erf = np.vectorize(math.erf)

    def lse(a, axis):
        m = a.max(axis, keepdims=True)
        return np.log(np.exp(a - m).sum(axis, keepdims=True)) + m

    mu = x64.mean(-1, keepdims=True)
    r = (np.maximum(x64, 0), np.clip(x64, 0, 6), 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3))),
         0.5 * x64 * (1 + erf(x64 / np.sqrt(2))), x64 / (1 + np.exp(-x64)), 1 / (1 + np.exp(-x64)), np.logaddexp(x64, 0),
         np.exp(x64 - lse(x64, -1)), x64 - lse(x64, 0), lse(x64, 1)[:, 0],
         (x64 - mu) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5))
    return tuple(a.astype(x.dtype) for a in r)


def nn_ops(x):
    return (nn.relu(x), nn.relu6(x), nn.gelu(x), nn.gelu(x, approximate=False), nn.silu(x), nn.sigmoid(x),
            nn.softplus(x), nn.softmax(x), nn.log_softmax(x, axis=0), nn.logsumexp(x, axis=1), nn.standardize(x))


class NNConv(Program, export_name="np_nn"):
    def activations(self, x=Program.like(NX), x64=Program.like(NX64), h=Program.like(NH), bh=Program.like(NBH),
                    labels=Program.like(LABELS)):
        return nn_ops(x) + nn_ops(x64) + nn_ops(h) + nn_ops(bh) + (
            nn.one_hot(labels, 5), nn.one_hot(labels[:2], 3, dtype=np.int32, axis=0))

    def conv(self, x=Program.like(CX), w=Program.like(CW), xh=Program.like(CXH), wh=Program.like(CWH),
             xb=Program.like(CXB)):
        a = lax.conv_general_dilated(x, w, (1, 1), "VALID", rhs_dilation=(2, 1),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        b = lax.conv_general_dilated(x, w, (2, 1), ((1, 1), (0, 1)), lhs_dilation=(1, 2),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        c = lax.conv_general_dilated(xh, wh, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                     feature_group_count=2)
        return (a, b, c, nn.max_pool(c, (2, 2), (1, 1), "SAME"), nn.avg_pool(c, (2, 2), (2, 2)),
                nn.max_pool(xb, (3, 3), (2, 2), "SAME"), nn.avg_pool(xb, (2, 2), (1, 1)))


@pytest.fixture(scope="module")
def nn_module(tmp_path_factory):
    return exported(NNConv, tmp_path_factory, "np_nn")


def test_nn_activations_every_float_dtype(nn_module):
    path, tmp = nn_module
    want = nn_reference(NX) + nn_reference(NX64) + nn_reference(NH) + nn_reference(NBH)
    want += ((LABELS[:, None] == np.arange(5)).astype(np.float32), (LABELS[None, :2] == np.arange(3)[:, None]).astype(np.int32))
    check(call(path, tmp, "activations", [NX, NX64, NH, NBH, LABELS], len(want)), want, "nn")


def test_conv_nchw_dilated_and_pooling(nn_module):
    from test_conv import naive_conv, naive_pool

    path, tmp = nn_module
    got = call(path, tmp, "conv", [CX, CW, CXH, CWH, CXB], 7)
    a = naive_conv(CX, CW, (1, 1), "VALID", rhs_dilation=(2, 1), dimension_numbers=("NCHW", "OIHW", "NCHW"))
    b = naive_conv(CX, CW, (2, 1), ((1, 1), (0, 1)), lhs_dilation=(1, 2), dimension_numbers=("NCHW", "OIHW", "NCHW"))
    c = naive_conv(CXH, CWH, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=2)
    want = (a, b, c, naive_pool(got[2], "max", (1, 2, 2, 1), (1, 1, 1, 1), "SAME"),
            naive_pool(got[2], "add", (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / np.float32(4))
    want += widened(lambda x: (naive_pool(x, "max", (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
                               naive_pool(x, "add", (1, 2, 2, 1), (1, 1, 1, 1), "VALID") / np.float32(4)))(CXB)
    check(got, want, "conv")
