"""kiln.scipy.linalg: scipy.linalg's functions over kiln arrays (jax.scipy.linalg's set): cholesky,
cho_factor, cho_solve, solve_triangular, lu, lu_factor, lu_solve, solve, inv, det, expm, block_diag, and qr,
eigh, svd, polar on kiln.numpy.linalg's spectral factorizations; the special matrices (toeplitz, hankel,
...) live in _special_matrices and _linalg_special, qr_multiply/solve_sylvester/hessenberg in _linalg_extra,
schur/rsf2csf/sqrtm/funm in _linalg_schur.

Values follow scipy (which triangle is read, the shapes of b, trans codes), computed by kiln.lax.linalg's
factorizations; leading axes of a and b are a batch, as in JAX. scipy's overwrite_*/check_finite flags
are accepted and ignored. Nothing raises on singular or indefinite input (under jit nothing can): the
results hold inf/NaN instead (docs/linalg.md).
"""
from __future__ import annotations

import numpy as np

from .. import numpy as knp
from ..lax import _linalg_triangular as lax_linalg
from ..lax.control_flow import fori_loop
from ..numpy._base import broadcast_shapes
from ..numpy.linalg import _decompositions as np_decompositions
from ..numpy.linalg import _solve as np_linalg
from ..transforms.api import jvp, stop_gradient
from ._special_matrices import *  # noqa: F401,F403
from ._special_matrices import __all__ as _special_names
from ._linalg_special import *  # noqa: F401,F403
from ._linalg_special import __all__ as _more_special_names
from ._linalg_extra import *  # noqa: F401,F403
from ._linalg_extra import __all__ as _extra_names
from ._linalg_schur import *  # noqa: F401,F403
from ._linalg_schur import __all__ as _schur_names

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular", "lu", "lu_factor", "lu_solve", "solve", "inv",
           "det", "expm", "expm_frechet", "block_diag", "qr", "eigh", "eigh_tridiagonal", "svd", "polar",
           *_special_names, *_more_special_names, *_extra_names,
           *_schur_names]

LinAlgError = np.linalg.LinAlgError


def _matrix(fn: str, a, name: str = "a"):
    return np_linalg._square_float(f"scipy.linalg.{fn}", a, name)


def _swap_last(x):
    return knp.swapaxes(x, -1, -2)


def _symmetric_from(x, lower: bool):
    """The symmetric matrix whose lower (or upper) triangle is x's: what LAPACK reads for uplo."""
    if lower:
        return knp.tril(x) + _swap_last(knp.tril(x, -1))
    return knp.triu(x) + _swap_last(knp.triu(x, 1))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.cholesky: the upper factor U with a = U^T U (lower=True: L with a = L L^T), reading only
    that triangle of a, as LAPACK's potrf does. Not positive definite: all NaN (scipy raises)."""
    x = _matrix("cholesky", a)
    factor = lax_linalg.cholesky_of_lower(x if lower else _swap_last(x))  # a's upper triangle: a^T's lower
    return factor if lower else _swap_last(factor)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """scipy.linalg.cho_factor: (c, lower) for cho_solve. c is the triangular factor with zeros in the other
    triangle (scipy leaves a's entries there; cho_solve reads only the factor's triangle either way)."""
    return cholesky(a, lower=lower), bool(lower)


def _right_hand_side(fn: str, a, b):
    """b as (..., n, k) matrices and whether it was a vector (b.ndim == a.ndim - 1)."""
    a, b = knp.asarray(a), np_linalg._float_operand(f"scipy.linalg.{fn}", b)
    n = a.shape[-1]
    vector = b.ndim == a.ndim - 1
    matrices = knp.expand_dims(b, -1) if vector else b
    if matrices.ndim < 2 or matrices.shape[-2] != n:
        raise ValueError(f"scipy.linalg.{fn}: incompatible dimensions: a has shape {a.shape}, b has shape {b.shape} "
                         f"(b must be ({n},) or ({n}, k), with a's batch axes in front)")
    batch = broadcast_shapes(a.shape[:-2], matrices.shape[:-2], where=f"scipy.linalg.{fn}")
    return matrices, vector, batch


