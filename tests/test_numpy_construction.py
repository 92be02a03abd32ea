"""kiln.numpy's array building and rearranging (construction.py, rearranging.py) against numpy: values, dtypes
and shapes eagerly, under kiln.jit and through kiln-run; gradients against float64 central differences; every
error message."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run, random_array
from references import numerical_grad

RNG = np.random.default_rng(17)
X = random_array(RNG, (3, 4))
XI = np.arange(12, dtype=np.int32).reshape(3, 4)


def _filled(a, val, wrap=False):
    a = a.copy()
    np.fill_diagonal(a, val, wrap)
    return a


def _put(a, indices, values, axis):
    a = a.copy()
    np.put_along_axis(a, indices, values, axis)
    return a


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid(indexing, sparse):
    a, b, c = np.arange(3.0), np.arange(4, dtype=np.int32), np.arange(2.0)
    kw = {"indexing": indexing, "sparse": sparse}
    eager_and_jit(lambda p, q, r: knp.meshgrid(p, q, r, **kw), lambda p, q, r: np.meshgrid(p, q, r, **kw), a, b, c)
    eager_and_jit(lambda p, q: knp.meshgrid(p, q, **kw), lambda p, q: np.meshgrid(p, q, **kw), a, b)
    eager_and_jit(lambda p: knp.meshgrid(p, **kw), lambda p: np.meshgrid(p, **kw), a)
    assert isinstance(knp.meshgrid(a, b), tuple)


def test_logspace_geomspace():
    eager_and_jit(lambda: knp.logspace(0, 3, 7), lambda: np.logspace(0, 3, 7))
    eager_and_jit(lambda s: knp.logspace(s, 2.0, 4, base=2.0, endpoint=False),
                  lambda s: np.logspace(s, 2.0, 4, base=2.0, endpoint=False), np.float32(-1))
    eager_and_jit(lambda s, b: knp.logspace(s, 2.0, 4, base=b, axis=1), lambda s, b: np.logspace(s, 2.0, 4, base=b, axis=1),
                  np.array([0.0, 1]), np.array([2.0, 3]))
    eager_and_jit(lambda: knp.logspace(0, 2, 3, dtype=np.int32), lambda: np.logspace(0, 2, 3, dtype=np.int32))
    eager_and_jit(lambda: knp.geomspace(1, 1000, 4), lambda: np.geomspace(1, 1000, 4))
    eager_and_jit(lambda s, e: knp.geomspace(s, e, 5, axis=1), lambda s, e: np.geomspace(s, e, 5, axis=1),
                  np.array([-1.0, 2]), np.array([-16.0, 0.5]))
    eager_and_jit(lambda s: knp.geomspace(s, 8, 4, dtype=np.float32, endpoint=False),
                  lambda s: np.geomspace(s, 8, 4, dtype=np.float32, endpoint=False), np.float32(1))
    assert kiln.jit(lambda x: x + knp.logspace(0, 1, 2))(np.float32(1)).dtype == np.float32  # weak, as linspace
    with pytest.raises(ValueError, match="geomspace: geometric sequence cannot include zero"):
        knp.geomspace(0, 10)


def test_indices_and_tri():
    eager_and_jit(lambda: knp.indices((2, 3)), lambda: np.indices((2, 3)))
    eager_and_jit(lambda: knp.indices((2, 3, 2), sparse=True, dtype=np.int32),
                  lambda: np.indices((2, 3, 2), sparse=True, dtype=np.int32))
    eager_and_jit(lambda: knp.tri(3, 4, 1), lambda: np.tri(3, 4, 1))
    eager_and_jit(lambda: knp.tri(3, k=-1, dtype=np.int32), lambda: np.tri(3, k=-1, dtype=np.int32))
    assert kiln.jit(lambda x: x * knp.tri(2))(np.ones(2, np.float32)).dtype == np.float32  # weak, as eye


def test_index_helpers():
    eager_and_jit(lambda: knp.tril_indices(3, 1, 4), lambda: np.tril_indices(3, 1, 4))
    eager_and_jit(lambda: knp.triu_indices(4, -1), lambda: np.triu_indices(4, -1))
    eager_and_jit(lambda a: knp.triu_indices_from(a, 1), lambda a: np.triu_indices_from(a, 1), X)
    eager_and_jit(lambda a: knp.tril_indices_from(a), lambda a: np.tril_indices_from(a), X)
    eager_and_jit(lambda: knp.diag_indices(3, 3), lambda: np.diag_indices(3, 3))
    eager_and_jit(knp.diag_indices_from, np.diag_indices_from, np.ones((3, 3, 3)))
    eager_and_jit(lambda a: a[knp.triu_indices_from(a)], lambda a: a[np.triu_indices_from(a)], X)
    with pytest.raises(ValueError, match="tril_indices_from: input array must be 2-d"):
        knp.tril_indices_from(np.ones(3))
    with pytest.raises(ValueError, match="diag_indices_from: all dimensions of input must be of equal length"):
        knp.diag_indices_from(X)


def test_diagflat_and_fill_diagonal():
    eager_and_jit(lambda a: knp.diagflat(a[:2], -1), lambda a: np.diagflat(a[:2], -1), X)
    eager_and_jit(lambda a: knp.fill_diagonal(a, 7.0, inplace=False), lambda a: _filled(a, 7.0), X)
    eager_and_jit(lambda a, v: knp.fill_diagonal(a, v, inplace=False), lambda a, v: _filled(a, v), np.zeros((5, 3)), np.array([1.0, 2]))
    eager_and_jit(lambda a, v: knp.fill_diagonal(a, v, wrap=True, inplace=False), lambda a, v: _filled(a, v, True),
                  np.zeros((7, 3)), np.array([1.0, 2]))
    eager_and_jit(lambda a: knp.fill_diagonal(a, 5, inplace=False), lambda a: _filled(a, 5), np.zeros((3, 3, 3), np.int32))
    with pytest.raises(ValueError, match="fill_diagonal: kiln arrays are immutable.*inplace=False"):
        knp.fill_diagonal(X, 1.0)
    with pytest.raises(ValueError, match="fill_diagonal: all dimensions of input must be of equal length"):
        knp.fill_diagonal(np.ones((2, 3, 3)), 1.0, inplace=False)


def test_ix_unravel_ravel_multi_index():
    eager_and_jit(lambda a, b: knp.ix_(a, b), lambda a, b: np.ix_(a, b), np.array([0, 2]), np.array([1, 3, 0]))
    check_like_numpy(knp.ix_([0, 2], [True, False, True]), np.ix_([0, 2], [True, False, True]))
    eager_and_jit(lambda a: a[knp.ix_([0, 2], [1, 3])], lambda a: a[np.ix_([0, 2], [1, 3])], X)
    eager_and_jit(lambda i: knp.unravel_index(i, (3, 4)), lambda i: np.unravel_index(i, (3, 4)), np.array([0, 5, 11]))
    eager_and_jit(lambda i: knp.unravel_index(i, (3, 4), order="F"), lambda i: np.unravel_index(i, (3, 4), order="F"),
                  np.array([[0, 5], [11, 7]]))
    eager_and_jit(lambda i: knp.unravel_index(i, (3, 4)), lambda i: np.unravel_index(i, (3, 4)), 7)
    check_like_numpy(knp.ravel_multi_index((np.array([0, 2, 1]), np.array([3, 0, 1])), (3, 4)),
                     np.ravel_multi_index((np.array([0, 2, 1]), np.array([3, 0, 1])), (3, 4)))
    eager_and_jit(lambda i, j: knp.ravel_multi_index((i, j), (3, 4), mode=("clip", "wrap"), order="F"),
                  lambda i, j: np.ravel_multi_index((i, j), (3, 4), mode=("clip", "wrap"), order="F"),
                  np.array([0, 5, -1]), np.array([3, 9, -2]))
    # a traced index cannot raise: it is clamped, as in jax.numpy
    got = kiln.jit(lambda i: knp.unravel_index(i, (3, 4)))(np.array([-1, 20]))
    check_like_numpy(got, np.unravel_index(np.array([11, 11]), (3, 4)))
    with pytest.raises(ValueError, match="unravel_index: index 12 is out of bounds for array with size 12"):
        knp.unravel_index(np.array([1, 12]), (3, 4))
    with pytest.raises(ValueError, match="ravel_multi_index: invalid entry in coordinates array"):
        knp.ravel_multi_index((np.array([3]), np.array([0])), (3, 4))
    with pytest.raises(ValueError, match="ravel_multi_index: mode='raise' needs concrete indices"):
        kiln.jit(lambda i: knp.ravel_multi_index((i, i), (3, 4)))(np.array([1]))
    with pytest.raises(TypeError, match="ix_: a traced boolean vector"):
        kiln.jit(lambda m: knp.ix_(m))(np.array([True, False]))
    with pytest.raises(ValueError, match="ix_: cross index must be 1 dimensional"):
        knp.ix_(np.ones((2, 2), np.int32))


def test_copy_resize_trim_zeros():
    eager_and_jit(knp.copy, np.copy, X)
    assert knp.copy(X) is not X
    eager_and_jit(lambda a: knp.resize(a, (2, 5)), lambda a: np.resize(a, (2, 5)), X[:2, :3])
    eager_and_jit(lambda a: knp.resize(a, 3), lambda a: np.resize(a, 3), X[:0])
    f = np.array([0, 0, 1, 2, 0])
    for trim in ("fb", "f", "b"):
        check_like_numpy(knp.trim_zeros(f, trim), np.trim_zeros(f, trim))
    with pytest.raises(TypeError, match="trim_zeros: its output shape depends on the data"):
        kiln.jit(knp.trim_zeros)(f)
    with pytest.raises(ValueError, match="resize: all elements of `new_shape` must be non-negative"):
        knp.resize(X, (-1, 2))


def test_append_delete():
    eager_and_jit(knp.append, np.append, X, XI)
    eager_and_jit(lambda a, b: knp.append(a, b, axis=0), lambda a, b: np.append(a, b, axis=0), X, XI[:1])
    for obj in (1, [0, 2], slice(1, 3), np.array([True, False, True, False]), -1, [3, 0, 0]):
        eager_and_jit(lambda a: knp.delete(a, obj, axis=1), lambda a: np.delete(a, obj, axis=1), X)
    eager_and_jit(lambda a: knp.delete(a, [0, 5, 11]), lambda a: np.delete(a, [0, 5, 11]), X)
    with pytest.raises(IndexError, match="delete: index 4 is out of bounds for axis 1 with size 4"):
        knp.delete(X, 4, axis=1)
    with pytest.raises(ValueError, match="delete: traced positions must be a scalar, or an array with assume_unique"):
        kiln.jit(lambda a, i: knp.delete(a, i))(X, np.array([1, 2]))


def test_traced_positions():
    """A traced index for insert (a scalar) and delete (a scalar, or unique positions), as in jax.numpy."""
    for obj, values, axis in ((1, 9.0, 1), (1, [1.0, 2, 3], 1), (-1, [[1.0, 2, 3, 4]], 0), (0, [7.0, 8], None),
                              (12, [1.0, 2], None), (4, [[1.0], [2], [3]], 1)):
        got = kiln.jit(lambda a, i: knp.insert(a, i, values, axis=axis))(X, np.int32(obj))
        check_like_numpy(got, np.insert(X, obj, values, axis=axis))
    for obj in (1, -1, np.array([0, 2]), np.array([3, 0, 1])):
        got = kiln.jit(lambda a, i: knp.delete(a, i, axis=1, assume_unique_indices=True))(X, np.asarray(obj, np.int32))
        check_like_numpy(got, np.delete(X, obj, axis=1))
    check_like_numpy(kiln.jit(lambda a, i: knp.delete(a, i))(X, np.int32(5)), np.delete(X, 5))
    f = lambda v: knp.sum(knp.insert(v, np.int32(1), v[:2] * 3) ** 2 + knp.delete(v, np.int32(2))[0])  # noqa: E731
    x = np.array([0.3, 1.2, 2.5, 0.7])
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(x), numerical_grad(f, x), rtol=1e-6, atol=1e-8)
    with pytest.raises(TypeError, match="insert: a traced index must be an integer scalar"):
        kiln.jit(lambda a, i: knp.insert(a, i, 1.0))(X, np.array([1, 2]))


@pytest.mark.parametrize("obj, values, axis", [
    (1, 9.0, 1), (1, [1.0, 2, 3], 1), (1, [[1.0, 2, 3]], 1), ([0, 2, 2], 5.0, 1), ([3, 0], [[1.0, 2], [3, 4], [5, 6]], 1),
    (4, [5, 6], None), ([1, 4], [5.0, 6], None), (slice(0, 2), 0.0, 0), (-1, [1, 2, 3, 4], 0), (3, [[1, 2, 3, 4]], 0),
], ids=str)
def test_insert(obj, values, axis):
    eager_and_jit(lambda a: knp.insert(a, obj, values, axis=axis), lambda a: np.insert(a, obj, values, axis=axis), X)


def test_insert_dtype_and_errors():
    eager_and_jit(lambda a: knp.insert(a, 1, 2.7, axis=0), lambda a: np.insert(a, 1, 2.7, axis=0), XI)
    eager_and_jit(lambda a, v: knp.insert(a, [0, 2], v, axis=1), lambda a, v: np.insert(a, [0, 2], v, axis=1), X, X[:, :2])
    with pytest.raises(IndexError, match="insert: index 5 is out of bounds for axis 1 with size 4"):
        knp.insert(X, 5, 1.0, axis=1)


def test_block_and_stacks():
    a, b = np.eye(2) * 2, np.eye(3) * 3
    eager_and_jit(lambda p, q: knp.block([[p, np.zeros((2, 3))], [np.ones((3, 2)), q]]),
                  lambda p, q: np.block([[p, np.zeros((2, 3))], [np.ones((3, 2)), q]]), a, b)
    eager_and_jit(lambda p: knp.block([p[0], 1.0, p[1]]), lambda p: np.block([p[0], 1.0, p[1]]), a)
    eager_and_jit(lambda p: knp.block([[p[0]], [p[1]]]), lambda p: np.block([[p[0]], [p[1]]]), a)
    eager_and_jit(lambda p: knp.block([[[p]], [[p]]]), lambda p: np.block([[[p]], [[p]]]), a)
    with pytest.raises(TypeError, match=r"block: arrays\[0\] is a tuple"):
        knp.block([(a, a)])
    with pytest.raises(ValueError, match="block: list depths are mismatched"):
        knp.block([[a], a])
    with pytest.raises(ValueError, match="block: list arrays cannot be empty"):
        knp.block([])
    eager_and_jit(lambda p: knp.atleast_3d(p, p[0], p[0, 0]), lambda p: np.atleast_3d(p, p[0], p[0, 0]), X)
    eager_and_jit(lambda p, q: knp.column_stack([p[0], q[:3].T, p[1]]), lambda p, q: np.column_stack([p[0], q[:3].T, p[1]]), X, XI)
    eager_and_jit(lambda p, q: knp.row_stack([p, q]), lambda p, q: np.vstack([p, q]), X, XI)
    eager_and_jit(lambda p, q: knp.dstack([p, q]), lambda p, q: np.dstack([p, q]), X, XI)
    eager_and_jit(lambda p: knp.dstack([p[0], p[1]]), lambda p: np.dstack([p[0], p[1]]), X)


def test_splits_and_rot90():
    eager_and_jit(lambda a: knp.hsplit(a, 2), lambda a: np.hsplit(a, 2), X)
    eager_and_jit(lambda a: knp.hsplit(a[0], [1, 3]), lambda a: np.hsplit(a[0], [1, 3]), X)
    eager_and_jit(lambda a: knp.vsplit(a, 3), lambda a: np.vsplit(a, 3), X)
    eager_and_jit(lambda a: knp.dsplit(a, [1]), lambda a: np.dsplit(a, [1]), random_array(RNG, (2, 2, 3)))
    with pytest.raises(ValueError, match="vsplit only works on arrays of 2 or more dimensions"):
        knp.vsplit(np.ones(4), 2)
    with pytest.raises(ValueError, match="dsplit only works on arrays of 3 or more dimensions"):
        knp.dsplit(X, 2)
    x3 = random_array(RNG, (2, 3, 4))
    for k in range(-1, 5):
        eager_and_jit(lambda a: knp.rot90(a, k), lambda a: np.rot90(a, k), X)
        eager_and_jit(lambda a: knp.rot90(a, k, axes=(2, 0)), lambda a: np.rot90(a, k, axes=(2, 0)), x3)
    with pytest.raises(ValueError, match="rot90: axes must be different"):
        knp.rot90(X, axes=(1, 1))
    with pytest.raises(ValueError, match="rot90: len"):
        knp.rot90(X, axes=(0, 1, 2))


def test_broadcast_helpers():
    assert knp.broadcast_shapes((3, 1), (4,), 1) == np.broadcast_shapes((3, 1), (4,), 1)
    assert knp.broadcast_shapes() == ()
    eager_and_jit(lambda a, b: knp.broadcast_arrays(a, b[0], 2.0), lambda a, b: np.broadcast_arrays(a, b[0], 2.0), X, XI)
    with pytest.raises(ValueError, match=r"broadcast_shapes: shapes \(3,\) and \(4,\) cannot be broadcast together"):
        knp.broadcast_shapes((3,), (4,))


def test_put_along_axis():
    eager_and_jit(lambda a, i: knp.put_along_axis(a, i, 99.0, 1, inplace=False), lambda a, i: _put(a, i, 99.0, 1),
                  X, np.array([[0], [2], [1]]))
    eager_and_jit(lambda a, i, v: knp.put_along_axis(a, i, v, 0, inplace=False), lambda a, i, v: _put(a, i, v, 0),
                  X, np.array([[0, 2, 1, -1]]), np.array([[1.0, 2, 3, 4]]))
    eager_and_jit(lambda a, i: knp.put_along_axis(a, i, 5.0, None, inplace=False), lambda a, i: _put(a, i, 5.0, None),
                  X, np.array([0, 7]))
    with pytest.raises(ValueError, match="put_along_axis: kiln arrays are immutable.*inplace=False"):
        knp.put_along_axis(X, np.array([[0]]), 1.0, 1)
    with pytest.raises(ValueError, match="put_along_axis: `indices` and `arr` must have the same number of dimensions"):
        knp.put_along_axis(X, np.array([0]), 1.0, 1, inplace=False)


def test_choose_select_piecewise():
    choices = [np.arange(4), np.arange(4) * 10, np.arange(4) * 100]
    check_like_numpy(knp.choose(np.array([0, 2, 1, 0]), choices), np.choose(np.array([0, 2, 1, 0]), choices))
    eager_and_jit(lambda a: knp.choose(a, choices, mode="clip"), lambda a: np.choose(a, choices, mode="clip"), np.array([0, 5, -1, 1]))
    eager_and_jit(lambda a: knp.choose(a, choices, mode="wrap"), lambda a: np.choose(a, choices, mode="wrap"), np.array([[0], [5], [-1]]))
    eager_and_jit(lambda a, c: knp.choose(a, c, mode="clip"), lambda a, c: np.choose(a, c, mode="clip"), np.array([0, 1, 2, 1]), X)
    with pytest.raises(ValueError, match="choose: invalid entry in choice array"):
        knp.choose(np.array([3]), choices)
    with pytest.raises(ValueError, match="choose: mode='raise' needs a concrete index array"):
        kiln.jit(lambda a: knp.choose(a, choices))(np.array([0, 1, 2, 0]))
    c1, c2 = X > 0.5, X < -0.5
    eager_and_jit(lambda a, b, c: knp.select([b, c], [a, -a]), lambda a, b, c: np.select([b, c], [a, -a]), X, c1, c2)
    eager_and_jit(lambda a, b: knp.select([b], [a], default=7), lambda a, b: np.select([b], [a], default=7), XI.astype(np.int8), c1)
    eager_and_jit(lambda a, b, c: knp.select([b, c], [a.astype(np.float32), 1.0], 0.5),
                  lambda a, b, c: np.select([b, c], [a.astype(np.float32), 1.0], 0.5), X, c1, c2)
    with pytest.raises(ValueError, match="select: list of cases must be same length as list of conditions"):
        knp.select([c1], [X, X])
    with pytest.raises(TypeError, match="select: invalid entry 0 in condlist: should be boolean ndarray"):
        knp.select([X], [X])
    eager_and_jit(lambda a: knp.piecewise(a, [a < 0, a > 1], [lambda v: -v, lambda v: v * 2, 0.5]),
                  lambda a: np.piecewise(a, [a < 0, a > 1], [lambda v: -v, lambda v: v * 2, 0.5]), X)
    eager_and_jit(lambda a: knp.piecewise(a, a < 0, [lambda v: v ** 2, 3]), lambda a: np.piecewise(a, a < 0, [lambda v: v ** 2, 3]), XI[0] - 2)
    eager_and_jit(lambda a: knp.piecewise(a, [True, False, True, False], [lambda v: v * 3, 3]),
                  lambda a: np.piecewise(a, [True, False, True, False], [lambda v: v * 3, 3]), XI[0] - 2)
    with pytest.raises(ValueError, match="piecewise: with 2 condition"):
        knp.piecewise(X, [X < 0, X > 1], [1.0])


def test_apply_along_and_over_axes():
    x3 = random_array(RNG, (2, 3, 2))
    eager_and_jit(lambda a: knp.apply_along_axis(knp.sum, 1, a), lambda a: np.apply_along_axis(np.sum, 1, a), X)
    eager_and_jit(lambda a: knp.apply_along_axis(lambda r: knp.cumsum(r)[::-1], 0, a),
                  lambda a: np.apply_along_axis(lambda r: np.cumsum(r)[::-1], 0, a), X)
    eager_and_jit(lambda a: knp.apply_along_axis(lambda r, s: knp.outer(r, r) * s, 1, a, 2.0),
                  lambda a: np.apply_along_axis(lambda r, s: np.outer(r, r) * s, 1, a, 2.0), x3)
    eager_and_jit(lambda a: knp.apply_over_axes(knp.sum, a, [0, 2]), lambda a: np.apply_over_axes(np.sum, a, [0, 2]), x3)
    eager_and_jit(lambda a: knp.apply_over_axes(knp.max, a, -1), lambda a: np.apply_over_axes(np.max, a, -1), x3)


@pytest.mark.parametrize("kfn", [
    lambda x: knp.sum(knp.insert(x, [1, 3], x[:2] * 2) ** 2),
    lambda x: knp.sum(knp.delete(x, 2) ** 3),
    lambda x: knp.sum(knp.put_along_axis(x, np.array([0, 4]), x[1:3] ** 2, None, inplace=False) ** 2),
    lambda x: knp.sum(knp.select([x > 1, x < 0.5], [x ** 2, -x], 3.0)),
    lambda x: knp.sum(knp.choose(np.array([0, 1, 0, 1, 1]), [x, x ** 2], mode="clip")),
    lambda x: knp.sum(knp.piecewise(x, [x < 1], [lambda v: v ** 3, lambda v: knp.sin(v)])),
    lambda x: knp.sum(knp.rot90(knp.block([[x[:2]], [x[3:]]]), 1) * np.arange(4.0).reshape(2, 2)),
    lambda x: knp.sum(knp.fill_diagonal(knp.outer(x, x), x[0], inplace=False) ** 2),
    lambda x: knp.sum(knp.logspace(x[0], x[1], 4)),
    lambda x: knp.sum(knp.meshgrid(x, x[:2])[0] * knp.meshgrid(x, x[:2])[1]),
], ids=range(10))
def test_gradients(kfn):
    x = np.array([0.3, 1.2, 2.5, 0.7, 1.4])
    np.testing.assert_allclose(kiln.grad(kfn)(x), numerical_grad(kfn, x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(kiln.jit(kiln.grad(kfn))(x), numerical_grad(kfn, x), rtol=1e-6, atol=1e-8)


def test_exported(tmp_path):
    x = random_array(RNG, (3, 4), np.float32)
    i = np.array([[0, 2, 1, 3]], np.int32)

    def kfn(a, idx):
        return (*knp.meshgrid(a[0], a[:, 0]), knp.logspace(0.0, 1.0, 3, dtype=np.float32), knp.tri(3, dtype=np.int32),
                knp.fill_diagonal(a, 0.0, inplace=False), *knp.unravel_index(idx, (2, 2)), knp.resize(a[0], (2, 3)),
                knp.insert(a, [1], 9.0, axis=0), knp.delete(a, 1, axis=1), knp.block([[a, a]]), knp.rot90(a),
                knp.put_along_axis(a, idx % 3, 5.0, 0, inplace=False),
                knp.choose(idx % 2, [a[0], a[1]], mode="wrap"), knp.select([a > 0], [a], -1.0),
                knp.piecewise(a, [a < 0], [lambda v: -v, lambda v: v * 2]), knp.apply_along_axis(knp.sum, 1, a))

    def nfn(a, idx):
        return (*np.meshgrid(a[0], a[:, 0]), np.logspace(0.0, 1.0, 3, dtype=np.float32), np.tri(3, dtype=np.int32),
                _filled(a, 0.0), *np.unravel_index(idx, (2, 2)), np.resize(a[0], (2, 3)),
                np.insert(a, [1], 9.0, axis=0), np.delete(a, 1, axis=1), np.block([[a, a]]), np.rot90(a),
                _put(a, idx % 3, 5.0, 0), np.choose(idx % 2, [a[0], a[1]], mode="wrap"), np.select([a > 0], [a], -1.0),
                np.piecewise(a, [a < 0], [lambda v: -v, lambda v: v * 2]), np.apply_along_axis(np.sum, 1, a))

    eager_jit_and_kiln_run(kfn, nfn, x, i, tmp_path=tmp_path, tol=1e-5)


def _numpy_put(a, ind, v, mode="raise"):
    a = a.copy()
    np.put(a, ind, v, mode=mode)
    return a


def _numpy_place(a, mask, vals):
    a = a.copy()
    np.place(a, mask, vals)
    return a


def test_grids_and_concatenators():
    eager_and_jit(lambda: knp.mgrid[0:3, 0:4], lambda: np.mgrid[0:3, 0:4])
    eager_and_jit(lambda: knp.mgrid[-1:1:5j], lambda: np.mgrid[-1:1:5j])
    eager_and_jit(lambda: knp.mgrid[0:1:0.25, 1:3], lambda: np.mgrid[0:1:0.25, 1:3])
    eager_and_jit(lambda: knp.ogrid[0:3, 0:4:2], lambda: np.ogrid[0:3, 0:4:2])
    assert kiln.jit(lambda v: v * knp.mgrid[0:1:3j])(np.ones(3, np.float32)).dtype == np.float32  # weak
    x, y = np.arange(3.0), np.arange(4, dtype=np.float32)
    eager_and_jit(lambda a, b: knp.r_[a, 0, 1:3, b], lambda a, b: np.r_[a, 0, 1:3, b], x, y)
    eager_and_jit(lambda b: knp.r_[b, 0.5, -1:1:3j], lambda b: np.r_[b, 0.5, -1:1:3j], y)
    eager_and_jit(lambda a: knp.r_["-1", a[None], a[None]], lambda a: np.r_["-1", a[None], a[None]], x)
    eager_and_jit(lambda a: knp.c_[a, a * 2], lambda a: np.c_[a, a * 2], x)
    eager_and_jit(lambda a: knp.c_[a[None], 0, 0, a[None]], lambda a: np.c_[a[None], 0, 0, a[None]], x)
    assert knp.s_[1:2, ::2] == np.s_[1:2, ::2] and knp.index_exp[1:2] == np.index_exp[1:2]
    with pytest.raises(ValueError, match="r_: only an integer axis directive"):
        knp.r_["r", x]
    with pytest.raises(TypeError, match="mgrid: slice bounds must be Python numbers"):
        kiln.jit(lambda n: knp.mgrid[0:n])(np.int32(3))


def test_put_place_mask_indices_rollaxis():
    z = np.arange(12.0).reshape(3, 4)
    eager_and_jit(lambda a: knp.put(a, [0, 5, 11], [-1.0, -2], inplace=False), lambda a: _numpy_put(a, [0, 5, 11], [-1.0, -2]), z)
    eager_and_jit(lambda a: knp.put(a, [0, 15, -13], 9.0, mode="wrap", inplace=False),
                  lambda a: _numpy_put(a, [0, 15, -13], 9.0, "wrap"), z)
    eager_and_jit(lambda a, i: knp.put(a, i, 9.0, mode="clip", inplace=False), lambda a, i: _numpy_put(a, i, 9.0, "clip"),
                  z, np.array([0, 40, -3]))
    eager_and_jit(lambda a, m: knp.place(a, m, [10.0, 20], inplace=False), lambda a, m: _numpy_place(a, m, [10.0, 20]), z, z % 3 == 0)
    eager_and_jit(lambda: knp.mask_indices(3, knp.triu, 1), lambda: np.mask_indices(3, np.triu, 1))
    eager_and_jit(lambda: knp.mask_indices(4, np.tril, -1), lambda: np.mask_indices(4, np.tril, -1))
    for axis, start in ((2, 0), (0, 3), (1, -1), (-1, 1)):
        eager_and_jit(lambda a: knp.rollaxis(a, axis, start), lambda a: np.rollaxis(a, axis, start), random_array(RNG, (2, 3, 4)))
    with pytest.raises(ValueError, match="put: kiln arrays are immutable.*inplace=False"):
        knp.put(z, [0], 1.0)
    with pytest.raises(ValueError, match="place: kiln arrays are immutable.*inplace=False"):
        knp.place(z, z > 3, [1.0])
    with pytest.raises(ValueError, match="put: mode='raise' needs concrete indices"):
        kiln.jit(lambda a, i: knp.put(a, i, 1.0, mode="raise", inplace=False))(z, np.array([1]))
    with pytest.raises(ValueError, match="place: cannot insert from an empty array"):
        knp.place(z, z > 3, [], inplace=False)
    with pytest.raises(ValueError, match="rollaxis: 'start' arg requires -3 <= start < 4"):
        knp.rollaxis(np.ones((2, 3, 4)), 0, 5)


def test_vectorize_and_fromfunction():
    z, w = np.arange(12.0).reshape(3, 4), np.arange(4.0)
    f = lambda a, b: a * 2 + b  # noqa: E731
    eager_and_jit(knp.vectorize(f), np.vectorize(f), z, w)
    eager_and_jit(knp.vectorize(lambda v, u: knp.sum(v * u), signature="(n),(n)->()"),
                  np.vectorize(lambda v, u: np.sum(v * u), signature="(n),(n)->()"), z, w)
    eager_and_jit(knp.vectorize(lambda v: (knp.max(v), knp.min(v)), signature="(n)->(),()"),
                  np.vectorize(lambda v: (np.max(v), np.min(v)), signature="(n)->(),()"), z)
    eager_and_jit(knp.vectorize(lambda a, p: a ** p, excluded={1}), np.vectorize(lambda a, p: a ** p, excluded={1}), z, 2)
    # eagerly it is numpy.vectorize: Python control flow on the scalars works
    clipped = knp.vectorize(lambda a: a if a < 5 else 5.0)
    np.testing.assert_array_equal(clipped(z), np.minimum(z, 5.0))
    g = lambda v: knp.sum(knp.vectorize(lambda a, b: knp.sin(a) * b)(v, v[::-1]))  # noqa: E731
    np.testing.assert_allclose(kiln.grad(g)(w), numerical_grad(g, w), rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="vectorize: not a valid gufunc signature"):
        kiln.jit(knp.vectorize(f, signature="(n)"))(z, w)
    eager_and_jit(lambda: knp.fromfunction(lambda i, j: i + 2 * j, (2, 3)), lambda: np.fromfunction(lambda i, j: i + 2 * j, (2, 3)))
    eager_and_jit(lambda: knp.fromfunction(lambda i, j: i == j, (3, 3), dtype=int),
                  lambda: np.fromfunction(lambda i, j: i == j, (3, 3), dtype=int))


def test_exported_additions(tmp_path):
    z = random_array(RNG, (3, 4), np.float32)
    eager_jit_and_kiln_run(
        lambda a: (knp.put(a, [0, 5], [1.0, 2.0], inplace=False), knp.place(a, a > 0, [7.0, 8.0], inplace=False),
                   knp.r_[a[0], 0.5, a[1]], knp.c_[a[0], a[1]], knp.rollaxis(a, 1),
                   knp.vectorize(lambda v, u: knp.sum(v * u), signature="(n),(n)->()")(a, a[0]), knp.mgrid[0:2, 0:3]),
        lambda a: (_numpy_put(a, [0, 5], [1.0, 2.0]), _numpy_place(a, a > 0, [7.0, 8.0]), np.r_[a[0], 0.5, a[1]],
                   np.c_[a[0], a[1]], np.rollaxis(a, 1), np.sum(a * a[0], axis=-1), np.mgrid[0:2, 0:3]),
        z, tmp_path=tmp_path, tol=1e-5)


def test_jax_keywords():
    """jax.numpy's extra keywords, so ported code runs unchanged."""
    eager_and_jit(lambda: knp.indices((2, 2), dtype=None), lambda: np.indices((2, 2)))
    eager_and_jit(lambda i, j: knp.ravel_multi_index((i, j), (3, 4), mode="clip", dtype=np.int32),
                  lambda i, j: np.ravel_multi_index((i, j), (3, 4), mode="clip").astype(np.int32), np.array([0, 2]), np.array([1, 3]))
    eager_and_jit(lambda: knp.mask_indices(3, np.triu, 0, size=8),
                  lambda: tuple(np.pad(v, (0, 2)) for v in np.mask_indices(3, np.triu, 0)))
    eager_and_jit(lambda x: knp.delete(x, [1], assume_unique_indices=True), lambda x: np.delete(x, [1]), np.arange(4))


def test_choose_out_is_refused():
    with pytest.raises(NotImplementedError, match="choose: out= is not supported: kiln arrays are immutable"):
        knp.choose(np.array([0]), [np.ones(1)], out=np.ones(1))
