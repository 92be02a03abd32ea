"""kiln.ops (jax.ops): segment_sum / segment_prod / segment_max / segment_min against values recorded from
JAX 0.10.2 (eagerly and under kiln.jit, out-of-range and negative ids dropped, mode="clip", bucket_size,
num_segments inferred from concrete ids, empty segments at the identity, integer data, the gradient), their
errors, and the .at[] keywords (mode=, indices_are_sorted=, unique_indices=) they rest on."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
import kiln.ops as ops
from kiln import lax

DATA = np.arange(1, 13, dtype=np.float32).reshape(6, 2) * np.array([1, -0.5], np.float32)
IDS = np.array([0, 2, 2, -1, 5, 0], np.int32)  # -1 and 5 are out of range for 4 segments: dropped
INTS = np.array([3, -4, 7, 1, 0, 9], np.int32)
INF, IMIN, IMAX = np.inf, np.iinfo(np.int32).min, np.iinfo(np.int32).max

# name -> (DATA by IDS into 4, INTS likewise, mode="clip", ids [0, 1, 1, 3, 3, 0] without num_segments), from JAX
WANT = {
    "segment_sum": ([[12, -7], [0, 0], [8, -5], [0, 0]], [12, 0, 3, 0],
                    [[19, -11], [0, 0], [8, -5], [9, -5]], [[12, -7], [8, -5], [0, 0], [16, -9]]),
    "segment_prod": ([[11, 6], [1, 1], [15, 6], [1, 1]], [27, 1, -28, 1],
                     [[77, -24], [1, 1], [15, 6], [9, -5]], [[11, 6], [15, 6], [1, 1], [63, 20]]),
    "segment_max": ([[11, -1], [-INF, -INF], [5, -2], [-INF, -INF]], [9, IMIN, 7, IMIN],
                    [[11, -1], [-INF, -INF], [5, -2], [9, -5]], [[11, -1], [5, -2], [-INF, -INF], [9, -4]]),
    "segment_min": ([[1, -6], [INF, INF], [3, -3], [INF, INF]], [3, IMAX, -4, IMAX],
                    [[1, -6], [INF, INF], [3, -3], [9, -5]], [[1, -6], [3, -3], [INF, INF], [7, -5]]),
}


@pytest.mark.parametrize("name", list(WANT))
def test_segment_reductions_match_jax(name):
    fn = getattr(ops, name)
    by_ids, ints, clipped, inferred = WANT[name]
    got = fn(DATA, IDS, 4)
    assert got.dtype == np.float32 and got.shape == (4, 2)
    np.testing.assert_array_equal(got, np.float32(by_ids))
    np.testing.assert_array_equal(kiln.jit(lambda d, i: fn(d, i, num_segments=4))(DATA, IDS), np.float32(by_ids))
    got_ints = fn(INTS, IDS, 4)
    assert got_ints.dtype == np.int32
    np.testing.assert_array_equal(got_ints, ints)
    np.testing.assert_array_equal(fn(DATA, IDS, 4, mode="clip"), np.float32(clipped))
    np.testing.assert_array_equal(kiln.jit(lambda d, i: fn(d, i, 4, mode=lax.GatherScatterMode.CLIP))(DATA, IDS),
                                  np.float32(clipped))
    np.testing.assert_array_equal(fn(DATA, IDS, 4, bucket_size=4, indices_are_sorted=False, out_sharding=None),
                                  np.float32(by_ids))
    np.testing.assert_array_equal(fn(DATA, np.array([0, 1, 1, 3, 3, 0])), np.float32(inferred))


def test_segment_gradients_match_jax():
    f = lambda d: knp.sum(ops.segment_sum(d, IDS, 3) ** 2) + knp.sum(ops.segment_max(d, IDS, 3))  # noqa: E731
    want = [[24, -13], [16, -9], [17, -10], [0, 0], [0, 0], [25, -14]]
    np.testing.assert_array_equal(kiln.grad(f)(DATA), np.float32(want))
    np.testing.assert_array_equal(kiln.jit(kiln.grad(f))(DATA), np.float32(want))


def test_segment_errors():
    with pytest.raises(TypeError, match="num_segments must be given"):
        kiln.jit(lambda i: ops.segment_sum(DATA, i))(IDS)
    with pytest.raises(TypeError, match="segment_ids must be integers"):
        ops.segment_sum(DATA, IDS.astype(np.float32), 4)
    with pytest.raises(ValueError, match="one id per row"):
        ops.segment_sum(DATA, IDS[:3], 4)
    with pytest.raises(ValueError, match="num_segments must be non-negative"):
        ops.segment_sum(DATA, IDS, -1)
    with pytest.raises(ValueError, match="mode must be one of"):
        ops.segment_min(DATA, IDS, 4, mode="wrap")
    with pytest.raises(ValueError, match="bucket_size must be positive"):
        ops.segment_prod(DATA, IDS, 4, bucket_size=0)


def test_at_update_keywords():
    ids = np.array([5, 1, -1, -7])
    add = lambda mode: kiln.jit(lambda i: knp.zeros(3, np.float32).at[i].add(1.0, mode=mode))(ids)  # noqa: E731
    np.testing.assert_array_equal(add(None), [0, 1, 1])  # out of range dropped, -1 counts from the end
    np.testing.assert_array_equal(add("drop"), [0, 1, 1])
    np.testing.assert_array_equal(add(lax.GatherScatterMode.FILL_OR_DROP), [0, 1, 1])
    np.testing.assert_array_equal(add("clip"), [1, 1, 2])  # JAX: 5 -> 2, -7 -> -4 -> 0
    got = knp.arange(4.0).at[np.array([0, 2])].max(np.array([3.0, 1.0]), indices_are_sorted=True, unique_indices=True)
    np.testing.assert_array_equal(got, [3, 1, 2, 3])
    # divide and power as JAX computes them: x / (ones multiplied by v at the indices), x ** (...) likewise, so a
    # repeated index divides twice and an out-of-range one is dropped or, with mode="clip", clamped
    x = np.arange(1.0, 6.0)
    np.testing.assert_array_equal(knp.asarray(x).at[np.array([0, 0, 3, 9])].divide(2.0), [0.25, 2, 3, 2, 5])
    np.testing.assert_array_equal(knp.asarray(x).at[np.array([-1, 9])].divide(2.0, mode="clip"), [1, 2, 3, 4, 1.25])
    np.testing.assert_array_equal(kiln.vmap(lambda i: knp.asarray(x).at[i].power(3.0))(np.array([1, 9]))[0],
                                  [1, 8, 3, 4, 5])  # a traced index
    np.testing.assert_array_equal(knp.asarray(x).at[np.array([1, 1, -7])].power(2.0, mode="clip"), [1, 16, 3, 4, 5])
    assert knp.arange(1, 4, dtype=np.int32).at[0].divide(2).dtype == np.float64  # numpy's true division
    # apply: func once per occurrence, as JAX 0.10.2's scatter_apply gives ([4, 2, 6, 4], clip: [8, 2, 6, 4])
    x = np.arange(1.0, 5.0)
    np.testing.assert_array_equal(knp.asarray(x).at[np.array([0, 0, 2, 7])].apply(lambda v: v * 2), [4, 2, 6, 4])
    np.testing.assert_array_equal(knp.asarray(x).at[np.array([0, 0, 2, -9])].apply(lambda v: v * 2, mode="clip"),
                                  [8, 2, 6, 4])
    np.testing.assert_allclose(knp.asarray(x).at[1:3].apply(knp.sin), [1, np.sin(2), np.sin(3), 4], rtol=1e-15)
    traced = kiln.vmap(lambda i: knp.asarray(x).at[knp.stack([i, i])].apply(lambda v: v * 2))(np.array([1, 9]))
    np.testing.assert_array_equal(traced, [[1, 8, 3, 4], [1, 2, 3, 4]])  # a while_loop: twice at 1, none at 9
    grad = kiln.grad(lambda x: knp.sum(x.at[np.array([0, 0, 2])].apply(lambda v: v * v)))(x)
    np.testing.assert_array_equal(grad, [4, 1, 6, 1])  # x0 ** 4 and x2 ** 2: concrete indices differentiate
    with pytest.raises(ValueError, match="at\\[\\].apply: mode must be"):
        knp.zeros(3).at[0].apply(knp.sin, mode="wrap")
    with pytest.raises(ValueError, match="at\\[\\].divide: mode must be"):
        knp.zeros(3).at[0].divide(1.0, mode="wrap")
    with pytest.raises(ValueError, match="mode must be"):
        knp.zeros(3).at[0].set(1.0, mode="wrap")
