"""Bayesian logistic regression sampled with a few steps of Hamiltonian Monte Carlo (leapfrog in an inner
fori_loop, a Metropolis accept with random.uniform) and of the unadjusted Langevin algorithm, both in
lax.fori_loop with random.split per step, the log density's gradient by jax.grad, and the posterior
predictive by vmap over the samples."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

N, DIM, STEPS, LEAPFROG, STEP_SIZE = 40, 3, 12, 4, 0.05


def log_density(w, x, y):
    logits = x @ w
    log_lik = jnp.sum(y * jax.nn.log_sigmoid(logits) + (1 - y) * jax.nn.log_sigmoid(-logits))
    return log_lik - 0.5 * jnp.sum(w ** 2)


def hmc(key, w0, x, y):
    grad_fn = jax.grad(log_density)

    def leapfrog(_, state):
        w, p = state
        p = p + 0.5 * STEP_SIZE * grad_fn(w, x, y)
        w = w + STEP_SIZE * p
        return w, p + 0.5 * STEP_SIZE * grad_fn(w, x, y)

    def step(i, carry):
        w, key, accepted = carry
        key, k_momentum, k_accept = random.split(key, 3)
        p0 = random.normal(k_momentum, w.shape)
        w_new, p_new = lax.fori_loop(0, LEAPFROG, leapfrog, (w, p0))
        log_ratio = (log_density(w_new, x, y) - 0.5 * jnp.sum(p_new ** 2)
                     - log_density(w, x, y) + 0.5 * jnp.sum(p0 ** 2))
        accept = jnp.log(random.uniform(k_accept)) < log_ratio
        return jnp.where(accept, w_new, w), key, accepted + accept.astype(jnp.int32)

    w, _, accepted = lax.fori_loop(0, STEPS, step, (w0, key, jnp.int32(0)))
    return w, accepted


def langevin(key, w0, x, y):
    def step(i, carry):
        w, key, trace = carry
        key, k_noise = random.split(key)
        w = w + STEP_SIZE * jax.grad(log_density)(w, x, y) + jnp.sqrt(2 * STEP_SIZE) * random.normal(k_noise, w.shape)
        return w, key, trace.at[i].set(w)

    w, _, trace = lax.fori_loop(0, STEPS, step, (w0, key, jnp.zeros((STEPS, DIM), w0.dtype)))
    return w, trace


@jax.jit
def sample(key, x, y):
    k_hmc, k_ula = random.split(key)
    w0 = jnp.zeros(DIM, x.dtype)
    w_hmc, accepted = hmc(k_hmc, w0, x, y)
    w_ula, trace = langevin(k_ula, w0, x, y)
    predictive = jnp.mean(jax.vmap(lambda w: jax.nn.sigmoid(x[:5] @ w))(trace), axis=0)
    return w_hmc, accepted, w_ula, trace, predictive


def make_data(key):
    k1, k2 = random.split(key)
    x = jnp.concatenate([random.normal(k1, (N, DIM - 1)), jnp.ones((N, 1), jnp.float32)], axis=1)
    true_w = jnp.array([1.5, -2.0, 0.5])
    y = random.bernoulli(k2, jax.nn.sigmoid(x @ true_w)).astype(jnp.float32)
    return x, y


def main(key):
    k_data, k_sample = random.split(key)
    x, y = make_data(k_data)
    w_hmc, accepted, w_ula, trace, predictive = sample(k_sample, x, y)
    return {"w_hmc": w_hmc, "accepted": accepted, "w_ula": w_ula, "trace": trace, "predictive": predictive,
            "log_density": log_density(w_hmc, x, y)}


def export(key):
    k_data, k_sample = random.split(key)
    return sample, (k_sample,) + tuple(make_data(k_data))
