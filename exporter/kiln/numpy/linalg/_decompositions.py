"""numpy.linalg on the orthogonal and spectral factorizations: qr, svd, svdvals, eigh, eigvalsh, pinv, lstsq,
matrix_rank, cond.

numpy's semantics: the last two axes are the matrix and leading axes a batch; float32 stays float32,
integers and bool compute in float64, float16 is refused as numpy refuses it. Results are numpy's
namedtuples (QRResult, SVDResult, EighResult). Eigenvalues ascend, singular values descend; the signs of
eigen- and singular vectors are the Jacobi iteration's and may differ from LAPACK's (each column is
determined up to sign; qr's signs do match LAPACK's). Gradients come from the factorizations' rules in
kiln.lax.linalg (distinct eigen/singular values, as in JAX). eig and eigvals are not provided: their
results are complex and kiln has no complex dtypes.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...core import dtypes
from ...core.trace import is_eager
from ...lax import _linalg_spectral as lax_spectral
from ...transforms.custom import custom_jvp
from .._base import asarray, aval, convert
from ..elementwise import abs as abs_, sqrt, where
from ..indexing import argsort, take_along_axis
from ..math import isnan, sign
from ..products import matmul
from ..reductions import any as any_, max as max_, min as min_, sum as sum_
from ..shape import flip, swapaxes
from . import _solve

__all__ = ["qr", "svd", "svdvals", "eigh", "eigvalsh", "pinv", "lstsq", "matrix_rank", "cond",
           "QRResult", "SVDResult", "EighResult"]

LinAlgError = np.linalg.LinAlgError


class QRResult(NamedTuple):
    """numpy.linalg.qr's result: the orthonormal Q and the upper-triangular R."""

    Q: object
    R: object


class SVDResult(NamedTuple):
    """numpy.linalg.svd's result: a = U @ diag(S) @ Vh, S descending."""

    U: object
    S: object
    Vh: object


class EighResult(NamedTuple):
    """numpy.linalg.eigh's result: ascending eigenvalues and the eigenvectors as columns."""

    eigenvalues: object
    eigenvectors: object


def _float_operand(fn: str, x, name: str = "a"):
    """x as an array of numpy.linalg's computing dtype: float32/float64 kept, integers and bool float64."""
    x = asarray(x)
    dtype = aval(x).dtype
    if dtype in (np.float32, np.float64):
        return x
    if dtype == np.bool_ or dtypes.is_int(dtype):
        return convert(x, np.float64)
    raise TypeError(f"{fn}: argument {name} has dtype {dtype}, which linalg does not support (numpy's rule); "
                    "convert it to float32 or float64")


def _matrices(fn: str, a, name: str = "a", *, square: bool = False):
    x = _float_operand(fn, a, name)
    shape = aval(x).shape
    if len(shape) < 2:
        raise LinAlgError(f"{fn}: {len(shape)}-dimensional array given for argument {name}. Array must be at "
                          "least two-dimensional")
    if square and shape[-1] != shape[-2]:
        raise LinAlgError(f"{fn}: last 2 dimensions of argument {name} must be square, got shape {shape}")
    return x


def _is_empty(x) -> bool:
    return 0 in aval(x).shape[-2:]


def _eps(x):
    return float(np.finfo(aval(x).dtype).eps)


