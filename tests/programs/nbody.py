"""A gravitational N-body integrator: leapfrog steps in lax.fori_loop with softened pairwise forces, and
the total energy before and after."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

N, STEPS, DT, SOFTENING = 6, 40, 0.01, 0.1


def accelerations(positions, masses):
    delta = positions[None, :, :] - positions[:, None, :]
    inv_r3 = (jnp.sum(delta ** 2, axis=-1) + SOFTENING ** 2) ** -1.5
    return jnp.einsum("ijk,ij,j->ik", delta, inv_r3, masses)


def energy(positions, velocities, masses):
    kinetic = 0.5 * jnp.sum(masses * jnp.sum(velocities ** 2, axis=-1))
    r = jnp.sqrt(jnp.sum((positions[None] - positions[:, None]) ** 2, axis=-1) + SOFTENING ** 2)
    pair = masses[:, None] * masses[None, :] / r
    return kinetic - 0.5 * (jnp.sum(pair) - jnp.sum(jnp.diag(pair)))


@jax.jit
def integrate(positions, velocities, masses):
    def leapfrog(i, state):
        x, v = state
        v = v + 0.5 * DT * accelerations(x, masses)
        x = x + DT * v
        return x, v + 0.5 * DT * accelerations(x, masses)

    return lax.fori_loop(0, STEPS, leapfrog, (positions, velocities))


def make_bodies(key):
    k1, k2, k3 = random.split(key, 3)
    return random.normal(k1, (N, 3)), 0.3 * random.normal(k2, (N, 3)), random.uniform(k3, (N,), minval=0.5, maxval=1.5)


def main(key):
    x, v, m = make_bodies(key)
    x1, v1 = integrate(x, v, m)
    return {"positions": x1, "velocities": v1, "energy_before": energy(x, v, m), "energy_after": energy(x1, v1, m)}


def export(key):
    return integrate, make_bodies(key)
