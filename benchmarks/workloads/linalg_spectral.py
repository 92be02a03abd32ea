"""The orthogonal and spectral factorizations in f32 (what JAX computes by default): eigh, svd, qr and
pinv of square matrices, n = 64 and 128, and a batch of 16 at n = 16.

numpy and JAX call LAPACK (divide and conquer / blocked Householder); kiln runs its own kernels: eigh is
one native kernel (Householder tridiagonalization and implicit QL, kiln/lax/_eigh_ql.py), qr and svd (and
pinv through svd) one native kernel each (Householder QR; from n = 32 Householder bidiagonalization and
implicit-shift bidiagonal QR, below it QR then one-sided Jacobi sweeps on R^T, kiln/lax/_svd_qr_native.py). Eigen- and singular vectors are unique only up to sign, so their results are
compared through sign-free products.
"""
import numpy as np

from .base import Size, Workload


def _general(p, rng):
    return (rng.standard_normal((p["batch"], p["n"], p["n"])).astype(np.float32),)


def _well_conditioned(p, rng):
    (a,) = _general(p, rng)
    return ((a / np.sqrt(p["n"]) + 2 * np.eye(p["n"])).astype(np.float32),)


def _symmetric(p, rng):
    (a,) = _general(p, rng)
    return ((a + np.swapaxes(a, -1, -2)) / 2,)


def _sizes(*ns, batch=1):
    return tuple(Size(f"{batch}x{n}x{n}", {"batch": batch, "n": n}) for n in ns)


def _transpose(x):
    return np.swapaxes(np.asarray(x, np.float64), -1, -2)


def _eigh_view(inputs, results):
    w, v = (np.asarray(r, np.float64) for r in results)
    return w, (v * w[..., None, :]) @ _transpose(v)


def _svd_view(inputs, results):
    u, s, vh = (np.asarray(r, np.float64) for r in results)
    return s, u @ vh


def _qr_view(inputs, results):
    q, r = (np.asarray(x, np.float64) for x in results)
    return q @ r, _transpose(q) @ q


QUICK = (Size("2x8x8", {"batch": 2, "n": 8}),)
SIZES = _sizes(64, 128) + _sizes(16, batch=16)

WORKLOADS = [
    Workload(
        name="eigh",
        description="linalg.eigh of symmetric f32 matrices, BxNxN (compared: eigenvalues, V diag(w) V^T)",
        make_inputs=_symmetric,
        fn=lambda ops, s: tuple(ops.np.linalg.eigh(s)),
        sizes=SIZES,
        quick_sizes=QUICK,
        tolerance=1e-4,
        compare_view=_eigh_view,
    ),
    Workload(
        name="svd",
        description="linalg.svd(full_matrices=False) in f32, BxNxN (compared: s, U Vh)",
        make_inputs=_general,
        fn=lambda ops, a: tuple(ops.np.linalg.svd(a, full_matrices=False)),
        sizes=SIZES,
        quick_sizes=QUICK,
        tolerance=1e-4,
        compare_view=_svd_view,
    ),
    Workload(
        name="qr",
        description="linalg.qr in f32 (Householder), BxNxN (compared: Q R, Q^T Q)",
        make_inputs=_general,
        fn=lambda ops, a: tuple(ops.np.linalg.qr(a)),
        sizes=SIZES,
        quick_sizes=QUICK,
        tolerance=1e-4,
        compare_view=_qr_view,
    ),
    Workload(
        name="pinv",
        description="linalg.pinv in f32 (through the SVD) of well-conditioned BxNxN matrices",
        make_inputs=_well_conditioned,
        fn=lambda ops, a: (ops.np.linalg.pinv(a),),
        sizes=SIZES,
        quick_sizes=QUICK,
        tolerance=1e-3,
    ),
]
