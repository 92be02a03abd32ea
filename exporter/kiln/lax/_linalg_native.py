"""Native kernels of the triangular factorizations: one primitive each for Cholesky, triangular solve and
LU with partial pivoting of a batch of real float32/float64 matrices, each a kernel of its own (traits
fusion="kernel", kernel="linalg": kiln.compiler.codegen.linalg), so a compiled call is one dispatch
instead of a loop of whole-matrix operations.

They live only inside the graphs of the composite primitives cholesky, triangular_solve and lu
(kiln.lax._linalg_triangular): transformations apply the composites' rules and never see these, and an
eager evaluation runs the composites' numpy implementations (the same functions are these primitives'
impls, for a graph evaluated op by op). Other float dtypes (float16, bfloat16) keep the composites'
whole-matrix lax implementations.
"""
from __future__ import annotations

import numpy as np

from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from . import _linalg_triangular_eager as eager

__all__ = ["NATIVE_DTYPES", "cholesky_p", "triangular_solve_p", "lu_p", "native", "syrk_p", "cholesky_join_p"]

NATIVE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def native(*dtypes_) -> bool:
    """Whether operands of these dtypes take the native kernels."""
    return all(np.dtype(d) in NATIVE_DTYPES for d in dtypes_)


cholesky_p = register(Primitive("cholesky_native"))
cholesky_p.kernel_kind = "cholesky"
cholesky_p.def_traits(fusion="kernel", kernel="linalg")
cholesky_p.def_impl(lambda x: eager.cholesky(x))
cholesky_p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))

triangular_solve_p = register(Primitive("triangular_solve_native"))
triangular_solve_p.kernel_kind = "triangular_solve"
triangular_solve_p.def_traits(fusion="kernel", kernel="linalg")
triangular_solve_p.def_impl(lambda a, b, **params: eager.triangular_solve(a, b, **params))
triangular_solve_p.def_abstract_eval(lambda a, b, **params: ShapedArray(b.shape, b.dtype))

lu_p = register(Primitive("lu_native", multiple_results=True))
lu_p.kernel_kind = "lu"
lu_p.def_traits(fusion="kernel", kernel="linalg")
lu_p.def_impl(lambda a: list(eager.lu(a)))


@lu_p.def_abstract_eval
def _lu_abstract(a):
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    i32 = np.dtype(np.int32)
    return [ShapedArray(a.shape, a.dtype), ShapedArray(batch + (min(m, n),), i32), ShapedArray(batch + (m,), i32)]


syrk_p = register(Primitive("syrk_native"))
"""c - x^T x of a batch of square c (..., s, s) and x (..., k, s): the trailing update of the split large
Cholesky (kiln.lax._linalg_triangular._cholesky_split). Only the lower triangle is the product's (the
kernel computes it, SYRK's half of the flops; the entries above it are c's or partial sums, never read)."""
syrk_p.kernel_kind = "syrk"
syrk_p.def_traits(fusion="kernel", kernel="linalg")
syrk_p.def_impl(lambda c, x: np.asarray(c) - np.swapaxes(np.asarray(x), -1, -2) @ np.asarray(x))
syrk_p.def_abstract_eval(lambda c, x: ShapedArray(c.shape, c.dtype))


def _join(*pieces):
    """The factor from _cholesky_split's pieces: (L11, L21^T) of each block, the last block's L11 alone."""
    pieces = [np.asarray(p) for p in pieces]
    blocks = pieces[0::2]
    n = sum(p.shape[-1] for p in blocks)
    factor = np.zeros(pieces[0].shape[:-2] + (n, n), pieces[0].dtype)
    start = 0
    for k, block in enumerate(blocks):
        size = block.shape[-1]
        factor[..., start:start + size, start:start + size] = block
        if 2 * k + 1 < len(pieces):
            factor[..., start + size:, start:start + size] = np.swapaxes(pieces[2 * k + 1], -1, -2)
        start += size
    failed = np.isnan(blocks[-1][..., -1, -1])
    factor[failed] = np.nan
    return factor


cholesky_join_p = register(Primitive("cholesky_join_native"))
"""The split large Cholesky's factor joined from its pieces (kiln.lax._linalg_triangular._cholesky_split):
operands L11, L21^T of each block of columns in order, the last block's L11 alone; L21 placed below L11,
zeros above, and the whole matrix NaN where the last diagonal entry is (a block failed)."""
cholesky_join_p.kernel_kind = "cholesky_join"
cholesky_join_p.def_traits(fusion="kernel", kernel="linalg")
cholesky_join_p.def_impl(_join)


@cholesky_join_p.def_abstract_eval
def _join_abstract(*pieces):
    n = sum(p.shape[-1] for p in pieces[0::2])
    return ShapedArray(pieces[0].shape[:-2] + (n, n), pieces[0].dtype)
