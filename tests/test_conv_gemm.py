"""The implicit-GEMM convolution strategies (kiln.compiler.codegen.conv: 'gemm', and Winograd F(2x2, 3x3),
'winograd'): which convolutions take them, and their numbers against an independent numpy reference
(sliding windows and one einsum per group) for f32 and f64, NHWC-like ('rows') and NCHW-like ('cols')
layouts, odd sizes, strides, both dilations, explicit and negative padding, groups, 1-d and 3-d, through
kiln.jit and through an exported module run by kiln-run; the gradients the training path uses against
central finite differences."""
from types import SimpleNamespace

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import Program, lax
from kiln.compiler.codegen import conv as conv_codegen
from kiln.compiler.codegen import conv_winograd
from kiln.compiler.fusion import DispatchStep, partition
from kiln.compiler.pipeline import prepare_graph
from kiln.compiler.target import Target
from kiln.core.aval import ShapedArray
from kiln.core.trace import trace_to_graph
from kiln.lax.conv import conv_dimension_numbers, dilate_dim, padtype_to_pads
from kiln_tools import run_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(23)
NHWC = ("NHWC", "HWIO", "NHWC")


def numpy_conv(x, w, window_strides, padding, lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
               feature_group_count=1):
    """float64: the dilated, padded input's sliding windows (numpy's sliding_window_view), subsampled by the
    strides and the kernel dilation, contracted with the kernel in one einsum per group."""
    lspec, rspec, ospec = conv_dimension_numbers(x.ndim, w.ndim, dimension_numbers)
    xc = np.transpose(x, lspec).astype(np.float64)
    wc = np.transpose(w, rspec).astype(np.float64)
    nsp = xc.ndim - 2
    ld = lhs_dilation or (1,) * nsp
    rd = rhs_dilation or (1,) * nsp
    pads = padtype_to_pads(xc.shape[2:], [dilate_dim(k, r) for k, r in zip(wc.shape[2:], rd)], window_strides, padding)
    dil = np.zeros(xc.shape[:2] + tuple(dilate_dim(d, r) for d, r in zip(xc.shape[2:], ld)))
    dil[(slice(None), slice(None)) + tuple(slice(None, None, r) for r in ld)] = xc
    dil = np.pad(dil, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in pads])
    dil = dil[(slice(None), slice(None)) + tuple(slice(-min(lo, 0), dil.shape[2 + k] + min(hi, 0))
                                                 for k, (lo, hi) in enumerate(pads))]
    span = tuple(dilate_dim(k, r) for k, r in zip(wc.shape[2:], rd))
    windows = np.lib.stride_tricks.sliding_window_view(dil, span, axis=tuple(range(2, 2 + nsp)))
    windows = windows[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in window_strides)
                      + tuple(slice(None, None, r) for r in rd)]
    g = feature_group_count
    o, i = wc.shape[:2]
    letters = "xyzw"[:nsp]
    taps = "pqrs"[:nsp]
    outs = [np.einsum(f"nc{letters}{taps},oc{taps}->no{letters}", windows[:, k * i:(k + 1) * i],
                      wc[k * (o // g):(k + 1) * (o // g)]) for k in range(g)]
    out = np.concatenate(outs, axis=1)
    return np.transpose(out, np.argsort(ospec)).astype(x.dtype)


def test_numpy_conv_reference_matches_kilns_eager_reference():
    """The sliding-window reference and kiln.lax's (dilate, pad, einsum per tap), checked element by element
    against loops in tests/test_conv.py, agree on a case using every parameter."""
    x = RNG.standard_normal((2, 4, 7, 6))
    w = RNG.standard_normal((6, 2, 3, 2))
    kw = dict(window_strides=(2, 1), padding=((2, -1), (1, 3)), lhs_dilation=(1, 2), rhs_dilation=(2, 1),
              feature_group_count=2)
    np.testing.assert_allclose(numpy_conv(x, w, **kw), lax.conv_general_dilated(x, w, **kw), rtol=1e-12, atol=1e-12)


def _conv_regions(fn, *args):
    graph = prepare_graph(trace_to_graph(lambda *xs: kiln.tree_leaves(fn(*xs)),
                                         [ShapedArray(a.shape, a.dtype) for a in args]))
    return [s.region for s in partition(graph).steps if isinstance(s, DispatchStep)
            and any(e.primitive.name == "conv_general_dilated" for e in s.region.eqns)]


def _strategies(fn, *args):
    return [conv_codegen.strategy(r, Target.host()) for r in _conv_regions(fn, *args)]


# (name, lhs shape, rhs shape, kwargs); every one takes the GEMM strategy
GEMM_CASES = [
    # big enough for several workgroups (work items split between them)
    ("nhwc_same", (1, 20, 21, 32), (3, 3, 32, 40), dict(window_strides=(1, 1), padding="SAME", dimension_numbers=NHWC)),
    ("nhwc_strides_odd", (2, 11, 9, 20), (3, 2, 20, 17), dict(window_strides=(2, 3), padding="SAME",
                                                              dimension_numbers=NHWC)),
    ("nchw_same", (2, 16, 10, 11), (24, 16, 3, 3), dict(window_strides=(1, 1), padding="SAME")),
    ("nchw_dilated_explicit_pad", (2, 9, 10, 11), (20, 9, 3, 2),
     dict(window_strides=(1, 2), padding=((2, 1), (0, 3)), rhs_dilation=(2, 2))),
    ("negative_pad", (1, 8, 9, 12), (3, 3, 12, 16), dict(window_strides=(1, 1), padding=((1, -2), (-1, 2)),
                                                         dimension_numbers=NHWC)),
    ("lhs_dilation", (1, 7, 6, 10), (3, 3, 10, 9), dict(window_strides=(1, 1), padding=((2, 2), (1, 2)),
                                                         lhs_dilation=(2, 3), dimension_numbers=NHWC)),
    # lhs dilation (a strided convolution's input gradient) is taken phase by phase: with strides, kernel dilation,
    # negative padding and groups; 1-d; dilated along the outer dim only
    ("lhs_dilation_strided_groups", (2, 9, 11, 16), (3, 3, 8, 16), dict(
        window_strides=(1, 2), padding=((1, 3), (-1, 2)), lhs_dilation=(3, 2), rhs_dilation=(1, 2),
        feature_group_count=2, dimension_numbers=NHWC)),
    ("lhs_dilation_1d", (2, 13, 12), (4, 12, 10), dict(window_strides=(1,), padding=((3, 2),), lhs_dilation=(3,),
                                                       dimension_numbers=("NWC", "WIO", "NWC"))),
    ("lhs_dilation_outer_dim", (1, 6, 20, 8), (2, 3, 8, 16), dict(window_strides=(1, 1), padding="SAME",
                                                                   lhs_dilation=(2, 1), dimension_numbers=NHWC)),
    ("feature_groups", (2, 7, 8, 32), (3, 3, 16, 20), dict(window_strides=(1, 1), padding="SAME",
                                                           feature_group_count=2, dimension_numbers=NHWC)),
    ("channels_over_a_block", (1, 5, 6, 300), (2, 2, 300, 10), dict(window_strides=(1, 1), padding="VALID",
                                                                    dimension_numbers=NHWC)),
    ("three_channels", (1, 9, 9, 3), (3, 3, 3, 16), dict(window_strides=(1, 1), padding="SAME", dimension_numbers=NHWC)),
    ("conv1d_nwc", (3, 40, 12), (5, 12, 9), dict(window_strides=(2,), padding="SAME",
                                                 dimension_numbers=("NWC", "WIO", "NWC"))),
    ("conv3d_ncdhw", (1, 8, 5, 6, 7), (16, 8, 2, 3, 2), dict(window_strides=(1, 1, 1), padding="SAME")),
    # cols orientation: taps reaching past both ends (negative and uneven padding, strides), one-pixel rows
    ("nchw_negative_pad_strides", (1, 12, 11, 13), (16, 12, 3, 4), dict(window_strides=(2, 3),
                                                                        padding=((1, -2), (-1, 4)))),
    ("nchw_width_one", (2, 10, 30, 1), (16, 10, 3, 1), dict(window_strides=(1, 1), padding="SAME")),
    # rows orientation with the weights' features strided (OIHW): the weight panels' packer reads columns apart
    ("nhwc_oihw_weights", (1, 9, 10, 24), (20, 24, 3, 3), dict(window_strides=(1, 1), padding="SAME",
                                                              dimension_numbers=("NHWC", "OIHW", "NHWC"))),
    # 3x3 stride 1 NHWC with fewer than 16 channels: the GEMM's packed image tiles (more take Winograd)
    ("nhwc_3x3_few_channels", (1, 12, 13, 12), (3, 3, 12, 40), dict(window_strides=(1, 1), padding="SAME",
                                                                   dimension_numbers=NHWC)),
    # Winograd F(2x2, 3x3) ('winograd'): odd output sizes (tiles past the edge), negative and uneven padding,
    # a batch, features in several strips (the last partial) and column chunks, the kernel's features strided
    ("winograd_tails", (2, 13, 11, 20), (3, 3, 20, 300), dict(window_strides=(1, 1), padding=((1, -1), (2, 0)),
                                                             dimension_numbers=NHWC)),
    ("winograd_channels_256", (1, 9, 10, 256), (3, 3, 256, 24), dict(window_strides=(1, 1), padding="SAME",
                                                                     dimension_numbers=NHWC)),
    # stride 2 (the polyphase scheme: 5x5 input patches, 25 products per tile), a batch, uneven and negative padding
    ("winograd_stride2", (2, 21, 18, 24), (3, 3, 24, 40), dict(window_strides=(2, 2), padding=((1, -1), (0, 2)),
                                                              dimension_numbers=NHWC)),
    # an NCHW image into an NHWC output: the input transform reads channels a plane apart (no vectors)
    ("winograd_nchw_image", (1, 16, 10, 9), (3, 3, 16, 20), dict(window_strides=(1, 1), padding="SAME",
                                                                dimension_numbers=("NCHW", "HWIO", "NHWC"))),
]
# the cases above that take Winograd: 3x3, stride 1 or 2, no dilation or groups, NHWC, 16 to KC channels, 16
# or more features, 64 or more pixels
WINOGRAD_CASES = {"nhwc_same", "nhwc_oihw_weights", "winograd_tails", "winograd_channels_256", "winograd_stride2",
                  "winograd_nchw_image"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,lhs_shape,rhs_shape,kwargs", GEMM_CASES, ids=[c[0] for c in GEMM_CASES])
def test_gemm_convolutions_match_numpy(name, lhs_shape, rhs_shape, kwargs, dtype):
    x = RNG.standard_normal(lhs_shape).astype(dtype)
    w = RNG.standard_normal(rhs_shape).astype(dtype)

    def f(a, b):
        return lax.conv_general_dilated(a, b, **kwargs)

    assert _strategies(f, x, w) == ["winograd" if name in WINOGRAD_CASES else "gemm"]
    got, want = np.asarray(kiln.jit(f)(x, w)), numpy_conv(x, w, **kwargs)
    assert got.dtype == dtype and got.shape == want.shape
    tol = 1e-5 if dtype == np.float32 else 1e-13  # relative to the output's scale (sums of up to 1200 terms)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_orientation_follows_the_output_layout():
    """'rows' (pixels x features) when the output's features are contiguous, 'cols' (features x pixels)
    when its spatial dims are; neither (the generic loops) when the output's spatial dims are not one
    strided dim."""
    x = np.zeros((1, 8, 9, 16), np.float32)
    w = np.zeros((3, 3, 16, 16), np.float32)
    plans = {}
    for out in ("NHWC", "NCHW", "HNCW"):
        (region,) = _conv_regions(lambda a, b, out=out: lax.conv_general_dilated(
            a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", out)), x, w)
        gemm = conv_codegen._gemm_plan(conv_codegen._conv_plan(region), Target.host())
        plans[out] = gemm.orientation if gemm else None
    assert plans == {"NHWC": "rows", "NCHW": "cols", "HNCW": None}


def test_blocks_of_whole_taps_are_even():
    """K blocks of whole taps hold as many as fit in KC, spread evenly: 3x3 taps of 64 channels in 3 blocks
    of 3 (not 4 + 4 + 1), 5x5 of 32 in 4 blocks of 7 (the last 4), 3x3 of 16 in one block of 9."""
    got = {}
    for taps, c in [((3, 3), 64), ((5, 5), 32), ((3, 3), 16)]:
        x = np.zeros((1, 12, 12, c), np.float32)
        w = np.zeros(taps + (c, 24), np.float32)
        (region,) = _conv_regions(lambda a, b: lax.conv_general_dilated(
            a, b, (1, 1), "SAME", dimension_numbers=NHWC), x, w)
        gemm = conv_codegen._gemm_plan(conv_codegen._conv_plan(region), Target.host())
        got[(taps, c)] = (gemm.taps_per_block, gemm.k_blocks)
    assert got == {((3, 3), 64): (3, 3), ((5, 5), 32): (7, 4), ((3, 3), 16): (9, 1)}


def test_which_convolutions_take_winograd():
    """3x3 NHWC convolutions with stride 1 (f32: F(4x4, 3x3), 36 positions, where the output is 8 or more pixels
    each way and its stack buffers fit, else F(2x2, 3x3): 16; f64: F(2x2, 3x3), the more accurate) or 2
    (polyphase: 25), 16 to 256 channels, 16 or more features and 64 or more pixels, whose stack buffers fit in
    1 MiB; the others keep the GEMM."""
    avx512 = SimpleNamespace(vector_bytes=64, vector_registers=32)
    avx2 = SimpleNamespace(vector_bytes=32, vector_registers=16)

    def plan(cin=64, n=64, stride=1, dtype=np.float32, size=20, width=None, target=avx512, **kw):
        x, w = np.zeros((1, size, width or size, cin), dtype), np.zeros((3, 3, cin, n), dtype)
        (region,) = _conv_regions(lambda a, b: lax.conv_general_dilated(
            a, b, (stride, stride), "SAME", dimension_numbers=NHWC, **kw), x, w)
        wino = conv_codegen._winograd_plan(conv_codegen._conv_plan(region), target)
        return wino and wino.positions

    assert (plan(), plan(stride=2), plan(cin=256, n=24), plan(dtype=np.float64, cin=16, n=16)) == (36, 25, 16, 16)
    assert (plan(size=8), plan(size=7, width=10), plan(size=20, width=7), plan(dtype=np.float64)) == (36, 16, 16, 16)
    assert plan(cin=128, n=128) == 36  # 36 panels of 128 channels x 32 features (576 KiB) and 12 tiles' 36 blocks
    # 256 channels: 36 x 256 x 32 features of floats (1.1 MiB) do not fit with AVX-512's 32-wide strips; AVX2's 16 do
    assert (plan(cin=256, n=256), plan(cin=256, n=256, target=avx2)) == (16, 36)
    assert plan(stride=3) is None and plan(rhs_dilation=(2, 2)) is None and plan(cin=15) is None
    assert plan(n=15) is None and plan(size=7) is None and plan(cin=260) is None
    assert plan(cin=256, n=24, stride=2) == 25  # 16 distinct kernel panels (512 KiB) and 25 x 12 tiles (340 KiB)
    assert plan(cin=256, n=24, stride=2, dtype=np.float64) is None  # 512 KiB and 25 x 12 tiles of doubles: 1.2 MiB


def test_winograd_f32_accuracy_against_float64(monkeypatch):
    """f32 Winograd against the float64 direct sum of the same inputs, the largest error relative to the
    output's largest magnitude (docs/internals.md): F(4x4, 3x3) within 1e-5 (measured 2.4e-6 at 64 channels,
    5.3e-6 at 256), F(2x2, 3x3) within 1e-6 (3e-7 to 6e-7); 128 channels scaled as a network's (1 / sqrt(9 C))."""
    monkeypatch.setenv("KILN_CACHE", "0")  # the two builds differ only by the module constant
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 12, 13, 128)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 128, 32)) / np.sqrt(9 * 128)).astype(np.float32)
    want = numpy_conv(x.astype(np.float64), w.astype(np.float64), (1, 1), "SAME", dimension_numbers=NHWC)
    errors = {}
    for positions, dtypes in [(36, (np.float32,)), (16, ())]:
        monkeypatch.setattr(conv_winograd, "WINOGRAD_F43_DTYPES", dtypes)

        def f(a, b):
            return lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=NHWC)
        (region,) = _conv_regions(f, x, w)
        assert conv_codegen._winograd_plan(conv_codegen._conv_plan(region), Target.host()).positions == positions
        errors[positions] = np.abs(np.asarray(kiln.jit(f)(x, w)) - want).max() / np.abs(want).max()
    assert errors[36] < 1e-5 and errors[16] < 1e-6, errors


# (name, dtype, lhs shape, rhs shape, kwargs): one channel per group, channels contiguous: 'depthwise'
DEPTHWISE_CASES = [
    ("same", np.float32, (1, 8, 8, 16), (3, 3, 1, 16), dict(window_strides=(1, 1), padding="SAME")),
    ("strided_dilated_f64", np.float64, (2, 11, 9, 12), (3, 2, 1, 12),
     dict(window_strides=(2, 1), padding=((2, -1), (1, 3)), rhs_dilation=(1, 2))),
    ("chunks_of_channels", np.float32, (1, 5, 4, 300), (2, 3, 1, 300), dict(window_strides=(1, 1), padding="SAME")),
    ("lhs_dilated_1d", np.float32, (2, 9, 10), (4, 1, 10), dict(window_strides=(1,), padding=((2, 3),),
                                                                 lhs_dilation=(2,))),
    # spatial dims contiguous (NCHW/OIHW): 'depthwise_planes', a channel's rows at a time
    ("planes_same", np.float32, (2, 16, 9, 11), (16, 1, 3, 3), dict(window_strides=(1, 1), padding="SAME",
                                                                     dimension_numbers=None)),
    ("planes_strided_dilated_f64", np.float64, (1, 12, 10, 13), (12, 1, 3, 4), dict(
        window_strides=(2, 1), padding=((2, -1), (1, 3)), rhs_dilation=(2, 2), lhs_dilation=(2, 1),
        dimension_numbers=None)),
    ("planes_1d", np.float32, (2, 10, 30), (10, 1, 5), dict(window_strides=(1,), padding=((4, 0),),
                                                             dimension_numbers=None)),
]


@pytest.mark.parametrize("name,dtype,lhs_shape,rhs_shape,kwargs", DEPTHWISE_CASES, ids=[c[0] for c in DEPTHWISE_CASES])
def test_depthwise_convolutions_match_numpy(name, dtype, lhs_shape, rhs_shape, kwargs):
    """Depthwise convolutions (NHWC: vectorized along the channels; NCHW: along a channel's rows) with strides,
    both dilations, negative and uneven padding, more channels than a chunk (300 = 256 + 44), 1-d, against
    numpy."""
    x = RNG.standard_normal(lhs_shape).astype(dtype)
    w = RNG.standard_normal(rhs_shape).astype(dtype)
    planes = name.startswith("planes")
    dn = NHWC if len(lhs_shape) == 4 else ("NWC", "WIO", "NWC")
    kw = dict(dict(dimension_numbers=dn), **kwargs, feature_group_count=lhs_shape[1 if planes else -1])

    def f(a, b):
        return lax.conv_general_dilated(a, b, **kw)

    assert _strategies(f, x, w) == ["depthwise_planes" if planes else "depthwise"]
    got, want = np.asarray(kiln.jit(f)(x, w)), numpy_conv(x, w, **kw)
    assert got.dtype == dtype and got.shape == want.shape
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_depthwise_kernel_gradient_is_vectorized_along_the_channels(dtype):
    """A depthwise kernel's gradient (a convolution with batch groups of one image: the forward channels)
    takes the depthwise kernel, summing over the forward batch; against numpy's sum over the strided windows."""
    n, h, w, c, stride = 2, 9, 8, 20, 2
    x = RNG.standard_normal((n, h, w, c)).astype(dtype)
    kernel = RNG.standard_normal((3, 3, 1, c)).astype(dtype)

    def conv(v, k):
        return lax.conv_general_dilated(v, k, (stride, stride), "SAME", dimension_numbers=NHWC, feature_group_count=c)

    ct = RNG.standard_normal(np.shape(conv(x, kernel))).astype(dtype)

    def kernel_gradient(v, k, t):
        return kiln.vjp(lambda u: conv(v, u), k)[1](t)[0]

    assert _strategies(kernel_gradient, x, kernel, ct) == ["depthwise"]
    _, oh, ow, _ = ct.shape
    (top, _), (left, _) = padtype_to_pads((h, w), (3, 3), (stride, stride), "SAME")
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, 3), (left, 3), (0, 0)))
    want = np.zeros((3, 3, 1, c))
    for i in range(3):
        for j in range(3):
            want[i, j, 0] = np.einsum("nhwc,nhwc->c", xp[:, i:i + stride * (oh - 1) + 1:stride,
                                                         j:j + stride * (ow - 1) + 1:stride], ct)
    got = np.asarray(kiln.jit(kernel_gradient)(x, kernel, ct))
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("name,dtype,lhs_shape,rhs_shape,kwargs", [
    ("depthwise_multiplier", np.float32, (1, 8, 8, 16), (3, 3, 1, 32), dict(feature_group_count=16)),
    ("few_features", np.float32, (1, 8, 8, 16), (3, 3, 16, 4), {}),
    ("float16", np.float16, (1, 8, 8, 16), (3, 3, 16, 16), {}),
    ("int32", np.int32, (1, 8, 8, 16), (3, 3, 16, 16), {}),
    ("tiny_image", np.float32, (1, 1, 1, 16), (1, 1, 16, 16), {}),
], ids=lambda v: v if isinstance(v, str) else None)
def test_generic_strategy_where_gemm_does_not_pay(name, dtype, lhs_shape, rhs_shape, kwargs):
    """Depthwise and narrow convolutions, halves and integers keep the generic loops, with the same numbers."""
    x = (RNG.standard_normal(lhs_shape) * 3).astype(dtype)
    w = (RNG.standard_normal(rhs_shape) * 3).astype(dtype)

    def f(a, b):
        return lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=NHWC, **kwargs)

    assert _strategies(f, x, w) == ["direct"]
    want = numpy_conv(x.astype(np.float64), w.astype(np.float64), (1, 1), "SAME", dimension_numbers=NHWC, **kwargs)
    got = np.asarray(kiln.jit(f)(x, w))
    assert got.dtype == dtype
    if dtype == np.int32:
        np.testing.assert_array_equal(got, want.astype(np.int64).astype(np.int32))
    else:
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3 if dtype == np.float16 else 1e-5,
                                   atol=0.1 if dtype == np.float16 else 1e-4)


