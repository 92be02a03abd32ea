"""The public surface of kiln.lax's structural functions and of kiln.numpy's data-dependent functions,
dtype aliases, shape queries and numpy-semantics details: against numpy eagerly and under kiln.jit
(compiled, run in the C runtime); gradients against float64 central differences; vmap against a
Python loop; an exported Program run by kiln-run; every error path with its message."""
import inspect

import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.lax as lax
import kiln.numpy as knp
from kiln import Program
from kiln_tools import check_like_numpy, eager_and_jit, random_array, run_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(11)


def data(shape, dtype=np.float64):
    return random_array(RNG, shape, dtype)


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
    eager_and_jit(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)), lambda x, i, j: _np_dynamic_slice(x, (i, j), (2, 3)), x, i, j)
    eager_and_jit(lambda x: lax.dynamic_slice(x, list(starts), (2, 3)), lambda x: _np_dynamic_slice(x, starts, (2, 3)), x)
    eager_and_jit(lambda x, s: lax.dynamic_slice(x, s, (2, 3)), lambda x, s: _np_dynamic_slice(x, s, (2, 3)), x, np.array(starts, np.int8))
    eager_and_jit(lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)), lambda x, u, i, j: _np_dynamic_update_slice(x, u, (i, j)),
         x, u, i, j)
    eager_and_jit(lambda x, u, s: lax.dynamic_update_slice(x, u, s), lambda x, u, s: _np_dynamic_update_slice(x, u, s),
         x, u, np.array(starts, np.int64))


def test_dynamic_slice_in_dim_forms():
    x = data((4, 5, 3))
    eager_and_jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=1), lambda x, i: x[:, 2:4], x, np.int32(2))
    eager_and_jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 3), lambda x, i: x[1:4], x, np.int32(7))  # clamped to 1
    eager_and_jit(lambda x, i: lax.dynamic_index_in_dim(x, i, axis=2, keepdims=False), lambda x, i: x[:, :, 2], x, np.int32(-1))
    eager_and_jit(lambda x, i: lax.dynamic_index_in_dim(x, i, axis=-1), lambda x, i: x[:, :, 1:2], x, np.int32(1))
    u = data((4, 2, 3))
    eager_and_jit(lambda x, u, i: lax.dynamic_update_slice_in_dim(x, u, i, axis=1),
         lambda x, u, i: _np_dynamic_update_slice(x, u, (0, i, 0)), x, u, np.int32(-2))


def test_dynamic_slice_0d_and_empty():
    x = np.float32(3.5)
    eager_and_jit(lambda x: lax.dynamic_slice(x, (), ()), lambda x: np.asarray(x), x)
    e = np.zeros((0, 3), np.float32)
    eager_and_jit(lambda e, i: lax.dynamic_slice(e, (i, i), (0, 2)), lambda e, i: np.zeros((0, 2), np.float32), e, np.int32(1))


def test_dynamic_slice_grad_matches_finite_differences():
    x = data((5, 6))
    w = data((2, 3))
    for starts in [(np.int32(1), np.int32(2)), (np.int32(-1), np.int32(9))]:
        loss = lambda x: knp.sum(lax.dynamic_slice(x, starts, (2, 3)) ** 2 * w)  # noqa: E731
        want = numerical_grad(lambda v: float(np.sum(_np_dynamic_slice(v, starts, (2, 3)) ** 2 * w)), x)
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
    np.testing.assert_allclose(gx, numerical_grad(lambda v: ref(v, u), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gu, numerical_grad(lambda v: ref(x, v), u), rtol=1e-6, atol=1e-8)
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
    check_like_numpy(kiln.vmap(fn, in_axes=in_axes)(*args), want)
    check_like_numpy(kiln.jit(kiln.vmap(fn, in_axes=in_axes))(*args), want)


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
    eager_and_jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2), lambda x, i: x[1:3], np.arange(5.0), np.int32(1))


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
    eager_and_jit(lambda x, i: lax.gather(x, i, (0, 1), mode=mode), lambda x, i: _np_gather(x, i, (0, 1), ref_mode), x, idx)
    eager_and_jit(lambda x, i: lax.gather(x, i, (1,), mode=mode), lambda x, i: _np_gather(x, i, (1,), ref_mode), x, rows)


def test_gather_fill_value_and_row_gather():
    x = data((4, 3))
    idx = np.array([[1], [4], [-1], [0]], np.int32)
    eager_and_jit(lambda x, i: lax.gather(x, i, (0,), fill_value=-7.0), lambda x, i: _np_gather(x, i, (0,), "fill", -7.0), x, idx)
    # gather(x, i[:, None], (0,)) is x[i] for in-range rows
    i = np.array([3, 0, 0, 2])
    eager_and_jit(lambda x, i: lax.gather(x, i[:, None], (0,)), lambda x, i: x[i], x, i)


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
    eager_and_jit(lambda x, i, u: lax.scatter(x, i, u, (0,), update=update, mode=mode),
         lambda x, i, u: _np_scatter(x, i, u, (0,), update, ref_mode), x, idx, u)
    if update != "set":
        fn = getattr(lax, f"scatter_{update}")
        eager_and_jit(lambda x, i, u: fn(x, i, u, (0,), mode=mode), lambda x, i, u: _np_scatter(x, i, u, (0,), update, ref_mode),
             x, idx, u)


