"""kiln.lax.conv_general_dilated and reduce_window against element-by-element numpy loops:
eagerly, under kiln.jit (C runtime), gradients against central finite differences
(float64), vmap against Python loops, and a small CNN: its gradient against finite differences of a
numpy version, and as an exported Program run by kiln-run."""
import functools
import itertools

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.numpy as knp
from kiln import Program, lax
from kiln.lax.conv import conv_dimension_numbers, dilate_dim, padtype_to_pads
from kiln_tools import run_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(7)


def naive_conv(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
               feature_group_count=1, batch_group_count=1):
    """One output element at a time, straight from the definition (independent of kiln's reference)."""
    lspec, rspec, ospec = conv_dimension_numbers(lhs.ndim, rhs.ndim, dimension_numbers)
    x = np.transpose(lhs, lspec).astype(np.float64)
    w = np.transpose(rhs, rspec).astype(np.float64)
    nsp = x.ndim - 2
    strides = window_strides
    ld = lhs_dilation or (1,) * nsp
    rd = rhs_dilation or (1,) * nsp
    pads = padtype_to_pads(x.shape[2:], [dilate_dim(k, r) for k, r in zip(w.shape[2:], rd)], strides, padding)
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    groups = feature_group_count * batch_group_count
    nout = n // batch_group_count
    out_sp = [max(0, (dilate_dim(d, l) + lo + hi - dilate_dim(k, r)) // s + 1)
              for d, l, (lo, hi), k, r, s in zip(x.shape[2:], ld, pads, w.shape[2:], rd, strides)]
    out = np.zeros([nout, o] + out_sp)
    for b, oc in itertools.product(range(nout), range(o)):
        g = oc // (o // groups)
        xb = g * nout + b if batch_group_count > 1 else b
        for p in itertools.product(*[range(s) for s in out_sp]):
            total = 0.0
            for ci in range(i):
                xc = g * i + ci if feature_group_count > 1 else ci
                for k in itertools.product(*[range(s) for s in w.shape[2:]]):
                    q = [pp * s + kk * r - lo for pp, s, kk, r, (lo, _) in zip(p, strides, k, rd, pads)]
                    if all(0 <= qq < dilate_dim(d, l) and qq % l == 0 for qq, d, l in zip(q, x.shape[2:], ld)):
                        total += x[(xb, xc) + tuple(qq // l for qq, l in zip(q, ld))] * w[(oc, ci) + k]
            out[(b, oc) + p] = total
    return np.transpose(out, np.argsort(ospec)).astype(lhs.dtype)


def naive_pool(x, op, window, strides, padding, base_dilation=None, window_dilation=None):
    bd = base_dilation or (1,) * x.ndim
    wd = window_dilation or (1,) * x.ndim
    pads = padtype_to_pads([dilate_dim(d, b) for d, b in zip(x.shape, bd)],
                           [dilate_dim(w, d) for w, d in zip(window, wd)], strides, padding)
    out_shape = [max(0, (dilate_dim(d, b) + lo + hi - dilate_dim(w, v)) // s + 1)
                 for d, b, (lo, hi), w, v, s in zip(x.shape, bd, pads, window, wd, strides)]
    out = np.zeros(out_shape, x.dtype)
    for p in itertools.product(*[range(s) for s in out_shape]):
        vals = []
        for k in itertools.product(*[range(w) for w in window]):
            q = [pp * s + kk * v - lo for pp, s, kk, v, (lo, _) in zip(p, strides, k, wd, pads)]
            if all(0 <= qq < dilate_dim(d, b) and qq % b == 0 for qq, d, b in zip(q, x.shape, bd)):
                vals.append(x[tuple(qq // b for qq, b in zip(q, bd))])
        if op == "add":
            acc = np.float64 if x.dtype.kind == "f" else np.int64  # integer sums wrap like numpy's astype
            out[p] = np.sum(np.asarray(vals, acc)).astype(x.dtype) if vals else 0
        elif vals:
            out[p] = np.max(vals) if op == "max" else np.min(vals)
        else:
            out[p] = -np.inf if op == "max" else np.inf
    return out


# (name, lhs shape, rhs shape, kwargs)
CONV_CASES = [
    ("nhwc_same_stride", (2, 5, 6, 3), (3, 3, 3, 4),
     dict(window_strides=(2, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("nchw_valid", (2, 3, 5, 4), (4, 3, 2, 3), dict(window_strides=(1, 1), padding="VALID")),
    ("explicit_negative_pad", (1, 2, 6, 5), (3, 2, 3, 2),
     dict(window_strides=(1, 2), padding=((2, -1), (1, 0)))),
    ("rhs_dilation", (2, 6, 7, 2), (2, 3, 2, 3),
     dict(window_strides=(1, 1), padding="SAME", rhs_dilation=(2, 3), dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("lhs_dilation_transposed", (1, 2, 3, 4), (3, 2, 3, 3),
     dict(window_strides=(1, 1), padding=((2, 2), (1, 2)), lhs_dilation=(2, 3))),
    ("feature_groups", (2, 4, 5, 5), (6, 2, 3, 2),
     dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    ("depthwise_nhwc", (2, 5, 5, 3), (3, 3, 1, 6),
     dict(window_strides=(2, 2), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=3)),
    ("batch_groups", (4, 3, 5, 4), (6, 3, 2, 2),
     dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    ("conv1d_nwc", (3, 9, 2), (4, 2, 5), dict(window_strides=(3,), padding="SAME", dimension_numbers=("NWC", "WIO", "NWC"))),
    ("conv3d", (1, 2, 4, 3, 5), (2, 2, 2, 2, 3), dict(window_strides=(1, 1, 2), padding="SAME")),
    ("odd_layout", (3, 5, 2, 4), (5, 2, 3, 1),
     dict(window_strides=(1, 1), padding="VALID", dimension_numbers=("HCWN", "IHOW", "WNCH"))),
    ("empty_output", (1, 2, 2, 2), (3, 2, 3, 3), dict(window_strides=(1, 1), padding="VALID")),
]


def _operands(lhs_shape, rhs_shape, dtype):
    return RNG.standard_normal(lhs_shape).astype(dtype), RNG.standard_normal(rhs_shape).astype(dtype)


def _conv_fn(kwargs):
    return lambda x, w: lax.conv_general_dilated(x, w, **kwargs)


@pytest.mark.parametrize("name,lhs_shape,rhs_shape,kwargs", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv_matches_loops_eager_and_jit(name, lhs_shape, rhs_shape, kwargs):
    x, w = _operands(lhs_shape, rhs_shape, np.float32)
    want = naive_conv(x, w, **kwargs)
    f = _conv_fn(kwargs)
    eager = f(x, w)
    assert eager.shape == want.shape and eager.dtype == np.float32
    np.testing.assert_allclose(eager, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kiln.jit(f)(x, w), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int8, np.float16])
def test_conv_dtypes(dtype):
    kwargs = dict(window_strides=(1, 2), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x = (RNG.integers(-3, 4, (2, 4, 5, 3))).astype(dtype)
    w = (RNG.integers(-3, 4, (2, 3, 3, 4))).astype(dtype)
    want = naive_conv(x, w, **kwargs)
    f = _conv_fn(kwargs)
    np.testing.assert_array_equal(f(x, w), want)
    got = kiln.jit(f)(x, w)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)


GRAD_CASES = [c for c in CONV_CASES if c[0] != "empty_output"]


@pytest.mark.parametrize("name,lhs_shape,rhs_shape,kwargs", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_conv_gradients_against_finite_differences(name, lhs_shape, rhs_shape, kwargs):
    x, w = _operands(lhs_shape, rhs_shape, np.float64)
    f = _conv_fn(kwargs)
    r = RNG.standard_normal(f(x, w).shape)

    def loss(x, w):
        return knp.sum(f(x, w) * r)

    gx, gw = kiln.grad(loss, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, numerical_grad(lambda v: float(np.sum(f(v, w) * r)), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, numerical_grad(lambda v: float(np.sum(f(x, v) * r)), w), rtol=1e-6, atol=1e-8)
    if name in ("nhwc_same_stride", "feature_groups", "lhs_dilation_transposed", "batch_groups"):
        jx, jw = kiln.jit(kiln.grad(loss, argnums=(0, 1)))(x, w)
        np.testing.assert_allclose(jx, gx, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(jw, gw, rtol=1e-10, atol=1e-12)


def test_conv_second_order():
    kwargs = dict(window_strides=(2, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x, w = _operands((1, 4, 4, 2), (2, 2, 2, 3), np.float64)
    f = _conv_fn(kwargs)

    def loss(x, w):
        return knp.sum(knp.tanh(f(x, w)))

    gw = kiln.grad(loss, argnums=1)
    v = RNG.standard_normal(w.shape)
    _, hv = kiln.jvp(lambda w: gw(x, w), (w,), (v,))
    fd = (gw(x, w + 1e-6 * v) - gw(x, w - 1e-6 * v)) / 2e-6
    np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-7)


VMAP_CASES = [c for c in CONV_CASES if c[0] in ("nhwc_same_stride", "feature_groups", "depthwise_nhwc", "batch_groups", "odd_layout")]


@pytest.mark.parametrize("name,lhs_shape,rhs_shape,kwargs", VMAP_CASES, ids=[c[0] for c in VMAP_CASES])
@pytest.mark.parametrize("in_axes", [(0, None), (None, 1), (2, 0)])
def test_conv_vmap_against_loop(name, lhs_shape, rhs_shape, kwargs, in_axes):
    f = _conv_fn(kwargs)
    size = 3
    xs = RNG.standard_normal(lhs_shape if in_axes[0] is None else
                             lhs_shape[:in_axes[0]] + (size,) + lhs_shape[in_axes[0]:])
    ws = RNG.standard_normal(rhs_shape if in_axes[1] is None else
                             rhs_shape[:in_axes[1]] + (size,) + rhs_shape[in_axes[1]:])
    pick = lambda a, ax, i: a if ax is None else np.take(a, i, axis=ax)  # noqa: E731
    want = np.stack([f(pick(xs, in_axes[0], i), pick(ws, in_axes[1], i)) for i in range(size)])
    np.testing.assert_allclose(kiln.vmap(f, in_axes=in_axes)(xs, ws), want, rtol=1e-12, atol=1e-12)
    if in_axes == (2, 0):
        np.testing.assert_allclose(kiln.jit(kiln.vmap(f, in_axes=in_axes))(xs, ws), want, rtol=1e-12, atol=1e-12)


def test_conv_errors():
    x, w = _operands((1, 3, 4, 4), (2, 2, 3, 3), np.float32)
    with pytest.raises(TypeError, match="input features"):
        lax.conv_general_dilated(x, w, (1, 1), "SAME")
    with pytest.raises(ValueError, match="padding"):
        lax.conv_general_dilated(x, w[:, :3].copy().reshape(2, 3, 3, 2)[:, :, :, :], (1, 1), "FULL")
    with pytest.raises(ValueError, match="window_strides"):
        lax.conv_general_dilated(x, np.ones((2, 3, 3, 3), np.float32), (1,), "SAME")
    with pytest.raises(TypeError, match="bool"):
        lax.conv_general_dilated(x > 0, np.ones((2, 3, 3, 3), bool), (1, 1), "SAME")


# ----------------------------------------------------------------------------- reduce_window

POOL_CASES = [
    ("max_valid", "max", (2, 5, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),
    ("max_same_overlap", "max", (2, 5, 6, 3), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    ("sum_same", "add", (2, 3, 5, 4), (1, 1, 3, 3), (1, 1, 1, 2), "SAME", None, None),
    ("min_explicit", "min", (4, 7), (3, 2), (2, 1), ((1, 2), (0, 1)), None, None),
    ("max_dilated", "max", (9, 8), (2, 3), (1, 2), ((1, 1), (2, 0)), (2, 1), (2, 2)),
    ("sum_dilated", "add", (5, 6), (3, 2), (2, 1), "VALID", (1, 2), (2, 1)),
    ("sum_1d", "add", (10,), (4,), (3,), "SAME", None, None),
]


def _pool_fn(op, window, strides, padding, bd, wd):
    init = {"add": 0.0, "max": -np.inf, "min": np.inf}[op]
    return lambda x: lax.reduce_window(x, init, {"add": lax.add, "max": lax.max, "min": lax.min}[op], window, strides,
                                       padding, base_dilation=bd, window_dilation=wd)


@pytest.mark.parametrize("name,op,shape,window,strides,padding,bd,wd", POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_reduce_window_matches_loops(name, op, shape, window, strides, padding, bd, wd):
    x = RNG.standard_normal(shape).astype(np.float32)
    want = naive_pool(x, op, window, strides, padding, bd, wd)
    f = _pool_fn(op, window, strides, padding, bd, wd)
    np.testing.assert_allclose(f(x), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(kiln.jit(f)(x), want, rtol=1e-6, atol=1e-6)
    x64 = x.astype(np.float64)
    g = kiln.grad(lambda v: knp.sum(knp.tanh(f(v))))(x64)
    np.testing.assert_allclose(g, numerical_grad(lambda v: float(np.sum(np.tanh(f(v)))), x64), rtol=1e-6, atol=1e-8)
    if name in ("max_same_overlap", "sum_same", "max_dilated"):
        np.testing.assert_allclose(kiln.jit(kiln.grad(lambda v: knp.sum(knp.tanh(f(v)))))(x64), g, rtol=1e-10, atol=1e-12)
    xs = RNG.standard_normal((3,) + shape)
    np.testing.assert_allclose(kiln.vmap(f, in_axes=1)(np.moveaxis(xs, 0, 1)), np.stack([f(v) for v in xs]), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8])
def test_reduce_window_integers(dtype):
    x = RNG.integers(0, 100, (3, 7, 5)).astype(dtype)
    for op in ("max", "min", "add"):
        init = 0 if op == "add" else (np.iinfo(dtype).min if op == "max" else np.iinfo(dtype).max)
        f = lambda v, op=op, init=init: lax.reduce_window(v, init, op, (1, 3, 2), (1, 2, 1), "SAME")  # noqa: E731
        want = naive_pool(x, op, (1, 3, 2), (1, 2, 1), "SAME").astype(dtype)
        np.testing.assert_array_equal(f(x), want)
        np.testing.assert_array_equal(kiln.jit(f)(x), want)


def test_reduce_window_init_and_errors():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    relu_pool = lambda v: lax.reduce_window(v, 0.0, lax.max, (2, 2), (2, 2), "VALID")  # noqa: E731
    np.testing.assert_allclose(kiln.jit(relu_pool)(x), np.maximum(naive_pool(x, "max", (2, 2), (2, 2), "VALID"), 0))
    with pytest.raises(ValueError, match="init_value must be 0"):
        lax.reduce_window(x, 1.0, lax.add, (2, 2), (1, 1), "VALID")
    with pytest.raises(ValueError, match="kiln.lax.add, kiln.lax.max or kiln.lax.min"):
        lax.reduce_window(x, 1.0, lambda a, b: a * b, (2, 2), (1, 1), "VALID")
    with pytest.raises(ValueError, match="window_dimensions needs 2"):
        lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID")


def test_max_pool_gradient_ties_share_evenly():
    x = np.zeros((1, 4, 4, 1))
    g = kiln.grad(lambda v: knp.sum(nn.max_pool(v, (2, 2), (2, 2))))(x)
    np.testing.assert_allclose(g, np.full(x.shape, 0.25))
    # windows that are only partly inside the input: padding never counts as a tie
    g = kiln.grad(lambda v: knp.sum(nn.max_pool(v, (3, 3), (2, 2), "SAME")))(x)
    assert np.isclose(g.sum(), 4.0)


def test_nn_pool_and_conv_helpers():
    x = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    np.testing.assert_allclose(nn.max_pool(x, (2, 2), (2, 2)), naive_pool(x, "max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID"))
    np.testing.assert_allclose(nn.avg_pool(x, (3, 3), (1, 1), "SAME"),
                               naive_pool(x, "add", (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9, rtol=1e-6)
    counts = naive_pool(np.ones_like(x), "add", (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
    np.testing.assert_allclose(kiln.jit(lambda v: nn.avg_pool(v, (3, 3), (1, 1), "SAME", count_include_pad=False))(x),
                               naive_pool(x, "add", (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / counts, rtol=1e-6)
    w = RNG.standard_normal((3, 3, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(kiln.jit(nn.conv)(x, w), naive_conv(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
                               rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- a small CNN, composed

CNN_RNG = np.random.default_rng(3)
CNN_W1 = (CNN_RNG.standard_normal((3, 3, 2, 4)) * 0.5).astype(np.float32)
CNN_W2 = (CNN_RNG.standard_normal((16, 3)) * 0.5).astype(np.float32)
CNN_X = CNN_RNG.standard_normal((2, 4, 4, 2)).astype(np.float32)


def cnn_forward(x, w1, w2):
    """conv (3x3, SAME, NHWC), relu, 2x2 max pool, flatten, dense."""
    h = nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    h = nn.max_pool(h, (2, 2), (2, 2))
    return knp.reshape(h, (h.shape[0], -1)) @ w2


def cnn_loss(x, w1, w2):
    return knp.sum(nn.log_softmax(cnn_forward(x, w1, w2)))


def numpy_cnn_forward(x, w1, w2):
    """The same network in plain numpy (float64), vectorized so finite differences stay cheap."""
    n, hh, ww, _ = x.shape
    kh, kw = w1.shape[:2]
    xp = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    conv = sum(np.einsum("nhwc,co->nhwo", xp[:, i:i + hh, j:j + ww], w1[i, j]) for i in range(kh) for j in range(kw))
    h = np.maximum(conv, 0)
    h = h.reshape(n, hh // 2, 2, ww // 2, 2, -1).max(axis=(2, 4))
    return h.reshape(n, -1) @ w2


def numpy_cnn_loss(x, w1, w2):
    z = numpy_cnn_forward(x, w1, w2)
    m = z.max(axis=-1, keepdims=True)
    return float(np.sum(z - m - np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True))))


@functools.lru_cache(maxsize=None)
def cnn_fd_grads():
    """Central finite differences (float64) of numpy_cnn_loss with respect to x, w1 and w2."""
    args = [a.astype(np.float64) for a in (CNN_X, CNN_W1, CNN_W2)]
    grads = []
    for k in range(3):
        def f(v, k=k):
            return numpy_cnn_loss(*args[:k], v, *args[k + 1:])
        grads.append(numerical_grad(f, args[k]))
    return grads


def test_numpy_cnn_reference_matches_loops():
    x, w1, w2 = (a.astype(np.float64) for a in (CNN_X, CNN_W1, CNN_W2))
    conv = naive_conv(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    pooled = naive_pool(np.maximum(conv, 0), "max", (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    np.testing.assert_allclose(numpy_cnn_forward(x, w1, w2), pooled.reshape(2, -1) @ w2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_cnn_gradient_against_finite_differences(mode):
    """The composed network's loss and its gradient with respect to the input and both weights, float64."""
    args = [a.astype(np.float64) for a in (CNN_X, CNN_W1, CNN_W2)]
    value_and_grad = kiln.value_and_grad(cnn_loss, argnums=(0, 1, 2))
    if mode == "jit":
        value_and_grad = kiln.jit(value_and_grad)
    value, grads = value_and_grad(*args)
    np.testing.assert_allclose(value, numpy_cnn_loss(*args), rtol=1e-12)
    for name, got, want in zip(("x", "w1", "w2"), grads, cnn_fd_grads()):
        assert got.dtype == np.float64, name
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8, err_msg=f"d loss / d {name}")


def test_cnn_program_through_kiln_run(tmp_path):
    """The CNN and its parameter gradients, exported (float32) and run by kiln-run, against numpy and the
    float64 finite differences of the numpy network."""

    class CNN(Program, export_name="cnn"):
        _w1 = CNN_W1
        _w2 = CNN_W2

        def predict(self, x=Program.like(CNN_X)):
            return cnn_forward(x, self._w1, self._w2)

        def grads(self, x=Program.like(CNN_X)):
            return kiln.grad(lambda w1, w2: cnn_loss(x, w1, w2), argnums=(0, 1))(self._w1, self._w2)

    m = CNN()
    path = tmp_path / "cnn.vmfb"
    Program.get_compiled_artifact(m).save(path)
    np.save(tmp_path / "x.npy", CNN_X)
    want = numpy_cnn_forward(*(a.astype(np.float64) for a in (CNN_X, CNN_W1, CNN_W2)))
    np.testing.assert_allclose(m.predict(CNN_X), want, rtol=1e-5, atol=1e-5)
    run_kiln_run(f"--module={path}", "--function=predict", f"--input=@{tmp_path / 'x.npy'}", f"--output=@{tmp_path / 'y.npy'}")
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-5, atol=1e-5)
    run_kiln_run(f"--module={path}", "--function=grads", f"--input=@{tmp_path / 'x.npy'}",
                 f"--output=@{tmp_path / 'g1.npy'}", f"--output=@{tmp_path / 'g2.npy'}")
    _, g_w1, g_w2 = cnn_fd_grads()
    np.testing.assert_allclose(np.load(tmp_path / "g1.npy"), g_w1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "g2.npy"), g_w2, rtol=1e-4, atol=1e-5)


def test_reduce_window_on_bfloat16():
    import ml_dtypes

    x = np.arange(-8, 8, dtype=np.float32).reshape(1, 4, 4, 1).astype(ml_dtypes.bfloat16)
    for op, init, ref in ((lax.max, -np.inf, np.max), (lax.min, np.inf, np.min), (lax.add, 0.0, np.sum)):
        fn = lambda v, op=op, init=init: lax.reduce_window(v, init, op, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")  # noqa: E731
        want = ref(x.astype(np.float32).reshape(1, 2, 2, 2, 2, 1), axis=(2, 4))
        for got in (fn(x), kiln.jit(fn)(x)):
            assert np.asarray(got).dtype == ml_dtypes.bfloat16
            np.testing.assert_array_equal(np.asarray(got).astype(np.float32), want)
