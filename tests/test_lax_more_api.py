"""kiln.lax's cbrt, nextafter, dtype, scatter_sub, reduce_xor, mulhi, index_take and ragged_dot against numpy
(mulhi against Python's exact integers), with their errors, eagerly, under kiln.jit and exported through the
standalone kiln-run."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.lax as lax
import kiln.numpy  # noqa: F401  (kiln.numpy.matmul)
from kiln_tools import eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

R = np.random.default_rng(20261125)
INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def _mulhi_reference(x, y):
    bits = np.dtype(x.dtype).itemsize * 8
    high = [((int(a) * int(b)) >> bits) % (1 << bits) for a, b in zip(x.ravel(), y.ravel())]
    return np.array(high, np.uint64).astype(x.dtype).reshape(x.shape)


@pytest.mark.parametrize("d", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_mulhi(d, tmp_path):
    info = np.iinfo(d)
    x = R.integers(info.min, info.max, (3, 8), dtype=d, endpoint=True)
    y = R.integers(info.min, info.max, (3, 8), dtype=d, endpoint=True)
    x[0, :2], y[0, :2] = info.min, info.max  # the extremes
    eager_jit_and_kiln_run(lambda a, b: lax.mulhi(a, b), _mulhi_reference, x, y, tmp_path=tmp_path)


def test_reduce_xor(tmp_path):
    b = R.random((4, 5)) < 0.5
    i = R.integers(-1000, 1000, (4, 5), dtype=np.int32)
    eager_jit_and_kiln_run(lambda p, q: (lax.reduce_xor(p, (1,)), lax.reduce_xor(q, (0,)), lax.reduce_xor(q, (0, 1))),
                           lambda p, q: (np.logical_xor.reduce(p, axis=1), np.bitwise_xor.reduce(q, axis=0),
                                         np.bitwise_xor.reduce(q, axis=None)), b, i, tmp_path=tmp_path)


def test_cbrt(tmp_path):
    x = np.concatenate([R.uniform(-100, 100, 50), [-8.0, -0.0, 0.0, 27.0, np.inf, -np.inf, np.nan, 1e-300, -1e300]])
    got = lax.cbrt(x)
    np.testing.assert_allclose(got, np.cbrt(x), rtol=4e-16)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.cbrt(x)))
    x32 = x[:-1].astype(np.float32)
    assert lax.cbrt(x32).dtype == np.float32
    eager_jit_and_kiln_run(lambda v: lax.cbrt(v), np.cbrt, x32[:50], tmp_path=tmp_path, tol=2e-7)
    v = np.array([-3.0, 0.5, 8.0])
    np.testing.assert_allclose(kiln.grad(lambda w: lax.cbrt(w).sum())(v), numerical_grad(lambda w: np.cbrt(w).sum(), v),
                               rtol=1e-7)


@pytest.mark.parametrize("d", [np.float32, np.float64])
def test_nextafter(d, tmp_path):
    """numpy's values, subnormals, zeros, infinities and NaN included (kiln.numpy.nextafter calls this)."""
    info = np.finfo(d)
    x = np.concatenate([R.standard_normal(20), [0.0, -0.0, info.tiny, info.tiny / 8, -info.tiny, info.max, np.inf,
                                                 -np.inf, np.nan, 1.0, 1.0, 0.5, 2.0 ** -20]]).astype(d)
    y = np.concatenate([R.standard_normal(20), [1.0, -1.0, 0.0, 1.0, 0.0, np.inf, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0,
                                                 1.0]]).astype(d)
    def want(a, b):
        with np.errstate(over="ignore"):  # max toward inf
            return np.nextafter(a, b)

    eager_jit_and_kiln_run(lambda a, b: lax.nextafter(a, b), want, x, y, tmp_path=tmp_path, tol=0)


def test_scatter_sub(tmp_path):
    x, idx, upd = R.standard_normal((5, 3)), np.array([[1], [3], [1]]), R.standard_normal((3, 3))

    def want(x, idx, upd):
        out = x.copy()
        np.subtract.at(out, idx[:, 0], upd)
        return out

    eager_jit_and_kiln_run(lambda a, i, u: lax.scatter_sub(a, i, u, (0,)), want, x, idx, upd, tmp_path=tmp_path)
    g = kiln.grad(lambda u: lax.scatter_sub(x, idx, u, (0,)).sum())(upd)
    np.testing.assert_array_equal(g, -np.ones_like(upd))


