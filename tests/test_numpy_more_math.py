"""kiln.numpy's remaining math (more_math.py, array_math.py) against numpy: values, dtypes and shapes eagerly,
under kiln.jit and through kiln-run; gradients against float64 central differences; every error message."""
import warnings

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln_tools import eager_and_jit, eager_jit_and_kiln_run, random_array
from references import numerical_grad

RNG = np.random.default_rng(9)


def _specials(dtype):
    x = random_array(RNG, (10,), dtype) * 3
    x[:5] = [np.inf, -np.inf, -0.0, 0.0, np.nan]
    return x


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=str)
@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2", "hypot", "copysign", "heaviside"])
def test_binary(name, dtype):
    x, y = _specials(dtype), _specials(dtype)[::-1].copy()
    eager_and_jit(getattr(knp, name), getattr(np, name), x, y)
    eager_and_jit(getattr(knp, name), getattr(np, name), x[5:], np.asarray(1.5, dtype))


@pytest.mark.parametrize("name", ["logaddexp", "hypot", "copysign", "heaviside", "ldexp"])
def test_binary_integer_and_weak_operands(name):
    """Integer operands become numpy's float dtype; a Python number takes the array's dtype."""
    x = np.arange(-3, 4, dtype=np.int16)
    eager_and_jit(getattr(knp, name), getattr(np, name), x, np.int16(2))
    f32 = random_array(RNG, (4,), np.float32)
    assert knp.hypot(f32, 2.0).dtype == np.float32 and kiln.jit(lambda a: knp.hypot(a, 2.0))(f32).dtype == np.float32
    assert knp.logaddexp(1.0, 2.0).dtype == np.float64


UNARY = ["cbrt", "signbit", "sinc", "deg2rad", "rad2deg", "degrees", "radians", "positive", "conj", "conjugate",
         "real", "imag", "i0", "modf", "frexp"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int8, np.int32], ids=str)
def test_unary(dtype):
    """Every unary function eagerly, then all of them in one jitted function (one compile per dtype)."""
    x = _specials(dtype) if np.dtype(dtype).kind == "f" else np.arange(-4, 6, dtype=dtype)
    eager_and_jit(lambda v: [getattr(knp, n)(v) for n in UNARY], lambda v: [getattr(np, n)(v) for n in UNARY], x)


def test_unary_hard_values():
    eager_and_jit(knp.cbrt, np.cbrt, np.array([8.0, 27, -64, 1e-300, 1e300, 5e-324, 3.0]))
    eager_and_jit(knp.frexp, np.frexp, np.array([1e-310, 5e-324, 1.0, 0.5, 2.0 ** 52, -3.75, 1e308, 0.75]))
    eager_and_jit(knp.frexp, np.frexp, np.array([1e-40, 3.4e38, -0.1], np.float32))
    eager_and_jit(knp.i0, np.i0, np.array([0.0, 0.5, 5, 20, 39.9, 40, 41, 100, 700, -3]))
    eager_and_jit(knp.ldexp, np.ldexp, np.array([0.5, 0.5, 3.0, -1.0]), np.array([1024, -1074, 5, -2]))
    eager_and_jit(knp.ldexp, np.ldexp, np.float32(3), np.array([-150, -140, 0, 127, 128]))


def test_gcd_lcm():
    a = np.array([12, -18, 0, 7, 0, 2 ** 40, 1071], np.int64)
    b = np.array([8, 27, 5, 0, 0, 6, 462], np.int64)
    for fn in ("gcd", "lcm"):
        eager_and_jit(getattr(knp, fn), getattr(np, fn), a, b)
        eager_and_jit(getattr(knp, fn), getattr(np, fn), a[:5].astype(np.int8), np.int8(6))
    with pytest.raises(TypeError, match="gcd: only integer"):
        knp.gcd(np.ones(2), np.ones(2))


def test_elementwise_errors():
    with pytest.raises(TypeError, match="ldexp: the exponent x2 must be an integer"):
        knp.ldexp(np.ones(2), np.ones(2))
    with pytest.raises(TypeError, match="positive: numpy has no positive for booleans"):
        knp.positive(np.array([True]))
    with pytest.raises(TypeError, match="i0: numpy has no i0 for booleans"):
        knp.i0(np.array([True]))


