"""Large reductions with few outputs as partials and their combine (compiler/split_reduction.py): full,
column, few-row and middle-axis reductions against numpy for every dtype the ops support, odd sizes,
transposed and computed operands, NaN; the same bits for every worker count; through kiln-run."""
import ml_dtypes
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.compiler import split_reduction
from kiln.compiler.codegen import reduce
from kiln.compiler.fusion import partition
from kiln.compiler.pipeline import prepare_graph
from kiln.core.aval import ShapedArray
from kiln.core.trace import trace_to_graph
from kiln_tools import check_like_numpy, kiln_run_exported

RNG = np.random.default_rng(11)
DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8]
# (shape, axis): odd lengths, chunks that do not divide the reduced dim
CASES = [((1_000_003,), None), ((521, 1031), 0), ((3, 300_007), 1), ((300_007, 3), 0), ((5, 70_001, 3), 1),
         ((2, 131_101), None)]


def _steps(fn, *args):
    graph = prepare_graph(trace_to_graph(lambda *xs: kiln.tree_leaves(fn(*xs)),
                                         [ShapedArray(a.shape, a.dtype) for a in args]))
    return partition(graph).steps


def _numpy(op, x, axis, keepdims=False):
    if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16:
        return getattr(np, op)(x.astype(np.float64), axis=axis, keepdims=keepdims).astype(x.dtype)
    return getattr(np, op)(x, axis=axis, keepdims=keepdims)  # numpy's result dtype (uint8 sums in uint64)


def _tolerance(dtype, n):
    return {2: 4e-3 if dtype == np.float16 else 8e-3, 4: 2e-7, 8: 1e-14}[np.dtype(dtype).itemsize] * max(1, np.log2(n))


@pytest.mark.parametrize("shape,axis", CASES, ids=str)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_split_and_against_numpy(shape, axis, op):
    x32 = RNG.random(shape).astype(np.float32)
    names = [s.name for s in _steps(lambda a: getattr(knp, op)(a, axis=axis), x32)]
    assert names == ["reduce_" + op + "_0_chunks", "reduce_" + op + "_0_partials"], names
    for dtype in DTYPES:
        if np.dtype(dtype).kind in "iu":
            x = RNG.integers(0, 100, size=shape).astype(dtype)
        else:
            x = (RNG.standard_normal(shape) * 3).astype(dtype)
        if op == "sum" and np.dtype(dtype).itemsize == 2 and np.dtype(dtype).kind != "i":
            x = (np.abs(x.astype(np.float32)) * 1e-3).astype(dtype)  # no overflow, no cancellation
        got = np.asarray(kiln.jit(lambda a: getattr(knp, op)(a, axis=axis))(x))
        want = _numpy(op, x, axis)
        if np.dtype(dtype).kind in "iu":
            np.testing.assert_array_equal(got, want)
        else:
            n = x.size // max(want.size, 1)
            check_like_numpy(got, want, _tolerance(dtype, n) if op == "sum" else 0.0)


def test_f32_sum_rounds_once():
    """float64 partials, combined in float64, rounded once: within half an ulp plus the float64 error."""
    x = RNG.random(3_000_017).astype(np.float32)
    got = float(kiln.jit(knp.sum)(x))
    exact = float(np.sum(x.astype(np.float64)))
    assert abs(got - exact) <= abs(exact) * 2**-24


def test_keepdims_transposed_and_computed_operands():
    x = RNG.standard_normal((700, 1001)).astype(np.float32)
    fns = [
        (lambda a: knp.sum(a, axis=0, keepdims=True), lambda a: np.sum(a.astype(np.float64), 0, keepdims=True), True),
        (lambda a: knp.sum(a.T, axis=0), lambda a: np.sum(a.T.astype(np.float64), 0), True),
        (lambda a: knp.sum(a.T, axis=1), lambda a: np.sum(a.T.astype(np.float64), 1), False),  # 1001 outputs
        (lambda a: knp.max(a.T * 2.0 + 1.0), lambda a: np.max(a.T.astype(np.float64) * 2.0 + 1.0), True),
        (lambda a: knp.sum(knp.exp(a[:, ::2])), lambda a: np.sum(np.exp(a[:, ::2].astype(np.float64))), True),
    ]
    for kfn, nfn, split in fns:
        assert any(s.name.endswith("_chunks") for s in _steps(kfn, x)) == split
        check_like_numpy(kiln.jit(kfn)(x), nfn(x).astype(np.float32), 2e-6)


