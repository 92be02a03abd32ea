"""kiln.scipy's smaller modules (JAX's jax.scipy.integrate, cluster.vq, ndimage, ...): against scipy, eagerly,
under kiln.jit (the C runtime) and, once per module, exported to kiln-run."""
import numpy as np
import pytest
import scipy.cluster.vq
import scipy.fft
import scipy.integrate
import scipy.interpolate
import scipy.ndimage
import scipy.spatial.transform

import kiln
import kiln.scipy.cluster.vq as kvq
import kiln.scipy.fft as kfft
import kiln.scipy.integrate as kintegrate
import kiln.scipy.interpolate as kinterpolate
import kiln.numpy as knp
import kiln.scipy.ndimage as kndimage
from kiln.scipy.optimize import minimize as kminimize
from kiln.scipy.spatial.transform import Rotation as kRotation, Slerp as kSlerp
from kiln_tools import check_like_numpy, kiln_run_exported

RNG = np.random.default_rng(11)


def test_trapezoid_is_scipys():
    y = RNG.standard_normal((4, 9))
    x = np.sort(RNG.uniform(0, 3, 9))
    check_like_numpy(kintegrate.trapezoid(y, x, axis=-1), scipy.integrate.trapezoid(y, x, axis=-1))
    check_like_numpy(kiln.jit(lambda y: kintegrate.trapezoid(y, dx=0.5, axis=0))(y),
                     scipy.integrate.trapezoid(y, dx=0.5, axis=0))


def test_vq_nearest_codes_and_distances(tmp_path):
    obs, book = RNG.standard_normal((9, 3)), RNG.standard_normal((4, 3))
    want = scipy.cluster.vq.vq(obs, book)
    check_like_numpy(kvq.vq(obs, book), want)
    check_like_numpy(kiln.jit(kvq.vq)(obs, book), want)
    check_like_numpy(kiln_run_exported(kvq.vq, obs, book, tmp_path=tmp_path), want)
    flat_obs, flat_book = np.array([0.0, 1.2, 2.9, 5.0]), np.array([1.0, 3.0])
    check_like_numpy(kvq.vq(flat_obs, flat_book), scipy.cluster.vq.vq(flat_obs, flat_book))
    codes, dist = kiln.jit(kvq.vq)(obs.astype(np.float32), book.astype(np.float32))
    assert codes.dtype == np.int32 and dist.dtype == np.float32


def test_vq_errors():
    with pytest.raises(ValueError, match="same rank; got 2 and 1"):
        kvq.vq(np.ones((2, 3)), np.ones(3))
    with pytest.raises(ValueError, match="observations have 3 features and codes 2"):
        kvq.vq(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="1-d or 2-d; got rank 3"):
        kvq.vq(np.ones((2, 3, 1)), np.ones((4, 3, 1)))


