"""bfloat16 (numpy kind "V", not "f") where dtype kinds were tested: tangents through astype(bfloat16) (a
mixed-precision step's casts; the gradient was silently zero), grad of a bfloat16 scalar, the eager references
of conv and reduce_window (bfloat16 was accumulated in int64, giving zeros), and its arrays' repr. Values
recorded from JAX 0.10.2."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import lax

BF16 = knp.bfloat16
W = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
X = np.array([[1.0, 2.0]], np.float32)


def half_precision_loss(w, scale):
    out = (X.astype(BF16) @ w.astype(BF16)).astype(np.float32)
    return knp.sum(out * out) * scale


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_gradients_through_bfloat16_casts(mode):
    grad = kiln.grad(half_precision_loss) if mode == "eager" else kiln.jit(kiln.grad(half_precision_loss))
    g = grad(W, np.float32(1.0))
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [[9, -1], [18, -2]])
    # a loss scale near float32's limit overflows the bfloat16 cotangents, as under JAX
    big = np.float32(2.0 ** 125)
    np.testing.assert_array_equal(np.asarray(grad(W, big)) / big, [[np.inf, -1], [np.inf, -2]])
    f = lambda a: (a.astype(BF16) * 3).astype(np.float32)  # noqa: E731
    assert float(kiln.jvp(f, (np.float32(1.0),), (np.float32(2.0),))[1]) == 6.0


def test_grad_of_a_bfloat16_scalar():
    g = kiln.grad(lambda a: (a * 3).sum())(np.ones(2, BF16))
    assert g.dtype == BF16
    np.testing.assert_array_equal(np.asarray(g).astype(np.float32), [3, 3])


def test_eager_bfloat16_conv_and_reduce_window():
    x = (np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) * 0.3).astype(BF16)
    w = np.full((1, 1, 2, 2), 0.5, BF16)
    want = [[1.5, 2.09375, 2.6875], [3.90625, 4.5, 5.09375], [6.3125, 6.90625, 7.5]]
    for got in (lax.conv(x, w, (1, 1), "VALID"), kiln.jit(lambda x, w: lax.conv(x, w, (1, 1), "VALID"))(x, w)):
        assert got.dtype == BF16
        np.testing.assert_array_equal(np.asarray(got).astype(np.float32)[0, 0], want)
    v = np.arange(6, dtype=np.float32).astype(BF16) * BF16(0.3)
    got = lax.reduce_window(v, BF16(0), lax.add, (2,), (1,), "VALID")
    np.testing.assert_allclose(np.asarray(got).astype(np.float32), [0.3, 0.9, 1.5, 2.1, 2.7], rtol=8e-3)
    xc = np.arange(9, dtype=np.complex64).reshape(1, 1, 3, 3) * (1 + 1j)
    got = lax.conv(xc, np.full((1, 1, 2, 2), 0.5 - 0.25j, np.complex64), (1, 1), "VALID")
    np.testing.assert_array_equal(got[0, 0], [[6 + 2j, 9 + 3j], [15 + 5j, 18 + 6j]])


def test_bfloat16_arrays_print_their_numbers():
    """numpy formats bfloat16 element by element through each element's repr, which for a kiln array was a 0-d
    Array: repr read Array([Array(1.5, dtype=bfloat16), ...])."""
    a = knp.ones((2, 2), BF16) * BF16(1.5)
    assert repr(a) == "Array([[1.5, 1.5],\n       [1.5, 1.5]], dtype=bfloat16)"
    assert str(a) == "[[1.5 1.5]\n [1.5 1.5]]"
    assert repr(knp.ones(2, np.float32)) == "Array([1., 1.], dtype=float32)"
