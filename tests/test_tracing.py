"""Tracing, the IR printer and verifier, and tracing errors."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import ConcretizationError, Program
from kiln.core.aval import ShapedArray
from kiln.core.errors import NumpyOnTracerError, UnexpectedTracerError
from kiln.core.ir import IRVerificationError, Var, verify_graph
from kiln.core.trace import trace_to_graph
from kiln.lax import prims


def _trace(fn, *avals):
    return trace_to_graph(lambda *a: [fn(*a)], list(avals))


F32_2x3 = ShapedArray((2, 3), np.float32)


def test_graph_is_typed_ssa_and_prints():
    g = _trace(lambda x: knp.tanh(x * 2 + 1).sum(axis=1), F32_2x3)
    verify_graph(g)
    text = str(g)
    assert text.startswith("graph(%0: f32[2,3]) -> f32[2] {")
    assert "tanh" in text and "reduce_sum[axes=(1,)]" in text
    assert "return" in text
    assert [str(a) for a in g.out_avals] == ["f32[2]"]
    assert "test_tracing.py" in text  # equations carry the user's source line


def test_weak_python_scalars_keep_array_dtype():
    g = _trace(lambda x: x * 2 + 1.5, F32_2x3)
    assert g.out_avals[0].dtype == np.float32
    gi = _trace(lambda x: x + 1, ShapedArray((3,), np.int32))
    assert gi.out_avals[0].dtype == np.int32
    gf = _trace(lambda x: x + 1.5, ShapedArray((3,), np.int32))
    assert gf.out_avals[0].dtype == np.float32


def test_array_promotion_follows_numpy():
    g = _trace(lambda a, b: a + b, ShapedArray((3,), np.int32), ShapedArray((3,), np.float64))
    assert g.out_avals[0].dtype == np.float64
    g = _trace(lambda a, b: a * b, ShapedArray((3,), np.int8), ShapedArray((3,), np.int32))
    assert g.out_avals[0].dtype == np.int32


def test_python_if_on_traced_value_names_the_source_line():
    def f(x):
        if x.sum() > 0:  # the line the error must name
            return x
        return -x

    with pytest.raises(ConcretizationError) as info:
        _trace(f, F32_2x3)
    message = str(info.value)
    assert "test_tracing.py" in message and "if x.sum() > 0" in message
    assert "kiln.lax.cond" in message


def test_int_of_traced_value_is_an_error():
    with pytest.raises(ConcretizationError):
        _trace(lambda x: x.reshape(int(x.sum())), F32_2x3)


def test_escaped_tracer_is_an_error():
    leaked = []
    _trace(lambda x: leaked.append(x) or x, F32_2x3)
    with pytest.raises(UnexpectedTracerError, match="escaped"):
        _trace(lambda y: y + leaked[0], F32_2x3)


def test_verifier_rejects_use_before_definition_and_wrong_types():
    g = _trace(lambda x: x + 1.0, F32_2x3)
    g.eqns[0].invars[0] = Var(F32_2x3)
    with pytest.raises(IRVerificationError, match="used before"):
        verify_graph(g)
    g = _trace(lambda x: x * x, F32_2x3)
    g.eqns[0].outvars[0].aval = ShapedArray((3, 2), np.float32)
    with pytest.raises(IRVerificationError, match="abstract evaluation"):
        verify_graph(g)


def test_broadcasting_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\)"):
        _trace(lambda x, y: x + y, F32_2x3, ShapedArray((4,), np.float32))


def test_primitive_shape_checks():
    with pytest.raises(prims.ShapeError, match="operands must match"):
        _trace(lambda x, y: prims.add.bind(x, y), F32_2x3, ShapedArray((3,), np.float32))


def test_constants_are_captured_once():
    table = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = _trace(lambda x: x + table + table, F32_2x3)
    assert len(g.consts) == 1 and g.consts[0] is table


# ---- every error raised while tracing names the user's line ------------------------------------
# Each function's second line is the one its error must name.

def setitem(x):
    x[0] = 1
    return x


def item(x):
    return x.item()


def tolist(x):
    return x.tolist()


def bad_dtype(x):
    return x.astype("float128")


def out_keyword(x):
    return knp.exp(x, out=x)


def bad_axis(x):
    return knp.sum(x, axis=4)


def bad_reshape(x):
    return knp.reshape(x, (5,))


def bad_matmul(x):
    return x @ x


def bad_broadcast(x):
    return x + np.ones((4,), np.float32)


def unknown_attribute(x):
    return x.no_such_attribute


def numpy_sin(x):
    return np.sin(x)


def numpy_dot(x):
    return np.dot(x, x.T)


def numpy_asarray(x):
    return np.asarray(x) + 1


def python_if(x):
    return x if x.sum() > 0 else -x


def _helper_with_bad_concatenate(x):
    return knp.concatenate([x, x.T])


def via_helper(x):
    return _helper_with_bad_concatenate(x) * 2


TRACING_ERRORS = [
    (setitem, TypeError, "immutable.*x.at"),
    (item, ConcretizationError, r"x\.item\(\) needs the value of a traced array \(f32\[2,3\]\)"),
    (tolist, ConcretizationError, r"x\.tolist\(\) needs the value"),
    (bad_dtype, TypeError, "float128 is not supported"),
    (out_keyword, NotImplementedError, "exp: out= is not supported: kiln arrays are immutable"),
    (bad_axis, ValueError, "axis 4 is out of bounds"),
    (bad_reshape, ValueError, r"cannot reshape array of size 6 into shape \(5,\)"),
    (bad_matmul, ValueError, r"matmul.*\(2, 3\) @ \(2, 3\)"),
    (bad_broadcast, ValueError, r"\(2, 3\) and \(4,\) cannot be broadcast"),
    (unknown_attribute, AttributeError, "kiln arrays have no attribute 'no_such_attribute'"),
    (numpy_sin, NumpyOnTracerError, "numpy.sin was applied to a traced array.*use kiln.numpy.sin"),
    (numpy_dot, NumpyOnTracerError, "numpy.dot was applied to a traced array.*use kiln.numpy.dot"),
    (numpy_asarray, NumpyOnTracerError, "converted to a numpy array.*kiln.numpy.asarray"),
    (python_if, ConcretizationError, "kiln.lax.cond"),
]


def _where(fn, line_offset=1):
    code = fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno + line_offset} in {fn.__name__}"


@pytest.mark.parametrize("fn, kind, message", TRACING_ERRORS, ids=[c[0].__name__ for c in TRACING_ERRORS])
def test_tracing_errors_name_the_problem_and_the_users_line(fn, kind, message):
    with pytest.raises(kind, match=message) as info:
        kiln.jit(fn)(np.ones((2, 3), np.float32))
    text = str(info.value)
    assert _where(fn) in text, text
    assert "Tracer" not in text and "<locals>" not in text, text
    assert info.value.kiln_source.lineno == fn.__code__.co_firstlineno + 1


def test_the_innermost_user_line_is_named():
    with pytest.raises(ValueError, match="concatenate") as info:
        kiln.jit(via_helper)(np.ones((2, 3), np.float32))
    assert _where(_helper_with_bad_concatenate) in str(info.value)
    assert _where(via_helper) not in str(info.value)


def test_errors_inside_a_nested_jit_name_its_line_once():
    inner = kiln.jit(bad_matmul)
    with pytest.raises(ValueError, match="matmul") as info:
        kiln.jit(lambda x: inner(x) + 1)(np.ones((2, 3), np.float32))
    assert str(info.value).count(" at ") == 1 and _where(bad_matmul) in str(info.value)


def test_errors_under_transformations_name_the_users_line():
    with pytest.raises(NumpyOnTracerError, match="use kiln.numpy.sin") as info:
        kiln.grad(lambda x: numpy_sin(x).sum())(np.ones((2, 3), np.float32))
    assert _where(numpy_sin) in str(info.value)
    with pytest.raises(ValueError, match="matmul") as info:
        kiln.vmap(bad_matmul)(np.ones((4, 2, 3), np.float32))
    assert _where(bad_matmul) in str(info.value)


def test_program_tracing_errors_name_the_users_line():
    class Bad(Program):
        def f(self, x=Program.like(np.zeros((2, 3), np.float32))):
            return self._k(x)

        @Program.kernel
        def _k(x):
            return x @ x

    with pytest.raises(ValueError, match="matmul") as info:
        Bad()
    assert _where(Bad._k.fn, 2) in str(info.value)  # line 1 is the decorator


def test_numpy_operators_with_an_ndarray_on_the_left_still_trace():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = kiln.jit(lambda x: (a + x, a * x, np.float32(2) - x, a < x, a.T @ x))
    x = np.full((2, 3), 3, np.float32)
    for got, want in zip(f(x), (a + x, a * x, 2 - x, a < x, a.T @ x)):
        np.testing.assert_allclose(got, want)
    assert kiln.jit(lambda x: x * np.shape(x)[1] + np.ndim(x))(x)[0, 0] == 11
