"""The native qr and svd kernels (kiln.lax._svd_qr_native, the `svd` kernel strategy in
kiln/compiler/codegen/linalg_svd.py) for real float32/float64: against numpy (LAPACK) at square, tall and
wide shapes, batched and empty batches, both full_matrices modes; reconstruction and orthogonality;
rank-deficient and zero matrices; huge and tiny scales; NaN; one dispatch per call; the exported module
run by kiln-run. The eager implementation (the kernel's algorithm in numpy) is checked at more shapes than
the compiled kernel, which is compared with numpy and with the eager results (the same algorithm: in
float64 even the signs of the singular vectors agree)."""
import numpy as np
import pytest

import kiln
from kiln.compiler import strategies
from kiln.compiler.fusion import DispatchStep, partition
from kiln.compiler.pipeline import prepare_graph
from kiln.core.aval import ShapedArray
from kiln.core.trace import trace_to_graph
from kiln.lax import linalg as lax_linalg
from kiln_tools import kiln_run_exported

FLOATS = [np.float32, np.float64]
SHAPES = [(1, 1), (2, 3), (3, 2), (7, 7), (33, 20), (20, 33), (64, 64)]


def _eps(dtype):
    return float(np.finfo(dtype).eps)


def _t(x):
    return np.swapaxes(np.asarray(x, np.float64), -1, -2)


def _orthogonality(q):
    q = np.asarray(q, np.float64)
    return np.abs(_t(q) @ q - np.eye(q.shape[-1])).max() if q.shape[-1] else 0.0


def _reconstruct(u, s, vh):
    u, s, vh = (np.asarray(a, np.float64) for a in (u, s, vh))
    k = s.shape[-1]
    return (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]


def check_svd(x, outs, full_matrices, slack=1.0):
    """s against numpy's singular values (relative to the largest), u s vh against x, u and v orthogonal,
    the shapes and dtype numpy gives."""
    u, s, vh = (np.asarray(o) for o in outs)
    want_u, want_s, want_vh = np.linalg.svd(x, full_matrices=full_matrices)
    assert u.shape == want_u.shape and s.shape == want_s.shape and vh.shape == want_vh.shape
    assert u.dtype == s.dtype == vh.dtype == x.dtype
    eps, n = _eps(x.dtype), max(x.shape[-2:])
    norm = max(np.abs(np.asarray(x, np.float64)).max(), np.finfo(np.float64).tiny)
    bound = slack * 10 * n * eps
    assert np.all(np.diff(s, axis=-1) <= 0), "singular values must descend"
    assert np.abs(s - want_s).max() <= bound * max(want_s.max(initial=0), norm)
    assert np.abs(_reconstruct(u, s, vh) - x).max() <= bound * norm * n
    assert _orthogonality(u) <= bound and _orthogonality(_t(vh)) <= bound


def check_qr_of_rank_deficient(x, outs):
    """q orthogonal, r upper triangular, q r = x (q's columns past the rank are not unique: not LAPACK's)."""
    q, r = (np.asarray(o) for o in outs)
    bound = 20 * max(x.shape[-2:]) * _eps(x.dtype)
    assert np.all(np.tril(r, -1) == 0) and _orthogonality(q) <= bound
    assert np.abs(np.asarray(q, np.float64) @ r - x).max() <= bound * max(1.0, np.abs(x).max()) * max(x.shape[-2:])


def check_qr(x, outs, full_matrices):
    """q and r as LAPACK's (same signs), r upper triangular, q orthogonal, q r = x."""
    q, r = (np.asarray(o) for o in outs)
    want_q, want_r = np.linalg.qr(x, "complete" if full_matrices else "reduced")
    assert q.shape == want_q.shape and r.shape == want_r.shape and q.dtype == r.dtype == x.dtype
    eps, n = _eps(x.dtype), max(x.shape[-2:])
    bound = 20 * n * eps
    assert np.all(np.tril(r, -1) == 0)
    np.testing.assert_allclose(q, want_q, atol=bound * 10)
    np.testing.assert_allclose(r, want_r, atol=bound * 10 * max(1.0, np.abs(x).max()))
    assert _orthogonality(q) <= bound
    assert np.abs(np.asarray(q, np.float64) @ r - x).max() <= bound * max(1.0, np.abs(x).max()) * n


