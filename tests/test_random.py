"""kiln.random beyond the recorded JAX draws (tests/test_random_reference.py): keys and their errors, vmap over
a batch of keys, a Program whose key is a global that each step splits and stores back (a training step with
dropout) run in Python and in the standalone kiln-run, and the moments of every distribution."""
import math

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
import kiln.random as kr
from kiln import Program
from kiln_tools import kiln_run_exported, run_kiln_run

KEY = kr.PRNGKey(0)


# ------------------------------------------------------------------------------------------- keys


def test_keys_are_uint32_pairs():
    k = kr.PRNGKey(7)
    assert k.dtype == np.uint32 and k.shape == (2,)
    np.testing.assert_array_equal(kr.key(7), k)
    np.testing.assert_array_equal(kr.key_data(k), k)
    np.testing.assert_array_equal(kr.wrap_key_data(np.array([1, 2], np.uint32)), [1, 2])
    assert kr.split(k).shape == (2, 2) and kr.split(k, 3).shape == (3, 2) and kr.split(k, (2, 3)).shape == (2, 3, 2)
    assert kr.key_data(kr.split(k, (2, 3))).shape == (2, 3, 2)
    np.testing.assert_array_equal(kr.split(k, 4)[2], kr.fold_in(k, 2))  # both hash the counter (0, i)
    np.testing.assert_array_equal(kr.clone(k), k)
    assert kr.key_impl(k) == kr.key_impl(kr.split(k, 3)) == "threefry2x32"


