"""The kernel strategy registry (kiln.compiler.strategies) and re-entrant compilation (issue 10 §1): every
dispatch region is exactly one strategy's, planned for an explicit Target; compiling for two targets
interleaved gives each the kernels it gets alone."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import kiln
import kiln.nn
import kiln.numpy as knp
from kiln import lax
from kiln.compiler import strategies
from kiln.compiler.codegen.kernel import define_kernel
from kiln.compiler.codegen.pipeline import new_module
from kiln.compiler.codegen.types import byte_size
from kiln.compiler.compile import compile_plan, kernel_strategy
from kiln.compiler.fusion import DispatchStep, partition
from kiln.compiler.pipeline import prepare_graph
from kiln.compiler.target import Target
from kiln.core.aval import ShapedArray
from kiln.core.ir import Equation, Graph, Var
from kiln.core.trace import trace_to_graph
from kiln.core.primitive import KERNEL_STRATEGIES, OpTraits, Primitive, all_primitives

F32 = np.float32
AVX2 = Target.named("x86_64-unknown-linux-gnu", "haswell", "+avx,+avx2,+fma")
AVX512 = Target.named("x86_64-unknown-linux-gnu", "skylake-avx512", "+avx,+avx2,+avx512f,+fma")


def _plan(fn, *args):
    graph = prepare_graph(trace_to_graph(lambda *xs: kiln.tree_leaves(fn(*xs)),
                                         [ShapedArray(a.shape, a.dtype) for a in args]))
    return partition(graph)


def _regions(fn, *args):
    return [s.region for s in _plan(fn, *args).steps if isinstance(s, DispatchStep)]


# One program per strategy: (expected strategy, function, example arguments).
_CASES = {
    "elementwise": (lambda x: knp.tanh(x) * 2 + x, (np.ones((64, 32), F32),)),
    "horizontal": (lambda x, b: (x * 2, knp.exp(b)), (np.ones((64, 32), F32), np.ones((7,), F32))),
    "reduction": (lambda x: knp.sum(x * x, axis=0), (np.ones((64, 32), F32),)),
    "row_fused": (lambda x: kiln.nn.softmax(x, axis=-1), (np.ones((64, 128), F32),)),
    "split_reduction": (lambda x: knp.sum(x), (np.ones((1 << 19,), F32),)),
    "multi_reduction": (lambda x, y: (knp.sum(x, axis=0), knp.mean(y, axis=0)), (np.ones((64, 32), F32),
                                                                                np.ones((64, 7), F32))),
    "matmul": (lambda a, b: a @ b, (np.ones((64, 48), F32), np.ones((48, 40), F32))),
    "conv": (lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
             (np.ones((2, 8, 8, 4), F32), np.ones((3, 3, 4, 16), F32))),
    "pooling": (lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
                (np.ones((2, 8, 8, 4), F32),)),
    "structural": (lambda x: knp.sort(x, axis=-1), (np.ones((16, 32), F32),)),
    "linalg": (lambda x: lax.linalg.cholesky(x), (np.broadcast_to(np.eye(8, dtype=F32) * 2, (3, 8, 8)),)),
    "svd": (lambda x: knp.linalg.svd(x, compute_uv=False), (np.eye(5, 4, dtype=F32),)),
    "eigh": (lambda x: knp.linalg.eigh(x), (np.ones((4, 8, 8), F32),)),
}


def test_the_registry_has_one_strategy_per_kind():
    assert sorted(strategies.BY_NAME) == sorted(_CASES)
    assert len(strategies.STRATEGIES) == len(strategies.BY_NAME)
    # every strategy a primitive can name for a kernel of its own is registered
    assert set(KERNEL_STRATEGIES) <= set(strategies.BY_NAME)
    named = {p.traits.kernel for p in all_primitives().values() if p.traits.fusion == "kernel"}
    assert named <= set(strategies.BY_NAME)


@pytest.mark.parametrize("expected", sorted(_CASES))
def test_every_region_is_exactly_one_strategys(expected):
    fn, args = _CASES[expected]
    found = set()
    for region in _regions(fn, *args):
        matching = [s.name for s in strategies.STRATEGIES if s.matches(region)]
        assert len(matching) == 1, (matching, region)
        assert kernel_strategy(region) == matching[0]
        plan = strategies.plan_region(region, AVX2)
        assert plan.strategy == matching[0] and plan.parallel_items >= 0 and plan.work >= 0 and callable(plan.emit)
        found.add(matching[0])
    assert expected in found


def test_split_and_conv_plans_say_what_they_chose():
    fn, args = _CASES["split_reduction"]
    details = {strategies.plan_region(r, AVX2).detail for r in _regions(fn, *args)}
    assert details == {"chunks", "partials"}
    fn, args = _CASES["conv"]
    (region,) = _regions(fn, *args)
    assert strategies.plan_region(region, AVX2).detail in ("gemm", "direct")


def test_a_region_no_strategy_takes_is_refused_with_its_ops():
    prim = Primitive("fft_probe")
    prim.traits = OpTraits(fusion="kernel", kernel="fft")  # past def_traits' check: no such strategy
    x, y = Var(ShapedArray((4,), F32)), Var(ShapedArray((4,), F32))
    region = Graph([x], [], [], [Equation(prim, [x], [y], {}, None)], [y])
    with pytest.raises(strategies.NoStrategy, match="no kernel strategy match.* dispatch region of fft_probe"):
        strategies.choose(region)


# ---------------------------------------------------------------- re-entrancy: the target is explicit

def _all_regions():
    return [r for name in sorted(_CASES) for r in _regions(_CASES[name][0], *_CASES[name][1])]


def _kernel_ir(region, plan, target) -> str:
    module = new_module("k", target)
    sizes = [byte_size(v.aval) for v in region.invars + region.outvars]
    define_kernel(module, "k", sizes, [False] * len(region.invars) + [True] * len(region.outvars), plan.emit)
    return str(module)


def _separately(regions, target):
    out = []
    for r in regions:
        plan = strategies.plan_region(r, target)
        out.append((plan.parallel_items, plan.work, _kernel_ir(r, plan, target)))
    return out


def test_two_targets_planned_interleaved_get_the_kernels_they_get_alone():
    regions = _all_regions()
    alone = {t: _separately(regions, t) for t in (AVX2, AVX512)}
    assert alone[AVX2] != alone[AVX512]  # the targets do differ (matmul and conv tiling), so a mix would show
    plans = {AVX2: [], AVX512: []}
    for r in regions:  # plan for one target, then the other, region by region; emit afterwards
        for t in (AVX2, AVX512):
            plans[t].append(strategies.plan_region(r, t))
    for t in (AVX512, AVX2):
        got = [(p.parallel_items, p.work, _kernel_ir(r, p, t)) for r, p in zip(regions, plans[t])]
        assert got == alone[t]


def test_two_targets_planned_in_threads_get_the_kernels_they_get_alone():
    regions = _all_regions()
    alone = {t: _separately(regions, t) for t in (AVX2, AVX512)}
    got, errors = {}, []

    def work(t):
        try:
            got[t] = _separately(regions, t)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in (AVX2, AVX512)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert got == alone


def test_compile_plan_alternating_targets_links_the_same_images():
    fn, args = _CASES["matmul"]
    regions_plan = _plan(fn, *args)
    first = {t: compile_plan(regions_plan, t, cache=None) for t in (AVX2, AVX512)}
    again = compile_plan(regions_plan, AVX2, cache=None)  # after the other target's compile
    assert again.image.code == first[AVX2].image.code and again.workgroups == first[AVX2].workgroups
    assert first[AVX2].image.code != first[AVX512].image.code
