"""Python numbers given alone to kiln.numpy functions: numpy's dtype and value eagerly, JAX's weak
float32/int32 under kiln.jit (docs/numpy.md, "Python scalars and operators")."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp

# (kiln.numpy function name, arguments): numpy's function of the same name is the reference
ALONE = [
    ("sqrt", (2.0,)), ("sqrt", (2,)), ("exp", (1e-10,)), ("log", (3.0,)), ("tanh", (0.5,)), ("sin", (1.0,)),
    ("arctan2", (1.0, 3.0)), ("log1p", (1e-10,)), ("expm1", (1e-10,)), ("float_power", (2, 0.5)),
    ("add", (1, 2)), ("add", (1.0, 2)), ("add", (True, True)), ("add", (2**40, 1)), ("subtract", (0.1, 0.3)),
    ("multiply", (3, 7)), ("divide", (1, 3)), ("power", (2, 3)), ("power", (2.0, 0.5)), ("maximum", (1, 2.5)),
    ("square", (3,)), ("negative", (3.0,)), ("absolute", (-2,)), ("floor", (2.5,)), ("remainder", (7, 3)),
    ("where", (True, 1.0, 2)), ("clip", (1.5, 0, 1)), ("less", (1, 2.0)), ("sign", (-0.1,)),
]


def _case_id(case):
    name, args = case
    return f"{name}{args}"


@pytest.mark.parametrize("case", ALONE, ids=[_case_id(c) for c in ALONE])
def test_python_numbers_alone_give_numpys_dtype_and_value_eagerly(case):
    name, args = case
    expected = np.asarray(getattr(np, name)(*args))
    got = getattr(knp, name)(*args)
    assert isinstance(got, np.ndarray)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected)  # float64 throughout: no float32 rounding


def _jax_weak_dtype(numpy_dtype):
    """JAX's dtype for a weak result of this kind: Python numbers under tracing stay float32/int32."""
    return {"f": np.float32, "i": np.int32, "b": np.bool_}[np.dtype(numpy_dtype).kind]


@pytest.mark.parametrize("case", ALONE, ids=[_case_id(c) for c in ALONE])
def test_python_numbers_alone_are_jax_weak_dtypes_under_jit(case):
    name, args = case
    if name == "add" and args == (2**40, 1):
        # a Python int that does not fit int32 is an error under tracing, as in JAX
        with pytest.raises(OverflowError):
            kiln.jit(lambda: getattr(knp, name)(*args))()
        return
    expected = np.asarray(getattr(np, name)(*args))
    got = kiln.jit(lambda: getattr(knp, name)(*args))()
    want = np.dtype(np.float64) if name == "float_power" else np.dtype(_jax_weak_dtype(expected.dtype))
    assert got.dtype == want, (got.dtype, want)
    np.testing.assert_allclose(got, expected.astype(want), rtol=1e-6)


def test_precision_is_float64_eagerly():
    assert knp.exp(1e-10) - 1.0 == np.exp(1e-10) - 1.0 != 0.0
    assert knp.subtract(knp.add(0.1, 0.2), 0.3) == np.subtract(np.add(0.1, 0.2), 0.3)
    assert knp.add(2**40, 1) == 2**40 + 1


def test_python_number_with_an_array_stays_weak_in_both_modes():
    x32 = np.arange(3, dtype=np.float32)
    i32 = np.arange(3, dtype=np.int32)
    for fn in (lambda x, i: knp.multiply(x, 2.0), lambda x, i: knp.add(i, 1.5), lambda x, i: knp.maximum(i, 1)):
        eager, jitted = fn(x32, i32), kiln.jit(fn)(x32, i32)
        assert eager.dtype == jitted.dtype
        np.testing.assert_array_equal(eager, jitted)
    assert knp.add(i32, 1).dtype == np.int32 and knp.multiply(x32, 2.0).dtype == np.float32


def test_lone_python_number_combined_with_an_array_under_jit():
    """Under jit the lone number's result is float32; combined with a float32 array it stays float32."""
    x32 = np.arange(3, dtype=np.float32)
    got = kiln.jit(lambda x: x * knp.sqrt(2.0))(x32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, x32 * np.float32(np.sqrt(2.0)))


def test_lone_python_number_result_is_weak_under_jit():
    """As in JAX: bf16_array * knp.sqrt(2.0) stays bfloat16 under jit (eagerly numpy's float64 decides)."""
    b = np.ones(2, knp.bfloat16)
    got = kiln.jit(lambda b: b * knp.sqrt(2.0))(b)
    assert got.dtype == knp.bfloat16
    np.testing.assert_array_equal(got, (b * np.float32(np.sqrt(2.0))).astype(knp.bfloat16))
