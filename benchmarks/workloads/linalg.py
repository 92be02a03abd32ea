"""Linear algebra in f32 (what JAX computes by default): Cholesky, LU with partial pivoting (through
solve) and slogdet of well-conditioned square matrices, n = 64 to 1024 (2048 with KILN_BENCH_LARGE=1), and
a batch of 64 at n = 32.

numpy calls LAPACK (blocked, vectorized, multi-threaded where OpenBLAS is); kiln runs its own
factorizations (kiln.lax.linalg: for float32/float64 one native kernel per factorization, the `linalg`
strategy, a batch split over the workers), so these rows measure them next to a tuned library.
"""
import os

import numpy as np

from .base import Size, Workload


def _spd(p, rng):
    batch, n = p["batch"], p["n"]
    a = rng.standard_normal((batch, n, n))
    return ((a @ np.swapaxes(a, -1, -2) / n + np.eye(n)).astype(np.float32),)


def _system(p, rng):
    batch, n = p["batch"], p["n"]
    a = rng.standard_normal((batch, n, n)) / np.sqrt(n) + 2 * np.eye(n)
    return a.astype(np.float32), rng.standard_normal((batch, n, 4)).astype(np.float32)


def _sizes(*ns, batch=1):
    return tuple(Size(f"{batch}x{n}x{n}", {"batch": batch, "n": n}) for n in ns)


QUICK = (Size("2x8x8", {"batch": 2, "n": 8}),)
LARGE = _sizes(2048) if os.environ.get("KILN_BENCH_LARGE") else ()
"""n = 2048 (seconds per call for the peers) only with KILN_BENCH_LARGE=1."""

WORKLOADS = [
    Workload(
        name="cholesky",
        description="linalg.cholesky of symmetric positive definite f32 matrices, BxNxN",
        make_inputs=_spd,
        fn=lambda ops, s: (ops.np.linalg.cholesky(s),),
        sizes=_sizes(64, 128, 256, 512, 1024) + _sizes(32, batch=64) + LARGE,
        quick_sizes=QUICK,
        tolerance=1e-4,
    ),
    Workload(
        name="solve",
        description="linalg.solve(a, b) in f32 (LU with partial pivoting), a BxNxN, b BxNx4",
        make_inputs=_system,
        fn=lambda ops, a, b: (ops.np.linalg.solve(a, b),),
        sizes=_sizes(64, 128, 256, 512, 1024) + _sizes(32, batch=64) + LARGE,
        quick_sizes=QUICK,
        tolerance=1e-4,
    ),
    Workload(
        name="slogdet",
        description="linalg.slogdet in f32, BxNxN",
        make_inputs=lambda p, rng: (_system(p, rng)[0],),
        fn=lambda ops, a: tuple(ops.np.linalg.slogdet(a)),
        sizes=_sizes(64, 128, 256, 512, 1024) + LARGE,
        quick_sizes=QUICK,
        tolerance=1e-4,
    ),
]
