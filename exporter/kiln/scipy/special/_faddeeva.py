"""The Faddeeva function wofz(z) = exp(-z^2) erfc(-i z), by Weideman's rational approximation.

Weideman (SIAM J. Numer. Anal. 31 (1994) 1497-1518), with N = 40 terms: for Im z >= 0,
w(z) = 2 p(Z) / (L - i z)^2 + 1 / (sqrt(pi) (L - i z)), Z = (L + i z) / (L - i z), L = sqrt(N / sqrt(2)),
p a polynomial whose coefficients are the DFT of exp(-t^2) (L^2 + t^2) on a tangent grid (computed once
here); below the real axis the reflection w(z) = 2 exp(-z^2) - w(-z). On the real axis the real part is
exp(-x^2) exactly. Computed in complex128, rounded once to complex64 for complex64/float32/float16 inputs.
Accuracy (docs/scipy.md): |w - scipy.special.wofz| <= 5e-14 |w| in complex128 (measured 2.5e-14).
"""
from __future__ import annotations

import numpy as np

from ... import numpy as knp
from ...core import dtypes
from ...lax.complex_prims import complex as make_complex
from ...numpy._base import aval, convert

__all__ = ["wofz"]

_N = 40


def _weideman_coefficients(n: int):
    m = 2 * n
    k = np.arange(-m + 1, m)
    length = np.sqrt(n / np.sqrt(2.0))
    t = length * np.tan(k * np.pi / m / 2)
    f = np.r_[0.0, np.exp(-t * t) * (length * length + t * t)]
    a = np.real(np.fft.fft(np.fft.fftshift(f))) / (2 * m)
    return float(length), a[1:n + 1][::-1].copy()  # highest power first


_L, _COEFFS = _weideman_coefficients(_N)


def _upper(z):
    """w(z) for Im z >= 0 (Weideman's formula)."""
    denominator = knp.subtract(_L, knp.multiply(z, 1j))
    big_z = knp.divide(knp.add(_L, knp.multiply(z, 1j)), denominator)
    p = _COEFFS[0]
    for c in _COEFFS[1:]:
        p = knp.add(knp.multiply(p, big_z), c)
    return knp.add(knp.divide(knp.multiply(p, 2.0), knp.square(denominator)),
                   knp.divide(1.0 / np.sqrt(np.pi), denominator))


def wofz(z):
    """scipy.special.wofz: the Faddeeva function exp(-z^2) erfc(-i z) of complex (or real) z."""
    z = knp.asarray(z)
    dt = np.dtype(aval(z).dtype)
    single = dt.itemsize == 8 if dtypes.is_complex(dt) else (dtypes.is_float(dt) and dt.itemsize <= 4)
    out = np.dtype(np.complex64 if single else np.complex128)
    if dtypes.is_complex(dt):
        z = convert(z, np.complex128)
        x, y = knp.real(z), knp.imag(z)
    else:
        x = convert(z, np.float64)
        y = knp.zeros_like(x)
        z = make_complex(x, y)
    lower = knp.less(y, 0.0)
    reflected = knp.where(lower, knp.negative(z), z)
    w = _upper(reflected)
    with np.errstate(over="ignore", invalid="ignore"):
        w = knp.where(lower, knp.subtract(knp.multiply(knp.exp(knp.negative(knp.square(z))), 2.0), w), w)
    on_axis = knp.equal(y, 0.0)
    w = knp.where(on_axis, make_complex(knp.exp(knp.negative(knp.square(x))), knp.imag(w)), w)
    return convert(w, out)
