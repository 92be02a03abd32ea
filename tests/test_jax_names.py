"""JAX names real programs use (issue 9 §3): kiln.jacobian, checkpoint/remat, make_jaxpr, eval_shape, disable_jit,
jit(static_argnames=, donate_argnums=), grad with keyword arguments, has_aux on every transformation,
kiln.lax.stop_gradient, kiln.lax.Precision with precision= and preferred_element_type= on the products, and
knp.clip(min=, max=); against numpy, eagerly, under jit and through kiln-run."""
import functools

import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.lax as lax
import kiln.numpy as knp
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad, numerical_jacobian

RNG = np.random.default_rng(0)
W = RNG.standard_normal((3, 2))
X = RNG.standard_normal((4, 3))


def loss(w, x, scale=1.0):
    return knp.sum(knp.tanh(x @ w) ** 2) * scale


def np_loss(w, x, scale=1.0):
    return np.sum(np.tanh(x @ w) ** 2) * scale


# ----------------------------------------------------------------------------- transformations


def test_grad_passes_keyword_arguments_undifferentiated():
    want = numerical_grad(lambda w: np_loss(w, X, 3.0), W)
    np.testing.assert_allclose(kiln.grad(loss)(W, X, scale=3.0), want, rtol=1e-7)
    np.testing.assert_allclose(kiln.grad(loss)(W, x=X, scale=3.0), want, rtol=1e-7)
    value, g = kiln.value_and_grad(loss, argnums=(0, 1))(W, X, scale=3.0)
    np.testing.assert_allclose(value, np_loss(W, X, 3.0), rtol=1e-12)
    np.testing.assert_allclose(g[1], numerical_grad(lambda x: np_loss(W, x, 3.0), X), rtol=1e-7)
    np.testing.assert_allclose(kiln.jit(lambda w, x: kiln.grad(loss)(w, x, scale=3.0))(W, X), want, rtol=1e-7)
    jac = kiln.jacfwd(lambda w, x, scale: knp.tanh(x @ w) * scale)(W, X, scale=2.0)
    np.testing.assert_allclose(jac, numerical_jacobian(lambda w: np.tanh(X @ w) * 2.0, W), rtol=1e-7, atol=1e-9)
    jac = kiln.jacrev(lambda w, x, scale: knp.tanh(x @ w) * scale)(W, X, scale=2.0)
    np.testing.assert_allclose(jac, numerical_jacobian(lambda w: np.tanh(X @ w) * 2.0, W), rtol=1e-7, atol=1e-9)


def test_jacobian_is_jacrev():
    assert kiln.jacobian is kiln.jacrev
    f = lambda w: knp.tanh(X @ w)  # noqa: E731
    np.testing.assert_allclose(kiln.jacobian(f)(W), numerical_jacobian(lambda w: np.tanh(X @ w), W), rtol=1e-7,
                               atol=1e-9)


def with_aux(w):
    y = knp.tanh(X @ w)
    return y, {"mean": knp.mean(y), "count": 3}


