"""A variational autoencoder trained a few steps: Gaussian encoder, the reparameterization trick with
random.normal, a Bernoulli decoder through softplus (log-sigmoid likelihood), an importance-weighted ELBO
with logsumexp, value_and_grad, and Adam written by hand with tree_map."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random

DATA, HIDDEN, LATENT, BATCH, SAMPLES = 12, 10, 2, 8, 3


def init_params(key):
    def dense(k, m, n):
        return random.normal(k, (m, n)) / jnp.sqrt(m), jnp.zeros(n, jnp.float32)

    k1, k2, k3, k4 = random.split(key, 4)
    return {"enc": dense(k1, DATA, HIDDEN), "mu": dense(k2, HIDDEN, LATENT), "logvar": dense(k3, HIDDEN, LATENT),
            "dec": dense(k4, LATENT, DATA)}


def encode(params, x):
    h = jnp.tanh(x @ params["enc"][0] + params["enc"][1])
    return h @ params["mu"][0] + params["mu"][1], h @ params["logvar"][0] + params["logvar"][1]


def log_bernoulli(logits, x):
    # log p(x | logits) = x log sigmoid(l) + (1 - x) log sigmoid(-l)
    return -jnp.sum(x * jax.nn.softplus(-logits) + (1 - x) * jax.nn.softplus(logits), axis=-1)


def elbo(params, x, key):
    mu, logvar = encode(params, x)
    std = jnp.exp(0.5 * logvar)
    eps = random.normal(key, (SAMPLES,) + mu.shape)
    z = mu + std * eps
    logits = z @ params["dec"][0] + params["dec"][1]
    log_px = log_bernoulli(logits, x)
    log_pz = -0.5 * jnp.sum(z ** 2 + jnp.log(2 * jnp.pi), axis=-1)
    log_qz = -0.5 * jnp.sum(eps ** 2 + logvar + jnp.log(2 * jnp.pi), axis=-1)
    weights = log_px + log_pz - log_qz
    return jnp.mean(jax.nn.logsumexp(weights, axis=0) - jnp.log(SAMPLES))


def adam_init(params):
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    return params, zeros, zeros


def train_step(state, step, x, key, lr=0.05, b1=0.9, b2=0.999, eps=1e-8):
    params, m, v = state
    value, grads = jax.value_and_grad(lambda p: -elbo(p, x, key))(params)
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    t = step + 1
    params = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / (1 - b1 ** t)) / (jnp.sqrt(v / (1 - b2 ** t)) + eps), params, m, v)
    return (params, m, v), value


def make_data(key):
    k1, k2 = random.split(key)
    prototypes = random.bernoulli(k1, 0.5, (2, DATA))
    which = random.bernoulli(k2, 0.5, (BATCH,)).astype(jnp.int32)
    return prototypes[which].astype(jnp.float32)


def main(key):
    k_params, k_data, k_train = random.split(key, 3)
    x = make_data(k_data)
    state = adam_init(init_params(k_params))
    step = jax.jit(train_step)
    losses = []
    for i, k in enumerate(random.split(k_train, 6)):
        state, value = step(state, jnp.float32(i), x, k)
        losses.append(value)
    mu, logvar = encode(state[0], x)  # eagerly
    return {"losses": jnp.stack(losses), "mu": mu, "logvar": logvar, "dec": state[0]["dec"][0]}


def export(key):
    k_params, k_data, k_train = random.split(key, 3)
    return train_step, (adam_init(init_params(k_params)), jnp.float32(0), make_data(k_data), k_train)
