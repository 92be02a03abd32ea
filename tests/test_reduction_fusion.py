"""Fewer dispatches around reductions (issue 10 §3): a reduction's elementwise consumer as the reduction
kernel's epilogue (codegen/reduce.py, epilogue_fusion.fuse_reduction_epilogues), checked against numpy,
finite differences, the C runtime and across worker counts, with the dispatch counts it reaches."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.compiler.compile import kernel_strategy
from tests.kiln_tools import check_like_numpy, kiln_run_exported
from tests.references import numerical_grad
from tests.test_training_fusion import _dispatches, _ops

RNG = np.random.default_rng(11)
BF16 = ml_dtypes.bfloat16


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# name: (function, numpy reference in float64, operand shapes, strategies of its dispatches)
FORMS = {
    "mean_axis0": (lambda x: knp.mean(x, axis=0), lambda x: x.mean(0), [(37, 29)], ["reduction"]),
    "mean_axis1_keepdims": (lambda x: knp.mean(x, axis=1, keepdims=True), lambda x: x.mean(1, keepdims=True),
                            [(37, 29)], ["reduction"]),
    "mean_all": (lambda x: knp.mean(x), lambda x: x.mean(), [(13, 7, 3)], ["reduction"]),
    "mean_middle_axis": (lambda x: knp.mean(x, axis=1), lambda x: x.mean(1), [(5, 31, 9)], ["reduction"]),
    "column_sum_scaled": (lambda x, s: knp.sum(x, axis=0) * s + 1.0, lambda x, s: x.sum(0) * s + 1,
                          [(301, 7), (7,)], ["reduction"]),
    "keepdims_times_column": (lambda x, s: knp.sum(x, axis=1, keepdims=True) * s[:, None],
                              lambda x, s: x.sum(1, keepdims=True) * s[:, None], [(19, 33), (19,)], ["reduction"]),
    "max_then_exp": (lambda x: knp.exp(knp.max(x, axis=0) * 0.5), lambda x: np.exp(x.max(0) * 0.5), [(23, 11)],
                     ["reduction"]),
    "loss_tail": (lambda x, y: -knp.sum((x - y) ** 2) / x.size * 3.0, lambda x, y: -((x - y) ** 2).sum() / x.size * 3,
                  [(17, 5), (17, 5)], ["reduction"]),
    "split_mean_axis0": (lambda x: knp.mean(x, axis=0), lambda x: x.mean(0), [(70001, 5)],
                         ["split_reduction", "split_reduction"]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
@pytest.mark.parametrize("name", sorted(FORMS))
def test_reduction_epilogue_is_one_dispatch_with_numpy_numbers(name, dtype):
    fn, ref, shapes, strategies = FORMS[name]
    args = [_rand(*s, dtype=dtype) for s in shapes]
    steps = _dispatches(fn, *args)
    assert [kernel_strategy(s.region) for s in steps] == strategies, [_ops(s) for s in steps]
    assert len(_ops(steps[-1])) > 1  # the consumer is inside the (last) reduction kernel
    want = np.asarray(ref(*[a.astype(np.float64) for a in args])).astype(dtype)
    tol = {np.float32: 2e-5, np.float64: 1e-12, np.float16: 4e-3, BF16: 3e-2}[dtype]
    check_like_numpy(kiln.jit(fn)(*args), want, tol)


def test_integer_sum_scaled_is_one_dispatch():
    x = RNG.integers(-50, 50, (41, 13)).astype(np.int32)
    fn = lambda x: knp.sum(x, axis=0) * 3 - 7  # noqa: E731
    steps = _dispatches(fn, x)
    assert [kernel_strategy(s.region) for s in steps] == ["reduction"]
    check_like_numpy(kiln.jit(fn)(x), x.sum(0) * 3 - 7)


OTHER_FORMS = {  # name: (function, numpy reference, strategies of its dispatches)
    "any_not": (lambda x: ~knp.any(x > 1.0, axis=0), lambda x: ~np.any(x > 1, axis=0), ["reduction"]),
    "all_and_slice": (lambda x: knp.all(x > -2.0, axis=1) & (x[:, 0] > 0), lambda x: np.all(x > -2, axis=1) & (x[:, 0] > 0),
                      ["reduction"]),
    "prod_scaled": (lambda x: knp.prod(x, axis=0) * 2.0, lambda x: np.prod(x, axis=0) * 2, ["reduction"]),
    "min_keepdims": (lambda x: knp.min(x, axis=0, keepdims=True) - 1.0, lambda x: x.min(0, keepdims=True) - 1,
                     ["reduction"]),
    "empty_reduced": (lambda x: knp.sum(x[:0], axis=0) + 1.0, lambda x: x[:0].sum(0) + 1, ["reduction"]),
    "empty_result": (lambda x: knp.sum(x[:, :0], axis=0) + 1.0, lambda x: x[:, :0].sum(0) + 1, ["reduction"]),
    "std_axis0": (lambda x: knp.std(x, axis=0), lambda x: x.std(0), ["reduction", "reduction"]),  # was 4 dispatches
}


@pytest.mark.parametrize("name", sorted(OTHER_FORMS))
def test_other_reductions_take_epilogues(name):
    fn, ref, strategies = OTHER_FORMS[name]
    x = _rand(23, 9)
    steps = _dispatches(fn, x)
    assert [kernel_strategy(s.region) for s in steps] == strategies, [_ops(s) for s in steps]
    want = np.asarray(ref(x.astype(np.float64)))
    check_like_numpy(kiln.jit(fn)(x), want.astype(np.float32) if want.dtype == np.float64 else want, 2e-5)


def test_result_kept_beside_its_epilogue():
    x = _rand(29, 31)
    fn = lambda x: (knp.sum(x, axis=1), knp.sqrt(knp.abs(knp.sum(x, axis=1))) + 2.0)  # noqa: E731
    steps = _dispatches(fn, x)
    assert [kernel_strategy(s.region) for s in steps] == ["reduction"] and len(steps[0].outputs) == 2
    s = x.astype(np.float64).sum(1)
    check_like_numpy(kiln.jit(fn)(x), [s.astype(np.float32), (np.sqrt(np.abs(s)) + 2).astype(np.float32)], 2e-5)


def test_a_transposed_result_is_no_epilogue():
    """An output that reads the result transposed is not at the result's element: the kernels stay apart."""
    x = _rand(4, 6, 5)
    fn = lambda x: knp.sum(x, axis=0).T * 2.0  # noqa: E731
    steps = _dispatches(fn, x)
    assert len(steps) == 2 and kernel_strategy(steps[0].region) == "reduction" and len(_ops(steps[0])) == 1
    check_like_numpy(kiln.jit(fn)(x), (x.astype(np.float64).sum(0).T * 2).astype(np.float32), 2e-5)


