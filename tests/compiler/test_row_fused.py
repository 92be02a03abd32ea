"""Row-fused reductions (compiler/row_fusion.py, codegen/row_fused.py): softmax, log_softmax, logsumexp,
layernorm, rmsnorm and variance as one kernel per group of rows, against numpy, for every float dtype,
odd sizes, rows of one element, strided and transposed inputs, keepdims and gradients; the same bits
for every worker count; eagerly, under kiln.jit and exported through kiln-run."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.compiler.codegen import row_fused
from kiln.compiler.compile import compile_plan, kernel_strategy
from kiln.compiler.fusion import DispatchStep, partition
from kiln.compiler.pipeline import prepare_graph
from kiln.core.aval import ShapedArray
from kiln.core.trace import trace_to_graph
from kiln_tools import check_like_numpy, kiln_run_exported

RNG = np.random.default_rng(10)
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
TOL = {np.dtype(np.float16): 4e-3, np.dtype(ml_dtypes.bfloat16): 3e-2, np.dtype(np.float32): 2e-6,
       np.dtype(np.float64): 1e-12}


def k_layernorm(x, g, b, axis=-1):
    mean = knp.mean(x, axis=axis, keepdims=True)
    c = x - mean
    return c / knp.sqrt(knp.mean(c * c, axis=axis, keepdims=True) + 1e-5) * g + b


def n_layernorm(x, g, b, axis=-1):
    x64 = x.astype(np.float64)
    c = x64 - x64.mean(axis, keepdims=True)
    return (c / np.sqrt((c * c).mean(axis, keepdims=True) + 1e-5) * g + b).astype(x.dtype)


def k_rmsnorm(x, g):
    return x * kiln.lax.rsqrt(knp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g


def n_rmsnorm(x, g):
    x64 = x.astype(np.float64)
    return (x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-6) * g).astype(x.dtype)


def n_softmax(x, axis=-1):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis, keepdims=True))
    return (e / e.sum(axis, keepdims=True)).astype(x.dtype)


def n_log_softmax(x, axis=-1):
    x64 = x.astype(np.float64)
    s = x64 - x64.max(axis, keepdims=True)
    return (s - np.log(np.exp(s).sum(axis, keepdims=True))).astype(x.dtype)


def n_logsumexp(x, axis=-1, keepdims=False):
    x64 = x.astype(np.float64)
    m = x64.max(axis, keepdims=True)
    r = m + np.log(np.exp(x64 - m).sum(axis, keepdims=True))
    return (r if keepdims else np.squeeze(r, axis)).astype(x.dtype)


OPS = {
    "softmax": (lambda x: kiln.nn.softmax(x, axis=-1), n_softmax),
    "log_softmax": (lambda x: kiln.nn.log_softmax(x, axis=-1), n_log_softmax),
    "logsumexp": (lambda x: kiln.nn.logsumexp(x, axis=-1), n_logsumexp),
    "logsumexp_keepdims": (lambda x: kiln.nn.logsumexp(x, axis=-1, keepdims=True),
                           lambda x: n_logsumexp(x, keepdims=True)),
    "var": (lambda x: knp.var(x, axis=-1), lambda x: x.astype(np.float64).var(-1).astype(x.dtype)),
    "std_keepdims": (lambda x: knp.std(x, axis=-1, keepdims=True),
                     lambda x: x.astype(np.float64).std(-1, keepdims=True).astype(x.dtype)),
}


def _plan(fn, *args):
    graph = prepare_graph(trace_to_graph(lambda *xs: kiln.tree_leaves(fn(*xs)),
                                         [ShapedArray(a.shape, a.dtype) for a in args]))
    return partition(graph)


def _strategies(plan):
    return [kernel_strategy(s.region) for s in plan.steps if isinstance(s, DispatchStep)]


def _check(got, want, dtype):
    check_like_numpy(got, want, TOL[np.dtype(dtype)])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("shape", [(67, 129), (3, 5, 7), (1, 2), (9, 1), (4,)], ids=str)
def test_against_numpy_eager_and_jit(name, shape, dtype):
    kfn, nfn = OPS[name]
    x = (RNG.standard_normal(shape) * 3).astype(dtype)
    want = nfn(x)
    _check(kfn(x), want, dtype)
    _check(kiln.jit(kfn)(x), want, dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(130, 77), (2, 3, 1000), (5, 1)], ids=str)
def test_layernorm_and_rmsnorm(shape, dtype):
    x = (RNG.standard_normal(shape) * 2 + 1).astype(dtype)
    g = RNG.standard_normal(shape[-1]).astype(dtype)
    b = RNG.standard_normal(shape[-1]).astype(dtype)
    _check(kiln.jit(k_layernorm)(x, g, b), n_layernorm(x, g, b), dtype)
    _check(kiln.jit(k_rmsnorm)(x, g), n_rmsnorm(x, g), dtype)


@pytest.mark.parametrize("fn", [lambda x: kiln.nn.softmax(x, axis=-1), lambda x: kiln.nn.log_softmax(x, axis=-1),
                                lambda x: knp.var(x, axis=-1),
                                lambda x: k_layernorm(x, np.float32(1.5), np.float32(0.25))],
                         ids=["softmax", "log_softmax", "var", "layernorm"])
def test_each_is_one_row_fused_kernel(fn):
    plan = _plan(fn, np.zeros((64, 128), np.float32))
    assert _strategies(plan) == ["row_fused"]


def test_softmax_of_a_transposed_input_and_over_axis_0():
    """The rows are strided views of the input (transpose, axis 0 moved last by the frontend)."""
    x = (RNG.standard_normal((33, 70)) * 4).astype(np.float32)
    check_like_numpy(kiln.jit(lambda a: kiln.nn.softmax(a.T, axis=-1))(x), n_softmax(x.T), 2e-6)
    check_like_numpy(kiln.jit(lambda a: kiln.nn.softmax(a, axis=0))(x), n_softmax(x, axis=0), 2e-6)
    check_like_numpy(kiln.jit(lambda a: k_layernorm(a[:, ::2], 1.0, 0.0))(x), n_layernorm(x[:, ::2], 1.0, 0.0), 2e-6)
    assert _strategies(_plan(lambda a: kiln.nn.softmax(a.T, axis=-1), x)) == ["row_fused"]


def test_special_values_in_rows():
    x = RNG.standard_normal((6, 40)).astype(np.float32)
    x[1, 3] = -np.inf
    x[2, :] = -np.inf
    x[3, 7] = np.nan
    x[4, 5] = np.inf
    x[5, :] = 7.0
    with np.errstate(invalid="ignore"):
        want = n_softmax(x)
    check_like_numpy(kiln.jit(lambda a: kiln.nn.softmax(a, axis=-1))(x), want, 2e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_gradients_against_finite_differences(dtype):
    """Backward of softmax and layernorm (row reductions of g*s and of g*c) are row-fused too."""
    x = RNG.standard_normal((5, 9))
    w = RNG.standard_normal((5, 9))
    g = RNG.standard_normal(9)

    def loss_np(a):
        return float((n_softmax(a) * w).sum() + (n_layernorm(a, g, 0.5) * w).sum())

    def loss(a):
        return knp.sum(kiln.nn.softmax(a, axis=-1) * w.astype(dtype)) + knp.sum(k_layernorm(a, g.astype(dtype), 0.5) * w.astype(dtype))

    got = np.asarray(kiln.jit(kiln.grad(loss))(x.astype(dtype)), np.float64)
    eps = 1e-6
    want = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        want[i] = (loss_np(x + d) - loss_np(x - d)) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-7, atol=1e-4 if dtype == np.float32 else 1e-7)
    graph = prepare_graph(trace_to_graph(lambda a: [kiln.grad(loss)(a)], [ShapedArray((5, 9), np.dtype(dtype))]))
    assert "row_fused" in _strategies(partition(graph))


def test_same_bits_for_every_worker_count():
    x = (RNG.standard_normal((301, 513)) * 5).astype(np.float32)
    g = RNG.standard_normal(513).astype(np.float32)
    fns = [kiln.jit(lambda a: kiln.nn.softmax(a, axis=-1)), kiln.jit(lambda a: k_layernorm(a, g, 0.1)),
           kiln.jit(lambda a: knp.var(a, axis=-1))]
    results = []
    try:
        for workers in (1, 2, 3, 8):
            kiln.set_worker_count(workers)
            results.append([np.asarray(f(x)).tobytes() for f in fns])
            results.append([np.asarray(f(x)).tobytes() for f in fns])
    finally:
        kiln.set_worker_count(0)
    assert all(r == results[0] for r in results)


def test_long_rows_few_rows_and_short_rows_keep_separate_kernels():
    """Rows whose scratch would pass SCRATCH_LIMIT, a handful of long rows (elementwise kernels would lose
    their parallelism) and many short rows (their vector width) keep the one-kernel-per-reduction
    partition; results still match."""
    long = np.zeros((2, 50_000), np.float32)
    assert "row_fused" not in _strategies(_plan(lambda a: kiln.nn.softmax(a, axis=-1), long))
    few = np.zeros((4, 20_000), np.float32)
    assert "row_fused" not in _strategies(_plan(lambda a: kiln.nn.softmax(a, axis=-1), few))
    short = np.zeros((20_000, 16), np.float32)  # the exp would no longer vectorize across rows
    assert "row_fused" not in _strategies(_plan(lambda a: kiln.nn.softmax(a, axis=-1), short))
    assert _strategies(_plan(lambda a: kiln.nn.softmax(a, axis=-1), np.zeros((5000, 64), np.float32))) == ["row_fused"]
    x = RNG.standard_normal((2, 50_000)).astype(np.float32)
    check_like_numpy(kiln.jit(lambda a: kiln.nn.softmax(a, axis=-1))(x), n_softmax(x), 2e-6)


def test_independent_kernels_are_not_merged():
    """A kernel on the same rows that reads nothing of the group stays a kernel of its own."""
    plan = _plan(lambda a, b: [knp.max(a, axis=-1), knp.sin(b) * 2.0], np.zeros((64, 8), np.float32),
                 np.zeros((64, 8), np.float32))
    assert _strategies(plan) == ["reduction", "elementwise"]


def test_a_value_used_after_the_group_is_an_output():
    """exp(x - max) is returned too: the merged kernel writes it as a second output."""
    x = RNG.standard_normal((40, 33)).astype(np.float32)

    def fn(a):
        e = knp.exp(a - knp.max(a, axis=-1, keepdims=True))
        return e / knp.sum(e, axis=-1, keepdims=True), e, knp.max(a, axis=-1)

    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    check_like_numpy(kiln.jit(fn)(x), [(e / e.sum(-1, keepdims=True)).astype(np.float32), e.astype(np.float32),
                                       x.max(-1)], 2e-6)
    plan = _plan(lambda a: fn(a), x)
    assert _strategies(plan) == ["row_fused"]
    assert len(plan.steps[0].outputs) == 3


def test_compiled_kernel_name():
    compiled = compile_plan(_plan(lambda a: kiln.nn.softmax(a, axis=-1), np.zeros((8, 16), np.float32)), cache=None)
    assert [k.name for k in compiled.kernels] == ["kiln_row_fused_0"]


def test_avx512_builds_run_the_passes_without_a_reduction_at_512_bits():
    """LLVM's tuning for x86-64-v4 prefers 256-bit vectors; a row kernel's passes without a reduction (softmax's
    exp into the scratch and its quotient) ask for 512-bit ones (row_fused._wide_lanes, loop metadata
    llvm.loop.vectorize.width), while its reductions (the max, the f64 sum) keep LLVM's choice and so their
    bits (the f64 sum: no zmm); the x86-64-v3 build is LLVM's choice throughout (test_targets: v3 and v4 the same bits)."""
    import re

    from kiln.compiler.target import Target

    region = _plan(lambda a: kiln.nn.softmax(a, axis=-1), np.zeros((64, 1000), np.float32)).steps[0].region
    assert row_fused._wide_lanes(row_fused.plan(region), region, Target.named("x86_64-unknown-linux-gnu", "x86-64-v4")) \
        == {(1, 0): 16, (2, 0): 16}
    assert row_fused._wide_lanes(row_fused.plan(region), region, Target.named("x86_64-unknown-linux-gnu", "x86-64-v3")) == {}
    for cpu in ("x86-64-v4", "x86-64-v3"):
        asm = compile_plan(_plan(lambda a: kiln.nn.softmax(a, axis=-1), np.zeros((64, 1000), np.float32)),
                           Target.named("x86_64-unknown-linux-gnu", cpu), cache=None).assembly()
        registers = {op: {r for line in asm.splitlines() if re.match(rf"\s+{op}\b", line)
                          for r in re.findall(r"%([xyz])mm", line)} for op in ("vfmadd213ps", "vdivps", "vaddpd", "vcvtps2pd")}
        wide = "z" if cpu == "x86-64-v4" else "y"
        assert registers["vfmadd213ps"] == {wide} and registers["vdivps"] == {wide}, (cpu, registers)
        assert "z" not in registers["vaddpd"] | registers["vcvtps2pd"], (cpu, registers)


