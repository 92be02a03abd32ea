"""kiln.numpy's searching, sorting and set functions (searchsorted, lexsort, partition, isin, the set functions,
unique_*, isclose/allclose/array_equal/array_equiv) against numpy: eagerly, under kiln.jit (size= where the
output length depends on the data, as in JAX) and through kiln-run; every error path with its message."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run, random_array

RNG = np.random.default_rng(11)
DTYPES = [np.float32, np.float64, np.int32]


def _padded(values, size, fill):
    """numpy's result cut or padded to `size` entries of `fill`, what size= gives."""
    values = np.asarray(values)
    pad = np.full(max(size - values.size, 0), fill, values.dtype)
    return np.concatenate([values[:size], pad])


# ----------------------------------------------------------------------------- searchsorted


@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "sort", "compare_all"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_searchsorted(method, dtype):
    a = np.sort(random_array(RNG, (9,), dtype))
    a[3] = a[4]  # a repeated value: left and right differ
    v = np.concatenate([random_array(RNG, (6,), dtype), a[[0, 3, 8]]]).reshape(3, 3)

    def run(lib, a, v):
        kw = {} if lib is np else {"method": method}
        return (lib.searchsorted(a, v, **kw), lib.searchsorted(a, v, side="right", **kw),
                lib.searchsorted(a, v[0, 0], **kw))

    eager_and_jit(lambda a, v: run(knp, a, v), lambda a, v: run(np, a, v), a, v)


def test_searchsorted_nans_sorter_and_empty():
    a = np.array([0.0, 1.0, 1.0, 3.0, np.nan, np.nan])
    v = np.array([np.nan, -1.0, 1.0, 5.0, np.inf])
    for method in ("scan", "sort", "compare_all"):
        eager_and_jit(lambda a, v: (knp.searchsorted(a, v, "left", method=method),
                                    knp.searchsorted(a, v, "right", method=method)),
                      lambda a, v: (np.searchsorted(a, v, "left"), np.searchsorted(a, v, "right")), a, v)
    unsorted = np.array([3, 1, 2, 0], np.int64)
    order = np.argsort(unsorted)
    eager_and_jit(lambda u, s: knp.searchsorted(u, np.array([2, 5]), sorter=s),
                  lambda u, s: np.searchsorted(u, np.array([2, 5]), sorter=s), unsorted, order)
    eager_and_jit(lambda v: knp.searchsorted(np.zeros(0), v), lambda v: np.searchsorted(np.zeros(0), v), v)
    # a float v into an integer a promotes, as numpy
    eager_and_jit(lambda v: knp.searchsorted(np.arange(5), v), lambda v: np.searchsorted(np.arange(5), v),
                  np.array([1.5, -0.5, 4.0]))


def test_searchsorted_errors():
    with pytest.raises(ValueError, match="searchsorted: side must be 'left' or 'right', got 'middle'"):
        knp.searchsorted(np.arange(3), 1, side="middle")
    with pytest.raises(ValueError, match="searchsorted: method must be one of 'scan', 'scan_unrolled', 'sort', "
                                         "'compare_all', got 'binary'"):
        knp.searchsorted(np.arange(3), 1, method="binary")
    with pytest.raises(ValueError, match=r"searchsorted: a must be 1-dimensional, got shape \(2, 2\)"):
        knp.searchsorted(np.ones((2, 2)), 1.0)
    with pytest.raises(ValueError, match="searchsorted: sorter must be integer indices of a's shape"):
        knp.searchsorted(np.arange(3), 1, sorter=np.array([0, 1]))


# ----------------------------------------------------------------------------- sorting


def test_lexsort():
    x = RNG.integers(0, 3, 8)
    y = np.round(random_array(RNG, (8,)), 0)
    y[2] = np.nan
    z = RNG.integers(0, 2, 8).astype(np.int8)
    eager_and_jit(lambda x, y, z: knp.lexsort((x, y, z)), lambda x, y, z: np.lexsort((x, y, z)), x, y, z)
    grid = RNG.integers(0, 3, (2, 3, 4))
    eager_and_jit(knp.lexsort, np.lexsort, grid)
    eager_and_jit(lambda g: knp.lexsort(g, axis=0), lambda g: np.lexsort(g, axis=0), grid)
    check_like_numpy(knp.lexsort([np.int64(3)]), np.lexsort([np.int64(3)]))


def test_lexsort_errors():
    with pytest.raises(ValueError, match=r"lexsort: all keys need the same shape, got \(3,\) and \(2,\)"):
        knp.lexsort([np.ones(3), np.ones(2)])
    with pytest.raises(TypeError, match="lexsort: need at least one key"):
        knp.lexsort([])
    with pytest.raises(ValueError, match="lexsort: keys must be a sequence of arrays or an array"):
        knp.lexsort(np.float64(1.0))


