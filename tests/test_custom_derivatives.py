"""custom_jvp and custom_vjp: rules are used under grad/jvp, composed with vmap and jit, and checked."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.transforms.jvp import DifferentiationError


@kiln.custom_jvp
def softplus(x):
    return knp.log(1 + knp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t * (1 - 1 / (1 + knp.exp(x)))


@kiln.custom_vjp
def clip_gradient(x):
    return x


def _clip_fwd(x):
    return x, None


def _clip_bwd(residuals, g):
    return (knp.maximum(knp.minimum(g, 1.0), -1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)

X = np.array([0.5, -30.0, 30.0, 2.0])
SIGMOID = 1 / (1 + np.exp(-X))


@pytest.mark.parametrize("wrap", ["eager", "jit", "vmap_of_grad", "grad_of_vmap"])
def test_custom_jvp_rule_is_used(wrap):
    loss = lambda x: knp.sum(softplus(x))  # noqa: E731
    if wrap == "eager":
        g = kiln.grad(loss)(X)
    elif wrap == "jit":
        g = kiln.jit(kiln.grad(loss))(X)
    elif wrap == "vmap_of_grad":
        g = kiln.vmap(kiln.grad(softplus))(X)
    else:
        g = kiln.grad(lambda x: knp.sum(kiln.vmap(softplus)(x)))(X)
    np.testing.assert_allclose(g, SIGMOID, rtol=1e-12, atol=1e-15)
    y, t = kiln.jvp(softplus, (X,), (np.ones_like(X),))
    np.testing.assert_allclose(y, np.logaddexp(0, X), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(t, SIGMOID, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("wrap", ["eager", "jit", "grad_of_vmap"])
def test_custom_vjp_rule_is_used(wrap):
    loss = lambda x: knp.sum(clip_gradient(x) * 5.0)  # noqa: E731
    if wrap == "eager":
        g = kiln.grad(loss)(X)
    elif wrap == "jit":
        g = kiln.jit(kiln.grad(loss))(X)
    else:
        g = kiln.grad(lambda x: knp.sum(kiln.vmap(clip_gradient)(x) * 5.0))(X)
    np.testing.assert_array_equal(g, np.ones_like(X))
    np.testing.assert_array_equal(kiln.jit(clip_gradient)(X), X)


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
def test_custom_rules_keep_weak_types(kind):
    """JAX keeps weak_type through custom_jvp/custom_vjp: a Python scalar's result stays weak (so it does not
    widen the float32 it meets), a strongly typed argument's result stays strong, under vmap too."""
    f = softplus if kind == "custom_jvp" else clip_gradient
    assert kiln.eval_shape(f, 1.5) == kiln.ShapeDtypeStruct((), np.float32, weak_type=True)
    assert kiln.eval_shape(f, np.float32(1.5)) == kiln.ShapeDtypeStruct((), np.float32)
    assert kiln.eval_shape(kiln.vmap(lambda x: f(x) + 1.0), knp.asarray([0.5, 2.0])).weak_type
    assert kiln.jit(lambda x: f(2.0) * x)(np.ones(3, np.float32)).dtype == np.float32
    # jvp with a Python-number tangent: it takes the primal's dtype and stays weak, as JAX's
    out, tangent = kiln.eval_shape(lambda x: kiln.jvp(softplus, (x,), (1.0,)), 1.5)
    assert out == tangent == kiln.ShapeDtypeStruct((), np.float32, weak_type=True)
    assert kiln.jvp(softplus, (np.float32(0.5),), (1.0,))[1].dtype == np.float32
    np.testing.assert_allclose(kiln.jit(lambda x: f(0.5) * x)(np.ones(3, np.float32)),
                               np.full(3, np.logaddexp(0, 0.5) if kind == "custom_jvp" else 0.5, np.float32))


def test_custom_vjp_with_residuals_matches_finite_differences():
    @kiln.custom_vjp
    def cube(x):
        return x ** 3

    cube.defvjp(lambda x: (x ** 3, x * x), lambda x2, g: (3 * x2 * g,))
    np.testing.assert_allclose(kiln.grad(lambda x: knp.sum(cube(x)))(X), 3 * X ** 2)


