"""numpy.linalg on the triangular factorizations: cholesky, solve, inv, det, slogdet, matrix_power (negative
powers through inv), tensorsolve, tensorinv.

numpy's semantics: the last two axes are the matrix and leading axes a batch; integer and bool inputs
compute in float64, float32 stays float32; non-square input raises numpy.linalg.LinAlgError. Singular
input does not raise (nothing can, under jit): solve/inv give inf or NaN, det 0, slogdet (0, -inf), and
cholesky of a matrix that is not positive definite is all NaN, as in JAX. Gradients come from the
factorizations' rules (kiln.lax.linalg).
"""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from ...core import dtypes
from ...lax import api as lax_api
from ...lax import _linalg_triangular as lax_linalg
from .._base import asarray, aval, broadcast_shapes, broadcast_to, convert, promote
from ..products import matmul
from ..reductions import prod, sum as sum_
from ..shape import reshape, transpose

__all__ = ["cholesky", "solve", "inv", "det", "slogdet", "matrix_power", "tensorsolve", "tensorinv",
           "SlogdetResult"]

LinAlgError = np.linalg.LinAlgError


class SlogdetResult(NamedTuple):
    """numpy.linalg.slogdet's result: the sign of the determinant and the log of its absolute value."""

    sign: object
    logabsdet: object


def _float_operand(fn: str, x):
    """x as an array of numpy.linalg's computing dtype: float32/float64 kept, integers and bool float64."""
    x = asarray(x)
    dtype = aval(x).dtype
    if dtypes.is_float(dtype):
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"{fn}: array type {dtype} is unsupported in linalg (numpy's rule); convert it to "
                            "float32 or float64")
        return x
    if dtype == np.bool_ or dtypes.is_int(dtype):
        return convert(x, np.float64)
    raise TypeError(f"{fn}: unsupported dtype {dtype}")


def _square(fn: str, x, name: str = "a"):
    shape = aval(x).shape
    if len(shape) < 2:
        raise LinAlgError(f"{fn}: {len(shape)}-dimensional array given for argument {name}. Array must be at least "
                          "two-dimensional")
    if shape[-1] != shape[-2]:
        raise LinAlgError(f"{fn}: Last 2 dimensions of the array must be square, argument {name} has shape {shape}")
    return x


def _square_float(fn: str, a, name: str = "a"):
    return _square(fn, _float_operand(fn, a), name)


def _swap_last(x):
    nd = aval(x).ndim
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def cholesky(a, /, *, upper: bool = False):
    """numpy.linalg.cholesky: L with a = L @ L^T from a's lower triangle, or with upper=True U with
    a = U^T @ U from its upper triangle (numpy reads only that triangle). Not positive definite: all NaN
    (numpy raises)."""
    x = _square_float("cholesky", a)
    factor = lax_linalg.cholesky_of_lower(_swap_last(x) if upper else x)  # a's upper triangle: a^T's lower
    return _swap_last(factor) if upper else factor


def _lu_solve_matrices(lu, perm, b):
    """x with a @ x = b given a's lu factors and row permutation, for b of shape (..., n, k)."""
    permuted = lax_linalg.take_rows(b, perm)
    y = lax_linalg.triangular_solve(lu, permuted, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, y, left_side=True, lower=False)


def solve(a, b):
    """numpy.linalg.solve (numpy 2 rules): x with a @ x = b; b is a vector (..., n) only when it is 1-D,
    otherwise a stack of matrices (..., n, k); batch axes broadcast."""
    a = _square_float("solve", a)
    b = _float_operand("solve", b)
    a, b = promote(a, b)
    sa, sb = aval(a).shape, aval(b).shape
    n = sa[-1]
    vector = len(sb) == 1
    b2 = reshape(b, (n, 1)) if vector and sb[0] == n else b
    sb2 = aval(b2).shape
    if len(sb2) < 2 or sb2[-2] != n:
        raise ValueError(f"solve: b of shape {sb} does not match a of shape {sa}: b must be (..., {n}, k) or, "
                         f"when 1-D, ({n},)")
    batch = broadcast_shapes(sa[:-2], sb2[:-2], where="solve")
    a3, b3 = broadcast_to(a, batch + sa[-2:]), broadcast_to(b2, batch + sb2[-2:])
    lu, _, perm = lax_linalg.lu(a3)
    x = _lu_solve_matrices(lu, perm, b3)
    return reshape(x, batch + (n,)) if vector else x


