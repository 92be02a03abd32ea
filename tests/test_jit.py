"""kiln.jit: compile cache, trees, static arguments, nesting."""
from collections import namedtuple

import numpy as np
import pytest

import kiln
import kiln.numpy as knp


def test_cache_is_keyed_by_abstract_signature():
    f = kiln.jit(lambda x, y: x * y + 1)
    a = np.ones((2, 3), np.float32)
    f(a, a)
    f(a * 2, a * 3)
    assert f.trace_count == 1
    f(np.ones((3, 3), np.float32), np.ones((3, 3), np.float32))
    assert f.trace_count == 2
    f(a.astype(np.float64), a.astype(np.float64))
    assert f.trace_count == 3


def test_trees_in_and_out():
    P = namedtuple("P", "a b")

    @kiln.jit
    def f(p, d):
        return {"sum": p.a + p.b, "scaled": [d["k"] * 2, None]}

    p = P(np.ones(3, np.float32), np.arange(3, dtype=np.float32))
    out = f(p, {"k": np.full((2,), 4.0, np.float32)})
    np.testing.assert_allclose(out["sum"], [1, 2, 3])
    np.testing.assert_allclose(out["scaled"][0], [8, 8])
    assert out["scaled"][1] is None


def test_static_argnums():
    f = kiln.jit(lambda x, n: knp.sum(x, axis=n), static_argnums=(1,))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(f(x, 0), x.sum(0))
    np.testing.assert_allclose(f(x, 1), x.sum(1))
    assert f.trace_count == 2


def test_nested_jit_becomes_a_kernel_call():
    inner = kiln.jit(lambda x: knp.exp(x))
    outer = kiln.jit(lambda x: inner(x) + 1)
    x = np.linspace(-1, 1, 5).astype(np.float32)
    np.testing.assert_allclose(outer(x), np.exp(x) + 1, rtol=1e-6)
    assert "kernel_call" in outer.lower(x)


def test_python_scalar_arguments_are_weak():
    f = kiln.jit(lambda x, s: x * s)
    out = f(np.ones(3, np.float32), 2)
    assert out.dtype == np.float32


def test_returning_inputs_and_constants():
    f = kiln.jit(lambda x: (x, np.float32(7), knp.zeros((2,), np.int32)))
    x = np.arange(3, dtype=np.float32)
    a, b, c = f(x)
    np.testing.assert_array_equal(a, x)
    assert b == 7 and b.dtype == np.float32
    np.testing.assert_array_equal(c, [0, 0])


def test_bad_argument_type_is_reported():
    f = kiln.jit(lambda x: x)
    with pytest.raises(TypeError, match="expected an array"):
        f("hello")


def test_wrong_argument_count_and_keywords_are_reported():
    def scale(x, s=2.0):
        return x * s

    f = kiln.jit(scale)
    x = np.ones(3, np.float32)
    np.testing.assert_allclose(f(x, s=3.0), 3 * x)  # keywords bind like Python's
    with pytest.raises(TypeError, match=r"^scale takes 1 to 2 arguments \(x, s=2.0\), got 3$"):
        f(x, 1.0, 2.0)
    with pytest.raises(TypeError, match=r"^scale takes 1 to 2 arguments \(x, s=2.0\), got 0$"):
        f()
    with pytest.raises(TypeError, match=r"^scale got an unexpected keyword argument 'y'; it takes 1 to 2 arguments"):
        f(x, y=1.0)
    with pytest.raises(TypeError, match=r"^scale got multiple values for argument 'x'"):
        f(x, x=x)
    g = kiln.jit(lambda x, *, k: x * k)  # keyword-only arguments are traced (test_jax_names.py has more)
    np.testing.assert_allclose(g(x, k=np.float32(3)), 3 * x)
    with pytest.raises(TypeError, match=r"^<lambda> is missing the keyword argument 'k'"):
        g(x)


def test_plain_positional_calls_skip_binding_but_not_its_checks():
    """A function of plain positional parameters takes a call of that many arguments directly; any
    other call still goes through the signature check."""
    f = kiln.jit(lambda x, y: x - y)
    a, b = np.float32(5), np.float32(3)
    assert f(a, b) == 2 and f(y=b, x=a) == 2 and f(a, y=b) == 2
    with pytest.raises(TypeError, match=r"^<lambda> takes 2 arguments \(x, y\), got 1$"):
        f(a)
    with pytest.raises(TypeError, match=r"^<lambda> takes 2 arguments \(x, y\), got 3$"):
        f(a, b, b)


def test_big_endian_arguments_run_as_native():
    """Arguments of either byte order give the same results, compiled once (the runtime gets native data)."""
    f = kiln.jit(lambda x, y: (x * 2 + y, knp.sum(x)))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.int64(7)
    native = f(x, y)
    swapped = f(x.astype(">f4"), np.array(7, ">i8"))
    assert f.trace_count == 1
    for a, b in zip(native, swapped):
        assert b.dtype == a.dtype and b.dtype.isnative
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(native[0], x * 2 + 7)
    with pytest.raises(TypeError, match=r"argument leaf 0: expected an array, got ndarray "
                                        r"\(dtype float128 is not supported by kiln"):
        f(np.zeros(3, ">f16"), y)


def test_masked_arrays_are_refused():
    f = kiln.jit(lambda x: x + 1)
    masked = np.ma.masked_array(np.arange(3, dtype=np.float32), mask=[0, 1, 0])
    message = (r"numpy masked arrays are not supported: kiln has no masks and would drop the mask; "
               r"pass np.ma.filled\(x, fill_value\) or x.data")
    with pytest.raises(TypeError, match=r"^<lambda>: argument leaf 0: expected an array, got MaskedArray \(" + message):
        f(masked)
    with pytest.raises(TypeError, match=r"argument leaf 1: .*masked arrays are not supported"):
        kiln.jit(lambda t: t[0] + t[1]["m"])((np.float32(1), {"m": masked}))
    assert f.trace_count == 0
    np.testing.assert_array_equal(f(masked.filled(0)), [1, 1, 3])
    # kiln.numpy's eager functions and constants captured by a trace refuse them too
    for fn in (lambda: knp.exp(masked), lambda: knp.sum(masked), lambda: knp.add(masked, 1),
               lambda: knp.asarray(masked), lambda: knp.concatenate([masked, masked]),
               lambda: kiln.jit(lambda x: x + masked)(np.zeros(3, np.float32))):
        with pytest.raises(TypeError, match=message):
            fn()


def test_python_scalars_take_the_traced_dtype_without_changing_kind():
    f = kiln.jit(lambda x, s: x * s)
    x = np.ones(2, np.float32)
    assert f(x, 2).dtype == np.float32 and f(x, 2.5).tolist() == [2.5, 2.5]
    g = kiln.jit(lambda n: n + 1)
    assert g(2**31 - 1 - 1) == 2**31 - 1
    with pytest.raises(OverflowError, match=r"^<lambda>: argument leaf 0: the Python int 2147483648 does not "
                                            r"fit in int32, the dtype of Python ints; pass .* \(np.int64\(2147483648\)\)"):
        g(2**31)
    assert g(np.int64(2**31)) == 2**31 + 1
