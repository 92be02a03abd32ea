"""Weak types (values computed from Python numbers alone, arrays made without dtype=) through gradients,
Jacobians, jit results, reductions and constants (docs/numpy.md, "Default dtypes"): kiln's weak values are
numpy's float64, so an operation that dropped the weak type would turn the float32 values it later meets
into float64."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.core.array import is_weak

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def weak_vector():
    return knp.zeros(3)


def test_gradient_at_a_weak_input_is_weak_and_has_its_dtype():
    x = knp.asarray(2.0)
    g = kiln.grad(lambda x: x * x)(x)
    assert g.dtype == F64 and is_weak(g)
    np.testing.assert_allclose(g, 4.0)
    assert (np.ones(2, np.float32) * g).dtype == F32


def test_gradient_of_a_weak_bias_used_with_float32_data():
    w = np.ones((2, 3), np.float32)
    b = weak_vector()

    def loss(b, w):
        return knp.sum(knp.tanh(np.ones((4, 2), np.float32) @ w + b))

    for run in (lambda f: f, kiln.jit):
        value, g = run(kiln.value_and_grad(loss))(b, w)
        assert value.dtype == F32
        assert g.dtype == F64 and is_weak(g)
        want = np.sum(1 - np.tanh(np.full((4, 3), 2.0)) ** 2, axis=0)
        np.testing.assert_allclose(g, want, rtol=1e-6)
        assert (b - 0.1 * g + np.ones(3, np.float32)).dtype == F32


def test_gradient_of_a_weak_constant_inside_scan_stays_weak():
    b = weak_vector()

    def loss(b):
        def step(c, x):
            c = c * 0.5 + b + x
            return c, c
        _, ys = kiln.lax.scan(step, np.zeros(3, np.float32), np.ones((4, 3), np.float32))
        return knp.sum(ys)

    g = kiln.grad(loss)(b)
    assert g.dtype == F64 and is_weak(g)
    # d/db of sum over t of c_t, c_t = 0.5 c_{t-1} + b + 1: 1 + 1.5 + 1.75 + 1.875 per element
    np.testing.assert_allclose(g, np.full(3, 6.125), rtol=1e-6)


def test_jit_results_keep_their_weak_type():
    out = kiln.jit(lambda x: x * 2)(weak_vector())
    assert out.dtype == F64 and is_weak(out)
    strong = kiln.jit(lambda x: x * 2)(np.zeros(3))
    assert not is_weak(strong)
    assert (out + np.ones(3, np.float32)).dtype == F32


@pytest.mark.parametrize("fn", [knp.sum, knp.mean, knp.var, knp.std, knp.max, knp.prod, knp.cumsum,
                                lambda x: knp.diag(x), lambda x: x.at[0].set(2.0), lambda x: x[1],
                                lambda x: knp.stack([x[0], x[1]]), lambda x: knp.linalg.norm(x)])
def test_operations_on_weak_values_alone_stay_weak(fn):
    x = knp.asarray([1.0, 2.0, 4.0])
    for run in (lambda f: f, kiln.jit):
        out = run(fn)(x)
        assert out.dtype == F64 and is_weak(out), (out.dtype, is_weak(out))


def test_explicit_dtype_is_strong():
    x = knp.asarray([1.0, 2.0])
    assert not is_weak(knp.sum(x, dtype=np.float64))
    assert not is_weak(x.astype(np.float64))
    assert not is_weak(knp.zeros(2, np.float64))


def test_zeros_like_keeps_the_weak_type_and_takes_shape():
    assert is_weak(knp.zeros_like(weak_vector()))
    assert not is_weak(knp.zeros_like(np.zeros(3)))
    assert knp.ones_like(weak_vector(), shape=(2, 2)).shape == (2, 2)
    assert knp.full_like(np.zeros(3, np.float32), 7, shape=(4,)).dtype == F32


def test_jacobians_of_weak_functions_are_weak():
    def f(x):
        return knp.stack([x[0] * x[1], knp.sin(x[0])])

    x = knp.asarray([0.5, 2.0])
    for jac in (kiln.jacfwd, kiln.jacrev):
        j = jac(f)(x)
        assert j.dtype == F64 and is_weak(j)
        np.testing.assert_allclose(j, [[2.0, 0.5], [np.cos(0.5), 0.0]], rtol=1e-12)
    # float32 data meeting the Jacobian stays float32 (a scan carry keeps its dtype)
    carry = kiln.lax.scan(lambda c, _: (kiln.jacfwd(f)(x) @ c, None), np.ones(2, np.float32), None, length=2)[0]
    assert carry.dtype == F32


def test_weak_python_float_does_not_narrow_a_weak_float64_array():
    x = knp.asarray([3.0, 4.0])
    assert kiln.jit(lambda x: knp.where(x > 0, 1.0, x))(x).dtype == F64
    assert kiln.jit(lambda x: knp.linalg.norm(x))(x).dtype == F64


def test_export_traces_weak_arguments_like_jit(tmp_path):
    from kiln_tools import kiln_run_exported

    def f(scale, data):
        return (data * scale,)

    outs = kiln_run_exported(f, knp.asarray(0.5), np.arange(3, dtype=np.float32), tmp_path=tmp_path)
    assert outs[0].dtype == F32
    np.testing.assert_allclose(outs[0], [0.0, 0.5, 1.0])


def test_constants_are_not_confused_when_a_freed_array_id_is_reused():
    """Two constants made and dropped in turn inside one trace (the Jacobian bases of two arguments) are
    two constants, even when the second reuses the first's memory address."""
    def dynamics(x, u):
        return knp.stack([x[0] + 0.1 * x[1], x[1] + 0.1 * (knp.sin(x[0]) + u[0])])

    def both(xs, us):
        return (kiln.vmap(kiln.jacfwd(dynamics, argnums=0))(xs, us),
                kiln.vmap(kiln.jacfwd(dynamics, argnums=1))(xs, us))

    xs, us = np.ones((5, 2), np.float32), knp.zeros((5, 1))
    for _ in range(3):
        a, b = kiln.jit(both)(xs, us)
        assert a.shape == (5, 2, 2) and b.shape == (5, 2, 1)
        np.testing.assert_allclose(b[:, :, 0], np.tile([0.0, 0.1], (5, 1)), rtol=1e-6)


