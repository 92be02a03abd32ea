"""Partitioning into host steps and dispatch regions; compile_plan bookkeeping."""
import numpy as np

from conftest import Batch, Case, assert_matches, random_array
from kiln.compiler.compile import compile_plan
from kiln.compiler.fusion import DispatchStep, HostStep, partition
from kiln.core.aval import ShapedArray
from kiln.core.ir import verify_graph
from kiln.core.trace import trace_to_graph
from kiln.lax import prims
from kiln.program.prims import global_load, global_store

RNG = np.random.default_rng(6)
A = ShapedArray((8, 16), np.float32)


def _plan(fn, *avals):
    graph = trace_to_graph(lambda *xs: list(fn(*xs)), list(avals))
    plan = partition(graph)
    for step in plan.dispatches:
        verify_graph(step.region)
    return graph, plan


def _bcast(x, shape, dims):
    return prims.broadcast_in_dim.bind(x, shape=shape, broadcast_dimensions=dims)


def test_host_steps_keep_their_order_between_dispatches():
    def fn(x):
        g = global_load.bind(slot=0, name="w", aval=A)
        y = prims.add.bind(x, g)
        global_store.bind(prims.mul.bind(y, y), slot=0, name="w", aval=A)
        return [y]

    graph, plan = _plan(fn, A)
    kinds = [type(s).__name__ + ":" + (s.eqn.primitive.name if isinstance(s, HostStep) else s.kind) for s in plan.steps]
    assert kinds == ["HostStep:global_load", "DispatchStep:elementwise", "DispatchStep:elementwise", "HostStep:global_store"] or \
        kinds == ["HostStep:global_load", "DispatchStep:elementwise", "HostStep:global_store"]
    store = plan.steps[-1].eqn
    produced = {v.id for s in plan.dispatches for v in s.outputs}
    assert store.invars[0].id in produced


def test_outputs_that_are_inputs_need_no_dispatch():
    graph, plan = _plan(lambda x: [x], A)
    assert plan.steps == []


def test_dispatch_interface_uses_outer_vars_and_constants():
    const = RNG.random((8, 16)).astype(np.float32)
    graph, plan = _plan(lambda x: [prims.mul.bind(x, const)], A)
    (step,) = plan.steps
    assert {v.id for v in step.inputs} == {graph.invars[0].id, graph.constvars[0].id}
    assert [v.aval for v in step.region.invars] == [v.aval for v in step.inputs]
    assert step.outputs == [graph.outvars[0]]


def test_expensive_producer_shared_by_kernels_is_materialized_once():
    def fn(x):
        e = prims.exp.bind(x)
        return [prims.reduce_sum.bind(e, axes=(1,)), prims.reduce_max.bind(e, axes=(0,))]

    graph, plan = _plan(fn, A)
    exps = sum(1 for s in plan.dispatches for e in s.region.eqns if e.primitive.name == "exp")
    assert exps == 1
    # the exp kernel and the row sum reading it are one row-fused kernel (row_fusion.py), which writes
    # exp(x) once for the column max
    fused, column_max = plan.dispatches
    assert fused.name.startswith("row_fused") and column_max.name.startswith("reduce_max")
    (e,) = [v for v in fused.outputs if v.aval.shape == A.shape]
    assert column_max.inputs == [e]


def test_cheap_producer_is_recomputed_in_each_consumer():
    def fn(x):
        d = prims.sub.bind(x, x)
        return [prims.reduce_sum.bind(d, axes=(1,)), prims.reduce_max.bind(d, axes=(0,))]

    graph, plan = _plan(fn, A)
    assert len(plan.dispatches) == 2


def test_layout_of_a_computed_value_cuts():
    graph, plan = _plan(lambda x: [prims.transpose.bind(prims.exp.bind(x), permutation=(1, 0))], A)
    assert len(plan.dispatches) == 2


def test_consecutive_same_shape_kernels_merge_into_one_multi_output_kernel():
    graph, plan = _plan(lambda x, y: [prims.add.bind(x, y), prims.mul.bind(x, y), prims.sub.bind(x, y)], A, A)
    (step,) = plan.steps
    assert len(step.outputs) == 3


def test_layernorm_end_to_end():
    n = 64

    def layernorm(x, g):
        mean = prims.div.bind(prims.reduce_sum.bind(x, axes=(1,)), np.full((32,), n, np.float32))
        centered = prims.sub.bind(x, _bcast(mean, (32, n), (0,)))
        var = prims.div.bind(prims.reduce_sum.bind(prims.mul.bind(centered, centered), axes=(1,)), np.full((32,), n, np.float32))
        inv = prims.div.bind(np.ones((32,), np.float32), prims.sqrt.bind(prims.add.bind(var, np.full((32,), 1e-5, np.float32))))
        return [prims.mul.bind(prims.mul.bind(centered, _bcast(inv, (32, n), (0,))), _bcast(g, (32, n), (1,)))]

    case = Case(layernorm, [random_array(RNG, (32, n), np.float32), random_array(RNG, (n,), np.float32)])
    batch = Batch({"ln": case})
    got, want = batch.run("ln")
    assert_matches(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_compile_plan_dedupes_identical_regions_across_plans():
    plans = [_plan(lambda x: [prims.tanh.bind(x)], A)[1] for _ in range(3)]
    plans.append(_plan(lambda x: [prims.exp.bind(x)], A)[1])
    compiled = compile_plan(plans)
    assert len(compiled.kernels) == 2
    indices = [compiled.dispatch_info(p.steps[0])[0] for p in plans]
    assert indices[:3] == [indices[0]] * 3 and indices[3] != indices[0]
    spec = compiled.kernels[indices[0]]
    assert [(b.byte_size, b.writable) for b in spec.bindings] == [(8 * 16 * 4, False), (8 * 16 * 4, True)]
    assert spec.image == 0 and spec.push_constant_count == 0
