"""kiln.scipy.signal's stft, istft, welch and csd against scipy.signal in float32 and float64: windows by name,
tuple and array, nperseg/noverlap/nfft, detrend (False, 'constant', 'linear', a function), return_onesided,
boundary/padded, scaling, average, axis; eagerly, under kiln.jit and exported through kiln-run; gradients of
real losses against float64 central differences; the errors with their messages.

Tolerance: every element within k eps of the largest magnitude of the result (k = 64: the FFT's error is
absolute in scale), eps of the lower precision of the two (scipy's frequencies are float64 for float32 data)."""
import warnings

import numpy as np
import pytest
import scipy.signal as ss

import kiln
import kiln.scipy.signal as ks
from kiln.scipy.signal_spectral import get_window
from kiln_tools import kiln_run_exported
from references import numerical_grad

RNG = np.random.default_rng(11)


def flat(values):
    if isinstance(values, (tuple, list)):
        return [leaf for v in values for leaf in flat(v)]
    return [values]


def close(got, want, k=64):
    got, want = flat(got), flat(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        single = np.dtype(np.float32), np.dtype(np.complex64)
        eps = np.finfo(np.float32 if g.dtype in single or w.dtype in single else np.float64).eps
        scale = max(float(np.max(np.abs(w), initial=0.0)), 1e-30)
        np.testing.assert_allclose(g.astype(np.complex128), w.astype(np.complex128), rtol=0, atol=k * eps * scale)


def reference(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def both(kfn, nfn, *args):
    """kfn eagerly and under jit against scipy's nfn; frequencies and times in the result's real dtype (JAX's)."""
    want = reference(nfn, *args)
    got = kfn(*args)
    close(got, want)
    close(kiln.jit(kfn)(*args), want)
    real = np.float32 if np.asarray(args[0]).dtype in (np.float32, np.complex64) else np.float64
    assert all(np.asarray(g).dtype in (real, np.complex64 if real == np.float32 else np.complex128) for g in flat(got))


NAMES = ["hann", "hamming", "blackman", "nuttall", "blackmanharris", "flattop", "boxcar", "triang", "bartlett",
         "parzen", "bohman", "barthann", "cosine", ("kaiser", 4.5), ("gaussian", 3.0), ("general_hamming", 0.6),
         ("tukey", 0.3), "tukey", ("tukey", 0.0), ("tukey", 1.0), "rect", "ones", "tri"]


@pytest.mark.parametrize("n", [1, 2, 7, 16, 33])
def test_windows_are_scipys(n):
    for name in NAMES:
        np.testing.assert_allclose(get_window(name, n), ss.get_window(name, n), rtol=1e-13, atol=1e-15,
                                   err_msg=str(name))


WELCH = [{}, {"nperseg": 64}, {"nperseg": 50, "noverlap": 10, "nfft": 70, "detrend": "linear"},
         {"window": ("kaiser", 3.0), "nperseg": 40, "scaling": "spectrum", "average": "median"},
         {"return_onesided": False, "nperseg": 33, "detrend": False}, {"window": "hamming", "nperseg": 45, "fs": 8.0},
         {"nperseg": 300}]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kw", WELCH, ids=range(len(WELCH)))
def test_welch_and_csd(kw, dtype):
    x, y = RNG.standard_normal((2, 300)).astype(dtype), RNG.standard_normal((2, 300)).astype(dtype)
    both(lambda a: ks.welch(a, **kw), lambda a: ss.welch(a, **kw), x)
    both(lambda a, b: ks.csd(a, b, **kw), lambda a, b: ss.csd(a, b, **kw), x, y)


def test_csd_broadcasts_and_pads_the_shorter_input():
    x, y = RNG.standard_normal((3, 1, 100)), RNG.standard_normal((1, 2, 100))
    both(lambda a, b: ks.csd(a, b, nperseg=32), lambda a, b: ss.csd(a, b, nperseg=32), x, y)
    x, y = RNG.standard_normal((2, 120)), RNG.standard_normal((2, 90))
    both(lambda a, b: (ks.csd(a, b, nperseg=32), ks.csd(b, a, nperseg=32)),
         lambda a, b: (ss.csd(a, b, nperseg=32), ss.csd(b, a, nperseg=32)), x, y)


def test_axis_and_complex_input():
    x3 = RNG.standard_normal((3, 100, 4))
    both(lambda a: (ks.welch(a, axis=1, nperseg=32), ks.csd(a, a[::-1], axis=-2, nperseg=20, average="median")),
         lambda a: (ss.welch(a, axis=1, nperseg=32), ss.csd(a, a[::-1], axis=-2, nperseg=20, average="median")), x3)
    z = (RNG.standard_normal(128) + 1j * RNG.standard_normal(128)).astype(np.complex64)
    both(lambda a: (ks.welch(a, nperseg=32), ks.csd(a, a * 2j, nperseg=32, average="median"),
                    ks.stft(a, nperseg=32)),  # complex data: two-sided, as scipy (which warns)
         lambda a: (ss.welch(a, nperseg=32), ss.csd(a, a * 2j, nperseg=32, average="median"),
                    ss.stft(a, nperseg=32)), z)


STFT = [{"nperseg": 64}, {"nperseg": 31, "noverlap": 7, "boundary": "even"},
        {"nperseg": 32, "boundary": None, "padded": False, "nfft": 40},
        {"nperseg": 32, "boundary": "odd", "detrend": "linear", "return_onesided": False},
        {"nperseg": 32, "boundary": "constant", "scaling": "psd", "window": "blackman", "detrend": "constant"},
        {}]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kw", STFT, ids=range(len(STFT)))
def test_stft(kw, dtype):
    x = RNG.standard_normal((2, 200)).astype(dtype)
    both(lambda a: ks.stft(a, **kw), lambda a: ss.stft(a, **kw), x)


ISTFT = [({"nperseg": 64}, {}), ({"nperseg": 64, "noverlap": 40, "window": "hamming"},) * 2,
         ({"nperseg": 33, "noverlap": 11}, {"nperseg": 33, "noverlap": 11}),
         ({"nperseg": 32, "nfft": 48}, {"nperseg": 32, "nfft": 48}),
         ({"nperseg": 32, "return_onesided": False}, {"input_onesided": False, "boundary": True}),
         ({"nperseg": 32, "boundary": None}, {"boundary": False, "scaling": "psd"})]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kws", ISTFT, ids=range(len(ISTFT)))
def test_istft(kws, dtype):
    forward, inverse = kws
    _, _, z = ss.stft(RNG.standard_normal((2, 256)).astype(dtype), **forward)
    both(lambda a: ks.istft(a, **inverse), lambda a: ss.istft(a, **inverse), z)


def test_istft_axes_and_round_trip():
    x = RNG.standard_normal((3, 100, 4))
    _, _, z = ss.stft(x, axis=1, nperseg=32)  # (3, 17, 4, 8): frequencies at 1, segments last
    both(lambda a: ks.istft(a, time_axis=-1, freq_axis=1), lambda a: ss.istft(a, time_axis=-1, freq_axis=1), z)
    zt = np.moveaxis(z, -1, 0)
    both(lambda a: ks.istft(a, time_axis=0, freq_axis=2), lambda a: ss.istft(a, time_axis=0, freq_axis=2), zt)
    signal = RNG.standard_normal(160)
    _, back = kiln.jit(lambda a: ks.istft(ks.stft(a, nperseg=40)[2], nperseg=40))(signal)
    np.testing.assert_allclose(np.asarray(back)[:160], signal, rtol=0, atol=1e-12)


def test_array_windows_and_callable_detrend():
    x = RNG.standard_normal(150)
    win = RNG.random(30) + 0.5
    both(lambda a, w: (ks.welch(a, window=w), ks.stft(a, window=w, nperseg=30, noverlap=20)[2]),
         lambda a, w: (ss.welch(a, window=w), ss.stft(a, window=w, nperseg=30, noverlap=20)[2]), x, win)
    _, _, z = ss.stft(x, window=win, nperseg=30, noverlap=20)
    both(lambda a, w: ks.istft(a, window=w, noverlap=20), lambda a, w: ss.istft(a, window=w, noverlap=20), z, win)
    square = lambda d: d - d * d  # noqa: E731
    both(lambda a: ks.welch(a, nperseg=40, detrend=square), lambda a: ss.welch(a, nperseg=40, detrend=square), x)


def test_kiln_run(tmp_path):
    x, y = RNG.standard_normal((2, 128)).astype(np.float32), RNG.standard_normal((2, 128)).astype(np.float32)

    def fn(a, b):
        _, pxx = ks.welch(a, nperseg=32, average="median")
        _, pxy = ks.csd(a, b, nperseg=48, noverlap=40)
        _, _, z = ks.stft(a, nperseg=32)
        _, back = ks.istft(z, nperseg=32)
        return pxx, pxy, z, back

    want = reference(lambda a, b: (ss.welch(a, nperseg=32, average="median")[1],
                                   ss.csd(a, b, nperseg=48, noverlap=40)[1], ss.stft(a, nperseg=32)[2],
                                   ss.istft(ss.stft(a, nperseg=32)[2], nperseg=32)[1]), x, y)
    close(kiln_run_exported(fn, x, y, tmp_path=tmp_path), want)


@pytest.mark.parametrize("name", ["welch", "csd", "stft", "istft"])
def test_gradients_match_finite_differences(name):
    x = RNG.standard_normal(64)
    weights = RNG.standard_normal(64)
    losses = {
        "welch": lambda mod, a: mod.sum(ks.welch(a, nperseg=16, detrend="linear")[1] * np.arange(9.0)),
        "csd": lambda mod, a: mod.sum(mod.real(ks.csd(a, a * weights, nperseg=16, average="median")[1])),
        "stft": lambda mod, a: mod.sum(mod.abs(ks.stft(a, nperseg=16, boundary="even")[2]) ** 2 * 1.5),
        "istft": lambda mod, a: mod.sum(ks.istft(ks.stft(a, nperseg=16)[2], nperseg=16)[1][:64] * weights),
    }
    import kiln.numpy as knp
    loss = losses[name]
    got = kiln.grad(lambda a: loss(knp, a))(x)
    want = numerical_grad(lambda a: np.asarray(loss(knp, a)), x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("call, message", [
    (lambda x: ks.welch(x, nperseg=0), "welch: nperseg must be a positive integer, got 0"),
    (lambda x: ks.welch(x, nperseg=16, noverlap=16), "welch: noverlap must be less than nperseg"),
    (lambda x: ks.csd(x, x, nperseg=16, nfft=8), "csd: nfft must be greater than or equal to nperseg"),
    (lambda x: ks.welch(x, average="mode"), 'welch: average must be "median" or "mean"'),
    (lambda x: ks.csd(x, x, average="max"), 'csd: average must be "median" or "mean"'),
    (lambda x: ks.welch(x, scaling="power"), "welch: unknown scaling 'power'"),
    (lambda x: ks.welch(x, detrend="quadratic"), "welch: detrend must be False, 'constant', 'linear'"),
    (lambda x: ks.welch(x, window="nope"), "Unknown window type: 'nope'"),
    (lambda x: ks.welch(x, window="kaiser"), "The 'kaiser' window needs 1 parameter"),
    (lambda x: ks.welch(x, window=("hann", 2)), "The 'hann' window takes no parameters"),
    (lambda x: ks.welch(x, window=np.ones((2, 4))), "welch: window must be 1-D"),
    (lambda x: ks.welch(x, window=np.ones(80)), "welch: window is longer than input signal (80 > 64)"),
    (lambda x: ks.welch(x, window=np.ones(8), nperseg=9), "welch: value specified for nperseg (9) is different"),
    (lambda x: ks.welch(x[0]), "welch: x must have at least one dimension"),
    (lambda x: ks.csd(x, x[None]), "csd: x and y must have the same number of dimensions"),
    (lambda x: ks.csd(np.ones((2, 8)), np.ones((3, 8))), "csd: x and y cannot be broadcast together"),
    (lambda x: ks.stft(x, boundary="wrap"), "stft: unknown boundary option 'wrap'"),
    (lambda x: ks.stft(x, scaling="density"), "stft: scaling must be 'spectrum' or 'psd'"),
    (lambda x: ks.stft(x, window=np.ones(30)), "stft: value specified for nperseg (256) is different"),
    (lambda x: ks.istft(x), "istft: input stft must be at least 2-D, got 1-D"),
    (lambda x: ks.istft(np.ones((5, 4)), freq_axis=0, time_axis=0), "istft: must specify differing time"),
    (lambda x: ks.istft(np.ones((5, 4)), freq_axis=2), "istft: freq_axis and time_axis must be axes"),
    (lambda x: ks.istft(np.ones((5, 4)), nperseg=0), "istft: nperseg must be a positive integer"),
    (lambda x: ks.istft(np.ones((5, 4)), nfft=4), "istft: nfft must be greater than or equal to nperseg"),
    (lambda x: ks.istft(np.ones((5, 4)), noverlap=8), "istft: noverlap must be less than nperseg"),
    (lambda x: ks.istft(np.ones((5, 4)), window=np.ones(7)), "istft: window must have length of nperseg (8)"),
    (lambda x: ks.istft(np.ones((5, 4)), window=np.ones((8, 1))), "istft: window must be 1-D"),
    (lambda x: ks.istft(np.ones((5, 4)), scaling="density"), "istft: scaling must be 'spectrum' or 'psd'"),
])
def test_errors(call, message):
    with pytest.raises(ValueError) as info:
        call(RNG.standard_normal(64))
    assert message in str(info.value)
