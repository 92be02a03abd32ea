"""Creation functions without dtype= in traced code: numpy's float64/int64 alone, weak (the dtype of the
arrays they meet) combined, so a fori_loop over float32 data keeps its carry float32
(docs/numpy.md, "Default dtypes")."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import lax

D32 = np.array([0.5, -1.0, 2.25], np.float32)

CREATED = {
    "ones": lambda: knp.ones(3), "zeros": lambda: knp.zeros(3), "empty": lambda: knp.empty(3),
    "full": lambda: knp.full(3, 2.0), "full_int": lambda: knp.full(3, 2), "arange": lambda: knp.arange(3),
    "arange_float": lambda: knp.arange(0.0, 1.5, 0.5), "linspace": lambda: knp.linspace(0, 1, 3),
    "eye_row": lambda: knp.eye(3)[1], "identity_row": lambda: knp.identity(3)[2],
}
NUMPY = {
    "ones": lambda: np.ones(3), "zeros": lambda: np.zeros(3), "empty": lambda: np.zeros(3),
    "full": lambda: np.full(3, 2.0), "full_int": lambda: np.full(3, 2), "arange": lambda: np.arange(3),
    "arange_float": lambda: np.arange(0.0, 1.5, 0.5), "linspace": lambda: np.linspace(0, 1, 3),
    "eye_row": lambda: np.eye(3)[1], "identity_row": lambda: np.identity(3)[2],
}


@pytest.mark.parametrize("name", list(CREATED))
def test_alone_numpys_dtype_eagerly_and_under_jit(name):
    expected = NUMPY[name]()
    for got in (CREATED[name](), kiln.jit(CREATED[name])()):
        assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [np.float32, knp.bfloat16, np.float16, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", list(CREATED))
def test_combined_with_a_float_array_under_jit_takes_its_dtype(name, dtype):
    x = D32.astype(dtype)
    got = kiln.jit(lambda x: x + CREATED[name]())(x)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, (x.astype(np.float64) + NUMPY[name]()).astype(dtype))


def test_integer_arange_with_an_int32_array_stays_int32():
    i = np.array([1, 2, 3], np.int32)
    got = kiln.jit(lambda i: i * knp.arange(3))(i)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, i * np.arange(3))


def test_explicit_dtype_is_strong():
    got = kiln.jit(lambda x: x + knp.ones(3, dtype=float))(D32)
    assert got.dtype == np.float64
    got = kiln.jit(lambda x: x + knp.arange(3, dtype=np.int64))(D32)
    assert got.dtype == np.float64


def _body(i, c):
    return c * np.float32(0.5) + knp.ones(3) + knp.zeros(3) + knp.arange(3) + knp.linspace(0, 1, 3) + knp.eye(3)[0] \
        + knp.full(3, 0.25)


def _numpy_loop(c):
    for _ in range(4):
        c = (c.astype(np.float64) * 0.5 + 1 + np.arange(3) + np.linspace(0, 1, 3) + np.eye(3)[0] + 0.25).astype(np.float32)
    return c


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_fori_loop_carry_of_float32_data_keeps_its_dtype(mode):
    """The loop failed before: 'changes carry leaf from f32[3] to f64[3]'."""
    f = lambda d: lax.fori_loop(0, 4, _body, d)  # noqa: E731
    got = f(D32) if mode == "eager" else kiln.jit(f)(D32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _numpy_loop(D32), rtol=1e-6)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_while_loop_and_scan_carries_keep_their_dtype(mode):
    def f(d):
        _, c = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] + knp.ones(3)), (0, d))
        c2, ys = lax.scan(lambda c, x: (c + knp.zeros(3), c[0] + knp.arange(2)), d, None, length=2)
        return c, c2, ys

    c, c2, ys = f(D32) if mode == "eager" else kiln.jit(f)(D32)
    assert c.dtype == c2.dtype == ys.dtype == np.float32
    np.testing.assert_array_equal(c, D32 + 3)
    np.testing.assert_array_equal(ys, np.stack([D32[0] + np.arange(2)] * 2).astype(np.float32))


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_carry_started_from_ones_takes_the_body_dtype(mode):
    """knp.ones(3) as the initial carry is weakly typed (eagerly too: a weak kiln array), so it takes the
    dtype the body gives it, float32 here, as JAX's weak initial carries do."""
    f = lambda d: lax.fori_loop(0, 3, lambda i, c: c * 0.5 + d, knp.ones(3))  # noqa: E731
    got = f(D32) if mode == "eager" else kiln.jit(f)(D32)
    c = np.ones(3, np.float32)
    for _ in range(3):
        c = c * np.float32(0.5) + D32
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, c, rtol=1e-6)


def test_gradient_through_weak_created_arrays():
    g = kiln.jit(kiln.grad(lambda x: knp.sum((x + knp.ones(3)) * knp.arange(3))))(D32)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.arange(3, dtype=np.float32))