# ---- eager (the kernels' algorithm in numpy) at every shape -------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_eager_svd_and_qr_match_numpy(dtype):
    rng = np.random.default_rng(0)
    for shape in SHAPES[:-1] + [(3, 4, 2), "ones"]:
        # ones: the reflectors after the first are built from rounding noise that grows subnormal
        x = np.ones((45, 33), dtype) if shape == "ones" else rng.standard_normal(shape).astype(dtype)
        shape = x.shape
        for full in (True, False):
            check_svd(x, lax_linalg.svd(x, full_matrices=full), full)
            if x.shape == (45, 33) and x[0, 0] == 1:
                check_qr_of_rank_deficient(x, lax_linalg.qr(x, full_matrices=full))
            else:
                check_qr(x, lax_linalg.qr(x, full_matrices=full), full)
        np.testing.assert_allclose(lax_linalg.svd(x, compute_uv=False), np.linalg.svd(x, compute_uv=False),
                                   atol=20 * max(shape) * _eps(dtype) * np.abs(x).max() * 4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_eager_bidiagonal_path_matches_numpy(dtype, monkeypatch):
    """The Golub-Kahan-Reinsch path (bidiagonalization, implicit-shift QR) at every shape, forced below its
    size threshold: random, rank-deficient, zero, graded and ill-conditioned matrices, zero diagonal entries
    in the bidiagonal matrix (the cancellation step), huge and tiny scales; NaN and inf give NaN."""
    from kiln.lax import _svd_qr_native as native

    monkeypatch.setattr(native, "BIDIAG_FROM", 1)
    rng = np.random.default_rng(11)
    n = 9
    bidiagonal = np.diag(rng.standard_normal(n)) + np.diag(rng.standard_normal(n - 1), 1)
    bidiagonal[[0, 3, n - 1], [0, 3, n - 1]] = 0
    column = rng.standard_normal((n, n))
    column[:, 4] = 0
    q1, q2 = (np.linalg.qr(rng.standard_normal((n, n)))[0] for _ in range(2))
    cases = [rng.standard_normal(shape) for shape in SHAPES[:-1] + [(3, 4, 2), (40, 31)]] + [
        np.eye(n), np.ones((n, n)), np.zeros((n, n)), column, bidiagonal, np.diag([1, 1, 1, 2, 2, 2, 0, 0, 3.0]),
        np.diag(np.logspace(0, -30, n)) + np.diag(np.logspace(0, -30, n - 1), 1),
        np.diag(np.logspace(-30, 0, n)) + np.diag(np.logspace(-30, 0, n - 1), 1),
        (q1 * np.logspace(0, -12, n)) @ q2]
    for case in cases:
        for x in (case, case[..., :6]):
            x = x.astype(dtype)
            for full in (True, False):
                check_svd(x, lax_linalg.svd(x, full_matrices=full), full)
            np.testing.assert_allclose(lax_linalg.svd(x, compute_uv=False), lax_linalg.svd(x)[1], rtol=0, atol=0)
    base = rng.standard_normal((5, 4))
    for scale in (1e30, 1e-30, 1e-38) if dtype == np.float32 else (1e300, 1e-300):
        np.testing.assert_allclose(np.asarray(lax_linalg.svd((base * scale).astype(dtype))[1], np.float64) / scale,
                                   np.linalg.svd(base, compute_uv=False), rtol=100 * _eps(dtype))
    x = rng.standard_normal((3, 6, 5)).astype(dtype)
    x[1, 2, 3], x[2, 0, 0] = np.nan, np.inf
    u, s, vh = lax_linalg.svd(x)
    assert np.isnan(s[1:]).all() and np.isnan(u[1:]).all() and np.isnan(vh[1:]).all()
    np.testing.assert_allclose(s[0], np.linalg.svd(x[0], compute_uv=False), rtol=50 * _eps(dtype))


# ---- compiled: one dispatch, against numpy and eager ----------------------------------------------------

def _dispatch_strategies(fn, x):
    graph = prepare_graph(trace_to_graph(lambda a: kiln.tree_leaves(fn(a)), [ShapedArray(x.shape, x.dtype)]))
    return [strategies.choose(s.region).name for s in partition(graph).steps if isinstance(s, DispatchStep)]


@pytest.mark.parametrize("dtype", FLOATS)
def test_one_dispatch_per_call(dtype):
    x = np.ones((4, 9, 5), dtype)
    assert _dispatch_strategies(lambda a: lax_linalg.svd(a, full_matrices=False), x) == ["svd"]
    assert _dispatch_strategies(lambda a: lax_linalg.svd(a, compute_uv=False), x) == ["svd"]
    assert _dispatch_strategies(lambda a: lax_linalg.qr(a), x) == ["svd"]


@pytest.mark.parametrize("dtype,shape,full", [
    (np.float32, (1, 1), True), (np.float32, (2, 3), True), (np.float32, (33, 20), False),
    (np.float32, (20, 33), True), (np.float32, (3, 65, 65), False),
    (np.float64, (3, 2), False), (np.float64, (7, 7), True), (np.float64, (33, 20), True),
    (np.float64, (2, 20, 33), False), (np.float64, (128, 128), False),
    (np.float64, (45, 33), True), (np.float32, (2, 33, 40), True)])  # the bidiagonal path from min(m, n) = 32
def test_compiled_svd_against_numpy_and_eager(dtype, shape, full):
    x = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    outs = kiln.jit(lambda a: lax_linalg.svd(a, full_matrices=full))(x)
    check_svd(x, outs, full)
    u, s, vh = (np.asarray(o) for o in outs)
    eager_u, eager_s, eager_vh = (np.asarray(o) for o in lax_linalg.svd(x, full_matrices=full))
    if dtype == np.float32:
        # the same algorithm, but a float32 rounding can flip a rotation decision near the threshold and
        # with it the sign of a pair of singular vectors: compare (u, vh) up to each pair's sign
        k = s.shape[-1]
        signs = np.sign(np.sum(u[..., :, :k] * eager_u[..., :, :k], axis=-2))
        u = np.concatenate([u[..., :, :k] * signs[..., None, :], u[..., :, k:]], axis=-1)
        vh = np.concatenate([vh[..., :k, :] * signs[..., :, None], vh[..., k:, :]], axis=-2)
    tol = 1e-3 if dtype == np.float32 else 1e-10  # float64: even the vectors' signs agree
    for got, want in zip((u, s, vh), (eager_u, eager_s, eager_vh)):
        np.testing.assert_allclose(got, want, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (7, 7), (33, 20), (2, 20, 33)])