def _check_partition(parted, original, kth, axis):
    """numpy's contract: at each kth, the sorted value; no larger element before it, no smaller after it."""
    parted, ordered = np.moveaxis(np.asarray(parted), axis, -1), np.moveaxis(np.sort(original, axis=axis), axis, -1)
    for k in np.atleast_1d(kth) % parted.shape[-1]:
        np.testing.assert_array_equal(parted[..., k], ordered[..., k])
        assert np.all(parted[..., :k] <= parted[..., k:k + 1]) and np.all(parted[..., k + 1:] >= parted[..., k:k + 1])
    np.testing.assert_array_equal(np.sort(parted, axis=-1), ordered)


@pytest.mark.parametrize("dtype", DTYPES)
def test_partition_and_argpartition(dtype):
    x = random_array(RNG, (3, 7), dtype)
    for kth, axis in [(2, -1), ([0, 4, 6], 1), (-1, 0), (1, None)]:
        for fn in (knp.partition, kiln.jit(lambda a: knp.partition(a, kth, axis))):
            out = fn(x, kth, axis) if fn is knp.partition else fn(x)
            assert out.dtype == x.dtype
            _check_partition(out, x.ravel() if axis is None else x, kth, 0 if axis is None else axis)
        for fn in (knp.argpartition, kiln.jit(lambda a: knp.argpartition(a, kth, axis))):
            idx = fn(x, kth, axis) if fn is knp.argpartition else fn(x)
            assert idx.dtype == np.int64
            if axis is None:
                taken, base = x.ravel()[idx], x.ravel()
            else:
                taken, base = np.take_along_axis(x, idx, axis=axis), x
            _check_partition(taken, base, kth, 0 if axis is None else axis)


def test_partition_errors():
    with pytest.raises(ValueError, match=r"partition: kth\(=5\) out of bounds \(5\)"):
        knp.partition(np.arange(5), 5)
    with pytest.raises(ValueError, match=r"argpartition: kth\(=-4\) out of bounds \(3\)"):
        knp.argpartition(np.arange(3), [0, -4])
    with pytest.raises(TypeError, match="partition: kth must be an integer or a sequence of integers"):
        knp.partition(np.arange(3), 1.5)
    with pytest.raises(TypeError, match=r"argpartition: kth must be concrete \(Python ints\)"):
        kiln.jit(knp.argpartition)(np.arange(3), np.int64(1))


# ----------------------------------------------------------------------------- comparisons


def test_isclose_allclose():
    a = np.array([1.0, 1.0, np.inf, -np.inf, np.nan, 0.0, 1e-9, 100.0])
    b = np.array([1.0 + 1e-6, 1.1, np.inf, np.inf, np.nan, 1e-8, 0.0, 100.001])
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.2}, {"atol": 0.0, "rtol": 1e-4}):
        eager_and_jit(lambda x, y: knp.isclose(x, y, **kw), lambda x, y: np.isclose(x, y, **kw), a, b)
        eager_and_jit(lambda x, y: knp.allclose(x, y, **kw), lambda x, y: np.allclose(x, y, **kw), a[:4], b[:4])
    f32 = a.astype(np.float32)
    eager_and_jit(lambda x: knp.isclose(x, 1.0), lambda x: np.isclose(x, 1.0), f32)
    eager_and_jit(lambda x, y: knp.isclose(x, y), lambda x, y: np.isclose(x, y), np.arange(4), np.array([[0], [2]]))
    eager_and_jit(lambda x: knp.allclose(x, x + 1e-7), lambda x: np.allclose(x, x + 1e-7), f32[:2])


def test_array_equal_and_equiv():
    a = np.array([[1.0, np.nan], [3.0, 4.0]])
    for b in (a.copy(), np.array([[1.0, np.nan], [3.0, 5.0]]), a[0]):
        for equal_nan in (False, True):
            eager_and_jit(lambda x, y: knp.array_equal(x, y, equal_nan=equal_nan),
                          lambda x, y: np.array_equal(x, y, equal_nan=equal_nan), a, b)
    ints = np.array([[1, 2], [1, 2]])
    for b in (np.array([1, 2]), np.array([1, 3]), np.array([1, 2, 3]), ints):
        eager_and_jit(knp.array_equiv, np.array_equiv, ints, b)
    eager_and_jit(lambda x: knp.array_equal(x, x.astype(np.float32)), lambda x: np.array_equal(x, x.astype(np.float32)),
                  ints)


# ----------------------------------------------------------------------------- isin and the set functions