def qr(a, mode: str = "reduced"):
    """numpy.linalg.qr: mode 'reduced' (Q (..., m, k), R (..., k, n)), 'complete' (Q (..., m, m),
    R (..., m, n)) or 'r' (R (..., k, n) alone), k = min(m, n). Householder reflections with LAPACK's
    signs. 'raw' (LAPACK's packed reflectors) is not supported."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"qr: unrecognized mode {mode!r}; use 'reduced', 'complete' or 'r'")
    if mode == "raw":
        raise NotImplementedError("qr: mode='raw' (LAPACK's packed Householder reflectors) is not supported by kiln; "
                                  "use 'reduced', 'complete' or 'r'")
    x = _matrices("qr", a)
    q, r = lax_spectral.qr(x, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def _hermitian_svd(x, compute_uv: bool):
    """numpy's svd(hermitian=True): from eigh of the lower triangle, s = |w| in descending order and
    vh = (u * sign(w))^T."""
    v, w = lax_spectral.eigh(x, symmetrize_input=False)
    s = abs_(w)
    order = flip(argsort(s, axis=-1), axis=-1)
    s = take_along_axis(s, order, axis=-1)
    if not compute_uv:
        return s
    signs = take_along_axis(sign(w), order, axis=-1)
    u = take_along_axis(v, order[..., None, :], axis=-1)
    return SVDResult(u, s, swapaxes(u * signs[..., None, :], -1, -2))


def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """numpy.linalg.svd: SVDResult(U, S, Vh) with a = U @ diag(S) @ Vh and S descending, or S alone
    without compute_uv. hermitian=True reads a's lower triangle as a symmetric matrix (through eigh)."""
    x = _matrices("svd", a)
    if hermitian:
        if aval(x).shape[-1] != aval(x).shape[-2]:
            raise LinAlgError(f"svd: hermitian=True needs square matrices, argument a has shape {aval(x).shape}")
        return _hermitian_svd(x, compute_uv)
    if not compute_uv:
        return lax_spectral.svd(x, compute_uv=False)
    u, s, vh = lax_spectral.svd(x, full_matrices=bool(full_matrices))
    return SVDResult(u, s, vh)


def svdvals(x, /):
    """numpy.linalg.svdvals: the singular values (..., min(m, n)) in descending order."""
    return lax_spectral.svd(_matrices("svdvals", x, "x"), compute_uv=False)


def _uplo(fn: str, UPLO) -> bool:
    if UPLO is None:  # JAX's default
        return True
    if UPLO not in ("L", "U"):
        raise ValueError(f"{fn}: UPLO argument must be 'L' or 'U', got {UPLO!r}")
    return UPLO == "L"


def eigh(a, UPLO: str = "L", *, symmetrize_input: bool = False):
    """numpy.linalg.eigh: EighResult(eigenvalues ascending, eigenvectors as columns) of the symmetric
    matrices read from a's lower (UPLO='L') or upper triangle. symmetrize_input=True (JAX's keyword, and
    JAX's default) uses (a + a^T)/2 instead."""
    lower = _uplo("eigh", UPLO)
    x = _matrices("eigh", a, square=True)
    v, w = lax_spectral.eigh(x, lower=lower, symmetrize_input=bool(symmetrize_input))
    return EighResult(w, v)


def eigvalsh(a, UPLO: str = "L", *, symmetrize_input: bool = False):
    """numpy.linalg.eigvalsh: the ascending eigenvalues of the symmetric matrices read from one triangle
    (or of (a + a^T)/2 with JAX's symmetrize_input=True)."""
    lower = _uplo("eigvalsh", UPLO)
    x = _matrices("eigvalsh", a, square=True)
    return lax_spectral.eigh(x, lower=lower, symmetrize_input=bool(symmetrize_input))[1]


class _Unset:
    def __repr__(self):
        return "<no value>"


_UNSET = _Unset()


def _reciprocal_above(s, cutoff):
    """1/s where s > cutoff, else 0 (numpy's pinv and lstsq discard the small singular values)."""
    large = s > cutoff
    return where(large, 1 / where(large, s, 1), 0)