def test_dtype():
    assert lax.dtype(1.0) == np.float32 and lax.dtype(1) == np.int32 and lax.dtype(True) == np.bool_
    assert lax.dtype(np.ones(2, np.float16)) == np.float16 and lax.dtype("int64") == np.int64
    assert lax.dtype(np.float64) == np.float64 and lax.dtype(np.int8(3)) == np.int8
    assert kiln.jit(lambda v: np.zeros((), lax.dtype(v)))(np.ones(2, np.uint8)).dtype == np.uint8


def test_index_take(tmp_path):
    x = R.standard_normal((2, 3, 4))
    i0, i2 = np.array([0, 1, -1, 3]), np.array([2, 0, 5, -7])

    def want(x, i0, i2):  # JAX's rule: the indices wrap modulo the axis length
        return np.moveaxis(x, (0, 2), (0, 1))[i0 % 2, i2 % 4]

    eager_jit_and_kiln_run(lambda v, a, b: lax.index_take(v, (a, b), (0, 2)), want, x, i0, i2, tmp_path=tmp_path)
    np.testing.assert_array_equal(lax.index_take(x, (np.array([2, 0]),), (-1,)), np.moveaxis(x, 2, 0)[[2, 0]])


def _ragged_reference(lhs, rhs, sizes):
    out, start = np.zeros((lhs.shape[0], rhs.shape[2])), 0
    for g, size in enumerate(sizes):
        out[start:start + size] = lhs[start:start + size] @ rhs[g]
        start += size
    return out


def test_ragged_dot(tmp_path):
    lhs, rhs = R.standard_normal((7, 3)), R.standard_normal((3, 3, 2))
    sizes = np.array([2, 0, 4], np.int32)  # an empty group, and a row past the groups (zeros)
    eager_jit_and_kiln_run(lambda a, b, s: lax.ragged_dot(a, b, s), _ragged_reference, lhs, rhs, sizes,
                           tmp_path=tmp_path)
    g_lhs, g_rhs = kiln.grad(lambda a, b: lax.ragged_dot(a, b, sizes).sum(), argnums=(0, 1))(lhs, rhs)
    np.testing.assert_allclose(g_lhs, numerical_grad(lambda a: _ragged_reference(a, rhs, sizes).sum(), lhs), rtol=1e-6)
    np.testing.assert_allclose(g_rhs, numerical_grad(lambda b: _ragged_reference(lhs, b, sizes).sum(), rhs), rtol=1e-6,
                               atol=1e-9)
    with pytest.raises(TypeError, match=r"ragged_dot: expected lhs \(m, k\), rhs \(g, k, n\)"):
        lax.ragged_dot(lhs, rhs[:, :2], sizes)
    with pytest.raises(NotImplementedError, match="ragged_dot: group_offset is not supported"):
        lax.ragged_dot(lhs, rhs, sizes, group_offset=np.zeros(1, np.int32))


