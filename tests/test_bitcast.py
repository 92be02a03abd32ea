"""lax.bitcast_convert_type, lax.reduce_precision and a traced array's .view(dtype): bit for bit against numpy's
views and an independent rounding reference, eagerly, under kiln.jit (the C runtime) and in kiln-run."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.lax as lax
import kiln.numpy as knp
from kiln.core.dtypes import DTypeError
from kiln.lax.prims import ShapeError
from kiln_tools import kiln_run_exported

RNG = np.random.default_rng(7)
BF16 = np.dtype(ml_dtypes.bfloat16)
SAME_WIDTH = [
    (np.float32, np.int32), (np.float32, np.uint32), (np.int32, np.float32), (np.uint32, np.int32),
    (np.float64, np.int64), (np.uint64, np.float64), (np.float16, np.int16), (np.uint16, np.float16),
    (np.float16, BF16), (BF16, np.uint16), (np.int8, np.uint8),
]


def random_bits(dtype, shape, *, quiet_nans=True):
    """Arrays of dtype from random bits: every exponent, with subnormals, infinities, -0 and NaNs. With
    quiet_nans, a float16/bfloat16 NaN is made quiet (a kernel storing one quiets it, docs/jax_compat.md)."""
    d = np.dtype(dtype)
    bits = RNG.integers(0, 2 ** (8 * d.itemsize), size=shape, dtype=np.uint64).astype(f"u{d.itemsize}")
    x = bits.view(d)
    if quiet_nans and d in (np.dtype(np.float16), BF16):
        quiet = 0x0200 if d == np.float16 else 0x0040
        nan = np.isnan(x.astype(np.float32))
        bits = np.where(nan, bits | np.uint16(quiet), bits).astype(np.uint16)
        x = bits.view(d)
    return x


def same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    unsigned = f"u{want.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(unsigned), want.view(unsigned))


@pytest.mark.parametrize("src,dst", SAME_WIDTH, ids=lambda d: np.dtype(d).name)
def test_same_width_is_numpy_view_bit_for_bit(src, dst):
    # a float16/bfloat16 result is stored by the kernel, which quiets a signaling NaN: only quiet ones here
    x = random_bits(dst, (5, 37)).view(src) if np.dtype(dst) in (np.dtype(np.float16), BF16) else random_bits(src, (5, 37))
    want = x.view(dst)
    same_bits(lax.bitcast_convert_type(x, dst), want)
    same_bits(kiln.jit(lambda v: lax.bitcast_convert_type(v, dst))(x), want)
    # in a fused chain with arithmetic on both sides: arithmetic keeps no NaN payload (docs/targets.md), so a NaN
    # result need only be a NaN
    got = np.asarray(kiln.jit(lambda v: lax.bitcast_convert_type(knp.abs(v), dst) + want.dtype.type(0))(x))
    with np.errstate(invalid="ignore"):
        expected = np.abs(x).view(dst) + want.dtype.type(0)
    if expected.dtype.kind in "fV":
        nan = np.isnan(expected.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
        got, expected = np.where(nan, 0, got).astype(expected.dtype), np.where(nan, 0, expected).astype(expected.dtype)
    same_bits(got, expected)


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["float16", "bfloat16"])
def test_half_bits_round_trip_exactly_in_a_kernel(dtype):
    """Every 16-bit pattern, signaling NaNs included, read as a half type and back inside one kernel."""
    bits = np.arange(2**16, dtype=np.uint16)
    got = kiln.jit(lambda u: lax.bitcast_convert_type(lax.bitcast_convert_type(u, dtype), np.uint16))(bits)
    np.testing.assert_array_equal(got, bits)


def test_signaling_nans_of_32_and_64_bits_stay_signaling():
    x = np.array([0x7F800001, 0xFFA00000, 0x7FC00001], np.uint32)
    same_bits(kiln.jit(lambda u: lax.bitcast_convert_type(u, np.float32))(x), x.view(np.float32))
    y = np.array([0x7FF0000000000001, 0x7FF8000000000000], np.uint64)
    same_bits(kiln.jit(lambda u: lax.bitcast_convert_type(lax.bitcast_convert_type(u, np.float64), np.int64))(y),
              y.view(np.int64))


def test_between_widths_split_and_join_the_last_axis_as_jax(tmp_path):
    x = random_bits(np.float32, (3, 4))
    h = random_bits(np.float16, (2, 3, 4))
    d = random_bits(np.float64, (5,))

    def fn(x, h, d):
        return (lax.bitcast_convert_type(x, np.uint8), lax.bitcast_convert_type(h, np.float64),
                lax.bitcast_convert_type(d, np.int16), lax.bitcast_convert_type(lax.bitcast_convert_type(x, np.int8),
                                                                                np.float32))

    want = [x.view(np.uint8).reshape(3, 4, 4), h.view(np.float64).reshape(2, 3), d.view(np.int16).reshape(5, 4), x]
    for got in (fn(x, h, d), kiln.jit(fn)(x, h, d), kiln_run_exported(fn, x, h, d, tmp_path=tmp_path)):
        for g, w in zip(got, want):
            same_bits(g, w)
    batched = kiln.vmap(lambda v: lax.bitcast_convert_type(v, np.uint16))(x)
    same_bits(batched, x.view(np.uint16).reshape(3, 4, 2))


def test_traced_view_follows_numpy():
    x = random_bits(np.float32, (2, 6))
    for dtype in (np.int32, np.uint8, np.float64, np.float16, np.bool_):
        want = x.view(dtype) if dtype is not np.bool_ else x.view(np.uint8).view(np.bool_)
        got = kiln.jit(lambda v: v.view(dtype))(x)
        if dtype is np.bool_:
            np.testing.assert_array_equal(got, want)
        else:
            same_bits(got, want)
    flags = np.array([[True, False, False, True]])
    np.testing.assert_array_equal(kiln.jit(lambda b: b.view(np.int32))(flags), flags.view(np.int32))
    np.testing.assert_array_equal(kiln.jit(lambda v: v.view())(x), x)


def test_bitcast_errors_name_the_problem():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match="bool and complex are refused"):
        lax.bitcast_convert_type(x.astype(bool), np.uint8)
    with pytest.raises(TypeError, match="new dtype complex64"):
        kiln.jit(lambda v: lax.bitcast_convert_type(v, np.complex64))(x)
    with pytest.raises(ShapeError, match=r"last axis must be 2; its shape is \(2, 3\)"):
        kiln.jit(lambda v: lax.bitcast_convert_type(v, np.float64))(x)
    with pytest.raises(DTypeError, match="not supported by kiln"):
        lax.bitcast_convert_type(x, np.float128 if hasattr(np, "float128") else "V4")
    with pytest.raises(ValueError, match="not a multiple of float64's 8"):
        kiln.jit(lambda v: v.view(np.float64))(x)
    with pytest.raises(ValueError, match="0-d array"):
        kiln.jit(lambda v: v.view(np.uint8))(np.float32(1))
    with pytest.raises(TypeError, match="type= is not supported"):
        kiln.jit(lambda v: v.view(np.int32, type=np.ndarray))(x)


# ---- reduce_precision ----------------------------------------------------------------------

def rounded_reference(x, exponent_bits, mantissa_bits):
    """XLA's ReducePrecision computed from values, not bits: x rounded to nearest even at mantissa_bits, then
    ±inf at or above 2^(bias+1) and ±0 below the smallest normal 2^(1-bias)."""
    x = np.asarray(x, np.float64)
    bias = 2 ** (exponent_bits - 1) - 1
    mantissa, exponent = np.frexp(x)  # |mantissa| in [0.5, 1)
    r = np.ldexp(np.rint(np.ldexp(mantissa, mantissa_bits + 1)), exponent - mantissa_bits - 1)
    r = np.where(np.abs(r) >= 2.0 ** (bias + 1), np.copysign(np.inf, x), r)
    r = np.where(np.abs(r) < 2.0 ** (1 - bias), np.copysign(0.0, x), r)
    return np.where(np.isfinite(x), r, x)


@pytest.mark.parametrize("dtype,formats", [
    (np.float32, [(8, 7), (5, 10), (4, 3), (5, 2), (2, 0), (8, 23), (6, 30)]),
    (np.float64, [(11, 52), (8, 23), (5, 10), (11, 3), (3, 40)]),
])
def test_reduce_precision_rounds_as_the_reference(dtype, formats):
    x = random_bits(dtype, (400,))
    x = np.concatenate([x, np.array([0.0, -0.0, 1.0, 1.5, 1.25, 1.75, 2.0**-126, 65504, 65520, -65519.9], dtype)])
    finite = np.isfinite(x)
    for e, m in formats:
        eager = lax.reduce_precision(x, e, m)
        jitted = kiln.jit(lambda v: lax.reduce_precision(v, e, m))(x)
        same_bits(jitted, eager)
        if e < (11 if dtype == np.float64 else 8):
            with np.errstate(invalid="ignore"):
                want = rounded_reference(x[finite], e, m).astype(dtype)
            np.testing.assert_array_equal(eager[finite], want)
        nan = np.isnan(x)
        same_bits(eager[nan], x[nan])  # NaNs kept bit for bit, also with m = 0 (JAX's; was +inf)


def test_reduce_precision_matches_the_narrow_types_in_their_normal_range():
    x = RNG.standard_normal(5000).astype(np.float32) * np.float32(1000)
    x = np.concatenate([x, np.float32([65504, 65519.9, 65520, 1e-4, 7e-5, 3e-5, 1e-6, -2e-7])])
    with np.errstate(over="ignore"):
        half = x.astype(np.float16).astype(np.float32)
    normal_half = np.abs(half) >= 2.0**-14
    got = kiln.jit(lambda v: lax.reduce_precision(v, 5, 10))(x)
    np.testing.assert_array_equal(got[normal_half], half[normal_half])
    np.testing.assert_array_equal(got[~normal_half & (np.abs(x) < 2.0**-14)], 0)
    np.testing.assert_array_equal(kiln.jit(lambda v: lax.reduce_precision(v, 8, 7))(x),
                                  x.astype(BF16).astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["float16", "bfloat16"])
def test_reduce_precision_of_half_types_works_on_their_own_bits(dtype):
    x = random_bits(dtype, (4096,))
    for e, m in ((4, 3), (5, 2), (3, 1), (8, 3)):
        eager = lax.reduce_precision(x, e, m)
        same_bits(kiln.jit(lambda v: lax.reduce_precision(v, e, m))(x), eager)
        finite = np.isfinite(x.astype(np.float32))
        src_e = 5 if dtype == np.float16 else 8
        if e < src_e:
            want = rounded_reference(x.astype(np.float64), e, m).astype(dtype)
            np.testing.assert_array_equal(eager[finite].astype(np.float32), want[finite].astype(np.float32))


def test_reduce_precision_derivative_is_straight_through():
    x = RNG.standard_normal(7)
    w = RNG.standard_normal(7)
    grad = kiln.grad(lambda v: knp.sum(lax.reduce_precision(v, 5, 4) * w))(x)
    np.testing.assert_array_equal(grad, lax.reduce_precision(w, 5, 4))
    np.testing.assert_array_equal(kiln.jit(kiln.grad(lambda v: knp.sum(lax.reduce_precision(v, 5, 4) * w)))(x), grad)
    half_grad = kiln.grad(lambda v: knp.sum(lax.bitcast_convert_type(v.astype(np.float16), np.int16)
                                            .astype(np.float64)) + knp.sum(v))(x)
    np.testing.assert_array_equal(half_grad, np.ones(7))


def test_reduce_precision_errors_and_identities():
    x = np.float32([1.1, 2.2])
    np.testing.assert_array_equal(lax.reduce_precision(x, 8, 23), x)
    np.testing.assert_array_equal(lax.reduce_precision(x, 9, 30), x)
    with pytest.raises(TypeError, match="must be floating-point; got int32"):
        lax.reduce_precision(np.int32([1]), 5, 10)
    with pytest.raises(TypeError, match="exponent_bits must be an int >= 1; got 0"):
        lax.reduce_precision(x, 0, 10)
    with pytest.raises(TypeError, match="mantissa_bits must be an int >= 0; got 2.5"):
        lax.reduce_precision(x, 5, 2.5)
    # a Python number is weakly typed, as in JAX: it does not widen the float32 it meets under kiln.jit
    added = kiln.jit(lambda v: lax.reduce_precision(1.1, 5, 2) + v)(np.float32([1.0]))
    assert added.dtype == np.float32
    np.testing.assert_array_equal(added, [2.0])