def test_compiled_qr_against_numpy(dtype, shape):
    x = np.random.default_rng(2).standard_normal(shape).astype(dtype)
    full = shape[-1] % 2 == 1  # both modes over the shapes
    check_qr(x, kiln.jit(lambda a: lax_linalg.qr(a, full_matrices=full))(x), full)


def test_empty_batches_and_empty_matrices():
    for shape in [(0, 4, 3), (2, 0, 3), (3, 0)]:
        x = np.zeros(shape, np.float32)
        for full in (True, False):
            u, s, vh = kiln.jit(lambda a: lax_linalg.svd(a, full_matrices=full))(x)
            want = np.linalg.svd(x, full_matrices=full)
            assert (u.shape, s.shape, vh.shape) == tuple(w.shape for w in want)
            q, r = kiln.jit(lambda a: lax_linalg.qr(a, full_matrices=full))(x)
            want_q, want_r = np.linalg.qr(x, "complete" if full else "reduced")
            assert (q.shape, r.shape) == (want_q.shape, want_r.shape)
            np.testing.assert_array_equal(r, want_r)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rank_deficient_and_zero_matrices_complete_the_bases(dtype):
    rng = np.random.default_rng(3)
    low = rng.standard_normal((6, 2)) @ rng.standard_normal((2, 4))
    # R's first two rows nearly parallel: their rotation cancels a squared norm (alpha - t gamma), which the
    # Jacobi sweep recomputes from the column (NORM_GUARD)
    parallel = np.zeros((6, 4))
    parallel[0, :2], parallel[1, 1], parallel[2, 2:], parallel[3, 3] = (1e-3, 1), 1, (1, 0.5), 2
    x = np.stack([low, np.zeros((6, 4)), np.outer(np.arange(1.0, 7.0), np.ones(4)), parallel]).astype(dtype)
    svd = kiln.jit(lambda a: lax_linalg.svd(a))
    outs = svd(x)
    check_svd(x, outs, True)
    np.testing.assert_allclose(outs[1][3], lax_linalg.svd(x[3])[1], rtol=50 * _eps(dtype))  # eager: the same steps
    check_svd(np.swapaxes(x, 1, 2).copy(), svd(np.swapaxes(x, 1, 2).copy()), True)
    q, r = kiln.jit(lambda a: lax_linalg.qr(a))(x)
    assert _orthogonality(q) <= 100 * _eps(dtype)
    np.testing.assert_allclose(np.asarray(q, np.float64) @ r, x, atol=100 * _eps(dtype) * 10)
    np.testing.assert_array_equal(np.asarray(r)[1], 0)


