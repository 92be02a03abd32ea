"""Viscous Burgers' equation u_t + u u_x = nu u_xx on a periodic domain by a Fourier pseudo-spectral
method: derivatives through jnp.fft.rfft / irfft with jnp.fft.rfftfreq wavenumbers, the 2/3 dealiasing
mask, an integrating-factor RK4 step in lax.scan saving every state, and the gradient of the final
energy with respect to the initial condition's amplitude."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax

N, NU, DT, STEPS = 32, 0.05, 0.01, 20
L = 2 * jnp.pi
K = 2 * jnp.pi * jnp.fft.rfftfreq(N, d=L / N)
DEALIAS = jnp.abs(K) < (2.0 / 3.0) * jnp.max(jnp.abs(K))


def nonlinear(u_hat):
    u = jnp.fft.irfft(u_hat, n=N)
    return -0.5 * 1j * K * jnp.fft.rfft(u * u) * DEALIAS


def rk4_step(u_hat, _):
    e = jnp.exp(-NU * K ** 2 * DT / 2)
    e2 = e * e
    k1 = nonlinear(u_hat)
    k2 = nonlinear(e * (u_hat + 0.5 * DT * k1))
    k3 = nonlinear(e * u_hat + 0.5 * DT * k2)
    k4 = nonlinear(e2 * u_hat + DT * e * k3)
    u_next = e2 * u_hat + DT / 6 * (e2 * k1 + 2 * e * (k2 + k3) + k4)
    return u_next, jnp.fft.irfft(u_next, n=N)


def solve(amplitude, x):
    u0 = amplitude * jnp.sin(x) + 0.5 * jnp.cos(2 * x)
    u_hat, history = lax.scan(rk4_step, jnp.fft.rfft(u0), None, length=STEPS)
    return jnp.fft.irfft(u_hat, n=N), history


def energy(amplitude, x):
    u, _ = solve(amplitude, x)
    return 0.5 * jnp.mean(u ** 2)


def main(key):
    del key  # deterministic
    x = jnp.linspace(0, L, N, endpoint=False)
    u, history = jax.jit(solve)(1.0, x)
    e, de = jax.jit(jax.value_and_grad(energy))(jnp.float32(1.0), x)
    ux = jnp.fft.irfft(1j * K * jnp.fft.rfft(u), n=N)  # eagerly
    return {"u": u, "history": history[::5], "energy": e, "denergy": de, "ux": ux}


def export(key):
    del key
    return jax.value_and_grad(energy), (jnp.float32(0.8), jnp.linspace(0, L, N, endpoint=False))
