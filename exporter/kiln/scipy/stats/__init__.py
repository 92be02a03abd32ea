"""kiln.scipy.stats: scipy.stats' distributions as modules of functions (JAX's jax.scipy.stats):
kiln.scipy.stats.norm.logpdf(x, loc, scale), poisson.logpmf(k, mu), multivariate_normal.logpdf(x, mean, cov), ...
and gaussian_kde, a kernel density estimate usable under kiln.jit (a registered pytree)."""
from . import (bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon, gamma, gennorm,  # noqa: F401
               geom, gumbel_l, gumbel_r, laplace, logistic, multinomial, multivariate_normal, nbinom, norm, pareto,
               poisson, t, truncnorm, uniform, vonmises, wrapcauchy)
from ._descriptive import ModeResult, mode, rankdata, sem  # noqa: F401
from ._kde import gaussian_kde  # noqa: F401

__all__ = ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "gennorm",
           "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "multinomial", "multivariate_normal", "nbinom",
           "norm", "pareto", "poisson", "t", "truncnorm", "uniform", "vonmises", "wrapcauchy", "gaussian_kde", "sem", "mode", "rankdata", "ModeResult"]
