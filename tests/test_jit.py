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
    g = kiln.jit(lambda x, *, k: x * k)
    with pytest.raises(TypeError, match=r"keyword-only argument 'k' is not supported by kiln.jit"):
        g(x, k=1.0)
