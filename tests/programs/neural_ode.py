"""A neural ODE (Chen et al. 2018): an MLP vector field with the time as an input, integrated by
jax.experimental.ode.odeint (adaptive Dormand-Prince) at several output times, fitted to a spiral by the
gradient through odeint's adjoint, with parameters flattened by flatten_util.ravel_pytree for a plain
vector SGD update."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random
from kiln.experimental.ode import odeint
from kiln.flatten_util import ravel_pytree

HIDDEN = 8
TIMES = jnp.linspace(0.0, 1.0, 5)


def init_params(key):
    k1, k2 = random.split(key)
    return {"w1": 0.3 * random.normal(k1, (3, HIDDEN)), "b1": jnp.zeros(HIDDEN, jnp.float32),
            "w2": 0.3 * random.normal(k2, (HIDDEN, 2)), "b2": jnp.zeros(2, jnp.float32)}


def dynamics(y, t, params):
    h = jnp.tanh(jnp.concatenate([y, jnp.array([t])]) @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def predict(params, y0):
    return odeint(dynamics, y0, TIMES, params, rtol=1e-5, atol=1e-5)


def loss(params, y0, target):
    return jnp.mean(jnp.sum((predict(params, y0) - target) ** 2, axis=-1))


def true_spiral(y0):
    a = jnp.array([[-0.1, 2.0], [-2.0, -0.1]])
    return odeint(lambda y, t: y @ a, y0, TIMES)


def main(key):
    y0 = jnp.array([1.0, 0.0])
    target = true_spiral(y0)
    flat, unravel = ravel_pytree(init_params(key))

    @jax.jit
    def step(flat, y0, target):
        value, g = jax.value_and_grad(lambda f: loss(unravel(f), y0, target))(flat)
        return flat - 0.1 * g, value

    losses = []
    for _ in range(3):
        flat, value = step(flat, y0, target)
        losses.append(value)
    return {"losses": jnp.stack(losses), "target": target, "trajectory": predict(unravel(flat), y0),
            "flat": flat}


def export(key):
    y0 = jnp.array([1.0, 0.0])
    return jax.value_and_grad(loss), (init_params(key), y0, true_spiral(y0))
