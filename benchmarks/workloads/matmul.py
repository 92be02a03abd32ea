"""Matrix products in f32: square 256/512/1024 and a skinny batch 64x1024 @ 1024x1024.

numpy calls an optimized BLAS (OpenBLAS), so these rows measure how close
kiln's generated loop nests come to a tuned GEMM. The skinny case is the
shape of a dense layer at a small batch.
"""
import numpy as np

from .base import Size, Workload


def make_inputs(p, rng):
    m, k, n = p["mkn"]
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    return a, b


def fn(ops, a, b):
    return (a @ b,)


def _square(n):
    return Size(f"{n}x{n}x{n}", {"mkn": (n, n, n)})


WORKLOADS = [
    Workload(
        name="matmul",
        description="a @ b in f32, sizes MxKxN",
        make_inputs=make_inputs,
        fn=fn,
        sizes=(_square(256), _square(512), _square(1024), Size("64x1024x1024", {"mkn": (64, 1024, 1024)})),
        quick_sizes=(Size("8x16x12", {"mkn": (8, 16, 12)}),),
        # f32 dot products of length K in a different summation order than BLAS.
        tolerance=1e-4,
    )
]
