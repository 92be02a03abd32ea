"""The native linalg kernels (kiln.lax._linalg_native, strategy `linalg`, codegen/linalg.py): cholesky, lu and
triangular_solve of float32/float64 batches compiled to one dispatch each, against numpy/scipy (LAPACK) at
sizes around the kernels' vector widths, tiles and panels (1, 2, 3, 7, 33, 100, 256), batched, empty, strided
and broadcast operands, every triangular_solve option, the failure cases (not positive definite, singular,
NaN) as the eager implementation gives them, through the C runtime with every x86-64 build forced. Gradients
are checked by finite differences in test_linalg_triangular.py (they run through these kernels)."""
import ctypes
import os
import platform
import subprocess

import numpy as np
import pytest
import scipy.linalg as sl

import kiln
import kiln.numpy as knp
from kiln import Program
from kiln.compiler.codegen import linalg as linalg_codegen
from kiln.compiler.compile import kernel_strategy
from kiln.compiler.fusion import DispatchStep, partition
from kiln.compiler.pipeline import prepare_graph
from kiln.core.aval import ShapedArray
from kiln.core.trace import trace_to_graph
from kiln.lax import _linalg_native as native
from kiln.lax import linalg as L
from kiln.vm import _native
from kiln_tools import kiln_run_binary, kiln_run_exported

TOL = {np.float32: 2e-4, np.float64: 1e-10}
FLAGS = [dict(left_side=left, lower=lower, transpose_a=trans, unit_diagonal=unit)
         for left in (True, False) for lower in (True, False) for trans in (False, True) for unit in (False, True)]


def spd(rng, shape, dtype):
    a = rng.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) / shape[-1] + np.eye(shape[-1])).astype(dtype)


def general(rng, shape, dtype):
    return (rng.standard_normal(shape) + 2 * np.eye(shape[-2], shape[-1])).astype(dtype)


def per_matrix(fn, *arrays):
    batch = arrays[0].shape[:-2]
    outs = [fn(*[a[i] for a in arrays]) for i in np.ndindex(*batch)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack(o).reshape(batch + o[0].shape) for o in zip(*outs))
    return np.stack(outs).reshape(batch + outs[0].shape)


def scipy_solve(a, b, left_side, lower, transpose_a, unit_diagonal):
    if left_side:
        return sl.solve_triangular(a, b, trans=int(transpose_a), lower=lower, unit_diagonal=unit_diagonal)
    return sl.solve_triangular(a, b.T, trans=int(not transpose_a), lower=lower, unit_diagonal=unit_diagonal).T


def strategies_of(fn, *args):
    graph = prepare_graph(trace_to_graph(lambda *xs: kiln.tree_leaves(fn(*xs)),
                                         [ShapedArray(a.shape, a.dtype) for a in args]))
    return [kernel_strategy(s.region) for s in partition(graph).steps if isinstance(s, DispatchStep)]


def check_lu(got, a, tol):
    """lu's outputs against LAPACK (scipy's getrf: pivots and factors) and the permutation they imply."""
    lu, pivots, perm = (np.asarray(g) for g in got)
    want_lu, want_piv = per_matrix(lambda m: sl.lu_factor(m.astype(np.float64)), a)
    np.testing.assert_array_equal(pivots, want_piv)
    np.testing.assert_allclose(lu, want_lu, rtol=tol, atol=tol)
    np.testing.assert_array_equal(perm, np.asarray(L.lu_pivots_to_permutation(pivots, a.shape[-2])))


def _all_three(x, a, b):
    return L.cholesky(x), L.lu(a), L.triangular_solve(a, b, left_side=True, lower=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 33, 100, 256])