def _solve_with(fn: str, a, b, solver):
    a = knp.asarray(a)
    matrices, vector, batch = _right_hand_side(fn, a, b)
    dtype = np.promote_types(a.dtype, matrices.dtype)
    a = knp.broadcast_to(a.astype(dtype), batch + a.shape[-2:])
    matrices = knp.broadcast_to(matrices.astype(dtype), batch + matrices.shape[-2:])
    x = solver(a, matrices)
    return x[..., 0] if vector else x


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """scipy.linalg.cho_solve: x with A x = b, given (c, lower) from cho_factor."""
    c, lower = c_and_lower
    c = _matrix("cho_solve", c, "c")

    def solver(factor, rhs):
        y = lax_linalg.triangular_solve(factor, rhs, left_side=True, lower=lower, transpose_a=not lower)
        return lax_linalg.triangular_solve(factor, y, left_side=True, lower=lower, transpose_a=lower)

    return _solve_with("cho_solve", c, b, solver)


_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}


def _transposed(fn: str, trans) -> bool:
    try:
        return _TRANS[trans]
    except (KeyError, TypeError):
        raise ValueError(f"scipy.linalg.{fn}: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}") from None


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True):
    """scipy.linalg.solve_triangular: x with op(a) x = b, op from trans (0/'N': a, 1/'T' and 2/'C': a^T),
    reading only a's lower or upper triangle (its diagonal as ones with unit_diagonal)."""
    transpose = _transposed("solve_triangular", trans)
    a = _matrix("solve_triangular", a)

    def solver(t, rhs):
        return lax_linalg.triangular_solve(t, rhs, left_side=True, lower=bool(lower), transpose_a=transpose,
                                           unit_diagonal=bool(unit_diagonal))

    return _solve_with("solve_triangular", a, b, solver)


def _lu_float(fn: str, a):
    x = np_linalg._float_operand(f"scipy.linalg.{fn}", a)
    if x.ndim < 2:
        raise ValueError(f"scipy.linalg.{fn}: expected a 2-D array (or a batch of them) for a, got shape {x.shape}")
    return x


def lu(a, permute_l=False, overwrite_a=False, check_finite=True, p_indices=False):
    """scipy.linalg.lu: (p, l, u) with a = p @ l @ u (partial pivoting); permute_l=True gives (p @ l, u);
    p_indices=True gives p as the row indices (int32) with a = l[p] @ u."""
    x = _lu_float("lu", a)
    m, n = x.shape[-2:]
    k = min(m, n)
    factors, _, perm = lax_linalg.lu(x)
    l_part = knp.tril(factors[..., :, :k], -1) + knp.eye(m, k, dtype=x.dtype)
    u_part = knp.triu(factors[..., :k, :])
    rows_of_p = _swap_last(lax_linalg.permutation_matrix(perm, x.dtype))
    if permute_l:
        return knp.matmul(rows_of_p, l_part), u_part
    if p_indices:
        return knp.argsort(perm, axis=-1).astype(np.int32), l_part, u_part
    return rows_of_p, l_part, u_part


