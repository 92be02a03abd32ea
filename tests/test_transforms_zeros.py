"""Derivatives of outputs that do not depend on the input: the symbolic zero tangent reaching an output becomes
zeros of the right shape and dtype (jacfwd: the output's dtype, jacrev: the input's, as JAX), for jacfwd, jacrev,
hessian, grad, jvp and vjp, eagerly, under jit and in a Program run by the standalone kiln-run. Outputs that
partly depend on the input are checked against central finite differences of a numpy reference (float64)."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import Program, lax

from kiln_tools import run_kiln_run
from references import numerical_jacobian

X = np.array([0.5, -1.25, 2.0])


def _modes(fn):
    return [fn, kiln.jit(fn)]


CONSTANT_OUTPUTS = {
    "array": (lambda x: knp.ones((2, 2)), (2, 2)),
    "python float": (lambda x: 2.0, ()),
    "stop_gradient": (lambda x: kiln.stop_gradient(x) * 2.0, (3,)),
    "scan carry": (lambda x: lax.scan(lambda c, r: (c + r, c), knp.zeros(2), knp.ones((4, 2)))[0], (2,)),
    "fori_loop": (lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0, knp.ones(2)), (2,)),
    "cond on x": (lambda x: lax.cond(knp.sum(x) > 0, lambda v: knp.ones(3), lambda v: knp.zeros(3), x), (3,)),
    "vmap": (lambda x: kiln.vmap(lambda r: knp.ones(2))(x), (3, 2)),
}


@pytest.mark.parametrize("name", CONSTANT_OUTPUTS)
def test_jacobians_of_constant_outputs_are_zeros(name):
    f, out_shape = CONSTANT_OUTPUTS[name]
    for transform, shape in [(kiln.jacfwd, out_shape + X.shape), (kiln.jacrev, out_shape + X.shape),
                             (kiln.hessian, out_shape + X.shape + X.shape)]:
        for fn in _modes(transform(f)):
            got = fn(X)
            assert got.shape == shape and got.dtype == np.float64, (transform.__name__, got.shape, got.dtype)
            np.testing.assert_array_equal(got, np.zeros(shape))


def test_jacobian_dtypes_follow_jax():
    """jacfwd pushes tangents forward (the output's dtype), jacrev pulls cotangents back (the input's dtype)."""
    f = lambda x: np.ones((2,), np.float32)  # noqa: E731
    for fn in _modes(kiln.jacfwd(f)):
        got = fn(X)
        assert got.shape == (2, 3) and got.dtype == np.float32 and not got.any()
    for fn in _modes(kiln.jacrev(f)):
        got = fn(X)
        assert got.shape == (2, 3) and got.dtype == np.float64 and not got.any()


def _partly(x, y):
    return {"dep": knp.sin(x) * 2.0, "const": knp.zeros(4), "other": y * 3.0}


def _partly_np(x, y):
    return {"dep": np.sin(x) * 2.0, "const": np.zeros(4), "other": y * 3.0}


@pytest.mark.parametrize("jac", [kiln.jacfwd, kiln.jacrev], ids=["jacfwd", "jacrev"])
def test_partly_dependent_outputs_and_unused_arguments(jac):
    y = np.array([1.5, -0.5])
    for fn in _modes(jac(_partly, argnums=(0, 1))):
        J = fn(X, y)
        for key in ("dep", "const", "other"):
            want_x = numerical_jacobian(lambda v: _partly_np(v, y)[key], X)
            want_y = numerical_jacobian(lambda v: _partly_np(X, v)[key], y)
            assert J[key][0].shape == want_x.shape and J[key][1].shape == want_y.shape
            np.testing.assert_allclose(J[key][0], want_x, rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(J[key][1], want_y, rtol=1e-6, atol=1e-8)


def test_grad_jvp_vjp_of_constant_outputs():
    for fn in _modes(kiln.grad(lambda x: 3.0)) + _modes(kiln.grad(lambda x: knp.sum(kiln.stop_gradient(x)))):
        got = fn(X)
        assert got.shape == (3,) and got.dtype == np.float64 and not got.any()
    for fn in _modes(kiln.value_and_grad(lambda x: knp.sum(knp.ones(2)))):
        value, g = fn(X)
        assert float(value) == 2.0 and g.shape == (3,) and not g.any()

    def tangent(x, t):
        return kiln.jvp(lambda v: (v * 2.0, knp.ones((2,), np.float32)), (x,), (t,))

    for fn in _modes(tangent):
        (p_dep, p_const), (t_dep, t_const) = fn(X, np.ones(3))
        np.testing.assert_allclose(t_dep, np.full(3, 2.0))
        assert t_const.shape == (2,) and t_const.dtype == np.float32 and not t_const.any()

    def cotangent(x):
        _, pullback = kiln.vjp(lambda v: knp.ones(2), x)
        return pullback(knp.ones(2))

    for fn in _modes(cotangent):
        (g,) = fn(X)
        assert g.shape == (3,) and g.dtype == np.float64 and not g.any()


class ConstantDerivatives(Program):
    def jacobians(self, x=Program.like(X)):
        f = lambda v: (knp.sin(v), knp.ones(2))  # noqa: E731
        return (*kiln.jacfwd(f)(x), *kiln.jacrev(f)(x))

    def hessian_of_constant(self, x=Program.like(X)):
        return kiln.hessian(lambda v: knp.sum(kiln.stop_gradient(v)) + 1.0)(x)


def test_constant_derivatives_in_kiln_run(tmp_path):
    m = ConstantDerivatives()
    want_dep = np.diag(np.cos(X))
    path = tmp_path / "zeros.vmfb"
    Program.get_compiled_artifact(ConstantDerivatives).save(path)
    np.save(tmp_path / "x.npy", X)

    def run(function, n):
        outs = [tmp_path / f"{function}{k}.npy" for k in range(n)]
        run_kiln_run(f"--module={path}", f"--function={function}", f"--input=@{tmp_path / 'x.npy'}",
                     *[f"--output=@{o}" for o in outs])
        return [np.load(o) for o in outs]

    for got in (m.jacobians(X), run("jacobians", 4)):
        fwd_dep, fwd_const, rev_dep, rev_const = got
        np.testing.assert_allclose(fwd_dep, want_dep, rtol=1e-12)
        np.testing.assert_allclose(rev_dep, want_dep, rtol=1e-12)
        for z in (fwd_const, rev_const):
            assert z.shape == (2, 3) and z.dtype == np.float64 and not z.any()
    for got in (m.hessian_of_constant(X), *run("hessian_of_constant", 1)):
        assert got.shape == (3, 3) and got.dtype == np.float64 and not got.any()
