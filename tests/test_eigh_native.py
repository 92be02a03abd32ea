"""eigh's native kernel (kiln.lax._eigh_ql, the `eigh` kernel strategy, codegen/linalg_eigh.py): Householder
tridiagonalization, implicit QL with Wilkinson's shift, sorted, for real float32/float64 matrices.

Eigenvalues against numpy's eigvalsh in float64 (within 5 n eps |A|_2, docs/linalg.md's bound), residuals
|A V - V diag(w)| and orthogonality |V^T V - I| bounds, at n = 1 ... 128, in batches (empty ones too),
through views (vmap over a middle axis, the upper triangle), for repeated, clustered, zero, rank-1 and
extremely scaled spectra and non-finite input (JAX's NaN results); the kernel is one dispatch of the eigh
strategy; eager evaluation (the numpy mirror) agrees with it, vector signs included; exported modules run
in kiln-run; gradients against central differences."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import Program, lax
from kiln.compiler import strategies
from kiln.compiler.compile import kernel_strategy
from kiln.compiler.flops import region_flops
from kiln.compiler.fusion import DispatchStep, partition
from kiln.compiler.pipeline import prepare_graph
from kiln.compiler.target import Target
from kiln.core.aval import ShapedArray
from kiln.core.ir import Equation, Graph, Var
from kiln.core.trace import trace_to_graph
from kiln.lax import _eigh_ql
from kiln_tools import check_like_numpy, run_kiln_run
from references import numerical_grad

FLOATS = [np.float32, np.float64]
SIZES = [1, 2, 3, 7, 16, 33, 64, 128]


def symmetric(rng, shape, dtype=np.float64):
    a = rng.standard_normal(shape)
    return ((a + np.swapaxes(a, -1, -2)) / 2).astype(dtype)


def check_decomposition(a, v, w, c=5.0):
    """w ascending within c n eps |A| of LAPACK's float64 eigenvalues, |A V - V diag(w)| <= c n eps |A| and
    |V^T V - I| <= c n eps, for every matrix of the batch a (..., n, n) (symmetric, a's dtype)."""
    a = np.asarray(a)
    dtype = a.dtype
    v, w = np.asarray(v), np.asarray(w)
    assert v.dtype == dtype and w.dtype == dtype and v.shape == a.shape and w.shape == a.shape[:-1]
    n = a.shape[-1]
    eps = np.finfo(dtype).eps
    a64, v64, w64 = (t.astype(np.float64) for t in (a, v, w))
    for k in np.ndindex(a.shape[:-2]):
        norm = np.linalg.norm(a64[k], 2)
        assert np.all(np.diff(w64[k]) >= 0)
        assert np.abs(w64[k] - np.linalg.eigvalsh(a64[k])).max(initial=0) <= c * n * eps * norm
        assert np.linalg.norm(a64[k] @ v64[k] - v64[k] * w64[k], 2) <= c * n * eps * max(norm, np.finfo(dtype).tiny)
        assert np.abs(v64[k].T @ v64[k] - np.eye(n)).max(initial=0) <= c * n * eps


@pytest.mark.parametrize("dtype", FLOATS)
def test_sizes_against_lapack_under_jit(dtype):
    rng = np.random.default_rng(1)
    mats = [symmetric(rng, (n, n), dtype) for n in SIZES]
    outs = kiln.jit(lambda ms: [lax.linalg.eigh(m) for m in ms])(mats)
    for a, (v, w) in zip(mats, outs):
        check_decomposition(a, v, w)


def _dispatches(fn, *args):
    graph = prepare_graph(trace_to_graph(lambda *xs: kiln.tree_leaves(fn(*xs)),
                                         [ShapedArray(a.shape, a.dtype) for a in args]))
    return [s.region for s in partition(graph).steps if isinstance(s, DispatchStep)]


@pytest.mark.parametrize("dtype", FLOATS)
def test_numpy_eigh_is_one_dispatch_of_the_eigh_strategy(dtype):
    """numpy's eigh reads the lower triangle: the kernel reads it itself, so the call is one kernel, which
    declares Golub and Van Loan's 9 n^3 flops per matrix (kiln.compiler.flops)."""
    regions = _dispatches(lambda s: knp.linalg.eigh(s), np.ones((4, 8, 8), dtype))
    assert [kernel_strategy(r) for r in regions] == ["eigh"]
    assert region_flops(regions[0]) == 4 * 9 * 8 ** 3


def test_other_dtypes_keep_the_jacobi_path():
    """float16 (and n = 0) never reach the kernel: eigh keeps its lax (Jacobi) implementation there."""
    assert not _eigh_ql.supported(np.float16) and _eigh_ql.supported(np.float32) and _eigh_ql.supported(np.float64)
    regions = _dispatches(lambda s: lax.linalg.eigh(s), np.ones((4, 4), np.float16))
    assert "eigh" not in {kernel_strategy(r) for r in regions}


def test_batches_views_and_triangles():
    rng = np.random.default_rng(2)
    s = symmetric(rng, (2, 3, 9, 9), np.float32)
    v, w = kiln.jit(lax.linalg.eigh)(s)
    check_decomposition(s, v, w)
    # an empty batch gives empty results of the right shapes
    v, w = kiln.jit(lax.linalg.eigh)(np.zeros((0, 5, 5), np.float64))
    assert v.shape == (0, 5, 5) and w.shape == (0, 5) and v.dtype == w.dtype == np.float64
    # vmap over a middle axis: the kernel reads its operand through a transposed view
    x = rng.standard_normal((6, 3, 6))
    x = x + np.transpose(x, (2, 1, 0))
    v, w = kiln.jit(kiln.vmap(lax.linalg.eigh, in_axes=1))(x)
    check_decomposition(np.moveaxis(x, 1, 0), v, w)
    # only the named triangle is read
    garbage = np.triu(rng.standard_normal((7, 7))) * 3 + np.tril(s[0, 0, :7, :7].astype(np.float64))
    for lower, want in ((True, np.tril(garbage)), (False, np.triu(garbage))):
        full = want + want.T - np.diag(np.diag(want))
        v, w = kiln.jit(lambda a: lax.linalg.eigh(a, lower=lower, symmetrize_input=False))(garbage)
        check_decomposition(full, v, w)


def test_unsorted_eigenvalues_are_the_same_spectrum():
    s = symmetric(np.random.default_rng(3), (12, 12))
    v, w = kiln.jit(lambda a: lax.linalg.eigh(a, sort_eigenvalues=False))(s)
    np.testing.assert_allclose(np.sort(w), np.linalg.eigvalsh(s), atol=1e-13)
    np.testing.assert_allclose(s @ v, v * w, atol=1e-13)


def _special(n, dtype):
    rng = np.random.default_rng(4)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    u = rng.standard_normal((n, 1))
    clustered = (q * (1 + np.arange(n) * 1e-7)) @ q.T
    two_values = (q * np.where(np.arange(n) < n // 2, -1.0, 2.0)) @ q.T
    mats = {
        "identity": np.eye(n), "zero": np.zeros((n, n)), "diagonal": np.diag(np.repeat([3.0, -1.0, 0.5], n)[:n]),
        "rank1": u @ u.T, "clustered": clustered, "two_values": two_values,
        "tridiagonal": np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1) + 2 * np.eye(n),
        "graded": (q * np.logspace(0, -10, n)) @ q.T,
    }
    return {k: ((m + m.T) / 2).astype(dtype) for k, m in mats.items()}


@pytest.mark.parametrize("dtype", FLOATS)
def test_repeated_clustered_and_degenerate_spectra(dtype):
    mats = _special(16, dtype)
    outs = kiln.jit(lambda ms: {k: lax.linalg.eigh(m) for k, m in ms.items()})(mats)
    for name, a in mats.items():
        v, w = outs[name]
        check_decomposition(a, v, w)
    np.testing.assert_array_equal(outs["identity"][1], np.ones(16, dtype))
    np.testing.assert_array_equal(outs["zero"][1], np.zeros(16, dtype))
    np.testing.assert_array_equal(outs["zero"][0], np.eye(16, dtype=dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_hard_spectra_converge(dtype):
    """Regressions: all-ones matrices leave subnormal off-diagonal entries that QL's relative test alone
    never deflated (NaN results before the tiny / eps floor); a matrix graded from 1 down to 1e-30 with its
    large entries at the top underflowed QL's chase in float32 (NaN before blocks are reversed), and so did
    one graded both ways, 1e-30 .. 1 .. 1e-30 (NaN before a block's steep bottom is reversed too);
    Wilkinson's matrix has pairs of nearly equal eigenvalues."""
    n = 63
    graded = np.diag(np.logspace(0, -30, 21)) + np.diag(np.logspace(0, -30, 21)[1:] * 1e-3, 1)
    peak = np.concatenate([np.logspace(-30, 0, 11), np.logspace(0, -30, 11)[1:]])
    mountain = np.diag(peak) + np.diag(np.sqrt(peak[1:] * peak[:-1]) * 1e-3, 1)
    m = (n - 1) / 2
    mats = {"ones": np.ones((n, n)), "graded_down": graded, "graded_up": graded[::-1, ::-1], "mountain": mountain,
            "wilkinson": np.diag(np.abs(np.arange(n) - m)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)}
    mats = {k: ((a + a.T) / 2).astype(dtype) for k, a in mats.items()}
    outs = kiln.jit(lambda ms: {k: lax.linalg.eigh(a) for k, a in ms.items()})(mats)
    for name, a in mats.items():
        v, w = outs[name]
        check_decomposition(a, v, w)
        eager_v, eager_w = lax.linalg.eigh(a)
        check_decomposition(a, eager_v, eager_w)


@pytest.mark.parametrize("dtype,scales", [(np.float64, (1e300, 1e-300, 1e-310)), (np.float32, (1e36, 1e-36, 1e-40))])
def test_extreme_scales_neither_overflow_nor_underflow(dtype, scales):
    s = symmetric(np.random.default_rng(5), (10, 10))
    want = np.linalg.eigvalsh(s)
    f = kiln.jit(lax.linalg.eigh)
    for scale in scales:
        a = (s * scale).astype(dtype)
        v, w = f(a)
        assert np.isfinite(v).all() and np.isfinite(w).all()
        # the rounded input's own eigenvalues (subnormal scales lose digits in the input, not in eigh)
        a64 = a.astype(np.float64) / scale
        tol = 5 * 10 * np.finfo(dtype).eps * np.linalg.norm(a64, 2)
        np.testing.assert_allclose(w.astype(np.float64) / scale, np.linalg.eigvalsh(a64), rtol=0, atol=tol)
        assert np.abs(np.linalg.eigvalsh(a64) - want).max() < 1e-2
        np.testing.assert_allclose(v.T.astype(np.float64) @ v, np.eye(10), atol=50 * np.finfo(dtype).eps)


def test_non_finite_input_gives_nan_like_jax():
    """JAX (LAPACK syevd) returns NaN eigenvalues and vectors for a NaN entry; kiln does, for inf too."""
    s = symmetric(np.random.default_rng(6), (3, 5, 5))
    s[1, 1, 2] = s[1, 2, 1] = np.nan
    s[2, 0, 0] = np.inf
    for fn in (kiln.jit(lax.linalg.eigh), lax.linalg.eigh):
        v, w = fn(s)
        assert np.isnan(v[1:]).all() and np.isnan(w[1:]).all()
        check_decomposition(s[:1], v[:1], w[:1])


def _ascending(v, w):
    order = np.argsort(w, axis=-1, kind="stable")
    return [np.take_along_axis(v, order[..., None, :], axis=-1), np.take_along_axis(w, order, axis=-1)]


@pytest.mark.parametrize("dtype", FLOATS)
def test_eager_mirror_equals_the_kernel(dtype):
    """Eagerly eigh runs the kernel's algorithm in numpy: in float64 the same vectors, signs included, up to
    rounding; in float32 rounding can tip a QL iteration count near convergence, and with it a vector's sign
    (a last rotation with c close to -1) or, unsorted, where an eigenvalue lands, so float32 is compared up
    to signs and in ascending order."""
    rng = np.random.default_rng(7)
    s = symmetric(rng, (2, 33, 33), dtype)
    tol = {np.float32: 2e-4, np.float64: 1e-11}[dtype]
    for params in ({}, {"lower": False, "symmetrize_input": False, "sort_eigenvalues": False}):
        eager = lax.linalg.eigh(s, **params)
        compiled = kiln.jit(lambda a: lax.linalg.eigh(a, **params))(s)
        if dtype == np.float32:
            eager, compiled = (_ascending(np.abs(v), w) for v, w in (eager, compiled))
        check_like_numpy(compiled, eager, tol)
    v, w = _eigh_ql.eigh_numpy(s, lower=True, sort_eigenvalues=True)
    check_decomposition(s, v, w)


def _runnable_variants():
    """The portable builds whose vector features this machine has."""
    vector = {"+avx512f", "+avx2", "+fma", "+avx", "+sse4.2", "+sve", "+neon"}
    host = set(Target.host().features.split(","))
    return [t.variant for t in Target.portable() if (set(t.features.split(",")) & vector) <= host]


def test_exported_modules_run_in_kiln_run(tmp_path, monkeypatch):
    """A portable module run by kiln-run in every build the machine can run (x86-64: vector widths 16, 8
    and 4 for float32, v2 without FMA), against LAPACK and against kiln.jit."""
    rng = np.random.default_rng(8)
    s32 = symmetric(rng, (3, 20, 20), np.float32)
    s64 = symmetric(rng, (17, 17), np.float64)

    def kfn(a, b):
        w, v = knp.linalg.eigh(a)
        vb, wb = lax.linalg.eigh(b)
        return v, w, vb, wb

    class Eigh(Program, export_name="eigh"):
        def run(self, a=Program.like(s32), b=Program.like(s64)):
            return kfn(a, b)

    path = tmp_path / "eigh.vmfb"
    Program.get_compiled_artifact(Eigh, target="portable").save(path)
    np.save(tmp_path / "a.npy", s32)
    np.save(tmp_path / "b.npy", s64)
    outs = [tmp_path / f"out{k}.npy" for k in range(4)]
    variants = _runnable_variants()
    assert variants
    jitted = kiln.tree_leaves(kiln.jit(kfn)(s32, s64))
    for variant in variants:
        monkeypatch.setenv("KILN_CPU_VARIANT", variant)
        run_kiln_run(f"--module={path}", "--function=run", f"--input=@{tmp_path / 'a.npy'}",
                     f"--input=@{tmp_path / 'b.npy'}", *[f"--output=@{o}" for o in outs])
        v, w, vb, wb = (np.load(o) for o in outs)
        check_decomposition(s32, v, w)
        check_decomposition(s64, vb, wb)
        check_like_numpy([np.abs(v), w, np.abs(vb), wb], [np.abs(jitted[0]), jitted[1], np.abs(jitted[2]), jitted[3]],
                         1e-4)


def test_gradients_against_central_differences():
    rng = np.random.default_rng(9)
    x = symmetric(rng, (6, 6))
    ww, wv = rng.standard_normal(6), rng.standard_normal((6, 6))

    def loss(a):
        v, w = lax.linalg.eigh(a)
        return knp.sum(w * ww) + knp.sum((v * v) * wv)

    def reference(a):
        w, v = np.linalg.eigh((a + a.T) / 2)
        return np.sum(w * ww) + np.sum(v * v * wv)

    want = numerical_grad(reference, x)
    np.testing.assert_allclose(kiln.grad(loss)(x), want, atol=1e-6)
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(x), want, atol=1e-6)


def _region(shape, dtype, outputs=(0, 1)):
    x = Var(ShapedArray(shape, np.dtype(dtype)))
    v, w = Var(ShapedArray(shape, np.dtype(dtype))), Var(ShapedArray(shape[:-1], np.dtype(dtype)))
    eqn = Equation(_eigh_ql.eigh_ql_p, [x], [v, w], {"lower": True, "sort_eigenvalues": True}, None)
    return Graph([x], [], [], [eqn], [[v, w][k] for k in outputs])


def test_errors_name_the_primitive_and_what_was_wrong():
    for fn in (lambda a: _eigh_ql.eigh_ql(a, lower=True, sort_eigenvalues=True),
               kiln.jit(lambda a: _eigh_ql.eigh_ql(a, lower=True, sort_eigenvalues=True))):
        with pytest.raises(ValueError, match=r"eigh_ql: expected a batch of square matrices, got shape \(2, 3\)"):
            fn(np.ones((2, 3), np.float32))
        with pytest.raises(TypeError, match="eigh_ql: expected float32 or float64 matrices, got float16"):
            fn(np.ones((2, 2), np.float16))
    target = Target.host()
    assert strategies.plan_region(_region((2, 4, 4), np.float32), target).strategy == "eigh"
    with pytest.raises(ValueError, match="eigh_ql: the kernel writes both results"):
        strategies.plan_region(_region((2, 4, 4), np.float32, outputs=(1,)), target)
    # past the stack's room for the work vectors: eigh itself takes Jacobi there (stack_fits)
    n = 7000
    assert not _eigh_ql.stack_fits(n, np.float64) and _eigh_ql.stack_fits(n, np.float32)
    with pytest.raises(ValueError, match="eigh_ql: 7000x7000 float64 matrices need more than 262144 bytes of stack"):
        strategies.plan_region(_region((n, n), np.float64), target)