def _loss(x, w, c):
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC)
    return knp.sum(knp.tanh(y) * c)


def _numpy_loss(x, w, c):
    return float(np.sum(np.tanh(numpy_conv(x, w, (1, 1), "SAME", dimension_numbers=NHWC)) * c))


def test_training_gradients_against_finite_differences():
    """The input gradient (a convolution with the reversed kernel, GEMM) and the kernel gradient of a
    3x3 NHWC convolution, float64, under kiln.jit: the input's against central differences, the
    kernel's along random directions (central differences of the numpy loss)."""
    x = RNG.standard_normal((1, 4, 5, 8))
    w = RNG.standard_normal((3, 3, 8, 16)) * 0.2
    c = RNG.standard_normal((1, 4, 5, 16))
    assert _strategies(kiln.grad(_loss, argnums=0), x, w, c).count("gemm") == 2  # forward and input gradient
    gx, gw = kiln.jit(kiln.grad(_loss, argnums=(0, 1)))(x, w, c)
    np.testing.assert_allclose(gx, numerical_grad(lambda v: _numpy_loss(v, w, c), x), rtol=1e-6, atol=1e-8)
    eps = 1e-6
    for _ in range(3):
        d = RNG.standard_normal(w.shape)
        want = (_numpy_loss(x, w + eps * d, c) - _numpy_loss(x, w - eps * d, c)) / (2 * eps)
        np.testing.assert_allclose(np.sum(gw * d), want, rtol=1e-6)


