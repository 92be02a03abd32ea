"""kiln.numpy.fft against numpy.fft: values and dtypes in float32/complex64 and float64/complex128, eagerly,
under kiln.jit and exported through the standalone kiln-run; numpy's n=, s=, axis=/axes= and norm=; every
length (direct products up to 64, the four-step split for composite lengths, Bluestein for primes above 64);
gradients of real losses against float64 central differences; the error messages."""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import kiln_run_exported
from references import numerical_grad

REAL = {np.complex64: np.float32, np.complex128: np.float64}


def close(got, want, k=16):
    """Same shape and dtype, and within k eps of the largest value (the FFT's error is absolute in scale);
    tuples item by item."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            close(g, w, k)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    eps = np.finfo(want.dtype).eps
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
    np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128), rtol=0, atol=k * eps * scale)


def signal(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def both(fn, ref, *args, k=16):
    """fn eagerly and under jit against numpy's ref."""
    want = ref(*args)
    close(fn(*args), want, k)
    close(kiln.jit(fn)(*args), want, k)


LENGTHS = [1, 2, 3, 7, 16, 60, 64, 65, 96, 127, 128, 210]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", LENGTHS)
def test_fft_and_ifft_every_length(n, dtype):
    """Lengths of every path: direct (<= 64), four-step (65 = 5*13, 96, 128, 210), Bluestein (127)."""
    x = signal((3, n), dtype, seed=n)
    both(lambda v: (knp.fft.fft(v), knp.fft.ifft(v)), lambda v: (np.fft.fft(v), np.fft.ifft(v)), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32], ids=lambda d: np.dtype(d).name)
