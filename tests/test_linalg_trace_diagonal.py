"""kiln.numpy.linalg.trace/diagonal take the last two axes (numpy.linalg's rule), while kiln.numpy.trace
and diagonal keep numpy's first two; eagerly, under jit and through kiln-run."""
import numpy as np
import pytest

import kiln.numpy as knp
from kiln_tools import eager_and_jit, eager_jit_and_kiln_run, random_array

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (2, 3, 4), (2, 1, 5, 5)], ids=str)
@pytest.mark.parametrize("offset", [0, 1, -2])
def test_last_two_axes(shape, offset):
    x = random_array(RNG, shape)
    eager_and_jit(lambda a: knp.linalg.trace(a, offset=offset), lambda a: np.linalg.trace(a, offset=offset), x)
    eager_and_jit(lambda a: knp.linalg.diagonal(a, offset=offset), lambda a: np.linalg.diagonal(a, offset=offset), x)


def test_numpy_trace_keeps_first_two_axes():
    x = random_array(RNG, (2, 3, 4))
    eager_and_jit(knp.trace, np.trace, x)
    eager_and_jit(knp.diagonal, np.diagonal, x)
    assert knp.linalg.trace(x).shape == (2,) and knp.trace(x).shape == (4,)


def test_integer_trace_dtype():
    x = np.arange(18, dtype=np.int32).reshape(2, 3, 3)
    eager_and_jit(knp.linalg.trace, np.linalg.trace, x)
    eager_and_jit(lambda a: knp.linalg.trace(a, dtype=np.float64), lambda a: np.linalg.trace(a, dtype=np.float64), x)


def test_exported(tmp_path):
    x = random_array(RNG, (2, 3, 3)).astype(np.float32)
    eager_jit_and_kiln_run(lambda a: (knp.linalg.trace(a), knp.linalg.diagonal(a, offset=1)),
                           lambda a: (np.linalg.trace(a), np.linalg.diagonal(a, offset=1)), x, tmp_path=tmp_path)