VARIANTS = ("x86-64-v4", "x86-64-v3", "x86-64-v2")


@pytest.fixture(scope="module")
def exported_convolutions(tmp_path_factory):
    """One portable module (its x86-64 v2, v3 and v4 builds: 4, 8 and 16 f32 lanes, 6 or 12 rows per tile)
    whose function computes a convolution of each GEMM path, its inputs saved, and the numpy references:
    NHWC with a bias and relu (Winograd F(4x4, 3x3), the epilogue), NCHW strided with taps past both ends
    and a bias and relu (cols, image panels by runs, the epilogue), 128 channels (rows, the image read in place), 8 groups of 8 features
    (one-vector strips), strided depthwise ones (NHWC: vectorized along the channels; NCHW: along rows),
    float64 dilated, the input gradients of a stride-1 NHWC convolution (Winograd), of strided NHWC and NCHW
    convolutions (lhs dilation phase by phase; the NCHW one computed as NHWC and transposed), an NHWC
    kernel gradient (gemm_batch) and a stride-2 NHWC convolution (Winograd's polyphase scheme)."""
    tmp = tmp_path_factory.mktemp("conv_builds")
    x = RNG.standard_normal((1, 9, 10, 16)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 16, 24)).astype(np.float32)
    bias = RNG.standard_normal(24).astype(np.float32)
    xc = RNG.standard_normal((2, 16, 9, 7)).astype(np.float32)
    wc = RNG.standard_normal((20, 16, 3, 3)).astype(np.float32)
    xw = RNG.standard_normal((1, 5, 7, 128)).astype(np.float32)
    ww = RNG.standard_normal((2, 2, 128, 24)).astype(np.float32)
    xg = RNG.standard_normal((1, 7, 9, 64)).astype(np.float32)
    wg = RNG.standard_normal((3, 3, 8, 64)).astype(np.float32)
    wdw = RNG.standard_normal((3, 3, 1, 64)).astype(np.float32)
    wpl = RNG.standard_normal((16, 1, 3, 3)).astype(np.float32)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ct = RNG.standard_normal((1, 9, 10, 24)).astype(np.float32)
    xs = RNG.standard_normal((1, 17, 18, 16)).astype(np.float32)
    neg = dict(window_strides=(2, 3), padding=((1, -2), (-1, 4)))
    strided = dict(window_strides=(2, 2), padding="SAME")

    def f(x, w, bias, xc, wc, xw, ww, xg, wg, wdw, wpl, x64, w64, ct, xs):
        y = knp.maximum(lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC) + bias, 0.0)
        yn = knp.maximum(lax.conv_general_dilated(xc, wc, **neg) + bias[:20, None, None], 0.0)
        yw = lax.conv_general_dilated(xw, ww, (1, 1), "VALID", dimension_numbers=NHWC)
        yg = lax.conv_general_dilated(xg, wg, (1, 1), "SAME", dimension_numbers=NHWC, feature_group_count=8)
        ydw = lax.conv_general_dilated(xg, wdw, (2, 1), "SAME", dimension_numbers=NHWC, feature_group_count=64)
        ypl = lax.conv_general_dilated(xc, wpl, (2, 1), "SAME", feature_group_count=16)
        yd = lax.conv_general_dilated(x64, w64, (1, 1), "SAME", rhs_dilation=(2, 2), dimension_numbers=NHWC)
        gx = kiln.grad(lambda v: knp.sum(lax.conv_general_dilated(v, w, (1, 1), "SAME", dimension_numbers=NHWC) ** 2))(x)
        gs = kiln.grad(lambda v: knp.sum(lax.conv_general_dilated(v, w, (2, 2), "SAME", dimension_numbers=NHWC) ** 2))(x)
        gc = kiln.grad(lambda v: knp.sum(lax.conv_general_dilated(v, wc, **strided) ** 2))(xc)
        gw = kiln.vjp(lambda u: lax.conv_general_dilated(x, u, (1, 1), "SAME", dimension_numbers=NHWC), w)[1](ct)[0]
        ys = lax.conv_general_dilated(xs, w, (2, 2), "SAME", dimension_numbers=NHWC)
        return y, yn, yw, yg, ydw, ypl, yd, gx, gs, gc, gw, ys

    args = (x, w, bias, xc, wc, xw, ww, xg, wg, wdw, wpl, x64, w64, ct, xs)
    strategies = _strategies(f, *args)
    assert strategies.count("gemm") >= 8 and strategies.count("winograd") == 3, strategies
    assert {"gemm_batch", "depthwise", "depthwise_planes"} <= set(strategies), strategies

    def input_gradient(v, k, dn, **kw):
        """d sum(conv(v, k)^2)/dv = conv^T(2 conv(v, k)): numerically, by the transpose of numpy_conv's
        linear map, through its vector-Jacobian product assembled column by column (small sizes)."""
        k = k.astype(np.float64)
        y = numpy_conv(v.astype(np.float64), k, dimension_numbers=dn, **kw)
        basis = np.eye(v.size).reshape((v.size * v.shape[0],) + v.shape[1:])  # the batch dim holds them all
        images = numpy_conv(basis, k, dimension_numbers=dn, **kw).reshape((v.size,) + y.shape)
        return (images.reshape(v.size, -1) @ (2 * y).ravel()).reshape(v.shape).astype(v.dtype)

    y_ref = numpy_conv(x, w, (1, 1), "SAME", dimension_numbers=NHWC)
    want = [np.maximum(y_ref + bias, 0), np.maximum(numpy_conv(xc, wc, **neg) + bias[:20, None, None], 0),
            numpy_conv(xw, ww, (1, 1), "VALID", dimension_numbers=NHWC),
            numpy_conv(xg, wg, (1, 1), "SAME", dimension_numbers=NHWC, feature_group_count=8),
            numpy_conv(xg, wdw, (2, 1), "SAME", dimension_numbers=NHWC, feature_group_count=64),
            numpy_conv(xc, wpl, (2, 1), "SAME", feature_group_count=16),
            numpy_conv(x64, w64, (1, 1), "SAME", rhs_dilation=(2, 2), dimension_numbers=NHWC),
            numpy_conv(2 * y_ref, np.flip(w, (0, 1)).transpose(0, 1, 3, 2), (1, 1), "SAME", dimension_numbers=NHWC),
            input_gradient(x, w, NHWC, window_strides=(2, 2), padding="SAME"),
            input_gradient(xc, wc, None, **strided),
            numpy_kernel_gradient(x, ct.astype(np.float64), 3, 1, 1, "SAME").astype(np.float32),
            numpy_conv(xs, w, (2, 2), "SAME", dimension_numbers=NHWC)]
    names = [f"a{i}" for i in range(len(args))]
    namespace = {"Program": Program, "f": f, "args": args}
    params = ", ".join(f"{n}=Program.like(args[{i}])" for i, n in enumerate(names))
    exec(f"def run(self, {params}):\n    return f({', '.join(names)})", namespace)
    program = type("Convs", (Program,), {"run": namespace["run"]}, export_name="convs")
    path = tmp / "convs.vmfb"
    Program.get_compiled_artifact(program, target="portable").save(path)
    for n, a in zip(names, args):
        np.save(tmp / f"{n}.npy", a)
    return tmp, path, names, want