@pytest.mark.parametrize("dtype,scales", [(np.float32, (1e30, 1e-30, 1e-38)), (np.float64, (1e300, 1e-300))])
def test_huge_and_tiny_scales_neither_overflow_nor_underflow(dtype, scales):
    base = np.random.default_rng(4).standard_normal((5, 4))
    svd = kiln.jit(lambda a: lax_linalg.svd(a, full_matrices=False))
    want = np.linalg.svd(base, compute_uv=False)
    for scale in scales:
        x = (base * scale).astype(dtype)
        u, s, vh = svd(x)
        np.testing.assert_allclose(np.asarray(s, np.float64) / scale, want, rtol=100 * _eps(dtype))
        np.testing.assert_allclose(_reconstruct(u, np.asarray(s, np.float64) / scale, vh), x / scale,
                                   atol=100 * _eps(dtype) * 10)


def test_nan_gives_nan_singular_values_and_terminates():
    x = np.random.default_rng(5).standard_normal((2, 6, 5))
    x[1, 2, 3] = np.nan
    s = kiln.jit(lambda a: lax_linalg.svd(a, compute_uv=False))(x)
    assert np.isnan(s[1]).all() and np.isfinite(s[0]).all()
    np.testing.assert_allclose(s[0], np.linalg.svd(x[0], compute_uv=False), rtol=1e-12)


def test_matrices_split_over_workgroups_equal_one_at_a_time():
    """A batch runs each matrix in one workgroup: the results equal the matrix's own call's, bit for bit."""
    x = np.random.default_rng(6).standard_normal((16, 12, 12)).astype(np.float32)
    batched = kiln.jit(lambda a: lax_linalg.svd(a))(x)
    single = kiln.jit(lambda a: lax_linalg.svd(a))(x[5:6])
    for got, want in zip(batched, single):
        np.testing.assert_array_equal(np.asarray(got)[5:6], want)


