"""An LQR controller for a pendulum linearized with jacfwd, and two iterations of iLQR on the nonlinear
dynamics: a backward Riccati recursion with lax.scan and linear solves for the gains."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

DT, HORIZON = 0.1, 15
Q, R = jnp.diag(jnp.array([1.0, 0.1])), jnp.array([[0.05]])


def dynamics(x, u):
    theta, omega = x
    return jnp.stack([theta + DT * omega, omega + DT * (-9.8 * jnp.sin(theta) + u[0])])


def riccati(a_seq, b_seq):
    def step(p, ab):
        a, b = ab
        gain = jnp.linalg.solve(R + b.T @ p @ b, b.T @ p @ a)
        p = Q + a.T @ p @ (a - b @ gain)
        return p, gain

    _, gains = lax.scan(step, Q, (a_seq, b_seq), reverse=True)
    return gains


def rollout(x0, gains, x_ref, u_ref):
    def step(x, k):
        gain, xr, ur = k
        u = ur - gain @ (x - xr)
        return dynamics(x, u), (x, u)

    _, (xs, us) = lax.scan(step, x0, (gains, x_ref, u_ref))
    return xs, us


def stage_cost(x, u):
    return x @ Q @ x + u @ R @ u


def cost(xs, us):
    return jnp.sum(jax.vmap(stage_cost)(xs, us))


@jax.jit
def ilqr_iteration(x0, xs, us):
    """One iLQR iteration: linearize the dynamics and quadratize the cost along (xs, us), solve for the
    feedforward and feedback terms backward in time, and roll the nonlinear dynamics forward."""
    a_seq = jax.vmap(jax.jacfwd(dynamics, argnums=0))(xs, us)
    b_seq = jax.vmap(jax.jacfwd(dynamics, argnums=1))(xs, us)
    l_x, l_u = jax.vmap(jax.grad(stage_cost, argnums=(0, 1)))(xs, us)

    def backward(v, t):
        v_x, v_xx = v
        a, b, lx, lu = t
        q_x, q_u = lx + a.T @ v_x, lu + b.T @ v_x
        q_xx, q_uu, q_ux = 2 * Q + a.T @ v_xx @ a, 2 * R + b.T @ v_xx @ b, b.T @ v_xx @ a
        k = -jnp.linalg.solve(q_uu, q_u)
        gain = -jnp.linalg.solve(q_uu, q_ux)
        v_x = q_x + gain.T @ q_uu @ k + gain.T @ q_u + q_ux.T @ k
        v_xx = q_xx + gain.T @ q_uu @ gain + gain.T @ q_ux + q_ux.T @ gain
        return (v_x, 0.5 * (v_xx + v_xx.T)), (k, gain)

    _, (ks, gains) = lax.scan(backward, (jnp.zeros(2), jnp.zeros((2, 2))), (a_seq, b_seq, l_x, l_u), reverse=True)

    def forward(x, t):
        k, gain, xr, ur = t
        u = ur + k + gain @ (x - xr)
        return dynamics(x, u), (x, u)

    _, (new_xs, new_us) = lax.scan(forward, x0, (ks, gains, xs, us))
    return new_xs, new_us


def main(key):
    x0 = jnp.array([0.6, 0.0]) + 0.05 * random.normal(key, (2,))
    a = jax.jacfwd(dynamics, argnums=0)(jnp.zeros(2), jnp.zeros(1))
    b = jax.jacobian(dynamics, argnums=1)(jnp.zeros(2), jnp.zeros(1))
    gains = jax.jit(riccati)(jnp.broadcast_to(a, (HORIZON, 2, 2)), jnp.broadcast_to(b, (HORIZON, 2, 1)))
    xs, us = rollout(x0, gains, jnp.zeros((HORIZON, 2)), jnp.zeros((HORIZON, 1)))
    costs = [cost(xs, us)]
    for _ in range(2):
        xs, us = ilqr_iteration(x0, xs, us)
        costs.append(cost(xs, us))
    return {"gains": gains, "states": xs, "costs": jnp.stack(costs)}


def export(key):
    x0 = jnp.array([0.6, 0.0]) + 0.05 * random.normal(key, (2,))
    return ilqr_iteration, (x0, jnp.zeros((HORIZON, 2)) + x0, jnp.zeros((HORIZON, 1)))