ELEMENTWISE_LOSSES = [
    lambda x: knp.sum(knp.logaddexp(x, x[::-1] * 2)),
    lambda x: knp.sum(knp.logaddexp2(x, 0.5)),
    lambda x: knp.sum(knp.hypot(x, x[::-1] + 1)),
    lambda x: knp.sum(knp.cbrt(x)),
    lambda x: knp.sum(knp.sinc(x) * x),
    lambda x: knp.sum(knp.copysign(x, x[::-1])),
    lambda x: knp.sum(knp.deg2rad(x) ** 2),
    lambda x: knp.sum(knp.i0(x)),
    lambda x: knp.sum(knp.ldexp(x, np.arange(5)) * x),
]


def _check_gradients(losses, x):
    """Each loss's gradient against central differences, eagerly, then all of them under one jit."""
    want = [numerical_grad(f, x) for f in losses]
    for f, w in zip(losses, want):
        np.testing.assert_allclose(kiln.grad(f)(x), w, rtol=1e-6, atol=1e-8)
    for got, w in zip(kiln.jit(lambda v: [kiln.grad(f)(v) for f in losses])(x), want):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-8)


def test_elementwise_gradients():
    _check_gradients(ELEMENTWISE_LOSSES, np.array([0.3, -1.2, 2.5, 0.7, -0.4]))


def test_sinc_gradient_at_zero():
    assert kiln.grad(lambda x: knp.sinc(x))(0.0) == 0.0


def test_diff_and_ediff1d():
    x = random_array(RNG, (3, 5))
    xi = (np.arange(12, dtype=np.int32).reshape(3, 4)) ** 2
    eager_and_jit(lambda a: knp.diff(a, 2, axis=0), lambda a: np.diff(a, 2, axis=0), x)
    eager_and_jit(lambda a: knp.diff(a, 3), lambda a: np.diff(a, 3), x)
    eager_and_jit(lambda a: knp.diff(a, 0), lambda a: np.diff(a, 0), x)
    # prepend=0 is a weak Python number, as in JAX: the int32 difference stays int32 (numpy's widens to int64)
    eager_and_jit(lambda a: knp.diff(a, prepend=0, append=a[:, :1]),
                  lambda a: np.diff(a, prepend=np.int32(0), append=a[:, :1]), xi)
    eager_and_jit(knp.diff, np.diff, x > 0)
    eager_and_jit(lambda a: knp.ediff1d(a, to_end=[7, 8], to_begin=-1), lambda a: np.ediff1d(a, to_end=[7, 8], to_begin=-1), xi)
    eager_and_jit(knp.ediff1d, np.ediff1d, x)
    with pytest.raises(ValueError, match="diff: order n must be a non-negative int"):
        knp.diff(x, -1)
    with pytest.raises(ValueError, match="diff: requires input that is at least one dimensional"):
        knp.diff(np.float64(1))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient(edge_order):
    x = random_array(RNG, (4, 5))
    xi = np.arange(20, dtype=np.int32).reshape(4, 5) ** 2
    coords = np.array([0.0, 1, 1.5, 3.5, 4])
    g = {"edge_order": edge_order}
    eager_and_jit(lambda a: knp.gradient(a, **g), lambda a: np.gradient(a, **g), x)
    eager_and_jit(lambda a: knp.gradient(a, 2.0, axis=1, **g), lambda a: np.gradient(a, 2.0, axis=1, **g), xi)
    eager_and_jit(lambda a, c: knp.gradient(a, c, axis=-1, **g), lambda a, c: np.gradient(a, c, axis=-1, **g), x, coords)
    eager_and_jit(lambda a: knp.gradient(a, 0.5, [0, 1, 1.5, 3.5], **g),
                  lambda a: np.gradient(a, 0.5, [0, 1, 1.5, 3.5], **g), x.T.astype(np.float32), tol=1e-5)


