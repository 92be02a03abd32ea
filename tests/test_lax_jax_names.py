"""jax.lax's elementwise functions and shape helpers kiln.lax gained (kiln/lax/elementwise.py, shape_api.py):
against numpy, eagerly, under jit and through kiln-run; gradients against central differences."""
import numpy as np
import pytest

import kiln
import kiln.lax as lax
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

X = np.array([-2.5, -1.5, -0.7, -0.5, 0.0, 0.3, 0.5, 1.5, 2.5])
UNIT = np.array([-0.9, -0.4, 0.0, 0.3, 0.8])

UNARY = {
    "sin": (np.sin, X), "cos": (np.cos, X), "tan": (np.tan, X), "asin": (np.arcsin, UNIT),
    "acos": (np.arccos, UNIT), "atan": (np.arctan, X), "sinh": (np.sinh, X), "cosh": (np.cosh, X),
    "asinh": (np.arcsinh, X), "acosh": (np.arccosh, X[X >= 1]), "atanh": (np.arctanh, UNIT), "exp2": (np.exp2, X),
    "expm1": (np.expm1, X), "log1p": (np.log1p, UNIT), "floor": (np.floor, X), "ceil": (np.ceil, X),
    "sign": (np.sign, X), "square": (np.square, X), "reciprocal": (lambda v: 1 / v, X[X != 0]),
    "logistic": (lambda v: 1 / (1 + np.exp(-v)), X),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_numpy(name):
    ref, x = UNARY[name]
    eager_and_jit(getattr(lax, name), ref, x)
    x32 = x.astype(np.float32)
    check_like_numpy(getattr(lax, name)(x32), ref(x).astype(np.float32), tol=3e-6)


def test_round_both_methods_and_is_finite(tmp_path):
    x = np.array([-2.5, -1.5, -0.5, 0.49999997, 0.5, 1.5, 2.5, np.inf, np.nan], np.float32)
    with np.errstate(invalid="ignore"):  # inf - inf
        away = np.where(np.abs(x - np.trunc(x)) >= 0.5, np.trunc(x) + np.sign(x), np.trunc(x))
    eager_jit_and_kiln_run(lax.round, lambda v: away, x, tmp_path=tmp_path)
    eager_and_jit(lambda v: lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN), np.rint, x)
    eager_and_jit(lambda v: lax.round(v, 1), np.rint, x)
    eager_and_jit(lax.is_finite, np.isfinite, x)
    with pytest.raises(TypeError, match="round: x must be floating-point; got int32"):
        lax.round(np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError, match="is_finite: x must be floating-point; got int32"):
        lax.is_finite(np.arange(3, dtype=np.int32))


def test_bitwise_and_shifts():
    a = np.array([12, -7, 255, 0], np.int32)
    b = np.array([10, 3, 15, 1], np.int32)
    eager_and_jit(lax.bitwise_and, np.bitwise_and, a, b)
    eager_and_jit(lax.bitwise_or, np.bitwise_or, a, b)
    eager_and_jit(lax.bitwise_xor, np.bitwise_xor, a, b)
    eager_and_jit(lax.bitwise_not, np.invert, a)
    eager_and_jit(lax.shift_left, np.left_shift, a, b)
    eager_and_jit(lax.shift_right_arithmetic, np.right_shift, a, b)
    eager_and_jit(lambda v: lax.bitwise_and(v, 6), lambda v: v & np.int32(6), a)
    m = np.array([True, False, True])
    eager_and_jit(lax.bitwise_not, np.logical_not, m)


def test_gradients():
    x = np.array([-1.2, 0.4, 2.0])
    for name in ("sin", "logistic", "square", "reciprocal", "expm1", "atan"):
        fn = getattr(lax, name)
        g = kiln.grad(lambda v: knp.sum(fn(v)))(x)
        np.testing.assert_allclose(g, numerical_grad(lambda v: np.sum(np.asarray(fn(v))), x), rtol=1e-6)
    np.testing.assert_array_equal(kiln.grad(lambda v: knp.sum(lax.round(v)))(x), np.zeros(3))


