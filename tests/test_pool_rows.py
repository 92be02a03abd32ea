"""reduce_window's channel-row kernel (codegen/pool.py's vector path: the innermost axis untouched by the
window and contiguous, LANES channels per vector, the tail one by one) against an independent float64
numpy pooling: channel counts with and without a tail, strides, padding, window and base dilation, every
dtype family, NaN propagation; the vector path is the one taken (parallel items are rows); gradients of
max and average pooling over it against finite differences; and an exported module run by kiln-run."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.numpy as knp
from kiln import Program, lax
from kiln.compiler.codegen import pool
from kiln.compiler.fusion import DispatchStep, partition
from kiln.compiler.pipeline import prepare_graph
from kiln.core.aval import ShapedArray
from kiln.core.trace import trace_to_graph
from kiln.lax import pooling_select
from kiln.lax.conv import dilate_dim, padtype_to_pads
from kiln_tools import random_array, run_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(47)


def numpy_pool(x, op, window, strides, padding, base_dilation=None, window_dilation=None):
    """float64 pooling by strided slices of the dilated operand padded with op's identity (negative padding
    crops)."""
    n = x.ndim
    base_dilation = base_dilation or (1,) * n
    window_dilation = window_dilation or (1,) * n
    fill = {"add": 0.0, "max": -np.inf, "min": np.inf}[op]
    pads = padtype_to_pads([dilate_dim(d, b) for d, b in zip(x.shape, base_dilation)],
                           [dilate_dim(w, d) for w, d in zip(window, window_dilation)], strides, padding)
    dil = np.full([dilate_dim(d, b) for d, b in zip(x.shape, base_dilation)], fill)
    dil[tuple(slice(None, None, b) for b in base_dilation)] = x
    dil = np.pad(dil, [(max(lo, 0), max(hi, 0)) for lo, hi in pads], constant_values=fill)
    dil = dil[tuple(slice(-min(lo, 0), d + min(hi, 0)) for (lo, hi), d in zip(pads, dil.shape))]  # negative: cropped
    out_shape = [(d - dilate_dim(w, wd)) // s + 1 for d, w, wd, s in zip(dil.shape, window, window_dilation, strides)]
    out = np.full(out_shape, fill)
    combine = {"add": np.add, "max": np.maximum, "min": np.minimum}[op]
    for k in np.ndindex(*window):
        sl = tuple(slice(kk * wd, kk * wd + s * (o - 1) + 1, s) for kk, wd, s, o in zip(k, window_dilation, strides, out_shape))
        out = combine(out, dil[sl])
    return out


COMPUTATION = {"add": lax.add, "max": lax.max, "min": lax.min}


def pooled(x, op, window, strides, padding, base_dilation=None, window_dilation=None):
    init = 0 if op == "add" else (-np.inf if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16 else None)
    if init is None:
        init = np.iinfo(x.dtype).min if op == "max" else np.iinfo(x.dtype).max
    if op == "min" and not isinstance(init, (int, np.integer)):
        init = np.inf
    f = kiln.jit(lambda v: lax.reduce_window(v, init, COMPUTATION[op], window, strides, padding, base_dilation,
                                             window_dilation))
    return np.asarray(f(x))


CASES = [  # (shape, window, strides, padding, base_dilation, window_dilation)
    ((2, 9, 9, 32), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    ((3, 7, 6, 19), (1, 3, 2, 1), (1, 2, 1, 1), "VALID", None, None),  # two vectors and a 3-channel tail
    ((2, 5, 5, 8), (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0), (1, 2), (2, 0), (0, 0)), None, (1, 2, 1, 1)),
    ((1, 4, 5, 11), (1, 3, 3, 1), (1, 2, 3, 1), ((0, 0), (1, 1), (0, 2), (0, 0)), (1, 2, 2, 1), None),
    ((6, 10), (3, 1), (2, 1), "SAME", None, None),
    # pooled rows (NCHW along W): lanes a window stride apart, edges one by one
    ((2, 3, 9, 40), (1, 1, 3, 3), (1, 1, 2, 2), "SAME", None, None),
    ((1, 2, 5, 37), (1, 1, 2, 3), (1, 1, 1, 3), ((0, 0), (0, 0), (1, 0), (2, 1)), None, (1, 1, 1, 2)),
    ((2, 2, 6, 35), (1, 1, 2, 2), (1, 1, 2, 1), ((0, 0), (0, 0), (0, 0), (-1, 3)), None, None),
    ((1, 1, 4, 70), (1, 1, 2, 5), (1, 1, 2, 4), "VALID", (1, 1, 2, 1), None),
]


@pytest.mark.parametrize("op", ["max", "min", "add"])
@pytest.mark.parametrize("case", CASES)
def test_rows_match_numpy_float32(op, case):
    shape, window, strides, padding, bd, wd = case
    x = RNG.standard_normal(shape).astype(np.float32)
    want = numpy_pool(x.astype(np.float64), "add" if op == "add" else op, window, strides, padding, bd, wd)
    got = pooled(x, op, window, strides, padding, bd, wd)
    assert got.dtype == np.float32 and got.shape == want.shape
    if op == "add":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int8, np.uint8])
@pytest.mark.parametrize("op", ["max", "min", "add"])
@pytest.mark.parametrize("case", [1, 5], ids=["channels", "nchw"])
def test_rows_every_dtype(dtype, op, case):
    shape, window, strides, padding, bd, wd = CASES[case]
    x = random_array(RNG, shape, dtype)
    want = numpy_pool(x.astype(np.float64), op, window, strides, padding, bd, wd)
    got = pooled(x, op, window, strides, padding, bd, wd)
    assert got.dtype == np.dtype(dtype)
    # float sums accumulate in f64 and round once; integer sums of small values are exact
    np.testing.assert_array_equal(got, want.astype(dtype))


def test_rows_bool_max_min():
    x = RNG.random((2, 5, 4, 13)) > 0.6
    for op in ("max", "min"):
        init = op == "min"
        f = kiln.jit(lambda v: lax.reduce_window(v, init, COMPUTATION[op], (1, 2, 2, 1), (1, 1, 2, 1), "SAME"))
        want = numpy_pool(x.astype(np.float64), op, (1, 2, 2, 1), (1, 1, 2, 1), "SAME") > 0.5
        np.testing.assert_array_equal(np.asarray(f(x)), want)


def test_rows_propagate_nan_per_channel():
    x = RNG.standard_normal((1, 6, 6, 20)).astype(np.float32)
    x[0, 1, 1, 3] = np.nan  # a vector lane
    x[0, 4, 5, 18] = np.nan  # a tail channel
    for op in ("max", "min", "add"):
        got = pooled(x, op, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        want = numpy_pool(x.astype(np.float64), op, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert np.isnan(got[..., 3]).any() and np.isnan(got[..., 18]).any()
        np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-6, atol=1e-6)


def _pool_region(fn, *args, primitive="reduce_window"):
    graph = prepare_graph(trace_to_graph(lambda *v: [fn(*v)], [ShapedArray(a.shape, a.dtype) for a in args]))
    regions = [s.region for s in partition(graph).steps if isinstance(s, DispatchStep)
               and any(e.primitive.name == primitive for e in s.region.eqns)]
    assert len(regions) == 1
    return regions[0]


@pytest.mark.parametrize("shape, window, strides, padding, rows, scatter_rows", [
    ((2, 9, 9, 32), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", True, True),
    ((2, 9, 9, 8), (1, 3, 3, 1), (1, 2, 2, 1), "VALID", True, True),
    ((2, 9, 9, 7), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", False, False),  # fewer than LANES outputs per row
    ((2, 9, 9, 32), (1, 3, 3, 2), (1, 2, 2, 2), "VALID", True, False),  # channels pooled: lanes 2 apart
    ((2, 32, 9, 9), (1, 1, 3, 3), (1, 1, 2, 2), "SAME", False, False),  # NCHW, fewer than LANES along W
    ((2, 4, 9, 40), (1, 1, 3, 3), (1, 1, 2, 2), "SAME", True, False),  # NCHW: W pooled, lanes 2 apart
    ((2, 4, 9, 80), (1, 1, 3, 5), (1, 1, 2, 5), "SAME", False, False),  # window stride 5 > MAX_LANE_STRIDE
    ((2, 4, 9, 40), (1, 1, 3, 3), (1, 1, 2, 2), ((0, 0), (0, 0), (1, 1), (1, 1)), True, False),
])
def test_vector_path_is_taken_exactly_when_it_applies(shape, window, strides, padding, rows, scatter_rows):
    """parallel items are output rows on reduce_window's vector paths, elements otherwise; the f32
    scatter's are bands of W x channels (one per (batch, H)) or, with W innermost and pooled, of W (one per
    (batch, C, H)); rows for halves, elements without channel rows."""
    x = np.zeros(shape, np.float32)
    region = _pool_region(lambda v: lax.reduce_window(v, -np.inf, lax.max, window, strides, padding), x)
    out_shape = region.outvars[0].aval.shape
    size = int(np.prod(out_shape))
    assert pool.parallel_items(region) == (size // out_shape[-1] if rows else size)
    assert pool._row_length(region) == (out_shape[-1] if rows else 0)
    f, pooled_shape = _scatter("max", window, strides, padding, None, None, shape)
    region = _pool_region(f, np.zeros(pooled_shape, np.float32), x, primitive="select_and_scatter_add")
    pooled_last = window[-1] != 1 or strides[-1] != 1 or (padding not in ("SAME", "VALID") and padding[-1] != (0, 0))
    bands = x.size // shape[-1] if pooled_last else x.size // (shape[-2] * shape[-1]) if scatter_rows else x.size
    assert pool.parallel_items(region) == bands  # f32: bands of W (x channels)
    region = _pool_region(f, np.zeros(pooled_shape, np.float16), x.astype(np.float16), primitive="select_and_scatter_add")
    assert pool.parallel_items(region) == (x.size // shape[-1] if scatter_rows else x.size)
    region = _pool_region(_gather("max", window, strides, padding, None, None, shape), x, x,
                          primitive="select_and_gather_add")
    assert pool.parallel_items(region) == (size // shape[-1] if scatter_rows else size)  # rows of channels


def test_gradients_through_rows_match_finite_differences():
    x = RNG.standard_normal((2, 6, 6, 11))

    def loss(v):
        return knp.sum(nn.max_pool(v, (3, 3), (2, 2), "SAME") ** 2) + knp.sum(nn.avg_pool(v, (2, 2), (1, 1), "VALID") ** 2)

    got = np.asarray(kiln.jit(kiln.grad(loss))(x))
    want = numerical_grad(lambda v: float(np.sum(numpy_pool(v, "max", (1, 3, 3, 1), (1, 2, 2, 1), "SAME") ** 2)
                                          + np.sum((numpy_pool(v, "add", (1, 2, 2, 1), (1, 1, 1, 1), "VALID") / 4) ** 2)), x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_exported_pooling_runs_in_the_c_runtime(tmp_path):
    """NHWC max and average pooling (channel rows with a tail), NCHW max pooling (pooled rows) and both
    layouts' max-pool gradients (channel bands, one-lane bands), exported and run by kiln-run."""
    x = RNG.standard_normal((2, 9, 9, 19)).astype(np.float32)
    xn = RNG.standard_normal((2, 3, 9, 37)).astype(np.float32)
    nchw_window, nchw_strides = (1, 1, 3, 3), (1, 1, 2, 2)

    def nchw_pool(v):
        return lax.reduce_window(v, -np.inf, lax.max, nchw_window, nchw_strides, "SAME")

    class Pools(Program, export_name="pools"):
        def pools(self, v=Program.like(x), n=Program.like(xn)):
            return (nn.max_pool(v, (3, 3), (2, 2), "SAME"), nn.avg_pool(v, (3, 3), (2, 2), "SAME"), nchw_pool(n),
                    kiln.grad(lambda u: knp.sum(nn.max_pool(u, (3, 3), (2, 2), "SAME") ** 2))(v),
                    kiln.grad(lambda u: knp.sum(nchw_pool(u) ** 2))(n))

    path = tmp_path / "pools.vmfb"
    path.write_bytes(Program.get_compiled_artifact(Pools()).bytes)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "n.npy", xn)
    names = ["m", "a", "mn", "g", "gn"]
    run_kiln_run(f"--module={path}", "--function=pools", f"--input=@{tmp_path / 'x.npy'}",
                 f"--input=@{tmp_path / 'n.npy'}", *[f"--output=@{tmp_path / (k + '.npy')}" for k in names])
    got = {k: np.load(tmp_path / f"{k}.npy") for k in names}
    x64, n64 = x.astype(np.float64), xn.astype(np.float64)
    np.testing.assert_array_equal(got["m"], numpy_pool(x64, "max", (1, 3, 3, 1), (1, 2, 2, 1), "SAME").astype(np.float32))
    np.testing.assert_allclose(got["a"], numpy_pool(x64, "add", (1, 3, 3, 1), (1, 2, 2, 1), "SAME") / 9, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got["mn"], numpy_pool(n64, "max", nchw_window, nchw_strides, "SAME").astype(np.float32))
    # the gradients against kiln's eager float64 ones (finite differences check those in the tests above)
    want = kiln.grad(lambda u: knp.sum(nn.max_pool(u, (3, 3), (2, 2), "SAME") ** 2))(x64)
    np.testing.assert_allclose(got["g"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["gn"], kiln.grad(lambda u: knp.sum(nchw_pool(u) ** 2))(n64), rtol=1e-5, atol=1e-5)
    assert np.count_nonzero(got["gn"]) > 0


# select_and_scatter_add's channel-row kernel (codegen/pool_select.py): (op, shape, window, strides, padding,
# base dilation, window dilation); channel counts with and without a tail
SCATTER_CASES = [
    ("max", (2, 7, 7, 19), (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    ("min", (1, 6, 5, 8), (1, 2, 3, 1), (1, 1, 2, 1), "VALID", None, None),
    ("max", (1, 9, 8, 11), (1, 2, 3, 1), (1, 2, 1, 1), "SAME", None, (1, 2, 2, 1)),
    ("min", (1, 4, 5, 20), (1, 3, 2, 1), (1, 2, 1, 1), ((0, 0), (2, 1), (0, 2), (0, 0)), (1, 2, 1, 1), None),
    ("max", (9, 16), (3, 1), (2, 1), ((3, 3), (0, 0)), None, None),  # windows wholly in the padding
    # a pooled innermost axis (NCHW): f32/f64 take one-lane bands along W
    ("max", (2, 3, 9, 13), (1, 1, 3, 3), (1, 1, 2, 2), "SAME", None, None),
    ("min", (1, 2, 7, 11), (1, 1, 2, 3), (1, 1, 1, 2), ((0, 0), (0, 0), (1, 0), (2, -1)), None, (1, 1, 2, 2)),
]


def _scatter(op, window, strides, padding, bd, wd, shape):
    n = len(shape)
    pads = padtype_to_pads([dilate_dim(d, b) for d, b in zip(shape, bd or (1,) * n)],
                           [dilate_dim(w, d) for w, d in zip(window, wd or (1,) * n)], strides, padding)
    params = dict(op=op, window_dimensions=window, window_strides=strides, padding=tuple(pads),
                  base_dilation=bd or (1,) * n, window_dilation=wd or (1,) * n)
    pooled_shape = pooling_select.window_out_shape(shape, *[params[k] for k in list(params)[1:]])
    return (lambda c, v: pooling_select.select_and_scatter_add(c, v, **params)), pooled_shape


def _gather(op, window, strides, padding, bd, wd, shape):
    (_, pooled_shape), n = _scatter(op, window, strides, padding, bd, wd, shape), len(shape)
    pads = padtype_to_pads([dilate_dim(d, b) for d, b in zip(shape, bd or (1,) * n)],
                           [dilate_dim(w, d) for w, d in zip(window, wd or (1,) * n)], strides, padding)
    return lambda t, v: pooling_select.select_and_gather_add(
        t, v, op=op, window_dimensions=window, window_strides=strides, padding=tuple(pads),
        base_dilation=bd or (1,) * n, window_dilation=wd or (1,) * n)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("case", SCATTER_CASES)
def test_scatter_rows_match_the_numpy_selection_with_ties_and_nan(case, dtype):
    """Against the eager numpy implementation: values rounded to quarters (many ties, shared evenly) and a
    NaN in a vector lane and in a tail channel (their windows select nothing)."""
    op, shape, window, strides, padding, bd, wd = case
    x = np.round(RNG.standard_normal(shape) * 2) / 4
    x[(0,) * (len(shape) - 1) + (1,)] = np.nan
    x[(-1,) * (len(shape) - 1) + (shape[-1] - 1,)] = np.nan
    f, pooled_shape = _scatter(op, window, strides, padding, bd, wd, shape)
    c = (RNG.standard_normal(pooled_shape) * 3).astype(dtype)
    xd = x.astype(dtype)
    got = np.asarray(kiln.jit(f)(c, xd))
    want = np.asarray(f(c.astype(np.float64), xd.astype(np.float64)))
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape
    tol = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-13}.get(np.dtype(dtype), 1e-2)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    # the forward-mode derivative (select_and_gather_add, per output row of channels) on the same windows
    g = _gather(op, window, strides, padding, bd, wd, shape)
    t = (RNG.standard_normal(shape) * 3).astype(dtype)
    got = np.asarray(kiln.jit(g)(t, xd))
    want = np.asarray(g(t.astype(np.float64), xd.astype(np.float64)))
    assert got.dtype == np.dtype(dtype) and got.shape == pooled_shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def test_vector_paths_are_bit_identical_to_the_scalar_loops(monkeypatch):
    """The same values combined in the same order: the row, pooled-row, scatter-row, band (channel and
    one-lane) and gather-row kernels give the scalar kernels' bits (LANES beyond every row length and no
    bands turn those paths off; the kernel cache is off so that the scalar kernels are compiled, not
    found)."""
    from kiln.compiler.codegen import pool_select

    x = RNG.standard_normal((3, 10, 12, 21)).astype(np.float32)
    x[0, 2:4, 2:4, :] = 0.5  # tied windows
    x[1, 5, 6, 4] = np.nan
    nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    c = RNG.standard_normal((3, 5, 6, 21)).astype(np.float32)

    f, _ = _scatter("max", (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None, x.shape)
    g = _gather("max", (1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None, x.shape)
    fn, _ = _scatter("max", (1, 1, 3, 3), (1, 1, 2, 2), "SAME", None, None, nchw.shape)
    cn = np.ascontiguousarray(c.transpose(0, 3, 1, 2))

    def run():
        return [
            np.asarray(kiln.jit(lambda v: lax.reduce_window(v, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"))(x)),
            np.asarray(kiln.jit(lambda v: lax.reduce_window(v, -np.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), "SAME"))(nchw)),
            np.asarray(kiln.jit(lambda v: lax.reduce_window(v, 0.0, lax.add, (1, 1, 2, 3), (1, 1, 1, 2),
                                                            ((0, 0), (0, 0), (1, 0), (2, 1))))(nchw)),
            np.asarray(kiln.jit(f)(c, x)),  # bands
            np.asarray(kiln.jit(f)(c.astype(np.float16), x.astype(np.float16))),  # rows
            np.asarray(kiln.jit(g)(x[::-1].copy(), x)),  # gather rows
            np.asarray(kiln.jit(fn)(cn, nchw)),  # one-lane bands along W
            np.asarray(kiln.jit(g)(x.astype(np.float16), x.astype(np.float16))),
        ]

    monkeypatch.setenv("KILN_CACHE", "0")
    vector = run()
    monkeypatch.setattr(pool, "LANES", 10**9)
    monkeypatch.setattr(pool_select, "LANES", 10**9)
    monkeypatch.setattr(pool_select, "_bands", lambda region: False)
    scalar = run()
    for v, s in zip(vector, scalar, strict=True):
        np.testing.assert_array_equal(v.view(np.uint8), s.view(np.uint8))


def test_padding_after_an_untouched_axis_reads_nothing_past_the_end():
    """Width 1, stride 1 and padding only after: the windows past the operand's end are empty (the sum's
    and the extremum's identity; they select nothing), for reduce_window and both derivatives (these
    windows used to read past the operand: the untouched-axis shortcut ignored high padding)."""
    x = RNG.standard_normal((5, 12)).astype(np.float32) + 4.0
    pad = ((1, 0), (0, 3))
    for op in ("add", "max"):
        got = pooled(x, op, (2, 1), (1, 1), pad)
        want = numpy_pool(x.astype(np.float64), op, (2, 1), (1, 1), pad)
        assert got.shape == (5, 15)
        np.testing.assert_allclose(got, want, rtol=1e-6)
    f, pooled_shape = _scatter("max", (2, 1), (1, 1), pad, None, None, x.shape)
    g = _gather("max", (2, 1), (1, 1), pad, None, None, x.shape)
    c = RNG.standard_normal(pooled_shape).astype(np.float32)
    np.testing.assert_allclose(np.asarray(kiln.jit(f)(c, x)), f(c.astype(np.float64), x.astype(np.float64)), rtol=1e-6)
    got = np.asarray(kiln.jit(g)(x, x))
    np.testing.assert_allclose(got, g(x.astype(np.float64), x.astype(np.float64)), rtol=1e-6)
    np.testing.assert_array_equal(got[:, 12:], 0.0)