@pytest.mark.parametrize("seed", [0, 5, -1, 2**31 - 1, -2**31, 2**40 + 3, -2**40, 2**64 - 1])
def test_seeds(seed):
    """Seeds in int32's range give (0, seed mod 2**32) (JAX's default); wider ones give their two 32-bit halves
    (JAX with x64), eagerly and, as an int64 array, under jit."""
    want = [0 if -2**31 <= seed < 2**31 else (seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF]
    np.testing.assert_array_equal(kr.PRNGKey(seed), want)
    if seed < 2**63:
        np.testing.assert_array_equal(kiln.jit(kr.PRNGKey)(np.int64(seed)), want)
    if -2**31 <= seed < 2**31:
        np.testing.assert_array_equal(kiln.jit(kr.PRNGKey)(np.int32(seed)), want)


@pytest.mark.parametrize("call, error, message", [
    (lambda: kr.uniform(np.zeros(2, np.int32)), TypeError,
     r"kiln.random.uniform: expected a key, a uint32 array of shape \(2,\).*got int32\[2\]"),
    (lambda: kr.normal(kr.split(KEY, 3)), TypeError, r"got uint32\[3, 2\] \(a batch of keys: use kiln.vmap"),
    (lambda: kr.bits(KEY, (2,), np.int32), ValueError, "bits: dtype must be an unsigned integer dtype, got int32"),
    (lambda: kr.uniform(KEY, (2,), np.int32), ValueError, "uniform: dtype must be a floating dtype, got int32"),
    (lambda: kr.randint(KEY, (2,), 0, 5, np.float32), TypeError, "randint: dtype must be an integer dtype"),
    (lambda: kr.fold_in(KEY, np.arange(3)), TypeError, r"fold_in: data must be a scalar, got shape \(3,\)"),
    (lambda: kr.PRNGKey(np.arange(2)), TypeError, r"PRNGKey: the seed must be a scalar, got shape \(2,\)"),
    (lambda: kr.PRNGKey(1.5), TypeError, "PRNGKey: the seed must be an integer, got float64"),
    (lambda: kr.PRNGKey(2**64), OverflowError, "does not fit in 64 bits"),
    (lambda: kr.choice(KEY, 3, (4,), replace=False), ValueError, r"larger sample \(size 4\).*\(size 3\)"),
    (lambda: kr.choice(KEY, 3, (2,), p=np.ones(4) / 4), ValueError, r"p must be None or a 1-d vector of size 3"),
    (lambda: kr.normal(KEY, "ab"), TypeError, "normal: shape must be a tuple of integers"),
    (lambda: kr.gamma(KEY, np.ones(3), (2,)), ValueError, r"gamma: shape \(2,\) is not broadcast-compatible"),
    (lambda: kr.categorical(KEY, np.zeros((2, 3)), shape=(4,)), ValueError, r"must end with the logits' batch"),
    (lambda: kr.bernoulli(KEY, np.array([1, 0])), TypeError, "bernoulli: p must have a floating dtype"),
    (lambda: kr.key_impl(np.zeros(3, np.float32)), TypeError, r"key_data: expected keys \(uint32, last axis 2\)"),
    (lambda: kr.key(0, impl="rbg"), ValueError, "only the 'threefry2x32' implementation"),
    (lambda: kr.permutation(KEY, 2.5), TypeError, "permutation: x must be a concrete integer or an array"),
    (lambda: kr.gumbel(KEY, (2,), mode="higher"), ValueError, "mode must be 'low', 'high' or 'highest', got 'higher'"),
])
def test_errors_name_the_function(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ------------------------------------------------------------------------------ jit, vmap, export


def _draws(k):
    return kr.uniform(k, (3,)), kr.normal(k, (2,)), kr.randint(k, (4,), 0, 10), kr.bernoulli(k, 0.3, (5,))


def test_vmap_over_keys_matches_one_key_at_a_time():
    keys = kr.split(KEY, 4)
    one_by_one = [_draws(k) for k in keys]
    for batched in (kiln.vmap(_draws)(keys), kiln.jit(kiln.vmap(_draws))(keys)):
        for i, draws in enumerate(one_by_one):
            for b, d in zip(batched, draws):
                np.testing.assert_allclose(np.asarray(b)[i], d, rtol=1e-6)
    folded = kiln.vmap(lambda i: kr.fold_in(KEY, i))(np.arange(5, dtype=np.uint32))
    np.testing.assert_array_equal(folded, kr.split(KEY, 5))


def test_jit_key_argument_and_split_chain():
    @kiln.jit
    def f(k):
        k1, k2 = kr.split(k)
        return kr.uniform(k1, (2, 3)), kr.split(k2, 3), kr.permutation(k2, 6)

    got, want = f(KEY), (kr.uniform(kr.split(KEY)[0], (2, 3)), kr.split(kr.split(KEY)[1], 3),
                          kr.permutation(kr.split(KEY)[1], 6))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def _exported_draws(k):
    k1, k2 = kr.split(k)
    return (kr.uniform(k1, (5,), minval=-1.0, maxval=3.0), kr.normal(k2, (5,)), kr.randint(k, (5,), -4, 9),
            kr.permutation(k1, 7), kr.bits(k2, (3,), np.uint64), kr.exponential(k, (3,)),
            kr.categorical(k, np.log(np.array([0.2, 0.3, 0.5], np.float32)), shape=(6,)), kr.fold_in(k, 5))


def test_draws_through_kiln_run(tmp_path):
    """The draws exported as a Program function (the key an argument) and run by the standalone kiln-run: the
    same values as eagerly (the transcendental ones to an ulp)."""
    got = kiln_run_exported(_exported_draws, kr.PRNGKey(21), tmp_path=tmp_path)
    want = _exported_draws(kr.PRNGKey(21))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=3e-7) if w.dtype.kind == "f" else \
            np.testing.assert_array_equal(g, w)


X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


def _dropout_reference(key, steps, rate=0.25):
    """Eagerly: what each step of DropoutStep returns, and the key left in the global."""
    outs = []
    for _ in range(steps):
        key, sub = kr.split(key)
        keep = kr.bernoulli(sub, 1 - rate, X.shape)
        outs.append(np.where(keep, X / (1 - rate), 0).astype(np.float32))
    return outs, key


class DropoutStep(Program, export_name="dropout_step"):
    _key = Program.export_global(kr.PRNGKey(3), mutable=True)

    def step(self, x=Program.like(X)):
        key, sub = kr.split(self._key)
        self._key = key
        keep = kr.bernoulli(sub, 0.75, x.shape)
        return knp.where(keep, x / 0.75, 0.0)


def test_program_key_global_split_and_stored_back(tmp_path):
    """The shape of a training step with dropout: the key is a global, each call splits it, stores one half
    back and draws the mask from the other; Python calls and kiln-run agree with eager kiln.random."""
    want, last_key = _dropout_reference(kr.PRNGKey(3), 3)
    m = DropoutStep()
    for w in want:
        np.testing.assert_array_equal(m.step(X), w)
    path = tmp_path / "dropout.vmfb"
    Program.get_compiled_artifact(DropoutStep).save(path)
    np.save(tmp_path / "x.npy", X)
    state = tmp_path / "state.npz"
    for i, w in enumerate(want):
        globals_in = [f"--globals-in={state}"] if i else []
        run_kiln_run(f"--module={path}", "--function=step", f"--input=@{tmp_path / 'x.npy'}",
                     f"--output=@{tmp_path / 'y.npy'}", *globals_in, f"--globals-out={state}")
        np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), w)
    saved = dict(np.load(state))
    assert len(saved) == 1
    np.testing.assert_array_equal(next(iter(saved.values())), last_key)