def test_exported_through_kiln_run(tmp_path):
    x = (RNG.standard_normal((70, 257)) * 3).astype(np.float32)
    g = RNG.standard_normal(257).astype(np.float32)

    def fn(a, gamma):
        return kiln.nn.softmax(a, axis=-1), k_layernorm(a, gamma, 0.5), kiln.nn.logsumexp(a, axis=-1)

    got = kiln_run_exported(fn, x, g, tmp_path=tmp_path)
    check_like_numpy(got, [n_softmax(x), n_layernorm(x, g, 0.5), n_logsumexp(x)], 2e-6)


def test_softmax_schedule_reads_each_row_from_memory_once():
    """max over the row; exp(x - max) into the row scratch, then its f64 sum from the scratch (the exp loop
    keeps the f32 vector width); the quotient from the scratch: x is loaded in the first two loops only."""
    plan = _plan(lambda a: knp.exp(a - knp.max(a, axis=-1, keepdims=True))
                 / knp.sum(knp.exp(a - knp.max(a, axis=-1, keepdims=True)), axis=-1, keepdims=True),
                 np.zeros((64, 128), np.float32))
    (step,) = plan.steps
    p = row_fused.plan(step.region)
    assert [len(passes) for passes in p.passes] == [1, 2, 1]
    assert len(p.scratch) == 1
    first, second = p.passes[1]
    assert first.stores == p.scratch and not first.reductions
    assert second.reductions and not second.stores
    assert [e.primitive.name for e in p.passes[2][0].eqns if e.primitive.name not in ("reshape", "broadcast_in_dim")] == ["div"]


