"""Bayesian linear regression with polynomial features: the log evidence from cho_factor / cho_solve and
jnp.linalg.slogdet, the posterior mean by jnp.linalg.solve, its covariance by jnp.linalg.inv, the evidence
maximized over (log alpha, log beta) by gradient steps on a jnp.array of hyperparameters, evaluated over a grid
of hyperparameters with vmap, a Laplace curvature from jax.hessian, and predictive variances by jnp.einsum."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random
from kiln.scipy.linalg import cho_factor, cho_solve

DEGREE, POINTS = 4, 20


def features(x):
    return jnp.stack([x ** k for k in range(DEGREE + 1)], axis=-1)


def log_evidence(log_hyper, phi, t):
    alpha, beta = jnp.exp(log_hyper[0]), jnp.exp(log_hyper[1])
    n, m = phi.shape
    a = alpha * jnp.eye(m) + beta * phi.T @ phi
    factor = cho_factor(a, lower=True)
    mean = beta * cho_solve(factor, phi.T @ t)
    fit = beta / 2 * jnp.sum((t - phi @ mean) ** 2) + alpha / 2 * mean @ mean
    _, logdet = jnp.linalg.slogdet(a)
    return m / 2 * jnp.log(alpha) + n / 2 * jnp.log(beta) - fit - logdet / 2 - n / 2 * jnp.log(2 * jnp.pi)


def posterior(log_hyper, phi, t):
    alpha, beta = jnp.exp(log_hyper[0]), jnp.exp(log_hyper[1])
    a = alpha * jnp.eye(phi.shape[1]) + beta * phi.T @ phi
    mean = jnp.linalg.solve(a, beta * phi.T @ t)
    return mean, jnp.linalg.inv(a)


def make_data(key):
    k1, k2 = random.split(key)
    x = jnp.sort(random.uniform(k1, (POINTS,), minval=-1.0, maxval=1.0))
    return x, jnp.sin(2.5 * x) + 0.1 * random.normal(k2, (POINTS,))


def main(key):
    x, t = make_data(key)
    phi = features(x)
    log_hyper = jnp.array([0.0, 2.0], jnp.float32)
    step = jax.jit(jax.value_and_grad(log_evidence))
    history = []
    for _ in range(5):
        value, g = step(log_hyper, phi, t)
        history.append(value)
        log_hyper = log_hyper + 0.05 * g
    grid = jnp.stack(jnp.meshgrid(jnp.linspace(-2.0, 2.0, 3), jnp.linspace(1.0, 4.0, 3)), axis=-1).reshape(-1, 2)
    surface = jax.jit(jax.vmap(log_evidence, in_axes=(0, None, None)))(grid.astype(jnp.float32), phi, t)
    curvature = jax.hessian(log_evidence)(log_hyper, phi, t)
    mean, cov = posterior(log_hyper, phi, t)
    phi_test = features(jnp.linspace(-1.0, 1.0, 5, dtype=jnp.float32))
    variance = 1 / jnp.exp(log_hyper[1]) + jnp.einsum("ij,jk,ik->i", phi_test, cov, phi_test)
    return {"evidence": jnp.stack(history), "log_hyper": log_hyper, "surface": surface, "curvature": curvature,
            "mean": mean, "variance": variance}


def export(key):
    x, t = make_data(key)
    return jax.value_and_grad(log_evidence), (jnp.array([0.0, 2.0], jnp.float32), features(x), t)