# ---------------------------------------------------------------------------------------- moments

N = 20000


def _moments(x):
    x = np.asarray(x, np.float64)
    return x.mean(), x.var()


def _check_moments(x, mean, var, n):
    """Sample mean and variance within 6 standard errors (the variance's from the fourth moment)."""
    m, v = _moments(x)
    assert abs(m - mean) < 6 * math.sqrt(var / n), (m, mean)
    x = np.asarray(x, np.float64)
    m4 = np.mean((x - m) ** 4)
    assert abs(v - var) < 6 * math.sqrt(max(m4 - v * v, 1e-12) / n), (v, var)


@pytest.mark.parametrize("name, draw, mean, var", [
    ("uniform", lambda k: kr.uniform(k, (N,), minval=-2.0, maxval=4.0), 1.0, 3.0),
    ("normal", lambda k: kr.normal(k, (N,)), 0.0, 1.0),
    ("normal_f64", lambda k: kr.normal(k, (N,), np.float64), 0.0, 1.0),
    ("exponential", lambda k: kr.exponential(k, (N,)), 1.0, 1.0),
    ("laplace", lambda k: kr.laplace(k, (N,)), 0.0, 2.0),
    ("logistic", lambda k: kr.logistic(k, (N,)), 0.0, math.pi ** 2 / 3),
    ("gumbel", lambda k: kr.gumbel(k, (N,)), 0.5772156649, math.pi ** 2 / 6),
    ("bernoulli", lambda k: kr.bernoulli(k, 0.3, (N,)), 0.3, 0.21),
    ("rademacher", lambda k: kr.rademacher(k, (N,)), 0.0, 1.0),
    ("randint", lambda k: kr.randint(k, (N,), -3, 7), 1.5, (10 ** 2 - 1) / 12),
    ("choice", lambda k: kr.choice(k, 5, (N,), p=np.array([0.1, 0.2, 0.3, 0.2, 0.2], np.float32)), 2.2, 1.56),
    ("categorical", lambda k: kr.categorical(k, np.log(np.array([0.5, 0.25, 0.25], np.float32)), shape=(N,)),
     0.75, 0.6875),
    ("truncated_normal", lambda k: kr.truncated_normal(k, -1.0, 1.0, (N,)), 0.0, 0.2911214),
    ("poisson", lambda k: kr.poisson(k, 4.0, (N,)), 4.0, 4.0),
    ("poisson_large", lambda k: kr.poisson(k, 30.0, (N,)), 30.0, 30.0),
    ("gamma", lambda k: kr.gamma(k, 2.5, (2000,)), 2.5, 2.5),
    ("gamma_small", lambda k: kr.gamma(k, 0.4, (2000,)), 0.4, 0.4),
    ("beta", lambda k: kr.beta(k, 2.0, 5.0, (2000,)), 2 / 7, 10 / (49 * 8)),
    ("chisquare", lambda k: kr.chisquare(k, 3.0, (2000,)), 3.0, 6.0),
    ("t", lambda k: kr.t(k, 6.0, (2000,)), 0.0, 1.5),
    ("f", lambda k: kr.f(k, 4.0, 20.0, (2000,)), 20 / 18, 2 * 400 * 22 / (4 * 324 * 16)),
    ("pareto", lambda k: kr.pareto(k, 5.0, (N,)), 1.25, 5 / 48),
    ("lognormal", lambda k: kr.lognormal(k, 0.5, (N,)), math.exp(0.125), (math.exp(0.25) - 1) * math.exp(0.25)),
    ("weibull_min", lambda k: kr.weibull_min(k, 2.0, 1.5, (N,)), 2 * math.gamma(1 + 1 / 1.5),
     4 * (math.gamma(1 + 2 / 1.5) - math.gamma(1 + 1 / 1.5) ** 2)),
    ("rayleigh", lambda k: kr.rayleigh(k, 2.0, (N,)), 2 * math.sqrt(math.pi / 2), (4 - math.pi) / 2 * 4),
    ("maxwell", lambda k: kr.maxwell(k, (N,)), 2 * math.sqrt(2 / math.pi), 3 - 8 / math.pi),
    ("double_sided_maxwell", lambda k: kr.double_sided_maxwell(k, 1.0, 2.0, (N,)), 1.0, 12.0),
    ("wald", lambda k: kr.wald(k, 1.5, (N,)), 1.5, 1.5 ** 3),
    ("triangular", lambda k: kr.triangular(k, -1.0, 0.5, 2.0, (N,)), 0.5, 0.375),
    ("geometric", lambda k: kr.geometric(k, 0.3, (N,)), 1 / 0.3, 0.7 / 0.09),
    ("binomial", lambda k: kr.binomial(k, 12.0, 0.3, (N,)), 3.6, 2.52),
    ("binomial_large", lambda k: kr.binomial(k, 200.0, 0.4, (N,)), 80.0, 48.0),
    ("binomial_high_p", lambda k: kr.binomial(k, 40.0, 0.9, (N,)), 36.0, 3.6),
    ("gumbel_high", lambda k: kr.gumbel(k, (N,), mode="high"), 0.5772156649, math.pi ** 2 / 6),
    ("generalized_normal", lambda k: kr.generalized_normal(k, 2.0, (2000,)), 0.0, 0.5),
])
def test_moments(name, draw, mean, var):
    x = draw(kr.PRNGKey(11))
    _check_moments(x, mean, var, np.asarray(x).size)


