"""numpy.pad's statistic modes, linear_ramp and empty, and einsum's sublist form, against numpy eagerly, under
kiln.jit and through kiln-run; gradients against central differences; every error message."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import eager_and_jit, eager_jit_and_kiln_run, random_array
from references import numerical_grad

RNG = np.random.default_rng(41)
X = random_array(RNG, (3, 5))
XI = RNG.integers(-9, 9, (3, 5)).astype(np.int32)
WIDTHS = ((1, 2), (2, 1))


@pytest.mark.parametrize("mode", ["maximum", "minimum", "mean", "median"])
def test_stat_modes(mode):
    def run(a, stat_length):
        return knp.pad(a, WIDTHS, mode, stat_length=stat_length)

    lengths = (None, 2, ((1, 2), (3, 1)), 10)
    for a in (X, XI, XI.astype(np.int8)):
        eager_and_jit(lambda v: [run(v, s) for s in lengths],
                      lambda v: [np.pad(v, WIDTHS, mode, stat_length=s) for s in lengths], a)
    eager_and_jit(lambda v: knp.pad(v, 2, mode), lambda v: np.pad(v, 2, mode), X[0])


def test_linear_ramp_and_empty():
    ends = (0, 5, ((1, 2), (-3, 4)))
    for a in (X, XI):
        eager_and_jit(lambda v: [knp.pad(v, ((1, 2), (3, 1)), "linear_ramp", end_values=e) for e in ends],
                      lambda v: [np.pad(v, ((1, 2), (3, 1)), "linear_ramp", end_values=e) for e in ends], a)
    eager_and_jit(lambda v: knp.pad(v, 1, "empty")[1:-1, 1:-1], lambda v: v, X)
    eager_and_jit(lambda v: knp.pad(v, 1, "empty"), lambda v: np.pad(v, 1), X)  # kiln's empty is zeros


def test_pad_errors():
    with pytest.raises(ValueError, match="pad: stat_length of 0 yields no value for padding"):
        knp.pad(X, 1, "mean", stat_length=0)
    with pytest.raises(ValueError, match="pad: can't extend empty axis 1 using modes other than 'constant' or 'empty'"):
        knp.pad(np.ones((2, 0)), 1, "maximum")
    with pytest.raises(ValueError, match="pad: `end_values` must be a scalar"):
        knp.pad(X, 1, "linear_ramp", end_values=[1, 2, 3])
    with pytest.raises(ValueError, match="pad: mode 'circular' is not supported; use 'constant'"):
        knp.pad(X, 1, "circular")


def test_pad_gradients():
    x = np.array([0.3, 1.2, -2.5, 0.7, 1.4])
    for mode, kw in (("mean", {"stat_length": 2}), ("maximum", {}), ("median", {"stat_length": 3}),
                     ("linear_ramp", {"end_values": 1.0})):
        f = lambda v: knp.sum(knp.pad(v, (2, 3), mode, **kw) ** 2 * np.arange(10.0))  # noqa: E731
        np.testing.assert_allclose(kiln.grad(f)(x), numerical_grad(f, x), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(kiln.jit(kiln.grad(f))(x), numerical_grad(f, x), rtol=1e-6, atol=1e-8)


def test_einsum_sublist_form():
    a, b, c = random_array(RNG, (2, 3)), random_array(RNG, (3, 4)), random_array(RNG, (2, 4, 3))
    eager_and_jit(lambda p, q: knp.einsum(p, [0, 1], q, [1, 2], [0, 2]), lambda p, q: np.einsum(p, [0, 1], q, [1, 2], [0, 2]), a, b)
    eager_and_jit(lambda p, q: knp.einsum(p, [0, 1], q, [1, 2]), lambda p, q: np.einsum(p, [0, 1], q, [1, 2]), a, b)
    eager_and_jit(lambda p, q: knp.einsum(p, [..., 1], q, [1, 2], [..., 2]), lambda p, q: np.einsum(p, [..., 1], q, [1, 2], [..., 2]), c, b)
    eager_and_jit(lambda p: knp.einsum(p, [30, 30]), lambda p: np.einsum(p, [30, 30]), random_array(RNG, (3, 3)))
    eager_and_jit(lambda p: knp.einsum(p, [0, 1], [1, 0]), lambda p: np.einsum(p, [0, 1], [1, 0]), a)
    f = lambda p: knp.sum(knp.einsum(p, [0, 1], p, [0, 2], [1, 2]) ** 2)  # noqa: E731
    np.testing.assert_allclose(kiln.grad(f)(a), numerical_grad(f, a), rtol=1e-6, atol=1e-8)
    with pytest.raises(TypeError, match=r"einsum: sublist labels must be integers in \[0, 52\) or Ellipsis, got 52"):
        knp.einsum(a, [0, 52])
    with pytest.raises(TypeError, match="einsum: in the sublist form each operand is followed by a list of labels"):
        knp.einsum(a, "ij")
    with pytest.raises(TypeError, match="einsum: the subscripts must be a string or the sublist form"):
        knp.einsum(a)


def test_exported(tmp_path):
    a, b = random_array(RNG, (3, 4), np.float32), random_array(RNG, (4, 2), np.float32)
    eager_jit_and_kiln_run(
        lambda p, q: (knp.pad(p, 1, "mean"), knp.pad(p, ((0, 2), (1, 0)), "median", stat_length=2),
                      knp.pad(p, 2, "linear_ramp", end_values=-1.0), knp.pad(p, (1, 1), "minimum"),
                      knp.einsum(p, [0, 1], q, [1, 2], [2, 0])),
        lambda p, q: (np.pad(p, 1, "mean"), np.pad(p, ((0, 2), (1, 0)), "median", stat_length=2),
                      np.pad(p, 2, "linear_ramp", end_values=-1.0), np.pad(p, (1, 1), "minimum"),
                      np.einsum(p, [0, 1], q, [1, 2], [2, 0])),
        a, b, tmp_path=tmp_path, tol=1e-5)
