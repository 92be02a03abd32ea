"""Python numbers that meet traced arrays stay weak, as in JAX: vmap's unmapped Python number arguments
and Python numbers inside the lists and tuples given to reductions and asarray."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.core import dtypes
from kiln.core.array import as_array, is_weak
from kiln.core.trace import get_aval

X32 = np.array([0.5, -1.25, 3.0], np.float32)
DTYPES = [np.float32, np.float64, knp.bfloat16, np.float16, np.int32, np.int8]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("scalar", [2.0, 3, True], ids=["float", "int", "bool"])
@pytest.mark.parametrize("mode", ["eager", "jit", "inside_jit"])
def test_vmap_python_number_argument_is_weak(dtype, scalar, mode):
    x = X32.astype(dtype)
    f = kiln.vmap(lambda a, s: knp.multiply(a, s), in_axes=(0, None))
    got = {"eager": lambda: f(x, scalar), "jit": lambda: kiln.jit(f)(x, scalar),
           "inside_jit": lambda: kiln.jit(lambda a: f(a, scalar))(x)}[mode]()
    want = np.dtype(dtype)
    if isinstance(scalar, float) and not np.issubdtype(want, np.floating) and want != knp.bfloat16:
        want = np.dtype(np.float32)  # a Python float with an integer array: float32 (docs/numpy.md)
    assert got.dtype == want, (got.dtype, want)
    expected = (x.astype(np.float64) * float(scalar)).astype(want)
    np.testing.assert_array_equal(got, expected)


def test_vmap_python_number_first_and_as_output():
    got = kiln.vmap(lambda s, a: s * a - s, in_axes=(None, 0))(2.0, X32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, X32 * 2 - 2)
    s, a = kiln.vmap(lambda s, a: (s, a + s), in_axes=(None, 0), out_axes=(None, 0))(1.5, X32)
    assert float(s) == 1.5 and a.dtype == np.float32


# (kiln.numpy reduction, function of a traced float32 vector x -> the sequence it reduces)
SEQUENCES = [
    ("sum", lambda x: (x[0], 1.0)),
    ("sum", lambda x: [x[0], x[1], 2]),
    ("max", lambda x: [x[1], 2.0]),
    ("min", lambda x: (x[0], -2.5, x[2])),
    ("mean", lambda x: [x, [1.0, x[1], 3.0]]),
    ("prod", lambda x: [[x[0], 2.0], [0.5, x[2]]]),
]


@pytest.mark.parametrize("dtype", [np.float32, knp.bfloat16, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,seq", SEQUENCES, ids=[f"{n}{i}" for i, (n, _) in enumerate(SEQUENCES)])
def test_python_numbers_in_sequences_given_to_reductions_are_weak(name, seq, dtype):
    x = X32.astype(dtype)
    expected = getattr(np, name)(np.asarray(seq(x.astype(np.float64)), np.float64))
    for got in (kiln.jit(lambda x: getattr(knp, name)(seq(x)))(x),
                kiln.vmap(lambda row: getattr(knp, name)(seq(row)))(x[None])[0]):
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
        np.testing.assert_allclose(np.asarray(got, np.float64), expected, rtol=1e-2 if dtype == knp.bfloat16 else 1e-6)


ROWS = [("mean", lambda x: [x, [1.0, 2.0, 3.0]]), ("sum", lambda x: ([x[0], x[1]], (2, 0.5)))]


@pytest.mark.parametrize("dtype", [np.float32, knp.bfloat16, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,seq", ROWS, ids=[n for n, _ in ROWS])
def test_rows_of_python_numbers_beside_traced_arrays_are_weak(name, seq, dtype):
    """Under jit (and vmap inside jit) a row made only of Python numbers is weak; under an eager vmap it is
    a float32 array, which float32 and float64 operands also keep."""
    x = X32.astype(dtype)
    expected = getattr(np, name)(np.asarray(seq(x.astype(np.float64)), np.float64))
    outs = [kiln.jit(lambda x: getattr(knp, name)(seq(x)))(x),
            kiln.jit(kiln.vmap(lambda row: getattr(knp, name)(seq(row))))(x[None])[0]]
    if dtype != knp.bfloat16:
        outs.append(kiln.vmap(lambda row: getattr(knp, name)(seq(row)))(x[None])[0])
    for got in outs:
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
        np.testing.assert_allclose(np.asarray(got, np.float64), expected, rtol=1e-2 if dtype == knp.bfloat16 else 1e-6)


def test_sequences_with_python_numbers_follow_numpy_eagerly():
    """Eagerly the sequence is numpy's array: float32 numbers and a Python float give float64."""
    x = X32
    for name, seq in SEQUENCES + ROWS:
        got, expected = getattr(knp, name)(seq(x)), getattr(np, name)(np.asarray(seq(x)))
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_asarray_of_traced_and_python_numbers_keeps_the_traced_dtype():
    got = kiln.jit(lambda a: knp.asarray([a, 2, 3]))(np.int8(1))
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, np.array([1, 2, 3], np.int8))
    got = kiln.jit(lambda a: knp.asarray([a, 2.5]))(np.int8(1))
    assert got.dtype == np.float32  # a Python float with an integer array: float32
    got = kiln.jit(lambda a: knp.asarray([a, 2.5], dtype=np.float64))(np.float32(1))
    assert got.dtype == np.float64