def test_exported_modules_run_in_kiln_run(tmp_path):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    u, s, vh = kiln_run_exported(lambda a: lax_linalg.svd(a), x, tmp_path=tmp_path)
    check_svd(x, (u, s, vh), True)
    y = rng.standard_normal((3, 6)).astype(np.float64)
    check_qr(y, kiln_run_exported(lambda a: lax_linalg.qr(a), y, tmp_path=tmp_path), True)
    (sv,) = kiln_run_exported(lambda a: lax_linalg.svd(a, compute_uv=False), y.T.copy(), tmp_path=tmp_path)
    np.testing.assert_allclose(sv, np.linalg.svd(y, compute_uv=False), rtol=1e-13)


class _Bidiagonal(kiln.Program, export_name="svd_bidiagonal"):
    def run(self, x=kiln.Program.like(np.zeros((4, 45, 33), np.float32))):
        return (*lax_linalg.svd(x, full_matrices=False), *lax_linalg.qr(x))


def test_bidiagonal_path_in_kiln_run_every_build(tmp_path):
    """The bidiagonal path (min(m, n) >= BIDIAG_FROM) exported portable and run by kiln-run with each x86-64
    build the host can run forced (v2: no FMA, LLVM expands the multiply-adds): LAPACK's numbers, and a NaN
    or an inf makes its matrix's results NaN, not the others'. A matrix of ones (its reflectors after the first
    built from rounding noise that grows subnormal: computed on the column scaled to a largest entry of 1,
    else Q is far from orthogonal) in svd and qr."""
    from kiln.lax import _svd_qr_native as native
    from test_linalg_native import _kiln_run_build, _variants

    assert native.uses_bidiagonal(45, 33)
    x = np.random.default_rng(12).standard_normal((4, 45, 33)).astype(np.float32)
    x[1, 2, 3], x[2], x[3, 39, 0] = np.nan, 1, -np.inf
    module = tmp_path / "svd.vmfb"
    kiln.Program.get_compiled_artifact(_Bidiagonal, target="portable").save(module)
    np.save(tmp_path / "x.npy", x)
    for variant in _variants():
        u, s, vh, q, r = _kiln_run_build(tmp_path, module, [f"--input=@{tmp_path / 'x.npy'}"], 5, variant, "1")
        for k in (0, 2):
            check_svd(x[k], (u[k], s[k], vh[k]), False)
        check_qr(x[0], (q[0], r[0]), True)
        check_qr_of_rank_deficient(x[2], (q[2], r[2]))
        for k in (1, 3):
            assert np.isnan(s[k]).all() and np.isnan(u[k]).all() and np.isnan(vh[k]).all()


def test_half_precision_keeps_the_composite_path():
    """Only real float32/float64 take the native kernels (kiln.lax has no complex svd/qr); float16 keeps the
    lax composite (loops of whole-matrix kernels)."""
    x = np.ones((4, 3), np.float16)
    assert "svd" not in _dispatch_strategies(lambda a: lax_linalg.svd(a, full_matrices=False), x)
    assert "svd" not in _dispatch_strategies(lambda a: lax_linalg.qr(a), x)


class _Checked(kiln.Program, export_name="svd_qr_checked"):
    def run(self, x=kiln.Program.like(np.zeros((2, 5, 3), np.float32)), y=kiln.Program.like(np.zeros((3, 6)))):
        return lax_linalg.svd(x), lax_linalg.qr(y)


def test_kiln_check_maps_each_dispatch_to_its_region_within_tolerance():
    """kiln check runs each kernel's region eagerly (the numpy mirror) on the runtime's own inputs: the scratch
    output is zeroed by the kernel as the eager implementation gives it, and the factors agree."""
    from kiln.program.check import check_program

    rng = np.random.default_rng(10)
    result = check_program(_Checked, "run", [rng.standard_normal((2, 5, 3)).astype(np.float32),
                                             rng.standard_normal((3, 6))])
    assert result.passed, result.text()
    assert [r.line().split()[1] for r in result.results] == ["kiln_svd_kernel_0", "kiln_qr_kernel_1"]