def test_gradient_traced_spacing():
    """A traced scalar step (an argument of the jitted function) and the derivative with respect to it."""
    f = np.arange(6.0) ** 2
    eager_and_jit(lambda v, h: knp.gradient(v, h, edge_order=2), lambda v, h: np.gradient(v, h, edge_order=2), f, np.float64(0.5))
    loss = lambda h: knp.sum(knp.gradient(f, h[0]) ** 2)  # noqa: E731
    h = np.array([0.7])
    np.testing.assert_allclose(kiln.jit(kiln.grad(loss))(h), numerical_grad(loss, h), rtol=1e-6)


def test_gradient_errors():
    with pytest.raises(ValueError, match="gradient: shape of array too small"):
        knp.gradient(np.ones(2), edge_order=2)
    with pytest.raises(ValueError, match="gradient: edge_order must be 1 or 2"):
        knp.gradient(np.ones(4), edge_order=3)
    with pytest.raises(ValueError, match="gradient: when 1d, distances must match"):
        knp.gradient(np.ones(4), np.arange(3.0))
    with pytest.raises(TypeError, match="gradient: expected 0, 1 or 2 spacings"):
        knp.gradient(np.ones((3, 3)), 1.0, 2.0, 3.0)


def test_cross_and_kron():
    a, b = random_array(RNG, (4, 3)), random_array(RNG, (4, 3))
    eager_and_jit(knp.cross, np.cross, a, b)
    eager_and_jit(knp.cross, np.cross, a, b[0])
    eager_and_jit(lambda p, q: knp.cross(p, q, axisa=0, axisb=0, axisc=0), lambda p, q: np.cross(p, q, axisa=0, axisb=0, axisc=0), a.T, b.T)
    eager_and_jit(lambda p, q: knp.cross(p, q, axis=0), lambda p, q: np.cross(p, q, axis=0), a.T, b.T)
    eager_and_jit(knp.cross, np.cross, np.arange(6, dtype=np.int32).reshape(2, 3), np.array([1, -2, 3], np.int32))
    with warnings.catch_warnings():  # numpy 2 deprecates 2-vectors but still computes them
        warnings.simplefilter("ignore", DeprecationWarning)
        eager_and_jit(lambda p, q: knp.cross(p[:, :2], q), lambda p, q: np.cross(p[:, :2], q), a, b)
        eager_and_jit(lambda p, q: knp.cross(p[:, :2], q[:, :2]), lambda p, q: np.cross(p[:, :2], q[:, :2]), a, b)
    with pytest.raises(ValueError, match="cross: incompatible dimensions"):
        knp.cross(np.ones(4), np.ones(3))
    eager_and_jit(knp.kron, np.kron, np.arange(6, dtype=np.int32).reshape(2, 3), random_array(RNG, (3, 2)))
    eager_and_jit(knp.kron, np.kron, np.arange(3), np.ones((2, 2), np.int32))
    eager_and_jit(knp.kron, np.kron, random_array(RNG, (2, 1, 2)), random_array(RNG, (3, 2)))


@pytest.mark.parametrize("lengths", [(5, 3), (3, 5), (4, 2), (2, 4), (4, 4), (1, 3)], ids=str)
def test_convolve_correlate(lengths):
    a, v = random_array(RNG, (lengths[0],)), random_array(RNG, (lengths[1],))
    modes = ("full", "same", "valid")
    eager_and_jit(lambda p, q: [f(p, q, m) for f in (knp.convolve, knp.correlate) for m in modes],
                  lambda p, q: [f(p, q, m) for f in (np.convolve, np.correlate) for m in modes], a, v)


def test_convolve_dtypes_and_errors():
    eager_and_jit(knp.convolve, np.convolve, np.arange(4, dtype=np.int32), np.array([1, 2], np.int32))
    eager_and_jit(knp.convolve, np.convolve, np.array([True, False, True]), np.array([True, True]))
    eager_and_jit(knp.correlate, np.correlate, np.arange(4, dtype=np.float32), np.array([1.0, 0.5], np.float32))
    with pytest.raises(ValueError, match="convolve: mode must be 'full', 'same' or 'valid'"):
        knp.convolve(np.ones(3), np.ones(2), "circular")
    with pytest.raises(ValueError, match="correlate: `v` cannot be empty"):
        knp.correlate(np.ones(3), np.ones(0))
    with pytest.raises(ValueError, match="convolve: `a` must be one-dimensional"):
        knp.convolve(np.ones((2, 2)), np.ones(2))