def pinv(a, rcond=None, hermitian: bool = False, *, rtol=_UNSET):
    """numpy.linalg.pinv: the Moore-Penrose pseudo-inverse from the SVD, singular values at or below
    rcond * max(s) discarded. numpy 2's defaults: rcond=1e-15 unless rtol is given; rtol=None means
    max(m, n) * eps."""
    if rcond is None:
        if rtol is _UNSET:
            rcond = 1e-15
        elif rtol is None:
            rcond = None
        else:
            rcond = rtol
    elif rtol is not _UNSET:
        raise ValueError("pinv: `rtol` and `rcond` can't be both set")
    x = _matrices("pinv", a)
    if _is_empty(x):
        shape = aval(x).shape
        return convert(np.zeros(shape[:-2] + (shape[-1], shape[-2])), aval(x).dtype)
    if rcond is None:
        rcond = max(aval(x).shape[-2:]) * _eps(x)
    return _PSEUDO_INVERSE[bool(hermitian)](x, convert(asarray(rcond), aval(x).dtype))


def _from_lower_triangle(x):
    """The symmetric matrices that x's lower triangles define."""
    n = aval(x).shape[-1]
    return where(np.tril(np.ones((n, n), bool)), x, 0) + swapaxes(where(np.tril(np.ones((n, n), bool), -1), x, 0), -1, -2)


def _pseudo_inverse(hermitian: bool):
    """pinv(x, rcond) with JAX's JVP (Golub and Pereyra), which needs no singular-value gaps, so repeated
    singular values (an identity, an orthogonal matrix) have finite derivatives, unlike the SVD's rule:
    dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P (the rank held fixed; rcond's tangent is
    not used). With hermitian, A and dA are the symmetric matrices read from the lower triangles."""

    @custom_jvp
    def pseudo_inverse(x, rcond):
        u, s, vh = svd(x, full_matrices=False, hermitian=hermitian)
        cutoff = rcond[..., None] * max_(s, axis=-1, keepdims=True)
        return matmul(swapaxes(vh, -1, -2), _reciprocal_above(s, cutoff)[..., None] * swapaxes(u, -1, -2))

    @pseudo_inverse.defjvp
    def _jvp(primals, tangents):
        (x, rcond), (dx, _) = primals, tangents
        p = pseudo_inverse(x, rcond)
        if hermitian:  # the matrix computed with is the one read from x's lower triangle
            x, dx = _from_lower_triangle(x), _from_lower_triangle(dx)
        m, n = aval(x).shape[-2:]
        dx_t, p_t = swapaxes(dx, -1, -2), swapaxes(p, -1, -2)
        dp = -matmul(matmul(p, dx), p)
        dp = dp + matmul(matmul(matmul(p, p_t), dx_t), np.eye(m, dtype=aval(x).dtype) - matmul(x, p))
        dp = dp + matmul(matmul(np.eye(n, dtype=aval(x).dtype) - matmul(p, x), dx_t), matmul(p_t, p))
        return p, dp

    return pseudo_inverse


_PSEUDO_INVERSE = {False: _pseudo_inverse(False), True: _pseudo_inverse(True)}


