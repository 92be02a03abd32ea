"""kiln.numpy.fft: numpy.fft's functions with numpy's n=, s=, axis=/axes= and norm= semantics.

Every transform is kiln.lax.fft.dft_last (a composition of kiln primitives on complex arrays: direct DFT
products, the four-step Cooley-Tukey split, Bluestein for large primes; the module says which when) along
the transformed axis, on complex64 for float16/bfloat16/float32/complex64 inputs and complex128 for the rest
(numpy 2's dtypes). Accuracy: docs/numpy.md, "kiln.numpy.fft".
"""
from __future__ import annotations

import math

import numpy as np

from ..core import dtypes
from ..core.array import as_array
from ..lax import complex_prims
from ..lax.fft import dft_last as _dft_last
from ._base import asarray, aval
from .elementwise import multiply
from .shape import concatenate, moveaxis, pad, roll

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

# ---- numpy's interface ----------------------------------------------------------------------------------

_NORMS = (None, "backward", "ortho", "forward")


def _check_norm(norm):
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward","ortho" or "forward".')


def _scale(x, n: int, norm, inverse: bool):
    """numpy's normalization: backward scales the inverse by 1/n, forward the forward transform, ortho both
    by 1/sqrt(n)."""
    if norm == "ortho":
        factor = 1 / math.sqrt(n)
    elif (norm in (None, "backward")) == inverse:
        factor = 1 / n
    else:
        return x
    return multiply(x, np.asarray(factor, dtypes.real_dtype(aval(x).dtype)))


def _complex_dtype(dtype) -> np.dtype:
    d = np.dtype(dtype)
    if dtypes.is_complex(d):
        return d
    return np.dtype(np.complex64) if dtypes.is_float(d) and d.itemsize <= 4 else np.dtype(np.complex128)


def _as_complex(x):
    x = asarray(x)
    target = _complex_dtype(aval(x).dtype)
    if aval(x).dtype == target:
        return x
    if dtypes.is_float(aval(x).dtype) and np.dtype(aval(x).dtype) != dtypes.real_dtype(target):
        x = x.astype(dtypes.real_dtype(target))
    return x.astype(target)


def _real_input(x, where: str):
    x = asarray(x)
    d = aval(x).dtype
    if dtypes.is_complex(d):
        raise TypeError(f"{where}: the input must be real, got {np.dtype(d).name} (use fft for complex input)")
    target = dtypes.real_dtype(_complex_dtype(d))
    return x if aval(x).dtype == target else x.astype(target)


def _axis(axis, ndim: int) -> int:
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def _resize(x, n: int, axis: int):
    """x truncated or zero-padded to length n along axis."""
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    have = aval(x).shape[axis]
    if have == n:
        return x
    if have > n:
        index = [slice(None)] * aval(x).ndim
        index[axis] = slice(0, n)
        return x[tuple(index)]
    widths = [(0, 0)] * aval(x).ndim
    widths[axis] = (0, n - have)
    return pad(x, widths)


def _c2c(x, n, axis, norm, inverse: bool):
    _check_norm(norm)
    x = _as_complex(x)
    axis = _axis(axis, aval(x).ndim)
    n = aval(x).shape[axis] if n is None else int(n)
    x = _resize(x, n, axis)
    out = moveaxis(_dft_last(moveaxis(x, axis, -1), 1 if inverse else -1), -1, axis)
    return _scale(out, n, norm, inverse)


def fft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.fft: the DFT along axis, of the input truncated or zero-padded to n."""
    _no_out(out)
    return _c2c(a, n, axis, norm, inverse=False)


def ifft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.ifft: the inverse DFT along axis."""
    _no_out(out)
    return _c2c(a, n, axis, norm, inverse=True)


def rfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.rfft: the n//2 + 1 non-negative frequencies of a real input's DFT."""
    _no_out(out)
    x = _real_input(a, "rfft")
    axis = _axis(axis, aval(x).ndim)
    n = aval(x).shape[axis] if n is None else int(n)
    full = _c2c(_resize(x, n, axis), None, axis, norm, inverse=False)
    index = [slice(None)] * aval(full).ndim
    index[axis] = slice(0, n // 2 + 1)
    return full[tuple(index)]


def irfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.irfft: the real signal of length n (default 2 (m - 1)) whose rfft is a; the imaginary parts
    of the zero and (even n) Nyquist terms are ignored, as in numpy."""
    _no_out(out)
    _check_norm(norm)
    x = _as_complex(a)
    axis = _axis(axis, aval(x).ndim)
    m = aval(x).shape[axis]
    n = 2 * (m - 1) if n is None else int(n)
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    half = moveaxis(_resize(x, n // 2 + 1, axis), axis, -1)
    mirrored = complex_prims.conj(half[..., 1:(n + 1) // 2][..., ::-1])
    spectrum = concatenate([half, mirrored], axis=-1) if (n + 1) // 2 > 1 else half[..., :n]
    signal = complex_prims.real(_dft_last(spectrum, 1))
    return moveaxis(_scale(signal, n, norm, inverse=True), -1, axis)


def _swap(norm):
    return {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}[norm]


def hfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.hfft: the real spectrum of a Hermitian-symmetric signal given by its first half."""
    _no_out(out)
    _check_norm(norm)
    x = _as_complex(a)
    return irfft(complex_prims.conj(x), n, axis, _swap(norm))


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy.fft.ihfft: the inverse of hfft, for a real input."""
    _no_out(out)
    _check_norm(norm)
    return complex_prims.conj(rfft(a, n, axis, _swap(norm)))


def _shape_and_axes(x, s, axes, where: str):
    ndim = aval(x).ndim
    if axes is None:
        axes = list(range(ndim)) if s is None else list(range(ndim - len(s), ndim))
    else:
        axes = [_axis(a, ndim) for a in (axes if isinstance(axes, (tuple, list)) else (axes,))]
    if s is None:
        s = [aval(x).shape[a] for a in axes]
    elif len(s) != len(axes):
        raise ValueError(f"{where}: shape and axes have different lengths ({len(s)} and {len(axes)})")
    return [int(v) for v in s], axes


def _c2c_n(a, s, axes, norm, inverse: bool, where: str):
    _check_norm(norm)
    x = _as_complex(a)
    s, axes = _shape_and_axes(x, s, axes, where)
    for n, axis in zip(s, axes):
        x = _c2c(x, n, axis, norm, inverse)
    return x


def fftn(a, s=None, axes=None, norm=None, out=None):
    """numpy.fft.fftn: the DFT over axes (all by default; the last len(s) when only s is given)."""
    _no_out(out)
    return _c2c_n(a, s, axes, norm, False, "fftn")


def ifftn(a, s=None, axes=None, norm=None, out=None):
    """numpy.fft.ifftn: the inverse DFT over axes."""
    _no_out(out)
    return _c2c_n(a, s, axes, norm, True, "ifftn")


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """numpy.fft.fft2: fftn over the last two axes."""
    _no_out(out)
    return _c2c_n(a, s, axes, norm, False, "fft2")


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """numpy.fft.ifft2: ifftn over the last two axes."""
    _no_out(out)
    return _c2c_n(a, s, axes, norm, True, "ifft2")


def rfftn(a, s=None, axes=None, norm=None, out=None):
    """numpy.fft.rfftn: rfft over the last of axes, then the DFT over the others."""
    _no_out(out)
    _check_norm(norm)
    x = _real_input(a, "rfftn")
    s, axes = _shape_and_axes(x, s, axes, "rfftn")
    x = rfft(x, s[-1], axes[-1], norm)
    for n, axis in zip(s[:-1], axes[:-1]):
        x = _c2c(x, n, axis, norm, False)
    return x


def irfftn(a, s=None, axes=None, norm=None, out=None):
    """numpy.fft.irfftn: the inverse DFT over all of axes but the last, then irfft over the last (length
    s[-1], default 2 (m - 1))."""
    _no_out(out)
    _check_norm(norm)
    x = _as_complex(a)
    given = s is not None
    s, axes = _shape_and_axes(x, s, axes, "irfftn")
    if not given:
        s[-1] = 2 * (aval(x).shape[axes[-1]] - 1)
    for n, axis in zip(s[:-1], axes[:-1]):
        x = _c2c(x, n, axis, norm, True)
    return irfft(x, s[-1], axes[-1], norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """numpy.fft.rfft2: rfftn over the last two axes."""
    return rfftn(a, s, axes, norm, out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """numpy.fft.irfft2: irfftn over the last two axes."""
    return irfftn(a, s, axes, norm, out)


def _no_out(out):
    if out is not None:
        raise NotImplementedError("kiln.numpy.fft: out= is not supported (kiln arrays are immutable); use the result")


# ---- frequencies and shifts -------------------------------------------------------------------------------

def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """numpy.fft.fftfreq: the sample frequencies [0, 1, ..., -(n//2), ..., -1] / (n d); numpy's float64
    unless dtype= is given (jax.numpy's keyword)."""
    n = int(n)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return _frequencies(k, n, d, dtype)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """numpy.fft.rfftfreq: the non-negative sample frequencies [0, 1, ..., n//2] / (n d)."""
    n = int(n)
    return _frequencies(np.arange(0, n // 2 + 1), n, d, dtype)


def _frequencies(k, n, d, dtype):
    """Without dtype= the frequencies are weakly typed float64 as linspace's (docs/numpy.md, "Default
    dtypes"): float64 alone, the dtype of the array they meet otherwise (JAX's float32 with float32 data),
    unless a strong d (a numpy scalar or array) decides."""
    if isinstance(d, (int, float, np.number)):
        values = k * (1.0 / (n * float(d)))  # numpy's rounding: k times the reciprocal
        if dtype is None:
            return as_array(values, weak=not isinstance(d, np.number))
        return asarray(values.astype(dtype))
    d = asarray(d)
    target = dtype or (aval(d).dtype if dtypes.is_float(aval(d).dtype) else np.float64)
    k = as_array(k.astype(target), weak=True) if dtype is None else asarray(k.astype(target))
    return multiply(k, 1 / (d.astype(target) * n))


def fftshift(x, axes=None):
    """numpy.fft.fftshift: the zero frequency moved to the centre (a roll by n//2 along each of axes)."""
    return _shift(x, axes, lambda n: n // 2)


def ifftshift(x, axes=None):
    """numpy.fft.ifftshift: the inverse of fftshift (a roll by -(n//2))."""
    return _shift(x, axes, lambda n: -(n // 2))


def _shift(x, axes, amount):
    x = asarray(x)
    ndim = aval(x).ndim
    axes = list(range(ndim)) if axes is None else [_axis(a, ndim) for a in (axes if isinstance(axes, (tuple, list)) else (axes,))]
    return roll(x, tuple(amount(aval(x).shape[a]) for a in axes), tuple(axes)) if axes else x


from ..core.array import wrap_namespace as _wrap_namespace  # noqa: E402

_wrap_namespace(globals())
