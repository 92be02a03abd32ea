"""Fewer, larger dispatches for training steps (issue 10 §3): matmul epilogues (codegen/epilogue.py,
compiler/epilogue_fusion.py) and horizontal elementwise kernels (codegen/horizontal.py,
compiler/horizontal_fusion.py), checked against numpy, finite differences and the C runtime, and the
dispatch counts they reach on the MLP training steps."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.compiler.compile import kernel_strategy
from kiln.compiler.fusion import partition
from kiln.compiler.pipeline import prepare_graph
from kiln.core.aval import ShapedArray
from kiln.core.trace import trace_to_graph
from tests.kiln_tools import check_like_numpy, example, kiln_run_exported
from tests.references import numerical_grad

RNG = np.random.default_rng(10)
BF16 = ml_dtypes.bfloat16


def _dispatches(fn, *args):
    graph = trace_to_graph(lambda *a: list(kiln.tree_util.tree_leaves(fn(*a))),
                           [ShapedArray(np.shape(a), np.asarray(a).dtype) for a in args])
    return partition(prepare_graph(graph)).dispatches


def _ops(step):
    return [e.primitive.name for e in step.region.eqns if e.primitive.traits.fusion != "layout"]


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------------------- matmul epilogues

def dense_tanh(x, w, b):
    return knp.tanh(x @ w + b)


def dense_relu_keep(x, w, b):
    z = x @ w + b
    return knp.maximum(z, 0.0), z  # the product plus bias returned too


def relu_mask(dz, w, z):
    return (dz @ w.T) * (z > 0)  # relu' on the backward product, w read transposed


def tanh_mask(dz, w, h):
    return (dz @ w.T) * (1.0 - h * h)


def product_kept(x, w):
    p = x @ w
    return p, knp.exp(p * 0.1)  # the product is an output and the epilogue's operand


def batched(a, b, c):
    return knp.tanh(knp.matmul(a, b) + c[:, None, :])


EPILOGUES = {
    "dense_tanh": (dense_tanh, lambda x, w, b: np.tanh(x @ w + b), [(37, 29), (29, 53), (53,)]),
    "dense_relu_keep": (dense_relu_keep, lambda x, w, b: (np.maximum(x @ w + b, 0), x @ w + b),
                        [(5, 130), (130, 97), (97,)]),
    "relu_mask": (relu_mask, lambda dz, w, z: (dz @ w.T) * (z > 0), [(41, 19), (23, 19), (41, 23)]),
    "tanh_mask": (tanh_mask, lambda dz, w, h: (dz @ w.T) * (1 - h * h), [(130, 7), (67, 7), (130, 67)]),
    "product_kept": (product_kept, lambda x, w: (x @ w, np.exp(x @ w * 0.1)), [(13, 300), (300, 17)]),
    "batched": (batched, lambda a, b, c: np.tanh(a @ b + c[:, None, :]), [(3, 9, 11), (3, 11, 14), (3, 14)]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_epilogue_is_one_matmul_dispatch_with_numpy_numbers(name, dtype):
    fn, ref, shapes = EPILOGUES[name]
    args = [_rand(*s, dtype=dtype) for s in shapes]
    steps = _dispatches(fn, *args)
    assert len(steps) == 1, [_ops(s) for s in steps]
    assert kernel_strategy(steps[0].region) == "matmul" and len(_ops(steps[0])) > 1
    tol = {np.float32: 2e-5, np.float64: 1e-12}[dtype]
    check_like_numpy(kiln.jit(fn)(*args), ref(*args), tol)


def test_epilogues_run_in_the_c_runtime(tmp_path):
    def step(x, w1, b1, w2, dz, z):
        h = knp.tanh(x @ w1 + b1)
        return h @ w2, (dz @ w2.T) * (1.0 - h * h), (dz @ w2.T) * (z > 0)

    args = [_rand(37, 29), _rand(29, 53), _rand(53), _rand(53, 11), _rand(37, 11), _rand(37, 53)]
    x, w1, b1, w2, dz, z = args
    h = np.tanh(x @ w1 + b1)
    want = [h @ w2, (dz @ w2.T) * (1 - h * h), (dz @ w2.T) * (z > 0)]
    assert sum(kernel_strategy(s.region) == "matmul" and len(_ops(s)) > 1 for s in _dispatches(step, *args)) >= 2
    check_like_numpy(kiln_run_exported(step, *args, tmp_path=tmp_path), want, 2e-5)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.int32])
def test_products_of_other_dtypes_keep_a_separate_elementwise_kernel(dtype):
    x = (RNG.integers(-3, 4, (9, 10)) if dtype == np.int32 else RNG.standard_normal((9, 10))).astype(dtype)
    w = (RNG.integers(-3, 4, (10, 7)) if dtype == np.int32 else RNG.standard_normal((10, 7))).astype(dtype)
    fn = lambda x, w: knp.maximum(x @ w, x[:, :7])  # noqa: E731
    steps = _dispatches(fn, x, w)
    assert [kernel_strategy(s.region) for s in steps] == ["matmul", "elementwise"]
    want = np.maximum(x.astype(np.float64) @ w.astype(np.float64), x[:, :7].astype(np.float64)).astype(dtype)
    tol = {np.float16: 2e-2, BF16: 6e-2}.get(dtype)
    check_like_numpy(kiln.jit(fn)(x, w), want, tol)


def test_an_epilogue_reading_the_product_elsewhere_is_not_fused():
    x, w = _rand(16, 8), _rand(8, 16)
    fn = lambda x, w: knp.tanh(x @ w) + (x @ w).T  # noqa: E731  (reads the product transposed)
    steps = _dispatches(fn, x, w)
    assert [len(_ops(s)) for s in steps if kernel_strategy(s.region) == "matmul"] == [1]
    check_like_numpy(kiln.jit(fn)(x, w), np.tanh(x @ w) + (x @ w).T, 2e-5)


@pytest.mark.parametrize("fn", [lambda x, w: (x.T @ w).T, lambda x, w: [(x @ w).T, (x @ w) * 2]],
                         ids=["transposed", "transposed_and_scaled"])
def test_a_transposed_copy_of_the_product_is_not_an_epilogue(fn):
    """A kernel that only transposes the product (grad of x @ W taken as (dz^T @ x)^T) is no epilogue: the
    merge once wrote the untransposed product into it (a square W's gradient came out transposed)."""
    x, w = _rand(8, 8), _rand(8, 8)
    want = [np.asarray(r) for r in kiln.tree_util.tree_leaves(fn(np.asarray(x, np.float64), np.asarray(w, np.float64)))]
    got = kiln.tree_util.tree_leaves(kiln.jit(fn)(x, w))
    check_like_numpy(got, [r.astype(np.float32) for r in want], 2e-5)


def test_the_general_path_refuses_an_epilogue():
    from kiln.compiler.codegen.epilogue import NotFusable
    from kiln.compiler.codegen.matmul import emit_matmul_kernel, epilogue_fusable
    from kiln.compiler.target import Target

    x, w = np.ones((4, 5), np.int32), np.ones((5, 3), np.int32)
    graph = prepare_graph(trace_to_graph(lambda x, w: [(x @ w) * 2], [ShapedArray(x.shape, x.dtype),
                                                                      ShapedArray(w.shape, w.dtype)]))
    from kiln.compiler.fusion import _build_dispatch
    region = _build_dispatch("d", list(graph.eqns), list(graph.outvars)).region
    assert not epilogue_fusable(region)
    with pytest.raises(NotFusable, match="an epilogue needs the fast path"):
        emit_matmul_kernel(region, Target.host())


def test_mlp_gradients_match_finite_differences():
    x, y = _rand(13, 6, dtype=np.float64), _rand(13, 3, dtype=np.float64)
    w1, b1, w2, b2, w3 = _rand(6, 9, dtype=np.float64), _rand(9, dtype=np.float64), _rand(9, 7, dtype=np.float64), \
        _rand(7, dtype=np.float64), _rand(7, 3, dtype=np.float64)

    def loss(w1, b1, w2, b2, w3):
        h1 = knp.tanh(x @ w1 + b1)
        h2 = knp.maximum(h1 @ w2 + b2, 0.0)
        return knp.mean((h2 @ w3 - y) ** 2)

    params = [w1, b1, w2, b2, w3]
    grads = kiln.jit(kiln.grad(loss, argnums=tuple(range(5))))(*params)
    steps = _dispatches(kiln.grad(loss, argnums=tuple(range(5))), *params)
    assert sum(kernel_strategy(s.region) == "matmul" and len(_ops(s)) > 1 for s in steps) >= 3
    for k, p in enumerate(params):
        def f(v, k=k):
            ps = list(params)
            ps[k] = v
            return np.asarray(loss(*ps))
        np.testing.assert_allclose(grads[k], numerical_grad(f, p), rtol=1e-6, atol=1e-8, err_msg=f"param {k}")


# ----------------------------------------------------------------------------- horizontal kernels

def updates(a, b, c, d, s):
    return a * 2 + 1, knp.exp(b) - c[0], knp.tanh(c) * 3, d + 1, b * b, s * 0.5


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_independent_elementwise_kernels_are_one_horizontal_dispatch(dtype):
    args = [_rand(7, 13, dtype=dtype), _rand(5, dtype=dtype), _rand(3, 5, dtype=dtype), _rand(dtype=dtype),
            _rand(2, 3, 4, dtype=dtype)]
    steps = _dispatches(updates, *args)
    assert [kernel_strategy(s.region) for s in steps] == ["horizontal"]
    a, b, c, d, s = (x.astype(np.float64) for x in args)
    want = [v.astype(dtype) for v in (a * 2 + 1, np.exp(b) - c[0], np.tanh(c) * 3, d + 1, b * b, s * 0.5)]
    check_like_numpy(kiln.jit(updates)(*args), want, {np.float16: 4e-3, BF16: 3e-2}.get(dtype))


def test_horizontal_workgroups_split_every_segment_exactly_once():
    from kiln.compiler.compile import choose_workgroups
    from kiln.compiler.strategies import plan_region
    from kiln.compiler.target import Target

    fn = lambda a, b, c, i: (knp.exp(a) * 0.5, knp.tanh(b) + 1, knp.log1p(c * c), i * 3)  # noqa: E731
    args = [_rand(301, 299), _rand(70001), _rand(3, 1001, 7), RNG.integers(-9, 9, (17, 5)).astype(np.int32)]
    (step,) = _dispatches(fn, *args)
    plan = plan_region(step.region, Target.host())
    assert plan.strategy == "horizontal" and choose_workgroups(plan.work, plan.parallel_items) > 8
    a, b, c, i = args
    want = [np.exp(a) * np.float32(0.5), np.tanh(b) + 1, np.log1p(c * c), i * 3]
    check_like_numpy(kiln.jit(fn)(*args), want, 1e-5)


def test_dependent_updates_are_ordered_by_level():
    def adam_like(p, g, m, q):
        m2 = 0.9 * m + 0.1 * g
        t = knp.sum(q) + 1.0  # a reduction between: a run ends there
        return p - 0.01 * m2 / (knp.sqrt(g * g) + 1e-8), m2, q * 2, t

    args = [_rand(9, 4), _rand(9, 4), _rand(9, 4), _rand(6)]
    steps = _dispatches(adam_like, *args)
    p, g, m, q = (x.astype(np.float64) for x in args)
    m2 = 0.9 * m + 0.1 * g
    want = [p - 0.01 * m2 / (np.sqrt(g * g) + 1e-8), m2, q * 2, np.sum(q) + 1.0]
    check_like_numpy(kiln.jit(adam_like)(*args), [w.astype(np.float32) for w in want], 1e-5)
    assert len(steps) <= 3


def test_horizontal_kernels_run_in_the_c_runtime(tmp_path):
    args = [_rand(7, 13), _rand(5), _rand(3, 5), _rand(), _rand(2, 3, 4)]
    a, b, c, d, s = args
    want = [a * 2 + 1, np.exp(b) - c[0], np.tanh(c) * 3, d + 1, b * b, s * np.float32(0.5)]
    check_like_numpy(kiln_run_exported(updates, *args, tmp_path=tmp_path), want, 2e-6)


# ------------------------------------------------------------------------------ dispatch counts

@pytest.fixture(scope="module")
def mlp_train_example():
    return example("mlp_train")


def test_mlp_train_step_dispatch_counts(mlp_train_example):
    """The regression guard: exact dispatch counts of the two MLP training steps (deterministic).
    examples/mlp_train.py's train_step was 35 before epilogues and horizontal kernels, 17 before the bias
    gradients' column sums became one multi_reduction kernel; the benchmarks' mlp_train (784-512-512-10,
    batch 128) was 24, then 14."""
    from benchmarks.workloads import mlp

    result = mlp_train_example.MLPTrain._kiln_result_for("host")
    assert len(result.plans["train_step"].dispatches) == 15

    class Ops:
        np = knp
        value_and_grad = staticmethod(kiln.value_and_grad)

    args = mlp.make_train_inputs({"batch": 128, "dims": (784, 512, 512, 10)}, np.random.default_rng(0))
    steps = _dispatches(lambda *a: mlp.train_fn(Ops, *a), *args)
    assert len(steps) == 12