@pytest.mark.parametrize("variant", VARIANTS)
def test_exported_gemm_convolutions_run_in_each_kernel_build(exported_convolutions, variant, monkeypatch):
    """Every GEMM path of the module above, run by the standalone kiln-run with each x86-64 build forced,
    against numpy."""
    tmp, path, names, want = exported_convolutions
    monkeypatch.setenv("KILN_CPU_VARIANT", variant)
    outs = [tmp / f"{variant}.{k}.npy" for k in range(len(want))]
    run_kiln_run(f"--module={path}", "--function=run", *[f"--input=@{tmp / f'{n}.npy'}" for n in names],
                 *[f"--output=@{o}" for o in outs])
    for k, (o, wnt) in enumerate(zip(outs, want)):
        g = np.load(o)
        assert g.dtype == wnt.dtype and g.shape == wnt.shape, (k, g.dtype, g.shape)
        tol = 1e-4 if g.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(g, wnt, rtol=tol, atol=tol * max(np.abs(wnt).max(), 1.0), err_msg=f"result {k}")


# (name, dtype, N, H, W, C, O, stride, kernel dilation, padding): kernel gradients of NHWC/HWIO convolutions
KERNEL_GRADIENT_CASES = [
    ("same_3x3_f64", np.float64, 1, 9, 10, 16, 16, 1, 1, "SAME"),
    ("batch_3_valid", np.float32, 3, 6, 12, 16, 24, 1, 1, "VALID"),
    ("dilated_several_workgroups", np.float32, 4, 16, 17, 32, 32, 1, 2, "SAME"),
    ("stride_2_f64", np.float64, 2, 15, 17, 20, 16, 2, 1, "SAME"),
]


