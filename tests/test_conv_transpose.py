"""kiln.lax.conv_transpose (JAX's signature and layouts), the shape-tuple helpers, and precision= /
preferred_element_type= on the convolutions: against a numpy loop reference, against the gradient of the
convolution it transposes, eagerly, under jit and through kiln-run; gradients against central differences."""
import numpy as np
import pytest

import kiln
import kiln.lax as lax
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(0)


def transposed_conv_loop(x, k, strides, pads, rhs_dilation=None):
    """NHWC x HWIO (any number of spatial dims): x dilated by strides, padded by pads (negative crops), then
    correlated with k dilated by rhs_dilation, one output element at a time."""
    nsp = x.ndim - 2
    rhs_dilation = rhs_dilation or (1,) * nsp
    shape = (x.shape[0],) + tuple((d - 1) * s + 1 for d, s in zip(x.shape[1:-1], strides)) + (x.shape[-1],)
    dilated = np.zeros(shape, np.float64)
    dilated[(slice(None),) + tuple(slice(None, None, s) for s in strides)] = x
    padded = np.pad(dilated, [(0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in pads] + [(0, 0)])
    crop = tuple(slice(-min(lo, 0), padded.shape[1 + i] + min(hi, 0)) for i, (lo, hi) in enumerate(pads))
    padded = padded[(slice(None),) + crop]
    span = [(kd - 1) * r + 1 for kd, r in zip(k.shape[:nsp], rhs_dilation)]
    out_sp = [p - s_ + 1 for p, s_ in zip(padded.shape[1:-1], span)]
    out = np.zeros((x.shape[0], *out_sp, k.shape[-1]))
    for n in range(x.shape[0]):
        for pos in np.ndindex(*out_sp):
            for kpos in np.ndindex(*k.shape[:nsp]):
                where = tuple(p + kp * r for p, kp, r in zip(pos, kpos, rhs_dilation))
                out[(n, *pos)] += padded[(n, *where)] @ k[kpos]
    return out


def test_explicit_padding_against_the_loop_reference(tmp_path):
    x = RNG.standard_normal((2, 3, 4, 2))
    k = RNG.standard_normal((3, 2, 2, 3))
    for strides, pads, dil in (((1, 1), ((2, 2), (1, 1)), None), ((2, 3), ((1, 2), (0, 1)), None),
                               ((2, 1), ((0, -1), (2, 0)), (2, 1))):
        eager_and_jit(lambda a, b: lax.conv_transpose(a, b, strides, pads, rhs_dilation=dil),
                      lambda a, b: transposed_conv_loop(a, b, strides, pads, dil), x, k)
    x32, k32 = x.astype(np.float32), k.astype(np.float32)
    eager_jit_and_kiln_run(lambda a, b: lax.conv_transpose(a, b, (2, 3), ((1, 2), (0, 1))),
                           lambda a, b: transposed_conv_loop(a, b, (2, 3), ((1, 2), (0, 1))).astype(np.float32),
                           x32, k32, tmp_path=tmp_path, tol=1e-5)


def test_one_and_three_spatial_dims():
    x = RNG.standard_normal((1, 5, 2))
    k = RNG.standard_normal((3, 2, 2))
    eager_and_jit(lambda a, b: lax.conv_transpose(a, b, (3,), ((2, 2),)),
                  lambda a, b: transposed_conv_loop(a, b, (3,), ((2, 2),)), x, k)
    x3 = RNG.standard_normal((1, 2, 3, 2, 1))
    k3 = RNG.standard_normal((2, 2, 2, 1, 2))
    eager_and_jit(lambda a, b: lax.conv_transpose(a, b, (2, 1, 2), ((1, 1), (1, 1), (1, 1))),
                  lambda a, b: transposed_conv_loop(a, b, (2, 1, 2), ((1, 1), (1, 1), (1, 1))), x3, k3)


def _forward(x, k, strides, padding):
    return lax.conv_general_dilated(x, k, strides, padding, dimension_numbers=("NHWC", "HWIO", "NHWC"))


@pytest.mark.parametrize("strides,padding,size", [((2, 2), "SAME", (6, 4)), ((1, 1), "SAME", (5, 4)),
                                                  ((2, 3), "VALID", (7, 9)), ((1, 1), "VALID", (5, 5))])
def test_transpose_kernel_is_the_gradient_of_the_forward_conv(strides, padding, size):
    """transpose_kernel=True gives exactly the input-gradient of the convolution with the same kernel,
    strides and padding (JAX's and keras' Conv2DTranspose), wherever the shapes agree."""
    x = RNG.standard_normal((2, *size, 3))
    k = RNG.standard_normal((3, 3, 3, 4))
    y, vjp = kiln.vjp(lambda v: _forward(v, k, strides, padding), x)
    ct = RNG.standard_normal(np.shape(y))
    want = vjp(ct)[0]
    got = lax.conv_transpose(ct, k, strides, padding, transpose_kernel=True)
    check_like_numpy(got, np.asarray(want))
    jitted = kiln.jit(lambda c, w: lax.conv_transpose(c, w, strides, padding, transpose_kernel=True))(ct, k)
    check_like_numpy(jitted, np.asarray(want))


def test_same_padding_output_is_strides_times_the_input_and_matches_the_shape_tuple():
    x = RNG.standard_normal((1, 3, 5, 2)).astype(np.float32)
    k = RNG.standard_normal((3, 2, 2, 4)).astype(np.float32)
    dn = ("NHWC", "HWIO", "NHWC")
    for padding in ("SAME", "VALID", ((1, 0), (2, 1))):
        for strides in ((1, 1), (2, 3)):
            out = lax.conv_transpose(x, k, strides, padding)
            assert out.dtype == np.float32
            assert out.shape == lax.conv_transpose_shape_tuple(x.shape, k.shape, strides, padding, dn)
    assert lax.conv_transpose(x, k, (2, 3), "SAME").shape == (1, 6, 15, 4)


def test_nchw_layout_and_consistent_padding():
    x = RNG.standard_normal((1, 2, 4, 3))  # NCHW
    k = RNG.standard_normal((3, 2, 2, 2))  # OIHW
    got = lax.conv_transpose(x, k, (2, 1), ((1, 1), (0, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
    want = transposed_conv_loop(x.transpose(0, 2, 3, 1), k.transpose(2, 3, 1, 0), (2, 1), ((1, 1), (0, 1)))
    check_like_numpy(got, want.transpose(0, 3, 1, 2))
    xh = x.transpose(0, 2, 3, 1)
    kh = k.transpose(2, 3, 1, 0)
    # use_consistent_padding: (lo, hi) is the forward convolution's padding; the transposed one is k - 1 - p (k = 2)
    got = lax.conv_transpose(xh, kh, (2, 2), ((1, 0), (0, 1)), use_consistent_padding=True)
    check_like_numpy(got, transposed_conv_loop(xh, kh, (2, 2), ((0, 1), (1, 0))))


def test_gradients_against_central_differences():
    x = RNG.standard_normal((1, 3, 2, 2))
    k = RNG.standard_normal((2, 3, 2, 2))
    c = RNG.standard_normal((1, 6, 4, 2))

    def f(a, b):
        return knp.sum(lax.conv_transpose(a, b, (2, 2), "SAME") * c)

    gx, gk = kiln.grad(f, argnums=(0, 1))(x, k)
    np.testing.assert_allclose(gx, numerical_grad(lambda a: np.asarray(f(a, k)), x), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gk, numerical_grad(lambda b: np.asarray(f(x, b)), k), rtol=1e-6, atol=1e-9)
    gx_jit, gk_jit = kiln.jit(kiln.grad(f, argnums=(0, 1)))(x, k)
    np.testing.assert_allclose(gx_jit, gx, rtol=1e-12)
    np.testing.assert_allclose(gk_jit, gk, rtol=1e-12)


def test_vmap_over_a_batch_of_kernels():
    x = RNG.standard_normal((1, 3, 3, 2))
    ks = RNG.standard_normal((4, 2, 2, 2, 3))
    got = kiln.vmap(lambda b: lax.conv_transpose(x, b, (2, 2), "VALID"))(ks)
    want = np.stack([np.asarray(lax.conv_transpose(x, b, (2, 2), "VALID")) for b in ks])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_errors():
    x, k = np.ones((1, 3, 3, 2)), np.ones((2, 2, 2, 2))
    with pytest.raises(lax.ShapeError, match=r"conv_transpose: lhs and rhs must have the same rank >= 2"):
        lax.conv_transpose(x, k[0], (1, 1), "SAME")
    with pytest.raises(ValueError, match=r"conv_transpose: strides needs 2 values .* got \(1,\)"):
        lax.conv_transpose(x, k, (1,), "SAME")
    with pytest.raises(ValueError, match="conv_transpose: no default dimension_numbers for rank 6"):
        lax.conv_transpose(np.ones((1,) * 6), np.ones((1,) * 6), (1,) * 4, "SAME")
    with pytest.raises(ValueError, match="conv_transpose: padding must be 'SAME', 'VALID' or"):
        lax.conv_transpose(x, k, (1, 1), "FULL")
    with pytest.raises(ValueError, match="conv_transpose: padding needs 2 .low, high. pairs"):
        lax.conv_transpose(x, k, (1, 1), ((0, 0),), use_consistent_padding=True)


def test_shape_tuples_as_jax():
    dn = ("NHWC", "HWIO", "NHWC")
    assert lax.conv_general_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (2, 2), "SAME", dn) == (1, 3, 3, 8)
    assert lax.conv_transpose_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (2, 2), "SAME", dn) == (1, 10, 10, 8)
    assert lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 3), (2, 2), "VALID") == (2, 4, 4, 4)
    assert lax.reduce_window_shape_tuple((4, 6), (2, 2), (2, 1), ((0, 0), (1, 1))) == (2, 7)
    assert lax.reduce_window_shape_tuple((4, 6), (2, 2), (1, 1), ((0, 0), (0, 0)), base_dilation=(2, 1),
                                         window_dilation=(1, 2)) == (6, 4)
    x, k = np.ones((2, 7, 6, 3), np.float32), np.ones((3, 2, 3, 5), np.float32)
    for padding in ("SAME", "VALID", ((1, 2), (0, 3))):
        got = lax.conv_general_dilated(x, k, (2, 3), padding, dimension_numbers=dn).shape
        assert got == lax.conv_general_shape_tuple(x.shape, k.shape, (2, 3), padding, dn)
    assert lax.conv_general_shape_tuple((2, 3, 7, 6), (5, 3, 3, 2), (1, 1), "VALID", None) == (2, 5, 5, 5)
    with pytest.raises(ValueError, match="conv_shape_tuple: negative padding"):
        lax.conv_shape_tuple((1, 1, 2), (1, 1, 1), (1,), ((-2, -1),))