def inv(a):
    """numpy.linalg.inv: the inverse of every matrix in a (inf/NaN entries when singular)."""
    a = _square_float("inv", a)
    shape = aval(a).shape
    identity = broadcast_to(np.eye(shape[-1], dtype=aval(a).dtype), shape)
    lu, _, perm = lax_linalg.lu(a)
    return _lu_solve_matrices(lu, perm, identity)


def _lu_diagonal_and_parity(fn: str, a):
    """The diagonal of U and the sign (+1/-1, a's dtype) of the row permutation of a's LU factorization."""
    a = _square_float(fn, a)
    shape = aval(a).shape
    lu, pivots, _ = lax_linalg.lu(a)
    diagonal = sum_(lax_api.select(broadcast_to(np.eye(shape[-1], dtype=bool), shape), lu, 0), axis=-1)
    unmoved = broadcast_to(np.arange(shape[-1], dtype=np.int32), aval(pivots).shape)
    swaps = lax_api.reduce_sum(lax_api.convert_element_type(lax_api.ne(pivots, unmoved), np.int32), (len(shape) - 2,))
    parity = lax_api.sub(1, lax_api.mul(lax_api.sub(swaps, lax_api.mul(lax_api.div(swaps, 2), 2)), 2))
    return diagonal, convert(parity, aval(a).dtype)


def det(a):
    """numpy.linalg.det: the product of U's diagonal times the permutation's sign (LU with partial pivoting)."""
    diagonal, parity = _lu_diagonal_and_parity("det", a)
    return lax_api.mul(parity, prod(diagonal, axis=-1))


def slogdet(a):
    """numpy.linalg.slogdet: (sign, logabsdet) as a namedtuple; singular input gives (0, -inf)."""
    diagonal, parity = _lu_diagonal_and_parity("slogdet", a)
    signs = lax_api.select(lax_api.gt(diagonal, 0), lax_api.broadcast_in_dim(np.ones((), aval(diagonal).dtype),
                                                                              aval(diagonal).shape, ()),
                           lax_api.select(lax_api.lt(diagonal, 0), lax_api.broadcast_in_dim(
                               np.asarray(-1, aval(diagonal).dtype), aval(diagonal).shape, ()),
                               lax_api.broadcast_in_dim(np.zeros((), aval(diagonal).dtype), aval(diagonal).shape, ())))
    sign = lax_api.add(lax_api.mul(parity, prod(signs, axis=-1)), 0.0)  # -0.0 -> 0.0, as numpy
    return SlogdetResult(sign, sum_(lax_api.log(lax_api.abs(diagonal)), axis=-1))


def matrix_power(a, n):
    """numpy.linalg.matrix_power: a multiplied by itself n times by repeated squaring; n = 0 gives the
    identity (a's dtype), negative n powers of inv(a) (float)."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent n must be an integer, got {n!r}") from None
    a = _square("matrix_power", asarray(a))
    shape, dtype = aval(a).shape, aval(a).dtype
    if n == 0:
        return broadcast_to(np.eye(shape[-1], dtype=dtype), shape)
    if n < 0:
        a, n = inv(a), -n
    result = None
    square = a
    while True:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if not n:
            return result
        square = matmul(square, square)


def tensorsolve(a, b, axes=None):
    """numpy.linalg.tensorsolve: x with tensordot(a, x, x.ndim) = b; `axes` are moved to the end of a first."""
    a, b = asarray(a), asarray(b)
    nd = aval(a).ndim
    if axes is not None:
        order = list(range(nd))
        for k in axes:
            order.remove(k % nd)
            order.append(k % nd)
        a = transpose(a, tuple(order))
    shape = aval(a).shape
    x_shape = shape[aval(b).ndim:]
    size = int(np.prod(x_shape))
    if int(np.prod(shape)) != size * size:
        raise LinAlgError(f"tensorsolve: Input arrays must satisfy the requirement prod(a.shape[b.ndim:]) == "
                          f"prod(a.shape[:b.ndim]), got a of shape {shape} and b of shape {aval(b).shape}")
    x = solve(reshape(a, (size, size)), reshape(b, (size,)))
    return reshape(x, x_shape)


def tensorinv(a, ind=2):
    """numpy.linalg.tensorinv: the inverse of a seen as a matrix of its first `ind` axes by the rest."""
    a = asarray(a)
    if operator.index(ind) <= 0:
        raise ValueError(f"tensorinv: Invalid ind argument {ind}; it must be a positive integer")
    shape = aval(a).shape
    size = int(np.prod(shape[ind:]))
    if int(np.prod(shape)) != size * size:
        raise LinAlgError(f"tensorinv: a of shape {shape} is not square when its first {ind} axes are the rows")
    return reshape(inv(reshape(a, (size, size))), shape[ind:] + shape[:ind])
