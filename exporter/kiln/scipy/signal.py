"""kiln.scipy.signal: scipy.signal's convolutions over kiln arrays (JAX's jax.scipy.signal).

convolve/correlate take arrays of any (equal) rank and compute directly, as one kiln.lax.conv_general_dilated
(method='fft' and 'auto' are accepted and give the same values); convolve2d/correlate2d add scipy's
boundary handling ('fill' with a fillvalue, 'wrap', 'symm'). The spectral analysis functions (stft, istft,
welch, csd) live in signal_spectral.
"""
from __future__ import annotations

import numpy as np

from .. import numpy as knp
from ..core import dtypes
from ..lax.conv import conv_general_dilated
from ..numpy._base import aval, convert, normalize_axes, promote
from .signal_spectral import csd, istft, stft, welch  # noqa: F401

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve", "detrend", "stft", "istft", "welch",
           "csd"]

_MODES = ("full", "same", "valid")
_METHODS = ("auto", "direct", "fft")
_BOUNDARIES = {"fill": "fill", "pad": "fill", "wrap": "wrap", "circular": "wrap", "symm": "symm",
               "symmetric": "symm"}


def _operands(where, in1, in2, mode, method=None):
    if mode not in _MODES:
        raise ValueError(f"{where}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    if method is not None and method not in _METHODS:
        raise ValueError(f"{where}: method must be 'auto', 'direct' or 'fft', got {method!r}")
    a, b = promote(knp.asarray(in1), knp.asarray(in2))
    if aval(a).ndim != aval(b).ndim:
        raise ValueError(f"{where}: in1 and in2 should have the same dimensionality, got {aval(a).ndim} and "
                         f"{aval(b).ndim}")
    return a, b


def _swap_needed(where, mode, s1, s2):
    """'valid' needs one input at least as large as the other in every axis; True when that one is in2."""
    if mode != "valid":
        return False
    if all(x >= y for x, y in zip(s1, s2)):
        return False
    if all(y >= x for x, y in zip(s1, s2)):
        return True
    raise ValueError(f"{where}: for 'valid' mode, one of in1 {tuple(s1)} and in2 {tuple(s2)} must be at least as "
                     "large as the other in every dimension")


def _full_convolution(a, b, padding):
    """The convolution of a by b with `padding` zeros (low, high) per axis, as one conv_general_dilated (which
    correlates: b is flipped)."""
    nd = aval(a).ndim
    if dtypes.is_bool(aval(a).dtype):  # scipy's bool result: any of the products (counted in int32)
        return knp.not_equal(_full_convolution(convert(a, np.int32), convert(b, np.int32), padding), 0)
    if nd == 0:
        return knp.multiply(a, b)
    kernel = knp.flip(b)
    lhs, rhs = a[None, None], kernel[None, None]
    out = conv_general_dilated(lhs, rhs, (1,) * nd, [tuple(p) for p in padding])
    return out[0, 0]


def _crop(full, mode, s1, s2):
    """The 'same' (centred, in1's shape) or 'valid' part of a full convolution, as scipy's _centred."""
    if mode == "full":
        return full
    shape = s1 if mode == "same" else tuple(abs(x - y) + 1 for x, y in zip(s1, s2))
    starts = [(f - s) // 2 for f, s in zip(aval(full).shape, shape)]
    return full[tuple(slice(st, st + s) for st, s in zip(starts, shape))]


def convolve(in1, in2, mode="full", method="auto"):
    """scipy.signal.convolve: the n-D convolution of in1 by in2 (same rank); mode 'full', 'same' (in1's shape,
    centred) or 'valid'."""
    a, b = _operands("convolve", in1, in2, mode, method)
    s1, s2 = aval(a).shape, aval(b).shape
    if _swap_needed("convolve", mode, s1, s2):
        a, b, s1, s2 = b, a, s2, s1
    full = _full_convolution(a, b, [(n - 1, n - 1) for n in s2])
    return _crop(full, mode, s1, s2)


def correlate(in1, in2, mode="full", method="auto"):
    """scipy.signal.correlate: sum_k in1[k + shift] in2[k], the convolution of in1 by in2 reversed (real
    inputs); 'valid' with in2 the larger gives scipy's reversed result."""
    a, b = _operands("correlate", in1, in2, mode, method)
    s1, s2 = aval(a).shape, aval(b).shape
    if _swap_needed("correlate", mode, s1, s2):
        return knp.flip(convolve(b, knp.flip(a), mode))
    return convolve(a, knp.flip(b), mode)


def _periodic_indices(n, pad, boundary):
    """Indices into an axis of length n extended by `pad` on both sides, wrapping or mirroring (scipy's 'symm':
    the edge sample repeated, as numpy.pad's 'symmetric')."""
    i = np.arange(-pad, n + pad)
    if boundary == "wrap":
        return i % n
    j = i % (2 * n)
    return np.where(j < n, j, 2 * n - 1 - j)


def _two_d(where, in1, in2, mode, boundary, fillvalue):
    a, b = _operands(where, in1, in2, mode)
    if aval(a).ndim != 2:
        raise ValueError(f"{where}: in1 and in2 must be 2-D arrays, got {aval(a).ndim}-D")
    if boundary not in _BOUNDARIES:
        raise ValueError(f"{where}: boundary must be 'fill', 'wrap' or 'symm', got {boundary!r}")
    if np.ndim(fillvalue) != 0:
        raise ValueError(f"{where}: fillvalue must be a scalar, got shape {np.shape(fillvalue)}")
    return a, b, _BOUNDARIES[boundary]


def _convolve2d(a, b, mode, boundary, fillvalue):
    s1, s2 = aval(a).shape, aval(b).shape
    pads = [n - 1 for n in s2]
    if mode == "valid" or (boundary == "fill" and fillvalue == 0):
        return convolve(a, b, mode)
    if boundary == "fill":
        fill = convert(knp.asarray(fillvalue), aval(a).dtype)
        extended = knp.pad(a, [(p, p) for p in pads], mode="constant", constant_values=fill)
    else:
        extended = a
        for axis, (n, p) in enumerate(zip(s1, pads)):
            extended = knp.take(extended, _periodic_indices(n, p, boundary), axis=axis)
    full = _full_convolution(extended, b, [(0, 0), (0, 0)])
    return _crop(full, mode, s1, s2)


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """scipy.signal.convolve2d: the 2-D convolution, in1 extended past its edges by fillvalue ('fill'),
    periodically ('wrap') or mirrored ('symm')."""
    a, b, boundary = _two_d("convolve2d", in1, in2, mode, boundary, fillvalue)
    if _swap_needed("convolve2d", mode, aval(a).shape, aval(b).shape):
        a, b = b, a
    return _convolve2d(a, b, mode, boundary, fillvalue)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    """scipy.signal.correlate2d: the 2-D cross-correlation with convolve2d's boundaries."""
    a, b, boundary = _two_d("correlate2d", in1, in2, mode, boundary, fillvalue)
    if _swap_needed("correlate2d", mode, aval(a).shape, aval(b).shape):
        return knp.flip(_convolve2d(b, knp.flip(a), mode, boundary, fillvalue))
    if mode == "same":  # scipy centres the window on in2's element (n // 2), not on its flip's
        s1, s2 = aval(a).shape, aval(b).shape
        full = _convolve2d(a, knp.flip(b), "full", boundary, fillvalue)
        return full[tuple(slice(n // 2, n // 2 + m) for m, n in zip(s1, s2))]
    return _convolve2d(a, knp.flip(b), mode, boundary, fillvalue)


def fftconvolve(in1, in2, mode="full", axes=None):
    """scipy.signal.fftconvolve: the values of convolve (kiln computes directly, so they are the exact
    convolution rather than an FFT's rounding). Convolving along some axes only (axes=) is not supported."""
    if axes is not None:
        raise NotImplementedError("fftconvolve: axes= is not supported; convolve along every axis (axes=None)")
    a, b = _operands("fftconvolve", in1, in2, mode)
    if not dtypes.is_float(aval(a).dtype):  # scipy's FFT gives floats for integer input
        a, b = convert(a, np.float64), convert(b, np.float64)
    return convolve(a, b, mode)


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=False):  # noqa: A002 - scipy's name
    """scipy.signal.detrend: data minus its mean (type='constant') or minus its least-squares line
    (type='linear') along axis. Breakpoints (bp) are not supported; overwrite_data is accepted and ignored."""
    if type not in ("linear", "l", "constant", "c"):
        raise ValueError(f"detrend: type must be 'linear' or 'constant', got {type!r}")
    if not (isinstance(bp, (int, np.integer)) and bp == 0):
        raise NotImplementedError("detrend: breakpoints (bp) are not supported; detrend each segment separately")
    x = knp.asarray(data)
    if not dtypes.is_float(aval(x).dtype):
        x = convert(x, np.float64)
    axis = normalize_axes(axis, aval(x).ndim, "detrend")[0]
    centred = knp.subtract(x, knp.mean(x, axis=axis, keepdims=True))
    if type in ("constant", "c"):
        return centred
    n = aval(x).shape[axis]
    t = np.arange(n, dtype=np.float64) - (n - 1) / 2.0
    t = t.reshape([n if i == axis else 1 for i in range(aval(x).ndim)]).astype(aval(x).dtype)
    denominator = float(np.sum(t.astype(np.float64) ** 2)) or 1.0
    slope = knp.divide(knp.sum(knp.multiply(centred, t), axis=axis, keepdims=True), denominator)
    return knp.subtract(centred, knp.multiply(slope, t))