def test_row_fused_refuses_what_it_cannot_hold():
    plan = _plan(lambda a: knp.sum(a, axis=-1), np.zeros((8, 16), np.float32))
    with pytest.raises(row_fused.NotRowFusable, match="no reduction"):
        row_fused.plan(_plan(lambda a: knp.sin(a), np.zeros((8, 16), np.float32)).steps[0].region)
    with pytest.raises(row_fused.NotRowFusable, match="rows shorter than 2 or empty"):
        row_fused.plan(_plan(lambda a: knp.sum(a, axis=-1), np.zeros((8, 1), np.float32)).steps[0].region)
    assert not row_fused.is_row_fused(plan.steps[0].region)


def test_materialized_producer_joins_the_group():
    """exp(x) is materialized by fusion (two kernels read it); the reduction reading it pulls its kernel in."""
    x = RNG.standard_normal((64, 100)).astype(np.float32)

    def fn(a):
        e = knp.exp(a)
        return e / knp.sum(e, axis=-1, keepdims=True)

    assert _strategies(_plan(fn, x)) == ["row_fused"]
    e = np.exp(x.astype(np.float64))
    check_like_numpy(kiln.jit(fn)(x), (e / e.sum(-1, keepdims=True)).astype(np.float32), 2e-6)


def test_pulled_producer_whose_value_is_returned():
    """The merged region ends with its one reduction but also returns the producer's value: it is a
    row-fused region, not a plain reduction's (whose kernel writes only the reduction; a regression)."""
    x = RNG.standard_normal((64, 100)).astype(np.float32)

    def fn(a):
        e = knp.exp(a) * 0.5
        return e, knp.sum(e, axis=-1)

    plan = _plan(fn, x)
    assert _strategies(plan) == ["row_fused"]
    assert row_fused.is_row_fused(plan.steps[0].region)
    e = np.exp(x.astype(np.float64)) * 0.5
    check_like_numpy(kiln.jit(fn)(x), [e.astype(np.float32), e.sum(-1).astype(np.float32)], 2e-6)


