"""numpy's polynomial helpers on coefficient vectors (highest power first): poly, polyadd, polysub, polymul,
polyder, polyint, polydiv, polyfit; and the window functions bartlett, blackman, hamming, hanning, kaiser.

Lengths and orders are static; the coefficients may be traced. polydiv's remainder keeps its full length
when traced (numpy trims leading zeros, which makes its length depend on the values; eagerly kiln trims as
numpy does).
"""
from __future__ import annotations

import warnings

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer, current_graph_trace, is_eager
from ._base import asarray, aval, convert, promote
from .array_math import convolve, vander
from .creation import _weak
from .elementwise import add, multiply, sqrt, subtract, true_divide
from .linalg import inv, lstsq
from .products import matmul, outer
from .reductions import sum as sum_
from .shape import atleast_1d, concatenate, stack


def _coefficients(p, name):
    c = atleast_1d(asarray(p))
    if aval(c).ndim != 1:
        raise ValueError(f"{name}: the coefficients must be a 1-D sequence, got shape {aval(c).shape}")
    return c


def _aligned(a1, a2, name):
    x, y = _coefficients(a1, name), _coefficients(a2, name)
    x, y = promote(x, y)
    n, m = aval(x).shape[0], aval(y).shape[0]
    if n < m:
        x = concatenate([np.zeros(m - n, aval(x).dtype), x])
    elif m < n:
        y = concatenate([np.zeros(n - m, aval(y).dtype), y])
    return x, y


def polyadd(a1, a2):
    """numpy.polyadd: the sum of two polynomials (the shorter padded with leading zeros)."""
    return add(*_aligned(a1, a2, "polyadd"))


def polysub(a1, a2):
    """numpy.polysub: a1 - a2."""
    return subtract(*_aligned(a1, a2, "polysub"))


def polymul(a1, a2, *, trim_leading_zeros=False):
    """numpy.polymul: the product (a convolution of the coefficients); trim_leading_zeros=True (jax.numpy's)
    drops the operands' leading zeros first, so they must be concrete."""
    x, y = _coefficients(a1, "polymul"), _coefficients(a2, "polymul")
    if trim_leading_zeros:
        x, y = _trimmed(x, "polymul"), _trimmed(y, "polymul")
    return convolve(x, y)


def _trimmed(c, name):
    if isinstance(c, Tracer):
        raise TypeError(f"{name}: trim_leading_zeros=True needs concrete coefficients (the length depends on them)")
    return np.trim_zeros(np.asarray(c), "f") if np.any(np.asarray(c)) else np.asarray(c)[-1:]


def polyder(p, m=1):
    """numpy.polyder: the m-th derivative."""
    if int(m) < 0:
        raise ValueError("polyder: order of derivative must be positive (see polyint)")
    c = asarray(p)
    for _ in range(int(m)):
        n = aval(c).shape[0] - 1
        c = multiply(c[:-1], np.arange(n, 0, -1))
    return c


def polyint(p, m=1, k=None):
    """numpy.polyint: the m-th antiderivative, with integration constants k (a scalar or one per order)."""
    m = int(m)
    if m < 0:
        raise ValueError("polyint: order of integral must be positive (see polyder)")
    constants = np.zeros(m, float) if k is None else k
    constants = atleast_1d(asarray(constants))
    if aval(constants).shape[0] == 1 and m > 1:
        constants = multiply(constants[0], np.ones(m, float))
    if aval(constants).shape[0] < m:
        raise ValueError("polyint: k must be a scalar or a rank-1 array of length 1 or >m")
    c = asarray(p)
    for i in range(m):
        scaled = true_divide(c, np.arange(aval(c).shape[0], 0, -1))
        c = concatenate([scaled, convert(constants[i:i + 1], aval(scaled).dtype)
                         if dtypes.is_float(aval(scaled).dtype) else constants[i:i + 1]])
    return c