def test_scatter_two_axes_ints():
    x = data((3, 4, 2), np.int32)
    idx = np.array([[0, 3], [2, 1], [0, 3], [5, 0]], np.int32)
    u = data((4, 2), np.int32)
    eager_and_jit(lambda x, i, u: lax.scatter_add(x, i, u, (0, 1)), lambda x, i, u: _np_scatter(x, i, u, (0, 1), "add", "drop"),
         x, idx, u)
    eager_and_jit(lambda x, i, u: lax.scatter(x, i, u, (1, 0), update="max"),
         lambda x, i, u: _np_scatter(x, i, u, (1, 0), "max", "drop"), x, idx[:, ::-1].copy(), u)


def test_gather_scatter_grad_matches_finite_differences():
    x = data((4, 3))
    idx = np.array([[2], [0], [2], [5]], np.int32)
    w = data((4, 3))
    loss = lambda x: knp.sum(lax.gather(x, idx, (0,)) * w)  # noqa: E731
    want = numerical_grad(lambda v: float(np.sum(_np_gather(v, idx, (0,), "fill") * w)), x)
    np.testing.assert_allclose(kiln.grad(loss)(x), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(x), want, rtol=1e-6, atol=1e-8)
    u = data((4, 3))
    loss2 = lambda u: knp.sum(lax.scatter_add(x, idx, u * u, (0,)) * w)  # noqa: E731
    want2 = numerical_grad(lambda v: float(np.sum(_np_scatter(x, idx, v * v, (0,), "add", "drop") * w)), u)
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
    eager_and_jit(lambda x: lax.slice(x, (1, 0), (4, 6), (2, 3)), lambda x: x[1:4:2, 0:6:3], x)
    eager_and_jit(lambda x: lax.pad(x, -1.0, ((1, 2, 0), (0, -1, 1))),
         lambda x: np.pad(np.insert(x, np.arange(1, 6), -1.0, axis=1), ((1, 2), (0, 0)), constant_values=-1.0)[:, :-1], x)
    eager_and_jit(lambda x: lax.rev(x, (0, 1)), lambda x: x[::-1, ::-1], x)
    eager_and_jit(lambda x: lax.concatenate([x, x[:1]], 0), lambda x: np.concatenate([x, x[:1]], 0), x)
    x[1, 2] = x[1, 4]  # a tie
    eager_and_jit(lambda x: lax.sort(x, 1), lambda x: np.sort(x, 1), x)
    eager_and_jit(lambda x: lax.sort(x, 0, is_stable=False), lambda x: np.sort(x, 0), x)
    keys = np.array([[3, 1, 3, 2, 1, 3]], np.int32)
    eager_and_jit(lambda k, v: lax.sort_key_val(k, v), lambda k, v: (np.sort(k, kind="stable"), np.take_along_axis(v, np.argsort(k, kind="stable"), -1)),
         keys, x[:1])
    eager_and_jit(lambda k, v: lax.sort((k, v[0]), num_keys=2), lambda k, v: tuple(a[np.lexsort((v[0], k))] for a in (k, v[0])),
         keys[0], x[:1])
    eager_and_jit(lambda x: (lax.cumsum(x, 1), lax.cumprod(x, 0, reverse=True), lax.cummax(x, 1), lax.cummin(x, 0)),
         lambda x: (np.cumsum(x, 1), np.flip(np.cumprod(np.flip(x, 0), 0), 0), np.maximum.accumulate(x, 1), np.minimum.accumulate(x, 0)), x)
    eager_and_jit(lambda x: (lax.argmax(x, 1, np.int32), lax.argmin(x, 0, np.int64)),
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


# ============================================================ data-dependent shapes: nonzero, argwhere, unique, ...

def _pad(a, size, fill):
    """numpy result `a` cut or padded (along axis 0) to `size` entries of `fill`: JAX's size= semantics."""
    a = np.asarray(a)
    if a.shape[0] >= size:
        return a[:size]
    return np.concatenate([a, np.full((size - a.shape[0],) + a.shape[1:], fill, a.dtype)])


MASKS = {
    "2d": np.array([[0, 5, 0], [6, 0, 7]], np.float32),
    "1d_int": np.array([0, 3, 0, 0, -1, 2], np.int32),
    "bool_3d": data((2, 3, 4), np.bool_),
    "all_zero": np.zeros((3, 2), np.int8),
    "empty": np.zeros((0, 3), np.float64),
}


@pytest.mark.parametrize("name", sorted(MASKS))
def test_nonzero_family_concrete_like_numpy(name):
    x = MASKS[name]
    check_like_numpy(knp.nonzero(x), np.nonzero(x))
    check_like_numpy(knp.argwhere(x), np.argwhere(x))
    check_like_numpy(knp.flatnonzero(x), np.flatnonzero(x))
    check_like_numpy(knp.where(x), np.where(x))
    check_like_numpy(knp.extract(x > 0, x), np.extract(x > 0, x))
    check_like_numpy(knp.unique(x), np.unique(x))


@pytest.mark.parametrize("size", [0, 2, 7])
@pytest.mark.parametrize("name", sorted(MASKS))
def test_nonzero_family_with_size_eager_and_jit(name, size):
    x = MASKS[name]
    nz = np.nonzero(x)
    eager_and_jit(lambda x: knp.nonzero(x, size=size), lambda x: tuple(_pad(n, size, 0) for n in nz), x)
    eager_and_jit(lambda x: knp.nonzero(x, size=size, fill_value=-1), lambda x: tuple(_pad(n, size, -1) for n in nz), x)
    fills = tuple(range(-x.ndim, 0))
    eager_and_jit(lambda x: knp.where(x, size=size, fill_value=fills), lambda x: tuple(_pad(n, size, f) for n, f in zip(nz, fills)), x)
    aw = np.argwhere(x)
    want_aw = _pad(aw, size, 0)
    want_aw[min(size, len(aw)):] = np.array(fills)
    eager_and_jit(lambda x: knp.argwhere(x, size=size, fill_value=fills), lambda x: want_aw, x)
    eager_and_jit(lambda x: knp.flatnonzero(x, size=size, fill_value=99), lambda x: _pad(np.flatnonzero(x), size, 99), x)
    eager_and_jit(lambda x: knp.extract(x != 0, x, size=size, fill_value=7), lambda x: _pad(np.extract(x != 0, x), size, 7), x)


def test_nonzero_with_size_gathers_the_masked_elements():
    """x[knp.nonzero(mask, size=N)]: the recipe the traced-mask error recommends."""
    x = data((3, 4))
    eager_and_jit(lambda x: x[knp.nonzero(x > 0, size=5)], lambda x: _pad(x[x > 0], 5, x[0, 0]), x)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_like_numpy(axis):
    a = data((3, 4), np.int32)
    cond = np.array([True, False, True])
    check_like_numpy(knp.compress(cond, a, axis=axis), np.compress(cond, a, axis=axis))
    ax = 0 if axis is None else axis
    want = np.moveaxis(_pad(np.moveaxis(np.compress(cond, a, axis=axis), ax, 0), 4, -5), 0, ax)
    eager_and_jit(lambda c, a: knp.compress(c, a, axis=axis, size=4, fill_value=-5), lambda c, a: want, cond, a)
    short = np.array([False, True])  # shorter than the axis: the rest is left out
    want2 = np.moveaxis(_pad(np.moveaxis(np.compress(short, a, axis=axis), ax, 0), 1, 0), 0, ax)
    eager_and_jit(lambda c, a: knp.compress(c, a, axis=axis, size=1), lambda c, a: want2, short, a)


UNIQUE_INPUTS = {
    "float_nan": np.array([[3.0, 1.0], [3.0, np.nan], [np.nan, 0.0], [-0.5, 1.0]]),
    "int8": np.array([4, -2, 4, 4, 0, -2, 9], np.int8),
    "bool": np.array([True, True, False, True]),
    "one": np.array([2.5], np.float32),
}


@pytest.mark.parametrize("size", [1, 3, 8])
@pytest.mark.parametrize("name", sorted(UNIQUE_INPUTS))
def test_unique_with_size_eager_and_jit(name, size):
    x = UNIQUE_INPUTS[name]
    vals, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    eager_and_jit(lambda x: knp.unique(x, size=size), lambda x: _pad(vals, size, vals[0]), x)
    eager_and_jit(lambda x: knp.unique(x, True, True, True, size=size, fill_value=0),
         lambda x: (_pad(vals, size, 0), _pad(index, size, 0), inverse, _pad(counts, size, 0)), x)
    eager_and_jit(lambda x: knp.unique(x, return_counts=True, size=size), lambda x: (_pad(vals, size, vals[0]), _pad(counts, size, 0)), x)


def test_unique_equal_nan_false_and_concrete_forms():
    x = np.array([np.nan, 1.0, np.nan, 1.0])
    check_like_numpy(knp.unique(x, equal_nan=False), np.unique(x, equal_nan=False))
    vals = np.unique(x, equal_nan=False)
    eager_and_jit(lambda x: knp.unique(x, equal_nan=False, size=4), lambda x: _pad(vals, 4, vals[0]), x)
    y = data((3, 4), np.int32)
    check_like_numpy(knp.unique(y, return_inverse=True, axis=0), np.unique(y, return_inverse=True, axis=0))


def test_sized_data_dependent_functions_vmap_and_grad():
    x = np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 0, 0], [2, 2, 1, 0]], np.float64)
    fns = {
        "nonzero": lambda r: knp.nonzero(r, size=2, fill_value=-1)[0],
        "unique": lambda r: knp.unique(r, return_counts=True, size=3),
        "extract": lambda r: knp.extract(r > 0, r * 2.0, size=3, fill_value=-1.0),
        "argwhere": lambda r: knp.argwhere(r, size=3),
    }
    for name, fn in fns.items():
        loops = [fn(r) for r in x]  # eager: numpy's functions with JAX's size= padding
        want = tuple(np.stack(c) for c in zip(*loops)) if isinstance(loops[0], tuple) else np.stack(loops)
        check_like_numpy(kiln.vmap(fn)(x), want)
        check_like_numpy(kiln.jit(kiln.vmap(fn))(x), want)
    r = data((6,))
    loss = lambda r: knp.sum(knp.extract(r > 0, r, size=4) ** 2)  # noqa: E731
    want = numerical_grad(lambda v: float(np.sum(_pad(v[r > 0], 4, 0.0) ** 2)), r)
    np.testing.assert_allclose(kiln.grad(loss)(r), want, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(r), want, rtol=1e-7, atol=1e-9)