def test_real_and_integer_inputs_give_numpys_complex_dtype(dtype):
    x = (signal((4, 10), np.float64, 1) * 4).astype(dtype)
    both(lambda v: knp.fft.fft(v), lambda v: np.fft.fft(v), x)
    both(lambda v: knp.fft.rfft(v), lambda v: np.fft.rfft(v), x)


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_n_axis_and_norm(norm):
    x = signal((6, 9), np.complex128, 2)
    for kw in ({"n": 4, "axis": 0}, {"n": 13}, {"n": 9, "axis": -2}, {"axis": 1}):
        both(lambda v: (knp.fft.fft(v, norm=norm, **kw), knp.fft.ifft(v, norm=norm, **kw)),
             lambda v: (np.fft.fft(v, norm=norm, **kw), np.fft.ifft(v, norm=norm, **kw)), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_rfft_irfft_hfft_ihfft(dtype, norm):
    x = signal((5, 12), dtype, 3)
    odd = signal((5, 11), dtype, 4)
    spec = signal((5, 7), {np.float32: np.complex64, np.float64: np.complex128}[dtype], 5)
    both(lambda a, b: (knp.fft.rfft(a, norm=norm), knp.fft.rfft(b, norm=norm), knp.fft.rfft(a, n=7, axis=0, norm=norm),
                       knp.fft.ihfft(a, norm=norm), knp.fft.ihfft(b, n=20, norm=norm)),
         lambda a, b: (np.fft.rfft(a, norm=norm), np.fft.rfft(b, norm=norm), np.fft.rfft(a, n=7, axis=0, norm=norm),
                       np.fft.ihfft(a, norm=norm), np.fft.ihfft(b, n=20, norm=norm)), x, odd)
    # irfft of any spectrum (numpy ignores the imaginary parts of the zero and Nyquist terms): default,
    # odd and even n, longer and shorter than the spectrum
    both(lambda s: (knp.fft.irfft(s, norm=norm), knp.fft.irfft(s, n=13, norm=norm), knp.fft.irfft(s, n=4, norm=norm),
                    knp.fft.irfft(s, n=30, axis=1, norm=norm), knp.fft.irfft(s, axis=0, norm=norm),
                    knp.fft.hfft(s, norm=norm), knp.fft.hfft(s, n=9, norm=norm)),
         lambda s: (np.fft.irfft(s, norm=norm), np.fft.irfft(s, n=13, norm=norm), np.fft.irfft(s, n=4, norm=norm),
                    np.fft.irfft(s, n=30, axis=1, norm=norm), np.fft.irfft(s, axis=0, norm=norm),
                    np.fft.hfft(s, norm=norm), np.fft.hfft(s, n=9, norm=norm)), spec)


def test_two_and_n_dimensional():
    x = signal((4, 6, 10), np.complex64, 6)
    r = signal((4, 6, 10), np.float64, 7)
    both(lambda v: (knp.fft.fft2(v), knp.fft.ifft2(v), knp.fft.fftn(v), knp.fft.ifftn(v, axes=(0, 2)),
                    knp.fft.fftn(v, s=(3, 12), axes=(2, 0)), knp.fft.fft2(v, s=(5, 4)), knp.fft.ifftn(v, norm="ortho")),
         lambda v: (np.fft.fft2(v), np.fft.ifft2(v), np.fft.fftn(v), np.fft.ifftn(v, axes=(0, 2)),
                    np.fft.fftn(v, s=(3, 12), axes=(2, 0)), np.fft.fft2(v, s=(5, 4)), np.fft.ifftn(v, norm="ortho")), x)
    both(lambda v: (knp.fft.rfft2(v), knp.fft.rfftn(v), knp.fft.rfftn(v, s=(5, 8), axes=(0, 1)),
                    knp.fft.irfft2(knp.fft.rfft2(v)), knp.fft.irfftn(knp.fft.rfftn(v), s=v.shape, axes=(0, 1, 2)),
                    knp.fft.irfftn(knp.fft.rfftn(v, axes=(0, 1)), axes=(0, 1), s=(4, 5))),
         lambda v: (np.fft.rfft2(v), np.fft.rfftn(v), np.fft.rfftn(v, s=(5, 8), axes=(0, 1)),
                    np.fft.irfft2(np.fft.rfft2(v)), np.fft.irfftn(np.fft.rfftn(v), s=v.shape, axes=(0, 1, 2)),
                    np.fft.irfftn(np.fft.rfftn(v, axes=(0, 1)), axes=(0, 1), s=(4, 5))), r)
    spec = signal((3, 5), np.complex128, 8)
    both(lambda s: (knp.fft.irfft2(s), knp.fft.irfftn(s), knp.fft.irfftn(s, s=(3, 9), axes=(0, 1))),
         lambda s: (np.fft.irfft2(s), np.fft.irfftn(s), np.fft.irfftn(s, s=(3, 9), axes=(0, 1))), spec)


def test_frequencies_and_shifts():
    for n, d in ((8, 1.0), (9, 0.1), (1, 2)):
        for f, g in ((knp.fft.fftfreq, np.fft.fftfreq), (knp.fft.rfftfreq, np.fft.rfftfreq)):
            got, want = np.asarray(f(n, d)), g(n, d)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    assert np.asarray(knp.fft.fftfreq(6, dtype=np.float32)).dtype == np.float32
    traced = kiln.jit(lambda d: knp.fft.fftfreq(5, d))(np.float32(0.5))
    np.testing.assert_allclose(np.asarray(traced), np.fft.fftfreq(5, 0.5), rtol=1e-7)
    x = np.arange(30.0).reshape(5, 6)
    for kw in ({}, {"axes": 0}, {"axes": (1,)}, {"axes": (0, 1)}):
        for f, g in ((knp.fft.fftshift, np.fft.fftshift), (knp.fft.ifftshift, np.fft.ifftshift)):
            np.testing.assert_array_equal(np.asarray(f(x, **kw)), g(x, **kw))
            np.testing.assert_array_equal(np.asarray(kiln.jit(lambda v: f(v, **kw))(x)), g(x, **kw))


@pytest.mark.parametrize("n", [1000, 1009, 4096])
def test_accuracy_bound(n):
    """The stated bound (docs/numpy.md): relative L2 error within 8 eps of the exact DFT (numpy's float64
    FFT of the float64 input for float32; float64 against an exactly rounded long-double DFT would be
    tighter still), both precisions, including a large prime (Bluestein)."""
    for dtype in (np.complex64, np.complex128):
        x = signal((2, n), dtype, n)
        want = np.fft.fft(x.astype(np.complex128))
        for got in (knp.fft.fft(x), kiln.jit(knp.fft.fft)(x)):
            err = np.linalg.norm(np.asarray(got) - want) / np.linalg.norm(want)
            assert err <= 8 * np.finfo(REAL[dtype]).eps, (dtype, err)


def test_exported_through_kiln_run(tmp_path):
    """A filter (rfft, a complex gain, irfft), n-D transforms of real and complex arguments (a Bluestein
    length among them), hfft/ihfft and a shift, in the standalone runtime."""
    x = signal((3, 40), np.float32, 9)
    z = signal((6, 10), np.complex64, 10)

    def fn(x, z):
        gain = knp.exp(-0.1j * knp.arange(21, dtype=np.float32))
        return (knp.fft.irfft(knp.fft.rfft(x) * gain, n=40), knp.fft.fft2(z), knp.fft.ifftn(z, s=(7, 65), axes=(0, 1)),
                knp.fft.rfftn(x, s=(4, 67), axes=(0, 1)), knp.fft.irfft2(z, s=(5, 9)), knp.fft.hfft(z, n=11),
                knp.fft.ihfft(x, norm="ortho"), knp.fft.fftshift(knp.fft.fft(x, axis=0), axes=0))

    def ref(x, z):
        gain = np.exp(-0.1j * np.arange(21, dtype=np.float32)).astype(np.complex64)
        return (np.fft.irfft(np.fft.rfft(x) * gain, n=40).astype(np.float32), np.fft.fft2(z),
                np.fft.ifftn(z, s=(7, 65), axes=(0, 1)), np.fft.rfftn(x, s=(4, 67), axes=(0, 1)),
                np.fft.irfft2(z, s=(5, 9)), np.fft.hfft(z, n=11), np.fft.ihfft(x, norm="ortho"),
                np.fft.fftshift(np.fft.fft(x, axis=0), axes=0))

    got = kiln_run_exported(fn, x, z, tmp_path=tmp_path)
    for g, w in zip(got, ref(x, z)):
        close(g, w)


def test_vmap_of_transforms():
    """vmap batches the primitives the transforms are made of: the same as the transforms over the batch."""
    x = signal((5, 3, 12), np.float32, 12)
    fn = lambda v: (knp.fft.rfft(v), knp.fft.fft2(v * 1j), knp.fft.fftshift(v, axes=0))  # noqa: E731
    for batched in (kiln.vmap(fn), kiln.jit(kiln.vmap(fn))):
        close(batched(x), (np.fft.rfft(x), np.fft.fft2(x * np.complex64(1j)), np.fft.fftshift(x, axes=1)))


# ---- gradients: JAX's rules for a linear map, through the primitives' own transposes --------------------

LOSSES = {
    "fft": lambda x: knp.sum(knp.abs(knp.fft.fft(x * (1 + 0.5j))) ** 2 * knp.arange(x.shape[-1])),
    "ifft_ortho": lambda x: knp.sum(knp.real(knp.fft.ifft(x, n=70, norm="ortho")) ** 3),
    "rfft_irfft": lambda x: knp.sum(knp.fft.irfft(knp.fft.rfft(x) * knp.exp(0.3j * knp.arange(x.shape[-1] // 2 + 1)),
                                                  n=x.shape[-1]) ** 2),
    "irfft_odd": lambda x: knp.sum(knp.sin(knp.fft.irfft(x[..., :5] + 1j * x[..., 5:10], n=9))),
    "fft2": lambda x: knp.sum(knp.angle(knp.fft.fft2(x + 0.1j)) * knp.abs(knp.fft.rfft2(x))[..., :1].sum()),
    "hfft_ihfft": lambda x: knp.sum(knp.fft.hfft(x[..., :6] * 1j + x[..., 1:7]) ** 2) + knp.sum(knp.imag(knp.fft.ihfft(x))),
    "bluestein": lambda x: knp.sum(knp.abs(knp.fft.fft(x, n=67)) ** 2 * knp.cos(knp.arange(67.0))),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_gradients_match_finite_differences(name):
    loss = LOSSES[name]
    x = signal((2, 12), np.float64, 11)
    want = numerical_grad(loss, x)
    for grad in (kiln.grad(loss), kiln.jit(kiln.grad(loss))):
        np.testing.assert_allclose(np.asarray(grad(x)), want, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(want).max()))


# ---- errors --------------------------------------------------------------------------------------------

def test_errors():
    x = np.ones((2, 4))
    with pytest.raises(ValueError, match=r"Invalid number of FFT data points \(0\) specified."):
        knp.fft.fft(x, n=0)
    with pytest.raises(ValueError, match=r"Invalid number of FFT data points \(0\) specified."):
        knp.fft.irfft(np.ones(1))
    with pytest.raises(ValueError, match='Invalid norm value bad; should be "backward","ortho" or "forward".'):
        knp.fft.ifft(x, norm="bad")
    with pytest.raises(TypeError, match=r"rfft: the input must be real, got complex128 \(use fft for complex input\)"):
        knp.fft.rfft(x + 1j)
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds for array of dimension 2"):
        knp.fft.fft(x, axis=2)
    with pytest.raises(ValueError, match=r"fftn: shape and axes have different lengths \(1 and 2\)"):
        knp.fft.fftn(x, s=(3,), axes=(0, 1))
    with pytest.raises(NotImplementedError, match="out= is not supported"):
        knp.fft.fft(x, out=np.zeros((2, 4), complex))