def test_shape_helpers():
    a = np.arange(24.0).reshape(2, 3, 4)
    eager_and_jit(lambda v: lax.expand_dims(v, (0, 4)), lambda v: v[None, :, :, :, None], a)
    eager_and_jit(lambda v: lax.squeeze(v, (0, 2)), lambda v: v[0, :, 0], a[:1, :, :1])
    eager_and_jit(lambda v: lax.broadcast(v, (2, 1)), lambda v: np.broadcast_to(v, (2, 1) + v.shape), a)
    eager_and_jit(lambda v: lax.broadcast_to_rank(v, 5), lambda v: v[None, None], a)
    eager_and_jit(lambda v: lax.slice_in_dim(v, 1, None, 2, axis=2), lambda v: v[:, :, 1::2], a)
    eager_and_jit(lambda v: lax.slice_in_dim(v, -2, -1, axis=1), lambda v: v[:, -2:-1], a)
    eager_and_jit(lambda v: lax.index_in_dim(v, -1, 1, keepdims=False), lambda v: v[:, -1], a)
    eager_and_jit(lambda v: lax.index_in_dim(v, 0, 2), lambda v: v[:, :, :1], a)
    eager_and_jit(lambda v: lax.collapse(v, 1), lambda v: v.reshape(2, 12), a)
    eager_and_jit(lambda v: lax.collapse(v, 0, -1), lambda v: v.reshape(6, 4), a)
    eager_and_jit(lambda v: tuple(lax.split(v, (1, 3), axis=2)), lambda v: (v[:, :, :1], v[:, :, 1:]), a)
    eager_and_jit(lambda v, i: lax.dynamic_update_index_in_dim(v, np.ones((2, 4)), i, 1),
                  lambda v, i: np.concatenate([v[:, :1], np.ones((2, 1, 4)), v[:, 2:]], axis=1), a, np.int32(1))
    eager_and_jit(lambda v: lax.full_like(v, 7), lambda v: np.full_like(v, 7), a)
    eager_and_jit(lambda v: lax.full_like(v, 2.9, dtype=np.int8, shape=(2,)), lambda v: np.array([2, 2], np.int8), a)
    # a Python number alone takes numpy's dtype, eagerly and under jit, as knp.full (docs/numpy.md)
    check_like_numpy(kiln.jit(lambda: lax.full((2, 3), 1.5))(), np.full((2, 3), 1.5))
    check_like_numpy(lax.full((2,), np.int8(3)), np.full((2,), 3, np.int8))


def test_shape_helper_errors():
    a = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"squeeze: dimension 1 has size 3, not 1 \(shape \(2, 3\)\)"):
        lax.squeeze(a, (1,))
    with pytest.raises(IndexError, match="index_in_dim: index 3 is out of bounds for axis 1 of size 3"):
        lax.index_in_dim(a, 3, 1)
    with pytest.raises(ValueError, match=r"split: sizes \[1, 1\] add up to 2, not the size 3 of axis 1"):
        lax.split(a, (1, 1), axis=1)
    with pytest.raises(TypeError, match=r"full: fill_value must be a scalar; got shape \(3,\)"):
        lax.full((3,), np.ones(3))
    with pytest.raises(ValueError, match="batch_matmul: operands must have the same rank >= 2"):
        lax.batch_matmul(a, np.ones((2, 3, 3)))
    with pytest.raises(ValueError, match="collapse: stop_dimension 0 must be between start_dimension 1 and 2"):
        lax.collapse(a, 1, 0)


