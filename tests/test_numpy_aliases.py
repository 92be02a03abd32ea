"""numpy 2's array-API aliases, the dtype/type queries, knp.ndarray and asarray/array's copy= and ndmin=,
against numpy eagerly, under kiln.jit and (a few) through kiln-run; every error message."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run, random_array

RNG = np.random.default_rng(23)


@pytest.mark.parametrize("name", ["acos", "acosh", "asin", "asinh", "atan", "atanh"])
def test_unary_aliases(name):
    x = RNG.uniform(0.1, 0.9, 5) + (1.5 if name == "acosh" else 0.0)
    eager_and_jit(getattr(knp, name), getattr(np, name), x)
    eager_and_jit(getattr(knp, name), getattr(np, name), x.astype(np.float32))


def test_binary_aliases():
    x, y = random_array(RNG, (4,)), random_array(RNG, (4,))
    eager_and_jit(knp.atan2, np.atan2, x, y)
    eager_and_jit(knp.pow, np.pow, np.abs(x), y)
    eager_and_jit(knp.pow, np.pow, np.arange(4, dtype=np.int32), 2)
    i = np.arange(-3, 5, dtype=np.int32)
    eager_and_jit(knp.bitwise_left_shift, np.bitwise_left_shift, i, np.int32(2))
    eager_and_jit(knp.bitwise_right_shift, np.bitwise_right_shift, i, np.int32(1))
    eager_and_jit(knp.bitwise_invert, np.bitwise_invert, i)


def test_structural_aliases():
    x = random_array(RNG, (2, 3, 4))
    eager_and_jit(lambda a: knp.concat([a, a], axis=1), lambda a: np.concat([a, a], axis=1), x)
    eager_and_jit(lambda a: knp.concat([a, a], axis=None), lambda a: np.concat([a, a], axis=None), x)
    eager_and_jit(lambda a: knp.permute_dims(a, (2, 0, 1)), lambda a: np.permute_dims(a, (2, 0, 1)), x)
    eager_and_jit(knp.unstack, np.unstack, x)
    eager_and_jit(lambda a: knp.unstack(a, axis=-1), lambda a: np.unstack(a, axis=-1), x)
    eager_and_jit(knp.matrix_transpose, np.matrix_transpose, x)
    with pytest.raises(ValueError, match="unstack: input must be at least 1-d"):
        knp.unstack(np.float64(1))


def test_vector_products():
    a, b = random_array(RNG, (2, 3, 4)), random_array(RNG, (3, 4))
    eager_and_jit(knp.vecdot, np.vecdot, a, b)
    eager_and_jit(lambda p, q: knp.vecdot(p, q, axis=1), lambda p, q: np.vecdot(p, q, axis=1), a, a)
    eager_and_jit(knp.vecdot, np.vecdot, np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(3, dtype=np.int32))
    eager_and_jit(knp.matvec, np.matvec, a, b[0])
    eager_and_jit(knp.matvec, np.matvec, a, b[:, None, :][:2, 0])
    eager_and_jit(knp.vecmat, np.vecmat, b[0], a.transpose(0, 2, 1))
    with pytest.raises(ValueError, match="vecdot: the vectors' lengths differ"):
        knp.vecdot(a, b[:, :3])
    with pytest.raises(ValueError, match="matvec: needs a matrix and a vector"):
        knp.matvec(b[0], b[0])
    with pytest.raises(ValueError, match="vecmat: needs a vector and a matrix"):
        knp.vecmat(b[0], b[0])


def test_exported(tmp_path):
    a, b = random_array(RNG, (2, 3, 4), np.float32), random_array(RNG, (3, 4), np.float32)
    eager_jit_and_kiln_run(lambda p, q: (knp.vecdot(p, q), knp.matvec(p, q[0]), knp.vecmat(q[0], knp.permute_dims(p, (0, 2, 1))),
                                         knp.concat([q, q]), *knp.unstack(q), knp.acos(q * 0.1)),
                           lambda p, q: (np.vecdot(p, q), np.matvec(p, q[0]), np.vecmat(q[0], np.permute_dims(p, (0, 2, 1))),
                                         np.concat([q, q]), *np.unstack(q), np.acos(q * np.float32(0.1))),
                           a, b, tmp_path=tmp_path)


def test_result_type_and_promote_types():
    cases = [(np.float32, 1.0), (np.ones(2, np.int8), np.uint8), (np.int16, np.float16), (1, 2.0), (True,),
             (np.ones(2, np.float16), 2), (np.float64, np.ones(2, np.float32))]
    for args in cases:
        assert knp.result_type(*args) == np.result_type(*args), args
    assert knp.result_type(ml_dtypes.bfloat16, np.int32) == ml_dtypes.bfloat16  # as in JAX
    # kiln's weak rule (docs/numpy.md): a Python float with an integer array is float32, numpy says float64
    assert knp.result_type(np.ones(2, np.int32), 2.5) == knp.add(np.ones(2, np.int32), 2.5).dtype == np.float32
    seen = []
    kiln.jit(lambda x: seen.append(knp.result_type(x, 1.0)) or x)(np.ones(2, np.float16))
    assert seen == [np.float16]
    for t1, t2 in [(np.int8, np.uint8), (np.int32, np.float32), (np.bool_, np.int16), (np.float16, np.int64)]:
        assert knp.promote_types(t1, t2) == np.promote_types(t1, t2)
    with pytest.raises(ValueError, match="result_type: at least one array or dtype is required"):
        knp.result_type()


def test_can_cast_isdtype():
    for args in [(np.int8, np.float16), (np.int64, np.float32), (np.float32, np.int32, "unsafe"), (np.int16, np.int8, "same_kind")]:
        assert knp.can_cast(*args) == np.can_cast(*args), args
    assert knp.can_cast(np.ones(2, np.int8), np.int16)
    with pytest.raises(TypeError, match="can_cast: a Python number has no dtype"):
        knp.can_cast(1.0, np.float32)
    for dtype in (np.bool_, np.int8, np.uint8, np.int64, np.float16, np.float64):
        for kind in ("bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating",
                     "numeric", np.float64, ("integral", "bool")):
            assert knp.isdtype(np.dtype(dtype), kind) == np.isdtype(np.dtype(dtype), kind), (dtype, kind)
    assert knp.isdtype(knp.bfloat16, "real floating") and not knp.isdtype(knp.bfloat16, "integral")
    with pytest.raises(ValueError, match="isdtype: kind 'floating' is not a known kind name"):
        knp.isdtype(np.float32, "floating")


def test_type_queries():
    x = np.ones(3, np.float32)
    for v in (1, 1.5, True, np.float32(2), x, np.float64(1).reshape(()), [1, 2]):
        assert knp.isscalar(v) == np.isscalar(v)
        assert knp.iscomplexobj(v) == np.iscomplexobj(v)
        assert knp.isrealobj(v) == np.isrealobj(v)
    seen = []
    kiln.jit(lambda a, s: seen.append((knp.isscalar(a), knp.isscalar(s), knp.iscomplexobj(a))) or a)(x, np.float32(1))
    assert seen == [(False, True, False)]
    eager_and_jit(knp.iscomplex, np.iscomplex, x)
    eager_and_jit(knp.isreal, np.isreal, np.arange(4, dtype=np.int32))


def test_ndarray_isinstance():
    x = np.ones(3)
    assert isinstance(x, knp.ndarray) and isinstance(knp.add(x, 1.0), knp.ndarray)
    assert isinstance(kiln.jit(lambda a: a * 2)(x), knp.ndarray)
    assert not isinstance(1.0, knp.ndarray) and not isinstance([1.0], knp.ndarray)
    seen = []
    kiln.jit(lambda a: seen.append(isinstance(a, knp.ndarray)) or a)(x)
    kiln.grad(lambda a: seen.append(isinstance(a, knp.ndarray)) or knp.sum(a))(x)
    kiln.vmap(lambda a: seen.append(isinstance(a, knp.ndarray)) or a)(x)
    assert seen == [True, True, True]


def test_asarray_copy_and_array_ndmin():
    a = np.arange(3.0)
    # a kiln array viewing a's memory (no copy), as np.asarray(a) is a itself
    assert np.shares_memory(knp.asarray(a), a) and np.shares_memory(knp.asarray(a, copy=False), a)
    assert knp.asarray(a, copy=True) is not a and knp.array(a) is not a
    np.testing.assert_array_equal(knp.array(a), a)
    check_like_numpy(knp.array(a, ndmin=3), np.array(a, ndmin=3))
    check_like_numpy(knp.array([1.0, 2], dtype=np.float32, ndmin=2), np.array([1.0, 2], dtype=np.float32, ndmin=2))
    eager_and_jit(lambda v: knp.array(v, ndmin=2), lambda v: np.array(v, ndmin=2), a)
    eager_and_jit(lambda v: knp.asarray(v, copy=True), lambda v: np.asarray(v, copy=True), a)
    with pytest.raises(ValueError, match="asarray: unable to avoid a copy"):
        knp.asarray([1, 2], copy=False)
    with pytest.raises(ValueError, match="asarray: unable to avoid a copy"):
        knp.asarray(a, np.float32, copy=False)
    with pytest.raises(ValueError, match="array: unable to avoid a copy"):
        knp.array([1.0], copy=False)
    assert np.shares_memory(knp.array(a, copy=False), a) and np.shares_memory(knp.array(a, copy=None), a)


def test_dtype_names_and_constants():
    for name in ("double", "single", "half", "int_", "intp", "intc", "longlong", "short", "byte", "ubyte"):
        assert np.dtype(getattr(knp, name)) == np.dtype(getattr(np, name)), name
    assert np.dtype(knp.float_) == np.float64
    assert knp.issubdtype(np.float32, knp.floating) and not knp.issubdtype(np.float32, knp.complexfloating)
    assert knp.euler_gamma == np.euler_gamma
    for v in ([1], 1.0, np.ones(2), np.float32(1), "ab"):
        assert knp.iterable(v) == np.iterable(v)
    seen = []
    kiln.jit(lambda a: seen.append((knp.iterable(a), knp.iterable(a[0]))) or a)(np.ones(2))
    assert seen == [(True, False)]


@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_unpackbits(bitorder, tmp_path):
    bits = RNG.random((3, 10)) > 0.5
    eager_and_jit(lambda a: [knp.packbits(a, axis=ax, bitorder=bitorder) for ax in (None, 0, 1, -1)],
                  lambda a: [np.packbits(a, axis=ax, bitorder=bitorder) for ax in (None, 0, 1, -1)], bits)
    eager_and_jit(knp.packbits, np.packbits, np.array([0, 3, 0, -1, 5], np.int32))
    u = RNG.integers(0, 256, (2, 3)).astype(np.uint8)
    cases = [(ax, count) for ax in (None, 0, 1) for count in (None, 5, -3, 30)]
    eager_and_jit(lambda a: [knp.unpackbits(a, axis=ax, count=c, bitorder=bitorder) for ax, c in cases],
                  lambda a: [np.unpackbits(a, axis=ax, count=c, bitorder=bitorder) for ax, c in cases], u)
    eager_jit_and_kiln_run(lambda a, p: (knp.packbits(a, axis=1, bitorder=bitorder), knp.unpackbits(p, bitorder=bitorder)),
                           lambda a, p: (np.packbits(a, axis=1, bitorder=bitorder), np.unpackbits(p, bitorder=bitorder)),
                           bits, u, tmp_path=tmp_path)
    with pytest.raises(TypeError, match="unpackbits: expected an input array of unsigned byte data type"):
        knp.unpackbits(np.ones(2, np.int32))
    with pytest.raises(TypeError, match="packbits: expected an input array of integer or boolean data type"):
        knp.packbits(np.ones(2))
    with pytest.raises(ValueError, match="packbits: bitorder must be 'big' or 'little'"):
        knp.packbits(bits, bitorder="middle")


def test_numpy_eager_helpers(tmp_path):
    """Printing, file I/O and einsum_path are numpy's own (eager arrays are numpy arrays)."""
    x = np.arange(4.0)
    assert knp.array_str(x) == np.array_str(x) and knp.array_repr(x) == np.array_repr(x)
    with knp.printoptions(precision=2):
        assert knp.get_printoptions()["precision"] == 2
    knp.save(tmp_path / "x.npy", knp.add(x, 1.0))
    np.testing.assert_array_equal(knp.load(tmp_path / "x.npy"), x + 1)
    np.testing.assert_array_equal(knp.frombuffer(x.tobytes()), x)
    np.testing.assert_array_equal(knp.fromiter(range(3), np.int32), np.arange(3, dtype=np.int32))
    assert issubclass(knp.ComplexWarning, Warning)
    a, b = np.ones((2, 3)), np.ones((3, 4))
    assert knp.einsum_path("ij,jk->ik", a, b)[0] == np.einsum_path("ij,jk->ik", a, b)[0]
    seen = []
    kiln.jit(lambda p, q: seen.append(knp.einsum_path("ij,jk->ik", p, q)[0]) or p)(a, b)
    assert seen == [np.einsum_path("ij,jk->ik", a, b)[0]]


def test_vecdot_jax_keywords():
    a, v = np.arange(4, dtype=np.int8).reshape(2, 2), np.array([1, 2], np.int8)
    eager_and_jit(lambda p, q: knp.vecdot(p, q, precision="highest", preferred_element_type=np.int32),
                  lambda p, q: np.vecdot(p.astype(np.int32), q.astype(np.int32)), a, v)