# kiln's (JAX's) mode -> scipy's name for the same boundary rule
MODES = {"constant": "grid-constant", "nearest": "nearest", "wrap": "grid-wrap", "mirror": "mirror",
         "reflect": "reflect"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", [0, 1])
def test_map_coordinates_matches_scipy(mode, order):
    image = RNG.standard_normal((5, 7))
    coords = [RNG.uniform(-4, 9, (3, 8)), RNG.uniform(-4, 11, (3, 8))]
    want = scipy.ndimage.map_coordinates(image, coords, order=order, mode=MODES[mode], cval=1.5)
    check_like_numpy(kndimage.map_coordinates(image, coords, order, mode=mode, cval=1.5), want)
    got = kiln.jit(lambda im, a, b: kndimage.map_coordinates(im, [a, b], order, mode=mode, cval=1.5))(image, *coords)
    check_like_numpy(got, want)


def test_map_coordinates_dtypes_shapes_and_export(tmp_path):
    volume = RNG.integers(0, 200, (4, 3, 5)).astype(np.int32)
    coords = [RNG.uniform(-1, 4, 6), RNG.uniform(-1, 3, 6), RNG.uniform(-1, 5, 6)]
    want = scipy.ndimage.map_coordinates(volume, coords, order=1, mode="nearest")
    check_like_numpy(kndimage.map_coordinates(volume, coords, 1, mode="nearest"), want)
    signal = RNG.standard_normal(10).astype(np.float32)
    at = np.linspace(-2, 12, 17, dtype=np.float32)
    fn = lambda s, t: kndimage.map_coordinates(s, [t], 1, mode="grid-wrap")  # noqa: E731 - scipy's name
    want = scipy.ndimage.map_coordinates(signal, [at], order=1, mode="grid-wrap")
    check_like_numpy(kiln_run_exported(fn, signal, at, tmp_path=tmp_path), want, tol=1e-5)
    assert kiln.jit(fn)(signal, at).dtype == np.float32


def test_map_coordinates_errors():
    with pytest.raises(ValueError, match="length input.ndim = 2; got 1"):
        kndimage.map_coordinates(np.ones((2, 2)), [np.zeros(3)], 1)
    with pytest.raises(NotImplementedError, match="order 3 is not supported"):
        kndimage.map_coordinates(np.ones(4), [np.zeros(3)], 3)
    with pytest.raises(NotImplementedError, match="mode 'spline' is not supported"):
        kndimage.map_coordinates(np.ones(4), [np.zeros(3)], 1, mode="spline")


@pytest.mark.parametrize("kind", [1, 2, 3, 4])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_dct_family_matches_scipy(kind, norm):
    x = RNG.standard_normal((3, 7))
    for name in ("dct", "idct"):
        for n in (None, 5, 10):
            check_like_numpy(getattr(kfft, name)(x, type=kind, n=n, norm=norm),
                             getattr(scipy.fft, name)(x, type=kind, n=n, norm=norm))
    check_like_numpy(kfft.dctn(x, type=kind, norm=norm), scipy.fft.dctn(x, type=kind, norm=norm))
    check_like_numpy(kfft.idctn(x, type=kind, s=(4, 6), norm=norm), scipy.fft.idctn(x, type=kind, s=(4, 6), norm=norm))
    roundtrip = kfft.idct(kfft.dct(x, type=kind, norm=norm), type=kind, norm=norm)
    np.testing.assert_allclose(roundtrip, x, rtol=1e-12, atol=1e-12)


def test_dct_dtypes_complex_jit_and_export(tmp_path):
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    fn = lambda v: (kfft.dct(v, axis=0), kfft.idctn(v, type=3, norm="ortho"))  # noqa: E731
    want = (scipy.fft.dct(x, axis=0), scipy.fft.idctn(x, type=3, norm="ortho"))
    check_like_numpy(kiln.jit(fn)(x), want, tol=2e-5)
    check_like_numpy(kiln_run_exported(fn, x, tmp_path=tmp_path), want, tol=2e-5)
    z = RNG.standard_normal(8) + 1j * RNG.standard_normal(8)
    check_like_numpy(kfft.dct(z, type=4), scipy.fft.dct(z, type=4))
    check_like_numpy(kfft.dct(np.arange(6)), scipy.fft.dct(np.arange(6)))


def test_dct_errors():
    with pytest.raises(ValueError, match="type must be 1, 2, 3 or 4; got 5"):
        kfft.dct(np.ones(4), type=5)
    with pytest.raises(ValueError, match="at least 2 points along the axis; got 1"):
        kfft.dct(np.ones(1), type=1)
    with pytest.raises(ValueError, match="Invalid norm value"):
        kfft.idct(np.ones(4), norm="both")
    with pytest.raises(NotImplementedError, match="orthogonalize=False with norm='ortho'"):
        kfft.dct(np.ones(4), norm="ortho", orthogonalize=False)
    with pytest.raises(ValueError, match=r"invalid number of data points \(0\)"):
        kfft.dct(np.ones(4), n=0)


def rosenbrock(x):
    return knp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.parametrize("method", ["BFGS", "l-bfgs-experimental-do-not-rely-on-this"])
def test_minimize_finds_minima(method):
    result = kminimize(rosenbrock, np.array([-1.2, 1.0]), method=method)
    np.testing.assert_allclose(result.x, [1.0, 1.0], atol=1e-4)
    # L-BFGS stops as JAX's does once a step lowers f by less than ftol (status 4, no success)
    assert bool(result.success) == (method == "BFGS") and int(result.status) == (0 if method == "BFGS" else 4)
    assert int(result.nit) > 5
    assert int(result.nfev) >= int(result.nit) and result.nfev == result.njev
    assert np.max(np.abs(result.jac)) < (1e-5 if method == "BFGS" else 1e-3)
    a, b = np.array([[3.0, 1.0], [1.0, 2.0]]), np.array([1.0, -1.0])
    quadratic = lambda x, a, b: 0.5 * x @ a @ x - b @ x  # noqa: E731
    result = kminimize(quadratic, np.zeros(2), args=(a, b), method=method, tol=1e-10)
    # (L-BFGS: JAX's ftol stop (status 4) comes before gtol=1e-10, as with JAX's options={"gtol": 1e-10})
    np.testing.assert_allclose(result.x, np.linalg.solve(a, b), rtol=1e-8 if method == "BFGS" else 1e-5)
    np.testing.assert_allclose(result.fun, -0.5 * b @ np.linalg.solve(a, b), rtol=1e-12)
    if method == "BFGS":
        np.testing.assert_allclose(result.hess_inv, np.linalg.inv(a), atol=1e-6)
    else:
        assert result.hess_inv is None


def test_minimize_under_jit_and_vmap_and_statuses():
    starts = np.array([[-1.2, 1.0], [2.0, 2.0], [0.0, -1.0]])
    solve = kiln.jit(kiln.vmap(lambda x0: kminimize(rosenbrock, x0, method="BFGS").x))
    np.testing.assert_allclose(solve(starts), np.ones((3, 2)), atol=1e-4)
    capped = kminimize(rosenbrock, np.array([-1.2, 1.0]), method="BFGS", options={"maxiter": 2})
    assert int(capped.status) == 1 and not bool(capped.success) and int(capped.nit) == 2
    unbounded = kminimize(lambda x: -knp.sum(x), np.zeros(2), method="BFGS")
    # JAX's status 2 + the line search's 3 (its maxiter reached), after one iteration of 11 evaluations
    assert (int(unbounded.status), int(unbounded.nit), int(unbounded.nfev)) == (5, 1, 11)
    assert not bool(unbounded.success)
    float32 = kiln.jit(lambda x0: kminimize(rosenbrock, x0, method="BFGS", options={"gtol": 1e-3}).x)(
        np.array([-1.2, 1.0], np.float32))
    assert float32.dtype == np.float32
    np.testing.assert_allclose(float32, [1.0, 1.0], atol=2e-2)


def himmelblau(x):
    return (x[0] ** 2 + x[1] - 11) ** 2 + (x[0] + x[1] ** 2 - 7) ** 2


def weighted_quadratic(x):
    return knp.sum((x - knp.arange(x.shape[0])) ** 2 * (1 + knp.arange(x.shape[0])))


@pytest.mark.parametrize("method,fun,x0,options,status,nit,nfev,x", [
    # JAX 0.10.2's jax.scipy.optimize.minimize on float32 starts (status, nit, nfev and x recorded from it)
    ("BFGS", himmelblau, [0.5, -1.0], {}, 0, 8, 16, [3.584428310394287, -1.8481265306472778]),
    ("BFGS", rosenbrock, [0.0, 0.0, 0.0], {"maxiter": 3}, 1, 3, 16, [0.226446, 0.0362931, -0.00052977]),
    ("BFGS", weighted_quadratic, [1.0] * 5, {}, 0, 10, 12, [0.0, 1.0, 2.0, 3.0, 4.0]),
    ("l-bfgs-experimental-do-not-rely-on-this", weighted_quadratic, [1.0] * 5, {}, 0, 8, 10, [0.0, 1.0, 2.0, 3.0, 4.0]),
])
def test_minimize_follows_jax_step_for_step(method, fun, x0, options, status, nit, nfev, x):
    """kiln's BFGS, L-BFGS and line search are JAX's, step for step: the same iterations and evaluations."""
    result = kminimize(fun, np.array(x0, np.float32), method=method, options=options)
    assert (int(result.status), int(result.nit), int(result.nfev), int(result.njev)) == (status, nit, nfev, nfev)
    assert result.x.dtype == np.float32
    np.testing.assert_allclose(result.x, x, rtol=1e-4, atol=1e-5)


def test_minimize_errors():
    with pytest.raises(ValueError, match="method 'Nelder-Mead' is not supported"):
        kminimize(rosenbrock, np.zeros(2), method="Nelder-Mead")
    with pytest.raises(ValueError, match=r"x0 must be one-dimensional; got shape \(2, 2\)"):
        kminimize(rosenbrock, np.zeros((2, 2)), method="BFGS")
    with pytest.raises(TypeError, match="x0 must be real; got complex128"):  # was cast, dropping the imaginary part
        kminimize(rosenbrock, np.zeros(2, complex), method="l-bfgs-experimental-do-not-rely-on-this")
    with pytest.raises(TypeError, match="args must be a tuple; got list"):
        kminimize(rosenbrock, np.zeros(2), args=[1], method="BFGS")
    with pytest.raises(TypeError, match=r"unknown options \['maxcor'\]"):
        kminimize(rosenbrock, np.zeros(2), method="BFGS", options={"maxcor": 3})
    with pytest.raises(TypeError, match=r"unknown options \['line_search_maxiter'\]"):  # L-BFGS's is maxls
        kminimize(rosenbrock, np.zeros(2), method="l-bfgs-experimental-do-not-rely-on-this",
                  options={"line_search_maxiter": 3})


@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_regular_grid_interpolator_matches_scipy(method):
    x, y = np.sort(RNG.uniform(0, 5, 6)), np.sort(RNG.uniform(-2, 2, 4))
    values = RNG.standard_normal((6, 4, 3))
    points = np.stack([RNG.uniform(x[0] - 0.3, x[-1] + 0.3, 25), RNG.uniform(y[0] - 0.3, y[-1] + 0.3, 25)], -1)
    for fill in (np.nan, None, 0.5):
        got = kinterpolate.RegularGridInterpolator((x, y), values, method=method, fill_value=fill)(points)
        want = scipy.interpolate.RegularGridInterpolator((x, y), values, method=method, fill_value=fill,
                                                         bounds_error=False)(points)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    interpolator = kinterpolate.RegularGridInterpolator((x, y), values[..., 0], method=method, fill_value=None)
    want = scipy.interpolate.RegularGridInterpolator((x, y), values[..., 0], method=method, fill_value=None,
                                                     bounds_error=False)
    np.testing.assert_allclose(kiln.jit(lambda r, q: r(q))(interpolator, points), want(points), rtol=1e-12)
    grid = np.meshgrid(np.linspace(0, 5, 3), np.linspace(-2, 2, 2), indexing="ij")
    np.testing.assert_allclose(interpolator(tuple(grid)), want(tuple(grid)), rtol=1e-12)
    other = "nearest" if method == "linear" else "linear"
    np.testing.assert_allclose(interpolator(points, method=other), want(points, method=other), rtol=1e-12)
    # a 1-d query is points of ndim coordinates (scipy's and JAX's rule): one point gives shape (1,)
    single = interpolator(points[3])
    assert single.shape == (1,)
    np.testing.assert_allclose(single, want(points[3]), rtol=1e-12)
    line = scipy.interpolate.RegularGridInterpolator((x,), values[:, 0, 0], method=method)
    np.testing.assert_allclose(kinterpolate.RegularGridInterpolator((x,), values[:, 0, 0], method=method)(x[1:4] + 0.1),
                               line(x[1:4] + 0.1), rtol=1e-12)


def test_regular_grid_interpolator_errors():
    grid, values = (np.arange(3.0), np.arange(4.0)), np.zeros((3, 4))
    with pytest.raises(ValueError, match="method must be 'linear' or 'nearest'; got 'cubic'"):
        kinterpolate.RegularGridInterpolator(grid, values, method="cubic")
    with pytest.raises(NotImplementedError, match="bounds_error=True is not supported"):
        kinterpolate.RegularGridInterpolator(grid, values, bounds_error=True)
    with pytest.raises(ValueError, match="there are 4 points and 3 values in dimension 0"):
        kinterpolate.RegularGridInterpolator((np.arange(4.0), np.arange(4.0)), values)
    with pytest.raises(ValueError, match="dimension 1 must be strictly ascending"):
        kinterpolate.RegularGridInterpolator((np.arange(3.0), np.array([0.0, 2.0, 1.0, 3.0])), values)
    with pytest.raises(ValueError, match="the requested points have dimension 3, but this interpolator has dimension 2"):
        kinterpolate.RegularGridInterpolator(grid, values)(np.zeros((5, 3)))


def test_rotation_conversions_match_scipy():
    quat = RNG.standard_normal((6, 4))
    ours, theirs = kRotation.from_quat(quat), scipy.spatial.transform.Rotation.from_quat(quat)
    for name in ("as_matrix", "as_rotvec", "as_mrp", "magnitude"):
        np.testing.assert_allclose(getattr(ours, name)(), getattr(theirs, name)(), atol=1e-12, err_msg=name)
    np.testing.assert_allclose(ours.as_rotvec(degrees=True), theirs.as_rotvec(degrees=True), atol=1e-10)
    np.testing.assert_allclose(ours.as_quat(canonical=True, scalar_first=True),
                               theirs.as_quat(canonical=True, scalar_first=True), atol=1e-12)
    matrices = theirs.as_matrix()
    np.testing.assert_allclose(kRotation.from_matrix(matrices).as_quat(canonical=True),
                               scipy.spatial.transform.Rotation.from_matrix(matrices).as_quat(canonical=True), atol=1e-12)
    rotvec = RNG.standard_normal((6, 3))
    for scale in (1.0, 1e-5):  # the small-angle series
        np.testing.assert_allclose(kRotation.from_rotvec(rotvec * scale).as_quat(),
                                   scipy.spatial.transform.Rotation.from_rotvec(rotvec * scale).as_quat(), atol=1e-15)
    np.testing.assert_allclose(kRotation.from_mrp(0.3 * rotvec).as_quat(),
                               scipy.spatial.transform.Rotation.from_mrp(0.3 * rotvec).as_quat(), atol=1e-12)
    for seq in ("xyz", "zyx", "xzy", "zxz", "xyx", "yzy", "XYZ", "ZYX", "XZY", "ZXZ", "YXY", "XYX"):
        angles = RNG.uniform(-3, 3, (6, 3))
        np.testing.assert_allclose(kRotation.from_euler(seq, angles).as_quat(canonical=True),
                                   scipy.spatial.transform.Rotation.from_euler(seq, angles).as_quat(canonical=True),
                                   atol=1e-12, err_msg=seq)
        np.testing.assert_allclose(ours.as_euler(seq), theirs.as_euler(seq), atol=1e-10, err_msg=seq)
    np.testing.assert_allclose(kRotation.from_euler("z", 30, degrees=True).as_quat(),
                               scipy.spatial.transform.Rotation.from_euler("z", 30, degrees=True).as_quat(), atol=1e-15)


def test_rotation_gimbal_lock_follows_scipy():
    import warnings

    for seq, middle in (("xyz", np.pi / 2), ("XYZ", -np.pi / 2), ("zxz", 0.0), ("ZXZ", np.pi), ("zxz", np.pi)):
        theirs = scipy.spatial.transform.Rotation.from_euler(seq, [0.3, middle, 0.2])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns about the lock
            want = theirs.as_euler(seq)
        np.testing.assert_allclose(kRotation.from_quat(theirs.as_quat()).as_euler(seq), want, atol=1e-7, err_msg=seq)


def test_rotation_operations_slerp_and_jit():
    quat = RNG.standard_normal((5, 4))
    ours, theirs = kRotation.from_quat(quat), scipy.spatial.transform.Rotation.from_quat(quat)
    vectors = RNG.standard_normal((5, 3))
    np.testing.assert_allclose(ours.apply(vectors), theirs.apply(vectors), atol=1e-12)
    np.testing.assert_allclose(ours.apply(vectors[0], inverse=True), theirs.apply(vectors[0], inverse=True), atol=1e-12)
    # batch shapes broadcast (JAX's vectorized apply): a stack of one rotation turns every vector
    np.testing.assert_allclose(ours[1:2].apply(vectors), theirs[1].apply(vectors), atol=1e-12)
    np.testing.assert_allclose((ours[0] * ours[1:3]).as_quat(canonical=True),
                               (theirs[0] * theirs[1:3]).as_quat(canonical=True), atol=1e-12)
    np.testing.assert_allclose((ours * ours.inv()).magnitude(), np.zeros(5), atol=1e-7)
    weights = RNG.uniform(0, 1, 5)
    np.testing.assert_allclose(ours.mean(weights).as_quat(canonical=True),
                               theirs.mean(weights).as_quat(canonical=True), atol=1e-12)
    assert len(ours) == 5 and not ours.single and ours[2].single
    assert kRotation.concatenate([ours[0], ours[1:3]]).as_quat().shape == (3, 4)
    np.testing.assert_array_equal(kRotation.identity(2).as_quat(), [[0, 0, 0, 1], [0, 0, 0, 1]])
    draws = kRotation.random(kiln.random.PRNGKey(0), 4).as_quat()
    np.testing.assert_allclose(np.linalg.norm(draws, axis=-1), np.ones(4), rtol=1e-6)  # float32, as JAX
    times = np.array([0.0, 1.0, 3.0, 4.0, 6.0])
    query = np.array([0.0, 0.5, 2.9, 4.5, 6.0])
    want = scipy.spatial.transform.Slerp(times, theirs)(query).as_quat(canonical=True)
    np.testing.assert_allclose(kSlerp.init(times, ours)(query).as_quat(canonical=True), want, atol=1e-12)
    slerp = kiln.jit(lambda q, t: kSlerp.init(times, kRotation.from_quat(q))(t).as_quat(canonical=True))
    np.testing.assert_allclose(slerp(quat, query), want, atol=1e-12)
    np.testing.assert_allclose(kiln.jit(lambda r, v: r.apply(v))(ours, vectors), theirs.apply(vectors), atol=1e-12)


def test_rotation_errors():
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 4\); got \(3,\)"):
        kRotation.from_quat(np.ones(3))
    with pytest.raises(ValueError, match="1 to 3 of 'xyz' \\(extrinsic\\) or of 'XYZ' \\(intrinsic\\), not mixed"):
        kRotation.from_euler("xYz", np.zeros(3))
    with pytest.raises(ValueError, match="consecutive axes of a sequence must differ; got 'xxy'"):
        kRotation.from_euler("xxy", np.zeros(3))
    with pytest.raises(ValueError, match="the sequence must have 3 axes; got 'xy'"):
        kRotation.identity().as_euler("xy")
    with pytest.raises(TypeError, match="a single Rotation is not subscriptable"):
        kRotation.identity()[0]
    with pytest.raises(ValueError, match="times must be strictly increasing"):
        kSlerp.init(np.array([0.0, 0.0]), kRotation.identity(2))
