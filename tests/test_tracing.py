"""Tracing, the IR printer and verifier, and tracing errors."""
import numpy as np
import pytest

import kiln.numpy as knp
from kiln import ConcretizationError
from kiln.core.aval import ShapedArray
from kiln.core.errors import UnexpectedTracerError
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
    assert text.startswith("graph(%0: f32[2,3]) {")
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