def test_data_dependent_functions_on_traced_arrays_say_what_to_use():
    x = np.array([[0, 5, 0], [6, 0, 7]], np.float32)
    cases = {
        "nonzero": (lambda x: knp.nonzero(x), "pass size=N"),
        "argwhere": (lambda x: knp.argwhere(x), "pass size=N"),
        "flatnonzero": (lambda x: knp.flatnonzero(x), "pass size=N"),
        r"where\(condition\) with one argument": (lambda x: knp.where(x > 1), r"knp.where\(condition, size=N\)"),
        "unique": (lambda x: knp.unique(x), "size=N"),
        "extract": (lambda x: knp.extract(x > 1, x), r"knp.where\(condition, arr, fill\)"),
        "compress": (lambda x: knp.compress(x[0] > 1, x, axis=1), "size=N"),
        r"x\.nonzero\(\)": (lambda x: x.nonzero(), "pass size=N"),
    }
    for what, (fn, instead) in cases.items():
        with pytest.raises(knp.DataDependentShapeError) as info:
            kiln.jit(fn)(x)
        msg = str(info.value)
        assert "its output shape depends on the data" in msg, msg
        assert __import__("re").search(instead, msg), (what, msg)
        assert isinstance(info.value, TypeError)


def test_traced_boolean_mask_index_says_what_to_use():
    x = data((2, 3))
    with pytest.raises(knp.IndexingError) as info:
        kiln.jit(lambda x: x[x > 0])(x)
    msg = str(info.value)
    assert "the output shape depends on the data" in msg and "knp.where(mask, x, fill)" in msg
    assert "knp.nonzero(mask, size=N)" in msg
    # a concrete mask works like numpy
    mask = x > 0
    eager_and_jit(lambda x: x[mask], lambda x: x[mask], x)