@pytest.mark.parametrize("dtype", DTYPES)
def test_isin(dtype):
    x = random_array(RNG, (3, 4), dtype)
    tests = np.concatenate([x.ravel()[[1, 5, 5]], random_array(RNG, (3,), dtype)])
    if x.dtype.kind == "f":
        x[0, 0] = tests[0] = np.nan  # NaN is in nothing, as numpy
    for invert in (False, True):
        eager_and_jit(lambda a, t: knp.isin(a, t, invert=invert), lambda a, t: np.isin(a, t, invert=invert), x, tests)
    eager_and_jit(lambda a: knp.isin(a, np.zeros(0, dtype)), lambda a: np.isin(a, np.zeros(0, dtype)), x)
    eager_and_jit(lambda a, t: knp.isin(a, t, assume_unique=True), lambda a, t: np.isin(a, t, assume_unique=True),
                  np.unique(x)[:4], tests)


def test_isin_errors():
    with pytest.raises(ValueError, match="isin: kind must be None, 'sort' or 'table', got 'hash'"):
        knp.isin(np.arange(3), np.arange(2), kind="hash")


SET_INPUTS = [
    (np.array([3, 1, 2, 3, 5, 1, 9]), np.array([1, 5, 7, 7, 0])),
    (np.array([0.5, np.nan, 2.0, 0.5, -1.0]), np.array([np.nan, 2.0, 4.0])),
    (np.array([4, 4], np.int32), np.array([1, 2], np.int32)),
    (np.array([5, 0, 0, 2, 2, 5, 4]), np.array([2, 3, 3, 5, 0, 2, 4])),  # duplicates in ar2: its first indices
]


@pytest.mark.parametrize("ar1, ar2", SET_INPUTS, ids=["int", "float-nan", "disjoint", "repeats"])
def test_set_functions_eagerly(ar1, ar2):
    for name in ("union1d", "setdiff1d", "setxor1d", "intersect1d"):
        check_like_numpy(getattr(knp, name)(ar1, ar2), getattr(np, name)(ar1, ar2))
    check_like_numpy(knp.intersect1d(ar1, ar2, return_indices=True), np.intersect1d(ar1, ar2, return_indices=True))
    u1, u2 = np.unique(ar1), np.unique(ar2)
    for name in ("setdiff1d", "setxor1d", "intersect1d"):
        check_like_numpy(getattr(knp, name)(u1, u2, assume_unique=True),
                         getattr(np, name)(u1, u2, assume_unique=True))


@pytest.mark.parametrize("ar1, ar2", SET_INPUTS, ids=["int", "float-nan", "disjoint", "repeats"])
def test_set_functions_with_size(ar1, ar2):
    size = 6

    def run(a, b):
        return (knp.union1d(a, b, size=size), knp.setdiff1d(a, b, size=size),
                knp.setxor1d(a, b, size=size, fill_value=-7), knp.intersect1d(a, b, size=size),
                *knp.intersect1d(a, b, return_indices=True, size=size, fill_value=-7),
                knp.setdiff1d(a, b, size=2, fill_value=-7))

    def first_or_zero(values):
        return values[0] if values.size else 0

    union = np.union1d(ar1, ar2)
    diff = np.setdiff1d(ar1, ar2)
    common, in1, in2 = np.intersect1d(ar1, ar2, return_indices=True)
    want = (_padded(union, size, union[0]), _padded(diff, size, 0), _padded(np.setxor1d(ar1, ar2), size, -7),
            _padded(common, size, first_or_zero(common)), _padded(common, size, -7), _padded(in1, size, 0),
            _padded(in2, size, 0), _padded(diff, 2, -7))
    check_like_numpy(run(ar1, ar2), want)  # eagerly with size=
    check_like_numpy(kiln.jit(run)(ar1, ar2), want)


def test_set_functions_assume_unique_traced():
    a, b = np.array([5, 1, 3, 8]), np.array([3, 9, 5])
    got = kiln.jit(lambda x, y: (knp.setdiff1d(x, y, assume_unique=True, size=3),
                                 knp.intersect1d(x, y, assume_unique=True, size=3)))(a, b)
    check_like_numpy(got, (_padded(np.setdiff1d(a, b, assume_unique=True), 3, 0),
                           _padded(np.intersect1d(a, b, assume_unique=True), 3, 3)))


def test_set_functions_need_size_when_traced():
    a = np.arange(3)
    for name in ("union1d", "setdiff1d", "setxor1d", "intersect1d"):
        with pytest.raises(knp.DataDependentShapeError, match=f"{name} on a traced array .*size=N"):
            kiln.jit(getattr(knp, name))(a, a)
    with pytest.raises(ValueError, match="union1d: size must be >= 0"):
        knp.union1d(a, a, size=-1)