def lu_factor(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.lu_factor: (lu, piv): L's multipliers below the diagonal, U on and above it, and the
    0-based row interchanges piv (int32) of a square a."""
    x = _matrix("lu_factor", a)
    factors, pivots, _ = lax_linalg.lu(x)
    return factors, pivots


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """scipy.linalg.lu_solve: x with a x = b (trans=0) or a^T x = b (trans=1, 2), from lu_factor's result."""
    factors, pivots = lu_and_piv
    transpose = _transposed("lu_solve", trans)
    factors = _matrix("lu_solve", factors, "lu")
    n = factors.shape[-1]
    perm = lax_linalg.lu_pivots_to_permutation(knp.asarray(pivots), n)

    def solver(lu_, rhs):
        order = knp.broadcast_to(perm, lu_.shape[:-1])
        if not transpose:
            y = lax_linalg.triangular_solve(lu_, lax_linalg.take_rows(rhs, order), left_side=True, lower=True,
                                            unit_diagonal=True)
            return lax_linalg.triangular_solve(lu_, y, left_side=True, lower=False)
        y = lax_linalg.triangular_solve(lu_, rhs, left_side=True, lower=False, transpose_a=True)
        y = lax_linalg.triangular_solve(lu_, y, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
        return lax_linalg.take_rows(y, knp.argsort(order, axis=-1))

    return _solve_with("lu_solve", factors, b, solver)


_ASSUME = {"gen": "gen", "general": "gen", "sym": "sym", "symmetric": "sym", "her": "sym", "hermitian": "sym",
           "pos": "pos", "positive definite": "pos"}


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True, assume_a="gen",
          transposed=False):
    """scipy.linalg.solve: x with a x = b. assume_a='gen' (LU with partial pivoting), 'sym'/'her' (LU of the
    symmetric matrix read from the `lower` triangle) or 'pos' (Cholesky of that triangle); transposed=True
    solves a^T x = b. b is (n,) or (n, k) with a's batch axes in front."""
    kind = _ASSUME.get(assume_a) if isinstance(assume_a, str) else None
    if kind is None:
        raise ValueError(f"scipy.linalg.solve: assume_a must be one of {sorted(_ASSUME)}, got {assume_a!r}")
    a = _matrix("solve", a)
    if transposed and kind == "gen":
        a = _swap_last(a)
    if kind != "gen":
        a = _symmetric_from(a, bool(lower))

    def solver(m, rhs):
        if kind == "pos":
            factor = lax_linalg.cholesky(m, symmetrize_input=False)
            y = lax_linalg.triangular_solve(factor, rhs, left_side=True, lower=True)
            return lax_linalg.triangular_solve(factor, y, left_side=True, lower=True, transpose_a=True)
        return np_linalg.solve(m, rhs)

    return _solve_with("solve", a, b, solver)


def inv(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.inv: numpy.linalg.inv's result (inf/NaN when singular; scipy raises)."""
    return np_linalg.inv(_matrix("inv", a))


def det(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.det: the determinant from the LU factorization."""
    return np_linalg.det(_matrix("det", a))


# Padé approximants of degree 7 (float32) and 13 (float64) and the 1-norm bounds theta below which
# they are accurate to the dtype's unit roundoff (Higham 2005, "The scaling and squaring method for
# the matrix exponential revisited", tables 2.3 and 3.1).
_PADE = {
    7: ((17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0), 3.925724783138660),
    13: ((64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
          10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0,
          1.0), 5.371920351148152),
}
_MAX_SQUARINGS = 16


def _pade_terms(a, degree):
    """U (odd part) and V (even part) of the Padé approximant r = (V - U)^-1 (V + U) of exp(a)."""
    b = _PADE[degree][0]
    eye = knp.broadcast_to(knp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    a2 = knp.matmul(a, a)
    a4 = knp.matmul(a2, a2)
    a6 = knp.matmul(a4, a2)
    if degree == 7:
        u = knp.matmul(a, b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
        return u, v
    u = knp.matmul(a, knp.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
                   + b[1] * eye)
    v = knp.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    return u, v


def expm(A, *, upper_triangular=False, max_squarings=_MAX_SQUARINGS):
    """scipy.linalg.expm: the matrix exponential by scaling and squaring with a Padé approximant (degree 13
    in float64, 7 in float32; JAX's method): a is scaled by 2^-s so that its 1-norm is below the degree's
    theta, then the approximant is squared s times (s <= max_squarings; a static loop, so grad works)."""
    a = _matrix("expm", A, "A")
    degree = 13 if a.dtype == np.float64 else 7
    theta = _PADE[degree][1]
    norm = knp.max(knp.sum(knp.abs(a), axis=-2), axis=-1)
    s = knp.clip(knp.ceil(knp.log2(norm / theta)), 0, max_squarings)
    s = stop_gradient(knp.where(knp.isfinite(s), s, 0).astype(a.dtype))
    scaled = a / knp.exp2(s)[..., None, None]
    u, v = _pade_terms(scaled, degree)
    r = np_linalg.solve(v - u, v + u)

    def square(i, r):
        return knp.where((i < s)[..., None, None], knp.matmul(r, r), r)

    return fori_loop(0, int(max_squarings), square, r)


def block_diag(*arrs):
    """scipy.linalg.block_diag: the arrays (0-d and 1-d ones as rows) on the diagonal of a zero matrix."""
    if not arrs:
        return np.zeros((1, 0))
    blocks = [knp.atleast_2d(knp.asarray(a)) for a in arrs]
    for i, block in enumerate(blocks):
        if block.ndim != 2:
            raise ValueError(f"scipy.linalg.block_diag: argument {i} has {block.ndim} dimensions; arguments must "
                             "have at most 2 dimensions")
    dtype = blocks[0].dtype
    for block in blocks[1:]:
        dtype = np.promote_types(dtype, block.dtype)
    width = sum(block.shape[1] for block in blocks)
    rows, left = [], 0
    for block in blocks:
        right = width - left - block.shape[1]
        rows.append(knp.pad(block.astype(dtype), ((0, 0), (left, right))))
        left += block.shape[1]
    return knp.concatenate(rows, axis=0)


_QR_MODES = {"full": "complete", "economic": "reduced", "r": "complete"}


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """scipy.linalg.qr: (Q, R) with mode 'full' (Q square) or 'economic' (Q (m, k)), or (R,) with mode 'r'
    (a one-element tuple with the full (m, n) R, as scipy). pivoting and mode='raw' are not supported."""
    if pivoting:
        raise NotImplementedError("scipy.linalg.qr: pivoting=True (column-pivoted QR) is not supported by kiln")
    if mode not in _QR_MODES:
        raise ValueError(f"scipy.linalg.qr: mode must be 'full', 'economic' or 'r', got {mode!r} ('raw' is not "
                         "supported by kiln)")
    q, r = np_decompositions.qr(_lu_float("qr", a), mode=_QR_MODES[mode])
    return (r,) if mode == "r" else (q, r)


def eigh(a, b=None, *, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False, type=1,
         check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """scipy.linalg.eigh: ascending eigenvalues w (and eigenvectors v as columns) of the symmetric matrix
    read from a's `lower` (or upper) triangle; with b, the generalized problem a v = w b v (type 1) through
    b's Cholesky factor L: the eigenvectors y of L^-1 a L^-T give v = L^-T y. subset_by_index=(lo, hi)
    keeps eigenvalues lo..hi (inclusive). subset_by_value (data-dependent sizes) is not supported."""
    if subset_by_value is not None:
        raise NotImplementedError("scipy.linalg.eigh: subset_by_value gives a data-dependent number of eigenvalues; "
                                  "kiln needs static shapes (use subset_by_index)")
    if type != 1:
        raise NotImplementedError(f"scipy.linalg.eigh: only type=1 (a v = w b v) is supported, got type={type!r}")
    x = _matrix("eigh", a)
    x = _symmetric_from(x, bool(lower))
    factor = None
    if b is not None:
        factor = lax_linalg.cholesky(_symmetric_from(_matrix("eigh", b, "b").astype(x.dtype), bool(lower)),
                                     symmetrize_input=False)
        half = lax_linalg.triangular_solve(factor, x, left_side=True, lower=True)
        x = lax_linalg.triangular_solve(factor, half, left_side=False, lower=True, transpose_a=True)
        x = (x + _swap_last(x)) / 2
    w, v = np_decompositions.eigh(x)
    if factor is not None:
        v = lax_linalg.triangular_solve(factor, v, left_side=True, lower=True, transpose_a=True)
    if subset_by_index is not None:
        lo, hi = (int(i) for i in subset_by_index)
        n = x.shape[-1]
        if not 0 <= lo <= hi < n:
            raise ValueError(f"scipy.linalg.eigh: subset_by_index {subset_by_index!r} must satisfy 0 <= lo <= hi < {n}")
        w, v = w[..., lo:hi + 1], v[..., :, lo:hi + 1]
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True, lapack_driver="gesdd"):
    """scipy.linalg.svd: (U, s, Vh) with s descending, or s alone without compute_uv."""
    x = _lu_float("svd", a)
    out = np_decompositions.svd(x, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def expm_frechet(A, E, method=None, compute_expm=True, check_finite=True):
    """scipy.linalg.expm_frechet: (expm(A), L) where L is the Frechet derivative of expm at A in the
    direction E (the JVP of expm, exact for kiln's Pade approximant), or L alone without compute_expm."""
    a = _matrix("expm_frechet", A, "A")
    e = _matrix("expm_frechet", E, "E")
    if a.shape != e.shape:
        raise ValueError(f"scipy.linalg.expm_frechet: A and E must have the same shape, got {a.shape} and {e.shape}")
    value, derivative = jvp(expm, (a,), (e.astype(a.dtype),))
    return (value, derivative) if compute_expm else derivative


def polar(a, side="right"):
    """scipy.linalg.polar: (u, p) with a = u @ p (side='right') or a = p @ u (side='left'), u with
    orthonormal columns (rows) and p symmetric positive semidefinite, from the SVD a = W S V^T."""
    if side not in ("right", "left"):
        raise ValueError(f"scipy.linalg.polar: side must be 'right' or 'left', got {side!r}")
    x = _lu_float("polar", a)
    w, s, vh = np_decompositions.svd(x, full_matrices=False)
    u = knp.matmul(w, vh)
    if side == "right":
        p = knp.matmul(_swap_last(vh) * s[..., None, :], vh)
    else:
        p = knp.matmul(w * s[..., None, :], _swap_last(w))
    return u, p


def eigh_tridiagonal(d, e, eigvals_only=False, select="a", select_range=None, check_finite=True, tol=0.0,
                     lapack_driver="auto"):
    """scipy.linalg.eigh_tridiagonal with eigvals_only=True (JAX's support): the ascending eigenvalues of
    the symmetric tridiagonal matrix with diagonal d and off-diagonal e (through eigh of the dense matrix).
    select='i' with select_range=(lo, hi) keeps eigenvalues lo..hi."""
    if not eigvals_only:
        raise NotImplementedError("scipy.linalg.eigh_tridiagonal: only eigvals_only=True is supported (as in JAX)")
    d = knp.asarray(d)
    e = knp.asarray(e)
    if d.ndim != 1 or e.shape != (max(d.shape[0] - 1, 0),):
        raise ValueError(f"scipy.linalg.eigh_tridiagonal: d must be 1-D of length n and e of length n - 1, got "
                         f"shapes {d.shape} and {e.shape}")
    dtype = np.promote_types(np.promote_types(d.dtype, e.dtype), np.float32 if d.dtype == np.float32 else np.float64)
    n = d.shape[0]
    off = knp.diag(e.astype(dtype), 1) if n > 1 else knp.zeros((n, n), dtype)
    dense = knp.diag(d.astype(dtype)) + off + _swap_last(off)
    if select == "a":
        return np_decompositions.eigvalsh(dense)
    if select == "i":
        lo, hi = (int(i) for i in select_range)
        return np_decompositions.eigvalsh(dense)[lo:hi + 1]
    raise NotImplementedError(f"scipy.linalg.eigh_tridiagonal: select={select!r} (by value) gives a data-dependent "
                              "number of eigenvalues; use select='a' or 'i'")