def numpy_kernel_gradient(x, ct, window, stride, dilation, padding):
    """d sum(conv(x, w) * ct) / d w for NHWC/HWIO, float64: for each kernel position, the strided window
    of the padded input contracted with the cotangent over batch and pixels."""
    n, h, w, c = x.shape
    _, oh, ow, o = ct.shape
    (top, _), (left, _) = padtype_to_pads((h, w), [dilate_dim(window, dilation)] * 2, (stride, stride), padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, window * dilation), (left, window * dilation), (0, 0)))
    out = np.zeros((window, window, c, o))
    for i in range(window):
        for j in range(window):
            patch = xp[:, i * dilation:i * dilation + stride * (oh - 1) + 1:stride,
                       j * dilation:j * dilation + stride * (ow - 1) + 1:stride]
            out[i, j] = np.einsum("nhwc,nhwo->co", patch, ct)
    return out


@pytest.mark.parametrize("name,dtype,n,h,w,c,o,stride,dilation,padding", KERNEL_GRADIENT_CASES,
                         ids=[k[0] for k in KERNEL_GRADIENT_CASES])
def test_kernel_gradients_take_the_batch_rows_gemm(name, dtype, n, h, w, c, o, stride, dilation, padding):
    """The kernel gradient (a convolution whose GEMM rows are the forward input's channels) against numpy."""
    x = RNG.standard_normal((n, h, w, c)).astype(dtype)
    kernel = RNG.standard_normal((3, 3, c, o)).astype(dtype)

    def conv(v, k):
        return lax.conv_general_dilated(v, k, (stride, stride), padding, rhs_dilation=(dilation, dilation),
                                        dimension_numbers=NHWC)

    ct = RNG.standard_normal(np.shape(conv(x, kernel))).astype(dtype)

    def kernel_gradient(v, k, c):
        return kiln.vjp(lambda u: conv(v, u), k)[1](c)[0]

    assert _strategies(kernel_gradient, x, kernel, ct) == ["gemm_batch"]
    got = np.asarray(kiln.jit(kernel_gradient)(x, kernel, ct))
    want = numpy_kernel_gradient(x, ct.astype(np.float64), 3, stride, dilation, padding)
    assert got.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_the_larger_cases_run_on_several_workgroups():
    """So that the work-item slicing between workgroups is exercised by the cases above."""
    from kiln.compiler.compile import choose_workgroups

    def workgroups(fn, *args):
        (region,) = _conv_regions(fn, *args)
        return choose_workgroups(conv_codegen.work(region, Target.host()),
                                 conv_codegen.parallel_items(region, Target.host()))

    _, lhs, rhs, kwargs = GEMM_CASES[0]
    x, w = np.zeros(lhs, np.float32), np.zeros(rhs, np.float32)
    assert workgroups(lambda a, b: lax.conv_general_dilated(a, b, **kwargs), x, w) > 1
    (_, _, n, h, wd, c, o, stride, dilation, padding) = KERNEL_GRADIENT_CASES[2]
    x, k = np.zeros((n, h, wd, c), np.float32), np.zeros((3, 3, c, o), np.float32)
    ct = np.zeros((n, h, wd, o), np.float32)
    assert workgroups(lambda v, kk, cc: kiln.vjp(lambda u: lax.conv_general_dilated(
        v, u, (stride, stride), padding, rhs_dilation=(dilation, dilation), dimension_numbers=NHWC), kk)[1](cc)[0],
        x, k, ct) > 1