# ----------------------------------------------------------------------------- unique_*


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_functions(dtype):
    x = random_array(RNG, (3, 4), dtype)
    x[1, 1] = x[0, 0]
    if x.dtype.kind == "f":
        x[2, 0] = x[2, 1] = np.nan  # each NaN is its own value in numpy 2's unique_*
    # numpy 2.4 leaves unique_values' order unspecified (integers come out unsorted); kiln sorts, as jax.numpy
    check_like_numpy(knp.unique_values(x), np.sort(np.unique_values(x)))
    for name in ("unique_counts", "unique_inverse", "unique_all"):
        got, want = getattr(knp, name)(x), getattr(np, name)(x)
        assert type(got).__name__ == type(want).__name__ and got._fields == want._fields
        check_like_numpy(tuple(got), tuple(want))


def test_unique_functions_with_size():
    x = np.array([[3.0, 1.0, np.nan], [1.0, 7.0, np.nan]])
    size = 7
    values, indices, inverse, counts = np.unique_all(x)
    k = values.size

    def run(a):
        out = knp.unique_all(a, size=size)
        return (knp.unique_values(a, size=size, fill_value=-1.0), *knp.unique_counts(a, size=size),
                *knp.unique_inverse(a, size=size), *out)

    want = (_padded(values, size, -1.0), _padded(values, size, values[0]), _padded(counts, size, 0),
            _padded(values, size, values[0]), inverse, _padded(values, size, values[0]), _padded(indices, size, 0),
            inverse, _padded(counts, size, 0))
    assert k < size
    check_like_numpy(kiln.jit(run)(x), want)
    check_like_numpy(run(x), want)
    assert kiln.jit(lambda a: knp.unique_all(a, size=3))(x).counts.shape == (3,)


def test_unique_functions_need_size_when_traced():
    for name in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
        with pytest.raises(knp.DataDependentShapeError, match=f"{name} on a traced array .*size=N"):
            kiln.jit(getattr(knp, name))(np.arange(3))


def test_vmap():
    x = random_array(RNG, (3, 7))
    a = np.sort(random_array(RNG, (5,)))

    def run(lib, r):
        return (lib.searchsorted(a, r), lib.searchsorted(lib.sort(r), 0.1, side="right"), lib.isin(r, r[:2]),
                lib.lexsort((r, r > 0)), lib.isclose(r, r[0]))

    want = [np.stack(column) for column in zip(*[run(np, row) for row in x])]
    check_like_numpy(kiln.vmap(lambda r: run(knp, r))(x), want)
    check_like_numpy(kiln.jit(kiln.vmap(lambda r: run(knp, r)))(x), want)
    rows = np.array([[3, 1, 3, 2], [5, 5, 5, 0]])
    check_like_numpy(kiln.jit(kiln.vmap(lambda r: knp.unique_values(r, size=3, fill_value=-1)))(rows),
                     np.array([[1, 2, 3], [0, 5, -1]]))


def test_array_methods():
    """jax.Array's searchsorted, argpartition and ptp methods on traced arrays."""
    x = random_array(RNG, (2, 5))

    def run(a):
        row = a[0]
        return row.sort().searchsorted(a[1], side="right"), a.argpartition(2, axis=1), a.ptp(axis=1, keepdims=True)

    searched, parted, spread = kiln.jit(run)(x)
    check_like_numpy((searched, spread), (np.searchsorted(np.sort(x[0]), x[1], side="right"), np.ptp(x, 1, keepdims=True)))
    _check_partition(np.take_along_axis(x, np.asarray(parted), axis=1), x, 2, 1)


# ----------------------------------------------------------------------------- kiln-run


def test_exported(tmp_path):
    a = np.sort(random_array(RNG, (8,), np.float32))
    v = random_array(RNG, (2, 3), np.float32)
    ints = np.array([4, 1, 4, 2, 9, 1], np.int32)
    other = np.array([1, 7, 9], np.int32)

    def run(lib, a, v, i, j):
        size = {} if lib is np else {"size": 4}
        searched = lib.searchsorted(a, v, side="right")
        return (searched, lib.lexsort((i, j[:1].repeat(6) if lib is np else lib.repeat(j[:1], 6))),
                lib.isin(i, j), lib.isclose(v, v + 1e-7), lib.array_equal(i, i), lib.union1d(i, j, **size),
                lib.intersect1d(i, j, **size), lib.unique_counts(i, **size).counts, lib.partition(v, 1, axis=1))

    want = run(np, a, v, ints, other)
    want = want[:5] + (_padded(want[5], 4, 1), _padded(want[6], 4, 1), _padded(want[7], 4, 0), np.sort(v, axis=1))
    eager_jit_and_kiln_run(lambda *args: run(knp, *args), lambda *args: want, a, v, ints, other, tmp_path=tmp_path)