def test_interp():
    xp, fp = np.array([0.0, 1, 2.5, 4]), np.array([1.0, 3, -1, 2])
    x = np.array([-1, 0, 0.5, 1, 3, 4, 5, np.nan])
    eager_and_jit(knp.interp, np.interp, x, xp, fp)
    eager_and_jit(lambda a, b, c: knp.interp(a, b, c, left=-9, right=9), lambda a, b, c: np.interp(a, b, c, left=-9, right=9), x, xp, fp)
    eager_and_jit(knp.interp, np.interp, x.astype(np.float32).reshape(2, 4), xp.astype(np.float32), fp)
    eager_and_jit(knp.interp, np.interp, x, xp[:1], fp[:1])
    eager_and_jit(lambda a, b, c: knp.interp(a, b, c, period=360), lambda a, b, c: np.interp(a, b, c, period=360),
                  np.array([-180.0, -170, 0, 190, 350, 355]), np.array([190.0, -190, 350, -350]), np.array([5.0, 10, 3, 4]))
    with pytest.raises(ValueError, match="interp: fp and xp are not of the same length"):
        knp.interp(x, xp, fp[:3])
    with pytest.raises(ValueError, match="interp: period must be a non-zero value"):
        knp.interp(x, xp, fp, period=0)
    with pytest.raises(ValueError, match="interp: array of sample points is empty"):
        knp.interp(x, xp[:0], fp[:0])


def test_trapezoid_and_cumulative():
    y = random_array(RNG, (3, 5))
    yi = np.arange(15, dtype=np.int32).reshape(3, 5)
    eager_and_jit(knp.trapezoid, np.trapezoid, y)
    eager_and_jit(lambda a: knp.trapezoid(a, dx=0.5, axis=0), lambda a: np.trapezoid(a, dx=0.5, axis=0), yi)
    eager_and_jit(lambda a, c: knp.trapezoid(a, c), lambda a, c: np.trapezoid(a, c), y, np.array([0.0, 1, 1.5, 3.5, 4]))
    eager_and_jit(lambda a, c: knp.trapezoid(a, c, axis=0), lambda a, c: np.trapezoid(a, c, axis=0), y, y ** 2)
    eager_and_jit(lambda a: knp.cumulative_sum(a, axis=1, include_initial=True),
                  lambda a: np.cumulative_sum(a, axis=1, include_initial=True), yi.astype(np.int8))
    eager_and_jit(lambda a: knp.cumulative_prod(a, include_initial=True), lambda a: np.cumulative_prod(a, include_initial=True), y[0])
    eager_and_jit(lambda a: knp.cumulative_sum(a, axis=0, dtype=np.float32), lambda a: np.cumulative_sum(a, axis=0, dtype=np.float32), yi)
    with pytest.raises(ValueError, match="cumulative_sum: axis must be given"):
        knp.cumulative_sum(y)


def test_vander_and_polyval():
    eager_and_jit(knp.vander, np.vander, np.array([1, 2, 3, 5], np.int32))
    eager_and_jit(lambda a: knp.vander(a, 3, increasing=True), lambda a: np.vander(a, 3, increasing=True), random_array(RNG, (4,)))
    eager_and_jit(lambda a: knp.vander(a, 1), lambda a: np.vander(a, 1), random_array(RNG, (4,)))
    eager_and_jit(knp.polyval, np.polyval, np.array([3.0, 0, 1]), random_array(RNG, (2, 3)))
    eager_and_jit(knp.polyval, np.polyval, np.array([3, 0, -1]), np.arange(6, dtype=np.int32))
    eager_and_jit(knp.polyval, np.polyval, np.array([1.5, 2], np.float32), random_array(RNG, (3,), np.float32))
    with pytest.raises(ValueError, match="vander: x must be a one-dimensional"):
        knp.vander(np.ones((2, 2)))
    with pytest.raises(ValueError, match="polyval: p must be one-dimensional"):
        knp.polyval(np.ones((2, 2)), 1.0)