def _streams(fn, *args):
    (step,) = _plan(fn, *args).steps
    return step.region, row_fused._streams(row_fused.plan(step.region), step.region)


def test_prefetched_streams_are_the_rows_inputs_and_outputs():
    """The next row's lines are prefetched for the full-shape buffers read and written along unit-stride
    columns (x and the result), not for a vector broadcast over the rows (gamma: it stays cached), a view
    read with a column stride, or rows whose streamed bytes are under PREFETCH_MIN_ROW_BYTES; and only in
    the quiet passes (after the first, storing no row output), of which rmsnorm has none."""
    from kiln.compiler.compile import _optimized_kernel
    from kiln.compiler.target import Target

    x = np.zeros((64, 300), np.float32)
    g = np.zeros(300, np.float32)
    region, streams = _streams(lambda a, b: k_layernorm(a, b, 0.5), x, g)
    assert [(s.pointer, s.write, s.row_strides, s.offset) for s in streams] == [(0, False, (300,), 0), (2, True, (300,), 0)]
    assert "llvm.prefetch" in str(_optimized_kernel("k", region, Target.host()))
    _, streams = _streams(lambda a: kiln.nn.softmax(a[:, 5:305], axis=-1), np.zeros((64, 400), np.float32))
    assert [(s.pointer, s.row_strides, s.offset) for s in streams if not s.write] == [(0, (400,), 5)]
    _, streams = _streams(lambda a: kiln.nn.softmax(a[:, ::2], axis=-1), np.zeros((64, 600), np.float32))
    assert [s.write for s in streams] == [True]
    region, streams = _streams(lambda a: kiln.nn.softmax(a, axis=-1), np.zeros((64, 100), np.float32))
    assert streams == [] and "llvm.prefetch" not in str(_optimized_kernel("k", region, Target.host()))
    # rmsnorm: a sum of squares, then the scaled row stored: no pass between streams, nothing prefetched
    (step,) = _plan(k_rmsnorm, x, g).steps
    assert row_fused._quiet_passes(row_fused.plan(step.region)) == []
    assert "llvm.prefetch" not in str(_optimized_kernel("k", step.region, Target.host()))
    p = row_fused.plan(_plan(lambda a: kiln.nn.softmax(a, axis=-1), x).steps[0].region)
    assert row_fused._quiet_passes(p) == [(1, 0), (1, 1)]  # the exp into the scratch and its sum


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_prefetching_kernels_against_numpy_through_kiln_run(dtype, tmp_path):
    """Rows long enough to prefetch (several chunks and a tail chunk: 1000 columns; sliced inputs with a
    row stride and an offset; two row inputs in one kernel; two row outputs; rows over two dims), run by
    the standalone kiln-run."""
    x = (RNG.standard_normal((67, 1200)) * 3).astype(dtype)
    y = RNG.standard_normal((67, 1000)).astype(dtype)
    g = RNG.standard_normal(1000).astype(dtype)
    z = RNG.standard_normal((3, 5, 1000)).astype(dtype)

    def fn(a, b, gamma, c):
        e = knp.exp(c - knp.max(c, axis=-1, keepdims=True))
        return (kiln.nn.softmax(a[:, 7:1007], axis=-1), k_layernorm(a[:, 100:1100] + b, gamma, 0.25),
                e / knp.sum(e, axis=-1, keepdims=True), e, k_rmsnorm(c, gamma))

    s = (x[:, 100:1100] + y).astype(dtype)
    z64 = z.astype(np.float64)
    e = np.exp(z64 - z64.max(-1, keepdims=True))
    want = [n_softmax(x[:, 7:1007]), n_layernorm(s, g, 0.25), (e / e.sum(-1, keepdims=True)).astype(dtype),
            e.astype(dtype), n_rmsnorm(z, g)]
    got = kiln_run_exported(fn, x, y, g, z, tmp_path=tmp_path)
    tol = {np.dtype(np.float16): 8e-3, np.dtype(np.float32): 4e-6, np.dtype(np.float64): 1e-12}[np.dtype(dtype)]
    check_like_numpy(got, want, tol)
    plan = _plan(fn, x, y, g, z)
    streams = [row_fused._streams(row_fused.plan(st.region), st.region) for st in plan.steps]
    assert _strategies(plan) == ["row_fused"] * len(plan.steps)
    assert all(ss and ss[-1].write for ss in streams)
    assert [False, False, True] in [[s.write for s in ss] for ss in streams]  # the layer norm reads x and y


