"""A 2-D Poisson problem solved matrix-free with kiln.scipy.sparse.linalg: the operator -div(k grad u) on an
interior grid with zero Dirichlet boundaries, applied as a function (jnp.pad and slices), solved by
conjugate gradients (with and without a Jacobi preconditioner) and by GMRES, and differentiated through
cg with respect to the source and the conductivity (the solve's implicit adjoint)."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random
from kiln.scipy.sparse.linalg import cg, gmres

SIZE = 8


def operator(log_k):
    k = jnp.exp(log_k)

    def apply(u):
        p = jnp.pad(u, 1)
        return k * (4 * u - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]) + 0.1 * u

    return apply


def solve(log_k, source):
    u, _ = cg(operator(log_k), source, tol=1e-6)
    return u


def objective(log_k, source, target):
    return jnp.sum((solve(log_k, source) - target) ** 2)


@jax.jit
def run(log_k, source, target):
    A = operator(log_k)
    diag = 4 * jnp.exp(log_k) + 0.1
    u_cg = solve(log_k, source)
    u_pcg, _ = cg(A, source, tol=1e-6, M=lambda r: r / diag)
    u_gmres, _ = gmres(A, source, tol=1e-6, restart=10)
    value, (g_k, g_source) = jax.value_and_grad(objective, argnums=(0, 1))(log_k, source, target)
    return u_cg, u_pcg, u_gmres, jnp.max(jnp.abs(A(u_cg) - source)), value, g_k, g_source


def problem(key):
    x = jnp.linspace(0.0, 1.0, SIZE)
    source = jnp.sin(jnp.pi * x)[:, None] * jnp.sin(2 * jnp.pi * x)[None, :] + 0.1 * random.normal(key, (SIZE, SIZE))
    target = 0.05 * jnp.outer(x, 1 - x)
    return jnp.float32(0.3), source.astype(jnp.float32), target.astype(jnp.float32)


def main(key):
    u_cg, u_pcg, u_gmres, residual, value, g_k, g_source = run(*problem(key))
    return {"u_cg": u_cg, "u_pcg": u_pcg, "u_gmres": u_gmres, "residual": residual, "objective": value,
            "grad_log_k": g_k, "grad_source": g_source}


def export(key):
    return run, problem(key)