def test_cauchy_median_and_quartiles():
    x = np.asarray(kr.cauchy(kr.PRNGKey(5), (N,)), np.float64)
    q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    assert abs(med) < 0.05 and abs(q1 + 1) < 0.06 and abs(q3 - 1) < 0.06


def test_dirichlet_on_the_simplex():
    alpha = np.array([1.0, 2.0, 3.0], np.float32)
    x = np.asarray(kr.dirichlet(kr.PRNGKey(2), alpha, (3000,)), np.float64)
    np.testing.assert_allclose(x.sum(-1), 1, atol=1e-6)
    np.testing.assert_allclose(x.mean(0), alpha / alpha.sum(), atol=0.02)


def test_permutation_and_choice_without_replacement_are_permutations():
    p = np.asarray(kr.permutation(KEY, 50))
    assert sorted(p.tolist()) == list(range(50)) and p.dtype == np.int32
    c = np.asarray(kr.choice(KEY, 20, (20,), replace=False))
    assert sorted(c.tolist()) == list(range(20))
    x = np.arange(24).reshape(4, 6)
    rows = np.asarray(kr.permutation(KEY, x, axis=1, independent=True))
    assert all(sorted(r) == sorted(o) for r, o in zip(rows.tolist(), x.tolist()))
    cols = np.asarray(kr.permutation(KEY, x, axis=1))
    assert sorted(map(tuple, cols.T.tolist())) == sorted(map(tuple, x.T.tolist()))


def test_truncated_normal_with_traced_bounds():
    """Traced bounds clip to the closed interval; the draws are those of concrete bounds."""
    got = kiln.jit(lambda lo, hi: kr.truncated_normal(KEY, lo, hi, (500,)))(np.float32(-0.5), np.float32(1.5))
    want = kr.truncated_normal(KEY, -0.5, 1.5, (500,))
    assert got.dtype == np.float32 and np.min(got) >= -0.5 and np.max(got) <= 1.5
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=3e-7)