def test_numpy_array_indexed_by_a_traced_value_names_the_fix():
    table = np.arange(10.0)
    with pytest.raises(TypeError, match=r"indexed by a traced value .*kiln.numpy.asarray\(table\)\[i\]"):
        kiln.jit(lambda i: table[i])(3)
    with pytest.raises(kiln.core.errors.ConcretizationError, match="indexed by a traced value"):
        kiln.jit(lambda i: [1.0, 2.0][i])(1)
    assert float(kiln.jit(lambda i: knp.asarray(table)[i])(3)) == 3.0


def test_gradient_at_a_python_float_is_weak():
    g = kiln.grad(lambda x: x * x)(2.0)
    assert g.dtype == F64 and is_weak(g) and float(g) == 4.0
    traced = kiln.jit(lambda: kiln.grad(lambda x: x * x)(2.0))()
    assert traced.dtype == F32 and is_weak(traced) and float(traced) == 4.0  # JAX's weak float32


def test_jvp_tangent_of_another_dtype_is_a_type_error():
    """A strongly typed tangent must have its primal's tangent dtype (JAX's TypeError); a Python float takes it."""
    x = np.float32(1.5)
    out, t = kiln.jvp(lambda v: v * 2, (x,), (1.0,))
    assert t.dtype == F32 and float(t) == 2.0
    for bad, name in ((np.float16(1), "float16"), (np.float64(1), "float64"), (1, "int")):
        with pytest.raises(TypeError, match=rf"jvp of <lambda>: tangent leaf 1 has dtype {name}\w*, but its primal of "
                                            r"dtype float32 takes tangents of dtype float32"):
            kiln.jvp(lambda a, v: a * v, (x, x), (x, bad))