@pytest.mark.parametrize("call, message", [
    (lambda: lax.index_take(np.ones((2, 2)), (np.ones((2, 1), np.int32),), (0,)), "index_take: needs one 1-D index"),
    (lambda: lax.mulhi(np.ones(2), np.ones(2)), "mulhi: operands must be integers of one dtype; got float64"),
    (lambda: lax.mulhi(np.ones(2, np.int32), np.ones(2, np.int64)), "mulhi: operands must be integers of one dtype"),
    (lambda: lax.reduce_xor(np.ones(2), (0,)), "reduce_xor: operand must be bool or integer; got float64"),
    (lambda: lax.cbrt(np.ones(2, np.int32)), "cbrt: x must be floating-point; got int32"),
    (lambda: lax.nextafter(np.ones(2, np.float32), np.ones(2)), "nextafter: operands must be floating-point of one"),
])
def test_errors(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_dot_algorithms_are_accepted_as_precision():
    """DotAlgorithm and DotAlgorithmPreset (JAX's storage and accumulation types) are accepted wherever
    precision= is, without effect, as Precision: the product is the full-precision one."""
    x, y = R.standard_normal((3, 4)), R.standard_normal((4, 2))
    algorithm = lax.DotAlgorithm(np.float32, np.float32, np.float32)
    assert algorithm.lhs_component_count == 1 and lax.DotAlgorithmPreset.F32_F32_F32.name == "F32_F32_F32"
    for precision in (algorithm, lax.DotAlgorithmPreset.BF16_BF16_F32, lax.DotAlgorithmPreset.DEFAULT):
        np.testing.assert_allclose(lax.dot(x, y, precision=precision), x @ y, rtol=1e-13)
        np.testing.assert_allclose(kiln.jit(lambda a, b: kiln.numpy.matmul(a, b, precision=precision))(x, y), x @ y,
                                   rtol=1e-13)
    assert lax.canonicalize_precision(algorithm) == (lax.Precision.HIGHEST, lax.Precision.HIGHEST)
    with pytest.raises(ValueError, match=r"precision must be None, .*a DotAlgorithm\(Preset\); got 'fast'"):
        lax.dot(x, y, precision="fast")


ACCURACY_FUNCTIONS = ["exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "sqrt", "rsqrt",
                      "cbrt"]


@pytest.mark.parametrize("name", ACCURACY_FUNCTIONS)
def test_accuracy_is_accepted_where_jax_takes_it(name):
    """JAX's accuracy= (a Tolerance or an AccuracyMode) is checked and leaves the result as it is: each kiln
    function has one implementation (docs/accuracy.md)."""
    fn = getattr(lax, name)
    x = np.array([0.3, 1.7, 2.9])
    plain = fn(x)
    for accuracy in (lax.Tolerance(atol=1e-6, rtol=1e-6, ulps=2), lax.AccuracyMode.HIGHEST, lax.AccuracyMode.DEFAULT):
        np.testing.assert_array_equal(fn(x, accuracy=accuracy), plain)
        np.testing.assert_array_equal(kiln.jit(lambda v: fn(v, accuracy=accuracy))(x), kiln.jit(fn)(x))
    with pytest.raises(TypeError, match=f"{name}: accuracy must be None, a kiln.lax.Tolerance or a kiln.lax.AccuracyMode"):
        fn(x, accuracy="high")


def test_accuracy_only_where_jax_takes_it():
    assert lax.Tolerance() == lax.Tolerance(0.0, 0.0, 0) and list(lax.AccuracyMode.__members__) == ["HIGHEST", "DEFAULT"]
    with pytest.raises(TypeError, match="unexpected keyword argument 'accuracy'"):
        lax.sinh(np.ones(2), accuracy=lax.AccuracyMode.HIGHEST)


def _same_padding(size, window, stride, dilation):
    extent = (window - 1) * dilation + 1
    total = max((-(-size // stride) - 1) * stride + extent - size, 0)
    return total // 2, total - total // 2


def _local_reference(x, w, strides, padding, window, dilation, specs):
    """The locally connected layer by loops, on NCHW input and (O, C*fh*fw, Ho, Wo) weights."""
    lhs_spec, rhs_spec, out_spec = specs
    x = np.transpose(x, [lhs_spec.index(c) for c in "NCHW"])
    w = np.transpose(w, [rhs_spec.index(c) for c in "OIHW"])
    if padding == "SAME":
        padding = [_same_padding(x.shape[2 + k], window[k], strides[k], dilation[k]) for k in range(2)]
    elif padding == "VALID":
        padding = [(0, 0), (0, 0)]
    x = np.pad(x, [(0, 0), (0, 0), *padding])
    (fh, fw), (sh, sw), (dh, dw) = window, strides, dilation
    out = np.zeros((x.shape[0], w.shape[0], w.shape[2], w.shape[3]))
    for y in range(w.shape[2]):
        for z in range(w.shape[3]):
            patch = x[:, :, y * sh:y * sh + (fh - 1) * dh + 1:dh, z * sw:z * sw + (fw - 1) * dw + 1:dw]
            out[:, :, y, z] = patch.reshape(x.shape[0], -1) @ w[:, :, y, z].T
    return np.transpose(out, ["NCHW".index(c) for c in out_spec])


LOCAL_CASES = [  # (input shape, weight shape, strides, padding, window, rhs dilation, dimension numbers)
    ((2, 3, 6, 5), (4, 18, 4, 4), (1, 1), "VALID", (3, 2), (1, 1), ("NCHW", "OIHW", "NCHW")),
    ((2, 3, 6, 5), (4, 18, 3, 3), (2, 2), "SAME", (3, 2), (1, 2), ("NCHW", "OIHW", "NCHW")),
    ((2, 6, 5, 3), (6, 5, 12, 4), (1, 1), ((1, 0), (0, 1)), (2, 2), (1, 1), ("NHWC", "HWIO", "NHWC")),
]


@pytest.mark.parametrize("case", LOCAL_CASES, ids=["nchw_valid", "nchw_same_strided_dilated", "nhwc_explicit"])
def test_conv_general_dilated_local(case, tmp_path):
    """Against loops in numpy (the same values as JAX 0.10's, checked when written), eagerly, under jit and
    through kiln-run; the gradients in both operands against central differences."""
    x_shape, w_shape, strides, padding, window, dilation, specs = case
    x, w = R.standard_normal(x_shape), R.standard_normal(w_shape)
    dn = None if specs == ("NCHW", "OIHW", "NCHW") else specs

    def local(a, b):
        return lax.conv_general_dilated_local(a, b, strides, padding, window, rhs_dilation=dilation,
                                              dimension_numbers=dn)

    def want(a, b):
        return _local_reference(a, b, strides, padding, window, dilation, specs)

    eager_jit_and_kiln_run(local, want, x, w, tmp_path=tmp_path, tol=1e-12)
    c = R.standard_normal(want(x, w).shape)
    gx, gw = kiln.grad(lambda a, b: (local(a, b) * c).sum(), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, numerical_grad(lambda a: (want(a, w) * c).sum(), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, numerical_grad(lambda b: (want(x, b) * c).sum(), w), rtol=1e-6, atol=1e-8)


def test_scatter_apply(tmp_path):
    """func applied once where any index row points (duplicates once; out-of-range rows dropped, JAX's
    default), in kiln's scatter form (indices, axes); its gradient is func's there and 1 elsewhere."""
    x = R.standard_normal((5, 2))
    idx = np.array([[1], [3], [1], [9]])

    def want(x, idx):
        out = x.copy()
        rows = sorted({int(i) for i in idx[:, 0] if 0 <= i < 5})
        out[rows] = np.sin(out[rows]) * 3
        return out

    eager_jit_and_kiln_run(lambda a, i: lax.scatter_apply(a, i, lambda v: lax.sin(v) * 3, (0,)), want, x, idx,
                           tmp_path=tmp_path)
    g = kiln.grad(lambda a: lax.scatter_apply(a, idx, lambda v: lax.sin(v) * 3, (0,)).sum())(x)
    np.testing.assert_allclose(g, numerical_grad(lambda a: want(a, idx).sum(), x), rtol=1e-7)
    with pytest.raises(TypeError, match=r"scatter_apply: func must keep the operand's shape and dtype float64\[5, 2\]"):
        lax.scatter_apply(x, idx, lambda v: v.astype(np.float32), (0,))


def test_jax_dimension_numbers_that_pick_whole_slices(tmp_path):
    """gather/scatter with JAX's GatherDimensionNumbers/ScatterDimensionNumbers, where they describe kiln's
    whole-slice form (indexed axes collapsed, the other axes whole and last): the same as (indices, axes)."""
    x, u = R.standard_normal((4, 3, 5)), R.standard_normal((3, 3))
    idx = np.array([[2, 1], [0, 4], [3, 0]])
    gdn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0, 2), start_index_map=(0, 2))
    sdn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0, 2),
                                      scatter_dims_to_operand_dims=(0, 2))

    def want(x, idx, u):
        added = x.copy()
        np.add.at(added, (idx[:, 0], slice(None), idx[:, 1]), u)
        return x[idx[:, 0], :, idx[:, 1]], added

    eager_jit_and_kiln_run(lambda a, i, v: (lax.gather(a, i, gdn, (1, 3, 1), mode="clip", indices_are_sorted=False),
                                            lax.scatter_add(a, i, v, sdn, unique_indices=True)),
                           want, x, idx, u, tmp_path=tmp_path)
    rows = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(0,), start_index_map=(0,))
    np.testing.assert_array_equal(lax.gather(x, idx[:, :1], rows, (1, 3, 5)), x[idx[:, 0]])
    np.testing.assert_array_equal(lax.scatter_apply(x, idx, lambda v: -v, sdn),
                                  lax.scatter_apply(x, idx, lambda v: -v, (0, 2)))