ARRAY_MATH_LOSSES = [
    lambda x: knp.sum(knp.diff(x, 2) ** 2),
    lambda x: knp.sum(knp.gradient(x, np.array([0.0, 0.5, 1.5, 2, 3]), edge_order=2) ** 2),
    lambda x: knp.sum(knp.convolve(x, x[:3] * 2, "same") ** 2),
    lambda x: knp.sum(knp.correlate(x, np.array([1.0, -2, 0.5])) ** 2),
    lambda x: knp.sum(knp.interp(np.array([0.2, 1.7, 3.1]), np.arange(5.0), x) ** 2),
    lambda x: knp.sum(knp.interp(x, np.arange(6.0), np.arange(6.0) ** 2)),
    lambda x: knp.trapezoid(x ** 2, np.array([0.0, 0.5, 1.5, 2, 3])),
    lambda x: knp.sum(knp.cross(x[:3], x[2:]) ** 2),
    lambda x: knp.sum(knp.kron(x[:2], x) ** 2),
    lambda x: knp.polyval(x, 1.3),
]


def test_array_math_gradients():
    _check_gradients(ARRAY_MATH_LOSSES, np.array([0.3, 1.2, 2.5, 0.7, 1.4]))


def test_exported(tmp_path):
    """A few of each kind through the standalone kiln-run."""
    x = random_array(RNG, (6,), np.float32)
    y = random_array(RNG, (6,), np.float32)

    def kfn(a, b):
        return (knp.logaddexp(a, b), knp.hypot(a, b), knp.cbrt(a), knp.signbit(a), knp.copysign(a, b), knp.sinc(a),
                *knp.frexp(a), *knp.modf(a), knp.ldexp(a, np.arange(6)), knp.i0(a), knp.deg2rad(a))

    def nfn(a, b):
        return (np.logaddexp(a, b), np.hypot(a, b), np.cbrt(a), np.signbit(a), np.copysign(a, b), np.sinc(a),
                *np.frexp(a), *np.modf(a), np.ldexp(a, np.arange(6)), np.i0(a), np.deg2rad(a))

    eager_jit_and_kiln_run(kfn, nfn, x, y, tmp_path=tmp_path, tol=1e-5)

    def kfn2(a, b):
        return (knp.diff(a, 2), knp.gradient(a, edge_order=2), knp.convolve(a, b[:3], "same"), knp.correlate(a, b[:2]),
                knp.interp(b, np.arange(6.0, dtype=np.float32), a), knp.trapezoid(a), knp.cross(a[:3], b[3:]),
                knp.kron(a[:2], b[:3]), knp.vander(a[:3]), knp.polyval(a[:3], b),
                knp.cumulative_sum(a, include_initial=True))

    def nfn2(a, b):
        return (np.diff(a, 2), np.gradient(a, edge_order=2), np.convolve(a, b[:3], "same"), np.correlate(a, b[:2]),
                np.interp(b, np.arange(6.0, dtype=np.float32), a), np.trapezoid(a), np.cross(a[:3], b[3:]),
                np.kron(a[:2], b[:3]), np.vander(a[:3]), np.polyval(a[:3], b),
                np.cumulative_sum(a, include_initial=True))

    eager_jit_and_kiln_run(kfn2, nfn2, x, y, tmp_path=tmp_path, tol=1e-5)
    a, b = np.array([12, -18, 0, 7], np.int32), np.array([8, 27, 5, 0], np.int32)
    eager_jit_and_kiln_run(lambda p, q: (knp.gcd(p, q), knp.lcm(p, q)), lambda p, q: (np.gcd(p, q), np.lcm(p, q)),
                           a, b, tmp_path=tmp_path)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16], ids=str)
def test_nextafter_spacing(dtype):
    """Exact (tol 0), subnormals, infinities and the largest float included."""
    x = np.array([1.0, -1.0, 0.0, -0.0, 0.5, 3.0, 1e-310, 5e-324, np.inf, -np.inf, np.nan, 1.7976931348623157e308,
                  2.0 ** -1022], dtype=np.float64)
    y = np.array([2.0, -2.0, 1.0, -1.0, 0.0, -5.0, 0.0, 1.0, 0.0, 0.0, 1.0, np.inf, 0.0])
    with np.errstate(over="ignore"):
        x, y = x.astype(dtype), y.astype(dtype)
    eager_and_jit(knp.nextafter, np.nextafter, x, y, tol=0)
    # numpy's float16 spacing of a negative number is not away from zero (a numpy quirk); kiln's is
    eager_and_jit(knp.spacing, np.spacing, np.abs(x) if dtype == np.float16 else x, tol=0)


