"""A mixture-density network (Bishop 1994) for a multimodal 1-d regression, with a Gumbel-softmax
relaxation: the MDN head splits into logits, means and log-scales by jnp.split, the negative log
likelihood by logsumexp over components with jax.scipy.stats.norm.logpdf, sampling the mixture by
random.categorical and random.gumbel (the straight-through Gumbel-softmax with stop_gradient), and
training by value_and_grad(has_aux=True) with gradient clipping by global norm."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random
from kiln.scipy.stats import norm

COMPONENTS, HIDDEN, POINTS = 3, 16, 24


def init_params(key):
    k1, k2 = random.split(key)
    return [(random.normal(k1, (1, HIDDEN)), jnp.zeros(HIDDEN, jnp.float32)),
            (random.normal(k2, (HIDDEN, 3 * COMPONENTS)) * 0.1, jnp.zeros(3 * COMPONENTS, jnp.float32))]


def mdn(params, x):
    (w1, b1), (w2, b2) = params
    h = jnp.tanh(x[:, None] @ w1 + b1)
    logits, means, log_scales = jnp.split(h @ w2 + b2, 3, axis=-1)
    return jax.nn.log_softmax(logits), means, log_scales


def nll(params, x, y):
    log_pi, means, log_scales = mdn(params, x)
    log_comp = norm.logpdf(y[:, None], means, jnp.exp(log_scales))
    per_point = -jax.nn.logsumexp(log_pi + log_comp, axis=-1)
    return per_point.mean(), {"per_point": per_point, "entropy": -jnp.sum(jnp.exp(log_pi) * log_pi, axis=-1).mean()}


def clip_by_global_norm(grads, max_norm):
    norm_ = jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree_util.tree_leaves(grads)))
    scale = jnp.minimum(1.0, max_norm / (norm_ + 1e-6))
    return jax.tree_util.tree_map(lambda g: g * scale, grads), norm_


@jax.jit
def step(params, x, y):
    (value, aux), grads = jax.value_and_grad(nll, has_aux=True)(params, x, y)
    grads, gnorm = clip_by_global_norm(grads, 1.0)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value, aux["entropy"], gnorm


def gumbel_softmax(key, logits, temperature=0.5):
    y = jax.nn.softmax((logits + random.gumbel(key, logits.shape)) / temperature)
    hard = jax.nn.one_hot(jnp.argmax(y, axis=-1), logits.shape[-1])
    return hard - jax.lax.stop_gradient(y) + y


def sample(params, x, key):
    k_cat, k_noise = random.split(key)
    log_pi, means, log_scales = mdn(params, x)
    which = random.categorical(k_cat, log_pi, axis=-1)
    mu = jnp.take_along_axis(means, which[:, None], axis=-1)[:, 0]
    sigma = jnp.exp(jnp.take_along_axis(log_scales, which[:, None], axis=-1)[:, 0])
    return mu + sigma * random.normal(k_noise, mu.shape)


def make_data(key):
    k1, k2, k3 = random.split(key, 3)
    x = random.uniform(k1, (POINTS,), minval=-1.0, maxval=1.0)
    branch = random.bernoulli(k2, 0.5, (POINTS,))
    y = jnp.where(branch, jnp.sin(3 * x), -jnp.sin(3 * x)) + 0.1 * random.normal(k3, (POINTS,))
    return x, y


def main(key):
    k_params, k_data, k_sample, k_gumbel = random.split(key, 4)
    params = init_params(k_params)
    x, y = make_data(k_data)
    losses, entropies, norms = [], [], []
    for _ in range(4):
        params, value, entropy, gnorm = step(params, x, y)
        losses.append(value)
        entropies.append(entropy)
        norms.append(gnorm)
    log_pi, _, _ = mdn(params, x)
    relaxed_grad = jax.grad(lambda l: jnp.sum(gumbel_softmax(k_gumbel, l) * jnp.arange(COMPONENTS)))(log_pi)
    return {"losses": jnp.stack(losses), "entropy": jnp.stack(entropies), "gnorm": jnp.stack(norms),
            "samples": sample(params, x, k_sample), "relaxed_grad": relaxed_grad,
            "hard": gumbel_softmax(k_gumbel, log_pi)}


def export(key):
    k_params, k_data = random.split(key)
    x, y = make_data(k_data)
    return step, (init_params(k_params), x, y)