def test_conv_precision_and_preferred_element_type(tmp_path):
    x = RNG.integers(-100, 100, (1, 4, 4, 3)).astype(np.int8)
    k = RNG.integers(-100, 100, (2, 2, 3, 2)).astype(np.int8)
    dn = ("NHWC", "HWIO", "NHWC")

    def wide(a, b):
        return lax.conv_general_dilated(a, b, (1, 1), "VALID", dimension_numbers=dn, precision="highest",
                                        preferred_element_type=np.int32)

    def reference(a, b):
        return np.asarray(lax.conv_general_dilated(a.astype(np.int32), b.astype(np.int32), (1, 1), "VALID",
                                                   dimension_numbers=dn))

    assert np.abs(reference(x, k)).max() > 127
    eager_jit_and_kiln_run(wide, reference, x, k, tmp_path=tmp_path)
    t = lax.conv_transpose(x, k, (2, 2), "SAME", preferred_element_type=np.int32, precision=lax.Precision.HIGH)
    check_like_numpy(t, np.asarray(lax.conv_transpose(x.astype(np.int32), k.astype(np.int32), (2, 2), "SAME")))
    xf = x.astype(np.float32)
    out = lax.conv(xf.transpose(0, 3, 1, 2), k.astype(np.float32).transpose(3, 2, 0, 1), (1, 1), "SAME",
                   precision=("high", "highest"), preferred_element_type=np.float64)
    assert out.dtype == np.float64
    with pytest.raises(ValueError, match="conv_general_dilated: precision must be None"):
        lax.conv(xf, xf, (1, 1), "SAME", precision="low")
    with pytest.raises(TypeError, match="conv_general_dilated: preferred_element_type int8 must not be narrower"):
        lax.conv_general_dilated(x.astype(np.int32), k.astype(np.int32), (1, 1), "VALID", dimension_numbers=dn,
                                 preferred_element_type=np.int8)


