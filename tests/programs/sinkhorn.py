"""Entropy-regularized optimal transport by Sinkhorn's log-domain iterations (as in OTT-JAX / Cuturi 2013):
the cost matrix from pairwise squared distances, potentials updated with logsumexp in lax.while_loop until
the marginal error drops below a tolerance (iteration count a result), the same iterations a fixed number of
times in lax.scan to differentiate the transport cost with respect to the point positions (a Sinkhorn
divergence flow step), and jax.tree_util.tree_map over a dict of point clouds."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random
from kiln.scipy.special import logsumexp

EPSILON, TOL, MAX_ITER, FIXED_ITER = 0.1, 1e-4, 500, 40


def cost_matrix(x, y):
    return jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)


def _updates(c, log_a, log_b, f, g):
    f = -EPSILON * logsumexp((g[None, :] - c) / EPSILON + log_b[None, :], axis=1)
    g = -EPSILON * logsumexp((f[:, None] - c) / EPSILON + log_a[:, None], axis=0)
    return f, g


def plan(c, log_a, log_b, f, g):
    return jnp.exp((f[:, None] + g[None, :] - c) / EPSILON + log_a[:, None] + log_b[None, :])


@jax.jit
def sinkhorn_to_tolerance(x, y, a, b):
    c = cost_matrix(x, y)
    log_a, log_b = jnp.log(a), jnp.log(b)

    def cond(state):
        _, _, err, i = state
        return (err > TOL) & (i < MAX_ITER)

    def body(state):
        f, g, _, i = state
        f, g = _updates(c, log_a, log_b, f, g)
        err = jnp.sum(jnp.abs(plan(c, log_a, log_b, f, g).sum(axis=1) - a))
        return f, g, err, i + 1

    init = (jnp.zeros_like(a), jnp.zeros_like(b), jnp.asarray(jnp.inf, a.dtype), 0)
    f, g, err, iterations = lax.while_loop(cond, body, init)
    p = plan(c, log_a, log_b, f, g)
    return jnp.sum(p * c), p, iterations, err


def transport_cost(x, y, a, b):
    c = cost_matrix(x, y)
    log_a, log_b = jnp.log(a), jnp.log(b)

    def step(fg, _):
        return _updates(c, log_a, log_b, *fg), None

    (f, g), _ = lax.scan(step, (jnp.zeros_like(a), jnp.zeros_like(b)), None, length=FIXED_ITER)
    return jnp.sum(plan(c, log_a, log_b, f, g) * c)


def make_clouds(key):
    k1, k2, k3 = random.split(key, 3)
    x = random.normal(k1, (7, 2))
    y = random.normal(k2, (5, 2)) * 0.5 + jnp.array([1.5, -0.5])
    b = jax.nn.softmax(random.normal(k3, (5,)))
    return {"x": x, "y": y}, jnp.full((7,), 1 / 7, jnp.float32), b


def main(key):
    clouds, a, b = make_clouds(key)
    cost, p, iterations, err = sinkhorn_to_tolerance(clouds["x"], clouds["y"], a, b)
    step = jax.jit(jax.value_and_grad(transport_cost))
    costs = []
    for _ in range(3):  # move the source cloud along the negative gradient
        value, gx = step(clouds["x"], clouds["y"], a, b)
        costs.append(value)
        clouds = jax.tree_util.tree_map(lambda v, d: v - 0.5 * d, clouds, {"x": gx * 7, "y": jnp.zeros_like(clouds["y"])})
    return {"cost": cost, "plan": p, "iterations": iterations, "err_small": err <= TOL, "costs": jnp.stack(costs),
            "x": clouds["x"]}


def export(key):
    clouds, a, b = make_clouds(key)
    return sinkhorn_to_tolerance, (clouds["x"], clouds["y"], a, b)
