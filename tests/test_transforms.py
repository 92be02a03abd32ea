"""grad/jvp/vjp/jacobians against central finite differences (float64); vmap against Python loops."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.transforms.batching import BatchingError
from kiln.transforms.jvp import DifferentiationError

RNG = np.random.default_rng(7)


def numerical_grad(f, x, eps=1e-6):
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up.flat[i] += eps
        down.flat[i] -= eps
        g.flat[i] = (float(f(up)) - float(f(down))) / (2 * eps)
    return g


def check_grad(f, *args, argnum=0, mode="eager", rtol=1e-6, atol=1e-8):
    g = kiln.grad(f, argnums=argnum)
    got = kiln.jit(g)(*args) if mode == "jit" else g(*args)

    def along(x):
        full = list(args)
        full[argnum] = x
        return np.asarray(f(*full))

    np.testing.assert_allclose(got, numerical_grad(along, args[argnum]), rtol=rtol, atol=atol)


POSITIVE = lambda shape: RNG.uniform(0.5, 2.0, shape)  # noqa: E731
ANY = lambda shape: RNG.standard_normal(shape)  # noqa: E731

UNARY = [
    ("exp", knp.exp, ANY), ("log", knp.log, POSITIVE), ("tanh", knp.tanh, ANY), ("sqrt", knp.sqrt, POSITIVE),
    ("negative", knp.negative, ANY), ("abs", knp.abs, ANY),
    ("square_pow", lambda x: x ** 2, ANY), ("pow_x_y", lambda x: knp.power(x, 1.7), POSITIVE),
    ("pow_y_x", lambda x: knp.power(1.7, x), ANY), ("div", lambda x: 1 / (x + 3.5), POSITIVE),
    ("maximum", lambda x: knp.maximum(x, 0.1), ANY), ("minimum", lambda x: knp.minimum(x, 0.1), ANY),
    ("where", lambda x: knp.where(x > 0, x * 2, -x), ANY),
    ("transpose", lambda x: knp.transpose(x) * np.arange(6.0).reshape(3, 2), ANY),
    ("reshape", lambda x: knp.reshape(x, (3, 2)) * np.arange(6.0).reshape(3, 2), ANY),
    ("broadcast", lambda x: knp.broadcast_to(x, (4, 2, 3)) * np.arange(24.0).reshape(4, 2, 3), ANY),
    ("sum_axis", lambda x: knp.sum(x, axis=1) ** 2, ANY), ("mean", lambda x: knp.mean(x, axis=0) ** 2, ANY),
    ("max", lambda x: knp.max(x, axis=1) ** 2, ANY), ("min", lambda x: knp.min(x) ** 2, ANY),
    ("matmul", lambda x: x @ np.arange(12.0).reshape(3, 4), ANY),
    ("matmul_rhs", lambda x: np.arange(8.0).reshape(4, 2) @ x, ANY),
]


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name,fn,sample", UNARY, ids=[u[0] for u in UNARY])
def test_grad_of_each_primitive(name, fn, sample, mode):
    x = sample((2, 3))
    check_grad(lambda v: knp.sum(fn(v) * np.linspace(0.5, 1.5, np.size(fn(x))).reshape(np.shape(fn(x)))), x, mode=mode)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_grad_through_astype(mode):
    f = lambda x: knp.sum(knp.astype(knp.astype(x, np.float32), np.float64) * 3.0)  # noqa: E731
    g = kiln.grad(f)
    got = (kiln.jit(g) if mode == "jit" else g)(ANY((2, 3)))
    np.testing.assert_array_equal(got, np.full((2, 3), 3.0))


def test_grad_of_batched_matmul_both_operands():
    a, b = ANY((2, 3, 4)), ANY((2, 4, 5))
    f = lambda a, b: knp.sum(knp.tanh(a @ b))  # noqa: E731
    check_grad(f, a, b, argnum=0)
    check_grad(f, a, b, argnum=1)


def test_mlp_gradient():
    x, y = ANY((8, 3)), ANY((8, 2))
    params = {"w1": ANY((3, 5)), "b1": ANY((5,)), "w2": ANY((5, 2)), "b2": ANY((2,))}

    def loss(p, x, y):
        h = knp.tanh(x @ p["w1"] + p["b1"])
        return knp.mean((h @ p["w2"] + p["b2"] - y) ** 2)

    g = kiln.grad(loss)(params, x, y)
    for key in params:
        def along(v, key=key):
            q = dict(params)
            q[key] = v
            return loss(q, x, y)
        np.testing.assert_allclose(g[key], numerical_grad(along, params[key]), rtol=1e-6, atol=1e-8)


def test_value_and_grad_and_has_aux():
    f = lambda x: (knp.sum(x ** 2), {"norm": knp.sqrt(knp.sum(x ** 2))})  # noqa: E731
    x = ANY((4,))
    (value, aux), g = kiln.value_and_grad(f, has_aux=True)(x)
    np.testing.assert_allclose(value, np.sum(x ** 2))
    np.testing.assert_allclose(aux["norm"], np.linalg.norm(x))
    np.testing.assert_allclose(g, 2 * x)
    g2, aux2 = kiln.grad(f, has_aux=True)(x)
    np.testing.assert_allclose(g2, 2 * x)


def test_jvp_and_vjp_agree_with_jacobians():
    w = ANY((3, 4))
    f = lambda x: knp.tanh(x @ w)  # noqa: E731
    x, t = ANY((2, 3)), ANY((2, 3))
    y, ty = kiln.jvp(f, (x,), (t,))
    J = kiln.jacfwd(f)(x)
    np.testing.assert_allclose(ty, np.einsum("abij,ij->ab", J, t), rtol=1e-10)
    y2, vjp_fn = kiln.vjp(f, x)
    ct = ANY(y.shape)
    (gx,) = vjp_fn(ct)
    np.testing.assert_allclose(gx, np.einsum("ab,abij->ij", ct, J), rtol=1e-10)
    np.testing.assert_allclose(kiln.jacrev(f)(x), J, rtol=1e-10)


def test_hessian_against_finite_differences():
    f = lambda x: knp.sum(knp.exp(x) * x * x)  # noqa: E731
    x = ANY((3,))
    H = kiln.hessian(f)(x)
    expected = np.diag(np.exp(x) * (x * x + 4 * x + 2))
    np.testing.assert_allclose(H, expected, rtol=1e-8, atol=1e-10)


def test_second_derivative_by_nested_grad():
    f = lambda x: knp.tanh(x)  # noqa: E731
    x = np.float64(0.3)
    d2 = kiln.grad(kiln.grad(f))(x)
    np.testing.assert_allclose(d2, -2 * np.tanh(x) * (1 - np.tanh(x) ** 2), rtol=1e-10)


def test_stop_gradient():
    f = lambda x: knp.sum(x * kiln.stop_gradient(x))  # noqa: E731
    x = ANY((3,))
    np.testing.assert_allclose(kiln.grad(f)(x), x)
    np.testing.assert_allclose(kiln.jit(kiln.grad(f))(x), x)


def test_vmap_against_python_loop():
    w = ANY((4, 2))
    f = lambda x, b: knp.tanh(x @ w + b).sum(axis=0)  # noqa: E731
    xs, b = ANY((5, 3, 4)), ANY((2,))
    got = kiln.vmap(f, in_axes=(0, None))(xs, b)
    np.testing.assert_allclose(got, np.stack([np.tanh(x @ w + b).sum(axis=0) for x in xs]), rtol=1e-12)
    got_t = kiln.vmap(f, in_axes=(1, None), out_axes=1)(np.moveaxis(xs, 0, 1), b)
    np.testing.assert_allclose(got_t, np.stack([np.tanh(x @ w + b).sum(axis=0) for x in xs], axis=1), rtol=1e-12)


def test_vmap_of_grad_matches_per_example_gradients():
    w = ANY((3,))
    loss = lambda w, x: knp.sum(knp.tanh(x * w))  # noqa: E731
    xs = ANY((4, 3))
    got = kiln.vmap(kiln.grad(loss), in_axes=(None, 0))(w, xs)
    expected = np.stack([x * (1 - np.tanh(x * w) ** 2) for x in xs])
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_vmap_trees_and_jit():
    f = lambda p: {"s": p["a"] * 2 + p["b"], "m": knp.max(p["a"])}  # noqa: E731
    p = {"a": ANY((6, 3)), "b": ANY((6, 3))}
    out = kiln.jit(kiln.vmap(f))(p)
    np.testing.assert_allclose(out["s"], p["a"] * 2 + p["b"], rtol=1e-12)
    np.testing.assert_allclose(out["m"], p["a"].max(axis=1))


def test_grad_errors():
    with pytest.raises(DifferentiationError, match=r"grad of <lambda>: fn must return a scalar.*\(3,\)"):
        kiln.grad(lambda x: x * 2)(ANY((3,)))
    with pytest.raises(DifferentiationError, match=r"grad of f2:.*int32"):
        def f2(x):
            return knp.sum(x)
        kiln.grad(f2)(np.arange(3, dtype=np.int32))


def test_vmap_mismatched_axis_sizes():
    with pytest.raises(BatchingError, match=r"vmap of add_two.*leaf 0 has size 3, leaf 1 has size 4"):
        def add_two(a, b):
            return a + b
        kiln.vmap(add_two)(np.ones((3, 2)), np.ones((4, 2)))