def lstsq(a, b, rcond=None):
    """numpy.linalg.lstsq: (x, residuals, rank, s) minimizing |b - a x| for a 2-D a (m, n) and b (m,) or
    (m, k), through the SVD: singular values at or below rcond * s[0] count as zero (rcond None:
    max(m, n) * eps; negative: eps). residuals are the squared column norms of b - a x: eagerly numpy's
    rule (empty unless rank == n < m); traced, the rank is not known, so they are always computed, as
    JAX does. x is pinv(a) @ b, so that its derivative is pinv's (finite for repeated singular values)."""
    x = _float_operand("lstsq", a, "a")
    y = _float_operand("lstsq", b, "b")
    if aval(x).ndim != 2:
        raise LinAlgError(f"lstsq: {aval(x).ndim}-dimensional array given for argument a. Array must be "
                          "two-dimensional")
    if aval(y).ndim not in (1, 2):
        raise LinAlgError(f"lstsq: {aval(y).ndim}-dimensional array given for argument b. Array must be one or "
                          "two-dimensional")
    dtype = np.promote_types(aval(x).dtype, aval(y).dtype)
    x, y = convert(x, dtype), convert(y, dtype)
    m, n = aval(x).shape
    vector = aval(y).ndim == 1
    y2 = y[:, None] if vector else y
    if aval(y2).shape[0] != m:
        raise LinAlgError(f"lstsq: incompatible dimensions: a has shape {aval(x).shape}, b has shape {aval(y).shape}")
    if m == 0 or n == 0:
        raise LinAlgError(f"lstsq: argument a of shape {aval(x).shape} is empty, which kiln does not factorize")
    eps = float(np.finfo(dtype).eps)
    if rcond is None:
        rcond = eps * max(m, n)
    rcond = where(asarray(rcond) < 0, eps, rcond)
    rcond = convert(asarray(rcond), dtype)
    s = lax_spectral.svd(x, compute_uv=False)
    rank = convert(sum_(s > rcond * s[..., :1]), np.int32)
    solution = matmul(_PSEUDO_INVERSE[False](x, rcond), y2)  # pinv's cutoff rcond * max(s) is numpy's
    residual = y2 - matmul(x, solution)
    residuals = sum_(residual * residual, axis=0)
    if is_eager() and (int(rank) != n or m <= n):
        residuals = np.zeros((0,), dtype)
    return (solution[:, 0] if vector else solution), residuals, rank, s


def matrix_rank(A, tol=None, hermitian: bool = False, *, rtol=None):
    """numpy.linalg.matrix_rank: the number of singular values above tol, or above
    rtol * max(s) (rtol default max(m, n) * eps); a 0-D or 1-D A has rank 1 unless all zero."""
    x = asarray(A)
    if aval(x).ndim < 2:
        nonzero = any_(x != 0)
        return int(nonzero) if is_eager() else convert(nonzero, np.int64)
    x = _matrices("matrix_rank", x, "A")
    if _is_empty(x):
        return convert(np.zeros(aval(x).shape[:-2], np.int64), np.int64)
    s = svd(x, compute_uv=False, hermitian=hermitian)
    if tol is None:
        if rtol is None:
            rtol = max(aval(x).shape[-2:]) * _eps(s)
        limit = max_(s, axis=-1, keepdims=True) * convert(asarray(rtol), aval(s).dtype)[..., None]
    else:
        limit = convert(asarray(tol), aval(s).dtype)[..., None]
    return sum_(s > limit, axis=-1)


_NORMS = {"fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf}


def _matrix_norm(x, p):
    """The matrix norms cond uses besides 2/-2: Frobenius, max/min column (1/-1) or row (inf/-inf) sums."""
    if p == "fro":
        return sqrt(sum_(x * x, axis=(-2, -1)))
    if p == "nuc":
        return sum_(svdvals(x), axis=-1)
    sums = sum_(abs_(x), axis=-2 if p in (1, -1) else -1)
    return max_(sums, axis=-1) if p > 0 else min_(sums, axis=-1)


def cond(x, p=None):
    """numpy.linalg.cond: the condition number, s_max / s_min for p None or 2 (s_min / s_max for -2),
    otherwise norm(x, p) * norm(inv(x), p) for p 'fro', 'nuc', 1, -1, inf, -inf. A NaN from a singular
    matrix becomes inf (unless x holds NaN), as in numpy."""
    if p not in _NORMS and p is not None:
        raise ValueError(f"cond: invalid norm order {p!r}; use None, 'fro', 'nuc', 1, -1, 2, -2, inf or -inf")
    a = _matrices("cond", x, "x", square=p not in (None, 2, -2))
    if _is_empty(a):
        raise LinAlgError(f"cond: not defined on empty arrays (argument x has shape {aval(a).shape})")
    if p in (None, 2, -2):
        s = svdvals(a)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    else:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = _matrix_norm(a, p) * _matrix_norm(_solve.inv(a), p)
    return where(isnan(r) & ~any_(isnan(a), axis=(-2, -1)), np.inf, r)