def test_a_consumer_of_the_reduction_operand_is_no_epilogue():
    from kiln.compiler.codegen import reduce
    from kiln.compiler.fusion import _build_dispatch
    from kiln.compiler.pipeline import prepare_graph
    from kiln.core.aval import ShapedArray
    from kiln.core.trace import trace_to_graph

    x = _rand(5, 1, 3)
    graph = prepare_graph(trace_to_graph(lambda x: [knp.sum(knp.exp(x), axis=1) * knp.exp(x)[:, 0, :]],
                                         [ShapedArray(x.shape, x.dtype)]))
    region = _build_dispatch("d", list(graph.eqns), list(graph.outvars)).region
    with pytest.raises(reduce.NotFusable, match="computed before the reduction"):
        reduce._plan(region)
    assert not reduce.epilogue_fusable(region)


def test_gradients_through_fused_means_match_finite_differences():
    x = _rand(11, 6, dtype=np.float64)

    def loss(w, b):
        h = knp.tanh(x * w + b)
        centered = h - knp.mean(h, axis=0)
        return knp.mean(centered ** 2) + knp.mean(knp.sum(h, axis=1) * 0.5) ** 2

    w, b = _rand(6, dtype=np.float64), _rand(6, dtype=np.float64)
    grads = kiln.jit(kiln.grad(loss, argnums=(0, 1)))(w, b)
    steps = _dispatches(kiln.grad(loss, argnums=(0, 1)), w, b)
    assert any(kernel_strategy(s.region) == "reduction" and len(_ops(s)) > 1 and _ops(s)[-1] != "reduce_sum"
               for s in steps)
    for k, p in enumerate((w, b)):
        def f(v, k=k):
            ps = [w, b]
            ps[k] = v
            return np.asarray(loss(*ps))
        np.testing.assert_allclose(grads[k], numerical_grad(f, p), rtol=1e-6, atol=1e-8)


