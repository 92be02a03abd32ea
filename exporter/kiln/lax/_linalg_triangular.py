"""The triangular factorizations under jax.lax.linalg's names: cholesky, triangular_solve, lu (partial
pivoting), lu_pivots_to_permutation. Batched over leading axes.

Each factorization is a composite primitive (kiln.lax.composite): its rules are JAX's. For float32 and
float64 its implementation binds a native kernel (kiln.lax._linalg_native: one dispatch per call, the
`linalg` kernel strategy); for the other float dtypes (float16, bfloat16) it is a static fori_loop over
columns (or rows) whose body is whole-matrix lax operations (dynamic slices, a matrix-vector product, a
rank-1 update, selects: the _*_impl functions below), so a compiled module runs n iterations of a few
fused kernels each, never one VM dispatch per element.

Failure as in JAX: cholesky of a matrix that is not positive definite is all NaN; lu of a singular
matrix finishes (a zero pivot leaves its column unscaled, as LAPACK's getrf does) and solving with it
gives inf/NaN; triangular_solve divides by the diagonal as it is.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, add_any
from ..core.trace import get_aval
from ..transforms.batching import move_batch_axis
from ..transforms.jvp import tangent_aval
from . import _linalg_native as native
from . import _linalg_triangular_eager as eager
from . import api
from .composite import composite_primitive
from .math_prims import P
from .control_flow import fori_loop
from .structural_prims import pad
from .structural_prims import slice as slice_
from .structural_prims import concatenate, gather

__all__ = ["cholesky", "triangular_solve", "lu", "lu_pivots_to_permutation", "symmetrize"]

_I32 = np.dtype(np.int32)


# ---- matrix helpers over a batch of matrices (the last two axes) ---------------------------------

def _shape(x):
    return get_aval(x).shape


def _dtype(x):
    return get_aval(x).dtype


def matmul(a, b):
    """Batched a @ b for operands with the same leading (batch) shape."""
    nb = len(_shape(a)) - 2
    batch = tuple(range(nb))
    return api.dot_general(a, b, (((nb + 1,), (nb,)), (batch, batch)))


def swap_last(x):
    """The transpose of every matrix in x."""
    nd = len(_shape(x))
    return api.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _expand(x, shape):
    """x broadcast to shape, where x has shape's rank and size-1 axes where it broadcasts."""
    return api.broadcast_in_dim(x, shape, tuple(range(len(shape))))


_BLOCK = 16  # rows/columns per step of the blocked algorithms (used above 2 * _BLOCK)


def _full(shape, value, dtype):
    return api.broadcast_in_dim(np.asarray(value, dtype), shape, ())


def _both(p, q):
    """Elementwise p and q of two bool arrays."""
    return P["and"].bind(p, q)


def _index_grid(shape, dimension):
    return api.broadcasted_iota(_I32, shape, dimension)


def triangle_mask(shape, lower: bool, k: int = 0):
    """Bool array of shape: True on and below diagonal k (lower) or on and above it (upper)."""
    rows, cols = _index_grid(shape, len(shape) - 2), _index_grid(shape, len(shape) - 1)
    return api.le(cols, api.add(rows, np.int32(k))) if lower else api.ge(cols, api.add(rows, np.int32(k)))


def tril(x, k: int = 0):
    return api.select(triangle_mask(_shape(x), True, k), x, 0)


def triu(x, k: int = 0):
    return api.select(triangle_mask(_shape(x), False, k), x, 0)


def eye_like(x):
    shape = _shape(x)
    rows, cols = _index_grid(shape, len(shape) - 2), _index_grid(shape, len(shape) - 1)
    return api.select(api.eq(rows, cols), api.broadcast_in_dim(np.ones((), _dtype(x)), shape, ()),
                      api.broadcast_in_dim(np.zeros((), _dtype(x)), shape, ()))


def _row(x, i):
    """Row i of every matrix in x, keeping the axis: shape (..., 1, n)."""
    return api.dynamic_slice_in_dim(x, i, 1, axis=len(_shape(x)) - 2)


def _column(x, j):
    return api.dynamic_slice_in_dim(x, j, 1, axis=len(_shape(x)) - 1)


def _entry(x, i, j):
    return _column(_row(x, i), j)


def symmetrize(x):
    """(x + x^T) / 2, the symmetric part of every matrix in x (JAX's lax.linalg.symmetrize)."""
    return api.div(api.add(x, swap_last(x)), 2)


def _check_float_matrix(fn: str, name: str, x, *, square: bool = True):
    a = get_aval(x)
    if a.ndim < 2:
        raise ValueError(f"{fn}: argument {name} must have at least 2 dimensions (a batch of matrices), got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{fn}: argument {name} must be a batch of square matrices, got shape {a.shape}")
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"{fn}: argument {name} must be a floating-point array, got {a.dtype}")


def _batch_to_front(values, dims, axis_size):
    return [move_batch_axis(v, d, 0, axis_size) for v, d in zip(values, dims)]


# ---- cholesky --------------------------------------------------------------------------------------

