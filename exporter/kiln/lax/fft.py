"""The discrete Fourier transform over lax operations, and jax.lax.fft with FftType.

A length-n DFT along the last axis (dft_last, which kiln.numpy.fft builds numpy's functions on) is

- n <= 64: one product with the DFT matrix;
- n composite: the four-step Cooley-Tukey split n = n1 * n2 (n1 the largest divisor <= sqrt(n)):
  n2 DFTs of length n1, twiddle factors, n1 DFTs of length n2, each of them split again;
- n prime above 64: Bluestein's chirp z-transform, a circular convolution of power-of-two length
  m >= 2n - 1 done with the four-step FFT (the chirp filter's spectrum is a constant of the program).

Twiddles and chirps are computed in float64 from exact integer phases (j*k mod n) and rounded once to the
working complex dtype. Every step is a kiln primitive on complex arrays, so the transform runs eagerly,
compiles into kernels through kiln.compiler.complex_lowering and differentiates with the primitives' rules.
"""
from __future__ import annotations

import enum
import math

import numpy as np

from ..core import dtypes
from ..core.trace import get_aval
from . import complex_prims, prims
from .api import dot_general
from .operands import asarray
from .structural_prims import concatenate, pad, rev_p, slice as slice_array

__all__ = ["dft_last", "FftType", "fft"]

_DIRECT_MAX = 64


