"""Python numbers that meet traced arrays stay weak, as in JAX: vmap's unmapped Python number arguments
and Python numbers inside the lists and tuples given to reductions and asarray."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp

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