def test_batch_matmul_select_n_and_top_k(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    eager_and_jit(lax.batch_matmul, lambda a, b: a @ b, x, y)
    eager_and_jit(lambda a, b: lax.batch_matmul(a, b, precision="highest"), lambda a, b: a @ b, x, y)
    which = np.array([0, 2, 1, 2], np.int32)
    cases = [np.zeros(4), np.ones(4), np.full(4, 2.0)]
    eager_and_jit(lambda w, *c: lax.select_n(w, *c), lambda w, *c: np.choose(w, c), which, *cases)
    mask = np.array([True, False, True, False])
    eager_and_jit(lambda m, a, b: lax.select_n(m, a, b), lambda m, a, b: np.where(m, b, a), mask, cases[0], cases[1])
    with pytest.raises(TypeError, match="select_n: a bool which selects between two cases; got 3"):
        lax.select_n(mask, *cases)
    v = np.array([[3.0, 1.0, 4.0, 1.0, 5.0, 4.0], [2.0, 2.0, 0.0, 7.0, -1.0, 2.0]], np.float32)

    def top3(a):
        order = np.argsort(-a, axis=-1, kind="stable")[:, :3]
        return np.take_along_axis(a, order, -1), order.astype(np.int32)

    eager_jit_and_kiln_run(lambda a: lax.top_k(a, 3), top3, v, tmp_path=tmp_path)
    eager_and_jit(lambda a: lax.top_k(a, 1, axis=0), lambda a: (a.max(0, keepdims=True),
                                                                a.argmax(0)[None].astype(np.int32)), v)
    with pytest.raises(ValueError, match="top_k: k 7 must be between 0 and the size 6 of axis 1"):
        lax.top_k(v, 7)
    g = kiln.grad(lambda a: knp.sum(lax.top_k(a, 2)[0] * np.array([1.0, 10.0])))(v[0].astype(np.float64))
    np.testing.assert_array_equal(g, [0, 0, 10, 0, 1, 0])


def test_reductions():
    a = np.arange(1.0, 7.0).reshape(2, 3)
    eager_and_jit(lambda v: lax.reduce_prod(v, (1,)), lambda v: np.prod(v, axis=1), a)
    eager_and_jit(lambda v: lax.reduce_prod(v, (0, -1)), np.prod, a)
    g = kiln.grad(lambda v: lax.reduce_prod(v, (0,)))(np.array([2.0, 3.0, 4.0]))
    np.testing.assert_allclose(g, [12.0, 8.0, 6.0])
    m = np.array([[True, False, True], [True, True, True]])
    eager_and_jit(lambda v: lax.reduce_and(v, (1,)), lambda v: np.all(v, axis=1), m)
    eager_and_jit(lambda v: lax.reduce_or(v, (0, 1)), np.any, m)
    eager_and_jit(lambda v: lax.reduce_and(v, (0,)), lambda v: np.all(v, axis=0), np.ones((0, 2), bool))
    with pytest.raises(TypeError, match="reduce_or: kiln reduces bool operands only; got int32"):
        lax.reduce_or(np.ones(2, np.int32), (0,))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
def test_associative_scan_sums(n):
    x = np.arange(1.0, n + 1)
    eager_and_jit(lambda v: lax.associative_scan(knp.add, v), np.cumsum, x)
    eager_and_jit(lambda v: lax.associative_scan(knp.add, v, reverse=True), lambda v: np.cumsum(v[::-1])[::-1], x)


def test_associative_scan_trees_axes_and_gradient(tmp_path):
    rng = np.random.default_rng(3)
    a, b = rng.random(7), rng.standard_normal(7)

    def recurrence(p, q):  # h_t = a_t h_{t-1} + b_t as a composition of affine maps
        return p[0] * q[0], q[0] * p[1] + q[1]

    def reference(a, b):
        h, out = 0.0, []
        for ai, bi in zip(a, b):
            h = ai * h + bi
            out.append(h)
        return np.cumprod(a), np.array(out)

    eager_jit_and_kiln_run(lambda a, b: lax.associative_scan(recurrence, (a, b)), reference, a, b, tmp_path=tmp_path)
    x = rng.standard_normal((3, 6))
    eager_and_jit(lambda v: lax.associative_scan(knp.maximum, v, axis=1), lambda v: np.maximum.accumulate(v, 1), x)
    eager_and_jit(lambda v: lax.associative_scan(knp.logical_or, v), np.logical_or.accumulate,
                  np.array([False, True, False, False, True]))
    loss = lambda b: knp.sum(lax.associative_scan(recurrence, (a, b))[1] ** 2)  # noqa: E731
    np.testing.assert_allclose(kiln.grad(loss)(b), numerical_grad(lambda v: float(loss(v)), b), rtol=1e-6)
    with pytest.raises(ValueError, match="associative_scan: every array of elems needs the same length along axis 0"):
        lax.associative_scan(recurrence, (a, b[:3]))
    with pytest.raises(ValueError, match="associative_scan: fn must return the structure of elems"):
        lax.associative_scan(lambda p, q: p[0], (a, b))


def test_more_shape_helpers(tmp_path):
    a = np.arange(6.0).reshape(2, 3)
    check_like_numpy(lax.empty((2, 3), np.int8), np.zeros((2, 3), np.int8))
    assert lax.broadcast_shapes((2, 1), (3,), ()) == (2, 3)
    eager_and_jit(lambda v: lax.broadcast_like(v[0], v), lambda v: np.broadcast_to(v[0], v.shape), a)
    eager_and_jit(lambda v, w: lax.stack([v, w], axis=1), lambda v, w: np.stack([v, w], 1), a, a + 1)
    eager_and_jit(lambda v: lax.unstack(v, axis=1), lambda v: tuple(v[:, i] for i in range(3)), a)
    eager_jit_and_kiln_run(lambda v: lax.tile(v, (2, 3)), lambda v: np.tile(v, (2, 3)), a, tmp_path=tmp_path)
    v = np.array([[3.0, 1.0, 4.0, 1.0, 5.0], [2.0, 2.0, 0.0, 7.0, 2.0]])

    def smallest(x, k=3):
        order = np.argsort(x, axis=-1, kind="stable")[:, :k]
        return np.take_along_axis(x, order, -1), order.astype(np.int32)

    eager_and_jit(lambda x: lax.approx_min_k(x, 3), smallest, v)
    eager_and_jit(lambda x: lax.approx_max_k(x, 2, recall_target=0.9), lambda x: tuple(
        np.asarray(r) for r in lax.top_k(x, 2)), v)
    assert lax.conv_general_permutations(("NHWC", "HWIO", "NHWC")) == ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    with pytest.raises(ValueError, match=r"tile: reps \(2,\) needs one entry per dimension"):
        lax.tile(a, (2,))
    with pytest.raises(ValueError, match="approx_min_k: k 6 must be between 0 and the size 5"):
        lax.approx_min_k(v, 6)
    with pytest.raises(TypeError, match="conv_general_permutations: dimension_numbers must be three strings"):
        lax.conv_general_permutations(None)
    assert lax.PrecisionLike is not None and lax.DotDimensionNumbers is tuple


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_reduce_with_any_computation(n):
    x = np.arange(1.0, n * 3 + 1).reshape(n, 3)
    eager_and_jit(lambda v: lax.reduce(v, 0.0, lax.add, (0,)), lambda v: v.sum(0), x)
    eager_and_jit(lambda v: lax.reduce(v, -np.inf, lax.max, (0, 1)), np.max, x)
    eager_and_jit(lambda v: lax.reduce(v, 1.0, lambda a, b: a * b, (1,)), lambda v: v.prod(1), x)

    def argmax_pair(a, b):  # a (value, index) pair reduction: the larger value, then the smaller index
        take_a = knp.logical_or(a[0] > b[0], knp.logical_and(a[0] == b[0], a[1] < b[1]))
        return knp.where(take_a, a[0], b[0]), knp.where(take_a, a[1], b[1])

    v = np.array([3.0, 9.0, 2.0, 9.0, 1.0])[: max(n, 1)]
    eager_and_jit(lambda v: lax.reduce((v, np.arange(len(v), dtype=np.int32)), (-np.inf, np.int32(0)), argmax_pair,
                                       (0,)),
                  lambda v: (np.max(v), np.int32(np.argmax(v))), v)


def test_reduce_edges_and_errors():
    check_like_numpy(lax.reduce(np.ones((0, 3)), 0.0, lax.add, (0,)), np.zeros(3))
    with pytest.raises(ValueError, match="reduce: init_values must have the structure of operands"):
        lax.reduce((np.ones(3), np.ones(3)), 0.0, lax.add, (0,))
    with pytest.raises(ValueError, match="reduce: the computation must return the structure of the operands"):
        lax.reduce((np.ones(3), np.ones(3)), (0.0, 0.0), lambda a, b: a[0], (0,))


def test_cumlogsumexp():
    x = np.array([[0.0, 1.0, -3.0, 2.0, 700.0], [-np.inf, -np.inf, 0.0, 5.0, 5.0]])
    with np.errstate(invalid="ignore"):
        want = np.logaddexp.accumulate(x, axis=1)
    eager_and_jit(lambda v: lax.cumlogsumexp(v, axis=1), lambda v: want, x)
    eager_and_jit(lambda v: lax.cumlogsumexp(v, axis=1, reverse=True),
                  lambda v: np.logaddexp.accumulate(v[:, ::-1], axis=1)[:, ::-1], x[:, 2:])
    g = kiln.grad(lambda v: knp.sum(lax.cumlogsumexp(v)))(np.array([0.3, -1.0, 2.0]))
    np.testing.assert_allclose(g, numerical_grad(lambda v: float(np.sum(np.logaddexp.accumulate(v))),
                                                 np.array([0.3, -1.0, 2.0])), rtol=1e-6)
    with pytest.raises(TypeError, match="cumlogsumexp: operand must be floating-point; got int32"):
        lax.cumlogsumexp(np.arange(3, dtype=np.int32))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64])
