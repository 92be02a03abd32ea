"""Gaussian-process regression: the Cholesky factor of the kernel matrix, triangular solves for the
posterior mean and variance, and the gradient of the log marginal likelihood in the hyperparameters."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random
from kiln.scipy.linalg import cho_solve, solve_triangular


def kernel(x, y, params):
    d2 = (x[:, None] - y[None, :]) ** 2
    return jnp.exp(2 * params["log_amp"]) * jnp.exp(-0.5 * d2 / jnp.exp(2 * params["log_len"]))


def log_marginal_likelihood(params, x, y):
    n = x.shape[0]
    k = kernel(x, x, params) + (jnp.exp(2 * params["log_noise"]) + 1e-6) * jnp.eye(n)
    chol = jnp.linalg.cholesky(k)
    alpha = cho_solve((chol, True), y)
    return -0.5 * y @ alpha - jnp.sum(jnp.log(jnp.diag(chol))) - 0.5 * n * jnp.log(2 * jnp.pi)


@jax.jit
def posterior(params, x, y, x_test):
    n = x.shape[0]
    k = kernel(x, x, params) + (jnp.exp(2 * params["log_noise"]) + 1e-6) * jnp.eye(n)
    chol = jnp.linalg.cholesky(k)
    k_star = kernel(x, x_test, params)
    v = solve_triangular(chol, k_star, lower=True)
    mean = k_star.T @ cho_solve((chol, True), y)
    var = jnp.exp(2 * params["log_amp"]) - jnp.sum(v * v, axis=0)
    return mean, var


def make_data(key):
    k1, k2 = random.split(key)
    x = jnp.sort(random.uniform(k1, (16,), minval=-2.0, maxval=2.0))
    return x, jnp.cos(2 * x) + 0.05 * random.normal(k2, (16,))


def main(key):
    x, y = make_data(key)
    params = {"log_amp": jnp.asarray(0.0), "log_len": jnp.asarray(-0.5), "log_noise": jnp.asarray(-2.0)}
    value_and_grad = jax.jit(jax.value_and_grad(log_marginal_likelihood))
    history = []
    for _ in range(5):
        value, grads = value_and_grad(params, x, y)
        history.append(value)
        params = jax.tree_util.tree_map(lambda p, g: p + 0.05 * g, params, grads)
    mean, var = posterior(params, x, y, jnp.linspace(-2.0, 2.0, 9))
    return {"lml": jnp.stack(history), "mean": mean, "var": var, "log_len": params["log_len"]}


def export(key):
    x, y = make_data(key)
    params = {"log_amp": jnp.asarray(0.0), "log_len": jnp.asarray(-0.5), "log_noise": jnp.asarray(-2.0)}
    return jax.value_and_grad(log_marginal_likelihood), (params, x, y)
