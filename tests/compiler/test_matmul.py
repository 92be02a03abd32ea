"""dot_general kernels: shapes (odd, size 0/1, tails), batch dims, transposed operands, dtypes."""
import re
import time

import numpy as np
import pytest

from conftest import Batch, Case, assert_matches, random_array
from kiln.compiler.inprocess import aligned_copy, aligned_empty, dispatch
from kiln.lax import prims

RNG = np.random.default_rng(3)
MATMUL = (((1,), (0,)), ((), ()))
CASES = {}


def dot(dn):
    return lambda a, b: [prims.dot_general.bind(a, b, dimension_numbers=dn)]


for m, k, n in [(1, 1, 1), (1, 7, 1), (5, 3, 7), (6, 16, 16), (13, 300, 17), (64, 64, 64), (97, 259, 131), (0, 4, 5), (4, 0, 5), (3, 5, 0), (1, 1000, 1), (300, 1, 40)]:
    for dt in (np.float32, np.float64):
        CASES[f"mm-{np.dtype(dt).name}-{m}x{k}x{n}"] = Case(dot(MATMUL), [random_array(RNG, (m, k), dt), random_array(RNG, (k, n), dt)])
for dt in (np.int32, np.int64, np.int8, np.uint8, np.int16, np.bool_, np.float16, np.uint16, np.uint32, np.uint64):
    CASES[f"mm-{np.dtype(dt).name}"] = Case(dot(MATMUL), [random_array(RNG, (9, 13), dt, low=-3, high=3), random_array(RNG, (13, 11), dt, low=-3, high=3)])
CASES["batched"] = Case(dot((((2,), (1,)), ((0,), (0,)))), [random_array(RNG, (3, 20, 30), np.float32), random_array(RNG, (3, 30, 25), np.float32)])
CASES["batch-not-leading"] = Case(dot((((0,), (2,)), ((1,), (0,)))), [random_array(RNG, (30, 4, 20), np.float64), random_array(RNG, (4, 9, 30), np.float64)])
CASES["lhs-transposed"] = Case(dot((((0,), (0,)), ((), ()))), [random_array(RNG, (40, 33), np.float32), random_array(RNG, (40, 21), np.float32)])
CASES["rhs-transposed-x-wT"] = Case(dot((((1,), (1,)), ((), ()))), [random_array(RNG, (50, 64), np.float32), random_array(RNG, (70, 64), np.float32)])
CASES["matvec"] = Case(dot((((1,), (0,)), ((), ()))), [random_array(RNG, (100, 37), np.float32), random_array(RNG, (37,), np.float32)])
CASES["vecmat"] = Case(dot((((0,), (0,)), ((), ()))), [random_array(RNG, (37,), np.float64), random_array(RNG, (37, 90), np.float64)])
CASES["inner-product"] = Case(dot((((0,), (0,)), ((), ()))), [random_array(RNG, (999,), np.float32), random_array(RNG, (999,), np.float32)])
CASES["multi-contract"] = Case(dot((((1, 2), (0, 1)), ((), ()))), [random_array(RNG, (6, 5, 4), np.float32), random_array(RNG, (5, 4, 3), np.float32)])
CASES["multi-contract-noncontiguous"] = Case(dot((((0, 2), (1, 0)), ((), ()))), [random_array(RNG, (5, 6, 4), np.float32), random_array(RNG, (4, 5, 3), np.float32)])
CASES["transposed-operand-view"] = Case(
    lambda a, b: [prims.dot_general.bind(prims.transpose.bind(a, permutation=(1, 0)), b, dimension_numbers=MATMUL)],
    [random_array(RNG, (45, 30), np.float32), random_array(RNG, (45, 20), np.float32)],
)
CASES["large-multi-workgroup"] = Case(dot(MATMUL), [random_array(RNG, (300, 200), np.float32), random_array(RNG, (200, 500), np.float32)])


@pytest.fixture(scope="module")
def batch():
    return Batch(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy(batch, name):
    got, want = batch.run(name)
    for g, w in zip(got, want):
        scale = max(float(np.abs(w.astype(np.float64)).max()) if w.size else 1.0, 1.0)
        tol = {np.float32: 1e-5, np.float64: 1e-13, np.float16: 2e-3}.get(w.dtype.type, 0.0)
        assert_matches(g, w, rtol=tol, atol=tol * scale)


def test_dot_is_a_kernel_of_its_own():
    plan = CASES["transposed-operand-view"].plan
    assert [s.kind for s in plan.steps] == ["dot_general"]


def test_large_matmul_uses_workgroups(batch):
    _, groups = batch.compiled.dispatch_info(CASES["large-multi-workgroup"].plan.steps[0])
    assert groups > 1


def test_microkernel_uses_fma_vectors(batch):
    """The float32 product's microkernel multiplies and adds with packed FMAs on ymm (AVX2) or zmm
    (AVX-512) registers: the assembly of that one kernel (all ~50 of the batch took 15 s)."""
    from kiln.compiler.target import Target

    if Target.host().has_feature("fma") and Target.host().has_feature("avx"):
        index = batch.compiled.kernel_index(CASES["large-multi-workgroup"].plan.steps[0])
        asm = batch.compiled.assembly([index])
        assert re.search(r"\tvfmadd\w*ps\t.*%[yz]mm", asm), asm[:2000]
