"""knp.arange with a float start or step and an integer dtype, against numpy eagerly and under kiln.jit.

numpy takes the length from the float arguments, casts the first two values start and start + step to
the dtype (truncating toward zero) and fills first + i*(second - first), so np.arange(0, 5, 0.5,
dtype=int) is ten zeros."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp

CASES = [
    (0, 5, 0.5, int), (1.5, 7, 1.7, int), (0.9, 5, 1, np.int32), (-3, 3, 0.75, np.int8), (5, 0, -0.5, int),
    (0, 2, 0.3, np.int16), (2.5, 9.1, 2.2, np.int64), (-2.5, 3, 1.25, np.int32), (0.5, 4, 1, np.uint8),
    (2, 10, 3, np.uint8), (10, 2, -3, np.uint8), (3, 0, -0.4, np.int16), (0, 1, 0.1, int), (1e3, 1e3 + 7, 2.5, np.int32),
]


@pytest.mark.parametrize("args", CASES, ids=[str(c) for c in CASES])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_arange_float_step_integer_dtype_is_numpys(args, mode):
    start, stop, step, dtype = args
    expected = np.arange(start, stop, step, dtype=dtype)
    fn = lambda: knp.arange(start, stop, step, dtype=dtype)  # noqa: E731
    got = fn() if mode == "eager" else kiln.jit(fn)()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_the_issue_example():
    got = kiln.jit(lambda: knp.arange(0, 5, 0.5, dtype=int))()
    np.testing.assert_array_equal(got, np.arange(0, 5, 0.5, dtype=int))
    assert got.dtype == np.int64 and not got.any()
