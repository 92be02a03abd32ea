"""The public surface of kiln.lax's structural functions and of kiln.numpy's data-dependent functions,
dtype aliases, shape queries and numpy-semantics details: against numpy eagerly and under kiln.jit
(compiled, run in the C runtime); gradients against float64 central differences; vmap against a
Python loop; an exported Program run by kiln-run; every error path with its message."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.lax as lax
import kiln.numpy as knp
from kiln import Program
from kiln_tools import run_kiln_run

RNG = np.random.default_rng(11)


def data(shape, dtype=np.float64):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) > 0.5
    if dtype.kind in "iu":
        return RNG.integers(0 if dtype.kind == "u" else -6, 7, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def check(got, want, tol=None):
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind == "f" or w.dtype == ml_dtypes.bfloat16:
            t = tol or {2: 2e-3, 4: 2e-6, 8: 1e-12}[w.dtype.itemsize]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=t, atol=t)
        else:
            np.testing.assert_array_equal(g, w)


def both(kfn, nfn, *args, tol=None):
    """kfn eagerly and under kiln.jit, against the numpy reference nfn."""
    want = nfn(*args)
    check(kfn(*args), want, tol)
    check(kiln.jit(kfn)(*args), want, tol)


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


# ============================================================ kiln.lax: dynamic_slice / dynamic_update_slice

def _np_dynamic_slice(x, starts, sizes):
    """JAX's rule: a negative start counts from the end, then every start is clamped so the slice fits."""
    st = []
    for s, d, z in zip(starts, x.shape, sizes):
        s = int(s)
        s = s + d if s < 0 else s
        st.append(min(max(s, 0), d - z))
    return x[tuple(slice(s, s + z) for s, z in zip(st, sizes))].copy()


def _np_dynamic_update_slice(x, u, starts):
    out = x.copy()
    st = []
    for s, d, z in zip(starts, x.shape, u.shape):
        s = int(s)
        s = s + d if s < 0 else s
        st.append(min(max(s, 0), d - z))
    out[tuple(slice(s, s + z) for s, z in zip(st, u.shape))] = u
    return out


STARTS = [(1, 2), (0, 0), (4, 9), (-1, -3), (-9, 2), (3, 3)]


@pytest.mark.parametrize("starts", STARTS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int64, np.uint8, np.bool_, np.float16])
def test_dynamic_slice_and_update_against_numpy(starts, dtype):
    x = data((5, 6), dtype)
    u = data((2, 3), dtype)
    i, j = np.int32(starts[0]), np.int32(starts[1])
    # traced start indices (scalars), Python ints, and a 1-D index array
    both(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)), lambda x, i, j: _np_dynamic_slice(x, (i, j), (2, 3)), x, i, j)
    both(lambda x: lax.dynamic_slice(x, list(starts), (2, 3)), lambda x: _np_dynamic_slice(x, starts, (2, 3)), x)
    both(lambda x, s: lax.dynamic_slice(x, s, (2, 3)), lambda x, s: _np_dynamic_slice(x, s, (2, 3)), x, np.array(starts, np.int8))
    both(lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)), lambda x, u, i, j: _np_dynamic_update_slice(x, u, (i, j)),
         x, u, i, j)
    both(lambda x, u, s: lax.dynamic_update_slice(x, u, s), lambda x, u, s: _np_dynamic_update_slice(x, u, s),
         x, u, np.array(starts, np.int64))


def test_dynamic_slice_in_dim_forms():
    x = data((4, 5, 3))
    both(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=1), lambda x, i: x[:, 2:4], x, np.int32(2))
    both(lambda x, i: lax.dynamic_slice_in_dim(x, i, 3), lambda x, i: x[1:4], x, np.int32(7))  # clamped to 1
    both(lambda x, i: lax.dynamic_index_in_dim(x, i, axis=2, keepdims=False), lambda x, i: x[:, :, 2], x, np.int32(-1))
    both(lambda x, i: lax.dynamic_index_in_dim(x, i, axis=-1), lambda x, i: x[:, :, 1:2], x, np.int32(1))
    u = data((4, 2, 3))
    both(lambda x, u, i: lax.dynamic_update_slice_in_dim(x, u, i, axis=1),
         lambda x, u, i: _np_dynamic_update_slice(x, u, (0, i, 0)), x, u, np.int32(-2))


