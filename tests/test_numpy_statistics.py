"""kiln.numpy's statistics (nan* reductions, average, quantiles, ptp, cov, corrcoef, histogram, bincount,
digitize, count_nonzero) against numpy: values, dtypes and shapes eagerly, under kiln.jit and through kiln-run;
gradients against central differences; every error path with its message."""
import warnings

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run, random_array
from references import numerical_grad

RNG = np.random.default_rng(9)
FLOATS = [np.float32, np.float64]


def _quiet(fn):
    """numpy's reference without its all-NaN / empty-slice RuntimeWarnings (kiln gives the same NaNs silently)."""
    def run(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*args)
    return run


def _with_nans(dtype, shape=(3, 4)):
    x = random_array(RNG, shape, dtype)
    x[0, 1] = np.nan
    x[2, :] = np.nan  # an all-NaN row
    return x


# ----------------------------------------------------------------------------- nan* reductions

NAN_REDUCTIONS = ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin", "nanmedian"]


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_reductions_skip_nans(dtype):
    x = _with_nans(dtype)
    forms = [(name, axis, keep) for name in NAN_REDUCTIONS
             for axis, keep in [(None, False), (0, False), (1, True), ((0, 1), False)]]

    def run(lib, a):
        return tuple(getattr(lib, name)(a, axis=axis, keepdims=keep) for name, axis, keep in forms)

    eager_and_jit(lambda a: run(knp, a), _quiet(lambda a: run(np, a)), x)