@pytest.mark.parametrize("call, error, message", [
    (lambda x, i: lax.gather(x, i, lax.GatherDimensionNumbers((1,), (0, 2), (0, 2)), (1, 2, 1)), NotImplementedError,
     r"gather: kiln takes dimension numbers that pick whole slices: the indexed axes \(0, 2\) collapsed"),
    (lambda x, i: lax.gather(x, i, lax.GatherDimensionNumbers((1,), (0, 2), (0, 2), (1,), (0,)), (1, 3, 1)),
     NotImplementedError, "gather: batching dimensions are not supported"),
    (lambda x, i: lax.scatter(x, i, np.ones((3, 3)), lax.ScatterDimensionNumbers((0,), (0, 2), (0, 2))),
     NotImplementedError, "scatter: kiln takes dimension numbers that pick whole slices"),
    (lambda x, i: lax.gather(x, i, (0, 2), (1, 3, 1)), TypeError, "gather: slice_sizes goes with JAX's"),
])
def test_dimension_number_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(np.ones((4, 3, 5)), np.array([[2, 1], [0, 4], [3, 0]]))


def test_ragged_dot_general_with_ragged_dots_dimension_numbers():
    lhs, rhs, sizes = R.standard_normal((5, 3)), R.standard_normal((2, 3, 4)), np.array([3, 2], np.int32)
    dn = lax.RaggedDotDimensionNumbers(dot_dimension_numbers=(([1], [1]), ([], [])), lhs_ragged_dimensions=[0],
                                       rhs_group_dimensions=[0])
    np.testing.assert_allclose(lax.ragged_dot_general(lhs, rhs, sizes, dn), _ragged_reference(lhs, rhs, sizes),
                               rtol=1e-13, atol=1e-15)
    other = lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (1,))
    with pytest.raises(NotImplementedError, match="ragged_dot_general: only ragged_dot's dimension numbers"):
        lax.ragged_dot_general(lhs, rhs, sizes, other)


