"""kiln.nn.initializers: shapes, dtypes, the draws (kiln.random's, scaled as JAX scales them), the fan arithmetic
of variance_scaling against a numpy reference, sample statistics, jit and kiln-run, and error messages."""
import math

import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.nn.initializers as init
import kiln.random as random
from kiln_tools import check_like_numpy, eager_jit_and_kiln_run

KEY = random.PRNGKey(42)


def test_constant_initializers():
    check_like_numpy(init.zeros(KEY, (2, 3)), np.zeros((2, 3), np.float32))
    check_like_numpy(init.ones(KEY, (2,), np.float64), np.ones(2))
    check_like_numpy(init.constant(-7.0)(KEY, (2, 2)), np.full((2, 2), -7.0, np.float32))
    check_like_numpy(init.constant(3, dtype=np.float64)(KEY, 4), np.full(4, 3.0))
    assert kiln.nn.initializers is init


def test_scaled_draws_are_kilns_random_draws():
    u = np.asarray(random.uniform(KEY, (3, 4), np.float32))
    check_like_numpy(init.uniform(2.0)(KEY, (3, 4)), u * np.float32(2.0))
    n = np.asarray(random.normal(KEY, (3, 4), np.float32))
    check_like_numpy(init.normal(0.5)(KEY, (3, 4)), n * np.float32(0.5))
    t = np.asarray(random.truncated_normal(KEY, -1.0, 3.0, (3, 4), np.float64))
    check_like_numpy(init.truncated_normal(0.3, lower=-1.0, upper=3.0)(KEY, (3, 4), np.float64), t * 0.3)


def _fans(shape, in_axis, out_axis, batch_axis):
    size = lambda axes: shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)  # noqa: E731
    field = math.prod(shape) / size(in_axis) / size(out_axis) / size(batch_axis)
    return size(in_axis) * field, size(out_axis) * field


NAMED = {  # name: (scale, mode, distribution)
    "glorot_uniform": (1.0, "fan_avg", "uniform"), "glorot_normal": (1.0, "fan_avg", "truncated_normal"),
    "lecun_uniform": (1.0, "fan_in", "uniform"), "lecun_normal": (1.0, "fan_in", "truncated_normal"),
    "he_uniform": (2.0, "fan_in", "uniform"), "he_normal": (2.0, "fan_in", "truncated_normal"),
}


def _variance_scaling_reference(key, shape, scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                                dtype=np.float32):
    fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
    n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
         "fan_geo_avg": math.sqrt(fan_in * fan_out)}[mode]
    variance = np.asarray(scale / n, dtype)
    if distribution == "uniform":
        return np.asarray(random.uniform(key, shape, dtype, -1)) * np.sqrt(3 * variance)
    if distribution == "normal":
        return np.asarray(random.normal(key, shape, dtype)) * np.sqrt(variance)
    stddev = np.sqrt(variance) / np.asarray(0.87962566103423978, dtype)
    return np.asarray(random.truncated_normal(key, -2, 2, shape, dtype)) * stddev


@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_variance_scaling(name):
    scale, mode, distribution = NAMED[name]
    got = getattr(init, name)()(KEY, (5, 7))
    check_like_numpy(got, _variance_scaling_reference(KEY, (5, 7), scale, mode, distribution).astype(np.float32))
    conv = getattr(init, name)(in_axis=(0, 1, 2), out_axis=3)(KEY, (3, 3, 4, 8), np.float64)
    check_like_numpy(conv, _variance_scaling_reference(KEY, (3, 3, 4, 8), scale, mode, distribution, (0, 1, 2), 3,
                                                       dtype=np.float64))


def test_aliases():
    assert init.xavier_uniform is init.glorot_uniform and init.xavier_normal is init.glorot_normal
    assert init.kaiming_uniform is init.he_uniform and init.kaiming_normal is init.he_normal