def poly(seq_of_zeros):
    """numpy.poly of a 1-D sequence of roots: the monic polynomial with those roots (float64 for integer
    roots, as numpy); the characteristic polynomial of a matrix needs its eigenvalues: not supported."""
    roots = atleast_1d(asarray(seq_of_zeros))
    if aval(roots).ndim != 1:
        raise ValueError("poly: only a 1-D sequence of roots is supported (a matrix's characteristic polynomial "
                         "needs its eigenvalues)")
    n = aval(roots).shape[0]
    if n == 0:
        return 1.0
    d = aval(roots).dtype if dtypes.is_float(aval(roots).dtype) else np.dtype(np.float64)
    roots = convert(roots, d)
    coefficients = np.ones((1,), d)
    for i in range(n):
        factor = concatenate([np.ones((1,), d), multiply(roots[i:i + 1], -1)])
        coefficients = convolve(coefficients, factor)
    return coefficients


def polydiv(u, v, *, trim_leading_zeros=None):
    """numpy.polydiv: (quotient, remainder) by long division, in floating point. The remainder's leading
    (near-)zeros are trimmed eagerly, as numpy does, and kept when traced (their number depends on the
    values); trim_leading_zeros=True or False (jax.numpy's keyword) decides it in both modes (True needs
    concrete operands)."""
    num = _coefficients(u, "polydiv")
    den = _coefficients(v, "polydiv")
    work = aval(add(num[:1], den[:1])).dtype
    work = work if dtypes.is_float(work) else np.dtype(np.float64)
    num, den = convert(num, work), convert(den, work)
    m, n = aval(num).shape[0] - 1, aval(den).shape[0] - 1
    scale = true_divide(1.0, den[0])
    rest = [num[i] for i in range(m + 1)]
    quotient = []
    for k in range(max(m - n + 1, 0)):
        d = multiply(scale, rest[k])
        quotient.append(d)
        for j in range(n + 1):
            rest[k + j] = subtract(rest[k + j], multiply(d, den[j]))
    q = stack(quotient) if quotient else np.zeros((1,), work)
    remainder = stack(rest)
    trim = current_graph_trace() is None if trim_leading_zeros is None else trim_leading_zeros
    if trim:
        if isinstance(remainder, Tracer):
            raise TypeError("polydiv: trim_leading_zeros=True needs concrete operands (the length depends on them)")
        r = np.asarray(remainder)
        while np.allclose(r[0], 0, rtol=1e-14) and r.shape[-1] > 1:
            r = r[1:]
        remainder = r
    return q, remainder


def _window(values, name):
    """A window's numpy values: a constant, weakly typed float64 when traced (as knp.linspace)."""
    out = np.asarray(values, np.float64)
    return _weak(out)


def _symmetric_positions(M):
    return np.arange(1 - M, M, 2, dtype=np.float64)


def _static_length(M, name):
    if isinstance(M, Tracer):
        raise TypeError(f"{name}: the window length M must be a Python int (the result's length)")
    return int(M)


def bartlett(M):
    """numpy.bartlett: the triangular window (float64)."""
    M = _static_length(M, "bartlett")
    if M < 1:
        return _window(np.zeros(0), "bartlett")
    if M == 1:
        return _window(np.ones(1), "bartlett")
    n = _symmetric_positions(M)
    return _window(np.where(n <= 0, 1 + n / (M - 1), 1 - n / (M - 1)), "bartlett")


def _cosine_window(M, name, terms):
    M = _static_length(M, name)
    if M < 1:
        return _window(np.zeros(0), name)
    if M == 1:
        return _window(np.ones(1), name)
    n = _symmetric_positions(M)
    return _window(sum(c * np.cos(k * np.pi * n / (M - 1)) for k, c in enumerate(terms)), name)


def blackman(M):
    """numpy.blackman: 0.42 + 0.5 cos(pi n/(M-1)) + 0.08 cos(2 pi n/(M-1)) (float64)."""
    return _cosine_window(M, "blackman", (0.42, 0.5, 0.08))


def hamming(M):
    """numpy.hamming: 0.54 + 0.46 cos(pi n/(M-1)) (float64)."""
    return _cosine_window(M, "hamming", (0.54, 0.46))