# Python numbers given where an array operand is taken (shape functions, asarray under jit) stay weak, as in
# JAX: the NeRF idiom concatenate([deltas, broadcast_to(1e10, ...)]) keeps float32 deltas float32.
AS_OPERANDS = {
    "broadcast_to": lambda x: knp.concatenate([x, knp.broadcast_to(1e10, (2,))]),
    "reshape": lambda x: x + knp.reshape(0.5, (1,)),
    "expand_dims": lambda x: x * knp.expand_dims(2.0, 0),
    "asarray": lambda x: x - knp.asarray(1.5),
    "array_list": lambda x: knp.concatenate([x, knp.array([1e10, -1.0])]),
    "tile": lambda x: x + knp.tile(0.25, 3),
    "where_number": lambda x: knp.where(x > 0, x, 0.0),
    "fftfreq": lambda x: x * knp.fft.fftfreq(3),
    "rfftfreq_d": lambda x: x[:2] * knp.fft.rfftfreq(3, d=0.5),
}


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name", list(AS_OPERANDS))
def test_python_numbers_as_array_operands_stay_weak(name, mode):
    fn = AS_OPERANDS[name]
    got = fn(X32) if mode == "eager" else kiln.jit(fn)(X32)
    want = fn(X32.astype(np.float64))  # the same values computed in float64
    assert got.dtype == np.float32, (name, mode, got.dtype)
    np.testing.assert_allclose(got, np.asarray(want).astype(np.float32), rtol=1e-7)


def test_alone_they_keep_numpys_dtype():
    for made in (lambda: knp.broadcast_to(1.5, (2,)), lambda: knp.reshape(3, (1,)), lambda: knp.fft.rfftfreq(4)):
        for got, want in ((made(), made()), (kiln.jit(made)(), made())):
            assert got.dtype == want.dtype == np.asarray(want).dtype and got.dtype.itemsize == 8
    # an explicit dtype, or a numpy scalar spacing, is strong
    assert kiln.jit(lambda x: x * knp.fft.fftfreq(3, dtype=np.float64))(X32).dtype == np.float64
    assert kiln.jit(lambda x: x * knp.fft.fftfreq(3, np.float64(2.0)))(X32).dtype == np.float64
    np.testing.assert_array_equal(knp.fft.fftfreq(5, 0.1), np.fft.fftfreq(5, 0.1))
    np.testing.assert_array_equal(knp.fft.rfftfreq(6, 0.3), np.fft.rfftfreq(6, 0.3))