def test_dynamic_slice_0d_and_empty():
    x = np.float32(3.5)
    both(lambda x: lax.dynamic_slice(x, (), ()), lambda x: np.asarray(x), x)
    e = np.zeros((0, 3), np.float32)
    both(lambda e, i: lax.dynamic_slice(e, (i, i), (0, 2)), lambda e, i: np.zeros((0, 2), np.float32), e, np.int32(1))


def test_dynamic_slice_grad_matches_finite_differences():
    x = data((5, 6))
    w = data((2, 3))
    for starts in [(np.int32(1), np.int32(2)), (np.int32(-1), np.int32(9))]:
        loss = lambda x: knp.sum(lax.dynamic_slice(x, starts, (2, 3)) ** 2 * w)  # noqa: E731
        want = numeric_grad(lambda v: float(np.sum(_np_dynamic_slice(v, starts, (2, 3)) ** 2 * w)), x)
        np.testing.assert_allclose(kiln.grad(loss)(x), want, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(x), want, rtol=1e-6, atol=1e-8)


def test_dynamic_update_slice_grad_matches_finite_differences():
    x = data((5, 6))
    u = data((2, 3))
    w = data((5, 6))
    starts = (np.int32(4), np.int32(-2))

    def loss(x, u):
        return knp.sum(lax.dynamic_update_slice(knp.sin(x), u * u, starts) * w)

    def ref(x, u):
        return float(np.sum(_np_dynamic_update_slice(np.sin(x), u * u, starts) * w))

    gx, gu = kiln.grad(loss, argnums=(0, 1))(x, u)
    np.testing.assert_allclose(gx, numeric_grad(lambda v: ref(v, u), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gu, numeric_grad(lambda v: ref(x, v), u), rtol=1e-6, atol=1e-8)
    jx, ju = kiln.jit(kiln.grad(loss, argnums=(0, 1)))(x, u)
    np.testing.assert_allclose(jx, gx, rtol=1e-12)
    np.testing.assert_allclose(ju, gu, rtol=1e-12)


VMAP_DS = {
    # name: (fn(x, u, i), in_axes)
    "slice_batched_x": (lambda x, u, i: lax.dynamic_slice(x, (i, np.int32(1)), (2, 3)), (0, None, None)),
    "slice_batched_start": (lambda x, u, i: lax.dynamic_slice(x, (i, i), (2, 3)), (None, None, 0)),
    "slice_batched_both": (lambda x, u, i: lax.dynamic_slice(x, (np.int32(1), i), (3, 2)), (0, None, 0)),
    "update_batched_x": (lambda x, u, i: lax.dynamic_update_slice(x, u, (i, i)), (0, None, None)),
    "update_batched_update": (lambda x, u, i: lax.dynamic_update_slice(x, u, (i, np.int32(2))), (None, 0, None)),
    "update_batched_start": (lambda x, u, i: lax.dynamic_update_slice(x, u, (i, -i)), (None, None, 0)),
    "update_batched_all": (lambda x, u, i: lax.dynamic_update_slice(x, u, (i, i)), (0, 0, 0)),
}


@pytest.mark.parametrize("name", sorted(VMAP_DS))
def test_dynamic_slice_vmap_matches_loop(name):
    fn, in_axes = VMAP_DS[name]
    batched = [data((4, 5, 6)), data((4, 2, 3)), np.array([0, 3, -1, 9], np.int32)]
    single = [data((5, 6)), data((2, 3)), np.int32(2)]
    args = [b if ax == 0 else s for b, s, ax in zip(batched, single, in_axes)]
    want = np.stack([np.asarray(fn(*[a[k] if ax == 0 else a for a, ax in zip(args, in_axes)])) for k in range(4)])
    check(kiln.vmap(fn, in_axes=in_axes)(*args), want)
    check(kiln.jit(kiln.vmap(fn, in_axes=in_axes))(*args), want)


def test_dynamic_slice_errors():
    x = np.zeros((5, 6), np.float32)
    with pytest.raises(TypeError, match=r"dynamic_slice: got 1 start indices for an operand of shape \(5, 6\)"):
        lax.dynamic_slice(x, (1,), (2, 2))
    with pytest.raises(TypeError, match=r"dynamic_slice: got 1 slice sizes for an operand of shape \(5, 6\)"):
        lax.dynamic_slice(x, (1, 1), (2,))
    with pytest.raises(TypeError, match="slice size 7 of dimension 1 does not fit"):
        lax.dynamic_slice(x, (1, 1), (2, 7))
    with pytest.raises(TypeError, match="start index 1 must be an integer scalar"):
        lax.dynamic_slice(x, (1, 1.5), (2, 2))
    with pytest.raises(TypeError, match=r"start index 0 must be an integer scalar, got f32\[\]"):
        kiln.jit(lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 2)))(x, np.float32(1))
    with pytest.raises(TypeError, match="start_indices must be a sequence of scalar integers or a 1-D integer array"):
        lax.dynamic_slice(x, 1, (2, 2))
    with pytest.raises(TypeError, match=r"update dtype float64 differs from operand dtype float32; convert it first"):
        lax.dynamic_update_slice(x, np.zeros((2, 2)), (0, 0))
    with pytest.raises(TypeError, match=r"update of shape \(6, 1\) does not fit in an operand of shape \(5, 6\)"):
        lax.dynamic_update_slice(x, np.zeros((6, 1), np.float32), (0, 0))
    with pytest.raises(TypeError, match="dynamic_slice_in_dim: axis 2 is out of range for an operand of rank 2"):
        lax.dynamic_slice_in_dim(x, 0, 1, axis=2)


