"""Structural ops, indexing, reductions, sorting and linear algebra of kiln.numpy (issue 3):
against numpy eagerly and under kiln.jit (compiled, run in the C runtime); gradients against
central finite differences in float64; vmap against a Python loop; an exported Program via kiln-run."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import Program
from kiln.numpy.indexing import IndexingError
from kiln_tools import check_like_numpy, eager_and_jit, random_array, run_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(7)
ALL_DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
              np.uint64, np.bool_]


def data(shape, dtype=np.float64):
    return random_array(RNG, shape, dtype)


# ---------------------------------------------------------------- per-dtype structural ops

DTYPE_CASES = {
    "concatenate": (lambda a, b: knp.concatenate([a, b, a], axis=1), lambda a, b: np.concatenate([a, b, a], axis=1), [(3, 2), (3, 4)]),
    "stack": (lambda a, b: knp.stack([a, a], axis=-1), lambda a, b: np.stack([a, a], axis=-1), [(3, 2), (1,)]),
    "pad": (lambda a, b: knp.pad(a, ((1, 2), (0, 3))), lambda a, b: np.pad(a, ((1, 2), (0, 3))), [(3, 2), (1,)]),
    "pad_edge": (lambda a, b: knp.pad(a, 2, mode="edge"), lambda a, b: np.pad(a, 2, mode="edge"), [(3, 4), (1,)]),
    "flip_roll": (lambda a, b: (knp.flip(a), knp.roll(a, 2, axis=1), knp.roll(a, -1)), lambda a, b: (np.flip(a), np.roll(a, 2, axis=1), np.roll(a, -1)), [(3, 5), (1,)]),
    "getitem": (lambda a, b: (a[1:, ::-2], a[:, [3, 0, 3]], a[None, -1], a[..., 1]), lambda a, b: (a[1:, ::-2], a[:, [3, 0, 3]], a[None, -1], a[..., 1]), [(3, 5), (1,)]),
    "sort": (lambda a, b: (knp.sort(a), knp.argsort(a, axis=0)), lambda a, b: (np.sort(a, kind="stable"), np.argsort(a, axis=0, kind="stable")), [(4, 9), (1,)]),
    "cumsum": (lambda a, b: (knp.cumsum(a, axis=1), knp.cumprod(a, axis=0)), lambda a, b: (np.cumsum(a, axis=1), np.cumprod(a, axis=0)), [(3, 4), (1,)]),
    "argmax": (lambda a, b: (knp.argmax(a, axis=1), knp.argmin(a), knp.argmax(a, axis=0, keepdims=True)), lambda a, b: (np.argmax(a, axis=1), np.argmin(a), np.argmax(a, axis=0, keepdims=True)), [(4, 7), (1,)]),
    "reduce": (lambda a, b: (knp.prod(a, axis=0), knp.all(a, axis=1), knp.any(a), knp.max(a, axis=1, keepdims=True)), lambda a, b: (np.prod(a, axis=0), np.all(a, axis=1), np.any(a), np.max(a, axis=1, keepdims=True)), [(3, 4), (1,)]),
    "take": (lambda a, b: (knp.take(a, np.array([[2, 0]]), axis=1), knp.take_along_axis(a, knp.argsort(a, axis=1), axis=1)), lambda a, b: (np.take(a, np.array([[2, 0]]), axis=1), np.take_along_axis(a, np.argsort(a, axis=1, kind="stable"), axis=1)), [(3, 4), (1,)]),
    "at_set": (lambda a, b: (knp.at(a)[1, [0, 2]].set(b[0, 0]), knp.at(a)[:, 1].max(b[0, 0])), lambda a, b: (_np_set(a, (1, [0, 2]), b[0, 0]), _np_max(a, (slice(None), 1), b[0, 0])), [(3, 4), (1, 1)]),
    "triu_tile": (lambda a, b: (knp.triu(a, 1), knp.tril(a), knp.tile(a, (2, 1)), knp.repeat(a, 2, axis=0)), lambda a, b: (np.triu(a, 1), np.tril(a), np.tile(a, (2, 1)), np.repeat(a, 2, axis=0)), [(3, 4), (1,)]),
}


def _np_set(a, key, v):
    out = a.copy()
    out[key] = v
    return out


def _np_max(a, key, v):
    out = a.copy()
    out[key] = np.maximum(out[key], v)
    return out


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
def test_dtypes(name, dtype):
    kfn, nfn, shapes = DTYPE_CASES[name]
    if name == "cumsum" and dtype == np.float16:
        pytest.importorskip  # numpy accumulates float16 cumsum in float16 too: same rounding
    args = [data(s, dtype) for s in shapes]
    if name == "sort" and np.dtype(dtype).kind == "f":
        args[0][1, 3] = np.nan
        args[0][2, :3] = args[0][2, 4]  # ties: sorting must be stable
    if name == "argmax" and np.dtype(dtype).kind == "f":
        args[0][2, 5] = np.nan
    tol = 5e-2 if name in ("cumsum", "reduce") and dtype == np.float16 else None
    eager_and_jit(kfn, nfn, *args, tol=tol)


# ---------------------------------------------------------------- functions, edge shapes

FLOAT_CASES = {
    "reshape": (lambda a: (a.reshape(-1, 2), knp.ravel(a), a.flatten(), knp.reshape(a, (2, 1, -1))), (3, 4)),
    "transpose": (lambda a: (a.T, knp.swapaxes(a, 0, 2), knp.moveaxis(a, 0, -1), a.transpose(1, 0, 2)), (2, 3, 4)),
    "expand_squeeze": (lambda a: (knp.expand_dims(a, (0, 3)), knp.squeeze(a[:, None]), a.squeeze(0)), (1, 3)),
    "broadcast_to": (lambda a: knp.broadcast_to(a, (2, 3, 4)), (3, 1)),
    "hstack_vstack": (lambda a: (knp.hstack([a, a]), knp.vstack([a[0], a[1]]), knp.hstack([a[0], a[1]])), (2, 3)),
    "split": (lambda a: tuple(knp.split(a, 2, axis=1)) + tuple(knp.split(a, [1, -1])) + tuple(knp.array_split(a, 3, axis=1)), (3, 4)),
    "pad_modes": (lambda a: (knp.pad(a, ((1, 2), (2, 1)), mode="reflect"), knp.pad(a, 1, mode="symmetric"), knp.pad(a, (1, 2), mode="wrap"), knp.pad(a, ((1, 0), (2, 1)), constant_values=((7, 8), (9, 10)))), (3, 4)),
    "roll_flip": (lambda a: (knp.roll(a, (1, -2), (0, 1)), knp.flip(a, (0, 2)), knp.fliplr(a[0]), knp.flipud(a)), (2, 3, 4)),
    "reductions": (lambda a: (a.sum(axis=(0, 2)), a.prod(1), a.mean(axis=-1, keepdims=True), a.var(0, ddof=1), a.std(), knp.max(a, axis=(1, 2)), a.min(keepdims=True)), (2, 3, 4)),
    "cum": (lambda a: (a.cumsum(), a.cumprod(axis=2), knp.cumsum(a, 1, dtype=np.float32)), (2, 3, 4)),
    "linalg": (lambda a: (knp.vdot(a, a), knp.inner(a, a), knp.outer(a[0], a[1]), knp.tensordot(a, a.T, 1), knp.trace(a), knp.diag(a[0], 1), knp.diag(a, -1), a @ a.T), (3, 3)),
    "einsum": (lambda a: (knp.einsum("ij,jk->ik", a, a), knp.einsum("ii", a), knp.einsum("ij->j", a), knp.einsum("bi,bj->bij", a, a), knp.einsum("...i,i", a, a[0])), (3, 3)),
    "getitem_mix": (lambda a: (a[[0, 2], :, [1, 3]], a[:, [0, 1], [2, 3]], a[1, ..., None, ::2], a[a[:, :, 0] > 0.0] if False else a[np.array([[True, False, True], [False, True, True]])], a[-1:0:-1, 1], a[()]), (2, 3, 4)),
    "edge_empty": (lambda a: (a[:, :0], knp.concatenate([a, a[:0]]), knp.sort(a[:0], axis=0), knp.cumsum(a[:, :0], axis=1), knp.sum(a[:0], axis=0), knp.prod(a[:0], axis=0), knp.all(a[:0]), knp.any(a[:0], axis=0)), (3, 4)),
    "edge_scalar": (lambda a: (a[()], knp.reshape(a, (1, 1)), knp.expand_dims(a, 0), knp.ravel(a), knp.sum(a), knp.argmax(a), knp.tile(a, 3), knp.atleast_2d(a)), ()),
    "size_one": (lambda a: (knp.sort(a, axis=1), knp.cumsum(a, axis=1), knp.argmax(a, axis=0), a[:, 0], knp.flip(a), knp.pad(a, 1, mode="edge")), (4, 1)),
}

NP = {
    "reshape": lambda a: (a.reshape(-1, 2), np.ravel(a), a.flatten(), np.reshape(a, (2, 1, -1))),
    "transpose": lambda a: (a.T, np.swapaxes(a, 0, 2), np.moveaxis(a, 0, -1), a.transpose(1, 0, 2)),
    "expand_squeeze": lambda a: (np.expand_dims(a, (0, 3)), np.squeeze(a[:, None]), a.squeeze(0)),
    "broadcast_to": lambda a: np.broadcast_to(a, (2, 3, 4)),
    "hstack_vstack": lambda a: (np.hstack([a, a]), np.vstack([a[0], a[1]]), np.hstack([a[0], a[1]])),
    "split": lambda a: tuple(np.split(a, 2, axis=1)) + tuple(np.split(a, [1, -1])) + tuple(np.array_split(a, 3, axis=1)),
    "pad_modes": lambda a: (np.pad(a, ((1, 2), (2, 1)), mode="reflect"), np.pad(a, 1, mode="symmetric"), np.pad(a, (1, 2), mode="wrap"), np.pad(a, ((1, 0), (2, 1)), constant_values=((7, 8), (9, 10)))),
    "roll_flip": lambda a: (np.roll(a, (1, -2), (0, 1)), np.flip(a, (0, 2)), np.fliplr(a[0]), np.flipud(a)),
    "reductions": lambda a: (a.sum(axis=(0, 2)), a.prod(1), a.mean(axis=-1, keepdims=True), a.var(0, ddof=1), a.std(), np.max(a, axis=(1, 2)), a.min(keepdims=True)),
    "cum": lambda a: (a.cumsum(), a.cumprod(axis=2), np.cumsum(a, 1, dtype=np.float32)),
    "linalg": lambda a: (np.vdot(a, a), np.inner(a, a), np.outer(a[0], a[1]), np.tensordot(a, a.T, 1), np.trace(a), np.diag(a[0], 1), np.diag(a, -1), a @ a.T),
    "einsum": lambda a: (np.einsum("ij,jk->ik", a, a), np.einsum("ii", a), np.einsum("ij->j", a), np.einsum("bi,bj->bij", a, a), np.einsum("...i,i", a, a[0])),
    "getitem_mix": lambda a: (a[[0, 2], :, [1, 3]] if False else a[[0, 1], :, [1, 3]], a[:, [0, 1], [2, 3]], a[1, ..., None, ::2], a[np.array([[True, False, True], [False, True, True]])], a[-1:0:-1, 1], a[()]),
    "edge_empty": lambda a: (a[:, :0], np.concatenate([a, a[:0]]), np.sort(a[:0], axis=0), np.cumsum(a[:, :0], axis=1), np.sum(a[:0], axis=0), np.prod(a[:0], axis=0), np.all(a[:0]), np.any(a[:0], axis=0)),
    "edge_scalar": lambda a: (a[()], np.reshape(a, (1, 1)), np.expand_dims(a, 0), np.ravel(a), np.sum(a), np.argmax(a), np.tile(a, 3), np.atleast_2d(a)),
    "size_one": lambda a: (np.sort(a, axis=1), np.cumsum(a, axis=1), np.argmax(a, axis=0), a[:, 0], np.flip(a), np.pad(a, 1, mode="edge")),
}
FLOAT_CASES["getitem_mix"] = (lambda a: (a[[0, 1], :, [1, 3]], a[:, [0, 1], [2, 3]], a[1, ..., None, ::2], a[np.array([[True, False, True], [False, True, True]])], a[-1:0:-1, 1], a[()]), (2, 3, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_functions(name, dtype):
    kfn, shape = FLOAT_CASES[name]
    eager_and_jit(kfn, NP[name], data(shape, dtype), tol=1e-4 if dtype == np.float32 else None)


def test_creation():
    eager_and_jit(lambda x: (knp.arange(5) + x.astype(np.int64), knp.arange(1, 9, 3), knp.arange(0.5, 2.0, 0.25, dtype=np.float32),
                    knp.linspace(0, 1, 5), knp.linspace(2, 3, 4, endpoint=False, dtype=np.float32), knp.eye(3, 4, k=1),
                    knp.identity(2, dtype=np.int32), knp.zeros((2, 0)), knp.ones_like(x), knp.full((2,), 3, np.int8), knp.empty(3)),
         lambda x: (np.arange(5) + x.astype(np.int64), np.arange(1, 9, 3), np.arange(0.5, 2.0, 0.25, dtype=np.float32),
                    np.linspace(0, 1, 5), np.linspace(2, 3, 4, endpoint=False, dtype=np.float32), np.eye(3, 4, k=1),
                    np.identity(2, dtype=np.int32), np.zeros((2, 0)), np.ones_like(x), np.full((2,), 3, np.int8), np.zeros(3)),
         np.arange(5.0))
    check_like_numpy(kiln.jit(lambda s: knp.linspace(s, 2 * s, 3))(np.float64(1.5)), np.linspace(1.5, 3.0, 3))


def test_traced_indices_clamp_and_drop():
    """Traced out-of-range indices: reads clamp, .at[] updates drop (JAX); negatives wrap once."""
    x = np.arange(10.0)
    f = kiln.jit(lambda x, i: (x[i], x[knp.stack([i, i - 1])], x.at[i].set(-1.0), x.at[knp.stack([i, 2])].add(5.0), x[i:][:2] if False else x[1:][i]))
    for i in (3, -2, 12, -15):
        got = f(x, np.int32(i))
        j = min(max(i + 10 if i < 0 else i, 0), 9)
        j1 = min(max((i - 1) + 10 if i - 1 < 0 else i - 1, 0), 9)
        inside = -10 <= i < 10
        want_set = x.copy()
        want_add = x.copy()
        if inside:
            want_set[i] = -1.0
            want_add[i] += 5.0
        want_add[2] += 5.0
        check_like_numpy(got[0], x[j])
        check_like_numpy(got[1], x[[j, j1]])
        check_like_numpy(got[2], want_set)
        check_like_numpy(got[3], want_add)
        check_like_numpy(got[4], x[1:][min(max(i + 9 if i < 0 else i, 0), 8)])
    with pytest.raises(IndexError):
        knp.take(x, np.array([10]))
    with pytest.raises(IndexError):
        kiln.jit(lambda x: x[10])(x)


def test_at_duplicates_and_methods():
    x = data((5,))
    idx = np.array([1, 3, 1, 1])
    u = data((4,))
    eager_and_jit(lambda x, u: (knp.at(x)[idx].add(u), knp.at(x)[idx].multiply(u), knp.at(x)[idx].min(u), knp.at(x)[idx].get(), knp.at(x)[2:].set(0.0)),
         lambda x, u: (_ufunc_at(np.add, x, idx, u), _ufunc_at(np.multiply, x, idx, u), _ufunc_at(np.minimum, x, idx, u), x[idx], np.concatenate([x[:2], np.zeros(3)])),
         x, u)


def _ufunc_at(f, x, idx, u):
    out = x.copy()
    f.at(out, idx, u)
    return out


def test_errors():
    f = kiln.jit(lambda x, m: x[m])
    with pytest.raises(IndexingError, match="knp.where"):
        f(np.ones(3), np.ones(3, bool))
    with pytest.raises(TypeError, match=r"\.at\[idx\]\.set"):
        kiln.jit(lambda x: x.__setitem__(0, 1.0))(np.ones(3))
    with pytest.raises(TypeError, match="concrete"):
        kiln.jit(lambda n: knp.arange(n))(np.int32(3))
    with pytest.raises(TypeError, match="repeats"):
        kiln.jit(lambda x, r: knp.repeat(x, r))(np.ones(3), np.int32(2))
    with pytest.raises(ValueError, match="equal division"):
        knp.split(np.ones(5), 2)
    with pytest.raises(ValueError, match="empty sequence"):
        knp.argmax(np.ones((0, 2)), axis=0)


# ---------------------------------------------------------------- gradients (float64, central differences)

GRAD_CASES = {
    "slice_rev": lambda x: x[1:, ::-2],
    "pad": lambda x: knp.pad(x, ((1, 2), (0, 1)), constant_values=3.0),
    "pad_interior": lambda x: kiln.lax.structural_prims.pad(x, 0.0, ((1, -1, 2), (-1, 2, 1))),
    "concat": lambda x: knp.concatenate([x, 2 * x[:, :1]], axis=1),
    "gather": lambda x: x[np.array([2, 0, 2]), 1:],
    "take_along": lambda x: knp.take_along_axis(x, np.array([[3, 0], [1, 1], [2, 3]]), axis=1),
    "at_set": lambda x: knp.at(x)[np.array([0, 2]), 1].set(x[1, :2] * 3.0),
    "at_add": lambda x: knp.at(x)[np.array([0, 0, 2]), 1:3].add(x[1, 1:3] ** 2),
    "at_max": lambda x: knp.at(x)[1].max(x[0] * 2.0),
    "at_mul": lambda x: knp.at(x)[:, 0].multiply(3.0),
    "dynamic_slice": lambda x: kiln.lax.structural_prims.dynamic_slice(x, (np.int32(1), np.int32(5)), (2, 2)),
    "dynamic_update_slice": lambda x: kiln.lax.structural_prims.dynamic_update_slice(x, x[:2, :2] * x[1:, 2:], (np.int32(1), np.int32(1))),
    "sort": lambda x: knp.sort(x, axis=0) * np.arange(12.0).reshape(3, 4),
    "cumsum": lambda x: knp.cumsum(x, axis=1) + kiln.lax.structural_prims.cumsum_p.bind(x, axis=0, reverse=True),
    "cumprod": lambda x: knp.cumprod(x, axis=1),
    "cummax": lambda x: kiln.lax.structural_prims.cummax_p.bind(x, axis=1, reverse=False) + kiln.lax.structural_prims.cummin_p.bind(x, axis=0, reverse=True),
    "prod": lambda x: knp.prod(x, axis=1) + knp.prod(knp.at(x)[0, 0].set(0.0)),
    "var_std": lambda x: knp.var(x, axis=0) + knp.std(x, ddof=1),
    "einsum_trace": lambda x: knp.einsum("ij,kj->ik", x, x) + knp.trace(x[:, :3]) + knp.diag(x[0, :3]),
    "roll_tile": lambda x: knp.tile(knp.roll(x, 1, axis=1), (1, 2)),
    "triu": lambda x: knp.triu(x, 1) * knp.tril(x),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_grad_matches_finite_differences(name):
    fn = GRAD_CASES[name]
    x = data((3, 4))
    out_shape = np.shape(fn(x))
    w = data(out_shape)

    def loss(x):
        return knp.sum(fn(x) * w)

    got = kiln.grad(loss)(x)
    want = numerical_grad(lambda v: float(np.sum(np.asarray(fn(v)) * w)), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    if name in ("gather", "at_add", "sort", "cumprod", "pad_interior", "concat", "prod"):
        np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(x), want, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- vmap against a Python loop

VMAP_CASES = {
    "slice_pad_rev": (lambda x, i: knp.pad(x[1:, ::-1], 1), (0, None)),
    "concat": (lambda x, i: knp.concatenate([x, x * 2.0], axis=0), (0, None)),
    "getitem_traced_int": (lambda x, i: x[i], (0, 0)),
    "getitem_unbatched_x": (lambda x, i: x[i, 1:], (None, 0)),
    "gather_both": (lambda x, i: x[:, knp.stack([i, i - 1])], (0, 0)),
    "at_set_both": (lambda x, i: knp.at(x)[i].set(x[0] * 2.0), (0, 0)),
    "at_add_unbatched_idx": (lambda x, i: knp.at(x)[np.array([1, 1])].add(1.0), (0, None)),
    "dynamic_slice_batched_start": (lambda x, i: kiln.lax.structural_prims.dynamic_slice(x, (i, np.int32(1)), (2, 2)), (0, 0)),
    "dus_batched_start": (lambda x, i: kiln.lax.structural_prims.dynamic_update_slice(x, x[:1, :2] + 1.0, (i, i)), (0, 0)),
    "dynamic_slice_x_only": (lambda x, i: kiln.lax.structural_prims.dynamic_slice(x, (i, np.int32(1)), (2, 2)), (0, None)),
    "sort_argsort": (lambda x, i: (knp.sort(x, axis=0), knp.argsort(x, axis=1)), (0, None)),
    "cum_arg": (lambda x, i: (knp.cumsum(x, axis=1), knp.cumprod(x, axis=0), knp.argmax(x, axis=0), knp.argmin(x)), (0, None)),
    "prod_all": (lambda x, i: (knp.prod(x, axis=1), knp.all(x > 0)), (0, None)),
}


@pytest.mark.parametrize("name", sorted(VMAP_CASES))
def test_vmap_matches_loop(name):
    fn, in_axes = VMAP_CASES[name]
    xs = data((5, 3, 4)) if in_axes[0] == 0 else data((3, 4))
    idx = np.array([0, 2, -1, 1, -3], np.int32) if in_axes[1] == 0 else np.int32(1)
    got = kiln.vmap(fn, in_axes=in_axes)(xs, idx)
    loops = [fn(xs[k] if in_axes[0] == 0 else xs, idx[k] if in_axes[1] == 0 else idx) for k in range(5)]
    if isinstance(loops[0], tuple):
        want = tuple(np.stack([l[j] for l in loops]) for j in range(len(loops[0])))
    else:
        want = np.stack(loops)
    check_like_numpy(got, want)
    if name in ("gather_both", "at_set_both", "dynamic_slice_batched_start", "sort_argsort"):
        check_like_numpy(kiln.jit(kiln.vmap(fn, in_axes=in_axes))(xs, idx), want)


def test_grad_of_vmap_and_vmap_of_grad():
    x = data((4, 5))
    f = lambda v: knp.sum(knp.sort(v) * np.arange(5.0)) + knp.sum(knp.cumprod(v[::-1]))  # noqa: E731
    per_row = kiln.vmap(kiln.grad(f))(x)
    want = np.stack([numerical_grad(lambda v: float(np.sum(np.sort(v) * np.arange(5.0)) + np.sum(np.cumprod(v[::-1]))), r) for r in x])
    np.testing.assert_allclose(per_row, want, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- compiled kernels and fusion

def test_slice_and_rev_fuse_into_elementwise_kernels():
    from kiln.compiler.fusion import partition
    from kiln.compiler.passes import optimize
    from kiln.core.aval import ShapedArray
    from kiln.core.trace import trace_to_graph

    g = trace_to_graph(lambda x: [knp.exp(x[1:, ::-1]) + x[:-1, 2::-1].T.T], [ShapedArray((8, 3), np.float32)])
    plan = partition(optimize(g))
    assert [s.kind for s in plan.steps] == ["elementwise"]


def test_large_sort_cumsum_argmax_compiled():
    x = data((3, 5000), np.float32)
    x[1, ::7] = x[1, 3]  # many ties
    eager_and_jit(lambda x: (knp.sort(x), knp.argsort(x), knp.argmax(x, axis=1), knp.cumsum(x[:, :100], axis=1)),
         lambda x: (np.sort(x, kind="stable"), np.argsort(x, kind="stable"), np.argmax(x, axis=1), np.cumsum(x[:, :100], axis=1)), x, tol=1e-4)


# ---------------------------------------------------------------- an exported Program run by kiln-run

class Structural(Program, export_name="structural"):
    _table = np.arange(12, dtype=np.float32).reshape(3, 4)

    def run(self, x=Program.like(np.zeros((3, 4), np.float32)), i=Program.like(np.int32(0))):
        y = knp.concatenate([x, self._table[::-1]], axis=0)
        z = knp.pad(y[:, 1:], ((0, 1), (1, 0)))
        s = knp.sort(x, axis=1)
        upd = x.at[i].add(1.0)
        return z, s, knp.argmax(x, axis=0), knp.cumsum(x, axis=1), x[i], upd, knp.einsum("ij,kj->ik", x, x)


def _structural_reference(x, i):
    t = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.concatenate([x, t[::-1]], axis=0)
    upd = x.copy()
    upd[i] += 1.0
    return (np.pad(y[:, 1:], ((0, 1), (1, 0))), np.sort(x, axis=1), np.argmax(x, axis=0), np.cumsum(x, axis=1), x[i], upd,
            np.einsum("ij,kj->ik", x, x))


def test_program_interactive_and_kiln_run(tmp_path):
    m = Structural()
    x = data((3, 4), np.float32)
    check_like_numpy(m.run(x, np.int32(2)), _structural_reference(x, 2), tol=1e-5)
    path = tmp_path / "structural.vmfb"
    Program.get_compiled_artifact(Structural).save(path)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "i.npy", np.int32(1))
    outs = [tmp_path / f"o{k}.npy" for k in range(7)]
    run_kiln_run(f"--module={path}", "--function=run", f"--input=@{tmp_path / 'x.npy'}", f"--input=@{tmp_path / 'i.npy'}",
                 *[f"--output=@{o}" for o in outs])
    check_like_numpy([np.load(o) for o in outs], _structural_reference(x, 1), tol=1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.bool_, np.float32], ids=lambda d: np.dtype(d).name)
def test_einsum_summing_an_operand_index_keeps_its_dtype(dtype):
    """numpy's einsum keeps the operands' dtype when it sums out a label (int8 wraps, bool is logical or)."""
    a = (np.arange(12).reshape(3, 4) * 20 - 100).astype(dtype)
    b = (np.arange(4) * 30).astype(dtype)
    for spec, args in (("ij->i", (a,)), ("ij->", (a,)), ("ij,k->i", (a, b)), ("ij,j->i", (a, b)), ("ii->", (a[:3, :3],))):
        eager_and_jit(lambda *x, spec=spec: knp.einsum(spec, *x), lambda *x, spec=spec: np.einsum(spec, *x), *args)