def test_scaled_dot_and_scaled_matmul_repeat_block_scales(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 8)).astype(np.float32)
    b = rng.standard_normal((2, 4, 8)).astype(np.float32)
    a_scales = rng.uniform(0.5, 2, (2, 3, 2)).astype(np.float32)
    b_scales = rng.uniform(0.5, 2, (2, 4, 4)).astype(np.float32)
    want = np.einsum("bmk,bnk->bmn", a * np.repeat(a_scales, 4, -1), b * np.repeat(b_scales, 2, -1))

    def both(a, b, a_scales, b_scales):
        default = lax.scaled_dot(a, b.transpose(0, 2, 1), lhs_scale=a_scales, rhs_scale=b_scales.transpose(0, 2, 1),
                                 preferred_element_type=np.float32)
        return kiln.nn.scaled_matmul(a, b, a_scales, b_scales), default

    eager_jit_and_kiln_run(both, lambda *args: (want, want), a, b, a_scales, b_scales, tmp_path=tmp_path, tol=1e-5)
    bf16 = kiln.jit(lambda a, b: lax.scaled_dot(a, b.transpose(0, 2, 1), lhs_scale=a_scales,
                                                rhs_scale=b_scales.transpose(0, 2, 1)))(a, b)
    assert bf16.dtype == ml_dtypes.bfloat16  # JAX's default result type
    np.testing.assert_allclose(bf16.astype(np.float32), want, rtol=1e-2, atol=2e-2)
    np.testing.assert_allclose(kiln.jit(kiln.nn.scaled_matmul)(a, b, a_scales, b_scales), want, rtol=1e-5, atol=1e-5)
    plain = lax.scaled_dot(a[0], b[0].T, dimension_numbers=(((1,), (0,)), ((), ())), preferred_element_type=np.float64)
    np.testing.assert_allclose(plain, a[0].astype(np.float64) @ b[0].T, rtol=1e-6)
    with pytest.raises(TypeError, match="contracting dimension 2 \\(8\\) is not a multiple of lhs_scale's \\(3\\)"):
        lax.scaled_dot(a, b.transpose(0, 2, 1), lhs_scale=np.ones((2, 3, 3), np.float32))
    with pytest.raises(TypeError, match="rank 0 or 1 need dimension_numbers"):
        lax.scaled_dot(a[0, 0], b[0, 0])
    with pytest.raises(ValueError, match="rhs_scales must be 3-d"):
        kiln.nn.scaled_matmul(a, b, a_scales, b_scales[0])


