"""The last of JAX's top-level and jax.ad_checkpoint / jax.custom_derivatives names: the config flags' context
managers (what each does in kiln), print_saved_residuals, custom_vjp's symbolic_zeros mode and linear_call.
References: numpy formulas, finite differences, and values recorded from JAX 0.10.2 where it decides."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import ad_checkpoint


def test_print_saved_residuals(capsys):
    def f(params, x):
        return knp.tanh(x @ params["w"]).sum()

    ad_checkpoint.print_saved_residuals(f, {"w": np.ones((3, 2))}, np.ones((4, 3)))
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["f64[3,2] from the argument params", "f64[4,3] from the argument x"]
    assert lines[2].startswith("f64[4,2] output of ") and "test_jax_api_extras.py" in lines[2] and "(f)" in lines[2]
    assert len(lines) == 3
    saved = ad_checkpoint.saved_residuals(lambda x, y: knp.sin(x) * y, np.float32(1.0), np.ones(3, np.float32))
    assert [(a.str_short(), w.split(" from ")[0]) for a, w in saved] == [
        ("f32[]", "output of cos"), ("f32[3]", "from the argument y"), ("f32[3]", "output of broadcast_in_dim")]
    # a function linear in its argument keeps nothing
    assert ad_checkpoint.saved_residuals(lambda x: (x + x).sum(), np.ones(2)) == []


FLAGS = ["allow_f16_reductions", "check_tracer_leaks", "enable_checks", "explain_cache_misses", "no_execution",
         "no_tracing", "softmax_custom_jvp", "thread_guard", "threefry_partitionable"]


@pytest.mark.parametrize("name", FLAGS)
def test_flag_context_managers_set_and_restore(name):
    flag = "jax_" + name
    before = kiln.config.read(flag)
    value = True if name == "threefry_partitionable" else not before
    with getattr(kiln, name)(value):
        assert kiln.config.read(flag) == value
    assert kiln.config.read(flag) == before
    with pytest.raises(ValueError, match="must be a bool" if name != "threefry_partitionable" else "partitionable"):
        kiln.config.update(flag, "yes")


def test_no_tracing_and_no_execution():
    f = kiln.jit(lambda x: x * 2.0 + 1.0)
    f(np.ones(3))  # traced and compiled at f64[3]
    with kiln.no_tracing():
        np.testing.assert_array_equal(np.asarray(f(np.ones(3))), [3.0, 3.0, 3.0])  # cached: no tracing
        with pytest.raises(RuntimeError, match="re-tracing function .* but 'no_tracing' is set"):
            f(np.ones(4))
    with kiln.no_execution():
        with pytest.raises(RuntimeError, match="tried to execute function .* no_execution config option is set"):
            f(np.ones(3))
        # tracing (jit inside a transformation) is no execution
        assert kiln.make_jaxpr(f)(np.ones(2)) is not None
    np.testing.assert_array_equal(np.asarray(f(np.ones(4))), [3.0] * 4)


def test_explain_cache_misses(caplog):
    f = kiln.jit(lambda x, n: x * n, static_argnums=1)
    with kiln.explain_cache_misses(), caplog.at_level("WARNING", logger="kiln.jit"):
        f(np.ones(3, np.float32), 2)
        f(np.ones(3, np.float32), 2)  # a hit: nothing logged
        f(np.ones(5, np.float32), 2)
        f(np.ones(3, np.float32), 3)
    messages = [r.getMessage() for r in caplog.records if r.name == "kiln.jit"]
    assert len(messages) == 3 and "never seen function" in messages[0]
    assert "argument leaf 0: f32[5] (was f32[3])" in messages[1]
    assert "static arguments" in messages[2] and "3" in messages[2]
    caplog.clear()
    f(np.ones(7, np.float32), 2)  # flag off: silent
    assert not [r for r in caplog.records if r.name == "kiln.jit"]


def test_allow_f16_reductions():
    x = np.arange(6, dtype=np.float16).reshape(2, 3)
    assert float(kiln.lax.reduce_sum(x, (1,))[1]) == 12.0
    with kiln.allow_f16_reductions(False):
        with pytest.raises(ValueError, match=r"reduce_sum on operand f16\[2,3\] is not allowed when "
                                             "jax_allow_f16_reductions=False"):
            kiln.lax.reduce_sum(x, (1,))
        with pytest.raises(ValueError, match="jax_allow_f16_reductions=False"):
            kiln.jit(lambda v: kiln.lax.reduce_sum(v, (0,)))(x)
        np.testing.assert_array_equal(np.asarray(kiln.lax.reduce_sum(x[:1], (0,))), x[0])  # a length-1 axis
        assert float(knp.sum(x)) == 15.0  # kiln.numpy's sum accumulates in float32
        assert float(kiln.lax.reduce_sum(x.astype(np.float32), (0, 1))) == 15.0


def test_softmax_custom_jvp():
    x = np.array([[0.3, -1.2, 2.0, 0.5], [1.0, 1.0, -np.inf, 0.0]])
    t = np.array([[1.0, -2.0, 0.5, 0.25], [0.5, -0.5, 0.0, 2.0]])
    y, plain = kiln.jvp(kiln.nn.softmax, (x,), (t,))
    with kiln.softmax_custom_jvp():
        y2, ruled = kiln.jvp(kiln.nn.softmax, (x,), (t,))
        g = kiln.grad(lambda v: (kiln.nn.softmax(v) * t).sum())(x)
    y = np.asarray(y)
    np.testing.assert_array_equal(np.asarray(y2), y)
    want = y * (t - np.sum(y * t, axis=-1, keepdims=True))  # JAX's rule, evaluated here in numpy
    np.testing.assert_array_equal(np.asarray(ruled), want)
    np.testing.assert_allclose(np.asarray(plain), want, rtol=1e-14, atol=1e-16)  # the formula's: the same up to rounding
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-14, atol=1e-16)  # the rule is symmetric in t and w


def test_threefry_partitionable_is_kilns_layout():
    with kiln.threefry_partitionable(True):
        key = kiln.random.PRNGKey(0)
    with pytest.raises(ValueError, match="partitionable threefry layout"):
        kiln.config.update("jax_threefry_partitionable", False)
    with pytest.raises(ValueError, match="partitionable"):
        with kiln.threefry_partitionable(False):
            pass
    # JAX 0.10.2 with jax_threefry_partitionable=True (its default): split(PRNGKey(0)) and bits of key 1
    np.testing.assert_array_equal(np.asarray(kiln.random.split(key)), JAX_SPLIT)
    np.testing.assert_array_equal(np.asarray(kiln.random.bits(kiln.random.PRNGKey(1), (4,))), JAX_BITS)


JAX_SPLIT = [[1797259609, 2579123966], [928981903, 3453687069]]  # (with the flag False JAX gives other bits:
JAX_BITS = [1883912375, 2292451390, 1915204986, 1882898417]      # [[4146024105, 967050713], ...], [2441914641, ...])


def test_enable_checks_verifies_the_traced_graph(monkeypatch):
    import kiln.compiler.pipeline as pipeline

    checked = []
    real = pipeline.verify_graph
    monkeypatch.setattr(pipeline, "verify_graph", lambda g: (checked.append(len(g.eqns)), real(g)))
    kiln.jit(lambda x: knp.sin(x) * 2.0)(np.ones(3))
    plain = len(checked)
    with kiln.enable_checks():
        np.testing.assert_allclose(np.asarray(kiln.jit(lambda x: knp.cos(x) + 1.0)(np.ones(3))), np.cos(1.0) + 1.0)
    assert plain >= 1 and len(checked) - plain == 2 * plain  # the traced graph too, not only the passes' result


# ---- jax.custom_derivatives: symbolic_zeros, linear_call

from kiln.custom_derivatives import (CustomVJPPrimal, SymbolicZero, custom_vjp_primal_tree_values,  # noqa: E402
                                     linear_call, zero_from_primal)


def test_custom_vjp_symbolic_zeros():
    log = []

    @kiln.custom_vjp
    def f(x, y):
        return x * y, knp.sin(x)

    def fwd(x, y):
        log.append(("fwd", x.perturbed, y.perturbed))
        xv, yv = custom_vjp_primal_tree_values((x, y))
        return f(xv, yv), (xv, yv)

    def bwd(res, cts):
        x, y = res
        a, b = cts
        log.append(("bwd", isinstance(a, SymbolicZero), isinstance(b, SymbolicZero)))
        gb = 0.0 if isinstance(b, SymbolicZero) else b * knp.cos(x)
        ga = 0.0 if isinstance(a, SymbolicZero) else a
        return ga * y + gb, (None if isinstance(a, SymbolicZero) else ga * x)

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    # the values and the flags JAX 0.10.2 gives for the same calls
    assert float(kiln.grad(lambda x, y: f(x, y)[0])(2.0, 3.0)) == 3.0
    assert log == [("fwd", True, False), ("bwd", False, True)]
    log.clear()
    assert float(kiln.grad(lambda x, y: f(x, y)[1], argnums=1)(2.0, 3.0)) == 0.0
    assert log == [("fwd", False, True), ("bwd", True, False)]
    log.clear()
    both = kiln.grad(lambda x, y: f(x, y)[0] + 2 * f(x, y)[1], argnums=(0, 1))(2.0, 3.0)
    np.testing.assert_allclose([float(v) for v in both], [3.0 + 2 * np.cos(2.0), 2.0], rtol=1e-15)
    assert log == [("fwd", True, True), ("fwd", True, True), ("bwd", True, False), ("bwd", False, True)]
    # under vmap (differentiated outside it, or inside), bwd still gets a SymbolicZero of one example, as JAX's
    xs, ys = np.array([0.5, 1.0, 2.0]), np.array([3.0, -1.0, 0.25])
    for fn, want in ((lambda x: knp.sum(kiln.vmap(f)(x, ys)[0]), ys),
                     (lambda x: knp.sum(kiln.vmap(f, (0, None))(x, 3.0)[0]), np.full(3, 3.0))):
        log.clear()
        np.testing.assert_allclose(kiln.grad(fn)(xs), want)
        assert log == [("fwd", True, False), ("bwd", False, True)]
    log.clear()
    np.testing.assert_allclose(kiln.vmap(kiln.grad(lambda x, y: f(x, y)[1], argnums=1))(xs, ys), np.zeros(3))
    assert log == [("fwd", False, True), ("bwd", True, False)]
    with pytest.raises(TypeError, match="unexpected leaf type"):
        custom_vjp_primal_tree_values((1.0,))
    assert repr(CustomVJPPrimal(1.0, False)) == "CustomVJPPrimal(value=1.0, perturbed=False)"


def test_custom_jvp_symbolic_zeros_and_zero_from_primal():
    seen = []

    @kiln.custom_jvp
    def g(x, y):
        return x * knp.exp(y)

    def g_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        seen.append((isinstance(tx, SymbolicZero), isinstance(ty, SymbolicZero)))
        out = g(x, y)
        return out, (0.0 if isinstance(tx, SymbolicZero) else tx * knp.exp(y)) + \
            (0.0 if isinstance(ty, SymbolicZero) else out * ty)

    g.defjvp(g_jvp, symbolic_zeros=True)
    np.testing.assert_allclose(float(kiln.grad(g)(1.5, 0.5)), np.exp(0.5), rtol=1e-15)
    np.testing.assert_allclose(float(kiln.grad(g, argnums=1)(1.5, 0.5)), 1.5 * np.exp(0.5), rtol=1e-15)
    assert seen == [(False, True), (True, False)]
    # under vmap the rule still sees SymbolicZero (one example's shape), as JAX's: batched then differentiated,
    # and differentiated inside the vmap
    seen.clear()
    xs, ys = np.array([1.5, -2.0]), np.array([0.5, 0.25])
    np.testing.assert_allclose(kiln.grad(lambda x: knp.sum(kiln.vmap(g)(x, ys)))(xs), np.exp(ys), rtol=1e-15)
    np.testing.assert_allclose(kiln.vmap(kiln.grad(g, argnums=1))(xs, ys), xs * np.exp(ys), rtol=1e-15)
    assert seen == [(False, True), (True, False)]
    z = zero_from_primal({"a": np.ones(3, np.float32), "b": 2.0}, symbolic_zeros=True)
    assert isinstance(z["a"], SymbolicZero) and z["a"].shape == (3,) and z["a"].dtype == np.float32
    zeros = zero_from_primal({"a": np.ones(3, np.float32)})["a"]
    assert zeros.dtype == np.float32 and zeros.tolist() == [0.0, 0.0, 0.0]


def _transpose(fn, example):
    return lambda y: kiln.linear_transpose(fn, example)(y)[0]


def test_linear_call():
    def div_add(x, denom):
        return x + linear_call(lambda r, x: x / r, lambda r, t: t / r, denom, x)

    def custom_id(x):
        return linear_call(lambda _, x: x, lambda _, t: 7.0, (), x)

    # JAX's documented values
    assert float(div_add(9.0, 3.0)) == 12.0
    assert float(_transpose(lambda x: div_add(x, 3.0), 1.0)(18.0)) == 24.0
    assert float(custom_id(1.0)) == 1.0
    assert float(_transpose(custom_id, 1.0)(1.0)) == 7.0
    assert float(_transpose(_transpose(custom_id, 1.0), 1.0)(1.0)) == 1.0  # the transpose of the transpose is fun
    assert float(_transpose(_transpose(_transpose(custom_id, 1.0), 1.0), 1.0)(1.0)) == 7.0
    # reverse mode uses the given transpose, also compiled; forward mode calls fun on the tangents
    assert float(kiln.jit(kiln.grad(lambda x: 3.0 * custom_id(x)))(2.0)) == 7.0
    m = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    matvec = lambda m, v: linear_call(lambda m, v: m @ v, lambda m, c: m.T @ c, m, v)  # noqa: E731
    v, w = np.array([0.5, -1.0]), np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(np.asarray(kiln.grad(lambda v: knp.dot(w, knp.sin(matvec(m, v))))(v)),
                               m.T @ (w * np.cos(m @ v)), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(kiln.jvp(lambda v: matvec(m, v), (v,), (w[:2],))[1]), m @ w[:2])
    np.testing.assert_allclose(np.asarray(kiln.vmap(lambda v: matvec(m, v))(np.stack([v, w[:2]]))),
                               np.stack([m @ v, m @ w[:2]]))
    with pytest.raises(kiln.transforms.jvp.DifferentiationError, match="residual_args are not differentiated"):
        kiln.grad(lambda s: matvec(m * s, v).sum())(2.0)
    with pytest.raises(TypeError, match="output structure"):
        kiln.grad(lambda v: linear_call(lambda r, v: v, lambda r, c: (c, c), (), v).sum())(v)