def test_bit_counting_and_logical_shift(dtype):
    info = np.iinfo(dtype)
    width = info.bits
    x = np.array([0, 1, 5, 100, info.max, info.min, info.max // 3], dtype)
    as_unsigned = [int(v) & ((1 << width) - 1) for v in x]
    eager_and_jit(lax.population_count, lambda v: np.array([bin(u).count("1") for u in as_unsigned], dtype), x)
    eager_and_jit(lax.clz, lambda v: np.array([width - u.bit_length() for u in as_unsigned], dtype), x)
    shifts = np.array([0, 1, 3, width - 1, width, 2, 1], dtype)
    want = np.array([(u >> int(s)) if int(s) < width else 0 for u, s in zip(as_unsigned, shifts)]).astype(dtype)
    eager_and_jit(lax.shift_right_logical, lambda v, s: want, x, shifts)
    with pytest.raises(TypeError, match="population_count: x must be an integer array; got float32"):
        lax.population_count(np.ones(2, np.float32))


def test_gather_scatter_mode_enum():
    x = np.arange(5.0)
    rows = np.array([[1], [7]], np.int32)
    check_like_numpy(lax.gather(x, rows, (0,), mode=lax.GatherScatterMode.CLIP), lax.gather(x, rows, (0,), mode="clip"))
    check_like_numpy(lax.gather(x, rows, (0,), mode=lax.GatherScatterMode.FILL_OR_DROP),
                     lax.gather(x, rows, (0,), mode="fill"))
    check_like_numpy(lax.scatter(x, rows, np.array([9.0, 9.0]), (0,), mode=lax.GatherScatterMode.FILL_OR_DROP),
                     np.array([0.0, 9.0, 2.0, 3.0, 4.0]))
    assert lax.GatherScatterMode.from_any(None) is lax.GatherScatterMode.FILL_OR_DROP
    assert lax.GatherScatterMode.from_any("promise_in_bounds") is lax.GatherScatterMode.PROMISE_IN_BOUNDS
    with pytest.raises(ValueError, match="gather: mode must be 'fill', 'clip' or 'promise_in_bounds'"):
        lax.gather(x, rows, (0,), mode=lax.GatherScatterMode.ONE_HOT)
