"""kiln.scipy.signal's spectral analysis: stft, istft, welch and csd with scipy.signal's (and JAX's) semantics.

Written with kiln.numpy (segments are one static gather, each segment's DFT is kiln.numpy.fft, istft's
overlap-add is a few shifted sums), so they run eagerly, under kiln.jit and exported, and differentiate with
the primitives' rules. Windows named by a string or a (name, parameter) tuple are scipy.signal.get_window's
periodic windows, computed in float64 when tracing (a constant); an array window may be traced.
Frequencies and times come in the result's real dtype (JAX's choice; scipy gives float64 for float32 data).
"""
from __future__ import annotations

import numpy as np

from .. import numpy as knp
from ..core import dtypes
from ..numpy._base import aval, convert, normalize_axes

__all__ = ["stft", "istft", "welch", "csd"]


# ---- windows (scipy.signal.windows, fftbins=True) --------------------------------------------------------

def _cosine_sum(m, coefficients):
    fac = np.linspace(-np.pi, np.pi, m)
    return sum(c * np.cos(k * fac) for k, c in enumerate(coefficients))


def _triang(m):
    n = np.arange(1, (m + 1) // 2 + 1)
    if m % 2 == 0:
        w = (2 * n - 1.0) / m
        return np.r_[w, w[::-1]]
    w = 2 * n / (m + 1.0)
    return np.r_[w, w[-2::-1]]


def _bartlett(m):
    n = np.arange(m)
    return np.where(n <= (m - 1) / 2.0, 2.0 * n / (m - 1), 2.0 - 2.0 * n / (m - 1))


def _parzen(m):
    n = np.arange(-(m - 1) / 2.0, (m - 1) / 2.0 + 0.5, 1.0)
    na = n[n < -(m - 1) / 4.0]
    nb = n[np.abs(n) <= (m - 1) / 4.0]
    wa = 2 * (1 - np.abs(na) / (m / 2.0)) ** 3.0
    wb = 1 - 6 * (np.abs(nb) / (m / 2.0)) ** 2.0 + 6 * (np.abs(nb) / (m / 2.0)) ** 3.0
    return np.r_[wa, wb, wa[::-1]]


def _bohman(m):
    fac = np.abs(np.linspace(-1, 1, m)[1:-1])
    return np.r_[0, (1 - fac) * np.cos(np.pi * fac) + 1.0 / np.pi * np.sin(np.pi * fac), 0]


def _barthann(m):
    fac = np.abs(np.arange(m) / (m - 1.0) - 0.5)
    return 0.62 - 0.48 * fac + 0.38 * np.cos(2 * np.pi * fac)


def _kaiser(m, beta):
    n = np.arange(m)
    alpha = (m - 1) / 2.0
    return np.i0(beta * np.sqrt(1 - ((n - alpha) / alpha) ** 2.0)) / np.i0(float(beta))


def _gaussian(m, std):
    n = np.arange(m) - (m - 1.0) / 2.0
    return np.exp(-n ** 2 / (2 * std * std))


def _tukey(m, alpha=0.5):
    if alpha <= 0:
        return np.ones(m)
    if alpha >= 1.0:
        return _cosine_sum(m, (0.5, 0.5))
    n = np.arange(m)
    width = int(np.floor(alpha * (m - 1) / 2.0))
    n1, n3 = n[:width + 1], n[m - width - 1:]
    w1 = 0.5 * (1 + np.cos(np.pi * (-1 + 2.0 * n1 / alpha / (m - 1))))
    w3 = 0.5 * (1 + np.cos(np.pi * (-2.0 / alpha + 1 + 2.0 * n3 / alpha / (m - 1))))
    return np.concatenate((w1, np.ones(m - len(w1) - len(w3)), w3))


_WINDOWS = {  # name -> (function of the symmetric length, number of parameters)
    "hann": (lambda m: _cosine_sum(m, (0.5, 0.5)), 0),
    "hamming": (lambda m: _cosine_sum(m, (0.54, 0.46)), 0),
    "blackman": (lambda m: _cosine_sum(m, (0.42, 0.50, 0.08)), 0),
    "nuttall": (lambda m: _cosine_sum(m, (0.3635819, 0.4891775, 0.1365995, 0.0106411)), 0),
    "blackmanharris": (lambda m: _cosine_sum(m, (0.35875, 0.48829, 0.14128, 0.01168)), 0),
    "flattop": (lambda m: _cosine_sum(m, (0.21557895, 0.41663158, 0.277263158, 0.083578947, 0.006947368)), 0),
    "boxcar": (np.ones, 0),
    "triang": (_triang, 0),
    "bartlett": (_bartlett, 0),
    "parzen": (_parzen, 0),
    "bohman": (_bohman, 0),
    "barthann": (_barthann, 0),
    "cosine": (lambda m: np.sin(np.pi / m * (np.arange(m) + 0.5)), 0),
    "kaiser": (_kaiser, 1),
    "gaussian": (_gaussian, 1),
    "general_hamming": (lambda m, a: _cosine_sum(m, (a, 1.0 - a)), 1),
    "tukey": (_tukey, -1),  # its parameter is optional
}
_ALIASES = {"han": "hann", "hamm": "hamming", "ham": "hamming", "black": "blackman", "blk": "blackman",
            "box": "boxcar", "ones": "boxcar", "rect": "boxcar", "rectangular": "boxcar", "triangle": "triang",
            "tri": "triang", "bart": "bartlett", "brt": "bartlett", "blackharr": "blackmanharris",
            "bkh": "blackmanharris", "nutl": "nuttall", "nut": "nuttall", "flat": "flattop", "flt": "flattop",
            "halfcosine": "cosine", "ksr": "kaiser", "gauss": "gaussian", "gss": "gaussian", "tuk": "tukey"}


def get_window(window, nx: int) -> np.ndarray:
    """scipy.signal.get_window(window, nx) (fftbins=True: periodic) as a float64 numpy array."""
    name, params = (window[0], tuple(window[1:])) if isinstance(window, tuple) else (window, ())
    if not isinstance(name, str):
        raise ValueError(f"window: a window name must be a string, got {name!r}")
    name = _ALIASES.get(name, name)
    if name not in _WINDOWS:
        raise ValueError(f"Unknown window type: {name!r} (kiln knows {', '.join(sorted(_WINDOWS))})")
    fn, count = _WINDOWS[name]
    if count > 0 and len(params) != count:
        raise ValueError(f"The '{name}' window needs {count} parameter(s) -- pass a tuple, e.g. ('{name}', value).")
    if count == 0 and params:
        raise ValueError(f"The '{name}' window takes no parameters, got {params!r}")
    if nx <= 1:
        return np.ones(nx)
    return fn(nx + 1, *params)[:-1]


# ---- the shared helper (scipy.signal._spectral_py._spectral_helper) ---------------------------------------

def _inexact(x):
    """x as a kiln array of a float or complex dtype at least float32 (integers and bool give float64)."""
    x = knp.asarray(x)
    dt = aval(x).dtype
    if dtypes.is_complex(dt) or np.dtype(dt) in (np.float32, np.float64):
        return x
    return convert(x, np.float32 if dtypes.is_float(dt) else np.float64)


def _triage_segments(where, window, nperseg, input_length):
    """(window as an array, nperseg), as scipy's _triage_segments: a named window has 256 samples by default,
    at most input_length; an array window sets nperseg."""
    if nperseg is not None:
        nperseg = int(nperseg)
        if nperseg < 1:
            raise ValueError(f"{where}: nperseg must be a positive integer, got {nperseg}")
    if isinstance(window, (str, tuple)):
        nperseg = min(256 if nperseg is None else nperseg, input_length)
        return get_window(window, nperseg), nperseg
    win = knp.asarray(window)
    if aval(win).ndim != 1:
        raise ValueError(f"{where}: window must be 1-D, got shape {aval(win).shape}")
    if input_length < aval(win).shape[0]:
        raise ValueError(f"{where}: window is longer than input signal ({aval(win).shape[0]} > {input_length})")
    if nperseg is not None and nperseg != aval(win).shape[0]:
        raise ValueError(f"{where}: value specified for nperseg ({nperseg}) is different from length of window "
                         f"({aval(win).shape[0]})")
    return win, aval(win).shape[0]


def _extend(x, n, boundary):
    """scipy's even_ext/odd_ext/const_ext/zero_ext: n samples added at both ends of the last axis (n is
    nperseg // 2, below the length)."""
    if n == 0:
        return x
    width = [(0, 0)] * (aval(x).ndim - 1) + [(n, n)]
    if boundary == "zeros":
        return knp.pad(x, width)
    if boundary == "constant":
        return knp.pad(x, width, mode="edge")
    mirrored = knp.pad(x, width, mode="reflect")
    if boundary == "even":
        return mirrored
    edges = knp.pad(x, width, mode="edge")
    return knp.subtract(knp.multiply(edges, 2), mirrored)


def _detrend(segments, kind):
    """scipy.signal.detrend along the last axis, for real and complex segments alike."""
    centred = knp.subtract(segments, knp.mean(segments, axis=-1, keepdims=True))
    if kind in ("constant", "c"):
        return centred
    n = aval(segments).shape[-1]
    t = np.arange(n, dtype=np.float64) - (n - 1) / 2.0
    real = np.float64 if np.dtype(aval(segments).dtype) in (np.float64, np.complex128) else np.float32
    slope = knp.divide(knp.sum(knp.multiply(centred, t.astype(real)), axis=-1, keepdims=True),
                       float(np.sum(t * t)) or 1.0)
    return knp.subtract(centred, knp.multiply(slope, t.astype(real)))


_BOUNDARIES = ("even", "odd", "constant", "zeros", None)


def _segment_transform(x, win, detrend, nperseg, nstep, nfft, onesided):
    """The DFTs of the windowed, detrended segments of x's last axis: shape (..., nseg, nfreq)."""
    n = aval(x).shape[-1]
    starts = np.arange(0, n - nperseg + 1, nstep)
    segments = knp.take(x, starts[:, None] + np.arange(nperseg)[None, :], axis=-1)
    if detrend is not False and detrend is not None:
        segments = detrend(segments) if callable(detrend) else _detrend(segments, detrend)
    segments = knp.multiply(segments, win)
    if onesided:
        return knp.fft.rfft(knp.real(segments) if dtypes.is_complex(aval(segments).dtype) else segments, n=nfft)
    return knp.fft.fft(segments, n=nfft)


def _spectral_helper(where, x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling, axis,
                     mode, boundary=None, padded=False):
    """scipy's _spectral_helper: (freqs, times, result) with the frequency axis where `axis` was and the
    segments last. mode 'psd' gives conj(X) Y scaled (real when y is x), 'stft' X scaled by the root."""
    same = y is None
    x = _inexact(x)
    if not same:
        y = _inexact(y)
        xs, ys = list(aval(x).shape), list(aval(y).shape)
        if len(xs) != len(ys):
            raise ValueError(f"{where}: x and y must have the same number of dimensions, got {len(xs)} and "
                             f"{len(ys)}")
    if aval(x).ndim == 0:
        raise ValueError(f"{where}: x must have at least one dimension")
    axis = normalize_axes(axis, aval(x).ndim, where)[0]
    x = knp.moveaxis(x, axis, -1)
    if not same:
        y = knp.moveaxis(y, axis, -1)
        try:
            lead = np.broadcast_shapes(aval(x).shape[:-1], aval(y).shape[:-1])
        except ValueError:
            raise ValueError(f"{where}: x and y cannot be broadcast together (shapes {tuple(xs)} and "
                             f"{tuple(ys)} outside axis {axis})") from None
        x = knp.broadcast_to(x, lead + aval(x).shape[-1:])
        y = knp.broadcast_to(y, lead + aval(y).shape[-1:])
        nx, ny = aval(x).shape[-1], aval(y).shape[-1]
        if nx != ny:  # scipy pads the shorter with zeros
            pad_to = max(nx, ny)
            x = knp.pad(x, [(0, 0)] * len(lead) + [(0, pad_to - nx)])
            y = knp.pad(y, [(0, 0)] * len(lead) + [(0, pad_to - ny)])
    win, nperseg = _triage_segments(where, window, nperseg, aval(x).shape[-1])
    if nfft is None:
        nfft = nperseg
    elif int(nfft) < nperseg:
        raise ValueError(f"{where}: nfft must be greater than or equal to nperseg, got nfft={nfft}, "
                         f"nperseg={nperseg}")
    nfft = int(nfft)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if noverlap >= nperseg:
        raise ValueError(f"{where}: noverlap must be less than nperseg, got noverlap={noverlap}, nperseg={nperseg}")
    nstep = nperseg - noverlap
    if boundary not in _BOUNDARIES:
        raise ValueError(f"{where}: unknown boundary option {boundary!r}, must be one of {list(_BOUNDARIES)}")
    if boundary is not None:
        x = _extend(x, nperseg // 2, boundary)
        if not same:
            y = _extend(y, nperseg // 2, boundary)
    if padded:
        nadd = (-(aval(x).shape[-1] - nperseg) % nstep) % nperseg
        x = knp.pad(x, [(0, 0)] * (aval(x).ndim - 1) + [(0, nadd)])
        if not same:
            y = knp.pad(y, [(0, 0)] * (aval(y).ndim - 1) + [(0, nadd)])
    if detrend is not False and detrend is not None and not callable(detrend) and \
            detrend not in ("linear", "l", "constant", "c"):
        raise ValueError(f"{where}: detrend must be False, 'constant', 'linear' or a function, got {detrend!r}")
    complex_in = dtypes.is_complex(aval(x).dtype) or (not same and dtypes.is_complex(aval(y).dtype))
    real = np.dtype(np.float64) if (np.dtype(aval(x).dtype) in (np.float64, np.complex128) or
                                    (not same and np.dtype(aval(y).dtype) in (np.float64, np.complex128))) \
        else np.dtype(np.float32)
    cdtype = np.dtype(np.complex128 if real == np.float64 else np.complex64)
    if scaling not in ("density", "spectrum"):
        raise ValueError(f"{where}: unknown scaling {scaling!r}, must be 'density' or 'spectrum'")
    if isinstance(win, np.ndarray):
        scale = 1.0 / (fs * np.sum(win * win)) if scaling == "density" else 1.0 / np.sum(win) ** 2
        if mode == "stft":
            scale = np.sqrt(scale)
        win = win.astype(real)
        scale = np.asarray(scale, real)
    else:
        win = convert(win, real) if not dtypes.is_complex(aval(win).dtype) else convert(win, cdtype)
        scale = knp.divide(1.0, knp.multiply(fs, knp.sum(knp.multiply(win, win)))) if scaling == "density" \
            else knp.divide(1.0, knp.square(knp.sum(win)))
        if mode == "stft":
            scale = knp.sqrt(scale)
    onesided = bool(return_onesided) and not complex_in
    unit = np.fft.rfftfreq(nfft) if onesided else np.fft.fftfreq(nfft)
    freqs = knp.multiply(unit.astype(real), fs)
    result = _segment_transform(x, win, detrend, nperseg, nstep, nfft, onesided)
    if not same:
        result = knp.multiply(knp.conj(result), _segment_transform(y, win, detrend, nperseg, nstep, nfft, onesided))
    elif mode == "psd":
        result = knp.square(knp.real(result)) + knp.square(knp.imag(result))
    result = knp.multiply(result, scale)
    if onesided and mode == "psd":
        nf = aval(result).shape[-1]
        double = np.full(nf, 2.0)
        double[0] = 1.0
        if nfft % 2 == 0:
            double[-1] = 1.0
        result = knp.multiply(result, double.astype(real))
    length = aval(x).shape[-1]
    time = np.arange(nperseg / 2, length - nperseg / 2 + 1, nstep)
    if boundary is not None:
        time = time - nperseg / 2
    times = knp.divide(time.astype(real), fs)
    result = convert(result, real if same and mode != "stft" else cdtype)
    result = knp.moveaxis(result, -1, axis)  # the frequencies where x's axis was, the segments last
    return freqs, times, result


def _check_average(where, average):
    if average not in ("mean", "median"):
        raise ValueError(f'{where}: average must be "median" or "mean", got {average!r}')


def _median_bias(n):
    ii_2 = 2 * np.arange(1.0, (n - 1) // 2 + 1)
    return 1 + np.sum(1.0 / (ii_2 + 1) - 1.0 / ii_2)


def _average(pxy, average):
    """scipy.signal.csd's average over the segments (the last axis): mean, or median / its bias (each part of
    a complex value separately)."""
    nseg = aval(pxy).shape[-1]
    if nseg == 1:
        return pxy[..., 0]
    if average == "mean":
        return knp.mean(pxy, axis=-1)
    bias = float(_median_bias(nseg))
    if dtypes.is_complex(aval(pxy).dtype):
        med = knp.add(knp.median(knp.real(pxy), axis=-1), knp.multiply(knp.median(knp.imag(pxy), axis=-1), 1j))
        return knp.divide(convert(med, aval(pxy).dtype), bias)
    return knp.divide(knp.median(pxy, axis=-1), bias)


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None, detrend="constant",
        return_onesided=True, scaling="density", axis=-1, average="mean"):
    """scipy.signal.csd: (frequencies, the cross power spectral density of x and y by Welch's method)."""
    _check_average("csd", average)
    freqs, _, pxy = _spectral_helper("csd", x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                                     scaling, axis, "psd")
    return freqs, _average(pxy, average)


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None, detrend="constant",
          return_onesided=True, scaling="density", axis=-1, average="mean"):
    """scipy.signal.welch: (frequencies, the power spectral density of x by Welch's method), real."""
    _check_average("welch", average)
    freqs, _, pxx = _spectral_helper("welch", x, None, fs, window, nperseg, noverlap, nfft, detrend,
                                     return_onesided, scaling, axis, "psd")
    return freqs, _average(pxx, average)


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False, return_onesided=True,
         boundary="zeros", padded=True, axis=-1, scaling="spectrum"):
    """scipy.signal.stft: (frequencies, segment times, the short-time Fourier transform), complex, the
    frequency axis where `axis` was and the segments last."""
    if scaling == "psd":
        scaling = "density"
    elif scaling != "spectrum":
        raise ValueError(f"stft: scaling must be 'spectrum' or 'psd', got {scaling!r}")
    return _spectral_helper("stft", x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                            scaling, axis, "stft", boundary=boundary, padded=padded)


def _overlap_add(frames, nstep):
    """sum over segments i of frames[..., i, :] placed at i * nstep: shape (..., nperseg + (nseg - 1) nstep)."""
    a = aval(frames)
    nseg, nperseg = a.shape[-2], a.shape[-1]
    r = -(-nperseg // nstep)
    lead = [(0, 0)] * (a.ndim - 2)
    blocks = knp.reshape(knp.pad(frames, lead + [(0, 0), (0, r * nstep - nperseg)]), a.shape[:-2] + (nseg, r, nstep))
    total = None
    for j in range(r):
        part = knp.pad(blocks[..., j, :], lead + [(j, r - 1 - j), (0, 0)])
        total = part if total is None else knp.add(total, part)
    return knp.reshape(total, a.shape[:-2] + ((nseg + r - 1) * nstep,))[..., :nperseg + (nseg - 1) * nstep]


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None, input_onesided=True,  # noqa: N803
          boundary=True, time_axis=-1, freq_axis=-2, scaling="spectrum"):
    """scipy.signal.istft: (times, the signal whose stft is Zxx) by weighted overlap-add; real when
    input_onesided."""
    z = knp.asarray(Zxx)
    if not dtypes.is_complex(aval(z).dtype):
        z = _inexact(z)
        z = convert(z, np.complex128 if np.dtype(aval(z).dtype) == np.float64 else np.complex64)
    nd = aval(z).ndim
    if nd < 2:
        raise ValueError(f"istft: input stft must be at least 2-D, got {nd}-D")
    freq_axis, time_axis = int(freq_axis) % nd if -nd <= int(freq_axis) < nd else None, \
        int(time_axis) % nd if -nd <= int(time_axis) < nd else None
    if freq_axis is None or time_axis is None:
        raise ValueError(f"istft: freq_axis and time_axis must be axes of the {nd}-D input")
    if freq_axis == time_axis:
        raise ValueError("istft: must specify differing time and frequency axes")
    nseg = aval(z).shape[time_axis]
    n_default = 2 * (aval(z).shape[freq_axis] - 1) if input_onesided else aval(z).shape[freq_axis]
    if nperseg is None:
        nperseg = n_default
    else:
        nperseg = int(nperseg)
        if nperseg < 1:
            raise ValueError(f"istft: nperseg must be a positive integer, got {nperseg}")
    if nfft is None:
        nfft = nperseg if input_onesided and nperseg == n_default + 1 else n_default
    elif int(nfft) < nperseg:
        raise ValueError(f"istft: nfft must be greater than or equal to nperseg, got nfft={nfft}, nperseg={nperseg}")
    nfft = int(nfft)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if noverlap >= nperseg:
        raise ValueError(f"istft: noverlap must be less than nperseg, got noverlap={noverlap}, nperseg={nperseg}")
    nstep = nperseg - noverlap
    outer = [i for i in range(nd) if i not in (freq_axis, time_axis)]
    z = knp.transpose(z, outer + [time_axis, freq_axis])          # (..., nseg, nfreq)
    cdtype = np.dtype(aval(z).dtype)
    real = np.dtype(np.float64 if cdtype == np.complex128 else np.float32)
    if isinstance(window, (str, tuple)):
        win = get_window(window, nperseg)
    else:
        win = knp.asarray(window)
        if aval(win).ndim != 1:
            raise ValueError(f"istft: window must be 1-D, got shape {aval(win).shape}")
        if aval(win).shape[0] != nperseg:
            raise ValueError(f"istft: window must have length of nperseg ({nperseg}), got {aval(win).shape[0]}")
    if scaling not in ("spectrum", "psd"):
        raise ValueError(f"istft: scaling must be 'spectrum' or 'psd', got {scaling!r}")
    xsubs = knp.fft.irfft(z, n=nfft) if input_onesided else knp.fft.ifft(z, n=nfft)
    xsubs = xsubs[..., :nperseg]
    if isinstance(win, np.ndarray):
        w2 = np.zeros(nperseg + (nseg - 1) * nstep)
        for i in range(nseg):
            w2[i * nstep:i * nstep + nperseg] += win ** 2
        factor = np.sum(win) if scaling == "spectrum" else np.sqrt(fs * np.sum(win ** 2))
        if boundary:
            w2 = w2[nperseg // 2:len(w2) - nperseg // 2]
        weights = np.where(w2 > 1e-10, w2, 1.0)
        xsubs = knp.multiply(xsubs, (win * factor).astype(real))
        x = _overlap_add(xsubs, nstep)
        if boundary:
            x = x[..., nperseg // 2:aval(x).shape[-1] - nperseg // 2]
        x = knp.divide(x, weights.astype(real))
    else:
        win = convert(win, real)
        factor = knp.sum(win) if scaling == "spectrum" else knp.sqrt(knp.multiply(fs, knp.sum(knp.square(win))))
        x = _overlap_add(knp.multiply(xsubs, knp.multiply(win, factor)), nstep)
        w2 = _overlap_add(knp.broadcast_to(knp.square(win), (nseg, nperseg)), nstep)
        if boundary:
            x = x[..., nperseg // 2:aval(x).shape[-1] - nperseg // 2]
            w2 = w2[nperseg // 2:aval(w2).shape[-1] - nperseg // 2]
        x = knp.divide(x, knp.where(w2 > 1e-10, w2, 1.0))
    if input_onesided:
        x = knp.real(x) if dtypes.is_complex(aval(x).dtype) else x
    if aval(x).ndim > 1 and time_axis != nd - 1:
        x = knp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
    times = knp.divide(np.arange(aval(x).shape[0]).astype(real), fs)  # scipy's (and JAX's) x.shape[0]
    return times, x
