"""kiln.scipy.stats: scipy.stats' distributions as modules of functions (JAX's jax.scipy.stats):
kiln.scipy.stats.norm.logpdf(x, loc, scale), poisson.logpmf(k, mu), multivariate_normal.logpdf(x, mean, cov), ...
and gaussian_kde, a kernel density estimate usable under kiln.jit (a registered pytree)."""
from . import (bernoulli, beta, binom, cauchy, chi2, dirichlet, expon, gamma, geom, laplace, logistic,  # noqa: F401
               multivariate_normal, norm, poisson, t, truncnorm, uniform)
from ._kde import gaussian_kde  # noqa: F401

__all__ = ["bernoulli", "beta", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "geom", "laplace",
           "logistic", "multivariate_normal", "norm", "poisson", "t", "truncnorm", "uniform", "gaussian_kde"]