def test_data_dependent_argument_errors():
    x = np.array([1.0, 0.0, 2.0])
    with pytest.raises(ValueError, match="nonzero: calling nonzero on 0d arrays is not allowed"):
        knp.nonzero(np.float32(1))
    with pytest.raises(ValueError, match="nonzero: calling nonzero on 0d arrays is not allowed"):
        kiln.jit(lambda v: knp.nonzero(v, size=2))(np.float32(1))
    with pytest.raises(ValueError, match="where: either both or neither of x and y should be given"):
        knp.where(x > 0, x)
    with pytest.raises(ValueError, match=r"where: size and fill_value are only accepted with the one-argument form"):
        knp.where(x > 0, x, 0.0, size=2)
    with pytest.raises(ValueError, match="nonzero: size must be >= 0, got -1"):
        kiln.jit(lambda v: knp.nonzero(v, size=-1))(x)
    with pytest.raises(TypeError, match="nonzero: size must be a Python int"):
        kiln.jit(lambda v, n: knp.nonzero(v, size=n))(x, np.int32(2))
    with pytest.raises(ValueError, match=r"nonzero: fill_value must be a scalar or a tuple of 1 values \(one per dimension\), got 2"):
        kiln.jit(lambda v: knp.nonzero(v, size=2, fill_value=(0, 1)))(x)
    with pytest.raises(ValueError, match="compress: condition must be a 1-d array"):
        kiln.jit(lambda c, a: knp.compress(c, a, size=1))(np.ones((2, 2), bool), np.ones((2, 2)))
    with pytest.raises(ValueError, match="compress: condition has 4 elements but axis 0 only 3"):
        kiln.jit(lambda c, a: knp.compress(c, a, size=1))(np.ones(4, bool), x)
    with pytest.raises(ValueError, match="extract: condition has 4 elements but arr only 3"):
        kiln.jit(lambda c, a: knp.extract(c, a, size=1))(np.ones(4, bool), x)
    with pytest.raises(NotImplementedError, match="unique: size= together with axis= is not supported"):
        knp.unique(np.ones((2, 2)), axis=0, size=2)


# ============================================================ shape queries and dtype aliases

def test_shape_ndim_size_functions():
    x = data((2, 3, 4))
    for v in (x, [[1, 2], [3, 4]], 3.0, np.float32(2)):
        assert knp.shape(v) == np.shape(v) and knp.ndim(v) == np.ndim(v) and knp.size(v) == np.size(v)
    assert knp.size(x, 1) == 3 and knp.size(x, (0, -1)) == 8

    def f(x):
        assert knp.shape(x) == (2, 3, 4) and knp.ndim(x) == 3 and knp.size(x) == 24 and knp.size(x, -1) == 4
        assert np.shape(x) == (2, 3, 4) and np.ndim(x) == 3 and np.size(x) == 24
        return knp.zeros(knp.shape(x)[1:]) + knp.size(x)

    eager_and_jit(f, lambda x: np.full((3, 4), 24.0), x)
    with pytest.raises(ValueError, match="size: axis 3 is out of bounds for an array of 3 dimensions"):
        knp.size(x, 3)


def test_shape_submodule_still_importable():
    from kiln.numpy.shape import reshape, tile

    # kiln.numpy's names wrap these to return kiln arrays (kiln.core.array.wrap_namespace)
    assert callable(knp.shape) and reshape is inspect.unwrap(knp.reshape) and tile is inspect.unwrap(knp.tile)
    import importlib

    assert importlib.import_module("kiln.numpy.shape").reshape is inspect.unwrap(knp.reshape)


