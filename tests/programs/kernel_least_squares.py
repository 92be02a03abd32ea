"""Kernel ridge regression with an RBF kernel: a linear solve for the weights, predictions on a grid, and
the gradient of the validation error with respect to the log length scale."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random


def rbf(x, y, log_scale):
    d2 = jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    return jnp.exp(-0.5 * d2 / jnp.exp(2 * log_scale))


def fit_predict(log_scale, x, y, x_test, ridge=1e-2):
    k = rbf(x, x, log_scale)
    alpha = jnp.linalg.solve(k + ridge * jnp.eye(x.shape[0]), y)
    return rbf(x_test, x, log_scale) @ alpha


def make_data(key):
    k1, k2, k3 = random.split(key, 3)
    x = random.uniform(k1, (24, 1), minval=-3.0, maxval=3.0)
    y = jnp.sin(x[:, 0]) + 0.1 * random.normal(k2, (24,))
    x_val = random.uniform(k3, (8, 1), minval=-3.0, maxval=3.0)
    return x, y, x_val, jnp.sin(x_val[:, 0])


@jax.jit
def validation_error(log_scale, x, y, x_val, y_val):
    return jnp.mean((fit_predict(log_scale, x, y, x_val) - y_val) ** 2)


def main(key):
    x, y, x_val, y_val = make_data(key)
    grid = jnp.linspace(-3.0, 3.0, 7)[:, None]
    log_scale = jnp.asarray(0.0)
    value, slope = jax.jit(jax.value_and_grad(validation_error))(log_scale, x, y, x_val, y_val)
    return {"prediction": jax.jit(fit_predict)(log_scale, x, y, grid), "error": value, "slope": slope}


def export(key):
    return jax.value_and_grad(validation_error), (jnp.asarray(0.0),) + tuple(make_data(key))
