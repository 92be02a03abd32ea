"""kiln.scipy.signal against scipy.signal: convolve/correlate (every mode, 1-D to 3-D, either input the larger,
method accepted), convolve2d/correlate2d (every mode and boundary, fillvalue), dtypes, eagerly, under
kiln.jit and through kiln-run; gradients against float64 central differences; errors with their messages."""
import numpy as np
import pytest
import scipy.signal as ss

import kiln
import kiln.scipy.signal as ks
from kiln_tools import eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(5)
SHAPES = [((7,), (3,)), ((3,), (7,)), ((6,), (6,)), ((5, 6), (2, 3)), ((2, 3), (5, 6)), ((5, 4), (5, 4)),
          ((4, 5, 3), (2, 2, 2))]


@pytest.mark.parametrize("fn", ["convolve", "correlate"])
@pytest.mark.parametrize("shapes", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_convolve_correlate(fn, shapes):
    a, b = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
    modes = ("full", "same", "valid")
    eager_and_jit(lambda x, y: tuple(getattr(ks, fn)(x, y, m) for m in modes),
                  lambda x, y: tuple(getattr(ss, fn)(x, y, m) for m in modes), a, b)


@pytest.mark.parametrize("method", ["auto", "direct", "fft"])
def test_method_is_accepted(method):
    a, b = RNG.standard_normal((9,)), RNG.standard_normal((4,))
    np.testing.assert_allclose(ks.convolve(a, b, "same", method), ss.convolve(a, b, "same", method), rtol=1e-12)
    np.testing.assert_allclose(ks.correlate(a, b, "valid", method=method), ss.correlate(a, b, "valid", method=method),
                               rtol=1e-12)


def test_dtypes():
    ai, bi = RNG.integers(-5, 5, (4, 5)), RNG.integers(-3, 3, (2, 2))
    eager_and_jit(ks.convolve, ss.convolve, ai, bi)  # integers stay integers, exact
    eager_and_jit(ks.correlate, ss.correlate, ai.astype(np.int32), bi.astype(np.int32))
    eager_and_jit(ks.convolve, ss.convolve, ai.astype(np.float32), bi.astype(np.float32))
    eager_and_jit(ks.convolve, lambda x, y: ss.convolve(x, y).astype(np.float64), ai.astype(np.float32), bi)
    flags = RNG.random((5,)) > 0.5
    eager_and_jit(ks.convolve, ss.convolve, flags, flags[:3])


@pytest.mark.parametrize("fn", ["convolve2d", "correlate2d"])
@pytest.mark.parametrize("shapes", [((5, 6), (2, 3)), ((2, 3), (5, 6)), ((5, 6), (3, 3)), ((7, 7), (4, 4))])
def test_two_d_boundaries(fn, shapes):
    a, b = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
    cases = [(m, bd, fv) for m in ("full", "same", "valid") for bd in ("fill", "wrap", "symm") for fv in (0, 2.5)
             if m == "valid" or all(x >= y for x, y in zip(*shapes))]  # scipy refuses wrap/symm past in1's size
    eager_and_jit(lambda x, y: tuple(getattr(ks, fn)(x, y, m, bd, fv) for m, bd, fv in cases),
                  lambda x, y: tuple(getattr(ss, fn)(x, y, m, bd, fv) for m, bd, fv in cases), a, b)


def test_boundary_aliases():
    a, b = RNG.standard_normal((5, 5)), RNG.standard_normal((3, 2))
    for alias in ("pad", "circular", "symmetric"):
        np.testing.assert_allclose(ks.convolve2d(a, b, "same", alias), ss.convolve2d(a, b, "same", alias), rtol=1e-12)


def test_exported_through_kiln_run(tmp_path):
    def kfn(x, y, v, w):
        return (ks.convolve(x, y, "same"), ks.correlate(x, y), ks.convolve(v, w, "valid"),
                ks.convolve2d(x, y, "same", "wrap"), ks.correlate2d(x, y, "full", "symm"),
                ks.convolve2d(x, y, "full", "fill", 1.5))

    def nfn(x, y, v, w):
        return (ss.convolve(x, y, "same"), ss.correlate(x, y), ss.convolve(v, w, "valid"),
                ss.convolve2d(x, y, "same", "wrap"), ss.correlate2d(x, y, "full", "symm"),
                ss.convolve2d(x, y, "full", "fill", 1.5))

    args = [RNG.standard_normal(s).astype(np.float32) for s in [(6, 5), (3, 2), (10,), (4,)]]
    eager_jit_and_kiln_run(kfn, nfn, *args, tmp_path=tmp_path, tol=1e-5)


@pytest.mark.parametrize("fn, mode, extra", [("convolve", "same", ()), ("correlate", "valid", ()),
                                             ("convolve2d", "same", ("wrap",)), ("correlate2d", "full", ("symm",)),
                                             ("convolve2d", "full", ("fill", 2.0))])
def test_gradients(fn, mode, extra):
    a, b = RNG.standard_normal((5, 4)), RNG.standard_normal((3, 2))
    weights = RNG.standard_normal(getattr(ss, fn)(a, b, mode, *extra).shape)

    def loss(k, x, y):
        return (getattr(k, fn)(x, y, mode, *extra) * weights).sum()

    ga, gb = kiln.grad(lambda x, y: loss(ks, x, y), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, numerical_grad(lambda x: loss(ss, x, b), a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, numerical_grad(lambda y: loss(ss, a, y), b), rtol=1e-6, atol=1e-8)


def test_fftconvolve():
    a, b = RNG.standard_normal((5, 7)), RNG.standard_normal((2, 3))
    modes = ("full", "same", "valid")
    eager_and_jit(lambda x, y: tuple(ks.fftconvolve(x, y, m) for m in modes),
                  lambda x, y: tuple(ss.fftconvolve(x, y, m) for m in modes), a, b)
    ints = RNG.integers(0, 5, (6,))
    eager_and_jit(ks.fftconvolve, ss.fftconvolve, ints, ints)  # float64, as scipy's FFT


@pytest.mark.parametrize("kind", ["linear", "constant", "l", "c"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_detrend(kind, axis):
    x = RNG.standard_normal((4, 9)) + np.arange(9) * 0.5
    eager_and_jit(lambda v: ks.detrend(v, axis, kind), lambda v: ss.detrend(v, axis, kind), x)
    eager_and_jit(lambda v: ks.detrend(v, axis, kind), lambda v: ss.detrend(v, axis, kind), x.astype(np.float32),
                  tol=1e-5)
    weights = RNG.standard_normal(x.shape)
    got = kiln.grad(lambda v: (ks.detrend(v, axis, kind) * weights).sum())(x)
    np.testing.assert_allclose(got, numerical_grad(lambda v: (ss.detrend(v, axis, kind) * weights).sum(), x),
                               rtol=1e-6, atol=1e-8)


def test_errors():
    with pytest.raises(ValueError, match="convolve: mode must be 'full', 'same' or 'valid', got 'wide'"):
        ks.convolve(np.ones(3), np.ones(2), "wide")
    with pytest.raises(ValueError, match="correlate: method must be 'auto', 'direct' or 'fft', got 'fast'"):
        ks.correlate(np.ones(3), np.ones(2), method="fast")
    with pytest.raises(ValueError, match="convolve: in1 and in2 should have the same dimensionality, got 2 and 1"):
        ks.convolve(np.ones((3, 3)), np.ones(2))
    with pytest.raises(ValueError, match="correlate: for 'valid' mode, one of in1 \\(3, 5\\) and in2 \\(4, 2\\)"):
        ks.correlate(np.ones((3, 5)), np.ones((4, 2)), "valid")
    with pytest.raises(ValueError, match="convolve2d: in1 and in2 must be 2-D arrays, got 1-D"):
        ks.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="correlate2d: boundary must be 'fill', 'wrap' or 'symm', got 'reflect'"):
        ks.correlate2d(np.ones((3, 3)), np.ones((2, 2)), boundary="reflect")
    with pytest.raises(NotImplementedError, match="fftconvolve: axes= is not supported"):
        ks.fftconvolve(np.ones((3, 3)), np.ones((2, 2)), axes=0)
    with pytest.raises(ValueError, match="detrend: type must be 'linear' or 'constant', got 'quadratic'"):
        ks.detrend(np.ones(5), type="quadratic")
    with pytest.raises(NotImplementedError, match="detrend: breakpoints \\(bp\\) are not supported"):
        ks.detrend(np.ones(5), bp=[2])
    with pytest.raises(ValueError, match="convolve2d: fillvalue must be a scalar"):
        ks.convolve2d(np.ones((3, 3)), np.ones((2, 2)), fillvalue=[1, 2])
