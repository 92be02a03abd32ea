"""A transformer block (layer norm, single-head self-attention with a causal mask, a checkpointed MLP) and
the gradient of a regression loss through it."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random

SEQ, DIM, HIDDEN = 6, 8, 16


def layer_norm(x, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(jnp.var(x, axis=-1, keepdims=True) + eps)


def attention(params, x):
    q, k, v = x @ params["wq"], x @ params["wk"], x @ params["wv"]
    scores = q @ k.T / jnp.sqrt(DIM)
    mask = jnp.tril(jnp.ones((SEQ, SEQ), dtype=bool))
    weights = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
    return weights @ v @ params["wo"]


@jax.checkpoint
def mlp(params, x):
    return jax.nn.gelu(x @ params["w1"]) @ params["w2"]


def block(params, x):
    x = x + attention(params, layer_norm(x))
    return x + mlp(params, layer_norm(x))


def loss(params, x, target):
    return jnp.mean((block(params, x) - target) ** 2)


def init_params(key):
    shapes = {"wq": (DIM, DIM), "wk": (DIM, DIM), "wv": (DIM, DIM), "wo": (DIM, DIM), "w1": (DIM, HIDDEN),
              "w2": (HIDDEN, DIM)}
    keys = random.split(key, len(shapes))
    return {name: random.normal(k, shape) / jnp.sqrt(shape[0]) for k, (name, shape) in zip(keys, shapes.items())}


def make_data(key):
    k1, k2 = random.split(key)
    return random.normal(k1, (SEQ, DIM)), random.normal(k2, (SEQ, DIM))


def main(key):
    k_params, k_data = random.split(key)
    params = init_params(k_params)
    x, target = make_data(k_data)
    value, grads = jax.jit(jax.value_and_grad(loss))(params, x, target)
    return {"output": jax.jit(block)(params, x), "loss": value, "grad_w1": grads["w1"], "grad_wq": grads["wq"]}


def export(key):
    k_params, k_data = random.split(key)
    return jax.value_and_grad(loss), (init_params(k_params),) + tuple(make_data(k_data))