# JAX 0.10.2's result of jnp.add(a, b) (dtype, * = weakly typed) for every pair of kiln's dtypes, strong or
# weak ("*"), but strong with strong (kiln follows numpy there, docs/numpy.md): recorded once with x64 on
# and weak operands made by lax's convert_element_type(weak_type=True); where a strong array meets a weak
# operand of a higher kind the weak result is JAX's without x64 (float32, int32, complex64: a Python
# number's dtype, docs/numpy.md). Python numbers are the weak int32, float32, complex64 and bool rows.
JAX_WEAK_PROMOTION = """
bool,bool*,bool bool,i8*,i32* bool,i16*,i32* bool,i32*,i32* bool,i64*,i32* bool,u8*,i32* bool,u16*,i32*
bool,u32*,i32* bool,u64*,i32* bool,bf16*,f32* bool,f16*,f32* bool,f32*,f32* bool,f64*,f32* bool,c64*,c64*
bool,c128*,c64* bool*,bool,bool bool*,bool*,bool bool*,i8,i8 bool*,i8*,i8* bool*,i16,i16 bool*,i16*,i16*
bool*,i32,i32 bool*,i32*,i32* bool*,i64,i64 bool*,i64*,i64* bool*,u8,u8 bool*,u8*,u8* bool*,u16,u16
bool*,u16*,u16* bool*,u32,u32 bool*,u32*,u32* bool*,u64,u64 bool*,u64*,u64* bool*,bf16,bf16
bool*,bf16*,bf16* bool*,f16,f16 bool*,f16*,f16* bool*,f32,f32 bool*,f32*,f32* bool*,f64,f64 bool*,f64*,f64*
bool*,c64,c64 bool*,c64*,c64* bool*,c128,c128 bool*,c128*,c128* i8,bool*,i8 i8,i8*,i8 i8,i16*,i8 i8,i32*,i8
i8,i64*,i8 i8,u8*,i8 i8,u16*,i8 i8,u32*,i8 i8,u64*,i8 i8,bf16*,f32* i8,f16*,f32* i8,f32*,f32* i8,f64*,f32*
i8,c64*,c64* i8,c128*,c64* i8*,bool,i32* i8*,bool*,i8* i8*,i8,i8 i8*,i8*,i8* i8*,i16,i16 i8*,i16*,i16*
i8*,i32,i32 i8*,i32*,i32* i8*,i64,i64 i8*,i64*,i64* i8*,u8,u8 i8*,u8*,i16* i8*,u16,u16 i8*,u16*,i32*
i8*,u32,u32 i8*,u32*,i64* i8*,u64,u64 i8*,u64*,f64* i8*,bf16,bf16 i8*,bf16*,bf16* i8*,f16,f16 i8*,f16*,f16*
i8*,f32,f32 i8*,f32*,f32* i8*,f64,f64 i8*,f64*,f64* i8*,c64,c64 i8*,c64*,c64* i8*,c128,c128 i8*,c128*,c128*
i16,bool*,i16 i16,i8*,i16 i16,i16*,i16 i16,i32*,i16 i16,i64*,i16 i16,u8*,i16 i16,u16*,i16 i16,u32*,i16
i16,u64*,i16 i16,bf16*,f32* i16,f16*,f32* i16,f32*,f32* i16,f64*,f32* i16,c64*,c64* i16,c128*,c64*
i16*,bool,i32* i16*,bool*,i16* i16*,i8,i8 i16*,i8*,i16* i16*,i16,i16 i16*,i16*,i16* i16*,i32,i32
i16*,i32*,i32* i16*,i64,i64 i16*,i64*,i64* i16*,u8,u8 i16*,u8*,i16* i16*,u16,u16 i16*,u16*,i32* i16*,u32,u32
i16*,u32*,i64* i16*,u64,u64 i16*,u64*,f64* i16*,bf16,bf16 i16*,bf16*,bf16* i16*,f16,f16 i16*,f16*,f16*
i16*,f32,f32 i16*,f32*,f32* i16*,f64,f64 i16*,f64*,f64* i16*,c64,c64 i16*,c64*,c64* i16*,c128,c128
i16*,c128*,c128* i32,bool*,i32 i32,i8*,i32 i32,i16*,i32 i32,i32*,i32 i32,i64*,i32 i32,u8*,i32 i32,u16*,i32
i32,u32*,i32 i32,u64*,i32 i32,bf16*,f32* i32,f16*,f32* i32,f32*,f32* i32,f64*,f32* i32,c64*,c64*
i32,c128*,c64* i32*,bool,i32* i32*,bool*,i32* i32*,i8,i8 i32*,i8*,i32* i32*,i16,i16 i32*,i16*,i32*
i32*,i32,i32 i32*,i32*,i32* i32*,i64,i64 i32*,i64*,i64* i32*,u8,u8 i32*,u8*,i32* i32*,u16,u16 i32*,u16*,i32*
i32*,u32,u32 i32*,u32*,i64* i32*,u64,u64 i32*,u64*,f64* i32*,bf16,bf16 i32*,bf16*,bf16* i32*,f16,f16
i32*,f16*,f16* i32*,f32,f32 i32*,f32*,f32* i32*,f64,f64 i32*,f64*,f64* i32*,c64,c64 i32*,c64*,c64*
i32*,c128,c128 i32*,c128*,c128* i64,bool*,i64 i64,i8*,i64 i64,i16*,i64 i64,i32*,i64 i64,i64*,i64 i64,u8*,i64
i64,u16*,i64 i64,u32*,i64 i64,u64*,i64 i64,bf16*,f32* i64,f16*,f32* i64,f32*,f32* i64,f64*,f32*
i64,c64*,c64* i64,c128*,c64* i64*,bool,i32* i64*,bool*,i64* i64*,i8,i8 i64*,i8*,i64* i64*,i16,i16
i64*,i16*,i64* i64*,i32,i32 i64*,i32*,i64* i64*,i64,i64 i64*,i64*,i64* i64*,u8,u8 i64*,u8*,i64* i64*,u16,u16
i64*,u16*,i64* i64*,u32,u32 i64*,u32*,i64* i64*,u64,u64 i64*,u64*,f64* i64*,bf16,bf16 i64*,bf16*,bf16*
i64*,f16,f16 i64*,f16*,f16* i64*,f32,f32 i64*,f32*,f32* i64*,f64,f64 i64*,f64*,f64* i64*,c64,c64
i64*,c64*,c64* i64*,c128,c128 i64*,c128*,c128* u8,bool*,u8 u8,i8*,u8 u8,i16*,u8 u8,i32*,u8 u8,i64*,u8
u8,u8*,u8 u8,u16*,u8 u8,u32*,u8 u8,u64*,u8 u8,bf16*,f32* u8,f16*,f32* u8,f32*,f32* u8,f64*,f32* u8,c64*,c64*
u8,c128*,c64* u8*,bool,i32* u8*,bool*,u8* u8*,i8,i8 u8*,i8*,i16* u8*,i16,i16 u8*,i16*,i16* u8*,i32,i32
u8*,i32*,i32* u8*,i64,i64 u8*,i64*,i64* u8*,u8,u8 u8*,u8*,u8* u8*,u16,u16 u8*,u16*,u16* u8*,u32,u32
u8*,u32*,u32* u8*,u64,u64 u8*,u64*,u64* u8*,bf16,bf16 u8*,bf16*,bf16* u8*,f16,f16 u8*,f16*,f16* u8*,f32,f32
u8*,f32*,f32* u8*,f64,f64 u8*,f64*,f64* u8*,c64,c64 u8*,c64*,c64* u8*,c128,c128 u8*,c128*,c128*
u16,bool*,u16 u16,i8*,u16 u16,i16*,u16 u16,i32*,u16 u16,i64*,u16 u16,u8*,u16 u16,u16*,u16 u16,u32*,u16
u16,u64*,u16 u16,bf16*,f32* u16,f16*,f32* u16,f32*,f32* u16,f64*,f32* u16,c64*,c64* u16,c128*,c64*
u16*,bool,i32* u16*,bool*,u16* u16*,i8,i8 u16*,i8*,i32* u16*,i16,i16 u16*,i16*,i32* u16*,i32,i32
u16*,i32*,i32* u16*,i64,i64 u16*,i64*,i64* u16*,u8,u8 u16*,u8*,u16* u16*,u16,u16 u16*,u16*,u16* u16*,u32,u32
u16*,u32*,u32* u16*,u64,u64 u16*,u64*,u64* u16*,bf16,bf16 u16*,bf16*,bf16* u16*,f16,f16 u16*,f16*,f16*
u16*,f32,f32 u16*,f32*,f32* u16*,f64,f64 u16*,f64*,f64* u16*,c64,c64 u16*,c64*,c64* u16*,c128,c128
u16*,c128*,c128* u32,bool*,u32 u32,i8*,u32 u32,i16*,u32 u32,i32*,u32 u32,i64*,u32 u32,u8*,u32 u32,u16*,u32
u32,u32*,u32 u32,u64*,u32 u32,bf16*,f32* u32,f16*,f32* u32,f32*,f32* u32,f64*,f32* u32,c64*,c64*
u32,c128*,c64* u32*,bool,i32* u32*,bool*,u32* u32*,i8,i8 u32*,i8*,i64* u32*,i16,i16 u32*,i16*,i64*
u32*,i32,i32 u32*,i32*,i64* u32*,i64,i64 u32*,i64*,i64* u32*,u8,u8 u32*,u8*,u32* u32*,u16,u16 u32*,u16*,u32*
u32*,u32,u32 u32*,u32*,u32* u32*,u64,u64 u32*,u64*,u64* u32*,bf16,bf16 u32*,bf16*,bf16* u32*,f16,f16
u32*,f16*,f16* u32*,f32,f32 u32*,f32*,f32* u32*,f64,f64 u32*,f64*,f64* u32*,c64,c64 u32*,c64*,c64*
u32*,c128,c128 u32*,c128*,c128* u64,bool*,u64 u64,i8*,u64 u64,i16*,u64 u64,i32*,u64 u64,i64*,u64 u64,u8*,u64
u64,u16*,u64 u64,u32*,u64 u64,u64*,u64 u64,bf16*,f32* u64,f16*,f32* u64,f32*,f32* u64,f64*,f32*
u64,c64*,c64* u64,c128*,c64* u64*,bool,i32* u64*,bool*,u64* u64*,i8,i8 u64*,i8*,f64* u64*,i16,i16
u64*,i16*,f64* u64*,i32,i32 u64*,i32*,f64* u64*,i64,i64 u64*,i64*,f64* u64*,u8,u8 u64*,u8*,u64* u64*,u16,u16
u64*,u16*,u64* u64*,u32,u32 u64*,u32*,u64* u64*,u64,u64 u64*,u64*,u64* u64*,bf16,bf16 u64*,bf16*,bf16*
u64*,f16,f16 u64*,f16*,f16* u64*,f32,f32 u64*,f32*,f32* u64*,f64,f64 u64*,f64*,f64* u64*,c64,c64
u64*,c64*,c64* u64*,c128,c128 u64*,c128*,c128* bf16,bool*,bf16 bf16,i8*,bf16 bf16,i16*,bf16 bf16,i32*,bf16
bf16,i64*,bf16 bf16,u8*,bf16 bf16,u16*,bf16 bf16,u32*,bf16 bf16,u64*,bf16 bf16,bf16*,bf16 bf16,f16*,bf16
bf16,f32*,bf16 bf16,f64*,bf16 bf16,c64*,c64 bf16,c128*,c64 bf16*,bool,f32* bf16*,bool*,bf16* bf16*,i8,f32*
bf16*,i8*,bf16* bf16*,i16,f32* bf16*,i16*,bf16* bf16*,i32,f32* bf16*,i32*,bf16* bf16*,i64,f32*
bf16*,i64*,bf16* bf16*,u8,f32* bf16*,u8*,bf16* bf16*,u16,f32* bf16*,u16*,bf16* bf16*,u32,f32*
bf16*,u32*,bf16* bf16*,u64,f32* bf16*,u64*,bf16* bf16*,bf16,bf16 bf16*,bf16*,bf16* bf16*,f16,f16
bf16*,f16*,f32* bf16*,f32,f32 bf16*,f32*,f32* bf16*,f64,f64 bf16*,f64*,f64* bf16*,c64,c64 bf16*,c64*,c64*
bf16*,c128,c128 bf16*,c128*,c128* f16,bool*,f16 f16,i8*,f16 f16,i16*,f16 f16,i32*,f16 f16,i64*,f16
f16,u8*,f16 f16,u16*,f16 f16,u32*,f16 f16,u64*,f16 f16,bf16*,f16 f16,f16*,f16 f16,f32*,f16 f16,f64*,f16
f16,c64*,c64 f16,c128*,c64 f16*,bool,f32* f16*,bool*,f16* f16*,i8,f32* f16*,i8*,f16* f16*,i16,f32*
f16*,i16*,f16* f16*,i32,f32* f16*,i32*,f16* f16*,i64,f32* f16*,i64*,f16* f16*,u8,f32* f16*,u8*,f16*
f16*,u16,f32* f16*,u16*,f16* f16*,u32,f32* f16*,u32*,f16* f16*,u64,f32* f16*,u64*,f16* f16*,bf16,bf16
f16*,bf16*,f32* f16*,f16,f16 f16*,f16*,f16* f16*,f32,f32 f16*,f32*,f32* f16*,f64,f64 f16*,f64*,f64*
f16*,c64,c64 f16*,c64*,c64* f16*,c128,c128 f16*,c128*,c128* f32,bool*,f32 f32,i8*,f32 f32,i16*,f32
f32,i32*,f32 f32,i64*,f32 f32,u8*,f32 f32,u16*,f32 f32,u32*,f32 f32,u64*,f32 f32,bf16*,f32 f32,f16*,f32
f32,f32*,f32 f32,f64*,f32 f32,c64*,c64 f32,c128*,c64 f32*,bool,f32* f32*,bool*,f32* f32*,i8,f32*
f32*,i8*,f32* f32*,i16,f32* f32*,i16*,f32* f32*,i32,f32* f32*,i32*,f32* f32*,i64,f32* f32*,i64*,f32*
f32*,u8,f32* f32*,u8*,f32* f32*,u16,f32* f32*,u16*,f32* f32*,u32,f32* f32*,u32*,f32* f32*,u64,f32*
f32*,u64*,f32* f32*,bf16,bf16 f32*,bf16*,f32* f32*,f16,f16 f32*,f16*,f32* f32*,f32,f32 f32*,f32*,f32*
f32*,f64,f64 f32*,f64*,f64* f32*,c64,c64 f32*,c64*,c64* f32*,c128,c128 f32*,c128*,c128* f64,bool*,f64
f64,i8*,f64 f64,i16*,f64 f64,i32*,f64 f64,i64*,f64 f64,u8*,f64 f64,u16*,f64 f64,u32*,f64 f64,u64*,f64
f64,bf16*,f64 f64,f16*,f64 f64,f32*,f64 f64,f64*,f64 f64,c64*,c128 f64,c128*,c128 f64*,bool,f32*
f64*,bool*,f64* f64*,i8,f32* f64*,i8*,f64* f64*,i16,f32* f64*,i16*,f64* f64*,i32,f32* f64*,i32*,f64*
f64*,i64,f32* f64*,i64*,f64* f64*,u8,f32* f64*,u8*,f64* f64*,u16,f32* f64*,u16*,f64* f64*,u32,f32*
f64*,u32*,f64* f64*,u64,f32* f64*,u64*,f64* f64*,bf16,bf16 f64*,bf16*,f64* f64*,f16,f16 f64*,f16*,f64*
f64*,f32,f32 f64*,f32*,f64* f64*,f64,f64 f64*,f64*,f64* f64*,c64,c64 f64*,c64*,c128* f64*,c128,c128
f64*,c128*,c128* c64,bool*,c64 c64,i8*,c64 c64,i16*,c64 c64,i32*,c64 c64,i64*,c64 c64,u8*,c64 c64,u16*,c64
c64,u32*,c64 c64,u64*,c64 c64,bf16*,c64 c64,f16*,c64 c64,f32*,c64 c64,f64*,c64 c64,c64*,c64 c64,c128*,c64
c64*,bool,c64* c64*,bool*,c64* c64*,i8,c64* c64*,i8*,c64* c64*,i16,c64* c64*,i16*,c64* c64*,i32,c64*
c64*,i32*,c64* c64*,i64,c64* c64*,i64*,c64* c64*,u8,c64* c64*,u8*,c64* c64*,u16,c64* c64*,u16*,c64*
c64*,u32,c64* c64*,u32*,c64* c64*,u64,c64* c64*,u64*,c64* c64*,bf16,c64 c64*,bf16*,c64* c64*,f16,c64
c64*,f16*,c64* c64*,f32,c64 c64*,f32*,c64* c64*,f64,c128 c64*,f64*,c128* c64*,c64,c64 c64*,c64*,c64*
c64*,c128,c128 c64*,c128*,c128* c128,bool*,c128 c128,i8*,c128 c128,i16*,c128 c128,i32*,c128 c128,i64*,c128
c128,u8*,c128 c128,u16*,c128 c128,u32*,c128 c128,u64*,c128 c128,bf16*,c128 c128,f16*,c128 c128,f32*,c128
c128,f64*,c128 c128,c64*,c128 c128,c128*,c128 c128*,bool,c64* c128*,bool*,c128* c128*,i8,c64*
c128*,i8*,c128* c128*,i16,c64* c128*,i16*,c128* c128*,i32,c64* c128*,i32*,c128* c128*,i64,c64*
c128*,i64*,c128* c128*,u8,c64* c128*,u8*,c128* c128*,u16,c64* c128*,u16*,c128* c128*,u32,c64*
c128*,u32*,c128* c128*,u64,c64* c128*,u64*,c128* c128*,bf16,c64 c128*,bf16*,c128* c128*,f16,c64
c128*,f16*,c128* c128*,f32,c64 c128*,f32*,c128* c128*,f64,c128 c128*,f64*,c128* c128*,c64,c64
c128*,c64*,c128* c128*,c128,c128 c128*,c128*,c128*
"""


