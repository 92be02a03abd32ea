"""Max/min pooling's derivatives (kiln.lax.pooling_select, codegen/pool_select.py): gradients against
central finite differences of a numpy pooling (float64) for strides, padding modes, window and base
dilation, eagerly and under kiln.jit; forward mode, vmap and second order under jit equal eager; halves;
the errors; and an exported training step whose module carries no operand-sized constant (the selection
is recomputed inside the kernels), run by kiln-run."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.numpy as knp
from kiln import Program, lax
from kiln.lax import pooling_select
from kiln.lax.conv import dilate_dim, padtype_to_pads
from kiln.lax.prims import ShapeError
from kiln.vm.reader import read_module
from kiln_tools import run_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(31)


def numpy_pool(x, op, window, strides, padding, base_dilation, window_dilation):
    """float64 max/min pooling: the operand dilated and padded with the identity, one strided slice per
    window offset (written independently of kiln's reference)."""
    fill = -np.inf if op == "max" else np.inf
    pads = padtype_to_pads([dilate_dim(d, b) for d, b in zip(x.shape, base_dilation)],
                           [dilate_dim(w, d) for w, d in zip(window, window_dilation)], strides, padding)
    dil = np.full([dilate_dim(d, b) for d, b in zip(x.shape, base_dilation)], fill)
    dil[tuple(slice(None, None, b) for b in base_dilation)] = x
    dil = np.pad(dil, pads, constant_values=fill)
    out_shape = [(d - dilate_dim(w, wd)) // s + 1 for d, w, wd, s in zip(dil.shape, window, window_dilation, strides)]
    out = np.full(out_shape, fill)
    for k in np.ndindex(*window):
        sl = tuple(slice(kk * wd, kk * wd + s * (o - 1) + 1, s) for kk, wd, s, o in zip(k, window_dilation, strides, out_shape))
        out = np.maximum(out, dil[sl]) if op == "max" else np.minimum(out, dil[sl])
    return out


# (name, op, shape, window, strides, padding, base dilation, window dilation)
CASES = [
    ("max_2x2_valid", "max", (2, 6, 7, 3), (1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),
    ("max_3x3_same_stride2", "max", (1, 7, 6, 2), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    ("min_overlapping_same", "min", (2, 5, 5, 1), (1, 3, 2, 1), (1, 1, 1, 1), "SAME", None, None),
    ("max_explicit_padding_nchw", "max", (1, 2, 6, 5), (1, 1, 3, 2), (1, 1, 2, 1), ((0, 0), (0, 0), (2, 1), (1, 0)),
     None, None),
    ("max_window_dilation", "max", (1, 9, 8, 2), (1, 2, 3, 1), (1, 2, 1, 1), "SAME", None, (1, 2, 2, 1)),
    ("min_base_dilation", "min", (1, 4, 5, 2), (1, 3, 2, 1), (1, 2, 1, 1), "SAME", (1, 2, 1, 1), None),
    ("max_1d", "max", (11,), (3,), (2,), "SAME", None, None),
]


def _pool_fn(op, window, strides, padding, bd, wd):
    return lambda v: lax.reduce_window(v, -np.inf if op == "max" else np.inf, lax.max if op == "max" else lax.min,
                                       window, strides, padding, bd, wd)


@pytest.mark.parametrize("name,op,shape,window,strides,padding,bd,wd", CASES, ids=[c[0] for c in CASES])
def test_gradient_against_finite_differences(name, op, shape, window, strides, padding, bd, wd):
    x = RNG.permutation(np.prod(shape)).reshape(shape) / 7.0  # distinct values: no ties, FD well defined
    pool = _pool_fn(op, window, strides, padding, bd, wd)
    bd_, wd_ = bd or (1,) * len(shape), wd or (1,) * len(shape)
    want_out = numpy_pool(x, op, window, strides, padding, bd_, wd_)
    weights = np.sin(np.arange(want_out.size)).reshape(want_out.shape) + 2.0

    def loss(v):
        return knp.sum(pool(v) * weights)

    def numpy_loss(v):
        y = numpy_pool(v, op, window, strides, padding, bd_, wd_)
        return float(np.sum(np.where(np.isfinite(y), y, 0.0) * weights))

    want = numerical_grad(numpy_loss, x, eps=1e-4)
    np.testing.assert_allclose(kiln.grad(loss)(x), want, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(x), want, rtol=1e-8, atol=1e-8)


def test_forward_mode_vmap_and_second_order_under_jit_equal_eager():
    x = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    t = RNG.standard_normal(x.shape).astype(np.float32)
    x[0, :2, :2, 0] = 1.5  # a tied window: shared evenly
    pool = lambda v: nn.max_pool(v, (3, 3), (2, 2), "SAME")  # noqa: E731
    jvp = lambda a, b: kiln.jvp(pool, (a,), (b,))[1]  # noqa: E731
    np.testing.assert_allclose(kiln.jit(jvp)(x, t), jvp(x, t), rtol=1e-6, atol=1e-7)
    batched = kiln.vmap(kiln.grad(lambda v: knp.sum(pool(v) ** 2)))
    xb = RNG.standard_normal((3,) + x.shape)
    np.testing.assert_allclose(kiln.jit(batched)(xb), batched(xb), rtol=1e-12, atol=1e-12)
    second = kiln.grad(lambda v: knp.sum(kiln.grad(lambda u: knp.sum(pool(u) ** 2))(v) ** 2))
    np.testing.assert_allclose(kiln.jit(second)(xb[0]), second(xb[0]), rtol=1e-12, atol=1e-12)
    # the gradient of sum(pool(v)**2) is 2 pool(v) at each window's maximum
    g = kiln.jit(kiln.grad(lambda v: knp.sum(nn.max_pool(v, (2, 2), (2, 2)) ** 2)))(xb[0])
    blocks = xb[0].reshape(2, 3, 2, 3, 2, 3)
    is_max = blocks == blocks.max(axis=(2, 4), keepdims=True)
    want = np.where(is_max, 2 * blocks, 0.0).reshape(xb[0].shape)
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_nan_window_selects_nothing_and_padding_windows_are_empty():
    x = np.array([[1.0, np.nan, 3.0, 2.0, 5.0]])
    g = kiln.jit(kiln.grad(lambda v: knp.sum(lax.reduce_window(v, -np.inf, lax.max, (1, 2), (1, 2), "VALID"))))(x)
    np.testing.assert_array_equal(g, [[0.0, 0.0, 1.0, 0.0, 0.0]])
    # windows lying wholly in the padding have no real position: nothing is scattered for them
    g = kiln.jit(kiln.grad(lambda v: knp.sum(lax.reduce_window(v, -np.inf, lax.max, (2,), (1,), ((3, 3),)))))(x[0])
    np.testing.assert_array_equal(g, [1.0, 0.0, 1.0, 0.0, 2.0])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_scatter(dtype):
    x = (RNG.permutation(48).reshape(1, 4, 6, 2) / 8.0).astype(dtype)
    cotangent = np.full((1, 2, 3, 2), 3.0, dtype)

    def f(v, c):  # the primitive itself: kiln's transformations differentiate float16, not bfloat16
        return pooling_select.select_and_scatter_add(c, v, op="max", window_dimensions=(1, 2, 2, 1),
                                                     window_strides=(1, 2, 2, 1), padding=((0, 0),) * 4,
                                                     base_dilation=(1,) * 4, window_dilation=(1,) * 4)

    got, eager = kiln.jit(f)(x, cotangent), f(x, cotangent)
    assert np.asarray(got).dtype == dtype
    blocks = x.astype(np.float32).reshape(1, 2, 2, 3, 2, 2)
    want = np.where(blocks == blocks.max(axis=(2, 4), keepdims=True), 3.0, 0.0).reshape(x.shape)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float32), want)
    np.testing.assert_array_equal(np.asarray(eager).astype(np.float32), want)


def test_errors_name_the_rule():
    x = np.zeros((4, 4))
    params = dict(op="max", window_dimensions=(2, 2), window_strides=(2, 2), padding=((0, 0), (0, 0)),
                  base_dilation=(1, 1), window_dilation=(1, 1))
    with pytest.raises(ShapeError, match="the cotangent .* must have the pooled shape \\(2, 2\\)"):
        pooling_select.select_and_scatter_add(np.zeros((3, 3)), x, **params)
    with pytest.raises(ShapeError, match="the tangent .* must have the operand's shape \\(4, 4\\)"):
        pooling_select.select_and_gather_add(np.zeros((2, 2)), x, **params)
    with pytest.raises(ShapeError, match="op must be 'max' or 'min'; got 'add'"):
        pooling_select.select_and_gather_add(x, x, **{**params, "op": "add"})
    with pytest.raises(ShapeError, match="operands must be floats of one dtype"):
        pooling_select.select_and_gather_add(x.astype(np.int32), x.astype(np.int32), **params)


BATCH = 32
W1 = (RNG.standard_normal((3, 3, 4, 8)) * 0.3).astype(np.float32)
W2 = (RNG.standard_normal((8 * 8 * 8, 10)) * 0.05).astype(np.float32)
X = RNG.standard_normal((BATCH, 16, 16, 4)).astype(np.float32)


def _cnn_loss(x, w1, w2):
    h = nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    h = nn.max_pool(h, (2, 2), (2, 2))
    return knp.sum(nn.log_softmax(knp.reshape(h, (h.shape[0], -1)) @ w2))


def test_exported_training_gradient_has_no_batch_sized_constants(tmp_path):
    """The gradient of a CNN with max pooling, exported: its constants stay far below one batch of
    activations (the old derivative carried the window mask, 4 x 32 x 8 x 8 x 8 floats = 256 KiB here,
    and a one-hot convolution kernel), and kiln-run computes the eager gradient."""

    class CNN(Program, export_name="cnn"):
        _w1 = W1
        _w2 = W2

        def grads(self, x=Program.like(X)):
            return kiln.grad(lambda w1, w2: _cnn_loss(x, w1, w2), argnums=(0, 1))(self._w1, self._w2)

    module = Program.get_compiled_artifact(CNN()).bytes
    spec = read_module(module)
    constant_bytes = sum(np.asarray(c.data).nbytes for c in spec.constants)
    assert constant_bytes < 4096, constant_bytes
    path = tmp_path / "cnn.vmfb"
    path.write_bytes(module)
    np.save(tmp_path / "x.npy", X)
    run_kiln_run(f"--module={path}", "--function=grads", f"--input=@{tmp_path / 'x.npy'}",
                 f"--output=@{tmp_path / 'g1.npy'}", f"--output=@{tmp_path / 'g2.npy'}")
    want = kiln.grad(lambda w1, w2: _cnn_loss(X.astype(np.float64), w1, w2), argnums=(0, 1))(
        W1.astype(np.float64), W2.astype(np.float64))
    np.testing.assert_allclose(np.load(tmp_path / "g1.npy"), want[0], rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(np.load(tmp_path / "g2.npy"), want[1], rtol=1e-3, atol=1e-4)


def test_declared_flops_count_each_window_once():
    """kiln.compiler.flops: one combine per window element and one divide per window, for both."""
    from kiln.compiler.flops import equation_flops
    from kiln.core.aval import ShapedArray
    from kiln.core.trace import trace_to_graph

    params = dict(op="max", window_dimensions=(2, 3), window_strides=(2, 3), padding=((0, 0), (0, 0)),
                  base_dilation=(1, 1), window_dilation=(1, 1))
    graph = trace_to_graph(lambda c, x: [pooling_select.select_and_scatter_add(c, x, **params),
                                         pooling_select.select_and_gather_add(x, x, **params)],
                           [ShapedArray((2, 2), np.float32), ShapedArray((4, 6), np.float32)])
    assert [equation_flops(e) for e in graph.eqns] == [4 * 7, 4 * 7]