def hanning(M):
    """numpy.hanning: 0.5 + 0.5 cos(pi n/(M-1)) (float64)."""
    return _cosine_window(M, "hanning", (0.5, 0.5))


def kaiser(M, beta):
    """numpy.kaiser: i0(beta sqrt(1 - ((n - alpha)/alpha)**2)) / i0(beta), alpha = (M-1)/2 (float64); beta
    may be traced."""
    from .more_math import i0

    M = _static_length(M, "kaiser")
    if M == 1:
        return _window(np.ones(1), "kaiser")
    if M < 1:
        return _window(np.zeros(0), "kaiser")
    alpha = (M - 1) / 2.0
    inside = np.sqrt(np.clip(1 - ((np.arange(M) - alpha) / alpha) ** 2, 0, None))
    if not isinstance(beta, Tracer):
        return _window(np.i0(float(beta) * inside) / np.i0(float(beta)), "kaiser")
    b = convert(beta, np.float64)
    return true_divide(i0(multiply(b, inside)), i0(b))


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """numpy.polyfit: the least-squares polynomial of degree deg (static) through the points (x, y), y 1-D or
    one column per data set, highest power first, with numpy's steps: the Vandermonde matrix (weighted rows
    with w), its columns scaled to unit norm, kiln.numpy.linalg.lstsq with rcond (default len(x) * eps).
    full=True also returns (residuals, rank, singular values, rcond); cov=True the coefficients' covariance
    (scaled by residuals / (len(x) - deg - 1), or not with cov='unscaled'). Eagerly a rank-deficient fit
    warns as numpy does; residuals follow lstsq's rule (always computed when traced)."""
    order = int(deg) + 1
    if order < 1:
        raise ValueError("polyfit: expected deg >= 0")
    x, y = add(asarray(x), 0.0), add(asarray(y), 0.0)
    if aval(x).ndim != 1:
        raise TypeError("polyfit: expected 1D vector for x")
    if aval(x).shape[0] == 0:
        raise TypeError("polyfit: expected non-empty vector for x")
    if aval(y).ndim not in (1, 2):
        raise TypeError("polyfit: expected 1D or 2D array for y")
    n = aval(x).shape[0]
    if aval(y).shape[0] != n:
        raise TypeError("polyfit: expected x and y to have same length")
    if rcond is None:
        rcond = n * float(np.finfo(aval(x).dtype).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = add(asarray(w), 0.0)
        if aval(w).ndim != 1:
            raise TypeError("polyfit: expected a 1-d array for weights")
        if aval(w).shape[0] != n:
            raise TypeError("polyfit: expected w and y to have the same length")
        lhs = multiply(lhs, w[:, None])
        rhs = multiply(rhs, w[:, None] if aval(rhs).ndim == 2 else w)
    scale = sqrt(sum_(multiply(lhs, lhs), axis=0))
    lhs = true_divide(lhs, scale)
    c, residuals, rank, s = lstsq(lhs, rhs, rcond)
    c = true_divide(c, scale[:, None]) if aval(c).ndim == 2 else true_divide(c, scale)
    if is_eager() and not full and int(rank) != order:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning, stacklevel=2)
    if full:
        return c, residuals, rank, s, rcond
    if not cov:
        return c
    covariance = true_divide(inv(matmul(lhs.T, lhs)), outer(scale, scale))
    if cov != "unscaled":
        if n <= order:
            raise ValueError("polyfit: the number of data points must exceed order to scale the covariance matrix")
        covariance = multiply(covariance, true_divide(residuals, n - order)) if aval(y).ndim == 1 else \
            multiply(covariance[:, :, None], true_divide(residuals, n - order))
    elif aval(y).ndim == 2:
        covariance = covariance[:, :, None]
    return c, covariance


__all__ = ["polyfit", "poly", "polyadd", "polysub", "polymul", "polyder", "polyint", "polydiv", "bartlett", "blackman",
           "hamming", "hanning", "kaiser"]