def test_reduction_epilogues_run_in_the_c_runtime(tmp_path):
    def fn(x, s, big):
        return knp.mean(x, axis=0), knp.sum(x, axis=1, keepdims=True) * s[:, None], knp.mean(big, axis=0) * 2.0

    args = [_rand(37, 29), _rand(37), _rand(70001, 3)]
    x, s, big = (a.astype(np.float64) for a in args)
    want = [x.mean(0), x.sum(1, keepdims=True) * s[:, None], big.mean(0) * 2]
    check_like_numpy(kiln_run_exported(fn, *args, tmp_path=tmp_path), [w.astype(np.float32) for w in want], 2e-5)


def test_same_bits_for_every_worker_count():
    y = _rand(2003, 1001)
    fns = [kiln.jit(lambda a: knp.mean(a, axis=0)), kiln.jit(lambda a: knp.exp(knp.mean(a, axis=1) * 3.0)),
           kiln.jit(lambda a: knp.mean(a) * 2.0)]
    results = []
    try:
        for workers in (1, 2, 3, 8):
            kiln.set_worker_count(workers)
            results.append([np.asarray(f(y)).tobytes() for f in fns])
    finally:
        kiln.set_worker_count(0)
    assert all(r == results[0] for r in results)


# ------------------------------------------------------------------- independent reductions in one kernel

def bias_grads(a, b, c, w):
    """Column sums of three layers' cotangents (batch 37) with products between, as in a backward pass."""
    return knp.sum(a, axis=0), a @ w, knp.sum(b * 2.0, axis=0), knp.mean(c, axis=0, keepdims=True)