def test_small_math_additions():
    x = _specials(np.float64)
    eager_and_jit(knp.fabs, np.fabs, np.arange(-3, 3, dtype=np.int8))
    eager_and_jit(knp.fabs, np.fabs, x)
    eager_and_jit(knp.isposinf, np.isposinf, x)
    eager_and_jit(knp.isneginf, np.isneginf, x)
    eager_and_jit(knp.isneginf, np.isneginf, np.arange(3))
    eager_and_jit(knp.bitwise_count, np.bitwise_count, np.array([-3, 7, -127, 0, 100], np.int8))
    eager_and_jit(knp.bitwise_count, np.bitwise_count, np.array([-3, 7, 2 ** 62 + 5, 0, -100], np.int64))
    eager_and_jit(knp.angle, np.angle, np.array([1, -2, 0]))
    eager_and_jit(lambda z: knp.angle(z, deg=True), lambda z: np.angle(z, deg=True), np.array([-0.0, 1.0, -3.0], np.float32))
    eager_and_jit(knp.unwrap, np.unwrap, np.array([0, 1, 5, 6, 12, 3.0]))
    eager_and_jit(lambda p: knp.unwrap(p, period=4), lambda p: np.unwrap(p, period=4), np.array([0, 1, 5, 6, 12, 3]))
    eager_and_jit(knp.unwrap, np.unwrap, np.array([0, 1, 5, 6, 12, 3]))  # integer phases, float period: float64
    eager_and_jit(lambda p: knp.unwrap(p, discont=4, axis=0), lambda p: np.unwrap(p, discont=4, axis=0),
                  random_array(RNG, (5, 3)) * 4)
    with pytest.raises(TypeError, match="bitwise_count: only integer"):
        knp.bitwise_count(np.ones(2))
    f = lambda v: knp.sum(knp.unwrap(v * 3) ** 2 + knp.fabs(v))  # noqa: E731
    v = np.array([0.3, -1.2, 2.5, 0.7, -0.4])
    np.testing.assert_allclose(kiln.grad(f)(v), numerical_grad(f, v), rtol=1e-6, atol=1e-8)