def _special_rows(cols: int) -> np.ndarray:
    """Rows with NaN first, last, inside and everywhere, all -inf, +inf among -inf, zeros of both signs
    (a maximum or minimum that is +0 or -0), +inf with NaN, and ordinary rows."""
    s = RNG.standard_normal((16, cols)).astype(np.float32)
    s[1, 0] = s[2, -1] = s[3, cols // 2] = np.nan
    s[4, :] = np.nan
    s[5, :] = -np.inf
    s[6, :] = -np.inf
    s[6, 37] = np.inf
    s[7, :] = 0.0
    s[7, 1::3] = -0.0
    s[8, :] = -0.0
    s[9] = -np.abs(s[9]) - 1
    s[9, 100] = -0.0
    s[10] = -np.abs(s[10]) - 1
    s[10, 20], s[10, 120] = -0.0, 0.0
    s[11] = np.abs(s[11]) + 1
    s[11, 5], s[11, 140] = 0.0, -0.0
    s[12, 3], s[12, 90] = np.inf, np.nan
    s[13, ::2] = -np.inf
    s[14, :] = np.inf
    return s


def _ieee(x, op, axis):
    """IEEE 754-2019 maximum/minimum (kiln's max and min): NaN if any operand is NaN, +0 above -0."""
    with np.errstate(invalid="ignore"):
        out = np.asarray((np.max if op == "max" else np.min)(x, axis=axis))
        nan = np.isnan(x).any(axis=axis)
        signs = np.signbit(np.where(x == 0, x, np.nan if op == "max" else -np.nan))
        plus_zero = ((x == 0) & ~np.signbit(x)).any(axis=axis)
        minus_zero = ((x == 0) & np.signbit(x)).any(axis=axis)
    del signs
    zero = (out == 0) & ~nan
    want_minus = minus_zero & ~plus_zero if op == "max" else minus_zero
    out = np.where(zero, np.where(want_minus, np.float32(-0.0), np.float32(0.0)), out).astype(x.dtype)
    return np.where(nan, np.float32(np.nan), out).astype(x.dtype)


def _same_bits(got, want):
    """Equal values with NaN where NaN is, and the sign of every zero."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(want[want == 0]))


def test_max_and_min_with_nan_and_signed_zeros_in_every_x86_64_build(tmp_path, monkeypatch):
    """Float max/min reductions over rows combine unchecked (one max per vector) and run a row again with
    the exact combine where an operand was NaN or the result is a zero (reduce._Combiner.combine_unchecked):
    the results are IEEE maximum/minimum's (NaN propagates as numpy's, +0 above -0), in the reduction
    kernel (max, min over rows), in row-fused kernels (softmax, logsumexp, a min-max scaling with both in
    one loop) and in the column reductions (max, min over columns: each column combined unchecked, the tile
    again where one had a NaN or a zero result; the special rows as columns, among ordinary ones), on every build of a portable module (x86-64-v4, v3, v2, forced
    with KILN_CPU_VARIANT); the max and min bits are the same on every build, and softmax, logsumexp and a
    float32 exp over [-200, 200] (overflow, subnormal results, underflow) the same on the FMA builds (v4, v3)."""
    import platform

    from kiln import Program
    from kiln_tools import run_kiln_run

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the x86-64 builds run on an x86-64 host")
    s = _special_rows(150)  # a vector loop, its vector remainder and a scalar tail on each build
    cols = RNG.standard_normal((150, 300)).astype(np.float32)  # two tiles of 256 columns: one with the specials
    cols[:, 280:296] = s.T

    def fn(a, c):
        lo, hi = knp.min(a, axis=-1, keepdims=True), knp.max(a, axis=-1, keepdims=True)
        return (knp.max(a, axis=1), knp.min(a, axis=1), kiln.nn.softmax(a, axis=-1), kiln.nn.logsumexp(a, axis=-1),
                (a - lo) / (hi - lo), knp.max(a, axis=0), knp.max(a.astype(np.float64), axis=1),
                knp.max(c, axis=0), knp.min(c, axis=0), knp.exp(a * 60.0))

    plan = _plan(fn, s, cols)
    assert set(_strategies(plan)) >= {"reduction", "row_fused"}

    class Special(Program, export_name="special"):
        def run(self, a=Program.like(s), c=Program.like(cols)):
            return fn(a, c)

    path = tmp_path / "special.vmfb"
    Program.get_compiled_artifact(Special, target="portable").save(path)
    np.save(tmp_path / "s.npy", s)
    np.save(tmp_path / "c.npy", cols)
    x64 = s.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = (x64 - x64.min(-1, keepdims=True)) / (x64.max(-1, keepdims=True) - x64.min(-1, keepdims=True))
        lse = n_logsumexp(s)
    finite_max = ~np.isinf(_ieee(s, "max", 1))  # m + log(sum(exp(x - m))) is undefined where m is infinite
    exact = [_ieee(s, "max", 1), _ieee(s, "min", 1), None, None, None, _ieee(s, "max", 0), _ieee(x64, "max", 1),
             _ieee(cols, "max", 0), _ieee(cols, "min", 0), None]
    with np.errstate(invalid="ignore", over="ignore"):
        near = [None, None, n_softmax(s), lse, scaled, None, None, None, None, np.exp(x64 * 60.0)]
    results = {}
    for variant in ("x86-64-v4", "x86-64-v3", "x86-64-v2"):
        monkeypatch.setenv("KILN_CPU_VARIANT", variant)
        outs = [tmp_path / f"{variant}-{i}.npy" for i in range(len(exact))]
        proc = run_kiln_run(f"--module={path}", "--function=run", f"--input=@{tmp_path / 's.npy'}",
                            f"--input=@{tmp_path / 'c.npy'}",
                            *[f"--output=@{o}" for o in outs], check=False)
        if proc.returncode and "which this host CPU lacks" in proc.stderr and variant != "x86-64-v2":
            continue
        assert proc.returncode == 0, proc.stderr
        results[variant] = [np.load(o) for o in outs]
        for i, (got, bits, value) in enumerate(zip(results[variant], exact, near)):
            if bits is not None:
                _same_bits(got, bits)
            else:
                rows = finite_max if i == 3 else slice(None)
                np.testing.assert_allclose(got[rows], value[rows].astype(np.float32), rtol=2e-5, atol=1e-6,
                                           err_msg=f"{variant} {i}")
    assert "x86-64-v2" in results
    for got in results.values():
        for i in (0, 1, 5, 6, 7, 8):
            assert got[i].tobytes() == results["x86-64-v2"][i].tobytes()
    if "x86-64-v4" in results:  # the FMA builds agree bit for bit (the sign of a NaN aside): softmax, logsumexp
        for i in (2, 3, 9):     # and exp (the v4 build scales exp's 2^n with vscalefps; overflow, subnormals)
            _same_bits(results["x86-64-v4"][i], results["x86-64-v3"][i])


def test_large_outputs_are_streamed_past_the_caches(tmp_path, monkeypatch):
    """Full-row floating-point outputs (float32, float64, float16, bfloat16) at least as large as the machine's
    last-level cache (kiln_dispatch_args_t.last_level_cache_kib; STREAM_MIN_BYTES where the runtime does not
    know it) are written with non-temporal stores from a staged chunk (x86-64, aarch64: test_cross_aarch64): the
    kernel has both row loops and each dispatch chooses. Run by kiln-run with KILN_LAST_LEVEL_CACHE small
    (streamed), large (cached) and
    unknown (45 MB >= STREAM_MIN_BYTES: streamed): the same bits each time, numpy's values. Rows of 8191
    elements start at every offset within a cache line, so each row's copy has its head before the first
    aligned line, aligned lines and a tail; the chunks end at a partial one."""
    from kiln import Program
    from kiln.compiler.compile import _optimized_kernel
    from kiln.compiler.target import Target
    from kiln_tools import run_kiln_run

    rows, cols = 343, 8191
    assert rows * cols * (4 + 8 + 2 + 2) >= row_fused.STREAM_MIN_BYTES
    x = (RNG.standard_normal((rows, cols)) * 3).astype(np.float32)

    def fn(a):
        e = knp.exp(a - knp.max(a, axis=-1, keepdims=True))
        return (e / knp.sum(e, axis=-1, keepdims=True), e.astype(np.float64), e.astype(np.float16),
                e.astype(ml_dtypes.bfloat16))

    (step,) = _plan(fn, x).steps
    host = Target.host().triple
    assert row_fused._streamed_outputs(row_fused.plan(step.region), step.region, host) == [0, 1, 2, 3]
    assert row_fused._streamed_outputs(row_fused.plan(step.region), step.region, "aarch64-unknown-linux-gnu") == [0, 1, 2, 3]
    assert row_fused._streamed_outputs(row_fused.plan(step.region), step.region, "riscv64-unknown-linux-gnu") == []
    (small,) = _plan(fn, x[:20, :1000]).steps  # under STREAM_FLOOR_BYTES: one row loop, cached
    assert row_fused._streamed_outputs(row_fused.plan(small.region), small.region, host) == []
    p = row_fused.plan(step.region)
    # the pass storing only streamed outputs prefetches the next row too (no write miss to compete with)
    after_first = [(k, n) for k, loop in enumerate(p.passes) for n in range(len(loop))][1:]
    assert row_fused._quiet_passes(p) == [(1, 1)] and row_fused._quiet_passes(p, [0, 1, 2, 3]) == after_first
    kernel = str(_optimized_kernel("k", step.region, Target.host()))
    assert "!nontemporal" in kernel and "llvm.prefetch" in kernel
    assert "!nontemporal" not in str(_optimized_kernel("k", small.region, Target.host()))

    class Big(Program, export_name="big"):
        def run(self, a=Program.like(x)):
            return fn(a)

    Program.get_compiled_artifact(Big).save(tmp_path / "big.vmfb")
    np.save(tmp_path / "x.npy", x)
    results = {}
    for cache in ("64K", "1G", "0"):
        monkeypatch.setenv("KILN_LAST_LEVEL_CACHE", cache)
        outs = [tmp_path / f"{cache}-{i}.npy" for i in range(4)]
        run_kiln_run(f"--module={tmp_path / 'big.vmfb'}", "--function=run", f"--input=@{tmp_path / 'x.npy'}",
                     *[f"--output=@{o}" for o in outs])
        results[cache] = [np.load(o) for o in outs]
    for got in results.values():
        assert [g.tobytes() for g in got] == [g.tobytes() for g in results["0"]]
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(-1, keepdims=True))
    e32 = e.astype(np.float32)
    got = results["0"][:3] + [results["0"][3].view(ml_dtypes.bfloat16)]  # kiln-run writes bfloat16's bits as <u2
    check_like_numpy(got[:2], [(e / e.sum(-1, keepdims=True)).astype(np.float32), e32.astype(np.float64)], 2e-6)
    check_like_numpy(got[2:], [e32.astype(np.float16), e32.astype(ml_dtypes.bfloat16)], 8e-3)  # an ulp of either