def test_conv_dimension_numbers_as_jax():
    dn = lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    assert dn == lax.ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    assert lax.conv_dimension_numbers(4, 4, None) == ((0, 1, 2, 3),) * 3
    x = RNG.standard_normal((1, 5, 5, 3))
    w = RNG.standard_normal((3, 3, 3, 2))
    by_strings = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    by_tuple = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn)
    np.testing.assert_array_equal(by_strings, by_tuple)
    assert "ConvDimensionNumbers" not in kiln.jit(
        lambda a, b: lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=dn)).lower(x, w)


def _patches_reference(x, filter_shape, strides, pads):
    """NHWC patches: out[n, i, j, c * S + s] = padded x at (i * stride + a, j * stride + b, c), s = a * fw + b."""
    fh, fw = filter_shape
    xp = np.pad(x, [(0, 0), pads[0], pads[1], (0, 0)])
    oh = (xp.shape[1] - fh) // strides[0] + 1
    ow = (xp.shape[2] - fw) // strides[1] + 1
    out = np.zeros((x.shape[0], oh, ow, x.shape[3] * fh * fw))
    for i in range(oh):
        for j in range(ow):
            for a in range(fh):
                for b in range(fw):
                    for c in range(x.shape[3]):
                        out[:, i, j, c * fh * fw + a * fw + b] = xp[:, i * strides[0] + a, j * strides[1] + b, c]
    return out


