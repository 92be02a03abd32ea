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