def test_nchw_kernel_gradient_is_computed_with_contiguous_features():
    """An OIHW kernel's gradient is a convolution into (I, H, W, O) (gemm_batch) then transposed."""
    x = RNG.standard_normal((2, 16, 9, 11))
    kernel = RNG.standard_normal((24, 16, 3, 3))
    ct = RNG.standard_normal((2, 24, 9, 11))

    def kernel_gradient(v, k, c):
        return kiln.vjp(lambda u: lax.conv_general_dilated(v, u, (1, 1), "SAME"), k)[1](c)[0]

    assert _strategies(kernel_gradient, x, kernel, ct) == ["gemm_batch"]
    want = numpy_kernel_gradient(x.transpose(0, 2, 3, 1), ct.transpose(0, 2, 3, 1), 3, 1, 1, "SAME").transpose(3, 2, 0, 1)
    np.testing.assert_allclose(kiln.jit(kernel_gradient)(x, kernel, ct), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernel_gradient(x, kernel, ct), want, rtol=1e-12, atol=1e-12)


def _dispatches(fn, *args):
    from kiln.compiler.fusion import strategy_passes
    from kiln.compiler.strategies import choose

    graph = prepare_graph(trace_to_graph(lambda *xs: kiln.tree_leaves(fn(*xs)),
                                         [ShapedArray(a.shape, a.dtype) for a in args]))
    return [choose(s.region).name for s in strategy_passes(partition(graph).steps, graph.outvars)
            if isinstance(s, DispatchStep)]


