"""gaussian_kde: a kernel density estimate with Gaussian kernels (scipy.stats.gaussian_kde), registered as a
pytree so that an estimate can be built, passed and evaluated under kiln.jit."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as knp
from ...core.pytree import register_pytree_node
from ...lax import linalg as lax_linalg
from .. import special
from ._common import float_operands, narrow

__all__ = ["gaussian_kde"]


class gaussian_kde:  # noqa: N801 - scipy's name
    """gaussian_kde(dataset (d, n) or (n,), bw_method='scott' | 'silverman' | number | callable(kde),
    weights=None). The kernel covariance is the data's (weighted) covariance times factor^2."""

    def __init__(self, dataset, bw_method=None, weights=None):
        dataset = knp.atleast_2d(knp.asarray(dataset))
        d, n = dataset.shape
        if n < 2:
            raise ValueError(f"gaussian_kde: argument dataset needs more than one point, got shape {dataset.shape}")
        (dataset,), self._dtype = float_operands("gaussian_kde", dataset)
        if weights is None:
            weights = knp.full((n,), 1.0 / n)
        else:
            weights = knp.asarray(weights)
            if weights.ndim != 1 or weights.shape[0] != n:
                raise ValueError(f"gaussian_kde: argument weights must have shape ({n},) like the dataset's points, "
                                 f"got {weights.shape}")
            (weights,), _ = float_operands("gaussian_kde", weights)
            weights = knp.divide(weights, knp.sum(weights))
        self.dataset, self.weights, self.d, self.n = dataset, weights, d, n
        self.set_bandwidth(bw_method)

    @property
    def neff(self):
        """The effective number of points, 1 / sum(weights^2)."""
        return knp.reciprocal(knp.sum(knp.multiply(self.weights, self.weights)))

    def scotts_factor(self):
        return knp.power(self.neff, -1.0 / (self.d + 4))

    def silverman_factor(self):
        return knp.power(knp.multiply(self.neff, (self.d + 2) / 4.0), -1.0 / (self.d + 4))

    covariance_factor = scotts_factor

    def set_bandwidth(self, bw_method=None):
        """'scott' (the default), 'silverman', a number (the factor itself) or a callable of the estimate."""
        if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
            factor = self.scotts_factor()
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = self.silverman_factor()
        elif isinstance(bw_method, str):
            raise ValueError(f"gaussian_kde: bw_method must be 'scott', 'silverman', a number or a callable, got "
                             f"{bw_method!r}")
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            factor = bw_method
        (self.factor,), _ = float_operands("gaussian_kde", factor)
        self._data_covariance = self._weighted_covariance()
        self.covariance = knp.multiply(self._data_covariance, knp.multiply(self.factor, self.factor))

    def _weighted_covariance(self):
        """numpy.cov(dataset, aweights=weights): sum w (x - m)(x - m)^T / (1 - sum w^2) for weights summing to 1."""
        mean = knp.sum(knp.multiply(self.dataset, self.weights), axis=1, keepdims=True)
        centred = knp.subtract(self.dataset, mean)
        scatter = knp.matmul(knp.multiply(centred, self.weights), knp.transpose(centred))
        return knp.divide(scatter, knp.subtract(1.0, knp.sum(knp.multiply(self.weights, self.weights))))

    def _log_density(self, points):
        points = knp.atleast_2d(knp.asarray(points))
        (points,), dtype = float_operands("gaussian_kde.evaluate", points)
        if points.shape[0] != self.d:
            if points.ndim == 2 and points.shape == (1, self.d):  # one point given as a row
                points = knp.transpose(points)
            else:
                raise ValueError(f"gaussian_kde.evaluate: points have dimension {points.shape[0]}, the dataset has "
                                 f"{self.d}")
        factor = lax_linalg.cholesky(self.covariance)
        white_data = lax_linalg.triangular_solve(factor, self.dataset, left_side=True, lower=True)
        white_points = lax_linalg.triangular_solve(factor, points, left_side=True, lower=True)
        diff = knp.subtract(white_data[:, :, None], white_points[:, None, :])  # (d, n, m)
        energy = knp.multiply(knp.sum(knp.multiply(diff, diff), axis=0), -0.5)  # (n, m)
        log_norm = knp.add(knp.sum(knp.log(knp.diagonal(factor))), 0.5 * self.d * math.log(2 * math.pi))
        out = knp.subtract(special.logsumexp(energy, axis=0, b=self.weights[:, None]), log_norm)
        return out, np.result_type(dtype, self._dtype)

    def logpdf(self, points):
        """log of the density at points (d, m) (or (m,) for d = 1), by a logsumexp over the data."""
        y, dtype = self._log_density(points)
        return narrow(y, dtype)

    def evaluate(self, points):
        """The density at points (d, m) (or (m,) for d = 1): shape (m,)."""
        y, dtype = self._log_density(points)
        return narrow(knp.exp(y), dtype)

    __call__ = pdf = evaluate


def _flatten(kde):
    return (kde.dataset, kde.weights, kde.factor, kde._data_covariance, kde.covariance), (kde.d, kde.n, kde._dtype)


def _unflatten(aux, children):
    kde = object.__new__(gaussian_kde)
    kde.d, kde.n, kde._dtype = aux
    kde.dataset, kde.weights, kde.factor, kde._data_covariance, kde.covariance = children
    return kde


register_pytree_node(gaussian_kde, _flatten, _unflatten)
