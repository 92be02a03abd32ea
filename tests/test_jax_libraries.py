"""JAX's small libraries that published programs import, under kiln's names: kiln.flatten_util (ravel_pytree),
kiln.example_libraries.optimizers and kiln.example_libraries.stax. References are numpy formulas written here
(JAX is not a test dependency); one exported training step (stax + optimizers + ravel_pytree) runs in kiln-run."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.example_libraries import optimizers, stax
from kiln.flatten_util import ravel_pytree
from kiln_tools import kiln_run_exported

RNG = np.random.default_rng(7)


# ravel_pytree

def test_ravel_pytree_mixed_dtypes_round_trip():
    tree = {"a": RNG.standard_normal((2, 3)).astype(np.float32), "b": (np.int32(3), np.ones(2, np.float16)),
            "c": None, "d": [np.arange(4, dtype=np.float32).reshape(2, 2, 1)]}
    flat, unravel = ravel_pytree(tree)
    want = np.concatenate([tree["a"].ravel(), [3.0], [1.0, 1.0], np.arange(4.0)])
    assert flat.shape == (13,) and flat.dtype == np.result_type(np.float32, np.int32, np.float16)
    np.testing.assert_array_equal(np.asarray(flat), want)
    back = unravel(flat)
    assert kiln.tree.structure(back) == kiln.tree.structure(tree)
    for got, leaf in zip(kiln.tree_leaves(back), kiln.tree_leaves(tree)):
        assert got.shape == np.shape(leaf) and got.dtype == np.asarray(leaf).dtype
        np.testing.assert_array_equal(np.asarray(got), leaf)
    assert unravel == ravel_pytree(tree)[1] and hash(unravel) == hash(ravel_pytree(tree)[1])
    with pytest.raises(TypeError, match="unravel function given array of dtype float32, but expected dtype float64"):
        unravel(flat.astype(np.float32))
    with pytest.raises(ValueError, match=r"expected a 1-D array of 13 elements \(the raveled tree\), got shape \(12,\)"):
        unravel(flat[:12])


def test_ravel_pytree_empty_and_single_dtype():
    flat, unravel = ravel_pytree({"x": None, "y": ()})
    assert flat.shape == (0,) and flat.dtype == np.float32 and unravel(flat) == {"x": None, "y": ()}
    tree = (np.ones((2, 2), np.float32), np.zeros(3, np.float32))
    flat, unravel = ravel_pytree(tree)
    assert flat.dtype == np.float32 and flat.shape == (7,)
    # one dtype: unravel keeps the dtype it is given (JAX's dtype-polymorphic unravel)
    assert [x.dtype for x in unravel(knp.zeros(7, np.float64))] == [np.float64, np.float64]


# optimizers: numpy references of the update rules (JAX's formulas), two steps

def _np_steps(name, x, grads, lr):
    state = {}
    for i, g in enumerate(grads):
        if name == "sgd":
            x = x - lr * g
        elif name in ("momentum", "nesterov"):
            v = 0.9 * state.get("v", 0) + g
            state["v"] = v
            x = x - lr * (v if name == "momentum" else 0.9 * v + g)
        elif name == "adagrad":
            gsq = state.get("gsq", 0) + g * g
            m = 0.1 * g / np.sqrt(gsq) + 0.9 * state.get("m", 0)
            state.update(gsq=gsq, m=m)
            x = x - lr * m
        elif name in ("rmsprop", "rmsprop_momentum"):
            avg = 0.9 * state.get("avg", 0) + 0.1 * g * g
            state["avg"] = avg
            if name == "rmsprop":
                x = x - lr * g / np.sqrt(avg + 1e-8)
            else:
                state["mom"] = 0.9 * state.get("mom", 0) + lr * g / np.sqrt(avg + 1e-8)
                x = x - state["mom"]
        elif name in ("adam", "adamax"):
            m = 0.1 * g + 0.9 * state.get("m", 0)
            if name == "adam":
                v = 0.001 * g * g + 0.999 * state.get("v", 0)
                x = x - lr * (m / (1 - 0.9 ** (i + 1))) / (np.sqrt(v / (1 - 0.999 ** (i + 1))) + 1e-8)
            else:
                v = np.maximum(0.999 * state.get("v", 0), np.abs(g))
                x = x - lr / (1 - 0.9 ** (i + 1)) * m / (v + 1e-8)
            state.update(m=m, v=v)
        elif name == "sm3":  # x is 2-D: a row and a column accumulator
            rows, cols = state.get("rows", np.zeros(x.shape[0])), state.get("cols", np.zeros(x.shape[1]))
            acc = np.minimum(rows[:, None], cols[None, :]) + g * g
            m = 0.1 * g / np.sqrt(acc) + 0.9 * state.get("m", 0)
            state.update(rows=acc.max(1), cols=acc.max(0), m=m)
            x = x - lr * m
    return x


@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "adagrad", "rmsprop", "rmsprop_momentum", "adam",
                                  "adamax", "sm3"])
def test_optimizer_matches_numpy(name):
    params = {"w": RNG.standard_normal((3, 4)), "b": RNG.standard_normal((3, 4))}
    grads = [{k: np.sin((i + 1) * v) for k, v in params.items()} for i in range(2)]
    args = (0.1, 0.9) if name in ("momentum", "nesterov") else (0.1,)
    init, update, get_params = getattr(optimizers, name)(*args)
    state = init(params)
    for i, g in enumerate(grads):
        state = update(i, g, state)
    got = get_params(state)
    for k in params:
        np.testing.assert_allclose(np.asarray(got[k]), _np_steps(name, params[k], [g[k] for g in grads], 0.1),
                                   rtol=1e-12, atol=1e-13)


def test_optimizer_state_tree_and_errors():
    init, update, get_params = optimizers.momentum(optimizers.exponential_decay(0.5, 2, 0.1), 0.9)
    params = (np.ones(3), {"z": np.zeros((2,))})
    state = init(params)
    assert len(kiln.tree_leaves(state)) == 4  # (x, velocity) for each of two leaves
    marked = optimizers.unpack_optimizer_state(state)
    assert isinstance(marked[0], optimizers.JoinPoint)
    again = optimizers.pack_optimizer_state(marked)
    assert kiln.tree.structure(again) == kiln.tree.structure(state)
    with pytest.raises(TypeError, match="optimizer update function was passed a gradient tree that did not match"):
        update(0, (np.ones(3),), state)
    with pytest.raises(TypeError, match="every leaf must be a JoinPoint"):
        optimizers.pack_optimizer_state([np.ones(2)])
    with pytest.raises(ValueError, match="boundaries length must be one shorter than values length"):
        optimizers.piecewise_constant([1, 2], [0.1, 0.2])


def test_schedules_and_clipping():
    steps = np.arange(6.0)
    np.testing.assert_allclose([optimizers.exponential_decay(0.5, 2, 0.1)(i) for i in steps], 0.5 * 0.1 ** (steps / 2))
    np.testing.assert_allclose([optimizers.inverse_time_decay(1.0, 2, 0.5, staircase=True)(i) for i in steps],
                               1 / (1 + 0.5 * np.floor(steps / 2)))
    np.testing.assert_allclose([optimizers.polynomial_decay(1.0, 4, 0.2, 2.0)(i) for i in steps],
                               (1 - np.minimum(steps, 4) / 4) ** 2 * 0.8 + 0.2)
    np.testing.assert_allclose([optimizers.piecewise_constant([1, 3], [1.0, 0.5, 0.1])(i) for i in steps],
                               [1.0, 1.0, 0.5, 0.5, 0.1, 0.1])
    tree = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}
    assert float(optimizers.l2_norm(tree)) == 5.0
    clipped = optimizers.clip_grads(tree, 1.0)
    np.testing.assert_allclose(np.asarray(clipped["a"]), [0.6, 0.0])
    np.testing.assert_allclose(np.asarray(optimizers.clip_grads(tree, 10.0)["b"]), [[4.0]])


# stax: shapes from init, the forward pass against numpy, a gradient against finite differences

def _np_conv_same(x, w):  # NHWC x HWIO, stride 1, SAME
    kh, kw = w.shape[:2]
    xp = np.pad(x, ((0, 0), (kh // 2, (kh - 1) // 2), (kw // 2, (kw - 1) // 2), (0, 0)))
    out = np.zeros(x.shape[:3] + (w.shape[3],))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,co->nhwo", xp[:, i:i + x.shape[1], j:j + x.shape[2]], w[i, j])
    return out


def _net():
    return stax.serial(stax.Conv(4, (3, 3), padding="SAME"), stax.BatchNorm(), stax.Relu,
                       stax.AvgPool((2, 2), (2, 2), padding="SAME"), stax.MaxPool((2, 2)), stax.Flatten,
                       stax.FanOut(2), stax.parallel(stax.Dense(5), stax.Dense(5)), stax.FanInSum, stax.LogSoftmax)


def test_stax_network_matches_numpy_and_gradient():
    init, apply = _net()
    out_shape, params = init(kiln.random.PRNGKey(1), (2, 7, 6, 3))
    assert tuple(out_shape) == (2, 5)
    params = kiln.tree_map(lambda p: np.asarray(p, np.float64), params)
    x = np.sin(np.arange(2 * 7 * 6 * 3, dtype=np.float64)).reshape(2, 7, 6, 3)
    (w, b), (beta, gamma) = params[0], params[1]
    h = _np_conv_same(x, w) + b
    h = gamma * (h - h.mean((0, 1, 2))) / np.sqrt(h.var((0, 1, 2)) + 1e-5) + beta
    h = np.maximum(h, 0)
    # AvgPool 2x2/2 SAME on 7x6: 4x3 windows, the last row of windows covers one input row
    hp = np.pad(h, ((0, 0), (0, 1), (0, 0), (0, 0)))
    counts = np.pad(np.ones((7, 6)), ((0, 1), (0, 0))).reshape(4, 2, 3, 2).sum((1, 3))
    h = hp.reshape(2, 4, 2, 3, 2, 4).sum((2, 4)) / counts[None, :, :, None]
    # MaxPool 2x2 stride 1 VALID: 4x3 -> 3x2
    h = np.maximum(np.maximum(h[:, :-1, :-1], h[:, 1:, :-1]), np.maximum(h[:, :-1, 1:], h[:, 1:, 1:]))
    h = h.reshape(2, -1)
    logits = h @ params[7][0][0] + params[7][0][1] + h @ params[7][1][0] + params[7][1][1]
    want = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(apply(params, x)), want, rtol=1e-10, atol=1e-12)

    loss = lambda p: knp.sum(apply(p, x)[:, 2])
    grad = kiln.grad(loss)(params)
    w0 = params[0][0]
    for idx in [(0, 0, 0, 0), (1, 2, 1, 3)]:
        e = np.zeros_like(w0)
        e[idx] = 1e-6
        plus = [(w0 + e, params[0][1])] + list(params[1:])
        minus = [(w0 - e, params[0][1])] + list(params[1:])
        fd = (float(loss(plus)) - float(loss(minus))) / 2e-6
        np.testing.assert_allclose(float(grad[0][0][idx]), fd, rtol=1e-5, atol=1e-7)


def test_stax_layers_shapes_and_dropout():
    key = kiln.random.PRNGKey(0)
    init, apply = stax.serial(stax.Conv1DTranspose(3, (2,), strides=(2,)), stax.Tanh)
    shape, params = init(key, (1, 5, 2))
    assert tuple(shape) == (1, 10, 3) and apply(params, np.ones((1, 5, 2), np.float32)).shape == (1, 10, 3)
    init, apply = stax.serial(stax.FanOut(2), stax.parallel(stax.Identity, stax.Dense(2)), stax.FanInConcat())
    shape, params = init(key, (4, 3))
    assert tuple(shape) == (4, 5)
    _, apply = stax.Dropout(0.5)
    with pytest.raises(ValueError, match="Dropout layer requires apply_fun to be called with a PRNG key"):
        apply((), np.ones(4))
    kept = np.asarray(apply((), np.ones(1000, np.float32), rng=key))
    assert set(np.unique(kept)) == {0.0, 2.0} and 400 < (kept > 0).sum() < 600
    np.testing.assert_array_equal(np.asarray(stax.Dropout(0.5, mode="test")[1]((), np.ones(3), rng=key)), 1.0)


# one training step through all three: eager, kiln.jit and the exported module in kiln-run

def test_train_step_jit_and_kiln_run(tmp_path):
    init, apply = stax.serial(stax.Dense(6), stax.Relu, stax.Dense(3), stax.LogSoftmax)
    _, params = init(kiln.random.PRNGKey(3), (-1, 4))
    flat0, unravel = ravel_pytree(params)
    opt_init, opt_update, get_params = optimizers.adam(0.01)
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    labels = np.eye(3, dtype=np.float32)[[0, 2, 1, 1, 0]]

    state0 = opt_init(flat0)  # a pytree: the flat vector and adam's two moments
    treedef = kiln.tree.structure(state0)

    def step(flat, m, v, x, labels):
        state = kiln.tree.unflatten(treedef, [flat, m, v])
        loss = lambda f: -knp.mean(knp.sum(apply(unravel(f), x) * labels, -1))
        g = kiln.grad(loss)(get_params(state))
        new = opt_update(0, g, state)
        return tuple(new.packed_state[0])

    m0 = np.zeros_like(np.asarray(flat0))
    assert [np.asarray(a).tolist() for a in kiln.tree_leaves(state0)] == [np.asarray(flat0).tolist(), m0.tolist(), m0.tolist()]
    want = step(np.asarray(flat0), m0, m0, x, labels)
    jstep = kiln.jit(step)  # kiln_run_exported's kiln.jit(jstep) shares its compiled trace
    for got in (jstep(np.asarray(flat0), m0, m0, x, labels),
                kiln_run_exported(jstep, np.asarray(flat0), m0, m0, x, labels, tmp_path=tmp_path)):
        for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


# kiln.errors, kiln.dtypes, kiln.typing

def test_errors_under_jax_names():
    import kiln.errors as errors

    with pytest.raises(errors.TracerBoolConversionError, match="was used where Python needs a concrete value"):
        kiln.jit(lambda x: x if x > 0 else -x)(1.0)
    with pytest.raises(errors.TracerIntegerConversionError) as info:
        kiln.jit(lambda n: knp.zeros(3)[: int(n)])(2)
    assert isinstance(info.value, errors.ConcretizationTypeError) and isinstance(info.value, kiln.ConcretizationError)
    with pytest.raises(errors.TracerIntegerConversionError):
        kiln.jit(lambda n: list(range(n)))(2)
    with pytest.raises(errors.TracerArrayConversionError, match="was converted to a numpy array"):
        kiln.jit(lambda x: np.asarray(x))(np.ones(2))
    with pytest.raises(errors.NonConcreteBooleanIndexError, match="indexing with a traced boolean mask"):
        kiln.jit(lambda x: x[x > 0])(np.ones(3))
    assert issubclass(errors.ConcretizationTypeError, errors.JAXTypeError)
    assert issubclass(errors.NonConcreteBooleanIndexError, errors.JAXIndexError)


def test_dtypes_and_typing():
    from kiln import dtypes
    import kiln.typing

    assert dtypes.canonicalize_dtype("float64") == np.float64 and dtypes.canonicalize_dtype(np.int8) == np.int8
    with pytest.raises(TypeError, match="dtype <U3 is not supported by kiln"):
        dtypes.canonicalize_dtype("U3")
    assert dtypes.result_type(np.float32, 1.0) == np.float32
    assert dtypes.result_type(2.0, return_weak_type_flag=True) == (np.float64, True)
    assert dtypes.result_type(np.int8, np.float16, return_weak_type_flag=True) == (np.float16, False)
    assert [dtypes.scalar_type_of(x) for x in (np.ones(2, np.float32), 3, np.bool_(True), np.complex64(1))] == [
        float, int, bool, complex]
    assert dtypes.scalar_type_of(knp.ones(2, dtypes.bfloat16)) is float
    assert dtypes.itemsize_bits(dtypes.bfloat16) == 16 and dtypes.itemsize_bits(np.float64) == 64
    assert dtypes.issubdtype(dtypes.bfloat16, np.floating) and dtypes.finfo(dtypes.bfloat16).eps == 2.0 ** -7
    assert dtypes.iinfo(np.int8).min == -128 and dtypes.float0.itemsize == 0
    assert issubclass(dtypes.TypePromotionError, TypeError)

    def f(x: kiln.typing.ArrayLike, dtype: kiln.typing.DTypeLike = np.float32) -> kiln.Array:
        return knp.asarray(x, dtype)

    assert f(3).dtype == np.float32 and "ArrayLike" in kiln.typing.__all__


# top-level jax names (kiln.jax_api) and the module names custom_derivatives / ad_checkpoint

def test_top_level_jax_names():
    assert (kiln.process_count(), kiln.process_index(), kiln.process_indices()) == (1, 0, [0])
    aval = kiln.typeof(np.ones((2, 3), np.float32))
    assert aval.shape == (2, 3) and aval.dtype == np.float32
    assert kiln.float0 == kiln.dtypes.float0
    with kiln.enable_x64(True):
        assert kiln.config.jax_enable_x64 is True
    assert kiln.config.jax_enable_x64 is False
    with pytest.raises(ValueError):
        with kiln.debug_nans(True):
            pass
    assert "kiln:" in kiln.print_environment_info(return_string=True)

    a = RNG.standard_normal((3, 4))
    transpose = kiln.linear_transpose(lambda x, y: a @ x + 2.0 * y, np.zeros(4), np.zeros(3))
    ct = RNG.standard_normal(3)
    tx, ty = transpose(ct)
    np.testing.assert_allclose(np.asarray(tx), a.T @ ct, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ty), 2.0 * ct, rtol=1e-12)
    with pytest.raises(TypeError, match="the cotangent must have the output's structure and shapes"):
        transpose(np.ones(4))
    with pytest.raises(NotImplementedError, match="reduce_axes was removed from JAX"):
        kiln.linear_transpose(lambda x: 2.0 * x, np.zeros(3), reduce_axes=("batch",))

    @kiln.custom_gradient
    def clip_gradient(x, y):
        return x * y, lambda g: (knp.clip(g * y, -1.0, 1.0), g * x)

    x, y = np.array([0.5, 3.0]), np.array([4.0, 0.1])
    gx, gy = kiln.grad(lambda x, y: knp.sum(clip_gradient(x, y)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(gx), [1.0, 0.1])
    np.testing.assert_allclose(np.asarray(gy), x)
    from kiln.custom_derivatives import custom_gradient, custom_jvp, custom_vjp
    from kiln.ad_checkpoint import checkpoint, checkpoint_name, checkpoint_policies
    assert custom_jvp is kiln.custom_jvp and custom_vjp is kiln.custom_vjp and custom_gradient is kiln.custom_gradient
    assert checkpoint is kiln.checkpoint and checkpoint_name is kiln.checkpoint_name
    assert checkpoint_policies is kiln.checkpoint_policies
    from kiln.ad_checkpoint import Offloadable, Recompute, Saveable
    assert repr(Saveable) == "Saveable" and repr(Recompute) == "Recompute"
    assert Offloadable("device", "pinned_host").dst == "pinned_host"


def test_pmap_is_vmap_under_jit_and_clear_caches():
    pmapped = kiln.pmap(lambda x, scale: knp.sin(x) * scale, axis_name="i", static_broadcasted_argnums=1)
    x = RNG.standard_normal((3, 5))
    np.testing.assert_allclose(np.asarray(pmapped(x, 2.0)), np.sin(x) * 2.0, rtol=1e-12)
    assert pmapped._traces
    kiln.clear_caches()
    assert not pmapped._traces and not pmapped._executables
    with pytest.raises(ValueError, match="kiln has one device, the host CPU"):
        kiln.pmap(knp.sin, devices=["gpu0"])


# kiln.experimental.ode.odeint: a harmonic oscillator against its closed form; the adjoint gradients against
# the closed form's derivatives; eager, kiln.jit and the exported module in kiln-run

def _oscillator(state, t, w):
    return {"x": state["v"], "v": -w * w * state["x"]}


def test_odeint_solution_and_adjoint_gradients():
    from kiln.experimental.ode import odeint

    t = np.array([0.0, 0.4, 1.3, 2.0])
    w, x0, v0 = 1.7, np.array([1.0, -0.5]), np.array([0.3, 0.0])
    ys = odeint(_oscillator, {"x": x0, "v": v0}, t, w)
    wt = w * t[:, None]
    np.testing.assert_allclose(np.asarray(ys["x"]), x0 * np.cos(wt) + v0 / w * np.sin(wt), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(np.asarray(ys["v"]), -x0 * w * np.sin(wt) + v0 * np.cos(wt), rtol=1e-7, atol=1e-8)

    loss = lambda y0, t, w: knp.sum(odeint(_oscillator, y0, t, w)["x"])
    g_y0, g_t, g_w = kiln.grad(loss, argnums=(0, 1, 2))({"x": x0, "v": v0}, t, w)
    np.testing.assert_allclose(np.asarray(g_y0["x"]), np.full(2, np.cos(w * t).sum()), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g_y0["v"]), np.full(2, (np.sin(w * t) / w).sum()), rtol=1e-6)
    v_at = (-x0 * w * np.sin(wt) + v0 * np.cos(wt)).sum(1)  # d/dt_i of sum(x(t_i)), i >= 1
    np.testing.assert_allclose(np.asarray(g_t), np.concatenate([[-v_at[1:].sum()], v_at[1:]]), rtol=1e-6, atol=1e-8)
    d_dw = (-x0 * t[:, None] * np.sin(wt) - v0 / w ** 2 * np.sin(wt) + v0 / w * t[:, None] * np.cos(wt)).sum()
    np.testing.assert_allclose(float(g_w), d_dw, rtol=1e-6)
    with pytest.raises(ValueError, match="t must be a 1-D array of times"):
        odeint(_oscillator, {"x": x0, "v": v0}, np.ones((2, 2)), w)
    with pytest.raises(TypeError, match="rtol must be a Python or numpy number"):
        odeint(_oscillator, {"x": x0, "v": v0}, t, w, rtol=knp.asarray(1e-6))


def test_odeint_weak_y0_and_times_take_the_dynamics_dtype():
    """knp.array([1.0, 0.5]) and knp.linspace are weak float64 (numpy's default dtype standing in for JAX's
    float32): under float32 dynamics the solution is float32, as JAX's; under dynamics of weak values only it
    stays weak, so it does not widen the float32 it meets (the neural-ODE program's target)."""
    from kiln.experimental.ode import odeint

    y0, t = knp.array([1.0, 0.5]), knp.linspace(0.0, 1.0, 3)
    want = np.asarray([1.0, 0.5]) * np.exp(-2.0 * np.linspace(0.0, 1.0, 3))[:, None]
    ys = odeint(lambda y, t, w: -w * y, y0, t, np.float32(2.0), rtol=1e-6, atol=1e-6)
    assert ys.dtype == np.float32
    np.testing.assert_allclose(ys, want, rtol=2e-5)
    alone = odeint(lambda y, t: -2.0 * y, y0, t)
    assert alone.dtype == np.float64 and kiln.typeof(alone).weak_type
    np.testing.assert_allclose(alone, want, rtol=1e-7)
    assert (alone + np.float32(1)).dtype == np.float32


def test_odeint_jit_and_kiln_run(tmp_path):
    from kiln.experimental.ode import odeint

    def solve(x0, v0, t, w):
        ys = odeint(_oscillator, {"x": x0, "v": v0}, t, w, rtol=1e-6, atol=1e-6)
        return ys["x"], ys["v"]

    x0, v0 = np.array([1.0, 0.2, -0.4], np.float32), np.zeros(3, np.float32)
    t, w = np.linspace(0.0, 3.0, 7).astype(np.float32), np.float32(2.0)
    want = (x0 * np.cos(w * t[:, None]), -x0 * w * np.sin(w * t[:, None]))
    jsolve = kiln.jit(solve)
    for got in (jsolve(x0, v0, t, w), kiln_run_exported(jsolve, x0, v0, t, w, tmp_path=tmp_path)):
        for a, b in zip(got, want):
            assert np.asarray(a).dtype == np.float32
            np.testing.assert_allclose(np.asarray(a), b, rtol=2e-5, atol=2e-5)


# kiln.image: JAX's values recorded (jax.image.resize of a 1-D float64 signal, JAX 0.10.2 with x64), linear and
# area against numpy formulas, the scale_and_translate derivative against finite differences, one exported resize

_SIGNAL = np.array([0.0, 1.0, 4.0, 9.0, 16.0, 25.0])
_JAX_RESIZED = {
    ("cubic", 9, True): [-0.065789473684, 0.294117647059, 1.361111111111, 3.361111111111, 6.25, 10.027777777778,
                         14.694444444444, 21.176470588235, 25.592105263158],
    ("cubic", 4, True): [0.15857605178, 2.977029096478, 10.886676875957, 22.278317152104],
    ("cubic", 4, False): [0.124087591241, 3.0625, 10.5625, 23.445255474453],
    ("lanczos3", 9, True): [-6.579543498405e-03, 2.591687041565e-01, 1.325867028212, 3.437239840503, 6.25,
                            9.823953608826, 14.29775910030, 21.54278728606, 25.62936748488],
    ("lanczos3", 4, False): [0.059307638513, 3.147642670761, 10.243769532627, 23.634758887771],
    ("lanczos5", 4, True): [0.158225051613, 2.974618977897, 10.632343139335, 22.530420995263],
    ("cubic-pytorch", 4, False): [0.12109375, 2.828125, 10.796875, 23.20703125],
}


@pytest.mark.parametrize("method,size,antialias", sorted(_JAX_RESIZED))
def test_image_resize_matches_recorded_jax(method, size, antialias):
    from kiln import image

    got = image.resize(_SIGNAL, (size,), method, antialias=antialias)
    np.testing.assert_allclose(np.asarray(got), _JAX_RESIZED[method, size, antialias], rtol=1e-10, atol=1e-11)


def test_image_resize_formulas_and_errors():
    from kiln import image

    x = RNG.standard_normal((2, 6, 8, 3)).astype(np.float32)
    # linear upsampling: interpolation at the output pixel centres, clamped at the edges
    up = np.asarray(image.resize(x, (2, 6, 13, 3), "bilinear"))
    centres = (np.arange(13) + 0.5) * 8 / 13 - 0.5
    want = np.stack([np.interp(centres, np.arange(8), row) for row in x.transpose(0, 1, 3, 2).reshape(-1, 8)])
    np.testing.assert_allclose(up, want.reshape(2, 6, 3, 13).transpose(0, 1, 3, 2), rtol=1e-5, atol=1e-6)
    # area by an integer factor: block means
    np.testing.assert_allclose(np.asarray(image.resize(x, (2, 3, 4, 3), image.ResizeMethod.AREA)),
                               x.reshape(2, 3, 2, 4, 2, 3).mean((2, 4)), rtol=1e-5, atol=1e-6)
    # nearest: the input pixel whose cell holds the output pixel's centre
    idx = np.floor((np.arange(5) + 0.5) * 6 / 5).astype(int)
    np.testing.assert_array_equal(np.asarray(image.resize(x, (2, 5, 8, 3), "nearest")), x[:, idx])
    ints = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert image.resize(ints, (3, 4), "lanczos3").dtype == np.float32
    with pytest.raises(ValueError, match='Unknown resize method "bogus"'):
        image.resize(x, x.shape, "bogus")
    with pytest.raises(ValueError, match="shape must have length equal to the number of dimensions of x"):
        image.resize(x, (6, 8), "linear")
    with pytest.raises(ValueError, match="Nearest neighbor resampling is not currently supported"):
        image.scale_and_translate(x, x.shape, (1, 2), [1.0, 1.0], [0.0, 0.0], "nearest")


def test_image_scale_and_translate_gradient():
    from kiln import image

    x = RNG.standard_normal((7, 5))

    def f(scale, translation, img):
        return knp.sum(knp.sin(image.scale_and_translate(img, (9, 4), (0, 1), scale, translation, "cubic")))

    scale, translation = np.array([1.4, 0.7]), np.array([-0.3, 0.6])
    g_scale, g_translation, g_x = kiln.grad(f, argnums=(0, 1, 2))(scale, translation, x)
    for value, grad, args in ((scale, g_scale, lambda v: (v, translation, x)),
                              (translation, g_translation, lambda v: (scale, v, x))):
        for i in range(2):
            e = np.zeros(2)
            e[i] = 1e-6
            fd = (float(f(*args(value + e))) - float(f(*args(value - e)))) / 2e-6
            np.testing.assert_allclose(float(grad[i]), fd, rtol=1e-5, atol=1e-8)
    e = np.zeros_like(x)
    e[3, 2] = 1e-6
    fd = (float(f(scale, translation, x + e)) - float(f(scale, translation, x - e))) / 2e-6
    np.testing.assert_allclose(float(g_x[3, 2]), fd, rtol=1e-5, atol=1e-8)


def test_image_resize_kiln_run(tmp_path):
    from kiln import image

    x = RNG.standard_normal((1, 5, 6, 2)).astype(np.float32)
    fn = kiln.jit(lambda x: image.resize(x, (1, 8, 4, 2), "lanczos3"))
    want = np.asarray(image.resize(x, (1, 8, 4, 2), "lanczos3"))
    for got in (fn(x), kiln_run_exported(fn, x, tmp_path=tmp_path)[0]):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


# kiln.debug: prints eagerly and at run time in kiln.jit (nested jit, loop bodies: tests/test_debug_print.py); kiln.sharding's one-device meaning

def test_debug_print_eager_jit_and_nested(capsys):
    import kiln.debug

    def f(x, y):
        kiln.debug.print("x={x} total={}", knp.sum(y), x=x * 2)
        z = knp.sin(x)
        kiln.debug.callback(lambda v: print("callback", v.shape, v.dtype), z)
        return z + y

    x, y = np.arange(3.0), np.ones(3)
    f(x, y)
    eager = capsys.readouterr().out
    assert eager == "x=[0. 2. 4.] total=3.0\ncallback (3,) float64\n"
    jf = kiln.jit(f)
    for _ in range(2):  # the second call runs the cached executable and prints again
        np.testing.assert_allclose(np.asarray(jf(x, y)), np.sin(x) + 1.0)
        assert capsys.readouterr().out == eager
    nested = kiln.jit(lambda x: jf(x, x) * 2.0)
    np.testing.assert_allclose(np.asarray(nested(x)), (np.sin(x) + x) * 2.0)
    assert capsys.readouterr().out == "x=[0. 2. 4.] total=3.0\ncallback (3,) float64\n"

    def loop(c):
        def body(i, c):
            kiln.debug.print("c={}", c)
            return c + 1.0
        return kiln.lax.fori_loop(0, 3, body, c)

    assert float(kiln.jit(loop)(np.float32(1.0))) == 4.0  # printed by the VM's debug.print, each iteration
    assert capsys.readouterr().out == "c=1.0\nc=2.0\nc=3.0\n"
    with pytest.warns(UserWarning, match="breakpoint inside a traced function does nothing"):
        kiln.jit(lambda x: (kiln.debug.breakpoint(), x)[1])(1.0)


def test_sharding_on_one_device():
    from kiln.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    mesh = Mesh(np.array(kiln.devices()).reshape(1, 1), ("data", "model"))
    sharding = NamedSharding(mesh, PartitionSpec("data", None))
    assert mesh.shape == {"data": 1, "model": 1} and sharding.num_devices == 1 and sharding.is_fully_replicated
    assert sharding.shard_shape((4, 6)) == (4, 6) and SingleDeviceSharding().device == kiln.devices()[0]
    np.testing.assert_array_equal(np.asarray(kiln.device_put(np.ones(2), sharding)), np.ones(2))
    with pytest.raises(ValueError, match="'batch' is not an axis of Mesh"):
        NamedSharding(mesh, PartitionSpec("batch"))
    with pytest.raises(ValueError, match="kiln runs on one device, the host CPU; got a mesh of 2 devices"):
        Mesh(np.array(kiln.devices() * 2), ("data",))
    from kiln.sharding import make_single_device_sharding

    assert make_single_device_sharding(kiln.devices()[0]) == SingleDeviceSharding()
    seen = []
    kiln.debug.inspect_array_sharding({"a": np.ones(2)}, callback=seen.append)
    assert seen == [SingleDeviceSharding()]


def test_closure_convert_pure_callback_and_small_names():
    def outer(w):
        converted, consts = kiln.closure_convert(lambda x: knp.sin(w * x), 1.0)
        return converted(2.0, *consts), len(consts)

    value, n_consts = outer(3.0)
    assert n_consts == 0 and abs(float(value) - np.sin(6.0)) < 1e-6
    counts = []

    def traced(w):
        converted, consts = kiln.closure_convert(lambda x: knp.sin(w * x), 1.0)
        counts.append(len(consts))
        return converted(2.0, *consts)

    np.testing.assert_allclose(float(kiln.grad(traced)(3.0)), 2.0 * np.cos(6.0), rtol=1e-6)
    assert counts == [1]  # w, a value of the enclosing grad, is hoisted

    out = kiln.pure_callback(lambda x: np.cumsum(x), kiln.ShapeDtypeStruct((3,), np.float64), np.ones(3))
    np.testing.assert_array_equal(np.asarray(out), [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"the callback returned float64\[3\], expected float32\[3\]"):
        kiln.pure_callback(np.cumsum, kiln.ShapeDtypeStruct((3,), np.float32), np.ones(3))
    with pytest.raises(kiln.TracingError, match="pure_callback cannot run inside a traced function"):
        kiln.jit(lambda x: kiln.pure_callback(np.sin, x, x))(np.ones(2))
    assert kiln.effects_barrier() is None
    with kiln.default_device(kiln.devices()[0]):
        pass
    with pytest.raises(ValueError, match="kiln has one device, the host CPU"):
        with kiln.default_device("gpu:1"):
            pass


def test_fwd_and_bwd():
    a, w = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4))
    fwd, bwd = kiln.fwd_and_bwd(lambda x, w: (knp.tanh(x @ w), 7.0), argnums=(0, 1), has_aux=True, jitted=False)
    out, residuals, aux = fwd(a, w)
    np.testing.assert_allclose(np.asarray(out), np.tanh(a @ w), rtol=1e-12)
    ct = RNG.standard_normal((2, 4))
    g_a, g_w = bwd(residuals, ct)
    inner = ct * (1.0 - np.tanh(a @ w) ** 2)
    np.testing.assert_allclose(np.asarray(g_a), inner @ w.T, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(g_w), a.T @ inner, rtol=1e-10)
    assert aux == 7.0
    _, bwd_x = kiln.fwd_and_bwd(lambda x, w: x @ w, argnums=0, jitted=False)
    np.testing.assert_allclose(np.asarray(bwd_x((a, w), ct)), ct @ w.T, rtol=1e-12)