def test_nan_reductions_of_integers_are_the_plain_ones():
    x = random_array(RNG, (3, 4), np.int32)
    names = NAN_REDUCTIONS + ["nancumsum", "nancumprod"]
    eager_and_jit(lambda a: tuple(getattr(knp, name)(a, axis=0) for name in names),
                  lambda a: tuple(getattr(np, name)(a, axis=0) for name in names), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_cumulative(dtype):
    x = _with_nans(dtype)
    for name in ("nancumsum", "nancumprod"):
        eager_and_jit(lambda a: getattr(knp, name)(a, axis=1), lambda a: getattr(np, name)(a, axis=1), x)
        eager_and_jit(lambda a: getattr(knp, name)(a), lambda a: getattr(np, name)(a), x)


def test_nanvar_ddof_and_dtype():
    x = _with_nans(np.float32, (3, 5))
    x[1, :4] = np.nan  # one number left: ddof=1 gives NaN, as numpy
    eager_and_jit(lambda a: knp.nanvar(a, axis=1, ddof=1), _quiet(lambda a: np.nanvar(a, axis=1, ddof=1)), x)
    eager_and_jit(lambda a: knp.nanstd(a, axis=0, ddof=1, dtype=np.float64),
                  _quiet(lambda a: np.nanstd(a, axis=0, ddof=1, dtype=np.float64)), x, tol=1e-7)  # numpy centers in float32
    eager_and_jit(lambda a: knp.nanmean(a, dtype=np.float64), lambda a: np.nanmean(a, dtype=np.float64), x)


def test_nan_reductions_where():
    x = _with_nans(np.float64)
    mask = RNG.random((3, 4)) > 0.3
    eager_and_jit(lambda a: knp.nansum(a, axis=1, where=mask), lambda a: np.nansum(a, axis=1, where=mask), x)
    eager_and_jit(lambda a: knp.nanmean(a, axis=0, where=mask), _quiet(lambda a: np.nanmean(a, axis=0, where=mask)), x)
    eager_and_jit(lambda a: knp.nanvar(a, axis=0, where=mask), _quiet(lambda a: np.nanvar(a, axis=0, where=mask)), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nanargmax_nanargmin(dtype):
    x = random_array(RNG, (3, 4), dtype)
    x[0, 1] = x[1, 0] = np.nan
    for name in ("nanargmax", "nanargmin"):
        for axis, keepdims in [(None, False), (0, False), (1, True)]:
            eager_and_jit(lambda a: getattr(knp, name)(a, axis=axis, keepdims=keepdims),
                          lambda a: getattr(np, name)(a, axis=axis, keepdims=keepdims), x)


def test_nanargmax_all_nan_slice():
    x = np.array([[1.0, np.nan], [np.nan, np.nan]])
    with pytest.raises(ValueError, match="nanargmax: All-NaN slice encountered"):
        knp.nanargmax(x, axis=1)
    with pytest.raises(ValueError, match="nanargmin: All-NaN slice encountered"):
        knp.nanargmin(x, axis=0)
    assert knp.nanargmin(x) == 0  # the flattened array has a number
    np.testing.assert_array_equal(kiln.jit(lambda a: knp.nanargmax(a, axis=1))(x), [0, -1])  # JAX's -1


def test_nan_extremes_of_empty_slices_raise():
    with pytest.raises(ValueError, match="nanmax: zero-size array"):
        knp.nanmax(np.zeros((0, 3)), axis=0)
    with pytest.raises(ValueError, match="nanargmin: zero-size array"):
        knp.nanargmin(np.zeros((2, 0)), axis=1)
    with pytest.raises(NotImplementedError, match="nanmax: out= is not supported"):
        knp.nanmax(np.ones(3), out=np.ones(()))


def test_nanmean_gradient_is_finite_and_matches_differences():
    x = random_array(RNG, (3, 4))
    x[0, 1] = x[2, 3] = np.nan

    def f(a):
        return knp.sum(knp.nanmean(a, axis=1) ** 2) + knp.sum(knp.nanstd(a, axis=0) * knp.nanmax(a, axis=0))

    mask = np.isnan(x)
    want = numerical_grad(lambda v: f(np.where(mask, np.nan, v)), np.where(mask, 0.0, x))
    for g in (kiln.grad(f)(x), kiln.jit(kiln.grad(f))(x)):
        np.testing.assert_allclose(g, want, atol=1e-6)


# ----------------------------------------------------------------------------- quantiles

METHODS = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("dtype", FLOATS + [np.int32])
def test_quantile_methods(dtype):
    x = random_array(RNG, (4, 3, 5), dtype)
    forms = [(method, q, axis, keep) for method in METHODS for q, axis, keep in [
        (0.5, None, False), ([0.0, 0.25, 0.6, 1.0], (0, 2), True), (np.array([[0.1], [0.9]], np.float32), -1, False),
        (0.3, 1, True)]]

    def run(lib, a):
        return tuple(lib.quantile(a, q, axis=axis, method=method, keepdims=keep) for method, q, axis, keep in forms)

    eager_and_jit(lambda a: run(knp, a), lambda a: run(np, a), x)


def test_percentile_and_nan_variants():
    x = _with_nans(np.float64, (3, 7))

    def run(lib, a):
        return tuple(out for method in METHODS for out in (
            lib.percentile(a, [10, 50, 95], axis=1, method=method),
            lib.nanpercentile(a, [10, 50, 95], axis=1, method=method),
            lib.nanquantile(a, 0.3, axis=0, method=method, keepdims=True)))

    eager_and_jit(lambda a: run(knp, a), _quiet(lambda a: run(np, a)), x)


def test_median_dtypes_and_nans():
    arrays = [random_array(RNG, (4, 5), dtype) for dtype in (np.float16, np.float32, np.float64, np.int8, np.int64)]
    arrays += [_with_nans(np.float32), np.zeros((0,), np.float32)]

    def run(lib, *xs):
        *plain, nans, empty = xs
        return (*(m for x in plain for m in (lib.median(x, axis=0), lib.median(x, keepdims=True))),
                lib.median(nans, axis=1), lib.nanmedian(nans, axis=(0, 1)), lib.median(empty))

    eager_and_jit(lambda *xs: run(knp, *xs), _quiet(lambda *xs: run(np, *xs)), *arrays)


def test_quantile_with_traced_q():
    x = random_array(RNG, (6,), np.float64)
    q = np.array([0.2, 0.75])
    check_like_numpy(kiln.jit(lambda a, p: knp.quantile(a, p))(x, q), np.quantile(x, q))
    check_like_numpy(kiln.jit(lambda a, p: knp.percentile(a, p, method="nearest"))(x, q * 100),
                     np.percentile(x, q * 100, method="nearest"))


def test_quantile_gradient():
    x = random_array(RNG, (3, 5), np.float64)

    def f(a):
        return knp.sum(knp.quantile(a, [0.3, 0.5, 0.9], axis=1) ** 2) + knp.median(a) + knp.nanpercentile(a, 40)

    want = numerical_grad(f, x)
    np.testing.assert_allclose(kiln.grad(f)(x), want, atol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(x), want, atol=1e-6)


def test_quantile_errors():
    x = np.arange(5.0)
    with pytest.raises(ValueError, match=r"quantile: q must be in the range \[0, 1\]"):
        knp.quantile(x, 1.5)
    with pytest.raises(ValueError, match=r"percentile: q must be in the range \[0, 100\]"):
        knp.percentile(x, [-1, 50])
    with pytest.raises(ValueError, match="quantile: method must be one of .*got 'hazen'"):
        knp.quantile(x, 0.5, method="hazen")
    with pytest.raises(NotImplementedError, match="quantile: weights= is not supported"):
        knp.quantile(x, 0.5, weights=np.ones(5))
    with pytest.raises(NotImplementedError, match="median: out= is not supported"):
        knp.median(x, out=np.zeros(()))
    with pytest.raises(ValueError, match="nanquantile: axis 2 is out of bounds"):
        knp.nanquantile(x, 0.5, axis=2)


# ----------------------------------------------------------------------------- average, ptp, count_nonzero


@pytest.mark.parametrize("dtype", FLOATS + [np.int32])
def test_average(dtype):
    x = random_array(RNG, (3, 4, 2), dtype)
    eager_and_jit(lambda a: knp.average(a), lambda a: np.average(a), x)
    eager_and_jit(lambda a: knp.average(a, axis=1, returned=True), lambda a: np.average(a, axis=1, returned=True), x)
    w = RNG.random((3, 4, 2)).astype(np.float32)
    eager_and_jit(lambda a, b: knp.average(a, axis=(0, 2), weights=b, returned=True, keepdims=True),
                  lambda a, b: np.average(a, axis=(0, 2), weights=b, returned=True, keepdims=True), x, w)
    w1 = np.array([1, 2, 0, 3])
    eager_and_jit(lambda a: knp.average(a, axis=1, weights=w1, returned=True),
                  lambda a: np.average(a, axis=1, weights=w1, returned=True), x)
    w2 = RNG.random((2, 3))
    eager_and_jit(lambda a: knp.average(a, axis=(2, 0), weights=w2), lambda a: np.average(a, axis=(2, 0), weights=w2), x)


def test_average_gradient():
    x, w = random_array(RNG, (3, 4)), RNG.random(4) + 0.5

    def f(a, b):
        return knp.sum(knp.average(a, axis=1, weights=b) ** 2)

    for argnum, arg in ((0, x), (1, w)):
        want = numerical_grad(lambda v: f(v, w) if argnum == 0 else f(x, v), arg)
        np.testing.assert_allclose(kiln.grad(f, argnums=argnum)(x, w), want, atol=1e-6)
        np.testing.assert_allclose(kiln.jit(kiln.grad(f, argnums=argnum))(x, w), want, atol=1e-6)


def test_average_errors():
    x = np.ones((2, 3))
    with pytest.raises(ZeroDivisionError, match="average: weights sum to zero"):
        knp.average(x, axis=1, weights=np.zeros(3))
    with pytest.raises(TypeError, match="average: axis must be specified when shapes of a and weights differ"):
        knp.average(x, weights=np.ones(3))
    with pytest.raises(ValueError, match=r"average: shape of weights \(2,\) must match the shape of a along axis 1"):
        knp.average(x, axis=1, weights=np.ones(2))
    with pytest.raises(ValueError, match="average: axis 3 is out of bounds"):
        knp.average(x, axis=3, weights=np.ones(2))


def test_ptp_and_count_nonzero():
    x = random_array(RNG, (3, 4), np.int8)
    eager_and_jit(lambda a: knp.ptp(a), lambda a: np.ptp(a), x)
    eager_and_jit(lambda a: knp.ptp(a, axis=1, keepdims=True), lambda a: np.ptp(a, axis=1, keepdims=True), x)
    f = random_array(RNG, (3, 4), np.float32)
    eager_and_jit(lambda a: knp.ptp(a, axis=0), lambda a: np.ptp(a, axis=0), f)
    for arr in (x, f, x > 0):
        eager_and_jit(knp.count_nonzero, np.count_nonzero, arr)
        eager_and_jit(lambda a: knp.count_nonzero(a, axis=0), lambda a: np.count_nonzero(a, axis=0), arr)
        eager_and_jit(lambda a: knp.count_nonzero(a, axis=(0, 1), keepdims=True),
                      lambda a: np.count_nonzero(a, axis=(0, 1), keepdims=True), arr)


# ----------------------------------------------------------------------------- cov and corrcoef


@pytest.mark.parametrize("dtype", FLOATS + [np.int32])
def test_cov(dtype):
    m = random_array(RNG, (3, 6), dtype)
    eager_and_jit(lambda a: (knp.cov(a), knp.cov(a[0], a[1])), lambda a: (np.cov(a), np.cov(a[0], a[1])), m)


def test_cov_forms():
    m = random_array(RNG, (3, 6))

    def run(lib, a):  # cov(a[0]): one variable, a 0-d result
        return (lib.cov(a, rowvar=False, bias=True), lib.cov(a, ddof=0), lib.cov(a[0]), lib.cov(a, dtype=np.float32))

    eager_and_jit(lambda a: run(knp, a), lambda a: run(np, a), m)


def test_cov_weights():
    m = random_array(RNG, (2, 5))
    f, w = np.array([1, 2, 1, 3, 1]), np.array([0.5, 1.0, 2.0, 0.1, 1.0])

    def run(lib, a, b):
        return (lib.cov(a, fweights=f), lib.cov(a, aweights=w, ddof=0), lib.cov(a, fweights=f, aweights=b, ddof=2),
                lib.cov(a, fweights=f, aweights=b))

    eager_and_jit(lambda a, b: run(knp, a, b), lambda a, b: run(np, a, b), m, w)


def test_corrcoef():
    m = random_array(RNG, (3, 6), np.float32)

    def run(lib, a):
        return lib.corrcoef(a), lib.corrcoef(a.T, rowvar=False), lib.corrcoef(a[0], a[2]), lib.corrcoef(a[0])

    eager_and_jit(lambda a: run(knp, a), lambda a: run(np, a), m)


def test_cov_and_corrcoef_gradients():
    m = random_array(RNG, (2, 5))
    w = np.array([0.5, 1.0, 2.0, 0.1, 1.0])

    def f(a):
        return knp.sum(knp.cov(a, aweights=w) ** 2) + knp.corrcoef(a)[0, 1]

    want = numerical_grad(f, m)
    np.testing.assert_allclose(kiln.grad(f)(m), want, atol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(m), want, atol=1e-6)


def test_cov_errors():
    m = np.ones((2, 4))
    with pytest.raises(ValueError, match="cov: m has more than 2 dimensions"):
        knp.cov(np.ones((2, 2, 2)))
    with pytest.raises(TypeError, match="cov: fweights must be integer"):
        knp.cov(m, fweights=np.ones(4))
    with pytest.raises(ValueError, match="cov: fweights cannot be negative"):
        knp.cov(m, fweights=np.array([1, -1, 1, 1]))
    with pytest.raises(ValueError, match="cov: aweights cannot be negative"):
        knp.cov(m, aweights=np.array([1.0, -1, 1, 1]))
    with pytest.raises(RuntimeError, match=r"cov: incompatible numbers of samples \(4\) and aweights \(3\)"):
        knp.cov(m, aweights=np.ones(3))
    with pytest.raises(RuntimeError, match="cov: cannot handle multidimensional fweights"):
        knp.cov(m, fweights=np.ones((4, 1), np.int64))
    with pytest.raises(ValueError, match="cov: ddof must be an integer"):
        knp.cov(m, ddof=0.5)
    with pytest.raises(ValueError, match="cov: m and y have different numbers of observations"):
        knp.cov(m, np.ones((1, 3)))
    with pytest.raises(ValueError, match="cov: y has more than 2 dimensions"):
        knp.cov(m, np.ones((2, 2, 4)))
    with pytest.raises(ValueError, match="corrcoef: x has more than 2 dimensions"):
        knp.corrcoef(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="corrcoef: y has more than 2 dimensions"):
        knp.corrcoef(m, np.ones((2, 2, 4)))


# ----------------------------------------------------------------------------- bincount, digitize, histogram


def test_bincount():
    x = np.array([0, 1, 1, 3, 2, 1, 7], np.int32)
    w = RNG.random(7).astype(np.float32)
    check_like_numpy(knp.bincount(x), np.bincount(x))
    check_like_numpy(knp.bincount(x, w, minlength=10), np.bincount(x, w, minlength=10))
    check_like_numpy(knp.bincount(x > 1), np.bincount(x > 1))
    check_like_numpy(knp.bincount(np.zeros(0, np.int64), minlength=3), np.bincount(np.zeros(0, np.int64), minlength=3))
    eager_and_jit(lambda a: knp.bincount(a, length=9), lambda a: np.bincount(a, minlength=9), x)
    eager_and_jit(lambda a, b: knp.bincount(a, b, length=8), lambda a, b: np.bincount(a, b, minlength=8), x, w)
    # length= is the exact length, as in JAX: larger values are dropped
    eager_and_jit(lambda a: knp.bincount(a, length=3), lambda a: np.bincount(a)[:3], x)
    # traced negative values count in bin 0 (JAX)
    np.testing.assert_array_equal(kiln.jit(lambda a: knp.bincount(a, length=3))(np.array([-2, 1, 0])), [2, 1, 0])


def test_bincount_weights_gradient():
    x = np.array([0, 2, 2, 1])
    w = RNG.random(4)

    def f(b):
        return knp.sum(knp.bincount(x, b, length=3) ** 2)

    want = numerical_grad(f, w)
    np.testing.assert_allclose(kiln.grad(f)(w), want, atol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(w), want, atol=1e-6)


def test_bincount_errors():
    with pytest.raises(knp.DataDependentShapeError, match="bincount on a traced array .*length=N"):
        kiln.jit(knp.bincount)(np.array([1, 2]))
    with pytest.raises(ValueError, match="bincount: x must not hold negative values"):
        knp.bincount(np.array([1, -1]))
    with pytest.raises(TypeError, match="bincount: x must be an array of non-negative integers, got float64"):
        knp.bincount(np.array([1.0]))
    with pytest.raises(ValueError, match="bincount: x must be 1-dimensional"):
        knp.bincount(np.ones((2, 2), np.int64))
    with pytest.raises(ValueError, match="bincount: weights must have x's shape"):
        knp.bincount(np.array([1, 2]), np.ones(3))
    with pytest.raises(ValueError, match="bincount: minlength must be non-negative"):
        knp.bincount(np.array([1, 2]), minlength=-1)
    with pytest.raises(ValueError, match="bincount: size must be >= 0"):
        knp.bincount(np.array([1, 2]), length=-1)


def test_digitize():
    x = np.array([-2.0, -1.0, 0.0, 0.2, 0.5, 1.9, 2.0, 5.0, np.nan])
    ints = np.array([0, 3, 7, 10])
    bins = (np.array([-1.0, 0.0, 0.5, 2.0]), np.array([2.0, 0.5, 0.0, -1.0]), np.array([0.0, 0.0, 1.0]))

    def run(lib, a, i, *traced_bins):  # the same bins concrete (numpy's direction check) and as arguments
        return tuple(lib.digitize(v, b, right=right) for right in (False, True)
                     for v, b in [(a, b) for b in bins + traced_bins] + [(i, np.array([1, 5, 9]))])

    eager_and_jit(lambda *xs: run(knp, *xs), lambda *xs: run(np, *xs), x, ints, *bins)


def test_digitize_errors():
    with pytest.raises(ValueError, match="digitize: bins must be monotonically increasing or decreasing"):
        knp.digitize(np.ones(2), np.array([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="digitize: bins must be 1-dimensional"):
        knp.digitize(np.ones(2), np.ones((2, 2)))


@pytest.mark.parametrize("dtype", FLOATS + [np.int32])
def test_histogram(dtype):
    x = random_array(RNG, (4, 6), dtype)
    w = RNG.random((4, 6)).astype(np.float32)
    edges = np.array([-3.0, -0.5, 0.0, 0.0, 1.0, 2.0])

    def run(lib, a, b):
        return (*lib.histogram(a), *lib.histogram(a, bins=7, range=(-1, 1.5)), *lib.histogram(a, bins=5, weights=b),
                *lib.histogram(a, bins=4, density=True), *lib.histogram(a, bins=edges))

    eager_and_jit(lambda a, b: run(knp, a, b), lambda a, b: run(np, a, b), x, w)
    eager_and_jit(lambda a, e: knp.histogram(a, bins=e, density=True), lambda a, e: np.histogram(a, bins=e, density=True),
                  x, np.array([-1.0, 0.0, 0.5, 2.0]))
    eager_and_jit(lambda a: knp.histogram_bin_edges(a, bins=6), lambda a: np.histogram_bin_edges(a, bins=6), x)


def test_histogram_special_inputs():
    constant = np.full(5, 3.0, np.float32)
    eager_and_jit(lambda a: knp.histogram(a, bins=3), lambda a: np.histogram(a, bins=3), constant)
    with_nan = np.array([0.0, np.nan, 1.0, 2.0])
    eager_and_jit(lambda a: knp.histogram(a, bins=2, range=(0, 2)), lambda a: np.histogram(a, bins=2, range=(0, 2)), with_nan)
    eager_and_jit(lambda a: knp.histogram(a, bins=2), lambda a: np.histogram(a, bins=2), np.zeros(0))
    x = random_array(RNG, (50,))
    check_like_numpy(knp.histogram(x, bins="auto"), np.histogram(x, bins="auto"))
    check_like_numpy(knp.histogram_bin_edges(x, bins="sturges"), np.histogram_bin_edges(x, bins="sturges"))


def test_histogram_weights_gradient():
    x = random_array(RNG, (8,))
    w = RNG.random(8)

    def f(b):
        counts, _ = knp.histogram(x, bins=3, weights=b, density=True)
        return knp.sum(counts ** 2)

    want = numerical_grad(f, w)
    np.testing.assert_allclose(kiln.grad(f)(w), want, atol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(w), want, atol=1e-6)


def test_histogram_errors():
    x = np.arange(4.0)
    with pytest.raises(TypeError, match="histogram: bins='auto' chooses the number of bins from the data"):
        kiln.jit(lambda a: knp.histogram(a, bins="auto"))(x)
    with pytest.raises(ValueError, match="histogram: bins must be positive, when an integer"):
        knp.histogram(x, bins=0)
    with pytest.raises(TypeError, match="histogram: bins must be an integer, a string, or an array"):
        knp.histogram(x, bins=2.5)
    with pytest.raises(ValueError, match="histogram: bins must increase monotonically, when an array"):
        knp.histogram(x, bins=np.array([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="histogram: max must be larger than min in range parameter"):
        knp.histogram(x, range=(2, 1))
    with pytest.raises(ValueError, match=r"histogram: supplied range of \[0.0, inf\] is not finite"):
        knp.histogram(x, range=(0, np.inf))
    with pytest.raises(ValueError, match=r"histogram: autodetected range of \[.*\] is not finite"):
        knp.histogram(np.array([0.0, np.nan]))
    with pytest.raises(TypeError, match=r"histogram: range must be concrete \(Python numbers\)"):
        kiln.jit(lambda a, hi: knp.histogram(a, range=(0.0, hi)))(x, np.float64(3))
    with pytest.raises(ValueError, match="histogram: bins must hold at least two edges"):
        knp.histogram(x, bins=np.array([1.0]))
    with pytest.raises(ValueError, match="histogram: weights should have the same shape as a"):
        knp.histogram(x, weights=np.ones(3))
    with pytest.raises(ValueError, match="histogram_bin_edges: bins must be 1-dimensional"):
        knp.histogram_bin_edges(x, bins=np.ones((2, 2)))


def _flat(results):
    """histogramdd's (hist, [edges, ...]) as one flat tuple, for check_like_numpy."""
    hist, edges = results
    return (hist, *edges)


def test_histogram2d():
    x, y = random_array(RNG, (20,), np.float32), random_array(RNG, (20,), np.float32)
    w = RNG.random(20)
    shared_edges = np.array([-1.0, 0.0, 0.5, 1.0])

    def run(lib, x, y, w):
        return (*lib.histogram2d(x, y), *lib.histogram2d(x, y, bins=(3, 4), weights=w, density=True),
                *lib.histogram2d(x, y, bins=[np.array([-1.0, 0.0, 1.0]), 3], range=[None, (-1, 2)]),
                *lib.histogram2d(x, y, bins=shared_edges))

    eager_and_jit(lambda *a: run(knp, *a), lambda *a: run(np, *a), x, y, w)


def test_histogramdd():
    points = RNG.integers(0, 5, (30, 3))
    eager_and_jit(lambda s: _flat(knp.histogramdd(s, bins=(2, 3, 4))), lambda s: _flat(np.histogramdd(s, bins=(2, 3, 4))),
                  points)
    x = random_array(RNG, (15,))
    eager_and_jit(lambda a: _flat(knp.histogramdd(a, bins=5, density=True)),
                  lambda a: _flat(np.histogramdd(a, bins=5, density=True)), x)
    cols = [random_array(RNG, (12,), np.float32) for _ in range(2)]
    eager_and_jit(lambda a, b: _flat(knp.histogramdd([a, b], bins=3, range=[(-1, 1), None])),
                  lambda a, b: _flat(np.histogramdd([a, b], bins=3, range=[(-1, 1), None])), *cols)


def test_histogram2d_weights_gradient():
    x, y, w = random_array(RNG, (10,)), random_array(RNG, (10,)), RNG.random(10)

    def f(b):
        return knp.sum(knp.histogram2d(x, y, bins=2, weights=b, density=True)[0] ** 2)

    want = numerical_grad(f, w)
    np.testing.assert_allclose(kiln.grad(f)(w), want, atol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(w), want, atol=1e-6)


def test_histogramdd_errors():
    points = np.ones((4, 2))
    with pytest.raises(ValueError, match="histogramdd: the dimension of bins must be equal to the dimension of the sample"):
        knp.histogramdd(points, bins=(2, 3, 4))
    with pytest.raises(ValueError, match="histogramdd: range argument must have one entry per dimension"):
        knp.histogramdd(points, range=[(0, 1)])
    with pytest.raises(ValueError, match=r"histogramdd: bins\[1\] must be positive, when an integer"):
        knp.histogramdd(points, bins=(2, 0))
    with pytest.raises(ValueError, match=r"histogramdd: bins\[0\] must be monotonically increasing, when an array"):
        knp.histogramdd(points, bins=[np.array([1.0, 0.0]), 2])
    with pytest.raises(ValueError, match=r"histogramdd: bins\[0\] must be a scalar or 1d array"):
        knp.histogramdd(points, bins=[np.ones((2, 2)), 2])
    with pytest.raises(TypeError, match=r"histogramdd: bins\[1\] must be an integer or an array of edges"):
        knp.histogramdd(points, bins=[2, 1.5])
    with pytest.raises(ValueError, match="histogramdd: weights must have one entry per sample point"):
        knp.histogramdd(points, weights=np.ones(3))
    with pytest.raises(ValueError, match="histogramdd: sample must be an"):
        knp.histogramdd(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="histogramdd: the sample's coordinate arrays must have one length"):
        knp.histogram2d(np.ones(3), np.ones(4))


def test_vmap():
    x = random_array(RNG, (4, 6))
    x[1, 2] = np.nan

    def run(lib, r):
        return (lib.nanmean(r), lib.nanquantile(r, [0.2, 0.5]), lib.median(r), lib.average(r, weights=lib.abs(r) + 1),
                lib.histogram(r, bins=3, range=(-2, 2))[0], lib.nanargmax(r), lib.cov(lib.reshape(r, (2, 3))))

    want = [np.stack(column) for column in zip(*[_quiet(run)(np, row) for row in x])]
    check_like_numpy(kiln.vmap(lambda r: run(knp, r))(x), want)
    check_like_numpy(kiln.jit(kiln.vmap(lambda r: run(knp, r)))(x), want)


# ----------------------------------------------------------------------------- kiln-run


def test_exported(tmp_path):
    x = _with_nans(np.float32, (3, 6))
    w = RNG.random(6).astype(np.float32)
    labels = np.array([0, 3, 1, 1, 4], np.int32)

    def stats(a, b, c):
        counts, edges = knp.histogram(b, bins=4)
        return (knp.nanmean(a, axis=1), knp.nanstd(a), knp.nanmax(a, axis=0), knp.nanmedian(a, axis=1),
                knp.quantile(b, [0.1, 0.5], method="midpoint"), knp.average(b, weights=b), knp.cov(knp.reshape(b, (2, 3))),
                knp.corrcoef(b, b * b), counts, edges, knp.bincount(c, length=6), knp.digitize(b, edges),
                knp.count_nonzero(a > 0, axis=1), knp.ptp(c), *knp.histogram2d(b, b * b, bins=(2, 3)))

    def reference(a, b, c):
        counts, edges = np.histogram(b, bins=4)
        return (np.nanmean(a, axis=1), np.nanstd(a), np.nanmax(a, axis=0), np.nanmedian(a, axis=1),
                np.quantile(b, [0.1, 0.5], method="midpoint"), np.average(b, weights=b), np.cov(np.reshape(b, (2, 3))),
                np.corrcoef(b, b * b), counts, edges, np.bincount(c, minlength=6), np.digitize(b, edges),
                np.count_nonzero(a > 0, axis=1), np.ptp(c), *np.histogram2d(b, b * b, bins=(2, 3)))

    eager_jit_and_kiln_run(stats, _quiet(reference), x, w, labels, tmp_path=tmp_path)