def test_polynomials():
    a, b = np.array([1.0, 2, 3]), np.array([4.0, -5])
    ai, bi = np.array([1, 2, 3]), np.array([2, -1], np.int32)
    for name in ("polyadd", "polysub", "polymul"):
        kfn, nfn = getattr(knp, name), getattr(np, name)
        eager_and_jit(kfn, nfn, a, b)
        eager_and_jit(kfn, nfn, ai, bi)
        eager_and_jit(kfn, nfn, b, a.astype(np.float32))
    eager_and_jit(lambda p: knp.polyder(p, 2), lambda p: np.polyder(p, 2), np.array([1.0, 2, 3, 4]))
    eager_and_jit(knp.polyder, np.polyder, ai)
    eager_and_jit(lambda p: knp.polyint(p, 2, k=[1, 2]), lambda p: np.polyint(p, 2, k=[1, 2]), a)
    eager_and_jit(knp.polyint, np.polyint, ai)
    eager_and_jit(lambda p: knp.polyint(p, 3, k=7), lambda p: np.polyint(p, 3, k=7), a.astype(np.float32))
    eager_and_jit(knp.poly, np.poly, np.array([1.0, -2, 3]))
    eager_and_jit(knp.poly, np.poly, np.array([1, 2]))
    assert knp.poly([]) == np.poly([]) == 1.0
    u, v = np.array([3.0, 5, 2]), np.array([2.0, 1])
    from kiln_tools import check_like_numpy

    check_like_numpy(knp.polydiv(u, v), np.polydiv(u, v))
    check_like_numpy(knp.polydiv(np.array([1.0, 0, 0, -1]), np.array([1.0, -1])), np.polydiv(np.array([1.0, 0, 0, -1]), np.array([1.0, -1])))
    quotient, remainder = kiln.jit(knp.polydiv)(u, v)  # traced: the remainder keeps the dividend's length
    check_like_numpy([quotient, remainder], [np.polydiv(u, v)[0], np.array([0.0, 0.0, 0.25])])
    with pytest.raises(ValueError, match="polyder: order of derivative must be positive"):
        knp.polyder(a, -1)
    with pytest.raises(ValueError, match="polyint: k must be a scalar or a rank-1 array"):
        knp.polyint(a, 3, k=[1, 2])
    with pytest.raises(ValueError, match="poly: only a 1-D sequence of roots is supported"):
        knp.poly(np.eye(2))
    f = lambda p: knp.sum(knp.polymul(p, knp.polyder(p)) ** 2) + knp.sum(knp.polydiv(p, p[:2])[0])  # noqa: E731
    p = np.array([0.3, 1.2, -2.5, 0.7])
    np.testing.assert_allclose(kiln.grad(f)(p), numerical_grad(f, p), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("length", [0, 1, 5, 6])
def test_windows(length):
    for name in ("bartlett", "blackman", "hamming", "hanning"):
        eager_and_jit(lambda: getattr(knp, name)(length), lambda: getattr(np, name)(length))
    eager_and_jit(lambda: knp.kaiser(length, 5.0), lambda: np.kaiser(length, 5.0))
    if length > 1:
        eager_and_jit(lambda b: knp.kaiser(length, b), lambda b: np.kaiser(length, b), np.float64(3.5))
    with pytest.raises(TypeError, match="hanning: the window length M must be a Python int"):
        kiln.jit(knp.hanning)(np.int32(3))


def test_exported_additions(tmp_path):
    a = random_array(RNG, (5,), np.float32)
    eager_jit_and_kiln_run(
        lambda p: (knp.polyadd(p, p[:2]), knp.polyder(p), knp.polyint(p), knp.polymul(p[:3], p[3:]), knp.nextafter(p, 0),
                   knp.spacing(p), knp.unwrap(p * 4), knp.fabs(p), knp.kaiser(5, 2.0)),
        lambda p: (np.polyadd(p, p[:2]), np.polyder(p), np.polyint(p), np.polymul(p[:3], p[3:]), np.nextafter(p, np.float32(0)),
                   np.spacing(p), np.unwrap(p * 4), np.fabs(p), np.kaiser(5, 2.0)),
        a, tmp_path=tmp_path, tol=1e-5)


def test_jax_keywords():
    """jax.numpy's extra keywords, so ported code runs unchanged."""
    a, v = np.arange(4, dtype=np.int8), np.array([1, 2], np.int8)
    eager_and_jit(lambda p, q: knp.convolve(p, q, precision="highest", preferred_element_type=np.int32),
                  lambda p, q: np.convolve(p.astype(np.int32), q.astype(np.int32)), a, v)
    eager_and_jit(lambda p, q: knp.correlate(p, q, "full", preferred_element_type=np.float32),
                  lambda p, q: np.correlate(p.astype(np.float32), q.astype(np.float32), "full"), a, v)
    eager_and_jit(lambda p: knp.polyval(p, 2.0, unroll=4), lambda p: np.polyval(p, 2.0), np.array([1.0, 2, 3]))
    eager_and_jit(lambda f: knp.gradient(f, edge_order=None), np.gradient, np.arange(5.0) ** 2)
    eager_and_jit(lambda: knp.polymul(np.array([0.0, 0, 1, 2]), np.array([0.0, 3]), trim_leading_zeros=True),
                  lambda: np.polymul([1.0, 2], [3.0]))
    u, w = np.array([3.0, 5, 2]), np.array([2.0, 1])
    eager_and_jit(lambda p, q: knp.polydiv(p, q, trim_leading_zeros=False), lambda p, q: (np.polydiv(p, q)[0], np.array([0.0, 0, 0.25])), u, w)
    with pytest.raises(ValueError, match="convolve: precision must be None"):
        knp.convolve(a, v, precision="bogus")
    with pytest.raises(TypeError, match="polydiv: trim_leading_zeros=True needs concrete operands"):
        kiln.jit(lambda p, q: knp.polydiv(p, q, trim_leading_zeros=True))(u, w)