def test_factorizations_match_lapack(n, dtype):
    rng = np.random.default_rng(n)
    batch = (2,) if n < 256 else (1,)
    x, a = spd(rng, batch + (n, n), dtype), general(rng, batch + (n, n), dtype)
    b = rng.standard_normal(batch + (n, 3)).astype(dtype)
    factor, lu, solved = kiln.jit(_all_three)(x, a, b)
    tol = TOL[dtype] * (10 if n == 256 else 1)
    assert np.asarray(factor).dtype == dtype and np.asarray(lu[0]).dtype == dtype
    np.testing.assert_allclose(factor, np.linalg.cholesky(x.astype(np.float64)), rtol=tol, atol=tol)
    check_lu(lu, a, tol)
    want = per_matrix(lambda m, y: sl.solve_triangular(m, y, lower=True), a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(solved, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


def test_each_factorization_is_one_dispatch_of_the_linalg_strategy():
    x = np.zeros((4, 9, 9), np.float32)
    assert strategies_of(lambda m: L.cholesky(m, symmetrize_input=False), x) == ["linalg"]
    assert strategies_of(L.lu, x) == ["linalg"]
    assert strategies_of(lambda m, y: L.triangular_solve(m, y, left_side=True), x, x) == ["linalg"]
    # a transposed or broadcast operand is read through its view: still one dispatch
    assert strategies_of(lambda m: L.lu(knp.swapaxes(m, -1, -2)), x) == ["linalg"]
    assert strategies_of(lambda m: knp.linalg.cholesky(m), x) == ["linalg"]
    # float16 keeps the whole-matrix lax implementation (a loop of other kernels)
    half = strategies_of(lambda m: L.cholesky(m, symmetrize_input=False), x.astype(np.float16))
    assert "linalg" not in half and len(half) > 1


@pytest.mark.parametrize("m,k,dtype", [(7, 1, np.float32), (33, 5, np.float64), (20, 70, np.float32)])
def test_triangular_solve_every_option(m, k, dtype):
    rng = np.random.default_rng(m * 100 + k)
    a = (rng.standard_normal((2, m, m)) + 3 * np.eye(m)).astype(dtype)
    lefts = rng.standard_normal((2, m, k)).astype(dtype)
    rights = rng.standard_normal((2, k, m)).astype(dtype)

    def all_flags(a, lefts, rights):
        return [L.triangular_solve(a, lefts if f["left_side"] else rights, **f) for f in FLAGS]

    for got, flags in zip(kiln.jit(all_flags)(a, lefts, rights), FLAGS):
        b = lefts if flags["left_side"] else rights
        want = per_matrix(lambda x, y: scipy_solve(x, y, **flags), a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype], err_msg=str(flags))


def test_strided_broadcast_and_empty_operands():
    rng = np.random.default_rng(5)
    x, a = spd(rng, (3, 33, 33), np.float64), general(rng, (3, 33, 40), np.float64)

    def fn(x, a):
        t = knp.swapaxes(a[:, :, 3:36], -1, -2)  # transposed, offset: strides (1, 40)
        shared = knp.broadcast_to(x[0], (2, 33, 33))  # a batch axis of stride 0
        return (L.cholesky(knp.swapaxes(x, -1, -2), symmetrize_input=False), L.lu(t), L.lu(a), L.cholesky(shared),
                L.triangular_solve(t, a[:, :, ::-1], left_side=True, lower=False, transpose_a=True),
                L.triangular_solve(t, knp.swapaxes(a, -1, -2), left_side=False, lower=True))

    chol_t, lu_t, lu_wide, chol_b, left, right = kiln.jit(fn)(x, a)
    t = np.swapaxes(a[:, :, 3:36], -1, -2)
    np.testing.assert_allclose(chol_t, np.linalg.cholesky(np.swapaxes(x, -1, -2)), atol=1e-12)
    check_lu(lu_t, t, 1e-10)
    check_lu(lu_wide, a, 1e-10)  # 33 x 40: more columns than rows
    np.testing.assert_allclose(chol_b, np.linalg.cholesky(np.broadcast_to(x[0], (2, 33, 33))), atol=1e-12)
    np.testing.assert_allclose(left, per_matrix(lambda m, y: scipy_solve(m, y, True, False, True, False), t,
                                                a[:, :, ::-1]), atol=1e-9)
    np.testing.assert_allclose(right, per_matrix(lambda m, y: scipy_solve(m, y, False, True, False, False), t,
                                                 np.swapaxes(a, -1, -2)), atol=1e-9)
    tall = general(rng, (2, 40, 33), np.float32)
    check_lu(kiln.jit(L.lu)(tall), tall, 1e-4)
    empty = np.zeros((0, 5, 5), np.float32)
    outs = kiln.jit(lambda m: (L.cholesky(m), *L.lu(m), L.triangular_solve(m, m[..., :2], left_side=True)))(empty)
    assert [np.asarray(o).shape for o in outs] == [(0, 5, 5), (0, 5, 5), (0, 5), (0, 5), (0, 5, 2)]
    assert [np.asarray(o).dtype for o in outs] == [np.float32, np.float32, np.int32, np.int32, np.float32]
    for shape in ((2, 3, 0), (2, 0, 3)):  # no columns: the permutation is still written; no rows: nothing
        for got, want in zip(kiln.jit(L.lu)(np.zeros(shape, np.float32)), L.lu(np.zeros(shape, np.float32))):
            assert np.asarray(got).shape == want.shape and np.array_equal(got, want)


def test_failures_are_the_eager_implementations():
    """Not positive definite (negative, zero and NaN pivots) gives an all-NaN factor per matrix; a singular lu
    finishes with zero pivots left unscaled and solving with it gives inf/NaN; the pivot is the first largest
    |entry| and a NaN beats every number (argmax's rule): all as the numpy eager implementation."""
    rng = np.random.default_rng(9)
    good = spd(rng, (9, 9), np.float64)
    rank_deficient = np.ones((9, 9))
    with_nan = good.copy()
    with_nan[4, 2] = np.nan
    indefinite = good - 3 * np.eye(9)
    x = np.stack([good, -np.eye(9), rank_deficient, with_nan, indefinite, np.zeros((9, 9))])
    got = np.asarray(kiln.jit(lambda m: L.cholesky(m, symmetrize_input=False))(x))
    assert np.isnan(got[1:]).all()
    np.testing.assert_allclose(got, L.cholesky(x, symmetrize_input=False), atol=1e-12)

    singular = rng.standard_normal((9, 9))
    singular[:, 3] = 0  # a zero column: a zero pivot (a dependent column's pivots are rounding noise: not compared)
    ties = np.array([[1.0, 2, 3], [-1, 5, 6], [1, 8, 9]])  # |entries| equal in column 0: the first wins
    nan_pivot = rng.standard_normal((5, 5))
    nan_pivot[3, 0], nan_pivot[1, 0] = np.nan, 100.0  # NaN beats the larger number
    for m in (singular, ties, nan_pivot, np.zeros((4, 4))):
        for dtype in (np.float32, np.float64):
            a = m.astype(dtype)
            got = kiln.jit(L.lu)(a)
            want = L.lu(a)
            np.testing.assert_array_equal(got[1], want[1])
            np.testing.assert_array_equal(got[2], want[2])
            np.testing.assert_allclose(got[0], want[0], rtol=TOL[dtype], atol=TOL[dtype], equal_nan=True)
    assert list(np.asarray(kiln.jit(L.lu)(nan_pivot)[1]))[0] == 3
    assert list(np.asarray(kiln.jit(L.lu)(ties)[1]))[0] == 0

    b = np.ones((9, 2))
    solve = kiln.jit(lambda m, y: knp.linalg.solve(m, y))
    got, want = np.asarray(solve(singular, b)), np.asarray(knp.linalg.solve(singular, b))
    assert not np.isfinite(got).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    zero_diagonal = np.tril(rng.standard_normal((4, 4)))
    zero_diagonal[2, 2] = 0
    got = np.asarray(kiln.jit(lambda m, y: L.triangular_solve(m, y, left_side=True, lower=True))(zero_diagonal,
                                                                                                    np.ones((4, 1))))
    want = L.triangular_solve(zero_diagonal, np.ones((4, 1)), left_side=True, lower=True)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    assert not np.isfinite(got[2:]).any() and np.isfinite(got[:2]).all()


def test_ill_conditioned_residuals():
    """Hilbert matrices (condition 1e10 at 8, f64): the factors reproduce the matrix to rounding, as LAPACK's."""
    n = 8
    h = 1.0 / (np.arange(n)[:, None] + np.arange(n)[None, :] + 1)
    factor, (lu, _, perm) = kiln.jit(lambda m: (L.cholesky(m), L.lu(m)))(h)
    factor, lu, perm = np.asarray(factor), np.asarray(lu), np.asarray(perm)
    eps = np.finfo(np.float64).eps
    assert np.abs(factor @ factor.T - h).max() <= 10 * n * eps
    lower, upper = np.tril(lu, -1) + np.eye(n), np.triu(lu)
    assert np.abs(lower @ upper - h[perm]).max() <= 10 * n * eps


def test_a_dtype_the_kernels_do_not_compute_is_refused_with_its_name():
    x = np.eye(3, dtype=np.float16)
    with pytest.raises(TypeError, match="the linalg kernels compute float32 and float64, not float16 "
                                        r"\(cholesky_native\)"):
        kiln.jit(lambda m: native.cholesky_p.bind(m))(x)


def _variants():
    """The x86-64 builds of a portable module this host can run (None: the default choice elsewhere)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return [None]
    lib = ctypes.CDLL(_native.runtime_library_path())
    lib.kiln_host_cpu_feature.restype = ctypes.c_int
    lib.kiln_host_cpu_feature.argtypes = [ctypes.c_char_p]
    levels = (("x86-64-v2", ("sse4.2",)), ("x86-64-v3", ("avx2", "fma")), ("x86-64-v4", ("avx512f",)))
    return [name for name, features in levels if all(lib.kiln_host_cpu_feature(f.encode()) == 1 for f in features)]


class _Module(Program, export_name="linalg_native"):
    def run(self, x=Program.like(np.zeros((3, 33, 33), np.float32)), a=Program.like(np.zeros((3, 33, 33), np.float32)),
            b=Program.like(np.zeros((3, 33, 5), np.float32))):
        lu, pivots, perm = L.lu(a)
        return (L.cholesky(x), lu, pivots, perm,
                L.triangular_solve(a, b, left_side=True, lower=False, unit_diagonal=True),
                L.triangular_solve(a, knp.swapaxes(b, -1, -2), left_side=False, lower=True, transpose_a=True))


def _kiln_run_build(tmp_path, module, inputs, n_outputs, variant, workers):
    """kiln-run's results of the module's function `run` with the x86-64 build `variant` forced (None: the best
    the host runs) and `workers` worker threads."""
    env = dict(os.environ)
    env.pop("KILN_CPU_VARIANT", None)
    if variant:
        env["KILN_CPU_VARIANT"] = variant
    outs = [tmp_path / f"{variant}-{workers}-{i}.npy" for i in range(n_outputs)]
    proc = subprocess.run([kiln_run_binary(), f"--module={module}", "--function=run", f"--workers={workers}",
                           *inputs, *[f"--output=@{o}" for o in outs]], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [np.load(o) for o in outs]


def test_exported_module_in_kiln_run_every_build_and_worker_count(tmp_path):
    """The portable module run by the standalone kiln-run with each x86-64 build the host can run forced
    (v2 has no masked vector instructions or FMA: LLVM expands them) and with 1 and 2 workers: numpy's
    numbers, and the same bits whatever the worker count (each matrix is one workgroup's)."""
    rng = np.random.default_rng(11)
    x = spd(rng, (3, 33, 33), np.float32)
    a = (rng.standard_normal((3, 33, 33)) / np.sqrt(33) + 2 * np.eye(33)).astype(np.float32)
    b = rng.standard_normal((3, 33, 5)).astype(np.float32)
    module = tmp_path / "linalg.vmfb"
    Program.get_compiled_artifact(_Module, target="portable").save(module)
    inputs = []
    for name, value in (("x", x), ("a", a), ("b", b)):
        np.save(tmp_path / f"{name}.npy", value)
        inputs.append(f"--input=@{tmp_path / f'{name}.npy'}")
    a64 = a.astype(np.float64)
    want = [np.linalg.cholesky(x.astype(np.float64)), None, None, None,
            per_matrix(lambda m, y: scipy_solve(m, y, True, False, False, True), a64, b.astype(np.float64)),
            per_matrix(lambda m, y: scipy_solve(m, y, False, True, True, False), a64,
                       np.swapaxes(b, -1, -2).astype(np.float64))]
    runs = {}
    for variant in _variants():
        for workers in ("1", "2"):
            runs[variant, workers] = _kiln_run_build(tmp_path, module, inputs, 6, variant, workers)
        got = runs[variant, "1"]
        assert all(np.array_equal(g, h) for g, h in zip(got, runs[variant, "2"]))
        check_lu(got[1:4], a, 1e-4)
        for g, w in zip(got, want):
            if w is not None:
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


class _Large(Program, export_name="linalg_large"):
    def run(self, x=Program.like(np.zeros((2, 601, 601), np.float32)), a=Program.like(np.zeros((601, 601), np.float32)),
            w=Program.like(np.zeros((450, 601), np.float64))):
        return (L.cholesky(x, symmetrize_input=False), *L.lu(a), *L.lu(w), *L.lu(knp.swapaxes(w, -1, -2)))


def test_large_matrices_blocked_path_every_build(tmp_path):
    """n >= WIDE_FROM takes the blocks of BLOCK with matrix-product updates (codegen/linalg.py _wide_blocks):
    Cholesky of 601 (a second matrix not positive definite at its pivot 520, in a later block: all NaN), LU
    of 601 square, 450 x 601 (more columns: the last block updates right of it) and 601 x 450 (more rows),
    against LAPACK with each x86-64 build forced (register tiles of 12 or 6 rows) and 1 or 2 workers."""
    assert 601 >= linalg_codegen.WIDE_FROM > 256 and 450 >= linalg_codegen.WIDE_FROM
    rng = np.random.default_rng(13)
    x = spd(rng, (2, 601, 601), np.float32)
    x[1, 520, 520] -= 1e3
    a = general(rng, (601, 601), np.float32)
    w = general(rng, (450, 601), np.float64)
    module = tmp_path / "large.vmfb"
    Program.get_compiled_artifact(_Large, target="portable").save(module)
    inputs = []
    for name, value in (("x", x), ("a", a), ("w", w)):
        np.save(tmp_path / f"{name}.npy", value)
        inputs.append(f"--input=@{tmp_path / f'{name}.npy'}")
    want = np.linalg.cholesky(x[0].astype(np.float64))
    for variant, workers in [(v, "1") for v in _variants()] + [(None, "2")]:
        got = _kiln_run_build(tmp_path, module, inputs, 10, variant, workers)
        np.testing.assert_allclose(got[0][0], want, rtol=2e-4, atol=2e-4, err_msg=str(variant))
        assert np.isnan(got[0][1]).all()
        check_lu(got[1:4], a, 1e-3)
        check_lu(got[4:7], w, 1e-10)
        check_lu(got[7:10], np.swapaxes(w, -1, -2), 1e-10)


class _Split(Program, export_name="linalg_split"):
    def run(self, x=Program.like(np.zeros((2, 300, 300), np.float64)), a=Program.like(np.zeros((300, 300), np.float32)),
            b=Program.like(np.zeros((77, 300), np.float32)), s=Program.like(np.zeros((2, 300, 300), np.float64)),
            t=Program.like(np.zeros((1100, 130), np.float64))):
        return (L.cholesky(knp.swapaxes(x, -1, -2), symmetrize_input=False),
                L.triangular_solve(a, b, left_side=False, lower=True, transpose_a=True), *L.lu(s), *L.lu(t))


@pytest.mark.filterwarnings("ignore:Diagonal number:scipy.linalg.LinAlgWarning")
def test_large_cholesky_split_over_workgroups(tmp_path, monkeypatch):
    """Cholesky of n >= SPLIT_FROM (a batch of fewer than SPLIT_BATCH) is split into blocks of SPLIT_BLOCK:
    the native Cholesky of each diagonal block, a triangular solve and a SYRK update spread over the
    workgroups, the pieces joined (_cholesky_split). Here (smaller blocks, fewer kernels to compile) 300 =
    blocks of 128, 128 and 44, read through a transposed view (strided operands), the second matrix not
    positive definite in its last block (all NaN); and a right triangular solve whose rows are split:
    LAPACK's numbers, the same bits with 1 and 2 workers. LU of n >= LU_SPLIT_FROM the same way
    (_lu_split: the panel's native LU, its row order applied to the rest, a unit triangular solve and a
    matrix product per block): LAPACK's pivots and factors, of a singular batch too (zero pivots); and a
    tall LU larger than WIDE_BYTES (as the split's panels) on the blocked large-matrix path."""
    from kiln.lax import _linalg_triangular as triangular
    assert 2 < triangular.SPLIT_BATCH
    monkeypatch.setattr(triangular, "SPLIT_FROM", 300)
    monkeypatch.setattr(triangular, "SPLIT_BLOCK", 128)
    monkeypatch.setattr(triangular, "LU_SPLIT_FROM", 300)
    monkeypatch.setattr(triangular, "LU_SPLIT_BLOCK", 128)
    rng = np.random.default_rng(15)
    x = spd(rng, (2, 300, 300), np.float64)
    x[1, 280, 280] -= 1e3
    x = np.ascontiguousarray(np.swapaxes(x, -1, -2))
    a = (rng.standard_normal((300, 300)) / 20 + 3 * np.eye(300)).astype(np.float32)
    b = rng.standard_normal((77, 300)).astype(np.float32)
    singular = general(rng, (2, 300, 300), np.float64)
    singular[1, :, 200] = 0  # a zero pivot (column left unscaled) in the second matrix's second block
    kinds = strategies_of(lambda m: L.cholesky(m, symmetrize_input=False), x)
    assert kinds == ["linalg"] * 8  # 3 blocks, 2 solves, 2 updates and the join (slices are operand views)
    assert strategies_of(L.lu, singular).count("linalg") == 5  # 3 panels and 2 solves (the rest: gathers, products)
    module = tmp_path / "split.vmfb"
    Program.get_compiled_artifact(_Split).save(module)
    inputs = []
    tall = general(rng, (1100, 130), np.float64)
    assert 130 < linalg_codegen.WIDE_FROM and 1100 * 130 * 8 > linalg_codegen.WIDE_BYTES
    for name, value in (("x", x), ("a", a), ("b", b), ("s", singular), ("t", tall)):
        np.save(tmp_path / f"{name}.npy", value)
        inputs.append(f"--input=@{tmp_path / f'{name}.npy'}")
    one, two = (_kiln_run_build(tmp_path, module, inputs, 8, None, w) for w in ("1", "2"))
    for g, h in zip(one, two):
        np.testing.assert_array_equal(g, h)
    np.testing.assert_allclose(one[0][0], np.linalg.cholesky(x[0].T), rtol=1e-10, atol=1e-10)
    assert np.isnan(one[0][1]).all()
    np.testing.assert_allclose(one[1], scipy_solve(a.astype(np.float64), b.astype(np.float64), False, True, True,
                                                   False), rtol=1e-4, atol=1e-4)
    check_lu(one[2:5], singular, 1e-10)
    check_lu(one[5:8], tall, 1e-10)


def test_large_lu_panel_on_the_stack_or_in_place_same_bits(monkeypatch):
    """The large-matrix LU factors each panel column-major on the stack (vectors down the rows) when it fits
    in PANEL_STACK_BYTES, else in place row by row: the same operations on each element, so the same bits."""
    monkeypatch.setenv("KILN_CACHE", "0")  # the two builds differ only by the module constant
    a = general(np.random.default_rng(14), (450, 601), np.float64)
    on_stack = [np.asarray(g) for g in kiln.jit(L.lu)(a)]
    monkeypatch.setattr(linalg_codegen, "PANEL_STACK_BYTES", 0)
    in_place = [np.asarray(g) for g in kiln.jit(L.lu)(a)]
    for g, h in zip(on_stack, in_place):
        np.testing.assert_array_equal(g, h)
    check_lu(on_stack, a, 1e-10)


def test_kiln_run_exported_solve_and_slogdet(tmp_path):
    rng = np.random.default_rng(12)
    a, b = general(rng, (2, 100, 100), np.float64), rng.standard_normal((2, 100, 4))

    def fn(a, b):
        sign, logdet = knp.linalg.slogdet(a)
        return knp.linalg.solve(a, b), sign, logdet, knp.linalg.inv(a)

    got = kiln_run_exported(fn, a, b, tmp_path=tmp_path)
    sign, logdet = np.linalg.slogdet(a)
    for g, w in zip(got, (np.linalg.solve(a, b), sign, logdet, np.linalg.inv(a))):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9)


def test_kernels_declare_lapacks_flop_counts():
    """kiln.compiler.flops: n^3/3 per Cholesky, m n^2 - n^3/3 per LU (m >= n), m^2 per right-hand side of a
    triangular solve, so kiln-run --print_statistics reports their GFLOP/s."""
    from kiln.compiler.flops import region_flops

    def regions(fn, *args):
        graph = prepare_graph(trace_to_graph(lambda *xs: kiln.tree_leaves(fn(*xs)),
                                             [ShapedArray(a.shape, a.dtype) for a in args]))
        return [s.region for s in partition(graph).steps if isinstance(s, DispatchStep)]

    x, wide = np.zeros((4, 30, 30), np.float32), np.zeros((2, 6, 9), np.float64)
    (chol,) = regions(lambda m: L.cholesky(m, symmetrize_input=False), x)
    assert region_flops(chol) == 4 * 30 ** 3 // 3
    (lu,) = regions(L.lu, wide)
    assert region_flops(lu) == 2 * (9 * 6 ** 2 - 6 ** 3 // 3)
    (left,) = regions(lambda m, y: L.triangular_solve(m, y, left_side=True), x, x[:, :, :7])
    (right,) = regions(lambda m, y: L.triangular_solve(m, y, left_side=False), x, x[:, :7, :])
    assert region_flops(left) == region_flops(right) == 4 * 30 * 30 * 7
