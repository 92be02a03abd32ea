"""kiln.scipy.fft: scipy.fft's discrete cosine transforms dct, idct, dctn, idctn (JAX's jax.scipy.fft), of
types 1 to 4 (JAX has type 2) with scipy's norms "backward" (None), "ortho" and "forward".

Each transform is one complex FFT (kiln.numpy.fft) of length 2N (type 1: 2N - 2) with twiddles:
  type 2: y_k = 2 Re(e^{-iπk/2N} FFT_2N(x)_k)
  type 3: y_k = Re(2N IFFT_2N(w_j x_j e^{iπj/2N})_k), w_0 = 1, w_j = 2
  type 1: y_k = Re(FFT(x_0 .. x_{N-1}, x_{N-2} .. x_1)_k)
  type 4: y_k = 2 Re(e^{-iπ(2k+1)/4N} FFT_2N(x_j e^{-iπj/2N})_k)
Complex inputs transform their real and imaginary parts. Integer and bool inputs compute in float64,
float16/bfloat16 in float32 (numpy.fft's dtypes).
"""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as knp
from ..core import dtypes
from ..numpy import fft as knp_fft
from ..numpy._base import aval
from ..numpy.fft import _axis, _check_norm, _resize, _shape_and_axes

__all__ = ["dct", "idct", "dctn", "idctn"]

_TYPES = (1, 2, 3, 4)
_INVERSE_TYPE = {1: 1, 2: 3, 3: 2, 4: 4}


def _real_parts(x, where: str, fn):
    """fn applied to x's real and imaginary parts for complex x, to x in its float dtype otherwise."""
    x = knp.asarray(x)
    d = aval(x).dtype
    if dtypes.is_complex(d):
        return fn(knp.real(x)) + 1j * fn(knp.imag(x)).astype(d)
    target = dtypes.real_dtype(knp_fft._complex_dtype(d))
    return fn(x if d == target else x.astype(target))


def _twiddle(n: int, scale: float, offset: float, dtype):
    """e^{iπ scale (k + offset)} for k < n, as a constant of the complex dtype."""
    k = np.arange(n, dtype=np.float64)
    return np.exp(1j * math.pi * scale * (k + offset)).astype(dtype)


def _unnormalized_last(x, kind: int):
    """The scipy 'backward' (unnormalized) DCT of kind along x's last axis (a real float array)."""
    n = aval(x).shape[-1]
    complex_dtype = knp_fft._complex_dtype(aval(x).dtype)
    real = aval(x).dtype
    if kind == 1:
        if n < 2:
            raise ValueError(f"dct: the type 1 transform needs at least 2 points along the axis; got {n}")
        even = knp.concatenate([x, knp.flip(x[..., 1:n - 1], axis=-1)], axis=-1)
        return knp.real(knp_fft.fft(even, axis=-1))[..., :n].astype(real)
    if kind == 2:
        spectrum = knp_fft.fft(x, n=2 * n, axis=-1)[..., :n]
        return (2 * knp.real(spectrum * _twiddle(n, -1 / (2 * n), 0.0, complex_dtype))).astype(real)
    if kind == 3:
        weights = np.full(n, 2.0)
        weights[0] = 1.0
        z = x.astype(complex_dtype) * (weights * _twiddle(n, 1 / (2 * n), 0.0, np.complex128)).astype(complex_dtype)
        return (2 * n * knp.real(knp_fft.ifft(z, n=2 * n, axis=-1)[..., :n])).astype(real)
    z = x.astype(complex_dtype) * _twiddle(n, -1 / (2 * n), 0.0, complex_dtype)
    spectrum = knp_fft.fft(z, n=2 * n, axis=-1)[..., :n]
    return (2 * knp.real(spectrum * _twiddle(n, -1 / (2 * n), 0.5, complex_dtype))).astype(real)


def _edge_scale(x, first: float, last: float | None = None):
    """x with its first (and last) element along the last axis multiplied by the given factors."""
    n = aval(x).shape[-1]
    factors = np.ones(n)
    factors[0] = first
    if last is not None:
        factors[-1] = last
    return x * factors.astype(aval(x).dtype)