def test_traced_slice_bounds_point_at_public_lax():
    with pytest.raises(IndexError) as info:
        kiln.jit(lambda x, i: x[i:i + 2])(np.zeros(5), np.int32(1))
    msg = str(info.value)
    assert "kiln.lax.dynamic_slice(x, start_indices, slice_sizes)" in msg and "structural_prims" not in msg
    # what the message recommends works
    both(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2), lambda x, i: x[1:3], np.arange(5.0), np.int32(1))


def test_lax_public_names():
    for name in ("dynamic_slice", "dynamic_update_slice", "gather", "scatter", "scatter_add", "slice", "pad", "rev",
                 "concatenate", "sort", "sort_key_val", "cumsum", "cumprod", "cummax", "cummin", "argmax", "argmin",
                 "dynamic_slice_in_dim", "dynamic_update_slice_in_dim", "dynamic_index_in_dim"):
        assert name in lax.__all__ and callable(getattr(lax, name)), name


# ============================================================ kiln.lax: gather / scatter (simplified form)

def _np_gather(x, idx, axes, mode, fill=0):
    """Reference: out[b] = moveaxis(x, axes, front)[tuple(idx[b])]; out-of-range rows read `fill` (mode fill)."""
    moved = np.moveaxis(x, axes, tuple(range(len(axes))))
    batch = idx.shape[:-1]
    rest = moved.shape[len(axes):]
    out = np.empty(batch + rest, x.dtype)
    sizes = np.array([x.shape[a] for a in axes])
    for b in np.ndindex(batch):
        row = idx[b].astype(np.int64)
        if mode == "clip":
            out[b] = moved[tuple(np.clip(row, 0, sizes - 1))]
        elif np.all((row >= 0) & (row < sizes)):
            out[b] = moved[tuple(row)]
        else:
            out[b] = fill
    return out