def test_nan_propagates_through_partials():
    x = RNG.random(1_000_000).astype(np.float32)
    x[777_777] = np.nan
    assert np.isnan(float(kiln.jit(knp.max)(x))) and np.isnan(float(kiln.jit(knp.min)(x)))
    assert np.isnan(float(kiln.jit(knp.sum)(x)))


def test_small_bool_and_many_output_reductions_stay_one_kernel():
    assert split_reduction.chunk_count(_steps(knp.sum, np.zeros(1000, np.float32))[0].region) == 1
    assert split_reduction.chunk_count(_steps(knp.any, np.zeros(1_000_000, np.bool_))[0].region) == 1
    assert split_reduction.chunk_count(_steps(lambda a: knp.sum(a, axis=1), np.zeros((4096, 512), np.float32))[0].region) == 1
    assert split_reduction.chunk_count(_steps(lambda a: knp.sum(a, axis=1), np.zeros((0, 1_000_000), np.float32))[0].region) == 1


def test_partials_stay_small():
    """Column sums: chunks * columns float64 partials never pass a quarter of the operand's bytes."""
    (first, _) = _steps(lambda a: knp.sum(a, axis=0), np.zeros((4096, 4096), np.float32))
    chunks = first.outputs[0].aval.shape[0]
    assert 2 <= chunks and chunks * 4096 * 8 * 4 <= 4096 * 4096 * 4
    assert first.outputs[0].aval.dtype == np.float64
    assert reduce.accumulator_dtype("max", np.float16) == np.float32


def test_same_bits_for_every_worker_count():
    x = RNG.standard_normal((1_234_567,)).astype(np.float32)
    y = RNG.standard_normal((2003, 1001)).astype(np.float32)
    fns = [kiln.jit(knp.sum), kiln.jit(lambda a: knp.sum(a, axis=0)), kiln.jit(lambda a: knp.mean(a))]
    results = []
    try:
        for workers in (1, 2, 3, 8):
            kiln.set_worker_count(workers)
            results.append([np.asarray(fns[0](x)).tobytes(), np.asarray(fns[1](y)).tobytes(),
                            np.asarray(fns[2](y)).tobytes()])
    finally:
        kiln.set_worker_count(0)
    assert all(r == results[0] for r in results)


def test_exported_through_kiln_run(tmp_path):
    x = RNG.standard_normal((1001, 523)).astype(np.float32)

    def fn(a):
        return knp.sum(a), knp.sum(a, axis=0), knp.max(a)

    got = kiln_run_exported(fn, x, tmp_path=tmp_path)
    x64 = x.astype(np.float64)
    check_like_numpy(got, [np.float32(x64.sum()), x64.sum(0).astype(np.float32), x.max()], 2e-6)


def _sequential_f64(x):
    acc = np.zeros(x.shape[1:], np.float64)
    for row in x:
        acc += row
    return acc


@pytest.mark.parametrize("rows", [3, 37, 203])
def test_column_sums_in_row_order(rows):
    """Column sums combine rows in order (blocks of ROWS_PER_BLOCK rows and the rest keep it): numpy's
    row-by-row float64 accumulation, rounded once, bit for bit."""
    x = RNG.standard_normal((rows, 1031)).astype(np.float32)
    assert split_reduction.chunk_count(_steps(lambda a: knp.sum(a, axis=0), x)[0].region) == 1
    got = np.asarray(kiln.jit(lambda a: knp.sum(a, axis=0))(x))
    assert got.tobytes() == _sequential_f64(x).astype(np.float32).tobytes()


def test_split_column_sums_are_chunk_partials_combined_in_order():
    """The two levels exactly: float64 partials of each chunk of rows, then their sum in chunk order."""
    x = RNG.standard_normal((1021, 1031)).astype(np.float32)
    (first, _) = _steps(lambda a: knp.sum(a, axis=0), x)
    chunks = first.outputs[0].aval.shape[0]
    assert chunks > 1
    bounds = [g * 1021 // chunks for g in range(chunks + 1)]
    partials = np.stack([_sequential_f64(x[bounds[g]:bounds[g + 1]]) for g in range(chunks)])
    got = np.asarray(kiln.jit(lambda a: knp.sum(a, axis=0))(x))
    assert got.tobytes() == _sequential_f64(partials).astype(np.float32).tobytes()
