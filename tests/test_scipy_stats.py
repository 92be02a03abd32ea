"""kiln.scipy.stats against scipy.stats: every function of every distribution over its support and outside it
(values, dtypes, shapes; invalid parameters give NaN as in scipy), float32, gradients against float64 central
differences, multivariate_normal and gaussian_kde, eagerly, under kiln.jit and exported through kiln-run."""
import numpy as np
import pytest
import scipy.special as ss
import scipy.stats as st

import kiln
import kiln.scipy.special as ksp
import kiln.scipy.stats as ks
from kiln_tools import check_like_numpy, eager_and_jit, eager_jit_and_kiln_run
from references import numerical_grad

RNG = np.random.default_rng(11)
X = np.concatenate([RNG.uniform(-6, 16, 40), [0.0, 1.0, -1e-3, 2.0, 3.0, 0.5, 1e-300]])
Q = np.concatenate([RNG.uniform(0, 1, 20), [0.0, 1.0, 1e-300, 0.25, 0.75, 0.5, 1 - 1e-16]])
K = np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 2.5, 40.0])
XB = np.concatenate([RNG.uniform(-0.2, 1.2, 20), [0.0, 1.0, 0.5]])

# (distribution, function, argument, shape parameters, relative tolerance)
CASES = [
    *[("norm", f, X, (1.5, 2.0), 1e-13) for f in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
    *[("norm", f, Q, (1.5, 2.0), 1e-14) for f in ("ppf", "isf")],
    *[("expon", f, X, (0.5, 2.0), 1e-14) for f in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
    ("expon", "ppf", Q, (0.5, 2.0), 1e-14),
    *[("gamma", f, X, (2.5, 0.5, 2.0), 1e-12) for f in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf")],
    *[("gamma", f, X, (1.0,), 1e-12) for f in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf")],
    *[("gamma", f, X, (0.3,), 1e-12) for f in ("logpdf", "cdf", "sf")],
    *[("chi2", f, X, (3,), 1e-12) for f in ("logpdf", "pdf", "cdf", "sf", "logcdf", "logsf")],
    *[("beta", f, XB, (2.5, 0.7), 1e-13) for f in ("logpdf", "pdf")],
    *[("beta", f, XB, (2.5, 0.7), 1e-12) for f in ("cdf", "sf")],
    *[("beta", f, XB, (0.3, 40.0, -0.1, 1.5), 1e-12) for f in ("cdf", "sf")],
    *[("t", f, X, (3.5, 1.0, 2.0), 1e-12) for f in ("cdf", "sf")],
    *[("t", f, np.concatenate([X, [-1e6, 1e6, np.inf, -np.inf]]), (300.0,), 1e-12) for f in ("cdf", "sf")],
    *[("binom", f, K, (10, 0.3), 1e-12) for f in ("cdf", "sf")],
    *[("binom", f, K, (10, 1e-9), 1e-12) for f in ("cdf", "sf")],
    *[("beta", f, XB, (1.0, 3.0, -0.1, 1.5), 1e-13) for f in ("logpdf", "pdf")],
    *[("uniform", f, X, (1.0, 4.0), 1e-15) for f in ("logpdf", "pdf", "cdf")],
    ("uniform", "ppf", Q, (1.0, 4.0), 1e-15),
    *[("laplace", f, X, (1.0, 2.0), 1e-14) for f in ("logpdf", "pdf", "cdf")],
    *[("logistic", f, X, (1.0, 2.0), 1e-14) for f in ("logpdf", "pdf", "cdf", "sf")],
    *[("logistic", f, Q, (1.0, 2.0), 1e-14) for f in ("ppf", "isf")],
    *[("cauchy", f, X, (1.0, 2.0), 1e-14) for f in ("logpdf", "pdf", "cdf", "sf")],
    *[("cauchy", f, Q, (1.0, 2.0), 1e-14) for f in ("ppf", "isf")],
    *[("t", f, X, (3.5, 1.0, 2.0), 1e-13) for f in ("logpdf", "pdf")],
    *[("t", f, X, (300.0,), 1e-12) for f in ("logpdf", "pdf")],
    *[("poisson", f, K, (3.5,), 1e-12) for f in ("logpmf", "pmf", "cdf", "sf")],
    *[("poisson", f, K, (0.0,), 1e-12) for f in ("logpmf", "pmf")],
    *[("bernoulli", f, K, (0.3,), 1e-15) for f in ("logpmf", "pmf", "cdf")],
    ("bernoulli", "ppf", Q, (0.3,), 1e-15),
    *[("geom", f, K, (0.3,), 1e-14) for f in ("logpmf", "pmf", "cdf")],
    *[("binom", f, K, (10, 0.3), 1e-13) for f in ("logpmf", "pmf")],
    *[("truncnorm", f, X, (-0.5, 2.0, 1.0, 2.0), 1e-12) for f in ("logpdf", "pdf", "cdf", "sf")],
    *[("pareto", f, X, (2.5, 0.5, 1.5), 1e-13) for f in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
    ("pareto", "ppf", Q, (2.5, 0.5, 1.5), 1e-14),
    *[(d, f, np.concatenate([X, [-30.0, 40.0]]), (1.0, 2.0), 1e-12) for d in ("gumbel_r", "gumbel_l")
      for f in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
    *[(d, "ppf", Q, (1.0, 2.0), 1e-14) for d in ("gumbel_r", "gumbel_l")],
    *[("nbinom", f, K, params, 1e-12) for f in ("logpmf", "pmf") for params in ((5, 0.3), (2.5, 0.7))],
    *[("betabinom", f, K, (10, 2.5, 0.7), 1e-12) for f in ("logpmf", "pmf")],
    *[("vonmises", f, X, (2.0, 1.0), 1e-13) for f in ("logpdf", "pdf")],
    *[("vonmises", f, X, (800.0,), 1e-9) for f in ("logpdf", "pdf")],
    *[("wrapcauchy", f, X, (0.4,), 1e-13) for f in ("logpdf", "pdf")],
    *[("gennorm", f, X, (1.5, 1.0, 2.0), 1e-12) for f in ("logpdf", "pdf", "cdf", "sf")],
    *[("truncnorm", f, X, (3.0, 9.0, 1.0, 2.0), 1e-11) for f in ("logpdf", "pdf", "cdf", "sf")],
]


@pytest.mark.parametrize("dist, fn, x, params, rtol", CASES, ids=[f"{c[0]}.{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_against_scipy(dist, fn, x, params, rtol):
    got = getattr(getattr(ks, dist), fn)(x, *params)
    want = getattr(getattr(st, dist), fn)(x, *params)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-300)  # subnormal results round apart


@pytest.mark.parametrize("dist, fn, x, params", [
    ("norm", "logpdf", 1.0, (0.0, -1.0)), ("norm", "cdf", 1.0, (0.0, 0.0)), ("expon", "pdf", 1.0, (0.0, -2.0)),
    ("gamma", "logpdf", 1.0, (-1.0,)), ("gamma", "cdf", 1.0, (0.0, 1.0, -1.0)), ("beta", "pdf", 0.5, (0.0, 1.0)),
    ("t", "logpdf", 1.0, (-2.0,)), ("poisson", "pmf", 1.0, (-1.0,)), ("bernoulli", "pmf", 1.0, (1.5,)),
    ("binom", "pmf", 1.0, (-3, 0.5)), ("binom", "pmf", 1.0, (3, 1.5)), ("geom", "pmf", 1.0, (0.0,)),
    ("truncnorm", "pdf", 1.0, (2.0, 1.0)), ("uniform", "cdf", 1.0, (0.0, 0.0)), ("cauchy", "ppf", 1.5, ()),
    ("expon", "ppf", -0.5, ())])
def test_invalid_parameters_give_nan(dist, fn, x, params):
    want = getattr(getattr(st, dist), fn)(x, *params)
    got = getattr(getattr(ks, dist), fn)(np.float64(x), *params)
    assert np.isnan(want) and np.isnan(got)


@pytest.mark.parametrize("dist, fn, x, params", [
    ("norm", "logpdf", X, (1.5, 2.0)), ("norm", "logcdf", X, ()), ("gamma", "logpdf", X, (2.5,)),
    ("gamma", "cdf", X, (2.5,)), ("t", "pdf", X, (4.0,)), ("poisson", "logpmf", K, (3.5,)),
    ("beta", "logpdf", XB, (2.5, 0.7)), ("norm", "ppf", Q, ()), ("cauchy", "isf", Q, ())])
def test_float32_and_integer_operands(dist, fn, x, params):
    f = getattr(getattr(ks, dist), fn)
    # Python numbers beside float32 arrays are float32 (JAX's weak types): the reference takes them rounded too
    params32 = [np.float64(np.float32(p)) for p in params]
    want = getattr(getattr(st, dist), fn)(x.astype(np.float32).astype(np.float64), *params32)
    got = f(x.astype(np.float32), *params)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=2e-7, atol=0)
    ints = np.arange(0, 5)
    assert f(ints, *params).dtype == np.float64


def _mvn_case():
    a = RNG.standard_normal((3, 3))
    cov = a @ a.T + np.eye(3)
    return RNG.standard_normal((4, 2, 3)), RNG.standard_normal(3), cov


def test_multivariate_normal():
    x, mean, cov = _mvn_case()
    for fn in ("logpdf", "pdf"):
        want = getattr(st.multivariate_normal, fn)(x, mean, cov)
        check_like_numpy(getattr(ks.multivariate_normal, fn)(x, mean, cov), want, tol=1e-12)
        check_like_numpy(kiln.jit(getattr(ks.multivariate_normal, fn))(x, mean, cov), want, tol=1e-12)
        check_like_numpy(getattr(ks.multivariate_normal, fn)(x[0, 0], mean, cov),
                         getattr(st.multivariate_normal, fn)(x[0, 0], mean, cov), tol=1e-12)
    # a batch of covariances broadcast against x
    covs = np.stack([cov, 2 * cov])
    got = ks.multivariate_normal.logpdf(x[:, None, 0], mean, covs)
    want = np.array([[st.multivariate_normal.logpdf(x[i, 0], mean, c) for c in covs] for i in range(4)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # float32 stays float32
    got32 = ks.multivariate_normal.logpdf(x.astype(np.float32), mean.astype(np.float32), cov.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, st.multivariate_normal.logpdf(x, mean, cov), rtol=1e-5)


def test_multivariate_normal_gradients():
    x, mean, cov = _mvn_case()
    x = x[0]

    def f(xv, mv, cv):
        return ks.multivariate_normal.logpdf(xv, mv, cv).sum()

    gx, gm, gc = kiln.grad(f, argnums=(0, 1, 2))(x, mean, cov)
    np.testing.assert_allclose(gx, numerical_grad(lambda v: st.multivariate_normal.logpdf(v, mean, cov).sum(), x),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gm, numerical_grad(lambda v: st.multivariate_normal.logpdf(x, v, cov).sum(), mean),
                               rtol=1e-6, atol=1e-9)
    # cov's gradient through a symmetric perturbation: compare directional derivatives
    direction = RNG.standard_normal((3, 3))
    direction = direction + direction.T
    fd = numerical_grad(lambda t: st.multivariate_normal.logpdf(x, mean, cov + t[0] * direction).sum(), np.zeros(1))[0]
    np.testing.assert_allclose(np.sum(gc * direction), fd, rtol=1e-6)


@pytest.mark.parametrize("dist, fn, argnum, args", [
    ("norm", "logpdf", 0, (0.7, 1.5, 2.0)), ("norm", "logpdf", 1, (0.7, 1.5, 2.0)),
    ("norm", "logpdf", 2, (0.7, 1.5, 2.0)), ("norm", "cdf", 0, (0.7, 1.5, 2.0)), ("norm", "ppf", 0, (0.3,)),
    ("norm", "logcdf", 0, (-12.0,)), ("gamma", "logpdf", 1, (1.3, 2.5)), ("gamma", "logpdf", 0, (1.3, 2.5)),
    ("gamma", "cdf", 0, (1.3, 2.5)), ("gamma", "cdf", 1, (1.3, 2.5)), ("t", "logpdf", 1, (0.8, 3.5)),
    ("beta", "logpdf", 1, (0.3, 2.5, 0.7)), ("poisson", "logpmf", 1, (3.0, 2.5)), ("expon", "logpdf", 2, (1.0, 0.0, 2.0)),
    ("cauchy", "cdf", 0, (0.4,)), ("logistic", "logpdf", 0, (0.4,)), ("truncnorm", "logpdf", 0, (0.3, -0.5, 2.0)),
    ("chi2", "cdf", 0, (2.0, 3.0)), ("t", "cdf", 0, (0.7, 3.5)), ("beta", "sf", 0, (0.3, 2.5, 0.7)),
    ("binom", "cdf", 2, (3.0, 10.0, 0.3)), ("pareto", "logpdf", 1, (2.0, 2.5)), ("gumbel_r", "logcdf", 0, (0.3,)),
    ("gumbel_l", "logsf", 0, (0.3,)), ("nbinom", "logpmf", 2, (3.0, 2.5, 0.4)), ("vonmises", "logpdf", 1, (0.3, 2.0)),
    ("gennorm", "cdf", 0, (0.6, 1.5)), ("wrapcauchy", "logpdf", 1, (1.0, 0.4)), ("t", "sf", 1, (0.7, 3.5)), ("binom", "logpmf", 2, (3.0, 10.0, 0.4)), ("laplace", "logpdf", 0, (0.6,))])
def test_gradients(dist, fn, argnum, args):
    kfn = getattr(getattr(ks, dist), fn)
    sfn = getattr(getattr(st, dist), fn)
    args = [np.float64(a) for a in args]

    def at(v, f):
        call = list(args)
        call[argnum] = v
        return f(*call)

    want = numerical_grad(lambda v: at(v[0], sfn), np.array([args[argnum]]))[0]
    got = kiln.grad(lambda v: at(v, kfn))(args[argnum])
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_multinomial():
    counts = np.array([[1, 2, 3], [1, 2, 2], [0, 0, 6], [6, 0, 0], [-1, 4, 3]])
    p = np.array([0.2, 0.3, 0.5])
    for fn in ("logpmf", "pmf"):
        check_like_numpy(getattr(ks.multinomial, fn)(counts, 6, p), getattr(st.multinomial, fn)(counts, 6, p),
                         tol=1e-13)
        check_like_numpy(kiln.jit(getattr(ks.multinomial, fn))(counts, 6, p),
                         getattr(st.multinomial, fn)(counts, 6, p), tol=1e-13)
    assert np.isnan(ks.multinomial.logpmf(counts[0], 6, np.array([-0.2, 0.7, 0.5])))
    grad = kiln.grad(lambda q: ks.multinomial.logpmf(counts[0], 6, q))(p)
    np.testing.assert_allclose(grad, counts[0] / p)


def test_vmap():
    x, a = RNG.uniform(0.1, 6, (4, 3)), RNG.uniform(0.5, 5, (4, 3))
    mean, cov = np.zeros(3), 2 * np.eye(3)
    got = kiln.jit(kiln.vmap(lambda v, w: (ks.gamma.cdf(v, w), ks.t.cdf(v, w), ks.norm.logpdf(v, w),
                                           ks.multivariate_normal.logpdf(v, mean, cov))))(x, a)
    want = (st.gamma.cdf(x, a), st.t.cdf(x, a), st.norm.logpdf(x, a), st.multivariate_normal.logpdf(x, mean, cov))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    np.testing.assert_allclose(kiln.vmap(lambda v: ks.poisson.logpmf(3.0, v))(a[0]), st.poisson.logpmf(3, a[0]),
                               rtol=1e-13)


def test_dirichlet():
    alpha = np.array([1.5, 2.0, 3.0])
    x = np.array([[0.2, 0.1], [0.3, 0.6], [0.5, 0.3]])
    for fn in ("logpdf", "pdf"):
        np.testing.assert_allclose(getattr(ks.dirichlet, fn)(x, alpha), getattr(st.dirichlet, fn)(x, alpha),
                                   rtol=1e-13)
        np.testing.assert_allclose(kiln.jit(getattr(ks.dirichlet, fn))(x[:2], alpha),
                                   getattr(st.dirichlet, fn)(x, alpha), rtol=1e-13)  # K - 1 components
    assert ks.dirichlet.logpdf(np.array([0.5, 0.6, 0.1]), alpha) == -np.inf  # off the simplex (JAX's value)
    grad = kiln.grad(lambda a: ks.dirichlet.logpdf(x[:, 0], a))(alpha)
    np.testing.assert_allclose(grad, numerical_grad(lambda a: st.dirichlet.logpdf(x[:, 0], a), alpha), rtol=1e-6)


@pytest.mark.parametrize("bw_method", [None, "scott", "silverman", 0.4, "callable"])
@pytest.mark.parametrize("weighted", [False, True])
def test_gaussian_kde(bw_method, weighted):
    data, weights = RNG.standard_normal((2, 25)), RNG.uniform(0.1, 1, 25)
    points = RNG.standard_normal((2, 6))
    bw = (lambda kde: 0.3) if bw_method == "callable" else bw_method
    w = weights if weighted else None
    got, want = ks.gaussian_kde(data, bw, w), st.gaussian_kde(data, bw, w)
    np.testing.assert_allclose(got(points), want(points), rtol=1e-12)
    np.testing.assert_allclose(got.pdf(points), want.pdf(points), rtol=1e-12)
    np.testing.assert_allclose(got.logpdf(points), want.logpdf(points), rtol=1e-12)
    np.testing.assert_allclose(got.covariance, want.covariance, rtol=1e-12)
    np.testing.assert_allclose(got.factor, want.factor, rtol=1e-14)
    np.testing.assert_allclose(got.neff, want.neff, rtol=1e-14)


def test_gaussian_kde_under_jit_as_pytree_and_one_dimensional():
    data, points = RNG.standard_normal((2, 25)), RNG.standard_normal((2, 6))
    weights = RNG.uniform(0.1, 1, 25)
    built_inside = kiln.jit(lambda d, w, p: ks.gaussian_kde(d, weights=w).logpdf(p))(data, weights, points)
    np.testing.assert_allclose(built_inside, st.gaussian_kde(data, weights=weights).logpdf(points), rtol=1e-12)
    kde = ks.gaussian_kde(data, "silverman")
    passed_in = kiln.jit(lambda k, p: k.evaluate(p))(kde, points)
    np.testing.assert_allclose(passed_in, st.gaussian_kde(data, "silverman")(points), rtol=1e-12)
    leaves = kiln.tree_leaves(kde)
    assert len(leaves) == 5 and any(leaf is kde.dataset for leaf in leaves)
    one_d = RNG.standard_normal(30)
    grid = np.linspace(-2, 2, 5)
    np.testing.assert_allclose(ks.gaussian_kde(one_d)(grid), st.gaussian_kde(one_d)(grid), rtol=1e-12)
    grad = kiln.grad(lambda p: ks.gaussian_kde(one_d).logpdf(p).sum())(grid)
    np.testing.assert_allclose(grad, numerical_grad(lambda p: st.gaussian_kde(one_d).logpdf(p).sum(), grid), rtol=1e-6)


def test_eager_jit_and_kiln_run(tmp_path):
    x = np.array([-1.5, 0.2, 0.7, 3.0], np.float32)
    q = np.array([0.01, 0.3, 0.5, 0.99], np.float32)
    k = np.array([0.0, 1.0, 3.0, 7.0], np.float32)
    mvn_x, mean, cov = (a.astype(np.float32) for a in _mvn_case())

    def kfn(x, q, k, mvn_x, mean, cov):
        return (ks.norm.logpdf(x, 0.5, 2.0), ks.norm.cdf(x), ks.norm.ppf(q), ks.expon.logpdf(x, 0.0, 2.0),
                ks.gamma.logpdf(x, 2.5), ks.gamma.cdf(x, 2.5), ks.beta.logpdf(q, 2.0, 3.0), ks.t.logpdf(x, 4.0),
                ks.uniform.pdf(x, -1.0, 3.0), ks.poisson.logpmf(k, 2.5), ks.poisson.cdf(k, 2.5),
                ks.bernoulli.pmf(k, 0.3), ks.laplace.cdf(x), ks.logistic.ppf(q), ks.cauchy.logpdf(x),
                ks.truncnorm.logpdf(x, -1.0, 2.0), ks.multivariate_normal.logpdf(mvn_x, mean, cov))

    def want(x, q, k, mvn_x, mean, cov):
        f64 = [a.astype(np.float64) for a in (x, q, k, mvn_x, mean, cov)]
        x, q, k, mvn_x, mean, cov = f64
        out = (st.norm.logpdf(x, 0.5, 2.0), st.norm.cdf(x), st.norm.ppf(q), st.expon.logpdf(x, 0.0, 2.0),
               st.gamma.logpdf(x, 2.5), st.gamma.cdf(x, 2.5), st.beta.logpdf(q, 2.0, 3.0), st.t.logpdf(x, 4.0),
               st.uniform.pdf(x, -1.0, 3.0), st.poisson.logpmf(k, 2.5), st.poisson.cdf(k, 2.5),
               st.bernoulli.pmf(k, 0.3), st.laplace.cdf(x), st.logistic.ppf(q), st.cauchy.logpdf(x),
               st.truncnorm.logpdf(x, -1.0, 2.0), st.multivariate_normal.logpdf(mvn_x, mean, cov))
        return tuple(np.asarray(o).astype(np.float32) for o in out)

    eager_jit_and_kiln_run(kfn, want, x, q, k, mvn_x, mean, cov, tmp_path=tmp_path, tol=1e-6)


def test_gammainc_gammaincc():
    a = 10 ** RNG.uniform(-3, 3, 200)
    x = a * 10 ** RNG.uniform(-2, 1, 200)
    # scipy's own values drift by a * 2^-53 for large a (2e-11 at a = 5000): the bound allows for it, and the
    # reference below checks kiln to 3e-13 where they drift most
    np.testing.assert_allclose(ksp.gammainc(a, x), ss.gammainc(a, x), rtol=3e-12, atol=1e-300)
    np.testing.assert_allclose(ksp.gammaincc(a, x), ss.gammaincc(a, x), rtol=3e-12, atol=1e-300)
    edge_a = np.array([0.0, 0.0, 1.0, 1.0, -1.0, 1.0, 2.0, np.inf])
    edge_x = np.array([1.0, 0.0, 0.0, np.inf, 1.0, -1.0, np.nan, 1.0])
    np.testing.assert_array_equal(ksp.gammainc(edge_a, edge_x), ss.gammainc(edge_a, edge_x))
    np.testing.assert_array_equal(ksp.gammaincc(edge_a, edge_x), ss.gammaincc(edge_a, edge_x))
    got = kiln.jit(ksp.gammaincc)(a[:8].astype(np.float32), x[:8].astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ss.gammaincc(a[:8].astype(np.float32), x[:8].astype(np.float32)), rtol=2e-6)


def _decimal_incomplete_gamma(a, x, upper):
    """P(a, x) by its series or Q(a, x) by Legendre's continued fraction in 50-digit Decimal, with lgamma(a) from
    Stirling's series (a >= 100 here)."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 50
        pi = Decimal("3.14159265358979323846264338327950288419716939937510")
        terms = [Decimal(1) / 12, Decimal(-1) / 360, Decimal(1) / 1260, Decimal(-1) / 1680, Decimal(1) / 1188]
        a, x = Decimal(a), Decimal(x)
        w = 1 / a
        lgamma = (a - Decimal("0.5")) * a.ln() - a + (2 * pi).ln() / 2 + sum(c * w ** (2 * i + 1) for i, c in enumerate(terms))
        front = (a * x.ln() - x - lgamma).exp()
        if not upper:
            total, term, n = Decimal(0), Decimal(1), 0
            while term > Decimal(10) ** -45:
                total, n = total + term, n + 1
                term *= x / (a + n)
            return float(front * total / a)
        tiny = Decimal(10) ** -300
        b, c = x + 1 - a, 1 / tiny
        d = 1 / b
        h = d
        for i in range(1, 5000):
            an = -i * (i - a)
            b += 2
            d = 1 / (an * d + b)
            c = b + an / c
            h *= d * c
            if abs(d * c - 1) < Decimal(10) ** -40:
                break
        return float(front * h)


def test_gammainc_large_a_against_high_precision():
    """For large a, kiln's prefactor x^a e^-x / Gamma(a) comes from Stirling's formula around t = (x - a)/a, so
    nothing of size a log a cancels: 3e-13 where scipy is up to 2e-11 off."""
    for a, x in [(798.3947079704906, 428.95190467558825), (5238.207230431132, 3094.3484287677506)]:
        np.testing.assert_allclose(ksp.gammainc(a, x), _decimal_incomplete_gamma(a, x, upper=False), rtol=3e-13)
    for a, x in [(895.6521473857072, 1729.8464039279702), (5353.281082987299, 8079.30343849892)]:
        np.testing.assert_allclose(ksp.gammaincc(a, x), _decimal_incomplete_gamma(a, x, upper=True), rtol=3e-13)


def test_betainc():
    a, b = 10 ** RNG.uniform(-2, 3, 300), 10 ** RNG.uniform(-2, 3, 300)
    x = np.concatenate([RNG.uniform(0, 1, 150), 10 ** RNG.uniform(-10, 0, 150)])
    want = ss.betainc(a, b, x)
    shown = want > 1e-200  # below, scipy's own value drifts (see the series check next)
    np.testing.assert_allclose(ksp.betainc(a, b, x)[shown], want[shown], rtol=2e-12)
    # deep in the tail against the hypergeometric series x^a y^b / (a B(a, b)) 2F1(a + b, 1; a + 1; x) in floats
    # (its terms are positive): scipy gives 3.2923062e-278 here, 2.3e-6 off
    a1, b1, x1 = 233.13804782854373, 34.873650953684106, 0.04248087770105766
    total, term, n = 0.0, 1.0, 0
    while term > 1e-20:
        total, term, n = total + term, term * (a1 + b1 + n) / (a1 + 1 + n) * x1, n + 1
    log_front = a1 * np.log(x1) + b1 * np.log1p(-x1) - np.log(a1) - float(ss.betaln(a1, b1))
    np.testing.assert_allclose(ksp.betainc(a1, b1, x1), np.exp(log_front) * total, rtol=1e-12)
    edges = np.array([0.0, 1.0, 0.5, 1.5, -0.1, np.nan])
    np.testing.assert_allclose(ksp.betainc(2.0, 3.0, edges), ss.betainc(2.0, 3.0, edges), rtol=1e-15)
    got = kiln.jit(ksp.betainc)(a[:6].astype(np.float32), b[:6].astype(np.float32), x[:6].astype(np.float32))
    assert got.dtype == np.float32
    grads = kiln.grad(lambda v: ksp.betainc(v[0], v[1], v[2]))(np.array([2.5, 1.5, 0.3]))
    np.testing.assert_allclose(grads, numerical_grad(lambda v: ss.betainc(*v), np.array([2.5, 1.5, 0.3])), rtol=1e-6)


@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": None}, {"axis": (0, 2)},
                                    {"axis": -1, "ddof": 0, "keepdims": True}])
def test_sem(kwargs):
    x = RNG.standard_normal((4, 5, 3))
    eager_and_jit(lambda v: ks.sem(v, **kwargs), lambda v: st.sem(v, **kwargs), x)
    eager_and_jit(lambda v: ks.sem(v, **kwargs), lambda v: st.sem(v, **kwargs), x.astype(np.float32))
    eager_and_jit(lambda v: ks.sem(v, **kwargs), lambda v: st.sem(v, **kwargs), RNG.integers(0, 9, (4, 5, 3)))
    got = kiln.grad(lambda v: ks.sem(v, **kwargs).sum())(x)
    np.testing.assert_allclose(got, numerical_grad(lambda v: st.sem(v, **kwargs).sum(), x), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_rankdata(method, axis):
    x = RNG.integers(0, 4, (3, 7))  # ties in every row and column
    eager_and_jit(lambda v: ks.rankdata(v, method, axis=axis), lambda v: st.rankdata(v, method, axis=axis), x)
    floats = x.astype(np.float64) + 0.5
    floats[0, 2] = np.nan  # its slice becomes NaN; float input ranks as float64 for every method (as JAX)
    want = st.rankdata(floats, method, axis=axis).astype(np.float64)
    np.testing.assert_array_equal(ks.rankdata(floats, method, axis=axis), want)
    np.testing.assert_array_equal(kiln.jit(lambda v: ks.rankdata(v, method, axis=axis))(floats), want)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
@pytest.mark.parametrize("keepdims", [False, True])
def test_mode(axis, keepdims):
    x = RNG.integers(0, 4, (5, 6))
    for data in (x, x.astype(np.float32) - 1.5):
        want = st.mode(data, axis, keepdims=keepdims)
        for got in (ks.mode(data, axis, keepdims=keepdims), kiln.jit(lambda v: ks.mode(v, axis, keepdims=keepdims))(data)):
            assert isinstance(got, ks.ModeResult)
            check_like_numpy(got.mode, want.mode)
            check_like_numpy(got.count, want.count)


def test_errors():
    x, mean, cov = _mvn_case()
    with pytest.raises(NotImplementedError, match="multivariate_normal.logpdf: allow_singular=True is not supported"):
        ks.multivariate_normal.logpdf(x, mean, cov, allow_singular=True)
    with pytest.raises(ValueError, match="multivariate_normal.pdf: argument cov must be a square matrix"):
        ks.multivariate_normal.pdf(x, mean, cov[:2])
    with pytest.raises(ValueError, match="multivariate_normal.logpdf: the last axis of x and mean must have the "
                                         "covariance's size 3"):
        ks.multivariate_normal.logpdf(x[..., :2], mean[:2], cov)
    with pytest.raises(ValueError, match="dirichlet.logpdf: argument x must have 3 or 2 entries on its first axis"):
        ks.dirichlet.logpdf(np.ones(5) / 5, np.ones(3))
    with pytest.raises(ValueError, match="dirichlet.pdf: argument alpha must be 1-D"):
        ks.dirichlet.pdf(np.ones(3) / 3, np.ones((3, 1)))
    with pytest.raises(ValueError, match="gaussian_kde: bw_method must be 'scott', 'silverman'"):
        ks.gaussian_kde(np.ones((1, 5)), "wide")
    with pytest.raises(ValueError, match="gaussian_kde: argument weights must have shape \\(5,\\)"):
        ks.gaussian_kde(RNG.standard_normal((1, 5)), weights=np.ones(4))
    with pytest.raises(ValueError, match="gaussian_kde: argument dataset needs more than one point"):
        ks.gaussian_kde(np.ones((2, 1)))
    with pytest.raises(NotImplementedError, match="sem: nan_policy='omit' is not supported"):
        ks.sem(np.ones(3), nan_policy="omit")
    with pytest.raises(ValueError, match="rankdata: method must be one of average, min, max, dense, ordinal, got 'mean'"):
        ks.rankdata(np.ones(3), "mean")
    with pytest.raises(NotImplementedError, match="mode: nan_policy='omit' is not supported"):
        ks.mode(np.ones(3), nan_policy="omit")
    with pytest.raises(ValueError, match="mode: argument a is empty"):
        ks.mode(np.ones((0,)))
    with pytest.raises(ValueError, match="sem: axis 3 is out of bounds"):
        ks.sem(np.ones((2, 2)), axis=3)
    with pytest.raises(ValueError, match="gaussian_kde.evaluate: points have dimension 3, the dataset has 2"):
        ks.gaussian_kde(RNG.standard_normal((2, 5))).evaluate(np.ones((3, 4)))


def test_weak_parameters_given_apart_take_the_data_dtype():
    """Parameters converted apart from x (their shapes do not broadcast with it) and weak (Python numbers,
    arrays made without dtype=) take x's float32, as one promotion would and as in JAX: dirichlet's
    knp.full((K,), 1.5), multinomial's Python int n, multivariate_normal's knp.eye covariance."""
    import kiln.numpy as knp
    from kiln.scipy.stats import dirichlet, multinomial, multivariate_normal
    t = np.full(4, 0.25, np.float32)
    x, p = np.array([1, 2, 3], np.float32), np.array([0.2, 0.3, 0.5], np.float32)
    for got, want in ((dirichlet.logpdf(t, knp.full((4,), 1.5)), st.dirichlet.logpdf(t, np.full(4, 1.5))),
                      (kiln.jit(lambda t: dirichlet.logpdf(t, knp.full((4,), 1.5)))(t),
                       st.dirichlet.logpdf(t, np.full(4, 1.5))),
                      (multinomial.logpmf(x, 6, p), st.multinomial.logpmf([1, 2, 3], 6, p.astype(np.float64))),
                      (multivariate_normal.logpdf(x, p, knp.eye(3)), st.multivariate_normal.logpdf(x, p, np.eye(3)))):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # strong float64 parameters still widen, as numpy's promotion
    assert dirichlet.logpdf(t, np.full(4, 1.5)).dtype == np.float64
    assert multivariate_normal.logpdf(x, p, np.eye(3)).dtype == np.float64