PROMOTION_CASES = [tuple((dtypes.from_short_name(t.rstrip("*")), t.endswith("*")) for t in entry.split(","))
                   for entry in JAX_WEAK_PROMOTION.split()]


def _operand(dtype, weak):
    return as_array(np.ones((), dtype), weak=True) if weak else np.ones((), dtype)


# kiln's weak values stay weak through any operation on weak values alone, a bool too (JAX's bool is never
# weak): so the weak flag checked is the table's, or both operands'.
def test_weak_promotion_table_matches_jax():
    assert len(PROMOTION_CASES) == 15 * 15 * 3
    for (a, wa), (b, wb), (want, want_weak) in PROMOTION_CASES:
        assert dtypes.result_type((a, wa), (b, wb)) == (want, want_weak), (a, wa, b, wb)
        # traced: the same promotion through kiln.numpy
        out = kiln.eval_shape(knp.add, kiln.ShapeDtypeStruct((), a, weak_type=wa), kiln.ShapeDtypeStruct((), b, weak_type=wb))
        assert (out.dtype, out.weak_type) == (want, want_weak or (wa and wb)), (a, wa, b, wb, out)
        # eagerly: the same, but weak operands alone take numpy's dtype of their kind (docs/numpy.md)
        got = knp.add(_operand(a, wa), _operand(b, wb))
        eager = dtypes.numpy_scalar_dtype(want) if wa and wb else want
        assert (got.dtype, get_aval(got).weak_type) == (eager, want_weak or (wa and wb and want != np.bool_)), \
            (a, wa, b, wb, got.dtype)
        assert got == np.add(np.ones((), eager), np.ones((), eager))


def test_weak_promotion_table_under_jit():
    """The pairs where a weak operand of a higher kind decides the dtype (the table's weak results with a
    strong operand), compiled in one function: weak arguments (weak kiln arrays) are traced weak. eval_shape
    above traces every pair through the same promotion; compiling all 675 would take seconds."""
    cases = [(a, b, r) for a, b, r in PROMOTION_CASES if r[1] and not (a[1] and b[1])]
    assert len(cases) == 2 * (9 * 4 + 9 * 2 + 8)  # ints and bool with weak floats, complexes; bool with weak ints
    kinds = sorted({a for a, _, _ in cases} | {b for _, b, _ in cases}, key=str)
    index = {k: i for i, k in enumerate(kinds)}
    pairs = [(index[a], index[b]) for a, b, _ in cases]
    outs = kiln.jit(lambda *ops: [knp.add(ops[i], ops[j]) for i, j in pairs])(*[_operand(d, w) for d, w in kinds])
    for (a, b, (want, want_weak)), got in zip(cases, outs):
        assert (got.dtype, is_weak(got)) == (want, want_weak), (a, b, got.dtype)
        assert got == np.add(np.ones((), want), np.ones((), want))