def _unit_roots(phases: np.ndarray, n: int, sign: int, dtype) -> np.ndarray:
    """exp(sign 2 pi i phases / n) for integer phases, reduced mod n exactly first, rounded once to dtype;
    exactly 1, i, -1 or -i at multiples of a quarter turn (so a DFT of a constant is exactly zero there)."""
    m = np.mod(phases, n)
    angle = (2 * np.pi / n) * m.astype(np.float64)
    cos, sin = np.cos(angle), np.sin(angle)
    quarter = (4 * m) % n == 0
    turns = (4 * m // n) % 4
    cos = np.where(quarter, np.array([1.0, 0.0, -1.0, 0.0])[turns], cos)
    sin = np.where(quarter, np.array([0.0, 1.0, 0.0, -1.0])[turns], sin)
    return (cos + 1j * sign * sin).astype(dtype)


def _dft_matrix(n: int, sign: int, dtype) -> np.ndarray:
    k = np.arange(n, dtype=np.int64)
    return _unit_roots(np.outer(k, k), n, sign, dtype)


def _largest_divisor_to_sqrt(n: int) -> int:
    for d in range(math.isqrt(n), 1, -1):
        if n % d == 0:
            return d
    return 1


def _times(x, factors: np.ndarray):
    """x * factors, factors (a constant) broadcast over x's leading axes."""
    shape = get_aval(x).shape
    lead = len(shape) - factors.ndim
    spread = prims.broadcast_in_dim.bind(factors, shape=shape, broadcast_dimensions=tuple(range(lead, len(shape))))
    return prims.mul.bind(x, spread)


def _swap_last_two(x):
    ndim = get_aval(x).ndim
    return prims.transpose.bind(x, permutation=tuple(range(ndim - 2)) + (ndim - 1, ndim - 2))


def dft_last(x, sign: int):
    """sum_j x[..., j] exp(sign 2 pi i j k / n): the unnormalized DFT (sign -1) or inverse DFT (sign +1) of a
    complex array along its last axis."""
    a = get_aval(x)
    n, dtype = a.shape[-1], a.dtype
    if n <= 1:
        return x
    if n <= _DIRECT_MAX:
        return dot_general(x, _dft_matrix(n, sign, dtype), (((a.ndim - 1,), (0,)), ((), ())))
    n1 = _largest_divisor_to_sqrt(n)
    if n1 == 1:
        return _bluestein(x, sign)
    n2 = n // n1
    lead = a.shape[:-1]
    rows = prims.reshape.bind(x, new_shape=lead + (n1, n2))           # [j1, j2] = x[n2 j1 + j2]
    b = dft_last(_swap_last_two(rows), sign)                          # [j2, k1]: length-n1 DFTs
    j2, k1 = np.arange(n2, dtype=np.int64), np.arange(n1, dtype=np.int64)
    c = _times(b, _unit_roots(np.outer(j2, k1), n, sign, dtype))      # twiddles w_n^(j2 k1)
    d = dft_last(_swap_last_two(c), sign)                             # [k1, k2]: length-n2 DFTs
    return prims.reshape.bind(_swap_last_two(d), new_shape=lead + (n,))  # X[k1 + n1 k2]


def _bluestein(x, sign: int):
    """Bluestein: X_k = w_k sum_j (x_j w_j) conj(w_(k-j)) with w_k = exp(sign i pi k^2 / n), the sum a
    circular convolution of power-of-two length m >= 2n - 1."""
    a = get_aval(x)
    n, dtype = a.shape[-1], a.dtype
    m = 1 << (2 * n - 2).bit_length()
    k = np.arange(n, dtype=np.int64)
    chirp = _unit_roots(k * k, 2 * n, sign, np.complex128)            # exp(sign i pi k^2 / n)
    filt = np.zeros(m, np.complex128)
    filt[:n] = np.conj(chirp)
    filt[m - n + 1:] = np.conj(chirp[1:][::-1])
    spectrum = (np.fft.fft(filt) / m).astype(dtype)                    # a constant: the filter's DFT / m
    w = chirp.astype(dtype)
    padded = pad(_times(x, w), 0, [(0, 0, 0)] * (a.ndim - 1) + [(0, m - n, 0)])
    conv = dft_last(_times(dft_last(padded, -1), spectrum), 1)
    return _times(slice_array(conv, (0,) * a.ndim, a.shape[:-1] + (n,)), w)


class FftType(enum.IntEnum):
    """jax.lax.FftType: complex forward and inverse, real-to-complex and complex-to-real transforms."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


def _complex_of(dtype) -> np.dtype:
    return np.dtype(np.complex128 if np.dtype(dtype) in (np.float64, np.complex128) else np.complex64)


def _along(x, axis: int, fn):
    """fn applied along axis (moved last and back)."""
    ndim = get_aval(x).ndim
    if axis == ndim - 1:
        return fn(x)
    order = tuple(i for i in range(ndim) if i != axis) + (axis,)
    back = tuple(np.argsort(order))
    return prims.transpose.bind(fn(prims.transpose.bind(x, permutation=order)), permutation=back)


def _scaled(x, n: int):
    real = dtypes.real_dtype(get_aval(x).dtype)
    return _times(x, np.asarray(1 / n, real).astype(get_aval(x).dtype).reshape(()))


def fft(x, fft_type, fft_lengths):
    """jax.lax.fft: over the last len(fft_lengths) axes, FFT/IFFT (complex; the inverse divides by the size),
    RFFT (real to the n // 2 + 1 non-negative frequencies of the last axis) or IRFFT (those frequencies to a
    real signal of fft_lengths, Hermitian symmetry assumed). fft_type is an FftType or its name. FFT, IFFT and
    IRFFT take real input as complex (complex128 from float64, else complex64), as JAX's."""
    if isinstance(fft_type, str):
        try:
            fft_type = FftType[fft_type.upper()]
        except KeyError:
            raise ValueError(f"fft: unknown fft_type {fft_type!r}; the types are {[t.name for t in FftType]}") from None
    fft_type = FftType(fft_type)
    x = asarray(x)
    shape, dtype = get_aval(x).shape, get_aval(x).dtype
    lengths = tuple(int(n) for n in fft_lengths)
    rank = len(lengths)
    if not 1 <= rank <= len(shape):
        raise ValueError(f"fft: fft_lengths must name 1 to {len(shape)} trailing axes; got {lengths}")
    axes = list(range(len(shape) - rank, len(shape)))
    if fft_type == FftType.RFFT and dtypes.is_complex(dtype):
        raise TypeError(f"fft: RFFT takes real input; got {dtype}")
    if fft_type != FftType.RFFT and not dtypes.is_complex(dtype):  # JAX's: real input taken as complex
        x = prims.convert.bind(x, new_dtype=_complex_of(dtype))
        dtype = get_aval(x).dtype
    expected = lengths if fft_type != FftType.IRFFT else lengths[:-1] + (lengths[-1] // 2 + 1,)
    if tuple(shape[-rank:]) != expected:
        raise ValueError(f"fft: {fft_type.name} with fft_lengths {lengths} needs trailing axes {expected}; got "
                         f"{tuple(shape[-rank:])}")
    if fft_type in (FftType.FFT, FftType.IFFT):
        sign = -1 if fft_type == FftType.FFT else 1
        for axis in axes:
            x = _along(x, axis, lambda v: dft_last(v, sign))
            if fft_type == FftType.IFFT:
                x = _scaled(x, get_aval(x).shape[axis])
        return x
    if fft_type == FftType.RFFT:
        if np.dtype(dtype) not in (np.float32, np.float64):
            x = prims.convert.bind(x, new_dtype=np.dtype(np.float32 if dtypes.is_float(dtype) else np.float64))
        x = prims.convert.bind(x, new_dtype=_complex_of(get_aval(x).dtype))
        for axis in axes:
            x = _along(x, axis, lambda v: dft_last(v, -1))
        last = get_aval(x).shape
        return slice_array(x, (0,) * len(last), last[:-1] + (lengths[-1] // 2 + 1,))
    for axis in axes[:-1]:
        x = _scaled(_along(x, axis, lambda v: dft_last(v, 1)), get_aval(x).shape[axis])
    n = lengths[-1]
    half_shape = get_aval(x).shape
    ndim = len(half_shape)
    count = (n + 1) // 2 - 1  # the mirrored terms 1 .. (n - 1) // 2
    parts = [x]
    if count > 0:
        inner = slice_array(x, (0,) * (ndim - 1) + (1,), half_shape[:-1] + (1 + count,))
        parts.append(complex_prims.conj(rev_p.bind(inner, dimensions=(ndim - 1,))))
    spectrum = concatenate(parts, ndim - 1) if len(parts) > 1 else slice_array(x, (0,) * ndim, half_shape[:-1] + (n,))
    signal = complex_prims.real(dft_last(spectrum, 1))
    return _scaled(signal, n)
