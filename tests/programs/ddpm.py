"""A denoising diffusion model (Ho et al. 2020) on 2-d points: a linear beta schedule with alphas_cumprod
by jnp.cumprod, the noise-prediction loss at random timesteps (random.randint, gathered schedule
entries), a sinusoidal timestep embedding, an MLP trained with optax-style Adam by hand, and ancestral
sampling in lax.fori_loop counting down, with each step's noise from random.fold_in of the loop index."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

T, DIM, HIDDEN, EMBED, BATCH = 20, 2, 16, 8, 12
BETAS = jnp.linspace(1e-4, 0.2, T)
ALPHAS = 1.0 - BETAS
ALPHAS_CUMPROD = jnp.cumprod(ALPHAS)


def timestep_embedding(t, dim=EMBED):
    half = dim // 2
    freqs = jnp.exp(-jnp.log(10000.0) * jnp.arange(half) / half)
    args = t[:, None].astype(jnp.float32) * freqs[None]
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


def init_params(key):
    k1, k2, k3 = random.split(key, 3)
    glorot = jax.nn.initializers.glorot_normal()
    return {"in": {"w": glorot(k1, (DIM + EMBED, HIDDEN)), "b": jnp.zeros(HIDDEN, jnp.float32)},
            "mid": {"w": glorot(k2, (HIDDEN, HIDDEN)), "b": jnp.zeros(HIDDEN, jnp.float32)},
            "out": {"w": glorot(k3, (HIDDEN, DIM)), "b": jnp.zeros(DIM, jnp.float32)}}


def eps_model(params, x, t):
    h = jnp.concatenate([x, timestep_embedding(t)], axis=-1)
    h = jax.nn.silu(h @ params["in"]["w"] + params["in"]["b"])
    h = jax.nn.silu(h @ params["mid"]["w"] + params["mid"]["b"])
    return h @ params["out"]["w"] + params["out"]["b"]


def diffusion_loss(params, x0, key):
    k_t, k_eps = random.split(key)
    t = random.randint(k_t, (x0.shape[0],), 0, T)
    eps = random.normal(k_eps, x0.shape)
    abar = ALPHAS_CUMPROD[t][:, None]
    xt = jnp.sqrt(abar) * x0 + jnp.sqrt(1 - abar) * eps
    return jnp.mean(jnp.square(eps_model(params, xt, t) - eps))


@jax.jit
def train_step(params, opt, x0, key, lr=1e-2):
    m, v, count = opt
    loss, grads = jax.value_and_grad(diffusion_loss)(params, x0, key)
    count = count + 1
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, grads)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * jnp.square(g), v, grads)
    m_hat = jax.tree_util.tree_map(lambda m: m / (1 - 0.9 ** count), m)
    v_hat = jax.tree_util.tree_map(lambda v: v / (1 - 0.999 ** count), v)
    params = jax.tree_util.tree_map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + 1e-8), params, m_hat, v_hat)
    return params, (m, v, count), loss


@jax.jit
def sample(params, key):
    k_init, k_loop = random.split(key)
    x = random.normal(k_init, (BATCH, DIM))

    def body(i, x):
        t = T - 1 - i
        eps = eps_model(params, x, jnp.full((BATCH,), t))
        mean = (x - BETAS[t] / jnp.sqrt(1 - ALPHAS_CUMPROD[t]) * eps) / jnp.sqrt(ALPHAS[t])
        noise = random.normal(random.fold_in(k_loop, i), x.shape)
        return mean + jnp.where(t > 0, jnp.sqrt(BETAS[t]), 0.0) * noise

    return lax.fori_loop(0, T, body, x)


def make_data(key):
    k1, k2 = random.split(key)
    angles = random.uniform(k1, (BATCH,), maxval=2 * jnp.pi)
    return jnp.stack([jnp.cos(angles), jnp.sin(angles)], axis=1) + 0.05 * random.normal(k2, (BATCH, DIM))


def main(key):
    k_params, k_data, k_train, k_sample = random.split(key, 4)
    params = init_params(k_params)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    opt = (zeros, zeros, jnp.zeros((), jnp.int32))
    x0 = make_data(k_data)
    losses = []
    for k in random.split(k_train, 5):
        params, opt, loss = train_step(params, opt, x0, k)
        losses.append(loss)
    samples = sample(params, k_sample)
    return {"losses": jnp.stack(losses), "samples": samples, "abar": ALPHAS_CUMPROD, "count": opt[2]}


def export(key):
    k_params, k_sample = random.split(key)
    return sample, (init_params(k_params), k_sample)