def test_ensure_compile_time_eval():
    def f(x):
        with kiln.ensure_compile_time_eval():
            n = int(knp.sum(knp.arange(4)))  # concrete inside the trace: steers Python
            weights = knp.cos(np.linspace(0.0, 1.0, n))
            doubled = x * 2.0  # a traced operand: traced as usual
        out = x
        for i in range(n):
            out = out + weights[i]
        return out, doubled

    out, doubled = kiln.jit(f)(np.float32(1.0))
    np.testing.assert_allclose(float(out), 1.0 + np.cos(np.linspace(0.0, 1.0, 6)).sum(), rtol=1e-6)
    assert float(doubled) == 2.0
    with pytest.raises(kiln.errors.TracerIntegerConversionError):
        kiln.jit(lambda x: int(knp.sum(x)))(np.ones(3))


def test_collectives_over_named_axes():
    lax = kiln.lax
    x = RNG.standard_normal((4, 3))
    centred = kiln.vmap(lambda r: r - lax.pmean(r, "i"), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(centred), x - x.mean(0), rtol=1e-12, atol=1e-15)
    index, top, gathered, count = kiln.vmap(
        lambda r: (lax.axis_index("i"), lax.pmax(r, "i"), lax.all_gather(r[0], "i"), lax.psum(1, "i")),
        axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(index), np.arange(4))
    np.testing.assert_array_equal(np.asarray(top), np.broadcast_to(x.max(0), (4, 3)))
    np.testing.assert_array_equal(np.asarray(gathered), np.broadcast_to(x[:, 0], (4, 4)))
    np.testing.assert_array_equal(np.asarray(count), [4, 4, 4, 4])
    both = kiln.vmap(kiln.vmap(lambda v: (lax.psum(v, ("i", "j")), lax.pmin(v, "i")), axis_name="j"), axis_name="i")
    total, low = both(x)
    np.testing.assert_allclose(np.asarray(total), np.full((4, 3), x.sum()), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(low), np.broadcast_to(x.min(0), (4, 3)))
    assert kiln.vmap(lambda r: lax.axis_size("i") * r, axis_name="i")(np.ones(5)).tolist() == [5.0] * 5
    # the data-parallel step: per-shard gradients averaged over the pmap axis (under kiln.jit)
    w, batches = RNG.standard_normal(3), RNG.standard_normal((4, 2, 3))
    step = kiln.pmap(lambda w, b: lax.pmean(kiln.grad(lambda w: knp.sum((b @ w) ** 2))(w), "batch"),
                     axis_name="batch", in_axes=(None, 0))
    want = np.mean([2 * b.T @ (b @ w) for b in batches], 0)
    np.testing.assert_allclose(np.asarray(step(w, batches)), np.broadcast_to(want, (4, 3)), rtol=1e-10)
    with pytest.raises(NameError, match="unbound axis name: z"):
        lax.psum(1.0, "z")