def test_conv_general_dilated_patches(tmp_path):
    x = RNG.standard_normal((2, 5, 6, 3))
    dn = ("NHWC", "HWIO", "NHWC")
    eager_and_jit(lambda a: lax.conv_general_dilated_patches(a, (2, 3), (1, 2), ((1, 0), (1, 1)), dimension_numbers=dn),
                  lambda a: _patches_reference(a, (2, 3), (1, 2), ((1, 0), (1, 1))), x)
    x32 = x.astype(np.float32)
    eager_jit_and_kiln_run(lambda a: lax.conv_general_dilated_patches(a, (3, 3), (2, 2), "VALID", dimension_numbers=dn),
                           lambda a: _patches_reference(a, (3, 3), (2, 2), ((0, 0), (0, 0))).astype(np.float32), x32,
                           tmp_path=tmp_path)
    nchw = lax.conv_general_dilated_patches(x.transpose(0, 3, 1, 2), (2, 2), (1, 1), "VALID")
    check_like_numpy(nchw, _patches_reference(x, (2, 2), (1, 1), ((0, 0), (0, 0))).transpose(0, 3, 1, 2))
    g = kiln.grad(lambda a: knp.sum(lax.conv_general_dilated_patches(a, (2, 2), (1, 1), "VALID", dimension_numbers=dn)))(x)
    counts = np.zeros((5, 6))  # how many 2x2 windows see each position
    for r in range(4):
        for c in range(5):
            counts[r:r + 2, c:c + 2] += 1
    np.testing.assert_allclose(g, np.broadcast_to(counts[None, :, :, None], x.shape))
    with pytest.raises(ValueError, match=r"conv_general_dilated_patches: filter_shape \(2,\) needs 2 spatial sizes"):
        lax.conv_general_dilated_patches(x, (2,), (1, 1), "VALID", dimension_numbers=dn)