def test_dtype_aliases():
    assert knp.bfloat16 is ml_dtypes.bfloat16 and knp.float16 is np.float16 and knp.bool is np.bool_
    for name in ("bool_", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64", "bfloat16"):
        assert np.dtype(getattr(knp, name)) in kiln.core.dtypes.SUPPORTED, name
    x = np.array([1.0, 2.5, -3.0078125, 1e-3], np.float32)
    want = x.astype(ml_dtypes.bfloat16)
    eager_and_jit(lambda x: knp.asarray(x, knp.bfloat16), lambda x: want, x)
    eager_and_jit(lambda x: x.astype(knp.bfloat16) * 2, lambda x: (want.astype(np.float32) * 2).astype(ml_dtypes.bfloat16), x)
    eager_and_jit(lambda x: x.astype(knp.float16), lambda x: x.astype(np.float16), x)
    check_like_numpy(knp.zeros(3, knp.bfloat16), np.zeros(3, ml_dtypes.bfloat16))
    assert knp.finfo(knp.bfloat16).eps == ml_dtypes.finfo(ml_dtypes.bfloat16).eps
    assert knp.finfo(np.float32).eps == np.finfo(np.float32).eps and knp.iinfo(knp.int8).min == -128
    assert knp.issubdtype(knp.bfloat16, knp.floating) and knp.issubdtype(knp.bfloat16, knp.inexact)
    assert not knp.issubdtype(knp.bfloat16, knp.integer) and knp.issubdtype(knp.int8, knp.signedinteger)
    assert knp.issubdtype(np.float16, knp.floating) and not knp.issubdtype(knp.uint8, knp.signedinteger)

    def f(x):
        assert knp.issubdtype(x.dtype, knp.floating) and knp.finfo(x).bits == 16
        return x

    kiln.jit(f)(x.astype(ml_dtypes.bfloat16))


def test_unsupported_dtype_aliases_say_so():
    for name in ("longdouble", "clongdouble", "float128"):
        with pytest.raises(AttributeError, match=f"kiln.numpy.{name}: kiln does not support the dtype {name} "
                                                 r"\(supported: float32, float64"):
            getattr(knp, name)
    with pytest.raises(AttributeError, match="module 'kiln.numpy' has no attribute 'no_such_function'"):
        knp.no_such_function  # noqa: B018


# ============================================================ numpy-semantics details

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_fmod_compiled(dtype):
    info = np.iinfo(dtype)
    if info.min < 0:
        a = np.array([7, -7, 7, -7, 5, -5, 0, info.min, info.min, info.max, 3], dtype)
        b = np.array([2, 2, -2, -2, 0, 0, 3, -1, 7, -3, 3], dtype)
    else:
        a = np.array([7, 5, 0, info.max, 200, 3], dtype)
        b = np.array([2, 0, 3, 7, 255, 3], dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.fmod(a, b)  # numpy's value for x % 0 is 0 (with a warning)
    eager_and_jit(knp.fmod, lambda a, b: want, a, b)
    eager_and_jit(lambda a: knp.fmod(a, 3), lambda a: np.fmod(a, np.asarray(3, dtype)), a)
    eager_and_jit(lambda a, b: lax.rem(a, b), lambda a, b: want, a, b)
    big = data((1000,), dtype)
    nz = np.where(big == 0, np.asarray(1, dtype), big)
    eager_and_jit(knp.fmod, np.fmod, big[::-1].copy(), nz)  # vectorized loop


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_floor_divide_and_remainder_by_zero(dtype):
    info = np.iinfo(dtype)
    if info.min < 0:
        a = np.array([7, -7, 7, -7, 5, -5, 0, info.min, info.min + 1, info.max, info.min, info.min], dtype)
        b = np.array([2, 2, -2, -2, 0, 0, 0, -1, 7, -3, 7, 2], dtype)
    else:
        a = np.array([7, 5, 0, info.max, 200], dtype)
        b = np.array([2, 0, 0, 7, 255], dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for name in ("floor_divide", "remainder", "divmod"):
            eager_and_jit(getattr(knp, name), getattr(np, name), a, b)
        eager_and_jit(lambda a, b: (a // b, a % b), lambda a, b: (a // b, a % b), a, b)


def test_integer_fmod_vmap_and_bool():
    a = np.array([[7, -7], [5, -9]], np.int32)
    check_like_numpy(kiln.jit(kiln.vmap(lambda r: knp.fmod(r, np.int32(4))))(a), np.fmod(a, 4))
    t = np.array([True, False, True, False])
    f = np.array([True, True, False, False])
    with np.errstate(divide="ignore", invalid="ignore"):
        eager_and_jit(knp.fmod, np.fmod, t, f)


@pytest.mark.parametrize("dtype", INT_DTYPES + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_float_to_int_conversion_saturates_eagerly_as_compiled(dtype):
    f = np.array([300.0, -300.0, np.nan, np.inf, -np.inf, 2.7, -2.7, 1e30, 0.0], np.float32)
    info = np.iinfo(dtype) if dtype is not np.bool_ else None
    if info is not None:
        f = np.concatenate([f, np.array([2.0**31, -2.0**31, 2.0**63, -2.0**63, 2.0**32], np.float32)])

    def ref(f):
        if info is None:
            return f != 0
        # Python compares a float with an int exactly: 2.0**63 >= INT64_MAX, as saturation needs
        return np.array([0 if np.isnan(v) else info.max if v >= info.max else info.min if v <= info.min else int(v)
                         for v in np.trunc(f.astype(np.float64))], dtype)

    for fn in (lambda f: knp.astype(f, dtype), lambda f: knp.asarray(f, dtype), lambda f: knp.array(f, dtype),
               lambda f: lax.convert_element_type(f, dtype)):
        eager_and_jit(fn, ref, f)
    eager_and_jit(lambda f: f.astype(dtype) if hasattr(f, "aval") else knp.astype(f, dtype), ref, f)


ROUNDING_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", ROUNDING_DTYPES, ids=lambda d: np.dtype(d).name)
def test_rounding_dtypes_like_numpy(dtype):
    x = data((7,), dtype)
    if np.dtype(dtype).kind == "f":
        x = (x * 3).astype(dtype)
    for name in ("floor", "ceil", "trunc", "rint", "round", "fix"):
        eager_and_jit(getattr(knp, name), getattr(np, name), x)
    eager_and_jit(lambda x: x.round(), lambda x: np.round(x), x)
    # integer 1/0: numpy's value is platform-dependent (int8 gives 0, int32 INT_MIN on x86); kiln gives 0
    nonzero = np.where(x == 0, np.asarray(3, dtype), x) if np.dtype(dtype).kind in "iuf" else x
    with np.errstate(divide="ignore", invalid="ignore"):
        eager_and_jit(knp.reciprocal, np.reciprocal, nonzero)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_round_integers_to_negative_decimals(dtype):
    info = np.iinfo(dtype)
    x = np.array([15, 25, 35, 44, 125, info.max // 2, info.min // 2, 0, 7], dtype)  # no overflow (kiln saturates)
    for decimals in (-1, -2):
        eager_and_jit(lambda x: knp.round(x, decimals), lambda x: np.round(x, decimals), x)
        eager_and_jit(lambda x: x.round(decimals), lambda x: x.round(decimals), x)
    eager_and_jit(lambda x: knp.around(x, 1), lambda x: np.around(x, 1), x)


def test_bool_arithmetic_like_numpy():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    with np.errstate(divide="ignore", invalid="ignore"):
        for name in ("floor_divide", "remainder", "mod", "fmod", "divmod"):
            eager_and_jit(getattr(knp, name), getattr(np, name), a, b)
    with pytest.raises(TypeError, match="round: numpy cannot round booleans to 1 decimals; convert to a number first"):
        knp.round(a, 1)
    with pytest.raises(TypeError, match="sign: numpy has no sign for booleans"):
        knp.sign(a)


def test_divmod_operator_and_function():
    x = data((5,))
    y = np.array([2.0, -1.5, 0.5, 3.0, -0.25])
    eager_and_jit(lambda x, y: divmod(x, y), np.divmod, x, y)
    eager_and_jit(lambda x: divmod(x, 2.0), lambda x: np.divmod(x, 2.0), x)
    eager_and_jit(lambda x: divmod(3.0, x), lambda x: np.divmod(3.0, x), x)
    eager_and_jit(knp.divmod, np.divmod, x.astype(np.int32) + 10, np.array([3, -3, 4, 5, -7], np.int32))


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_tril_triu_on_1d_input(k):
    v = data((4,))
    eager_and_jit(lambda v: (knp.tril(v, k), knp.triu(v, k)), lambda v: (np.tril(v, k), np.triu(v, k)), v)
    eager_and_jit(lambda v: knp.triu(v[:1], k), lambda v: np.triu(v[:1], k), v)
    with pytest.raises(ValueError, match="tril: input must be at least 1-d, got a 0-d array"):
        knp.tril(np.float64(1))


def test_tril_grad_on_1d_input():
    v = data((4,))
    w = data((4, 4))
    loss = lambda v: knp.sum(knp.tril(v, 1) * w)  # noqa: E731
    np.testing.assert_allclose(kiln.grad(loss)(v), numerical_grad(lambda u: float(np.sum(np.tril(u, 1) * w)), v), rtol=1e-7)


@pytest.mark.parametrize("shape,new", [((2, 3), (3, 2)), ((2, 3, 4), (4, -1)), ((6,), (2, 1, 3)), ((2, 3), (6,)), ((0, 3), (3, 0))])
def test_reshape_order_f(shape, new):
    x = data(shape)
    eager_and_jit(lambda x: knp.reshape(x, new, order="F"), lambda x: np.reshape(x, new, order="F"), x)
    eager_and_jit(lambda x: x.reshape(new, order="F"), lambda x: x.reshape(new, order="F"), x)
    eager_and_jit(lambda x: knp.reshape(x, shape=new), lambda x: np.reshape(x, new), x)
    eager_and_jit(lambda x: (knp.ravel(x, order="F"), x.flatten(order="F") if hasattr(x, "aval") else x.flatten("F")),
         lambda x: (np.ravel(x, order="F"), x.flatten("F")), x)


def test_reshape_order_f_grad_and_errors():
    x = data((2, 3))
    w = data((3, 2))
    loss = lambda x: knp.sum(knp.reshape(x, (3, 2), order="F") * w)  # noqa: E731
    np.testing.assert_allclose(kiln.grad(loss)(x), np.reshape(w, (2, 3), order="F"), rtol=1e-12)
    with pytest.raises(ValueError, match=r"reshape: order must be 'C' or 'F', got 'A' \('A' depends on memory layout"):
        knp.reshape(x, (3, 2), order="A")
    with pytest.raises(ValueError, match=r"reshape: cannot reshape array of size 6 into shape \(4, 2\)"):
        knp.reshape(x, (4, 2), order="F")
    with pytest.raises(TypeError, match="reshape: give either shape or newshape, not both"):
        knp.reshape(x, (3, 2), shape=(3, 2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.bool_])
def test_sort_descending_like_jax(dtype):
    x = data((4, 7), dtype)
    x[:, 3] = x[:, 0]  # ties
    if np.dtype(dtype).kind == "f":
        x[1, 2] = np.nan

    def ref_sort(x, axis):
        return np.flip(np.sort(x, axis=axis, kind="stable"), axis=axis)

    def ref_argsort(x, axis):  # stable: equal elements keep their original order
        n = x.shape[axis]
        return np.flip(n - 1 - np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable"), axis=axis)

    for axis in (-1, 0):
        eager_and_jit(lambda x: (knp.sort(x, axis=axis, descending=True), knp.argsort(x, axis=axis, descending=True)),
             lambda x: (ref_sort(x, axis), ref_argsort(x, axis)), x)
    eager_and_jit(lambda x: knp.sort(x, axis=None, descending=True), lambda x: ref_sort(x.ravel(), 0), x)
    got = kiln.jit(lambda x: (x.sort(descending=True), x.argsort(axis=0, descending=True)))(x)
    check_like_numpy(got, (ref_sort(x, -1), ref_argsort(x, 0)))


def test_sort_descending_order_of_ties_and_grad():
    x = np.array([1.0, 3.0, 1.0, 2.0, 3.0])
    eager_and_jit(lambda x: knp.argsort(x, descending=True), lambda x: np.array([1, 4, 3, 0, 2]), x)
    w = np.arange(5.0)
    loss = lambda x: knp.sum(knp.sort(x, descending=True) * w)  # noqa: E731
    y = data((5,))
    np.testing.assert_allclose(kiln.grad(loss)(y), numerical_grad(lambda v: float(np.sum(np.sort(v)[::-1] * w)), y), rtol=1e-7)


def test_tracer_methods():
    x = data((2, 3, 4)) * 3
    eager_and_jit(lambda x: (x.round(), x.round(1), x.copy(), x.mT, x.conj(), x.conjugate(), x.real, x.imag),
         lambda x: (x.round(), x.round(1), x.copy(), x.mT, x.conj(), x.conjugate(), x.real, x.imag), x)
    eager_and_jit(lambda x: knp.matrix_transpose(x), np.matrix_transpose, x)

    def sizes(x):
        assert x.itemsize == 8 and x.nbytes == 192
        return x

    kiln.jit(sizes)(x)
    with pytest.raises(ValueError, match=r"matrix_transpose: input must have at least 2 dimensions, got shape \(4,\)"):
        kiln.jit(lambda v: v.mT)(x[0, 0])


@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace_with_array_endpoints(endpoint):
    start = np.array([0.0, 1.0, -2.0])
    stop = np.array([[2.0], [5.0]])
    for axis in (0, 1, -1):
        eager_and_jit(lambda s, e: knp.linspace(s, e, 5, endpoint=endpoint, axis=axis),
             lambda s, e: np.linspace(s, e, 5, endpoint=endpoint, axis=axis), start, stop)
    eager_and_jit(lambda s, e: knp.linspace(s, e, 4, endpoint=endpoint, retstep=True),
         lambda s, e: np.linspace(s, e, 4, endpoint=endpoint, retstep=True), start, stop)
    eager_and_jit(lambda s: knp.linspace(s, 10.0, 6, endpoint=endpoint, dtype=np.int32),
         lambda s: np.linspace(s, 10.0, 6, endpoint=endpoint, dtype=np.int32), start * 3.3 - 7)
    s32 = start.astype(np.float32)
    eager_and_jit(lambda s: knp.linspace(s, np.float32(2), 4, endpoint=endpoint), lambda s: np.linspace(s, np.float32(2), 4, endpoint=endpoint), s32)
    eager_and_jit(lambda s: knp.linspace(s, 7, 3, endpoint=endpoint), lambda s: np.linspace(s, 7, 3, endpoint=endpoint),
         np.array([1, 2], np.int32))


@pytest.mark.parametrize("num", [0, 1, 2])
def test_linspace_edge_counts(num):
    eager_and_jit(lambda s, e: knp.linspace(s, e, num), lambda s, e: np.linspace(s, e, num), np.array([1.0, 2.0]), np.float64(3))
    eager_and_jit(lambda s: knp.linspace(s, 3.0, num, retstep=True), lambda s: np.linspace(s, 3.0, num, retstep=True), np.float64(1))
    with pytest.raises(ValueError, match="linspace: axis 3 is out of bounds for a result of 2 dimensions"):
        kiln.jit(lambda s: knp.linspace(s, 1.0, 3, axis=3))(np.zeros(2))


def test_linspace_grad():
    s, e = data((3,)), data((3,))
    w = data((5, 3))
    loss = lambda s, e: knp.sum(knp.linspace(s, e, 5) * w)  # noqa: E731
    gs, ge = kiln.grad(loss, argnums=(0, 1))(s, e)
    np.testing.assert_allclose(gs, numerical_grad(lambda v: float(np.sum(np.linspace(v, e, 5) * w)), s), rtol=1e-7)
    np.testing.assert_allclose(ge, numerical_grad(lambda v: float(np.sum(np.linspace(s, v, 5) * w)), e), rtol=1e-7)


# ============================================================ an exported Program run by kiln-run

class Surface(Program, export_name="surface"):
    def run(self, x=Program.like(np.zeros((4, 5), np.float32)), i=Program.like(np.int32(0)),
            n=Program.like(np.zeros((6,), np.int32))):
        window = lax.dynamic_slice(x, (i, i - 1), (2, 3))
        patched = lax.dynamic_update_slice(x, window * 10.0, (i - 1, np.int32(0)))
        rows = lax.scatter_add(knp.zeros((3, 5), np.float32), knp.stack([n[:4] % 3], axis=1), x, (0,))
        picked = lax.gather(x, knp.stack([n[:3], n[3:]], axis=1), (0, 1))
        nz = knp.nonzero(x > 0, size=6, fill_value=-1)
        uniq, counts = knp.unique(n, return_counts=True, size=4)
        return (window, patched, rows, picked, nz[0], nz[1], uniq, counts, knp.fmod(n, np.int32(-4)),
                knp.rint(n.astype(np.int8)), knp.sort(x, axis=0, descending=True), x.reshape((5, 4), order="F"),
                knp.tril(x[0]), knp.linspace(x[0], x[1], 3, axis=-1))


def _surface_reference(x, i, n):
    patched = _np_dynamic_update_slice(x, _np_dynamic_slice(x, (i, i - 1), (2, 3)) * 10.0, (i - 1, 0))
    rows = np.zeros((3, 5), np.float32)
    np.add.at(rows, n[:4] % 3, x)
    picked = _np_gather(x, np.stack([n[:3], n[3:]], axis=1), (0, 1), "fill")
    nz = [_pad(a, 6, -1) for a in np.nonzero(x > 0)]
    uniq, counts = np.unique(n, return_counts=True)
    return (_np_dynamic_slice(x, (i, i - 1), (2, 3)), patched, rows, picked, nz[0], nz[1], _pad(uniq, 4, uniq[0]),
            _pad(counts, 4, 0), np.fmod(n, np.int32(-4)), np.rint(n.astype(np.int8)), np.flip(np.sort(x, axis=0), 0),
            x.reshape((5, 4), order="F"), np.tril(x[0]), np.linspace(x[0], x[1], 3, axis=-1).astype(np.float32))


def test_program_interactive_and_kiln_run(tmp_path):
    x = data((4, 5), np.float32)
    n = np.array([2, -7, 2, 1, 4, 0], np.int32)
    m = Surface()
    check_like_numpy(m.run(x, np.int32(2), n), _surface_reference(x, 2, n), tol=1e-5)
    path = tmp_path / "surface.vmfb"
    Program.get_compiled_artifact(Surface).save(path)
    for name, value in (("x", x), ("i", np.int32(-1)), ("n", n)):
        np.save(tmp_path / f"{name}.npy", value)
    outs = [tmp_path / f"o{k}.npy" for k in range(14)]
    run_kiln_run(f"--module={path}", "--function=run", *[f"--input=@{tmp_path / f'{a}.npy'}" for a in "xin"],
                 *[f"--output=@{o}" for o in outs])
    check_like_numpy([np.load(o) for o in outs], _surface_reference(x, -1, n), tol=1e-5)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_arange_negative_step_of_every_int_dtype(dtype):
    """Traced arange runs start + i*step in the dtype's wrapping arithmetic: an unsigned dtype takes a negative step."""
    for args in ((6, 0, -2), (120, 3, -7), (0, 10, 3), (5,)):
        eager_and_jit(lambda x, args=args: knp.arange(*args, dtype=dtype) + x,
                      lambda x, args=args: np.arange(*args, dtype=dtype) + x, dtype(0))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_running_sums_round_each_step_like_numpy(dtype):
    """cumsum/cumprod of a storage type round every partial result, exactly as numpy's (and ml_dtypes') ufuncs do
    (docs/numpy.md); sum accumulates in float32 and rounds once."""
    x = (RNG.standard_normal(200) * 3).astype(dtype)
    for fn in (knp.cumsum, lambda v: knp.cumprod(v[:20])):
        ref = np.cumsum if fn is knp.cumsum else (lambda v: np.cumprod(v[:20]))
        for got in (fn(x), kiln.jit(fn)(x)):
            np.testing.assert_array_equal(np.asarray(got).astype(np.float64), ref(x).astype(np.float64))
    n, stuck = (3000, 2048.0) if dtype == np.float16 else (300, 256.0)  # where 1 more no longer changes the sum
    ones = np.ones(n, dtype)
    assert float(kiln.jit(knp.cumsum)(ones)[-1]) == float(np.cumsum(ones)[-1]) == stuck
    assert float(kiln.jit(knp.sum)(ones)) == float(n)