def test_block_ciphers_match_random123_known_answers():
    from kiln.lax.prng import philox4x32, threefry2x32

    def words(values):
        return [int(np.asarray(v).ravel()[0]) for v in values]

    u32 = lambda v: np.array([v], np.uint32)  # noqa: E731
    with np.errstate(over="ignore"):
        assert words(threefry2x32(u32(0), u32(0), u32(0), u32(0))) == [0x6B200159, 0x99BA4EFE]
        assert words(threefry2x32(*[u32(0xFFFFFFFF)] * 4)) == [0x1CB996FC, 0xBB002BE7]
        assert words(threefry2x32(u32(0x13198A2E), u32(0x03707344), u32(0x243F6A88), u32(0x85A308D3))) == \
            [0xC4923A9C, 0x483DF7A0]
        assert words(philox4x32(*[u32(0)] * 6)) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
        assert words(philox4x32(*[u32(0xFFFFFFFF)] * 6)) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
        assert words(philox4x32(u32(0xA4093822), u32(0x299F31D0), u32(0x243F6A88), u32(0x85A308D3), u32(0x13198A2E),
                                u32(0x03707344))) == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


@pytest.mark.parametrize("algorithm", [lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX])
def test_rng_bit_generator(algorithm, tmp_path):
    key = np.array([7, 9, 0xFFFFFFFF, 2], np.uint32)

    def draw(k):
        new_key, bits32 = lax.rng_bit_generator(k, (1000,), algorithm=algorithm)
        _, bits8 = lax.rng_bit_generator(k, (3, 5), dtype=np.int8, algorithm=algorithm)
        _, bits64 = lax.rng_bit_generator(new_key, (4,), dtype=np.uint64, algorithm=algorithm)
        return new_key, bits32, bits8, bits64

    eager = draw(key)
    if algorithm == lax.RandomAlgorithm.RNG_PHILOX:
        eager_jit_and_kiln_run(draw, lambda k: eager, key, tmp_path=tmp_path)
        default = lax.rng_bit_generator(key, 1000)[1]  # RNG_DEFAULT is Philox (XLA's CPU default); an int shape
        np.testing.assert_array_equal(default, eager[1])
    else:
        eager_and_jit(draw, lambda k: eager, key)
    new_key, bits32, bits8, bits64 = eager
    # the 64-bit state advanced by XLA's block count (1000 words: 250 Philox blocks, 500 Threefry), with carry
    np.testing.assert_array_equal(new_key, [7, 9, 249 if algorithm == lax.RandomAlgorithm.RNG_PHILOX else 499, 3])
    assert bits8.dtype == np.int8 and bits64.dtype == np.uint64 and bits8.shape == (3, 5)
    assert np.unique(bits32).size == 1000 and abs(bits32.mean() / 2**32 - 0.5) < 0.03
    assert abs(np.unpackbits(bits32.view(np.uint8)).mean() - 0.5) < 0.01
    other = lax.rng_bit_generator(np.array([7, 9, 5, 2], np.uint32), (1000,), algorithm=algorithm)[1]
    assert np.mean(other == bits32) < 0.01


# (algorithm, shape, dtype, the returned key's state words): JAX 0.10.2's on CPU from the key [7, 9, 0, 0]
XLA_KEY_ADVANCE = [
    ("RNG_THREE_FRY", (5, 3), np.uint8, [9, 0]), ("RNG_THREE_FRY", (2, 3, 5), np.uint32, [15, 0]),
    ("RNG_THREE_FRY", (5,), np.uint16, [3, 0]), ("RNG_THREE_FRY", (3, 2), np.uint64, [6, 0]),
    ("RNG_THREE_FRY", (), np.uint64, [1, 0]), ("RNG_THREE_FRY", (3, 0), np.uint32, [0, 0]),
    ("RNG_PHILOX", (5, 3), np.uint8, [4, 0]), ("RNG_PHILOX", (3, 5, 2), np.uint32, [8, 0]),
    ("RNG_PHILOX", (3, 2), np.uint64, [3, 0]), ("RNG_DEFAULT", (), np.uint32, [1, 0]),
]


