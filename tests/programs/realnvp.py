"""A RealNVP normalizing flow: affine coupling layers with alternating binary masks, tanh-bounded log
scales, the log-determinant summed per layer, a standard-normal base density, the inverse pass for
sampling, and maximum-likelihood SGD steps with grad."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random

DIM, HIDDEN, LAYERS, N = 4, 16, 4, 32


def init_params(key):
    params = []
    for k in random.split(key, LAYERS):
        k1, k2, k3 = random.split(k, 3)
        params.append({"w1": random.normal(k1, (DIM, HIDDEN)) * 0.3, "b1": jnp.zeros(HIDDEN, jnp.float32),
                       "ws": random.normal(k2, (HIDDEN, DIM)) * 0.1, "wt": random.normal(k3, (HIDDEN, DIM)) * 0.1})
    return params


def masks():
    return [(jnp.arange(DIM) % 2 == i % 2).astype(jnp.float32) for i in range(LAYERS)]


def coupling(layer, mask, x):
    h = jax.nn.relu((x * mask) @ layer["w1"] + layer["b1"])
    log_s = jnp.tanh(h @ layer["ws"]) * (1 - mask)
    t = (h @ layer["wt"]) * (1 - mask)
    return log_s, t


def forward(params, x):
    """Data to latent, and log |det dz/dx| per example."""
    log_det = jnp.zeros(x.shape[0], x.dtype)
    for layer, mask in zip(params, masks()):
        log_s, t = coupling(layer, mask, x)
        x = mask * x + (1 - mask) * (x * jnp.exp(log_s) + t)
        log_det = log_det + jnp.sum(log_s, axis=-1)
    return x, log_det


def inverse(params, z):
    for layer, mask in reversed(list(zip(params, masks()))):
        log_s, t = coupling(layer, mask, z)
        z = mask * z + (1 - mask) * ((z - t) * jnp.exp(-log_s))
    return z


def log_prob(params, x):
    z, log_det = forward(params, x)
    return -0.5 * jnp.sum(z ** 2, axis=-1) - 0.5 * DIM * jnp.log(2 * jnp.pi) + log_det


def nll(params, x):
    return -jnp.mean(log_prob(params, x))


@jax.jit
def sgd_step(params, x):
    value, grads = jax.value_and_grad(nll)(params, x)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value


def make_data(key):
    k1, k2 = random.split(key)
    a = random.normal(k1, (N, DIM // 2))
    b = jnp.sin(2 * a) + 0.1 * random.normal(k2, (N, DIM // 2))
    return jnp.concatenate([a, b], axis=1)


def main(key):
    k_params, k_data, k_sample = random.split(key, 3)
    params, x = init_params(k_params), make_data(k_data)
    losses = []
    for _ in range(5):
        params, value = sgd_step(params, x)
        losses.append(value)
    z = random.normal(k_sample, (5, DIM))
    samples = inverse(params, z)  # eagerly, as the jitted steps give the parameters
    return {"losses": jnp.stack(losses), "samples": samples, "roundtrip": forward(params, samples)[0],
            "log_prob": log_prob(params, x[:6])}


def export(key):
    k_params, k_data = random.split(key)
    return sgd_step, (init_params(k_params), make_data(k_data))
