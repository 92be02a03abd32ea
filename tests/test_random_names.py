"""jax.random's remaining names in kiln.random: key_dtype, and gumbel's mode 'highest' (64 random bits per
float32 draw; JAX's recorded draws are compared in test_random_reference.py), eagerly, under kiln.jit and
through the standalone kiln-run."""
import numpy as np
import pytest

import kiln
import kiln.random as kr
from kiln_tools import kiln_run_exported

KEY = kr.PRNGKey(5)


def test_key_dtype_is_the_dtype_of_keys():
    assert kr.key_dtype() == np.uint32 == kr.key(3).dtype == kr.key_data(kr.split(KEY)).dtype
    assert kr.key_dtype("threefry2x32") == np.uint32
    with pytest.raises(ValueError, match="key_dtype: only the 'threefry2x32' implementation exists, got 'rbg'"):
        kr.key_dtype("rbg")


def test_gumbel_highest_keeps_both_tails():
    """Below 1/2 the uniform is u itself and above 1 - u, each with 24 significant bits from 64 random bits: the
    draws span more than mode 'low' can reach, their mean and variance are Gumbel's (0.5772, pi^2/6)."""
    x = np.asarray(kr.gumbel(KEY, (200000,), mode="highest"))
    assert x.dtype == np.float32 and np.isfinite(x).all()
    assert abs(x.mean() - np.euler_gamma) < 0.01 and abs(x.var() - np.pi ** 2 / 6) < 0.03
    np.testing.assert_allclose(kiln.jit(lambda k: kr.gumbel(k, (1000,), mode="highest"))(KEY),
                               kr.gumbel(KEY, (1000,), mode="highest"), rtol=1e-6, atol=1e-7)
    # float64 and float16: mode 'high' (JAX's rule: 'highest' differs only for float32)
    for dtype in (np.float64, np.float16):
        np.testing.assert_array_equal(kr.gumbel(KEY, (50,), dtype, mode="highest"),
                                      kr.gumbel(KEY, (50,), dtype, mode="high"))


def test_gumbel_highest_through_kiln_run(tmp_path):
    (got,) = kiln_run_exported(lambda k: kr.gumbel(k, (64,), mode="highest"), KEY, tmp_path=tmp_path)
    np.testing.assert_allclose(got, kr.gumbel(KEY, (64,), mode="highest"), rtol=1e-6, atol=1e-7)