@pytest.mark.parametrize("a", [0.3, 2.0, 15.0, 150.0])
def test_gamma_gradient_is_the_implicit_one(a):
    """d sample / d a = -(dP/da) / density at the drawn sample (P the regularized incomplete gamma): against
    scipy's gammainc differentiated by central differences, in float64, forward and reverse mode."""
    from scipy import special, stats

    draw = lambda a: kr.gamma(KEY, a, (8,), dtype=np.float64)  # noqa: E731
    x = np.asarray(draw(np.float64(a)))
    h = 1e-6 * a
    want = -(special.gammainc(a + h, x) - special.gammainc(a - h, x)) / (2 * h) / stats.gamma.pdf(x, a)
    np.testing.assert_allclose(kiln.jacfwd(draw)(np.float64(a)), want, rtol=1e-6)
    np.testing.assert_allclose(kiln.grad(lambda a: draw(a).sum())(np.float64(a)), want.sum(), rtol=1e-6)


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_covariance(method):
    """Every method draws from N(mean, cov) (eigh and svd give other numbers than JAX's: eigenvector signs are
    arbitrary); eagerly and under jit alike."""
    mean = np.array([1.0, -2.0, 0.5])
    cov = np.array([[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]])
    x = kr.multivariate_normal(kr.PRNGKey(4), mean, cov, (N,), method=method)
    assert x.shape == (N, 3) and x.dtype == np.float64
    np.testing.assert_allclose(np.mean(x, 0), mean, atol=0.05)
    np.testing.assert_allclose(np.cov(np.asarray(x).T), cov, atol=0.06)
    jitted = kiln.jit(lambda k: kr.multivariate_normal(k, mean, cov, (50,), method=method))(kr.PRNGKey(4))
    np.testing.assert_allclose(jitted, x[:50], rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match=r"multivariate_normal: needs mean \(..., n\) and cov \(..., n, n\)"):
        kr.multivariate_normal(KEY, mean, cov[:2], method=method)


def test_multinomial_counts():
    p = np.array([0.2, 0.5, 0.3], np.float32)
    x = np.asarray(kr.multinomial(kr.PRNGKey(9), 30.0, p, shape=(3000, 3)))
    assert x.dtype == np.float32 and np.all(x.sum(-1) == 30) and np.all(x >= 0)
    np.testing.assert_allclose(x.mean(0), 30 * p, atol=0.2)
    np.testing.assert_allclose(x.var(0), 30 * p * (1 - p), rtol=0.1)
    bad = np.asarray(kr.binomial(KEY, np.array([-1.0, np.inf, 5.0]), np.array([0.5, 0.5, np.nan])))
    assert np.isnan(bad[0]) and bad[1] == np.inf and np.isnan(bad[2])


def test_orthogonal_and_ball():
    q = np.asarray(kr.orthogonal(KEY, 4, (3,)), np.float64)
    assert q.shape == (3, 4, 4)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(4), (3, 4, 4)), atol=1e-5)
    wide = np.asarray(kr.orthogonal(KEY, 2, m=5), np.float64)
    assert wide.shape == (2, 5)
    np.testing.assert_allclose(wide @ wide.T, np.eye(2), atol=1e-5)
    b = np.asarray(kr.ball(KEY, 3, 2, (2000,)), np.float64)
    r = np.linalg.norm(b, axis=-1)
    assert b.shape == (2000, 3) and r.max() < 1
    assert abs(np.mean(r ** 3) - 0.5) < 0.03  # uniform in the ball: |x|**3 is uniform on [0, 1]
    b1 = np.asarray(kr.ball(KEY, 2, 1, (2000,)), np.float64)
    assert np.abs(b1).sum(-1).max() < 1


def test_dtypes_and_shapes():
    assert kr.uniform(KEY).shape == () and kr.uniform(KEY).dtype == np.float32
    assert kr.normal(KEY, (2,), np.float16).dtype == np.float16
    assert kr.randint(KEY, (3,), 0, 4).dtype == np.int32
    assert kr.randint(KEY, (3,), 0, 4, np.uint16).dtype == np.uint16
    assert kr.bits(KEY, (2,), np.uint64).dtype == np.uint64
    assert kr.bernoulli(KEY, np.full((2, 3), 0.5)).shape == (2, 3)
    assert kr.gamma(KEY, np.ones((2, 1)), (2, 3)).shape == (2, 3)
    assert kr.choice(KEY, np.zeros((3, 5)), (2,), axis=1).shape == (3, 2)
    u = np.asarray(kr.uniform(KEY, (1000,), minval=2.0, maxval=2.5))
    assert u.min() >= 2.0 and u.max() < 2.5