def bias_grads_ref(a, b, c, w):
    return a.sum(0), a @ w, (b * 2).sum(0), c.mean(0, keepdims=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_independent_column_sums_are_one_dispatch(dtype):
    args = [_rand(37, 3, dtype=dtype), _rand(37, 130, dtype=dtype), _rand(37, 5, 7, dtype=dtype),
            _rand(3, 11, dtype=dtype)]
    steps = _dispatches(bias_grads, *args)
    strategies = [kernel_strategy(s.region) for s in steps]
    assert strategies.count("multi_reduction") == 1 and "reduction" not in strategies, strategies
    (multi,) = [s for s in steps if kernel_strategy(s.region) == "multi_reduction"]
    assert len(multi.outputs) == 3 and "div" in _ops(multi)  # the mean's epilogue inside
    want = [np.asarray(w).astype(dtype) for w in bias_grads_ref(*[a.astype(np.float64) for a in args])]
    tol = {np.float32: 2e-5, np.float64: 1e-12, np.float16: 4e-3, BF16: 3e-2}[dtype]
    got = kiln.jit(bias_grads)(*args)
    if dtype in (np.float16, BF16):  # the matmul accumulates in its own way; its tolerance is the matmul tests'
        got, want = [got[0], got[2], got[3]], [want[0], want[2], want[3]]
    check_like_numpy(got, want, tol)


def test_dependent_or_unlike_reductions_stay_apart():
    x = _rand(29, 6)
    dependent = lambda x: (knp.sum(x, axis=0), knp.sum(x * knp.sum(x, axis=0), axis=0))  # noqa: E731
    rows = lambda x: (knp.sum(x, axis=1), knp.sum(x * 2.0, axis=1))  # noqa: E731  (row reductions: row fusion's)
    sizes = lambda x, y: (knp.sum(x, axis=0), knp.sum(y, axis=0))  # noqa: E731  (29 and 31 reduced elements)
    y = _rand(31, 6)
    for fn, args in ((dependent, (x,)), (rows, (x,)), (sizes, (x, y))):
        assert "multi_reduction" not in [kernel_strategy(s.region) for s in _dispatches(fn, *args)]
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    check_like_numpy(kiln.jit(dependent)(x), [x64.sum(0).astype(np.float32), (x64 * x64.sum(0)).sum(0).astype(np.float32)],
                     2e-5)
    check_like_numpy(kiln.jit(sizes)(x, y), [x64.sum(0).astype(np.float32), y64.sum(0).astype(np.float32)], 2e-5)


def test_grouped_reductions_split_their_items_across_workgroups():
    from kiln.compiler.compile import choose_workgroups
    from kiln.compiler.strategies import plan_region
    from kiln.compiler.target import Target

    fn = lambda a, b: (knp.sum(a, axis=0), knp.sum(knp.exp(b), axis=0))  # noqa: E731
    args = [_rand(36, 5001), _rand(36, 7, 999)]  # under split_reduction.MIN_SIZE each
    (step,) = _dispatches(fn, *args)
    plan = plan_region(step.region, Target.host())
    assert plan.strategy == "multi_reduction" and choose_workgroups(plan.work, plan.parallel_items) > 8
    want = [args[0].astype(np.float64).sum(0), np.exp(args[1].astype(np.float64)).sum(0)]
    check_like_numpy(kiln.jit(fn)(*args), [w.astype(np.float32) for w in want], 2e-5)
    results = []
    try:
        for workers in (1, 3, 8):
            kiln.set_worker_count(workers)
            results.append([np.asarray(r).tobytes() for r in kiln.jit(fn)(*args)])
    finally:
        kiln.set_worker_count(0)
    assert all(r == results[0] for r in results)


def test_grouped_reductions_run_in_the_c_runtime(tmp_path):
    args = [_rand(37, 3), _rand(37, 130), _rand(37, 5, 7), _rand(3, 11)]
    want = [np.asarray(w).astype(np.float32) for w in bias_grads_ref(*[a.astype(np.float64) for a in args])]
    check_like_numpy(kiln_run_exported(bias_grads, *args, tmp_path=tmp_path), want, 2e-5)


def test_mlp_bias_gradients_match_finite_differences():
    x, y = _rand(13, 6, dtype=np.float64), _rand(13, 3, dtype=np.float64)
    params = [_rand(6, 9, dtype=np.float64), _rand(9, dtype=np.float64), _rand(9, 3, dtype=np.float64),
              _rand(3, dtype=np.float64)]

    def loss(w1, b1, w2, b2):
        return knp.mean((knp.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)

    grad = kiln.grad(loss, argnums=(0, 1, 2, 3))
    assert "multi_reduction" in [kernel_strategy(s.region) for s in _dispatches(grad, *params)]
    grads = kiln.jit(grad)(*params)
    for k, p in enumerate(params):
        def f(v, k=k):
            ps = list(params)
            ps[k] = v
            return np.asarray(loss(*ps))
        np.testing.assert_allclose(grads[k], numerical_grad(f, p), rtol=1e-6, atol=1e-8, err_msg=f"param {k}")


def test_kiln_check_maps_the_fused_reductions_to_their_regions():
    """kiln check's reference runs the merged regions' equations: the multi_reduction and the reduction with
    an epilogue (a mean of a split reduction's combine, a loss tail) each map back and agree."""
    from kiln import Program
    from kiln.program.check import check_program

    args = [_rand(37, 3), _rand(37, 130), _rand(37, 5, 7), _rand(3, 11), _rand(100001, 3)]

    class Grads(Program, export_name="grads"):
        def run(self, a=Program.like(args[0]), b=Program.like(args[1]), c=Program.like(args[2]),
                w=Program.like(args[3]), big=Program.like(args[4])):
            return bias_grads(a, b, c, w) + (knp.mean(big, axis=0) * 2.0, -knp.sum(a * a) / 3.0)

    report = check_program(Grads, "run", args)
    kernels = [r.kernel for r in report.results]
    assert any("reductions" in k for k in kernels) and any("partials" in k for k in kernels), kernels
    assert all(r.passed for r in report.results), [(r.kernel, r.note) for r in report.results if not r.passed]
    x = [a.astype(np.float64) for a in args]
    want = list(bias_grads_ref(*x[:4])) + [x[4].mean(0) * 2, -(x[0] ** 2).sum() / 3]
    check_like_numpy(report.outputs, [np.asarray(v).astype(np.float32) for v in want], 2e-5)


def test_independent_row_sums_are_one_row_fused_dispatch():
    """A layer norm gradient's two row sums (of g and of g * xhat), independent, with a product between:
    one row-fused dispatch at the second's place, numbers as numpy's, same bits for every worker count."""
    def fn(g, xhat, w):
        return knp.sum(g, axis=-1), g @ w, knp.sum(g * xhat, axis=-1)

    args = [_rand(67, 130), _rand(67, 130), _rand(130, 9)]
    strategies = [kernel_strategy(s.region) for s in _dispatches(fn, *args)]
    assert sorted(strategies) == ["matmul", "row_fused"], strategies
    g, xhat, w = (a.astype(np.float64) for a in args)
    want = [g.sum(-1), g @ w, (g * xhat).sum(-1)]
    check_like_numpy(kiln.jit(fn)(*args), [v.astype(np.float32) for v in want], 2e-5)
    results = []
    try:
        for workers in (1, 3):
            kiln.set_worker_count(workers)
            results.append([np.asarray(r).tobytes() for r in kiln.jit(fn)(*args)])
    finally:
        kiln.set_worker_count(0)
    assert results[0] == results[1]
