"""grad/jvp/vjp/jacobians against central finite differences (float64); vmap against Python loops."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import Program, lax
from kiln.core.kernel_call import kernel_call
from kiln.transforms.batching import BatchingError
from kiln.transforms.jvp import DifferentiationError
from references import numerical_grad, numerical_jacobian

RNG = np.random.default_rng(7)


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


def test_vmap_rejects_out_of_range_axes():
    def pair(a, b):
        return a + b

    x = np.ones((2, 3))
    with pytest.raises(BatchingError, match=r"vmap of pair: in_axes 2 is out of range for argument 0 of shape "
                                            r"\(2, 3\) \(ndim 2; valid axes are -2\.\.1\)"):
        kiln.vmap(pair, in_axes=2)(x, x)
    with pytest.raises(BatchingError, match=r"vmap of pair: in_axes -3 is out of range for argument 1 of shape "
                                            r"\(2, 3\) \(ndim 2"):
        kiln.vmap(pair, in_axes=(0, -3))(x, x)
    with pytest.raises(BatchingError, match=r"vmap of pair: in_axes 1 is out of range for argument 0, leaf 1 of "
                                            r"shape \(3,\) \(ndim 1"):
        kiln.vmap(pair, in_axes=({"a": 0, "b": 1}, None))({"a": x, "b": np.ones(3)}, 1.0)
    with pytest.raises(BatchingError, match=r"vmap of pair: in_axes 0 is out of range for argument 1, a 0-d value "
                                            r"\(ndim 0\)"):
        kiln.vmap(pair)(np.ones(3), np.float64(2.0))
    with pytest.raises(BatchingError, match=r"vmap of pair: out_axes 3 is out of range for output leaf 0 of shape "
                                            r"\(3,\) \(ndim 2 with the mapped axis; valid axes are -2\.\.1\)"):
        kiln.vmap(pair, out_axes=3)(x, x)
    with pytest.raises(BatchingError, match=r"vmap of pair: out_axes -3 is out of range for output leaf 0"):
        kiln.vmap(pair, out_axes=-3)(x, x)
    with pytest.raises(BatchingError, match=r"vmap of pair: output leaf 0 is batched but out_axes gives None"):
        kiln.vmap(pair, out_axes=None)(x, x)
    with pytest.raises(BatchingError, match=r"vmap of pair: in_axes for argument 0 must be an int or None, got 1\.0"):
        kiln.vmap(pair, in_axes=(1.0, 0))(x, x)
    # In range, negative axes count from the end.
    got = kiln.vmap(pair, in_axes=(-1, None), out_axes=-1)(np.arange(6.0).reshape(2, 3), np.arange(2.0))
    np.testing.assert_array_equal(got, np.arange(6.0).reshape(2, 3) + np.arange(2.0)[:, None])


def test_vmap_axes_as_trees_and_out_axes_none():
    p = {"a": ANY((4, 3)), "b": ANY((3, 4))}
    c = ANY((3,))

    def f(p, c):
        return {"x": p["a"] * p["b"] + c, "y": knp.sum(p["a"]) * c, "k": c * 2.0}

    out = kiln.vmap(f, in_axes=({"a": 0, "b": 1}, None), out_axes={"x": 1, "y": 0, "k": None})(p, c)
    rows = [f({"a": p["a"][i], "b": p["b"][:, i]}, c) for i in range(4)]
    np.testing.assert_allclose(out["x"], np.stack([r["x"] for r in rows], axis=1), rtol=1e-12)
    np.testing.assert_allclose(out["y"], np.stack([r["y"] for r in rows]), rtol=1e-12)
    np.testing.assert_allclose(out["k"], c * 2.0)
    jitted = kiln.jit(kiln.vmap(f, in_axes=({"a": 0, "b": 1}, None), out_axes={"x": 1, "y": 0, "k": None}))(p, c)
    for key in out:
        np.testing.assert_allclose(jitted[key], out[key], rtol=1e-12)
    unbatched = kiln.vmap(lambda x, c: c * 3.0, in_axes=(0, None), out_axes=None)(p["a"], c)
    np.testing.assert_allclose(unbatched, c * 3.0)


def test_hessian_under_jit():
    f = lambda x: knp.sum(knp.sin(x) * x[::-1]) + knp.prod(x)  # noqa: E731
    x = ANY((3,))
    got = kiln.jit(kiln.hessian(f))(x)
    np.testing.assert_allclose(got, numerical_jacobian(kiln.grad(f), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got, kiln.hessian(f)(x), rtol=1e-12)


@pytest.mark.parametrize("jac", [kiln.jacfwd, kiln.jacrev], ids=["jacfwd", "jacrev"])
def test_jacobians_with_argnums_tuple_and_tree_output(jac):
    def f(a, b):
        return {"p": a * b[:2], "s": knp.sum(knp.sin(a)) * b}

    a, b = ANY((2,)), ANY((3,))
    J = jac(f, argnums=(0, 1))(a, b)
    assert set(J) == {"p", "s"} and all(isinstance(J[k], tuple) and len(J[k]) == 2 for k in J)
    for key in ("p", "s"):
        np.testing.assert_allclose(J[key][0], numerical_jacobian(lambda v: f(v, b)[key], a), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(J[key][1], numerical_jacobian(lambda v: f(a, v)[key], b), rtol=1e-6, atol=1e-8)
    single = jac(f, argnums=1)(a, b)
    np.testing.assert_allclose(single["s"], J["s"][1], rtol=1e-12)


def test_every_derivative_rejects_integer_inputs():
    def f(x):
        return x * 2

    def g(a, b):
        return a * b

    ints = np.arange(3, dtype=np.int32)
    msg = "{} of {}: {} has dtype {}; derivatives are only defined for floating-point inputs \\(for integer or bool " \
          "arguments, {}\\)"
    argnums, close = "leave them out of argnums", "close over them"
    with pytest.raises(DifferentiationError, match=msg.format("grad", "f", "input leaf 0 of argnums 0", "int32", argnums)):
        kiln.grad(f)(ints)
    with pytest.raises(DifferentiationError, match=msg.format("jvp", "g", "primal leaf 1", "int32", close)):
        kiln.jvp(g, (np.ones(3), ints), (np.ones(3), ints))
    with pytest.raises(DifferentiationError, match=msg.format("vjp", "f", "primal leaf 0", "bool", close)):
        kiln.vjp(f, np.array([True, False]))
    with pytest.raises(DifferentiationError,
                       match=msg.format("jacfwd", "g", r"input leaf 1 of argnums \(0, 1\)", "int32", argnums)):
        kiln.jacfwd(g, argnums=(0, 1))(np.ones(3), ints)
    with pytest.raises(DifferentiationError, match=msg.format("jacrev", "f", "input leaf 0 of argnums 0", "int32", argnums)):
        kiln.jacrev(f)(ints)
    # Integer arguments outside argnums, or closed over, are fine.
    np.testing.assert_allclose(kiln.jacrev(g, argnums=0)(np.ones(3), ints), np.diag([0.0, 1, 2]))
    _, t = kiln.jvp(lambda a: g(a, ints), (np.ones(3),), (np.ones(3),))
    np.testing.assert_allclose(t, [0.0, 1, 2])


# ---- transforms through kernels and nested jit (kernel_call's inline rule) ----------------

W = RNG.standard_normal((3, 2))
XS = RNG.standard_normal((4, 3))


def _loss(w, x):
    return knp.sum(knp.tanh(x @ w) ** 2)


def _loss_np(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def _grad_w_fd(x):
    return numerical_grad(lambda v: _loss_np(v, x), W)


@pytest.fixture
def inline_calls(monkeypatch):
    """Names of the kernels that transformations traced through (kernel_call's inline rule)."""
    calls = []
    rule = kernel_call.inline_rule

    def spy(*args, **params):
        calls.append(params["name"])
        return rule(*args, **params)

    monkeypatch.setattr(kernel_call, "inline_rule", spy)
    return calls


def test_jit_of_a_transform_of_a_jitted_function():
    """jit(grad(jit f)), jit(vmap(jit f)): the outer jit compiles the transform, not the inner function."""
    h = kiln.jit(lambda w: knp.sum(knp.sin(w) * w))
    w = ANY((2, 3))
    np.testing.assert_allclose(kiln.jit(kiln.grad(h))(w), np.cos(w) * w + np.sin(w), rtol=1e-12)
    rows = kiln.jit(kiln.vmap(kiln.jit(lambda v: knp.sum(knp.sin(v)))))(w)
    np.testing.assert_allclose(rows, np.sin(w).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(kiln.jit(kiln.hessian(h))(w[0]), numerical_jacobian(kiln.grad(h), w[0]), rtol=1e-6,
                               atol=1e-8)
    g = kiln.grad(h)
    assert g.__name__ == h.__name__ and not hasattr(g, "_traces")


def test_transforms_of_nested_jit(inline_calls):
    jf = kiln.jit(_loss)
    np.testing.assert_allclose(kiln.grad(jf)(W, XS), _grad_w_fd(XS), rtol=1e-6, atol=1e-8)
    per_row = kiln.vmap(jf, in_axes=(None, 0))(W, XS[:, None, :])
    np.testing.assert_allclose(per_row, [_loss_np(W, x[None]) for x in XS], rtol=1e-12)
    t = ANY(W.shape)
    _, tangent = kiln.jvp(lambda w: jf(w, XS), (W,), (t,))
    np.testing.assert_allclose(tangent, np.sum(_grad_w_fd(XS) * t), rtol=1e-6)
    outer = kiln.jit(lambda w, x: kiln.grad(jf)(w, x))
    np.testing.assert_allclose(outer(W, XS), _grad_w_fd(XS), rtol=1e-6, atol=1e-8)
    assert inline_calls.count("_loss") >= 4


def test_transforms_through_program_kernels(inline_calls):
    """grad/vmap of a kernel, kernels of transforms, transforms inside kernels, a kernel in a scan and its grad."""

    class Kernels(Program, export_name="kernels"):
        _w = W

        @Program.kernel
        def _loss(w, x):
            return _loss(w, x)

        _grad_loss = Program.kernel(kiln.grad(_loss))
        _rows = Program.kernel(kiln.vmap(_loss, in_axes=(None, 0)))

        @Program.kernel
        def _grad_inside(w, x):
            return kiln.grad(lambda v: _loss(v, x))(w)

        @Program.kernel
        def _vmap_inside(w, xs):
            return kiln.vmap(lambda x: knp.tanh(x @ w))(xs)

        def grad_of_kernel(self, x=Program.like(XS)):
            return kiln.grad(self._loss)(self._w, x)

        def vmap_of_kernel(self, x=Program.like(XS)):
            return kiln.vmap(self._loss, in_axes=(None, 0))(self._w, knp.expand_dims(x, 1))

        def kernels_of_transforms(self, x=Program.like(XS)):
            return self._grad_loss(self._w, x), self._rows(self._w, knp.expand_dims(x, 1))

        def transforms_inside_kernels(self, x=Program.like(XS)):
            return self._grad_inside(self._w, x), self._vmap_inside(self._w, x)

        def kernel_in_scan(self, x=Program.like(XS)):
            def total(w):
                step = lambda c, xi: (c + self._loss(w, knp.expand_dims(xi, 0)), None)  # noqa: E731
                return lax.scan(step, np.float64(0), x)[0]

            return total(self._w), kiln.grad(total)(self._w)

    m = Kernels()
    fd = _grad_w_fd(XS)
    rows = [_loss_np(W, x[None]) for x in XS]
    np.testing.assert_allclose(m.grad_of_kernel(XS), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(m.vmap_of_kernel(XS), rows, rtol=1e-12)
    g, r = m.kernels_of_transforms(XS)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(r, rows, rtol=1e-12)
    g, v = m.transforms_inside_kernels(XS)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(v, np.tanh(XS @ W), rtol=1e-12)
    total, g = m.kernel_in_scan(XS)
    np.testing.assert_allclose(total, _loss_np(W, XS), rtol=1e-12)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    assert {"loss"} <= set(inline_calls)
