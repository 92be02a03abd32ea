"""Graph passes: folding, simplification, CSE, DCE; results verified and evaluated against the original."""
import numpy as np

from conftest import Case
from kiln.compiler.passes import dead_code_elimination, optimize, simplify_and_cse
from kiln.core.aval import ShapedArray
from kiln.core.ir import Literal, verify_graph
from kiln.core.trace import trace_to_graph
from kiln.lax import prims

F = ShapedArray((4, 3), np.float32)
I = ShapedArray((4, 3), np.int32)


def _trace(fn, *avals):
    return trace_to_graph(lambda *xs: list(fn(*xs)), list(avals))


def _names(graph):
    return [e.primitive.name for e in graph.eqns]


def _evaluate(graph, args):
    env = {v.id: np.asarray(c) for v, c in zip(graph.constvars, graph.consts)}
    env.update({v.id: a for v, a in zip(graph.invars, args)})
    read = lambda a: env[a.id] if hasattr(a, "id") else np.asarray(a.value)  # noqa: E731
    for e in graph.eqns:
        env[e.outvars[0].id] = np.asarray(e.primitive.impl(*[read(a) for a in e.invars], **e.params))
    return [read(a) for a in graph.outvars]


def _same_results(before, after, args):
    for x, y in zip(_evaluate(before, args), _evaluate(after, args)):
        np.testing.assert_array_equal(x, y)


def test_dce_removes_unused_work():
    g = _trace(lambda x: [prims.add.bind(x, x), prims.exp.bind(x)][:1], F)
    g2 = _trace(lambda x: (prims.exp.bind(x), [prims.add.bind(x, x)])[1], F)
    out = dead_code_elimination(g2)
    verify_graph(out)
    assert _names(out) == ["add"]
    assert _names(dead_code_elimination(g)) == ["add"]


def test_cse_merges_identical_equations():
    g = _trace(lambda x: [prims.mul.bind(prims.exp.bind(x), prims.exp.bind(x))], F)
    out = optimize(g)
    verify_graph(out)
    assert _names(out) == ["exp", "mul"]
    assert out.eqns[1].invars[0] is out.eqns[1].invars[1]
    x = np.random.default_rng(0).random((4, 3)).astype(np.float32)
    _same_results(g, out, [x])


def test_cse_keeps_different_params_apart():
    g = _trace(lambda x: [prims.reduce_sum.bind(x, axes=(0,)), prims.reduce_sum.bind(x, axes=(1,))], F)
    assert _names(optimize(g)) == ["reduce_sum", "reduce_sum"]


def test_scalar_constant_folding():
    s = ShapedArray((), np.float32)
    g = _trace(lambda x: [prims.add.bind(x, prims.mul.bind(np.float32(2), np.float32(3)))], s)
    out = optimize(g)
    verify_graph(out)
    assert _names(out) == ["add"]
    folded = out.eqns[0].invars[1]
    assert isinstance(folded, Literal) and folded.value == 6 and folded.aval.dtype == np.float32


def test_trivial_simplifications():
    g = _trace(
        lambda x, i: [
            prims.mul.bind(x, prims.broadcast_in_dim.bind(np.float32(1), shape=(4, 3), broadcast_dimensions=())),
            prims.convert.bind(prims.reshape.bind(prims.transpose.bind(x, permutation=(0, 1)), new_shape=(4, 3)), new_dtype=np.dtype(np.float32)),
            prims.broadcast_in_dim.bind(x, shape=(4, 3), broadcast_dimensions=(0, 1)),
            prims.sub.bind(prims.add.bind(i, prims.broadcast_in_dim.bind(np.int32(0), shape=(4, 3), broadcast_dimensions=())), prims.broadcast_in_dim.bind(np.int32(0), shape=(4, 3), broadcast_dimensions=())),
        ],
        F, I,
    )
    out = optimize(g)
    verify_graph(out)
    assert all(o is g.invars[0] for o in out.outvars[:3])
    assert out.outvars[3] is g.invars[1]


def test_scalar_identities_on_literal_operands():
    s = ShapedArray((), np.float32)
    si = ShapedArray((), np.int32)
    g = _trace(lambda x, i: [prims.mul.bind(x, np.float32(1)), prims.add.bind(np.int32(0), i), prims.div.bind(x, np.float32(1))], s, si)
    out = optimize(g)
    verify_graph(out)
    assert out.eqns == [] and out.outvars == [g.invars[0], g.invars[1], g.invars[0]]


def test_float_add_zero_is_kept():
    s = ShapedArray((), np.float32)
    g = _trace(lambda x: [prims.add.bind(x, np.float32(0))], s)
    assert _names(optimize(g)) == ["add"]


def test_optimized_graph_compiles_to_same_numbers():
    rng = np.random.default_rng(1)
    x = rng.random((4, 3)).astype(np.float32)
    case = Case(lambda a: [prims.add.bind(prims.exp.bind(a), prims.exp.bind(a)), prims.mul.bind(a, a)], [x], passes=True)
    assert _names(case.graph).count("exp") == 1
