"""Implicit layers, as in the JAX implicit-layers tutorial: a deep-equilibrium layer z = tanh(W z + x) whose
fixed point a lax.while_loop finds, differentiated by a custom_vjp (nondiff solver and function arguments)
that solves the adjoint fixed point with the same solver; a square root by Newton's method with
lax.custom_root, differentiated implicitly; and a training step of the equilibrium model."""
from functools import partial

import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

DIM, BATCH = 5, 4


def fwd_solver(f, z_init):
    def cond_fun(carry):
        z_prev, z, i = carry
        return (jnp.linalg.norm(z_prev - z) > 1e-5) & (i < 200)

    def body_fun(carry):
        _, z, i = carry
        return z, f(z), i + 1

    _, z_star, _ = lax.while_loop(cond_fun, body_fun, (z_init, f(z_init), 0))
    return z_star


@partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def fixed_point_layer(solver, f, params, x):
    return solver(lambda z: f(params, x, z), jnp.zeros_like(x))


def fixed_point_layer_fwd(solver, f, params, x):
    z_star = fixed_point_layer(solver, f, params, x)
    return z_star, (params, x, z_star)


def fixed_point_layer_bwd(solver, f, res, z_star_bar):
    params, x, z_star = res
    _, vjp_a = jax.vjp(lambda params, x: f(params, x, z_star), params, x)
    _, vjp_z = jax.vjp(lambda z: f(params, x, z), z_star)
    return vjp_a(solver(lambda u: vjp_z(u)[0] + z_star_bar, jnp.zeros_like(z_star)))


fixed_point_layer.defvjp(fixed_point_layer_fwd, fixed_point_layer_bwd)


def f(W, x, z):
    return jnp.tanh(W @ z + x)


def model(params, xs):
    W, head = params
    zs = jax.vmap(lambda x: fixed_point_layer(fwd_solver, f, W, x))(xs)
    return zs @ head


def loss(params, xs, ys):
    return jnp.mean((model(params, xs) - ys) ** 2)


@jax.jit
def train_step(params, xs, ys):
    value, grads = jax.value_and_grad(loss)(params, xs, ys)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value


def newton_sqrt(a):
    """The square root of a scalar a, a root of x**2 - a found by Newton's method."""

    def solve(g, y):
        def body(_, x):
            return x - g(x) / jax.grad(g)(x)

        return lax.fori_loop(0, 30, body, y)

    return lax.custom_root(lambda x: x ** 2 - a, jnp.ones_like(a), solve, lambda g, y: y / g(1.0))


def init(key):
    k1, k2, k3, k4 = random.split(key, 4)
    W = random.normal(k1, (DIM, DIM)) * 0.4 / jnp.sqrt(DIM)
    head = random.normal(k2, (DIM,))
    xs = random.normal(k3, (BATCH, DIM))
    ys = random.normal(k4, (BATCH,))
    return (W, head), xs, ys


def main(key):
    params, xs, ys = init(key)
    W0 = params[0]
    z = fixed_point_layer(fwd_solver, f, params[0], xs[0])
    grad_W = jax.grad(lambda W, x: jnp.sum(fixed_point_layer(fwd_solver, f, W, x) ** 2))(params[0], xs[0])
    losses = []
    for _ in range(3):
        params, value = train_step(params, xs, ys)
        losses.append(value)
    a = jnp.array([2.0, 9.0, 0.25], jnp.float32)
    return {"z": z, "residual": jnp.max(jnp.abs(z - f(W0, xs[0], z))),
            "grad_W": grad_W, "losses": jnp.stack(losses), "W": params[0],
                    "sqrt": jax.vmap(newton_sqrt)(a), "sqrt_grad": jax.vmap(jax.grad(newton_sqrt))(a)}


def export(key):
    params, xs, ys = init(key)
    return train_step, (params, xs, ys)