def _cholesky_columns(x):
    """Left-looking Cholesky of the lower triangle of x: column j of L is (x[:, j] - L @ L[j, :]^T) scaled
    by 1/sqrt of its diagonal entry (NaN where that entry is not positive)."""
    shape = _shape(x)
    n = shape[-1]
    rows = _index_grid(shape[:-1] + (1,), len(shape) - 2)

    def column(j, factor):
        v = api.sub(_column(x, j), matmul(factor, swap_last(_row(factor, j))))
        d = api.sqrt(_expand(_entry(v, j, 0), _shape(v)))
        col = api.select(api.gt(rows, j), api.div(v, d), api.select(api.eq(rows, j), d, 0))
        return api.dynamic_update_slice_in_dim(factor, col, j, axis=len(shape) - 1)

    return fori_loop(0, n, column, _full(shape, 0, _dtype(x)))


def _cholesky_and_inverse(x):
    """(L, L^-1) for the lower triangle of small matrices x in one loop: step j computes column j of L
    as _cholesky_columns does, then row j of L^-1 = (e_j - L[j, :j] @ L^-1[:j, :]) / L[j, j]."""
    shape = _shape(x)
    nd, n, dtype = len(shape), shape[-1], _dtype(x)
    rows = _index_grid(shape[:-1] + (1,), nd - 2)
    cols = _index_grid(shape[:-2] + (1, n), nd - 1)
    zero_row = _full(shape[:-2] + (1, n), 0, dtype)

    def step(j, carry):
        factor, inverse = carry
        v = api.sub(_column(x, j), matmul(factor, swap_last(_row(factor, j))))
        d = api.sqrt(_expand(_entry(v, j, 0), _shape(v)))
        col = api.select(api.gt(rows, j), api.div(v, d), api.select(api.eq(rows, j), d, _full(_shape(v), 0, dtype)))
        factor = api.dynamic_update_slice_in_dim(factor, col, j, axis=nd - 1)
        known = api.select(api.lt(cols, j), _row(factor, j), zero_row)
        unit = api.select(api.eq(cols, j), _full(_shape(zero_row), 1, dtype), zero_row)
        inverse_row = api.div(api.sub(unit, matmul(known, inverse)), _expand(_entry(factor, j, j), _shape(zero_row)))
        return factor, api.dynamic_update_slice_in_dim(inverse, inverse_row, j, axis=nd - 2)

    zeros = _full(shape, 0, dtype)
    return fori_loop(0, n, step, (zeros, zeros))