def _dct_last(x, kind: int, norm):
    """scipy.fft.dct of kind along the last axis with norm."""
    n = aval(x).shape[-1]
    real = aval(x).dtype
    if norm == "ortho":
        if kind == 1:
            y = _unnormalized_last(_edge_scale(x, math.sqrt(2), math.sqrt(2)), 1)
            return _edge_scale(y, 1 / math.sqrt(2), 1 / math.sqrt(2)) * np.asarray(1 / math.sqrt(2 * (n - 1)), real)
        if kind == 2:
            return _edge_scale(_unnormalized_last(x, 2), 1 / math.sqrt(2)) * np.asarray(1 / math.sqrt(2 * n), real)
        if kind == 3:
            return _unnormalized_last(_edge_scale(x, math.sqrt(2)), 3) * np.asarray(1 / math.sqrt(2 * n), real)
        return _unnormalized_last(x, 4) * np.asarray(1 / math.sqrt(2 * n), real)
    y = _unnormalized_last(x, kind)
    if norm == "forward":
        return y * np.asarray(1 / (2 * (n - 1) if kind == 1 else 2 * n), real)
    return y


def _along(x, axis: int, n, fn, where: str):
    axis = _axis(axis, aval(x).ndim)
    if n is not None:
        if int(n) < 1:
            raise ValueError(f"{where}: invalid number of data points ({n}) specified")
        x = _resize(x, int(n), axis)
    return knp.moveaxis(fn(knp.moveaxis(x, axis, -1)), -1, axis)


def _check(where: str, type, norm):  # noqa: A002 - scipy's name
    if type not in _TYPES:
        raise ValueError(f"{where}: type must be 1, 2, 3 or 4; got {type!r}")
    _check_norm(norm)


def _inverse_norm(norm):
    return {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}[norm]


def dct(x, type=2, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, orthogonalize=None):  # noqa: A002
    """scipy.fft.dct: the discrete cosine transform of x along axis, truncated or zero-padded to n first."""
    _check("dct", type, norm)
    _no_orthogonalize("dct", orthogonalize, type, norm)
    return _real_parts(x, "dct", lambda v: _along(v, axis, n, lambda u: _dct_last(u, type, norm), "dct"))


def idct(x, type=2, n=None, axis=-1, norm=None, overwrite_x=False, workers=None, orthogonalize=None):  # noqa: A002
    """scipy.fft.idct: the inverse of dct of the same type and norm (a DCT of the inverse type)."""
    _check("idct", type, norm)
    _no_orthogonalize("idct", orthogonalize, type, norm)
    kind, inverse = _INVERSE_TYPE[type], _inverse_norm(norm)
    return _real_parts(x, "idct", lambda v: _along(v, axis, n, lambda u: _dct_last(u, kind, inverse), "idct"))


def _transform_n(x, type, s, axes, norm, where: str, inverse: bool):  # noqa: A002
    _check(where, type, norm)
    kind, used_norm = (_INVERSE_TYPE[type], _inverse_norm(norm)) if inverse else (type, norm)

    def over_axes(v):
        sizes, ax = _shape_and_axes(v, s, axes, where)
        for size, axis in zip(sizes, ax):
            v = _along(v, axis, size, lambda u: _dct_last(u, kind, used_norm), where)
        return v

    return _real_parts(x, where, over_axes)


def dctn(x, type=2, s=None, axes=None, norm=None, overwrite_x=False, workers=None, orthogonalize=None):  # noqa: A002
    """scipy.fft.dctn: dct over axes (all by default; the last len(s) when only s is given)."""
    _no_orthogonalize("dctn", orthogonalize, type, norm)
    return _transform_n(x, type, s, axes, norm, "dctn", inverse=False)


def idctn(x, type=2, s=None, axes=None, norm=None, overwrite_x=False, workers=None, orthogonalize=None):  # noqa: A002
    """scipy.fft.idctn: idct over axes."""
    _no_orthogonalize("idctn", orthogonalize, type, norm)
    return _transform_n(x, type, s, axes, norm, "idctn", inverse=True)


def _no_orthogonalize(where: str, orthogonalize, type, norm):  # noqa: A002
    """scipy's orthogonalize= defaults to (norm == 'ortho'); only that default is computed."""
    if orthogonalize is not None and bool(orthogonalize) != (norm == "ortho") and type in (1, 2, 3):
        raise NotImplementedError(f"{where}: orthogonalize={orthogonalize!r} with norm={norm!r} is not supported; "
                                  "kiln computes scipy's default (orthogonal exactly when norm='ortho')")