def test_errors():
    with pytest.raises(DifferentiationError, match="forward-mode.*clip_gradient"):
        kiln.jvp(clip_gradient, (X,), (X,))

    @kiln.custom_jvp
    def no_rule(x):
        return x

    with pytest.raises(DifferentiationError, match="no_rule has no JVP rule"):
        no_rule(X)

    @kiln.custom_vjp
    def bad(x, y):
        return x * y

    bad.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g,))
    with pytest.raises(DifferentiationError, match="one cotangent per argument"):
        kiln.grad(lambda x: knp.sum(bad(x, x)))(X)


def _tanh_layer_vjp():
    @kiln.custom_vjp
    def layer(w, x):
        return knp.tanh(w @ x)

    def fwd(w, x):
        y = knp.tanh(w @ x)
        return y, (w, x, y)

    def bwd(res, ct):
        w, x, y = res
        d = ct * (1 - y ** 2)
        return knp.outer(d, x), w.T @ d

    layer.defvjp(fwd, bwd)
    return layer


W = np.linspace(-0.5, 0.5, 12).reshape(3, 4)
XS = np.linspace(-1.0, 2.0, 20).reshape(5, 4)


@pytest.mark.parametrize("wrap", ["closure", "in_axes_none", "jit"])
def test_custom_vjp_under_vmap_sums_an_unmapped_arguments_cotangent(wrap):
    # The weight is shared by the examples: its cotangent is the sum over them (each example's cotangent,
    # batched, came back before: grad's result had the batch axis, shape (5, 3, 4)).
    layer = _tanh_layer_vjp()
    if wrap == "closure":
        loss = lambda w: knp.sum(kiln.vmap(lambda x: layer(w, x))(XS) ** 2)  # noqa: E731
    else:
        loss = lambda w: knp.sum(kiln.vmap(layer, in_axes=(None, 0))(w, XS) ** 2)  # noqa: E731
    g = (kiln.jit(kiln.grad(loss)) if wrap == "jit" else kiln.grad(loss))(W)
    y = np.tanh(XS @ W.T)
    np.testing.assert_allclose(g, (2 * y * (1 - y ** 2)).T @ XS, rtol=1e-12)
    gx = kiln.grad(lambda xs: knp.sum(kiln.vmap(lambda x: layer(W, x))(xs) ** 2))(XS)
    np.testing.assert_allclose(gx, (2 * y * (1 - y ** 2)) @ W, rtol=1e-12)


def test_nondiff_argnums():
    # JAX's nondiff_argnums: those arguments (here functions) are held fixed; fwd takes every argument,
    # bwd and the JVP rule take them first, and give cotangents/tangents for the others only.
    from functools import partial

    @partial(kiln.custom_vjp, nondiff_argnums=(0,))
    def apply(f, x, y):
        return f(x) * y

    apply.defvjp(lambda f, x, y: (f(x) * y, (x, y)), lambda f, res, g: (2 * g * res[1], g * f(res[0])))
    np.testing.assert_allclose(kiln.grad(lambda x: knp.sum(apply(knp.sin, x, np.full(4, 3.0))))(X), np.full(4, 6.0))
    gy = kiln.vmap(kiln.grad(lambda y, x: apply(knp.sin, x, y)), in_axes=(0, None))(X, 0.5)
    np.testing.assert_allclose(gy, np.full(4, np.sin(0.5)))

    @partial(kiln.custom_jvp, nondiff_argnums=(1,))
    def power(x, n):
        return x ** n

    @power.defjvp
    def _power_jvp(n, primals, tangents):
        (x,), (t,) = primals, tangents
        return x ** n, 10.0 * t  # a rule that is not the derivative, so that using it shows

    np.testing.assert_allclose(kiln.grad(lambda x: knp.sum(power(x, 3)))(X), np.full(4, 10.0))
    np.testing.assert_allclose(kiln.jit(lambda x: power(x, 3))(X), X ** 3)

    bad = kiln.custom_vjp(lambda x: x, nondiff_argnums=(1,))
    bad.defvjp(lambda x: (x, None), lambda res, g: (g,))
    with pytest.raises(TypeError, match="nondiff_argnums entry 1 is not a position among its 1 arguments"):
        bad(X)