@pytest.mark.parametrize("channels,strategy", [(16, "winograd"), (8, "gemm")])
def test_bias_and_activation_are_the_gemm_kernels_epilogue(channels, strategy):
    """conv + bias + relu (NHWC) is one dispatch whose work items apply the epilogue to their finished
    tiles (Winograd's: its bands of output rows), also when the convolution's own result is returned too,
    and in NCHW (the cols orientation: tiles of features x pixels). Numbers against numpy."""
    x = RNG.standard_normal((2, 13, 11, channels)).astype(np.float32)
    w = RNG.standard_normal((3, 3, channels, 24)).astype(np.float32)
    bias = RNG.standard_normal(24).astype(np.float32)

    def relu_layer(x, w, bias):
        return knp.maximum(lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC) + bias, 0.0)

    def both(x, w, bias):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC)
        return knp.tanh(y + bias), y

    assert _strategies(relu_layer, x, w, bias) == [strategy]
    assert _dispatches(relu_layer, x, w, bias) == ["conv"]
    assert _dispatches(both, x, w, bias) == ["conv"]
    y = numpy_conv(x, w, (1, 1), "SAME", dimension_numbers=NHWC).astype(np.float64)
    np.testing.assert_allclose(kiln.jit(relu_layer)(x, w, bias), np.maximum(y + bias, 0), rtol=1e-5, atol=1e-4)
    got_t, got_y = kiln.jit(both)(x, w, bias)
    np.testing.assert_allclose(got_t, np.tanh(y + bias), rtol=1e-5, atol=1e-4)  # tanh's error is at most y's
    np.testing.assert_allclose(got_y, y, rtol=1e-5, atol=1e-4)
    # NCHW: 2 x 300 pixels (several column chunks, the last partial), the result returned beside the epilogue's
    xc = RNG.standard_normal((2, channels, 20, 15)).astype(np.float32)
    wc = w.transpose(3, 2, 0, 1)

    def nchw(x, w, bias):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME")
        return knp.maximum(y + bias[:, None, None], 0.0), y

    assert _dispatches(nchw, xc, wc, bias) == ["conv"]
    yc = numpy_conv(xc, wc, (1, 1), "SAME").astype(np.float64)
    got_r, got_y = kiln.jit(nchw)(xc, wc, bias)
    np.testing.assert_allclose(got_r, np.maximum(yc + bias[:, None, None], 0), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got_y, yc, rtol=1e-5, atol=1e-4)