def _pad_to_blocks(x):
    """(x, size): square matrices x grown to a multiple of _BLOCK with an identity in the new corner (so a
    factorization of the padded matrix holds the original's in its top-left block), and that size."""
    shape = _shape(x)
    batch, n, dtype, nd = shape[:-2], shape[-1], _dtype(x), len(shape)
    padded = -(-n // _BLOCK) * _BLOCK
    if padded != n:
        x = api.add(pad(x, np.zeros((), dtype), [(0, 0, 0)] * (nd - 2) + [(0, padded - n, 0)] * 2),
                    _padding_identity(batch, n, padded, dtype))
    return x, padded


def _cholesky_blocked(x):
    """Left-looking Cholesky by panels of _BLOCK columns: panel = x[:, k] - L @ L[k, :]^T (one matrix
    product), its diagonal block factored and inverted by _cholesky_and_inverse, the rows below multiplied
    by that inverse's transpose: n / _BLOCK outer steps, each with one _BLOCK-step loop on a small block."""
    shape = _shape(x)
    batch, n, dtype = shape[:-2], shape[-1], _dtype(x)
    nd = len(shape)
    size = _BLOCK
    x, padded = _pad_to_blocks(x)
    nb = padded // size
    full = batch + (padded, size)
    rows = _index_grid(full, nd - 2)

    def panel_step(k, factor):
        start = api.mul(k, np.int32(size))
        panel = api.sub(api.dynamic_slice_in_dim(x, start, size, axis=nd - 1),
                        matmul(factor, swap_last(api.dynamic_slice_in_dim(factor, start, size, axis=nd - 2))))
        block, inverse = _cholesky_and_inverse(api.dynamic_slice_in_dim(panel, start, size, axis=nd - 2))
        below = matmul(panel, swap_last(inverse))
        placed = api.dynamic_update_slice_in_dim(_full(full, 0, dtype), block, start, axis=nd - 2)
        end = api.add(start, np.int32(size))
        column = api.select(api.lt(rows, start), _full(full, 0, dtype),
                            api.select(api.lt(rows, _expand_scalar(end, full)), placed, below))
        return api.dynamic_update_slice_in_dim(factor, column, start, axis=nd - 1)

    factor = fori_loop(0, nb, panel_step, _full(batch + (padded, padded), 0, dtype))
    return slice_(factor, (0,) * nd, shape) if padded != n else factor


def _expand_scalar(v, shape):
    return api.broadcast_in_dim(v, shape, ())


def _nan_unless_positive_diagonal(factor):
    """factor, or all NaN for each matrix whose diagonal is not all positive (JAX's failed Cholesky)."""
    shape = _shape(factor)
    nd = len(shape)
    diagonal = api.reduce_sum(api.select(api.eq(_index_grid(shape, nd - 2), _index_grid(shape, nd - 1)), factor,
                                         _full(shape, 0, _dtype(factor))), (nd - 1,))
    failures = api.select(api.gt(diagonal, 0), _full(_shape(diagonal), 0, _I32), _full(_shape(diagonal), 1, _I32))
    failed = api.broadcast_in_dim(api.reduce_sum(failures, (nd - 2,)), shape, tuple(range(nd - 2)))
    return api.select(api.gt(failed, 0), _full(shape, np.nan, _dtype(factor)), factor)


def _cholesky_impl(x):
    """Cholesky of x's lower triangle (blocked above 2 * _BLOCK columns); all NaN unless positive definite."""
    if _shape(x)[-1] == 0:
        return x
    blocked = _shape(x)[-1] > 2 * _BLOCK
    return _nan_unless_positive_diagonal(_cholesky_blocked(x) if blocked else _cholesky_columns(x))


SPLIT_FROM = 768
"""Native Cholesky of n >= SPLIT_FROM (of fewer than SPLIT_BATCH matrices) is split into steps of SPLIT_BLOCK
columns whose trailing update is a matrix product (_cholesky_split): a dispatch per kernel, each product
and solve spread over the workgroups, where one native kernel factors each matrix on one core."""
SPLIT_BLOCK = 256
SPLIT_BATCH = 4


def _split_block(n: int, least: int) -> int:
    """The columns per block of a split factorization of n: `least`, or n / SPLIT_STEPS (a multiple of 64)
    when that is wider, so a matrix takes at most about SPLIT_STEPS blocks (each block's kernels have
    shapes of their own: compiling them is the export's cost)."""
    return max(least, -(-n // (SPLIT_STEPS * 64)) * 64)


SPLIT_STEPS = 8


def _slice_last(x, rows, cols):
    """x[..., rows[0]:rows[1], cols[0]:cols[1]]."""
    shape = _shape(x)
    nb = len(shape) - 2
    return slice_(x, (0,) * nb + (rows[0], cols[0]), shape[:nb] + (rows[1], cols[1]))


def _cholesky_split(x):
    """LAPACK potrf's right-looking blocked Cholesky over the native kernels, for large matrices: for each
    block of SPLIT_BLOCK columns (or n / SPLIT_STEPS: _split_block), L11 = the native Cholesky of the
    trailing matrix's diagonal block (one workgroup a matrix), L21 = T21 L11^-T (the native triangular
    solve, L11 L21^T = T21^T, L21's rows split over the workgroups), T = T22 - L21 L21^T (syrk_native, the
    lower triangle, split by rows); the pieces joined by cholesky_join_native. A block that fails (not
    positive definite) is all NaN and so is every later piece: the result is all NaN when its last
    diagonal entry is NaN, as the one-kernel path's."""
    shape = _shape(x)
    nb, n, dtype = len(shape) - 2, shape[-1], _dtype(x)
    pieces, trailing, start = [], x, 0
    width = _split_block(n, SPLIT_BLOCK)
    while start < n:
        size = min(width, n - start)
        block = native.cholesky_p.bind(_slice_last(trailing, (0, size), (0, size)))
        pieces.append(block)
        if start + size < n:
            # L21^T = L11^-1 T21^T: the left solve runs along rows of L21^T, its columns split over workgroups
            rows = native.triangular_solve_p.bind(
                block, swap_last(_slice_last(trailing, (size, n - start), (0, size))), left_side=True, lower=True,
                transpose_a=False, conjugate_a=False, unit_diagonal=False)
            pieces.append(rows)
            trailing = native.syrk_p.bind(_slice_last(trailing, (size, n - start), (size, n - start)), rows)
        start += size
    return native.cholesky_join_p.bind(*pieces)


def _cholesky_lowering(x, *, lower_only=False):
    """The native kernel (kiln.lax._linalg_native) for float32/float64 (split into blocks for large
    matrices, _cholesky_split), else the lax implementation (all read only x's lower triangle)."""
    if not native.native(_dtype(x)):
        return _cholesky_impl(x)
    shape = _shape(x)
    if shape[-1] >= SPLIT_FROM and int(np.prod(shape[:-2], dtype=np.int64)) < SPLIT_BATCH:
        return _cholesky_split(x)
    return native.cholesky_p.bind(x)


cholesky_p = composite_primitive("cholesky", _cholesky_lowering, eager=lambda x, *, lower_only=False: eager.cholesky(x))


def cholesky(x, *, symmetrize_input: bool = True):
    """jax.lax.linalg.cholesky: the lower-triangular L with L @ L^T = x, for a batch of symmetric positive
    definite matrices (..., n, n). symmetrize_input uses (x + x^T)/2; otherwise only the lower triangle is
    read. A matrix that is not positive definite gives a matrix of NaN."""
    x = api.asarray(x)
    _check_float_matrix("cholesky", "x", x)
    if symmetrize_input:
        x = symmetrize(x)
    return cholesky_p.apply(x)


def cholesky_of_lower(x):
    """The Cholesky factor L of the symmetric matrices whose lower triangles are x's (..., n, n): the upper
    triangle is not an input at all (not read, and its derivative is zero), as LAPACK's potrf with uplo='L'
    and numpy.linalg.cholesky. Same values as cholesky(tril(x) + tril(x, -1)^T, symmetrize_input=False)
    without computing that matrix: the cholesky primitive's lower_only=True takes the tangent's lower
    triangle the same way."""
    x = api.asarray(x)
    _check_float_matrix("cholesky", "x", x)
    return cholesky_p.apply(x, lower_only=True)


def _halve_diagonal_tril(x):
    return api.mul(tril(x), api.sub(1, api.mul(eye_like(x), 0.5)))


def _cholesky_jvp(primals, tangents, *, lower_only=False):
    (x,), (sigma_dot,) = primals, tangents
    factor = cholesky_p.apply(x, lower_only=lower_only)
    if isinstance(sigma_dot, Zero):
        return factor, Zero(tangent_aval(get_aval(factor)))
    if lower_only:  # the symmetric tangent whose lower triangle is sigma_dot's
        sigma_dot = api.add(tril(sigma_dot), swap_last(tril(sigma_dot, -1)))
    tmp = triangular_solve(factor, sigma_dot, left_side=False, transpose_a=True, lower=True)
    inner = triangular_solve(factor, tmp, left_side=True, transpose_a=False, lower=True)
    return factor, matmul(factor, _halve_diagonal_tril(inner))


def _cholesky_batch(values, dims, *, axis_size, lower_only=False):
    (x,) = _batch_to_front(values, dims, axis_size)
    return cholesky_p.apply(x, lower_only=lower_only), 0


cholesky_p.jvp_rule = cholesky_p.graph_free(_cholesky_jvp)
cholesky_p.batching_rule = cholesky_p.graph_free(_cholesky_batch)


# ---- triangular_solve ------------------------------------------------------------------------------

def _substitute(a, b, *, lower, unit_diagonal):
    """x with a @ x = b for triangular a (lower or upper; only that triangle is read), one row of x per
    iteration: x[i] = (b[i] - a[i, :] @ x) / a[i, i], rows not yet solved being zero."""
    shape_a = _shape(a)
    m = shape_a[-1]
    strict = api.select(triangle_mask(shape_a, lower, -1 if lower else 1), a, 0)

    def row(t, x):
        i = t if lower else api.sub(np.int32(m - 1), t)
        rest = api.sub(_row(b, i), matmul(_row(strict, i), x))
        if unit_diagonal:
            value = rest
        else:
            value = api.div(rest, _expand(_entry(a, i, i), _shape(rest)))
        return api.dynamic_update_slice_in_dim(x, value, i, axis=len(shape_a) - 2)

    return fori_loop(0, m, row, api.broadcast_in_dim(np.zeros((), _dtype(b)), _shape(b), ()))


def _diagonal_blocks(t, size):
    """The (size x size) diagonal blocks of every matrix in t (..., n, n), n a multiple of size:
    shape (..., n // size, size, size)."""
    shape = _shape(t)
    batch, nb = shape[:-2], shape[-1] // size
    k = len(batch)
    tiles = api.transpose(api.reshape(t, batch + (nb, size, nb, size)), tuple(range(k)) + (k, k + 2, k + 1, k + 3))
    tiles_shape = batch + (nb, nb, size, size)
    on_diagonal = api.eq(_index_grid(tiles_shape, k), _index_grid(tiles_shape, k + 1))
    return api.reduce_sum(api.select(on_diagonal, tiles, _full(tiles_shape, 0, _dtype(t))), (k + 1,))


def _substitute_blocked(a, b, *, lower, unit_diagonal):
    """_substitute by blocks of _BLOCK rows: the diagonal blocks are inverted first (one batched
    substitution of _BLOCK steps), then each block of x is inv(a_kk) @ (b_k - a[k, :] @ x), rows not yet
    solved being zero: n / _BLOCK + _BLOCK loop steps instead of n, each a matrix product."""
    shape_a, shape_b = _shape(a), _shape(b)
    batch, m, dtype = shape_a[:-2], shape_a[-1], _dtype(a)
    nd = len(shape_a)
    size = _BLOCK
    nb = -(-m // size)
    padded = nb * size
    t = api.select(triangle_mask(shape_a, lower, 0), a, _full(shape_a, 0, dtype))
    if unit_diagonal:
        t = api.add(api.select(triangle_mask(shape_a, lower, -1 if lower else 1), t, _full(shape_a, 0, dtype)),
                    eye_like(t))
    if padded != m:
        config = [(0, 0, 0)] * (nd - 2)
        t = api.add(pad(t, np.zeros((), dtype), config + [(0, padded - m, 0)] * 2),
                    _padding_identity(batch, m, padded, dtype))
        b = pad(b, np.zeros((), dtype), config + [(0, padded - m, 0), (0, 0, 0)])
    identities = api.broadcast_in_dim(_identity((), size, dtype), batch + (nb, size, size), (nd - 1, nd))
    inverses = _substitute(_diagonal_blocks(t, size), identities, lower=lower, unit_diagonal=False)
    columns = _shape(b)[-1]

    def block(step, x):
        k = step if lower else api.sub(np.int32(nb - 1), step)
        start = api.mul(k, np.int32(size))
        rows = api.dynamic_slice_in_dim(t, start, size, axis=nd - 2)
        rest = api.sub(api.dynamic_slice_in_dim(b, start, size, axis=nd - 2), matmul(rows, x))
        inverse = api.reshape(api.dynamic_slice_in_dim(inverses, k, 1, axis=nd - 2), batch + (size, size))
        return api.dynamic_update_slice_in_dim(x, matmul(inverse, rest), start, axis=nd - 2)

    x = fori_loop(0, nb, block, _full(batch + (padded, columns), 0, dtype))
    return slice_(x, (0,) * nd, shape_b) if padded != m else x


def _padding_identity(batch, m, padded, dtype):
    """Zeros of shape (..., padded, padded) with ones on the diagonal past row m."""
    shape = batch + (padded, padded)
    rows, cols = _index_grid(shape, len(shape) - 2), _index_grid(shape, len(shape) - 1)
    past = _both(api.eq(rows, cols), api.ge(rows, np.int32(m)))
    return api.select(past, _full(shape, 1, dtype), _full(shape, 0, dtype))


def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    if 0 in _shape(b)[-2:]:
        return b
    if not left_side:  # x @ op(a) = b  <=>  op(a)^T @ x^T = b^T
        return swap_last(_triangular_solve_impl(a, swap_last(b), left_side=True, lower=lower,
                                                transpose_a=not transpose_a, conjugate_a=conjugate_a,
                                                unit_diagonal=unit_diagonal))
    if transpose_a:
        a, lower = swap_last(a), not lower
    if _shape(a)[-1] > 2 * _BLOCK:
        return _substitute_blocked(a, b, lower=lower, unit_diagonal=unit_diagonal)
    return _substitute(a, b, lower=lower, unit_diagonal=unit_diagonal)


def _triangular_solve_lowering(a, b, **params):
    """The native kernel (kiln.lax._linalg_native) for float32/float64, else the lax implementation."""
    if native.native(_dtype(a), _dtype(b)):
        return native.triangular_solve_p.bind(a, b, **params)
    return _triangular_solve_impl(a, b, **params)


triangular_solve_p = composite_primitive("triangular_solve", _triangular_solve_lowering, eager=eager.triangular_solve)


def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False):
    """jax.lax.linalg.triangular_solve: x with op(a) @ x = b (left_side) or x @ op(a) = b, where op(a) is
    a or a^T (transpose_a) and a is lower or upper triangular (only that triangle is read; with
    unit_diagonal its diagonal is taken as ones). a: (..., m, m); b: (..., m, n) or (..., n, m), with the
    same batch axes. conjugate_a is accepted (kiln has no complex dtypes)."""
    a, b = api.asarray(a), api.asarray(b)
    _check_float_matrix("triangular_solve", "a", a)
    _check_float_matrix("triangular_solve", "b", b, square=False)
    sa, sb = _shape(a), _shape(b)
    if _dtype(a) != _dtype(b):
        raise TypeError(f"triangular_solve: a and b must have the same dtype, got {_dtype(a)} and {_dtype(b)}")
    if sa[:-2] != sb[:-2]:
        raise ValueError(f"triangular_solve: a and b must have the same batch shape, got {sa} and {sb}")
    solved_axis = sb[-2] if left_side else sb[-1]
    if solved_axis != sa[-1]:
        side = "rows" if left_side else "columns"
        raise ValueError(f"triangular_solve: b of shape {sb} must have {sa[-1]} {side} (a has shape {sa}, "
                         f"left_side={left_side})")
    return triangular_solve_p.apply(a, b, left_side=bool(left_side), lower=bool(lower),
                                    transpose_a=bool(transpose_a), conjugate_a=bool(conjugate_a),
                                    unit_diagonal=bool(unit_diagonal))


def _triangular_solve_jvp(primals, tangents, **params):
    (a, b), (a_dot, b_dot) = primals, tangents
    x = triangular_solve_p.apply(a, b, **params)
    out = Zero(tangent_aval(get_aval(x)))
    if not isinstance(b_dot, Zero):
        out = add_any(out, triangular_solve_p.apply(a, b_dot, **params))
    if not isinstance(a_dot, Zero):
        lower, unit = params["lower"], params["unit_diagonal"]
        k = 1 if unit else 0
        g = tril(a_dot, -k) if lower else triu(a_dot, k)
        g = api.neg(swap_last(g) if params["transpose_a"] else g)
        if params["left_side"]:
            term = triangular_solve_p.apply(a, matmul(g, x), **params)
        else:
            term = triangular_solve_p.apply(a, matmul(x, g), **params)
        out = add_any(out, term)
    return x, out


def _triangular_solve_transpose(ct, a, b, **params):
    if isinstance(ct, Zero):
        return [None, Zero(b.aval)]
    flipped = dict(params, transpose_a=not params["transpose_a"])
    return [None, triangular_solve_p.apply(a, ct, **flipped)]


def _triangular_solve_batch(values, dims, *, axis_size, **params):
    a, b = _batch_to_front(values, dims, axis_size)
    return triangular_solve_p.apply(a, b, **params), 0


triangular_solve_p.jvp_rule = triangular_solve_p.graph_free(_triangular_solve_jvp)
triangular_solve_p.transpose_rule = triangular_solve_p.graph_free(_triangular_solve_transpose)
triangular_solve_p.batching_rule = triangular_solve_p.graph_free(_triangular_solve_batch)


# ---- lu --------------------------------------------------------------------------------------------

def _swap_entries(v, j, p):
    """v (..., m, w) with rows j and p swapped; p holds one row index per matrix, shape (..., 1, 1)."""
    shape = _shape(v)
    rows = _index_grid(shape, len(shape) - 2)
    at_p = api.eq(rows, _expand(p, shape))
    row_p = api.reduce_sum(api.select(at_p, v, 0), (len(shape) - 2,))
    row_p = _expand(api.reshape(row_p, shape[:-2] + (1, shape[-1])), shape)
    row_j = _expand(_row(v, j), shape)
    return api.select(api.eq(rows, j), row_p, api.select(at_p, row_j, v))


def _lu_columns(a):
    """Gaussian elimination with partial pivoting (getrf's algorithm), one column per iteration: pick the
    largest |entry| on or below the diagonal, swap rows, store the multipliers, rank-1 update the rest."""
    shape = _shape(a)
    nb, (m, n) = len(shape) - 2, shape[-2:]
    k = min(m, n)
    rows_col = _index_grid(shape[:-1] + (1,), nb)
    rows, cols = _index_grid(shape, nb), _index_grid(shape, nb + 1)

    def step(j, carry):
        lu, pivots, perm = carry
        candidates = api.select(api.ge(rows_col, j), api.abs(_column(lu, j)), -1)
        p = api.reshape(api.argmax(candidates, nb, _I32), shape[:-2] + (1, 1))
        lu = _swap_entries(lu, j, p)
        perm = api.reshape(_swap_entries(api.reshape(perm, shape[:-2] + (m, 1)), j, p), shape[:-2] + (m,))
        pivots = api.dynamic_update_slice_in_dim(pivots, api.reshape(p, shape[:-2] + (1,)), j, axis=nb)
        pivot = _entry(lu, j, j)
        safe_pivot = api.select(api.eq(pivot, 0), api.broadcast_in_dim(np.ones((), _dtype(a)), _shape(pivot), ()), pivot)
        col = _column(lu, j)
        multipliers = api.select(api.gt(rows_col, j), api.div(col, _expand(safe_pivot, _shape(col))), 0)
        u_row = api.select(api.gt(_index_grid(shape[:-2] + (1, n), nb + 1), j), _row(lu, j), 0)
        updated = api.sub(lu, api.mul(_expand(multipliers, shape), _expand(u_row, shape)))
        below_pivot = _both(api.gt(rows, j), api.eq(cols, j))
        lu = api.select(below_pivot, _expand(multipliers, shape), updated)
        return lu, pivots, perm

    pivots = api.broadcast_in_dim(np.zeros((), _I32), shape[:-2] + (k,), ())
    perm = api.broadcast_in_dim(api.iota(_I32, m), shape[:-1], (nb,))
    return list(fori_loop(0, k, step, (a, pivots, perm)))


def _lu_panel(panel, start):
    """Partial-pivoting elimination of the columns of `panel` (..., m, size) whose diagonal starts at row
    `start`: returns the factored panel, the pivot rows (..., size) and the row order it applied."""
    shape = _shape(panel)
    nb, size = len(shape) - 2, shape[-1]
    rows_col = _index_grid(shape[:-1] + (1,), nb)
    rows, cols = _index_grid(shape, nb), _index_grid(shape, nb + 1)
    cols_row = _index_grid(shape[:-2] + (1, size), nb + 1)

    def step(j, carry):
        panel, pivots, order = carry
        r = api.add(start, j)
        candidates = api.select(api.ge(rows_col, r), api.abs(_column(panel, j)), _full(_shape(rows_col), -1, _dtype(panel)))
        p = api.reshape(api.argmax(candidates, nb, _I32), shape[:-2] + (1, 1))
        panel = _swap_entries(panel, r, p)
        order = _swap_entries(order, r, p)
        pivots = api.dynamic_update_slice_in_dim(pivots, api.reshape(p, shape[:-2] + (1,)), j, axis=nb)
        pivot = _entry(panel, r, j)
        safe_pivot = api.select(api.eq(pivot, 0), _full(_shape(pivot), 1, _dtype(panel)), pivot)
        col = _column(panel, j)
        multipliers = api.select(api.gt(rows_col, r), api.div(col, _expand(safe_pivot, _shape(col))),
                                 _full(_shape(col), 0, _dtype(panel)))
        u_row = api.select(api.gt(cols_row, j), _row(panel, r), _full(shape[:-2] + (1, size), 0, _dtype(panel)))
        updated = api.sub(panel, api.mul(_expand(multipliers, shape), _expand(u_row, shape)))
        below_pivot = _both(api.gt(rows, r), api.eq(cols, j))
        return api.select(below_pivot, _expand(multipliers, shape), updated), pivots, order

    order = api.broadcast_in_dim(api.iota(_I32, shape[-2]), shape[:-1] + (1,), (nb,))
    pivots = _full(shape[:-2] + (size,), 0, _I32)
    panel, pivots, order = fori_loop(0, size, step, (panel, pivots, order))
    return panel, pivots, api.reshape(order, shape[:-1])


def take_rows(x, order):
    """x[..., order, :] for a row order (..., m) per matrix: one gather of whole rows."""
    shape = _shape(order)
    nb = len(shape) - 1
    columns = [api.broadcasted_iota(_I32, shape, d) for d in range(nb)] + [api.convert_element_type(order, _I32)]
    indices = concatenate([api.reshape(c, shape + (1,)) for c in columns], nb + 1)
    return gather(x, indices, tuple(range(nb + 1)))


def _lu_blocked(a):
    """Right-looking blocked LU (getrf's structure) of square matrices: per panel of _BLOCK columns, the
    panel is eliminated with partial pivoting (_lu_panel, small operations), its row order is applied to
    the whole matrix (one gather), U's block row is L11^-1 A12 and the trailing matrix takes one
    matmul update. Sizes that are not multiples of _BLOCK are padded with identity (never chosen as pivots)."""
    shape = _shape(a)
    batch, n, dtype = shape[:-2], shape[-1], _dtype(a)
    nd = len(shape)
    size = _BLOCK
    a, padded = _pad_to_blocks(a)
    steps = padded // size
    cols = _index_grid(batch + (size, padded), nd - 1)
    panel_rows = _index_grid(batch + (padded, size), nd - 2)
    identity = _identity(batch, size, dtype)

    def panel_step(k, carry):
        lu, pivots, perm = carry
        start = api.mul(k, np.int32(size))
        end = api.add(start, np.int32(size))
        panel, panel_pivots, order = _lu_panel(api.dynamic_slice_in_dim(lu, start, size, axis=nd - 1), start)
        lu = api.dynamic_update_slice_in_dim(take_rows(lu, order), panel, start, axis=nd - 1)
        perm = api.reshape(take_rows(api.reshape(perm, batch + (padded, 1)), order), batch + (padded,))
        pivots = api.dynamic_update_slice_in_dim(pivots, panel_pivots, start, axis=nd - 2)
        unit_lower = api.add(tril(api.dynamic_slice_in_dim(panel, start, size, axis=nd - 2), -1), identity)
        inverse = _substitute(unit_lower, identity, lower=True, unit_diagonal=True)
        block_rows = api.dynamic_slice_in_dim(lu, start, size, axis=nd - 2)
        right = api.ge(cols, _expand_scalar(end, _shape(cols)))
        u12 = api.select(right, matmul(inverse, block_rows), _full(_shape(cols), 0, dtype))
        lu = api.dynamic_update_slice_in_dim(lu, api.select(right, u12, block_rows), start, axis=nd - 2)
        l21 = api.select(api.ge(panel_rows, _expand_scalar(end, _shape(panel_rows))), panel,
                         _full(_shape(panel_rows), 0, dtype))
        return api.sub(lu, matmul(l21, u12)), pivots, perm

    pivots = _full(batch + (padded,), 0, _I32)
    perm = api.broadcast_in_dim(api.iota(_I32, padded), batch + (padded,), (nd - 2,))
    lu, pivots, perm = fori_loop(0, steps, panel_step, (a, pivots, perm))
    if padded == n:
        return [lu, pivots, perm]
    return [slice_(lu, (0,) * nd, shape), slice_(pivots, (0,) * (nd - 1), batch + (n,)),
            slice_(perm, (0,) * (nd - 1), batch + (n,))]


def _lu_impl(a):
    m, n = _shape(a)[-2:]
    if min(m, n) == 0:
        batch = _shape(a)[:-2]
        return [a, _full(batch + (0,), 0, _I32), api.broadcast_in_dim(api.iota(_I32, m), batch + (m,), (len(batch),))]
    return _lu_blocked(a) if m == n and n > 2 * _BLOCK else _lu_columns(a)


LU_SPLIT_FROM = 768
"""Native LU of square n >= LU_SPLIT_FROM (of fewer than SPLIT_BATCH matrices) is split into blocks of
LU_SPLIT_BLOCK columns (_lu_split): narrower than Cholesky's, as each panel's LU (pivot search down the
whole column) stays on one workgroup."""
LU_SPLIT_BLOCK = 128


def _take_entries(v, order):
    """v[..., order] for vectors v (..., s) and a row order (..., s)."""
    return api.reshape(take_rows(api.reshape(v, _shape(v) + (1,)), order), _shape(v))


def _lu_split(a):
    """LAPACK getrf's right-looking blocked LU over the native kernels, for large square matrices: for each
    block of LU_SPLIT_BLOCK columns (or n / SPLIT_STEPS: _split_block), the native LU of the trailing
    matrix's panel (its pivot search over the panel's whole, updated column, as getrf's; one workgroup a
    matrix), its row order applied to the rest of
    those rows (one gather each: the columns right of the panel and the L columns left of it, as dlaswp),
    U12 = L11^-1 A12 (the native unit triangular solve, columns split over the workgroups) and the trailing
    matrix A22 - L21 U12 (a matrix product, parallel); the finished block rows are joined, the panels'
    pivots offset by their first row, and the row order composed."""
    shape = _shape(a)
    nb, n = len(shape) - 2, shape[-1]
    batch = shape[:-2]
    blocks, pivots = [], []
    left, trailing, start = None, a, 0
    order = api.broadcasted_iota(_I32, batch + (n,), nb)
    width = _split_block(n, LU_SPLIT_BLOCK)
    while start < n:
        size, s = min(width, n - start), n - start
        panel, piv, perm = native.lu_p.bind(_slice_last(trailing, (0, s), (0, size)))
        pivots.append(api.add(piv, np.int32(start)))
        rest_order = _take_entries(slice_(order, (0,) * nb + (start,), batch + (n,)), perm)
        order = concatenate([slice_(order, (0,) * (nb + 1), batch + (start,)), rest_order], nb) if start \
            else rest_order
        if left is not None:
            left = take_rows(left, perm)
        pieces = [] if left is None else [_slice_last(left, (0, size), (0, start))]
        pieces.append(_slice_last(panel, (0, size), (0, size)))
        if size < s:
            rest = take_rows(_slice_last(trailing, (0, s), (size, s)), perm)
            upper = native.triangular_solve_p.bind(
                _slice_last(panel, (0, size), (0, size)), _slice_last(rest, (0, size), (0, s - size)),
                left_side=True, lower=True, transpose_a=False, conjugate_a=False, unit_diagonal=True)
            pieces.append(upper)
            below = _slice_last(panel, (size, s), (0, size))
            trailing = api.sub(_slice_last(rest, (size, s), (0, s - size)), matmul(below, upper))
            left = below if left is None else concatenate([_slice_last(left, (size, s), (0, start)), below], nb + 1)
        blocks.append(concatenate(pieces, nb + 1) if len(pieces) > 1 else pieces[0])
        start += size
    return [concatenate(blocks, nb), concatenate(pivots, nb), order]


def _lu_lowering(a):
    """The native kernel (kiln.lax._linalg_native) for float32/float64 (split into blocks for large square
    matrices, _lu_split), else the lax implementation."""
    if not native.native(_dtype(a)):
        return _lu_impl(a)
    shape = _shape(a)
    if shape[-1] == shape[-2] >= LU_SPLIT_FROM and int(np.prod(shape[:-2], dtype=np.int64)) < SPLIT_BATCH:
        return _lu_split(a)
    return native.lu_p.bind(a)


lu_p = composite_primitive("lu", _lu_lowering, multiple_results=True, eager=eager.lu)


def lu(x):
    """jax.lax.linalg.lu: (lu, pivots, permutation) with partial pivoting, for a batch (..., m, n): lu holds
    L's multipliers below the diagonal (unit diagonal implied) and U on and above it, so that
    x[..., permutation, :] = L @ U; pivots (int32, (..., min(m, n))) are the rows swapped at each step and
    permutation (int32, (..., m)) the resulting row order."""
    x = api.asarray(x)
    _check_float_matrix("lu", "x", x, square=False)
    return tuple(lu_p.apply(x))


def permutation_matrix(perm, dtype):
    """P with P @ y = y[..., perm, :]: P[i, perm[i]] = 1."""
    shape = _shape(perm) + (_shape(perm)[-1],)
    nb = len(shape) - 2
    targets = api.broadcast_in_dim(perm, shape, tuple(range(nb + 1)))
    return api.select(api.eq(targets, _index_grid(shape, nb + 1)), api.broadcast_in_dim(np.ones((), dtype), shape, ()),
                      api.broadcast_in_dim(np.zeros((), dtype), shape, ()))


def _pad_to(x, rows, cols, *, before: int = 0):
    """x padded with zeros to (..., rows, cols); `before` zero rows and columns go first."""
    shape = _shape(x)
    config = [(0, 0, 0)] * (len(shape) - 2) + [(before, rows - shape[-2] - before, 0),
                                               (before, cols - shape[-1] - before, 0)]
    return pad(x, np.zeros((), _dtype(x)), config)


def _identity(batch, n, dtype):
    return eye_like(api.broadcast_in_dim(np.zeros((), dtype), batch + (n, n), ()))


def _lu_jvp(primals, tangents):
    """JAX's rule (De Hoog, Anderssen and Lukas): with F = L^-1 P a_dot U^-1,
    lu_dot = L tril(F, -1) + triu(F) U (L and U padded to square with identity blocks)."""
    (a,), (a_dot,) = primals, tangents
    lu_, pivots, perm = lu_p.apply(a)
    zeros = [Zero(tangent_aval(get_aval(pivots))), Zero(tangent_aval(get_aval(perm)))]
    if isinstance(a_dot, Zero):
        return [lu_, pivots, perm], [Zero(tangent_aval(get_aval(lu_)))] + zeros
    shape, dtype = _shape(a), _dtype(a)
    batch, (m, n) = shape[:-2], shape[-2:]
    k = min(m, n)
    nb = len(batch)
    l_part = slice_(lu_, (0,) * (nb + 2), batch + (m, k))
    u_part = slice_(lu_, (0,) * (nb + 2), batch + (k, n))
    l_full = api.add(_pad_to(tril(l_part, -1), m, m), _identity(batch, m, dtype))
    u_full = _pad_to(triu(u_part), n, n)
    if n > k:
        u_full = api.add(u_full, _pad_to(_identity(batch, n - k, dtype), n, n, before=k))
    permuted = take_rows(a_dot, perm)
    la = triangular_solve(l_full, permuted, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(u_full, la, left_side=False, lower=False)
    lu_dot = api.add(matmul(l_full, tril(lau, -1)), matmul(triu(lau), u_full))
    return [lu_, pivots, perm], [lu_dot] + zeros


def _lu_batch(values, dims, *, axis_size):
    (x,) = _batch_to_front(values, dims, axis_size)
    return lu_p.apply(x), [0, 0, 0]


lu_p.jvp_rule = lu_p.graph_free(_lu_jvp)
lu_p.batching_rule = lu_p.graph_free(_lu_batch)


def lu_pivots_to_permutation(pivots, permutation_size: int):
    """jax.lax.linalg.lu_pivots_to_permutation: the row order (int32, (..., permutation_size)) that the
    row swaps `pivots` (..., k) apply to range(permutation_size), in order."""
    pivots = api.asarray(pivots)
    shape = _shape(pivots)
    if not shape or not dtypes.is_int(_dtype(pivots)):
        raise TypeError(f"lu_pivots_to_permutation: argument pivots must be an integer array of rank >= 1, got "
                        f"{_dtype(pivots)}{list(shape)}")
    if shape[-1] > permutation_size:
        raise ValueError(f"lu_pivots_to_permutation: {shape[-1]} pivots do not fit a permutation of size "
                         f"{permutation_size}")
    pivots = api.convert_element_type(pivots, _I32)
    nb = len(shape) - 1
    column = shape[:-1] + (permutation_size, 1)

    def swap(j, perm):
        p = api.reshape(api.dynamic_slice_in_dim(pivots, j, 1, axis=nb), shape[:-1] + (1, 1))
        return _swap_entries(perm, j, p)

    perm = api.broadcast_in_dim(api.iota(_I32, permutation_size), column, (nb,))
    return api.reshape(fori_loop(0, shape[-1], swap, perm), shape[:-1] + (permutation_size,))