def test_has_aux_on_jacfwd_jacrev_hessian_and_vjp():
    want_jac = numerical_jacobian(lambda w: np.tanh(X @ w), W)
    for transform in (kiln.jacfwd, kiln.jacrev):
        jac, aux = transform(with_aux, has_aux=True)(W)
        np.testing.assert_allclose(jac, want_jac, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(aux["mean"], np.mean(np.tanh(X @ W)), rtol=1e-12)
        assert aux["count"] == 3
        jac, aux = kiln.jit(transform(lambda w: (with_aux(w)[0], with_aux(w)[1]["mean"]), has_aux=True))(W)
        np.testing.assert_allclose(jac, want_jac, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(aux, np.mean(np.tanh(X @ W)), rtol=1e-12)
    hess, aux = kiln.hessian(lambda v: (knp.sum(v ** 3), knp.max(v)), has_aux=True)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(hess, np.diag([6.0, 12.0]), rtol=1e-12)
    assert float(aux) == 2.0
    x = np.array([0.0, 1.0])
    out, tangent, aux = kiln.jvp(lambda v: (knp.sin(v), (knp.cos(v), knp.argmax(v))), (x,), (np.ones(2),),
                                 has_aux=True)
    check_like_numpy([out, tangent, aux[0], aux[1]], [np.sin(x), np.cos(x), np.cos(x), np.argmax(x)])
    out, tangent, aux = kiln.jit(lambda v: kiln.jvp(lambda u: (u * u, {"c": knp.cos(u)}), (v,), (v,), has_aux=True))(x)
    check_like_numpy([out, tangent, aux["c"]], [x * x, 2 * x * x, np.cos(x)])
    with pytest.raises(TypeError, match="jvp of <lambda> with has_aux=True: fn must return a pair"):
        kiln.jvp(lambda v: v, (x,), (x,), has_aux=True)
    out, vjp_fn, aux = kiln.vjp(with_aux, W, has_aux=True)
    np.testing.assert_allclose(vjp_fn(np.ones_like(out))[0], numerical_grad(lambda w: np.sum(np.tanh(X @ w)), W),
                               rtol=1e-7)
    with pytest.raises(TypeError, match="jacrev of <lambda> with has_aux=True: fn must return a pair"):
        kiln.jacrev(lambda w: w, has_aux=True)(W)
    with pytest.raises(TypeError, match="jacfwd of <lambda> with has_aux=True: fn must return a pair"):
        kiln.jacfwd(lambda w: w, has_aux=True)(W)
    with pytest.raises(TypeError, match="grad of <lambda> with has_aux=True: fn must return a pair"):
        kiln.grad(lambda w: knp.sum(w), has_aux=True)(W)


def test_checkpoint_gives_the_same_values_and_derivatives():
    def block(w, x):
        return knp.sum(knp.sin(x @ w) * knp.cos(x @ w))

    want = numerical_grad(lambda w: np.sum(np.sin(X @ w) * np.cos(X @ w)), W)
    policy = kiln.checkpoint_policies.dots_saveable
    for decorated in (kiln.checkpoint(block), kiln.remat(block), kiln.checkpoint(policy=policy)(block),
                      functools.partial(kiln.checkpoint, prevent_cse=False)(block)):
        np.testing.assert_allclose(kiln.grad(decorated)(W, X), want, rtol=1e-7)
        assert decorated.__name__ == "block"
    decorated = kiln.checkpoint(block, policy=policy)
    np.testing.assert_allclose(kiln.jit(kiln.grad(decorated))(W, X), want, rtol=1e-7)
    np.testing.assert_allclose(kiln.hessian(decorated)(W, X), kiln.hessian(block)(W, X), rtol=1e-12)
    np.testing.assert_allclose(kiln.vmap(kiln.grad(decorated), in_axes=(None, 0))(W, X[:, None]),
                               kiln.vmap(kiln.grad(block), in_axes=(None, 0))(W, X[:, None]), rtol=1e-12)


def test_checkpoint_static_argnums_and_errors():
    @functools.partial(kiln.checkpoint, static_argnums=(1,))
    def power(x, n):
        out = x
        for _ in range(n - 1):  # a Python loop over the static argument
            out = out * x
        return knp.sum(out)

    x = np.array([1.5, -0.5])
    np.testing.assert_allclose(kiln.grad(power)(x, 3), 3 * x ** 2, rtol=1e-12)
    np.testing.assert_allclose(kiln.jit(kiln.grad(power), static_argnums=1)(x, 3), 3 * x ** 2, rtol=1e-12)
    with pytest.raises(ValueError, match="checkpoint of power: static_argnums 1 is out of range for a call with 1"):
        power(x)
    with pytest.raises(TypeError, match="checkpoint of power: policy must be None or a callable"):
        kiln.checkpoint(power, policy="dots")
    with pytest.raises(TypeError, match="checkpoint of power: static_argnums must be ints"):
        kiln.checkpoint(power, static_argnums=("n",))
    with pytest.raises(TypeError, match="checkpoint of power: prevent_cse must be a bool"):
        kiln.checkpoint(power, prevent_cse=None)
    assert kiln.checkpoint_name(x, "h") is x
    with pytest.raises(TypeError, match="checkpoint_name: name must be a str"):
        kiln.checkpoint_name(x, 3)


def test_checkpoint_policies_are_jax_predicates():
    dot = lax.prims.dot_general
    p = kiln.checkpoint_policies
    assert p.everything_saveable(dot) and not p.nothing_saveable(dot)
    assert p.dots_saveable(dot) and not p.dots_saveable(lax.prims.add)
    assert p.dots_with_no_batch_dims_saveable(dot, dimension_numbers=(((1,), (0,)), ((), ())))
    assert not p.dots_with_no_batch_dims_saveable(dot, dimension_numbers=(((2,), (1,)), ((0,), (0,))))
    both = p.save_from_both_policies(p.nothing_saveable, p.dots_saveable)
    assert both(dot) and not both(lax.prims.add)


def test_lax_stop_gradient():
    x = np.array([1.0, 2.0])
    g = kiln.grad(lambda v: knp.sum(v * lax.stop_gradient(v)))(x)
    np.testing.assert_array_equal(g, x)
    tree = lax.stop_gradient({"a": x, "b": (x,)})
    np.testing.assert_array_equal(tree["b"][0], x)
    np.testing.assert_array_equal(kiln.jit(kiln.grad(lambda v: knp.sum(v * lax.stop_gradient(v))))(x), x)


# ----------------------------------------------------------------------------- make_jaxpr, eval_shape, jit options


def test_make_jaxpr_prints_kilns_ir():
    f = lambda x, y: knp.sum(knp.sin(x) * y) + 1.0  # noqa: E731
    x = np.ones(3, np.float32)
    closed = kiln.make_jaxpr(f)(x, x)
    text = str(closed)
    assert text.startswith("graph(%0: f32[3], %1: f32[3]) -> f32[]")
    assert "sin %0" in text and "reduce_sum[axes=(0,)]" in text
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["sin", "mul", "reduce_sum", "add"]
    assert [e.primitive.name for e in closed.eqns] == ["sin", "mul", "reduce_sum", "add"]
    assert [(a.shape, a.dtype) for a in closed.in_avals] == [((3,), np.float32)] * 2
    assert closed.out_avals[0].shape == () and closed.consts == []
    assert text == kiln.jit(f).lower(x, x)
    closed, shape = kiln.make_jaxpr(lambda x, n: {"y": knp.tile(x, n)}, static_argnums=1, return_shape=True)(x, 2)
    assert shape == {"y": kiln.ShapeDtypeStruct((6,), np.float32)}
    assert len(closed.jaxpr.invars) == 1
    grad_ir = str(kiln.make_jaxpr(kiln.grad(lambda v: knp.sum(knp.tanh(v))))(x))
    assert "tanh" in grad_ir and "mul" in grad_ir
    assert "x: f32[2, 3]" not in str(kiln.make_jaxpr(f)(kiln.ShapeDtypeStruct((2, 3), np.float32), x[:1]))


def test_eval_shape():
    out = kiln.eval_shape(lambda a, b: (a @ b, knp.sum(a, dtype=np.float64)), kiln.ShapeDtypeStruct((4, 3), np.float32),
                          np.ones((3, 5), np.float32))
    assert out == (kiln.ShapeDtypeStruct((4, 5), np.float32), kiln.ShapeDtypeStruct((), np.float64))
    assert out[0].ndim == 2 and out[0].size == 20 and repr(out[0]) == "ShapeDtypeStruct(shape=(4, 5), dtype=float32)"
    assert out[0].weak_type is False  # JAX's default
    weak = kiln.eval_shape(lambda a, b: (a * 2.0, b + 1, b + np.int32(1)), 3.0,
                           kiln.ShapeDtypeStruct((2,), np.int32, weak_type=True))
    assert [(o.dtype, o.weak_type) for o in weak] == [(np.float32, True), (np.int32, True), (np.int32, False)]
    assert repr(weak[0]) == "ShapeDtypeStruct(shape=(), dtype=float32, weak_type=True)"
    assert weak[0] != kiln.ShapeDtypeStruct((), np.float32)
    with pytest.raises(TypeError, match="eval_shape of <lambda>: argument leaf 0: expected an array"):
        kiln.eval_shape(lambda a: a, "text")


def test_disable_jit_runs_python_eagerly():
    seen = []

    @kiln.jit
    def f(x):
        seen.append(type(x))
        return x * 2

    x = np.arange(3.0)
    with kiln.disable_jit():
        np.testing.assert_array_equal(f(x), x * 2)
        np.testing.assert_array_equal(f(x), x * 2)
    assert seen == [np.ndarray, np.ndarray]
    assert f.trace_count == 0
    f(x)
    assert f.trace_count == 1 and seen[-1] is not np.ndarray
    with kiln.disable_jit(False):
        f(x)
    assert len(seen) == 3


def test_jit_static_argnames_and_donation():
    def f(x, axis, keep=False):
        return knp.sum(x, axis=axis, keepdims=keep)

    x = np.arange(6.0).reshape(2, 3)
    g = kiln.jit(f, static_argnames=("axis", "keep"))
    np.testing.assert_array_equal(g(x, 1), x.sum(1))
    np.testing.assert_array_equal(g(x, axis=0, keep=True), x.sum(0, keepdims=True))
    np.testing.assert_array_equal(g(x, 0), x.sum(0))
    assert g.trace_count == 3
    g(x, axis=0)
    assert g.trace_count == 3
    h = kiln.jit(f, static_argnums=(1,), static_argnames="keep", donate_argnums=0)
    np.testing.assert_array_equal(h(x, 1, True), x.sum(1, keepdims=True))
    np.testing.assert_array_equal(x, np.arange(6.0).reshape(2, 3))
    decorated = kiln.jit(static_argnames="axis", donate_argnames="x")(f)
    np.testing.assert_array_equal(decorated(x, axis=1), x.sum(1))
    np.testing.assert_array_equal(kiln.jit(f, static_argnums=-2)(x, 1), x.sum(1))
    with pytest.raises(ValueError, match="jit of f: static_argnames 'axes' is not an argument of f"):
        kiln.jit(f, static_argnames="axes")
    with pytest.raises(ValueError, match="jit of f: static_argnums 3 is out of range; it takes 3"):
        kiln.jit(f, static_argnums=3)
    with pytest.raises(TypeError, match="jit of f: donate_argnums must be ints"):
        kiln.jit(f, donate_argnums="x")



def test_jit_keyword_only_arguments_static_or_traced():
    def f(x, *, axis, scale=2.0):
        return knp.sum(x, axis=axis) * scale

    x = np.arange(6.0).reshape(2, 3)
    g = kiln.jit(f, static_argnames="axis")
    np.testing.assert_array_equal(g(x, axis=1), x.sum(1) * 2)
    np.testing.assert_array_equal(g(x, axis=1, scale=np.float64(3)), x.sum(1) * 3)
    np.testing.assert_array_equal(g(x, axis=0, scale=1.5), x.sum(0) * 1.5)
    np.testing.assert_array_equal(g(x, axis=0, scale=2.5), x.sum(0) * 2.5)  # scale is traced: no new trace
    assert g.trace_count == 3
    assert "reduce_sum[axes=(1,)]" in g.lower(x, axis=1)
    np.testing.assert_array_equal(kiln.jit(lambda v, **kw: v * kw["a"])(x, a=2.0), x * 2)
    with pytest.raises(TypeError, match="f is missing the keyword argument 'axis'"):
        g(x)
    with pytest.raises(TypeError, match="static argument 'axis' must be hashable, got list"):
        g(x, axis=[0])
    with pytest.raises(ValueError, match="jit of f: static_argnames 'axes' is not an argument of f"):
        kiln.jit(f, static_argnames="axes")
    total = kiln.jit(lambda v, *, axis, scale: knp.sum(f(v, axis=axis, scale=scale)), static_argnames="axis")
    np.testing.assert_allclose(kiln.grad(total)(x, axis=0, scale=3.0), np.full((2, 3), 3.0))


# ----------------------------------------------------------------------------- precision and preferred_element_type


def test_precision_enum_and_strings():
    assert lax.Precision("highest") is lax.Precision.HIGHEST
    assert lax.Precision("tensorfloat32") is lax.Precision.HIGH and lax.Precision(0) is lax.Precision.DEFAULT
    assert str(lax.Precision.HIGH) == "HIGH" and repr(lax.Precision.HIGH) == "Precision.HIGH"
    assert lax.canonicalize_precision(None) is None
    assert lax.canonicalize_precision("float32") == (lax.Precision.HIGHEST, lax.Precision.HIGHEST)
    assert lax.canonicalize_precision(("high", lax.Precision.DEFAULT)) == (lax.Precision.HIGH, lax.Precision.DEFAULT)
    for bad in ("fast", 3, ("high",), ("high", "nope")):
        with pytest.raises(ValueError, match="precision must be None, a kiln.lax.Precision"):
            lax.canonicalize_precision(bad)


PRODUCTS = {
    "dot": (lambda a, b, **k: knp.dot(a, b.T, **k), lambda a, b: a @ b.T),
    "matmul": (lambda a, b, **k: knp.matmul(a, b.T, **k), lambda a, b: a @ b.T),
    "einsum": (lambda a, b, **k: knp.einsum("ij,kj->ik", a, b, **k), lambda a, b: a @ b.T),
    "tensordot": (lambda a, b, **k: knp.tensordot(a, b, axes=([1], [1]), **k), lambda a, b: a @ b.T),
    "inner": (lambda a, b, **k: knp.inner(a, b, **k), lambda a, b: a @ b.T),
    "lax.dot": (lambda a, b, **k: lax.dot(a, b.T, **k), lambda a, b: a @ b.T),
    "lax.dot_general": (lambda a, b, **k: lax.dot_general(a, b, (((1,), (1,)), ((), ())), **k),
                        lambda a, b: a @ b.T),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_accept_precision(name, tmp_path):
    fn, ref = PRODUCTS[name]
    a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((2, 4)).astype(np.float32)
    want = ref(a, b).astype(np.float32)
    for precision in (None, "highest", lax.Precision.DEFAULT, ("high", "default")):
        check_like_numpy(fn(a, b, precision=precision), want, tol=1e-5)
    check_like_numpy(kiln.jit(functools.partial(fn, precision=lax.Precision.HIGHEST))(a, b), want, tol=1e-5)
    with pytest.raises(ValueError, match=r"(dot|dot_general|matmul|einsum|tensordot|inner): precision must be"):
        fn(a, b, precision="bogus")


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_preferred_element_type_int8_accumulates_in_int32(name, tmp_path):
    fn, ref = PRODUCTS[name]
    a = RNG.integers(-128, 128, (3, 8)).astype(np.int8)
    b = RNG.integers(-128, 128, (2, 8)).astype(np.int8)
    want = lambda a, b: ref(a.astype(np.int32), b.astype(np.int32))  # noqa: E731
    assert np.abs(want(a, b)).max() > 127  # wider than int8: the int32 accumulation matters
    kfn = functools.partial(fn, preferred_element_type=np.int32)
    eager_jit_and_kiln_run(kfn, want, a, b, tmp_path=tmp_path)
    check_like_numpy(fn(a, b), ref(a, b))  # without it: int8, wrapping, as numpy and JAX
    with pytest.raises(TypeError, match="preferred_element_type int8 must not be narrower than the operands' type int32"):
        fn(a.astype(np.int32), b.astype(np.int32), preferred_element_type=np.int8)


@pytest.mark.parametrize("name", ["matmul", "lax.dot_general"])
def test_preferred_element_type_floats(name):
    fn, ref = PRODUCTS[name]
    a = RNG.standard_normal((3, 8)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((2, 8)).astype(ml_dtypes.bfloat16)
    want = lambda a, b: ref(a.astype(np.float32), b.astype(np.float32))  # noqa: E731
    eager_and_jit(functools.partial(fn, preferred_element_type=np.float32), want, a, b, tol=1e-5)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    check_like_numpy(fn(a32, b32, preferred_element_type=np.float16), ref(a32, b32).astype(np.float16))
    check_like_numpy(fn(a32, b32, preferred_element_type=np.float64),
                     ref(a32.astype(np.float64), b32.astype(np.float64)), tol=1e-12)


def test_preferred_element_type_gradient_is_in_the_operand_dtype():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal((4, 2))
    g = kiln.grad(lambda a: knp.sum(knp.matmul(a, b.astype(np.float32), preferred_element_type=np.float64)))(a)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, np.tile(b.astype(np.float32).sum(1), (3, 1)), rtol=1e-6)
    g = kiln.grad(lambda b: knp.sum(lax.dot(a.astype(np.float64), b, preferred_element_type=np.float64) ** 2))(b)
    np.testing.assert_allclose(g, numerical_grad(lambda b: np.sum((a.astype(np.float64) @ b) ** 2), b), rtol=1e-6)


def test_lax_dot_general_mixed_dtypes_and_errors():
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 2), ml_dtypes.bfloat16)
    out = lax.dot_general(a, b, (((1,), (0,)), ((), ())))
    assert out.dtype == np.float32 and np.all(np.asarray(out) == 3)
    mixed = lax.dot_general(a.astype(np.float16), b, (((1,), (0,)), ((), ())))  # JAX's rule: the wider exponent
    assert mixed.dtype == ml_dtypes.bfloat16 and np.all(np.asarray(mixed, np.float32) == 3)
    assert lax.dot_general(np.ones((2, 3), np.int8), np.ones((3, 2), np.uint8), (((1,), (0,)), ((), ()))).dtype == np.int8
    with pytest.raises(ValueError, match="lax.dot: dimension_numbers must be given"):
        lax.dot(np.ones((2, 2, 2)), np.ones((2, 2)))
    with pytest.raises(TypeError, match="dot_general: preferred_element_type 'float128' is not a kiln dtype"):
        lax.dot(a, a.T, preferred_element_type="float128")
    np.testing.assert_array_equal(lax.dot(np.arange(3.0), np.arange(3.0)), 5.0)


# ----------------------------------------------------------------------------- clip


def test_clip_min_max_keywords(tmp_path):
    x = np.linspace(-2, 2, 9).astype(np.float32)
    eager_jit_and_kiln_run(lambda v: knp.clip(v, min=-1, max=0.5), lambda v: np.clip(v, min=-1, max=0.5), x,
                           tmp_path=tmp_path)
    eager_and_jit(lambda v: knp.clip(v, max=0.5), lambda v: np.clip(v, max=0.5), x)
    eager_and_jit(lambda v: knp.clip(v, min=np.float32(0)), lambda v: np.clip(v, min=np.float32(0)), x)
    eager_and_jit(lambda v: knp.clip(v, -1, 1), lambda v: np.clip(v, -1, 1), x)
    eager_and_jit(lambda v: knp.clip(v), lambda v: np.clip(v, None, None), x)
    with pytest.raises(TypeError, match="clip: give the lower bound once, as a_min or as min, not both"):
        knp.clip(x, -1, min=0)
    with pytest.raises(TypeError, match="clip: give the upper bound once, as a_max or as max, not both"):
        knp.clip(x, None, 1, max=0)


# ----------------------------------------------------------------------------- devices


def test_one_host_device():
    assert kiln.devices() == kiln.local_devices() == [kiln.Device()]
    assert kiln.device_count() == kiln.local_device_count() == 1 and kiln.default_backend() == "cpu"
    assert kiln.devices()[0].platform == "cpu" and str(kiln.devices()[0]) == "CpuDevice(id=0)"
    x = np.arange(3.0)
    tree = {"a": x, "b": [x]}
    assert kiln.device_put(x) is x and kiln.device_put(tree, kiln.devices()[0]) is tree
    assert kiln.device_get(tree) is tree and kiln.block_until_ready(tree) is tree
    out = kiln.block_until_ready(kiln.jit(lambda v: v * 2)(x))
    np.testing.assert_array_equal(out, x * 2)
    with pytest.raises(ValueError, match="device_put: kiln has one device, the host CPU; got 'gpu'"):
        kiln.device_put(x, "gpu")
    with pytest.raises(RuntimeError, match="devices: backend 'gpu' is not available"):
        kiln.devices("gpu")


# ----------------------------------------------------------------------------- config, vmap's axis_size


def test_config_update():
    cfg = kiln.config
    cfg.update("jax_enable_x64", True)
    assert cfg.jax_enable_x64 is True and cfg.read("jax_enable_x64") is True
    assert knp.asarray(np.float64(1.5)).dtype == np.float64  # kiln has 64-bit types either way
    cfg.update("jax_enable_x64", False)
    cfg.update("jax_platform_name", "cpu")
    cfg.update("jax_default_matmul_precision", "highest")
    cfg.update("jax_default_matmul_precision", None)
    seen = []
    f = kiln.jit(lambda v: (seen.append(type(v)), v + 1)[1])
    try:
        cfg.update("jax_disable_jit", True)
        np.testing.assert_array_equal(f(np.zeros(2)), np.ones(2))
        assert seen == [np.ndarray] and f.trace_count == 0
    finally:
        cfg.update("jax_disable_jit", False)
    f(np.zeros(2))
    assert f.trace_count == 1
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_enable_x65"):
        cfg.update("jax_enable_x65", True)
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_nope"):
        cfg.jax_nope  # noqa: B018
    with pytest.raises(ValueError, match="config: jax_platforms='gpu' is not supported by kiln"):
        cfg.update("jax_platforms", "gpu")
    with pytest.raises(ValueError, match="config: jax_debug_nans=True is not supported by kiln .no NaN checks."):
        cfg.update("jax_debug_nans", True)
    with pytest.raises(ValueError, match="config jax_default_matmul_precision: precision must be None"):
        cfg.update("jax_default_matmul_precision", "fast")
    with pytest.raises(ValueError, match="config: jax_enable_x64 must be a bool"):
        cfg.update("jax_enable_x64", "yes")
    with pytest.raises(AttributeError, match=r"set kiln.config flags with kiln.config.update\('jax_enable_x64'"):
        cfg.jax_enable_x64 = True


def test_vmap_axis_size_and_axis_name():
    x = np.arange(3.0)
    check_like_numpy(kiln.vmap(lambda v: v * 2, in_axes=None, axis_size=2)(x), np.stack([x * 2, x * 2]))
    check_like_numpy(kiln.jit(kiln.vmap(lambda v: v + 1, in_axes=None, axis_size=4))(np.float32(1)),
                     np.full(4, 2, np.float32))
    check_like_numpy(kiln.vmap(lambda v: v * 2, axis_name="batch", spmd_axis_name="data")(x), x * 2)
    check_like_numpy(kiln.vmap(lambda v: v * 2, axis_size=3)(x), x * 2)
    with pytest.raises(kiln.transforms.batching.BatchingError, match="vmap of <lambda>: axis_size 2 differs from"):
        kiln.vmap(lambda v: v, axis_size=2)(x)


def test_linearize_named_call_and_named_scope():
    x = np.array([0.3, -1.2])
    out, f_jvp = kiln.linearize(lambda v: knp.sin(v) * v, x)
    np.testing.assert_allclose(out, np.sin(x) * x, rtol=1e-12)
    t = np.array([1.0, 2.0])
    np.testing.assert_allclose(f_jvp(t), (np.cos(x) * x + np.sin(x)) * t, rtol=1e-12)
    out = kiln.jit(lambda v, w: kiln.linearize(lambda a, b: a * b, v, w)[1](w, v))(x, t)
    np.testing.assert_allclose(out, t * t + x * x, rtol=1e-12)  # d(a b) = b da + a db at (x, t) along (t, x)
    with pytest.raises(TypeError, match="linearize of <lambda>: f_jvp takes 1 tangents"):
        kiln.linearize(lambda v: v, x)[1](x, x)
    f = kiln.named_call(lambda v: v + 1, name="step")
    with kiln.named_scope("block"):
        np.testing.assert_array_equal(kiln.jit(f)(x), x + 1)
    with pytest.raises(TypeError, match="named_scope: name must be a str"):
        kiln.named_scope(3)


def test_holomorphic_and_allow_int_are_refused_with_a_reason():
    f = lambda v: knp.sum(v)  # noqa: E731
    x = np.ones(2)
    np.testing.assert_array_equal(kiln.grad(f, holomorphic=False, allow_int=False)(x), np.ones(2))
    for transform, where in ((kiln.grad, "grad"), (kiln.value_and_grad, "grad"), (kiln.jacfwd, "jacfwd"),
                             (kiln.jacrev, "jacrev"), (kiln.hessian, "hessian")):
        with pytest.raises(kiln.transforms.jvp.DifferentiationError,
                           match=f"{where} of <lambda>: holomorphic=True needs complex inputs"):
            transform(f, holomorphic=True)
    with pytest.raises(kiln.transforms.jvp.DifferentiationError, match="grad of <lambda>: allow_int=True is not"):
        kiln.grad(f, allow_int=True)


def test_jit_lower_as_text_and_compile():
    f = kiln.jit(lambda v: knp.sin(v) * 2)
    x = np.ones(3, np.float32)
    lowered = f.lower(x)
    assert isinstance(lowered, str) and "sin %0" in lowered and lowered.as_text() == str(lowered)
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(x), np.sin(x) * 2, rtol=1e-6)
    assert compiled.as_text() == lowered.as_text()
