"""kiln.Array: eager kiln.numpy results and kiln.jit results are immutable arrays like jax.Array
(issue 9 §2): .at updates, in-place operators that rebind, hashing of 0-d arrays, zero-copy numpy
interop (np.asarray, the buffer protocol, DLPack), numpy functions returning numpy results, and traced
indices into kiln arrays under jit."""
import copy
import pickle

import numpy as np
import pytest

import kiln
import kiln.numpy as knp


def test_eager_results_are_immutable_kiln_arrays():
    x = knp.arange(5.0)
    assert isinstance(x, kiln.Array) and isinstance(x, np.ndarray)
    with pytest.raises(TypeError, match=r"immutable.*x.at\[idx\].set"):
        x[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(x)[0] = 1.0
    assert isinstance(knp.sum(x), kiln.Array) and knp.sum(x).shape == ()
    assert isinstance(knp.linalg.trace(knp.eye(3)), kiln.Array)


def test_at_updates_return_new_arrays():
    x = knp.zeros(4)
    y = x.at[1].set(5.0).at[2].add(3.0).at[0].multiply(2.0).at[3].max(-1.0).at[3].min(7.0)
    np.testing.assert_array_equal(y, [0.0, 5.0, 3.0, 0.0])
    np.testing.assert_array_equal(x, np.zeros(4))
    assert y.at[1].get() == 5.0 and isinstance(y, kiln.Array)


def test_in_place_operators_rebind_and_leave_the_caller_array_alone():
    x = knp.ones(3)
    alias = x
    alias += 2.0
    alias *= 3.0
    np.testing.assert_array_equal(x, np.ones(3))
    np.testing.assert_array_equal(alias, np.full(3, 9.0))
    assert isinstance(alias, kiln.Array)


def test_operators_and_methods_give_kiln_arrays():
    x = knp.array([3.0, 1.0, 2.0])
    for value in (x + 1, 1 + x, np.ones(3) + x, x @ x, -x, x.sum(), x.mean(), x.reshape(3, 1), x.astype(np.float32),
                  x.sort(), x[1:], x[0], x.T, x.copy()):
        assert isinstance(value, kiln.Array), type(value)
        assert not value.flags.writeable
    np.testing.assert_array_equal(x.sort(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x, [3.0, 1.0, 2.0])  # x.sort() returns a sorted copy, as jax.Array's


def test_numpy_functions_see_numpy_arrays():
    x = knp.array([3.0, 1.0, 2.0])
    assert type(np.add(x, 1)) is np.ndarray
    assert type(np.sort(x)) is np.ndarray
    np.testing.assert_array_equal(np.sort(x), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(np.percentile(x, 50), 2.0)
    assert type(np.asarray(x)) is np.ndarray and not np.asarray(x).flags.writeable
    mutable = np.array(x)
    mutable[0] = 0.0
    np.testing.assert_array_equal(x, [3.0, 1.0, 2.0])


def test_zero_copy_views():
    x = knp.arange(6, dtype=np.int32).reshape(2, 3)
    assert np.shares_memory(np.asarray(x), x)
    view = memoryview(x)
    assert view.readonly and view.shape == (2, 3) and view.format == "i"
    assert np.shares_memory(np.from_dlpack(x), x)
    assert x.__array_namespace__() is knp


def test_zero_d_arrays_hash_like_numpy_scalars():
    table = {knp.sum(knp.arange(4)): "six", knp.asarray(2.5) * 1: "float"}
    assert table[6] == "six" and table[np.float64(2.5)] == "float"
    with pytest.raises(TypeError, match="unhashable"):
        hash(knp.ones(2))


def test_out_argument_into_a_kiln_array_is_refused():
    x = knp.ones(3)
    with pytest.raises(TypeError, match="immutable"):
        np.add(np.ones(3), 1.0, out=x)


def test_copy_pickle_keep_it_immutable():
    x = knp.arange(3.0)
    assert copy.copy(x) is x and copy.deepcopy(x) is x
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, kiln.Array) and not y.flags.writeable
    np.testing.assert_array_equal(y, x)


def test_jit_results_are_kiln_arrays_and_go_back_in():
    f = kiln.jit(lambda a, b: (a * b, a.sum()))
    p, s = f(knp.arange(4.0), np.full(4, 2.0))
    assert isinstance(p, kiln.Array) and isinstance(s, kiln.Array)
    with pytest.raises(TypeError, match="immutable"):
        p[0] = 1.0
    again, _ = f(p, p)
    np.testing.assert_array_equal(again, np.arange(4.0) ** 2 * 4)


def test_kiln_arrays_closed_over_and_indexed_by_traced_values():
    table = knp.arange(10.0) * 3
    f = kiln.jit(lambda i: table[i] + table.at[i].get())
    assert f(np.int32(4)) == 24.0
    g = kiln.jit(lambda i: knp.asarray(np.arange(10.0))[i])
    assert g(np.int32(7)) == 7.0
    with pytest.raises(Exception, match="dynamic_slice"):
        kiln.jit(lambda i: table[i:i + 2])(np.int32(1))


def test_from_dlpack_is_a_zero_copy_kiln_array():
    source = np.arange(6.0).reshape(2, 3)
    x = knp.from_dlpack(source)
    assert isinstance(x, kiln.Array) and np.shares_memory(x, source)
    y = knp.from_dlpack(knp.arange(3.0) * 2)
    np.testing.assert_array_equal(y, [0.0, 2.0, 4.0])
    assert knp.from_dlpack(source, copy=True).base is not source
    assert np.dtype(knp.uint) == np.dtype(np.uint)