def test_rng_bit_generator_advances_the_key_as_xla():
    for name, shape, dtype, state in XLA_KEY_ADVANCE:
        new_key = lax.rng_bit_generator(np.array([7, 9, 0, 0], np.uint32), shape, dtype,
                                        algorithm=lax.RandomAlgorithm[name])[0]
        np.testing.assert_array_equal(new_key, [7, 9] + state, err_msg=f"{name} {shape} {dtype}")
    top = np.array([1, 2, 0xFFFFFFFF, 0xFFFFFFFF], np.uint32)  # the 64-bit state wraps; the key is kept
    np.testing.assert_array_equal(lax.rng_bit_generator(top, (3,), algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)[0],
                                  [1, 2, 1, 0])


def test_rng_bit_generator_errors():
    with pytest.raises(TypeError, match=r"uint32 array of shape \(4,\); got uint32\[2\]"):
        lax.rng_bit_generator(np.zeros(2, np.uint32), (3,))
    with pytest.raises(TypeError, match="dtype must be an integer dtype; got float32"):
        lax.rng_bit_generator(np.zeros(4, np.uint32), (3,), dtype=np.float32)
    with pytest.raises(ValueError, match="unknown algorithm 7"):
        lax.rng_bit_generator(np.zeros(4, np.uint32), (3,), algorithm=7)


def test_lax_fft_types_against_numpy(tmp_path):
    rng = np.random.default_rng(4)
    signal = rng.standard_normal((2, 4, 67))  # 67: a Bluestein length
    spectrum = np.fft.fftn(signal, axes=(1, 2))
    half = np.fft.rfftn(signal[..., :10], axes=(1, 2))

    def transforms(signal, spectrum, half):
        return (lax.fft(signal, "rfft", (4, 67)), lax.fft(spectrum, lax.FftType.IFFT, (4, 67)),
                lax.fft(spectrum, lax.FftType.FFT, (67,)), lax.fft(half, "IRFFT", (4, 10)),
                lax.fft(half[..., :5], lax.FftType.IRFFT, (9,)))

    want = (np.fft.rfftn(signal, axes=(1, 2)), np.fft.ifftn(spectrum, axes=(1, 2)), np.fft.fft(spectrum),
            np.fft.irfftn(half, s=(4, 10), axes=(1, 2)), np.fft.irfft(half[..., :5], n=9))
    eager_jit_and_kiln_run(transforms, lambda *a: want, signal, spectrum, half, tmp_path=tmp_path, tol=1e-10)
    single = lax.fft(signal.astype(np.float32), "rfft", (67,))
    assert single.dtype == np.complex64
    np.testing.assert_allclose(single, np.fft.rfft(signal), rtol=1e-4, atol=1e-4)
    grad = kiln.grad(lambda x: kiln.numpy.sum(kiln.numpy.abs(lax.fft(x, "rfft", (67,))) ** 2))(signal[0, 0])
    np.testing.assert_allclose(grad, numerical_grad(lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 2), signal[0, 0]),
                               rtol=1e-6)
    # real input to FFT, IFFT and IRFFT is taken as complex (JAX's); RFFT refuses complex input
    as_complex = lax.fft(np.arange(6, dtype=np.int32), "fft", (6,))
    assert as_complex.dtype == np.complex64
    np.testing.assert_allclose(as_complex, np.fft.fft(np.arange(6)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lax.fft(signal[0, 0], "ifft", (67,)), np.fft.ifft(signal[0, 0]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lax.fft(signal[0, 0, :3], "irfft", (4,)), np.fft.irfft(signal[0, 0, :3], 4), rtol=1e-12)
    with pytest.raises(TypeError, match="RFFT takes real input; got complex128"):
        lax.fft(spectrum, "rfft", (67,))
    with pytest.raises(ValueError, match=r"FFT with fft_lengths \(5,\) needs trailing axes \(5,\); got \(67,\)"):
        lax.fft(spectrum, "fft", (5,))
    with pytest.raises(TypeError, match="RFFT takes real input; got complex128"):
        lax.fft(spectrum, "rfft", (67,))
    with pytest.raises(ValueError, match="unknown fft_type 'dct'"):
        lax.fft(signal, "dct", (67,))