def _np_scatter(x, idx, u, axes, update, mode):
    out = x.copy()
    moved = np.moveaxis(out, axes, tuple(range(len(axes))))
    sizes = np.array([x.shape[a] for a in axes])
    ops = {"set": lambda a, b: b, "add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}
    for b in np.ndindex(idx.shape[:-1]):
        row = idx[b].astype(np.int64)
        if mode == "clip":
            row = np.clip(row, 0, sizes - 1)
        elif not np.all((row >= 0) & (row < sizes)):
            continue
        moved[tuple(row)] = ops[update](moved[tuple(row)], u[b])
    return out


@pytest.mark.parametrize("mode", [None, "fill", "clip", "promise_in_bounds"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_])
def test_gather_against_reference(mode, dtype):
    x = data((4, 5, 3), dtype)
    idx = np.array([[[0, 4], [3, 1]], [[5, 0], [-1, 2]], [[2, 2], [3, 4]]], np.int32)  # some rows out of range
    ref_mode = "clip" if mode in ("clip", "promise_in_bounds") else "fill"
    rows = np.array([[2], [0], [7], [3]], np.int64)
    if mode == "promise_in_bounds":  # the caller promises in-range indices
        idx, rows = np.abs(idx) % np.array([4, 5]), rows % 5
    both(lambda x, i: lax.gather(x, i, (0, 1), mode=mode), lambda x, i: _np_gather(x, i, (0, 1), ref_mode), x, idx)
    both(lambda x, i: lax.gather(x, i, (1,), mode=mode), lambda x, i: _np_gather(x, i, (1,), ref_mode), x, rows)


def test_gather_fill_value_and_row_gather():
    x = data((4, 3))
    idx = np.array([[1], [4], [-1], [0]], np.int32)
    both(lambda x, i: lax.gather(x, i, (0,), fill_value=-7.0), lambda x, i: _np_gather(x, i, (0,), "fill", -7.0), x, idx)
    # gather(x, i[:, None], (0,)) is x[i] for in-range rows
    i = np.array([3, 0, 0, 2])
    both(lambda x, i: lax.gather(x, i[:, None], (0,)), lambda x, i: x[i], x, i)


@pytest.mark.parametrize("update", ["set", "add", "mul", "min", "max"])
@pytest.mark.parametrize("mode", [None, "drop", "clip"])
def test_scatter_against_reference(update, mode):
    x = data((4, 5), np.float64)
    ref_mode = "clip" if mode == "clip" else "drop"
    if update != "set":
        idx = np.array([[1], [3], [1], [6], [-1]], np.int32)  # a duplicate and two out-of-range rows
    elif ref_mode == "drop":
        idx = np.array([[1], [3], [6], [-1], [0]], np.int32)  # set: no in-range duplicates (their order is unspecified)
    else:
        idx = np.array([[1], [2], [-1], [9], [6]], np.int32)[:4]  # clamped to 1, 2, 0, 3: distinct
    u = data((len(idx), 5), np.float64)
    both(lambda x, i, u: lax.scatter(x, i, u, (0,), update=update, mode=mode),
         lambda x, i, u: _np_scatter(x, i, u, (0,), update, ref_mode), x, idx, u)
    if update != "set":
        fn = getattr(lax, f"scatter_{update}")
        both(lambda x, i, u: fn(x, i, u, (0,), mode=mode), lambda x, i, u: _np_scatter(x, i, u, (0,), update, ref_mode),
             x, idx, u)


def test_scatter_two_axes_ints():
    x = data((3, 4, 2), np.int32)
    idx = np.array([[0, 3], [2, 1], [0, 3], [5, 0]], np.int32)
    u = data((4, 2), np.int32)
    both(lambda x, i, u: lax.scatter_add(x, i, u, (0, 1)), lambda x, i, u: _np_scatter(x, i, u, (0, 1), "add", "drop"),
         x, idx, u)
    both(lambda x, i, u: lax.scatter(x, i, u, (1, 0), update="max"),
         lambda x, i, u: _np_scatter(x, i, u, (1, 0), "max", "drop"), x, idx[:, ::-1].copy(), u)


def test_gather_scatter_grad_matches_finite_differences():
    x = data((4, 3))
    idx = np.array([[2], [0], [2], [5]], np.int32)
    w = data((4, 3))
    loss = lambda x: knp.sum(lax.gather(x, idx, (0,)) * w)  # noqa: E731
    want = numeric_grad(lambda v: float(np.sum(_np_gather(v, idx, (0,), "fill") * w)), x)
    np.testing.assert_allclose(kiln.grad(loss)(x), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(x), want, rtol=1e-6, atol=1e-8)
    u = data((4, 3))
    loss2 = lambda u: knp.sum(lax.scatter_add(x, idx, u * u, (0,)) * w)  # noqa: E731
    want2 = numeric_grad(lambda v: float(np.sum(_np_scatter(x, idx, v * v, (0,), "add", "drop") * w)), u)
    np.testing.assert_allclose(kiln.grad(loss2)(u), want2, rtol=1e-6, atol=1e-8)


def test_gather_scatter_errors():
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(TypeError, match=r"gather: indices must be integers, got f32\[2,1\]"):
        lax.gather(x, np.zeros((2, 1), np.float32), (0,))
    with pytest.raises(TypeError, match=r"gather: indices of shape \(2, 2\) must end in an axis of size 1"):
        lax.gather(x, np.zeros((2, 2), np.int32), (0,))
    with pytest.raises(TypeError, match=r"gather: axes \(2,\) out of range for an operand of shape \(4, 3\)"):
        lax.gather(x, np.zeros((2, 1), np.int32), (2,))
    with pytest.raises(TypeError, match=r"gather: repeated axis in \(0, 0\)"):
        lax.gather(x, np.zeros((2, 2), np.int32), (0, -2))
    with pytest.raises(ValueError, match="gather: mode must be 'fill', 'clip' or 'promise_in_bounds', got 'drop'"):
        lax.gather(x, np.zeros((2, 1), np.int32), (0,), mode="drop")
    with pytest.raises(TypeError, match=r"scatter: updates must have shape \(2, 3\) \(index batch \+ the operand's other dimensions\), got \(2,\)"):
        lax.scatter(x, np.zeros((2, 1), np.int32), np.zeros(2, np.float32), (0,))
    with pytest.raises(TypeError, match="scatter: updates dtype float64 differs from operand dtype float32"):
        lax.scatter(x, np.zeros((2, 1), np.int32), np.zeros((2, 3)), (0,))
    with pytest.raises(ValueError, match=r"scatter: update must be one of \('set', 'add', 'mul', 'min', 'max'\), got 'sub'"):
        lax.scatter(x, np.zeros((2, 1), np.int32), np.zeros((2, 3), np.float32), (0,), update="sub")
    with pytest.raises(ValueError, match="scatter: mode must be 'drop', 'clip' or 'promise_in_bounds', got 'wrap'"):
        lax.scatter_add(x, np.zeros((2, 1), np.int32), np.zeros((2, 3), np.float32), (0,), mode="wrap")


# ============================================================ kiln.lax: the other structural functions

def test_lax_structural_functions_against_numpy():
    x = data((4, 6))
    both(lambda x: lax.slice(x, (1, 0), (4, 6), (2, 3)), lambda x: x[1:4:2, 0:6:3], x)
    both(lambda x: lax.pad(x, -1.0, ((1, 2, 0), (0, -1, 1))),
         lambda x: np.pad(np.insert(x, np.arange(1, 6), -1.0, axis=1), ((1, 2), (0, 0)), constant_values=-1.0)[:, :-1], x)
    both(lambda x: lax.rev(x, (0, 1)), lambda x: x[::-1, ::-1], x)
    both(lambda x: lax.concatenate([x, x[:1]], 0), lambda x: np.concatenate([x, x[:1]], 0), x)
    x[1, 2] = x[1, 4]  # a tie
    both(lambda x: lax.sort(x, 1), lambda x: np.sort(x, 1), x)
    both(lambda x: lax.sort(x, 0, is_stable=False), lambda x: np.sort(x, 0), x)
    keys = np.array([[3, 1, 3, 2, 1, 3]], np.int32)
    both(lambda k, v: lax.sort_key_val(k, v), lambda k, v: (np.sort(k, kind="stable"), np.take_along_axis(v, np.argsort(k, kind="stable"), -1)),
         keys, x[:1])
    both(lambda k, v: lax.sort((k, v[0]), num_keys=2), lambda k, v: tuple(a[np.lexsort((v[0], k))] for a in (k, v[0])),
         keys[0], x[:1])
    both(lambda x: (lax.cumsum(x, 1), lax.cumprod(x, 0, reverse=True), lax.cummax(x, 1), lax.cummin(x, 0)),
         lambda x: (np.cumsum(x, 1), np.flip(np.cumprod(np.flip(x, 0), 0), 0), np.maximum.accumulate(x, 1), np.minimum.accumulate(x, 0)), x)
    both(lambda x: (lax.argmax(x, 1, np.int32), lax.argmin(x, 0, np.int64)),
         lambda x: (np.argmax(x, 1).astype(np.int32), np.argmin(x, 0).astype(np.int64)), x)


def test_lax_structural_function_errors():
    x = np.zeros((4, 6), np.float32)
    with pytest.raises(TypeError, match="sort: num_keys must be between 1 and the number of operands \\(1\\), got 2"):
        lax.sort(x, num_keys=2)
    with pytest.raises(TypeError, match="sort: the operand must have at least one dimension"):
        lax.sort(np.float32(1))
    with pytest.raises(TypeError, match="cumsum: axis 2 is out of range for an operand of rank 2"):
        lax.cumsum(x, 2)
    with pytest.raises(TypeError, match="argmax: axis -3 is out of range for an operand of rank 2"):
        lax.argmax(x, -3, np.int32)
