"""Reduction kernels: every op over axis sets, dtypes and fused producers, against numpy."""
import itertools

import numpy as np
import pytest

from conftest import Batch, Case, assert_matches, random_array
from kiln.compiler.compile import kernel_strategy
from kiln.lax import prims

RNG = np.random.default_rng(2)
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.int8, np.uint8, np.int16, np.bool_, np.float16, np.uint16, np.uint32,
          np.uint64]
CASES = {}


def _axis_sets(ndim):
    for r in range(ndim + 1):
        yield from itertools.combinations(range(ndim), r)


for shape in [(5, 7, 9), (1, 33, 1), (130, 300), (4, 0, 3)]:
    for axes in _axis_sets(len(shape)):
        for op in ("sum", "max", "min"):
            if op != "sum" and (any(shape[a] == 0 for a in axes) or len(axes) not in (1, len(shape))):
                continue
            x = random_array(RNG, shape, np.float32)
            CASES[f"{op}-f32-{shape}-{axes}"] = Case(lambda a, op=op, axes=axes: [getattr(prims, f"reduce_{op}").bind(a, axes=axes)], [x])
for dt in DTYPES:
    for op in ("sum", "max", "min"):
        for axes in [(0,), (1,)]:
            x = random_array(RNG, (37, 41), dt)
            CASES[f"{op}-{np.dtype(dt).name}-{axes}"] = Case(lambda a, op=op, axes=axes: [getattr(prims, f"reduce_{op}").bind(a, axes=axes)], [x])
for op in ("max", "min"):
    x = random_array(RNG, (6, 50), np.float32)
    x[2, 17] = np.nan
    x[4, 3] = np.nan
    CASES[f"{op}-nan-propagates"] = Case(lambda a, op=op: [getattr(prims, f"reduce_{op}").bind(a, axes=(1,)), getattr(prims, f"reduce_{op}").bind(a, axes=(0,))], [x])
CASES["softmax-denominator"] = Case(
    lambda a: [prims.reduce_sum.bind(prims.exp.bind(prims.sub.bind(a, prims.broadcast_in_dim.bind(prims.reduce_max.bind(a, axes=(1,)), shape=(64, 1000), broadcast_dimensions=(0,)))), axes=(1,))],
    [random_array(RNG, (64, 1000), np.float32)],
)
CASES["sum-transposed-producer"] = Case(
    lambda a, b: [prims.reduce_sum.bind(prims.mul.bind(prims.transpose.bind(a, permutation=(1, 0)), b), axes=(0,))],
    [random_array(RNG, (70, 90), np.float64), random_array(RNG, (90, 70), np.float64)],
)
CASES["sum-large-contiguous"] = Case(lambda a: [prims.reduce_sum.bind(a, axes=(0,))], [RNG.random(1_000_003).astype(np.float32)])
CASES["sum-large-rows"] = Case(lambda a: [prims.reduce_sum.bind(a, axes=(1,))], [RNG.random((2000, 777)).astype(np.float32)])
CASES["sum-large-columns"] = Case(lambda a: [prims.reduce_sum.bind(a, axes=(0,))], [RNG.random((777, 2000)).astype(np.float32)])


@pytest.fixture(scope="module")
def batch():
    return Batch(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy(batch, name):
    got, want = batch.run(name)
    if name.startswith("sum-float16"):
        x = batch.cases[name].args[0].astype(np.float64)
        want = [np.sum(x, axis=(0,) if "(0,)" in name else (1,)).astype(np.float16)]
    for g, w in zip(got, want):
        if g.dtype == np.float16:
            assert_matches(g, w, rtol=2e-3, atol=1e-2)
        elif "sum" in name or "softmax" in name:
            assert_matches(g, w, rtol=1e-5 if g.dtype != np.float64 else 1e-12, atol=1e-5 if g.dtype != np.float64 else 1e-12)
        else:
            assert_matches(g, w)


def test_f32_sum_accumulates_accurately(batch):
    got, _ = batch.run("sum-large-contiguous")
    exact = np.sum(batch.cases["sum-large-contiguous"].args[0].astype(np.float64))
    assert abs(float(got[0]) - exact) <= abs(exact) * 2**-24


def test_reduction_is_its_own_kernel_with_producers_fused():
    plan = CASES["sum-transposed-producer"].plan
    assert [s.kind for s in plan.steps] == ["reduce_sum"]
    assert [e.primitive.name for e in plan.steps[0].region.eqns] == ["transpose", "mul", "reduce_sum"]


def test_softmax_denominator_is_one_row_fused_kernel():
    """max over each row, then sum(exp(x - max)) over the same rows: one kernel (codegen/row_fused.py)."""
    plan = CASES["softmax-denominator"].plan
    assert len(plan.steps) == 1
    assert kernel_strategy(plan.steps[0].region) == "row_fused"


def test_reduction_kernel_refuses_a_region_with_other_outputs():
    """A region that also returns another value is not a plain reduction's (compile.kernel_strategy
    gives it to the row-fused strategy, as the other output is no epilogue of the result); the reduction
    kernel refuses it rather than leave it unwritten."""
    from kiln.compiler.codegen import reduce

    def fn(a):
        e = prims.exp.bind(a)
        return [e, prims.reduce_sum.bind(e, axes=(1,))]

    case = Case(fn, [random_array(RNG, (4, 8), np.float32)])
    (step,) = case.plan.steps
    assert kernel_strategy(step.region) == "row_fused"
    with pytest.raises(ValueError, match="an output's size differs from the reduction's result"):
        reduce.parallel_items(step.region)