def test_variance_scaling_modes_batch_axis_and_statistics():
    got = init.variance_scaling(0.5, "fan_geo_avg", "normal", batch_axis=0)(KEY, (2, 3, 4))
    check_like_numpy(got, _variance_scaling_reference(KEY, (2, 3, 4), 0.5, "fan_geo_avg", "normal",
                                                      batch_axis=0).astype(np.float32))
    for mode, n in (("fan_in", 200), ("fan_out", 300), ("fan_avg", 250)):
        for distribution in ("uniform", "normal", "truncated_normal"):
            w = np.asarray(init.variance_scaling(2.0, mode, distribution)(random.PRNGKey(1), (200, 300)))
            assert abs(w.var() / (2.0 / n) - 1) < 0.03, (mode, distribution, w.var() * n / 2)
            assert abs(w.mean()) < 3 * math.sqrt(2.0 / n / w.size) * 3
    w = np.asarray(init.variance_scaling(1.0, "fan_in", "uniform")(KEY, (100, 50)))
    assert np.all(np.abs(w) < math.sqrt(3 / 100))


def test_half_dtypes_jit_and_kiln_run(tmp_path):
    w = init.glorot_uniform()(KEY, (3, 4), ml_dtypes.bfloat16)
    assert np.asarray(w).dtype == ml_dtypes.bfloat16
    jitted = kiln.jit(lambda k: init.he_normal()(k, (4, 6)))(KEY)
    check_like_numpy(jitted, np.asarray(init.he_normal()(KEY, (4, 6))), tol=1e-6)
    eager_jit_and_kiln_run(lambda k: init.lecun_uniform()(k, (3, 5)),
                           lambda k: np.asarray(init.lecun_uniform()(k, (3, 5))), np.asarray(KEY), tmp_path=tmp_path)


def test_errors():
    with pytest.raises(ValueError, match="variance_scaling: invalid mode 'fan_max'"):
        init.variance_scaling(1.0, "fan_max", "normal")
    with pytest.raises(ValueError, match="variance_scaling: invalid distribution 'cauchy'"):
        init.variance_scaling(1.0, "fan_in", "cauchy")
    with pytest.raises(ValueError, match="variance_scaling: can't compute input and output sizes of a 1-dimensional"):
        init.glorot_normal()(KEY, (5,))
    with pytest.raises(TypeError, match="normal initializer: dtype must be floating-point; got int32"):
        init.normal()(KEY, (2,), np.int32)


def test_orthogonal(tmp_path):
    for shape, axis in (((5, 3), -1), ((3, 5), -1), ((4, 2, 3), 0), ((6, 6), -1)):
        w = np.asarray(init.orthogonal(scale=2.0, column_axis=axis)(KEY, shape, np.float64))
        flat = np.moveaxis(w, axis, -1).reshape(-1, shape[axis])
        gram = flat.T @ flat if flat.shape[0] >= flat.shape[1] else flat @ flat.T
        np.testing.assert_allclose(gram, 4.0 * np.eye(gram.shape[0]), atol=1e-12)
    # the Q of the QR of kiln.random's normal draws with R's diagonal made positive (Mezzadri), as JAX
    z = np.asarray(random.normal(KEY, (5, 3), np.float64))
    q, r = np.linalg.qr(z)
    check_like_numpy(init.orthogonal()(KEY, (5, 3), np.float64), q * np.sign(np.diag(r)), tol=1e-12)
    eager_jit_and_kiln_run(lambda k: init.orthogonal()(k, (4, 3)), lambda k: np.asarray(init.orthogonal()(k, (4, 3))),
                           np.asarray(KEY), tmp_path=tmp_path, tol=1e-5)
    check_like_numpy(init.orthogonal()(KEY, (0, 3)), np.zeros((0, 3), np.float32))
    with pytest.raises(ValueError, match=r"orthogonal initializer requires at least a 2-D shape; got \(3,\)"):
        init.orthogonal()(KEY, (3,))


def test_delta_orthogonal():
    for shape in ((3, 2, 4), (2, 3, 3, 3), (3, 3, 3, 1, 2)):
        w = np.asarray(init.delta_orthogonal(scale=2.0)(KEY, shape, np.float64))
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        np.testing.assert_allclose(w[centre], np.asarray(init.orthogonal(2.0)(KEY, shape[-2:], np.float64)),
                                   rtol=1e-12)
        rest = w.copy()
        rest[centre] = 0
        assert not rest.any()
    with pytest.raises(ValueError, match=r"delta_orthogonal initializer requires a 3-D, 4-D or 5-D shape; got \(3, 3\)"):
        init.delta_orthogonal()(KEY, (3, 3))
    with pytest.raises(ValueError, match="delta_orthogonal initializer: fan_in 4 must be less than or equal to fan_out 2"):
        init.delta_orthogonal()(KEY, (3, 4, 2))
