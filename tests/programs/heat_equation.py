"""The 2-D heat equation on a periodic grid: explicit steps with a five-point Laplacian from jnp.roll,
run by lax.while_loop until the update's largest change falls below a tolerance (the number of steps is
a result), the same stencil as a convolution (lax.conv with a 3x3 kernel, wrap padding by jnp.pad), and the
sensitivity of the final heat in a corner to the initial condition by grad through a fixed number of
steps in lax.fori_loop."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

SIZE, ALPHA, TOL, MAX_STEPS = 12, 0.2, 2e-3, 500


def laplacian(u):
    return (jnp.roll(u, 1, axis=0) + jnp.roll(u, -1, axis=0) + jnp.roll(u, 1, axis=1) + jnp.roll(u, -1, axis=1)
            - 4 * u)


def laplacian_conv(u):
    kernel = jnp.array([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]], u.dtype)
    padded = jnp.pad(u, 1, mode="wrap")
    return lax.conv(padded[None, None], kernel[None, None], (1, 1), "VALID")[0, 0]


@jax.jit
def solve(u0):
    def cond(state):
        u, change, steps = state
        return (change > TOL) & (steps < MAX_STEPS)

    def body(state):
        u, _, steps = state
        du = ALPHA * laplacian(u)
        return u + du, jnp.max(jnp.abs(du)), steps + 1

    u, change, steps = lax.while_loop(cond, body, (u0, jnp.asarray(jnp.inf, u0.dtype), jnp.int32(0)))
    return u, change, steps


def corner_heat(u0):
    u = lax.fori_loop(0, 10, lambda i, u: u + ALPHA * laplacian_conv(u), u0)
    return jnp.sum(u[:3, :3])


def initial(key):
    x = jnp.linspace(-1.0, 1.0, SIZE)
    bump = jnp.exp(-8 * (x[:, None] ** 2 + (x[None, :] - 0.3) ** 2))
    return (bump + 0.1 * random.uniform(key, (SIZE, SIZE))).astype(jnp.float32)


def main(key):
    u0 = initial(key)
    u, change, steps = solve(u0)
    return {"u": u, "change": change, "steps": steps, "sensitivity": jax.grad(corner_heat)(u0),
            "stencils_agree": jnp.max(jnp.abs(laplacian(u0) - laplacian_conv(u0)))}


def export(key):
    return lambda u0: (solve(u0), jax.grad(corner_heat)(u0)), (initial(key),)
