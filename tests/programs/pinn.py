"""A physics-informed neural network for the 1-d Poisson problem -u''(x) = pi^2 sin(pi x) on [-1, 1] with
u(+-1) = 0: the network's input derivatives by jax.hessian and jax.jacfwd of a scalar function of a
scalar, vmapped over collocation points, a jvp directional check, boundary terms, and Adam from
example_libraries.optimizers on a list-of-tuples pytree."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random
from kiln.example_libraries import optimizers

LAYERS = [1, 12, 12, 1]


def init_params(key):
    keys = random.split(key, len(LAYERS) - 1)
    return [(random.normal(k, (n, m)) * jnp.sqrt(1.0 / m), jnp.zeros(n, jnp.float32))
            for k, m, n in zip(keys, LAYERS[:-1], LAYERS[1:])]


def u(params, x):
    h = jnp.array([x])
    for w, b in params[:-1]:
        h = jnp.tanh(w @ h + b)
    w, b = params[-1]
    return (w @ h + b)[0] * (1 - x ** 2)  # the boundary condition built in, as a hard constraint


def residual(params, x):
    u_xx = jax.hessian(u, argnums=1)(params, x)
    return -u_xx - jnp.pi ** 2 * jnp.sin(jnp.pi * x)


def loss(params, xs):
    r = jax.vmap(residual, in_axes=(None, 0))(params, xs)
    u_x = jax.vmap(jax.jacfwd(u, argnums=1), in_axes=(None, 0))(params, jnp.array([-1.0, 1.0]))
    # a soft Neumann-flavoured regularizer on the boundary slopes, to exercise jacfwd
    return jnp.mean(r ** 2) + 1e-3 * jnp.sum(u_x ** 2)


opt_init, opt_update, get_params = optimizers.adam(1e-2)


@jax.jit
def step(i, opt_state, xs):
    value, grads = jax.value_and_grad(loss)(get_params(opt_state), xs)
    return opt_update(i, grads, opt_state), value


def main(key):
    k_params, k_pts = random.split(key)
    xs = random.uniform(k_pts, (16,), minval=-1.0, maxval=1.0)
    opt_state = opt_init(init_params(k_params))
    losses = []
    for i in range(5):
        opt_state, value = step(i, opt_state, xs)
        losses.append(value)
    params = get_params(opt_state)
    grid = jnp.linspace(-1.0, 1.0, 7)
    values = jax.vmap(u, in_axes=(None, 0))(params, grid)
    # the derivative along a direction in parameter space, by jvp
    tangent = jax.tree_util.tree_map(jnp.ones_like, params)
    _, directional = jax.jvp(lambda p: loss(p, xs), (params,), (tangent,))
    return {"losses": jnp.stack(losses), "u": values, "directional": directional}


def export(key):
    k_params, k_pts = random.split(key)
    xs = random.uniform(k_pts, (16,), minval=-1.0, maxval=1.0)
    return (lambda params, xs: jax.value_and_grad(loss)(params, xs)), (init_params(k_params), xs)
