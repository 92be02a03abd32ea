"""A causal Transformer language-model training step: token and position embeddings, pre-norm layer norm
with a learned scale and bias, multi-head attention with the causal mask built by jnp.tril and applied with
jnp.where, a GELU MLP, tied output embeddings, next-token cross-entropy with one_hot and log_softmax, and
SGD on the parameter tree."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random

VOCAB, SEQ, DIM, HEADS, BATCH = 11, 7, 8, 2, 3


def init_params(key):
    keys = random.split(key, 6)
    normal = lambda k, shape: 0.3 * random.normal(k, shape)  # noqa: E731
    return {"embed": normal(keys[0], (VOCAB, DIM)), "pos": normal(keys[1], (SEQ, DIM)),
            "ln1": (jnp.ones(DIM, jnp.float32), jnp.zeros(DIM, jnp.float32)),
            "ln2": (jnp.ones(DIM, jnp.float32), jnp.zeros(DIM, jnp.float32)),
            "qkv": normal(keys[2], (DIM, 3 * DIM)), "out": normal(keys[3], (DIM, DIM)),
            "mlp_in": normal(keys[4], (DIM, 4 * DIM)), "mlp_out": normal(keys[5], (4 * DIM, DIM))}


def layer_norm(x, scale_bias, eps=1e-6):
    scale, bias = scale_bias
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * scale + bias


def attention(params, x):
    seq = x.shape[0]
    q, k, v = jnp.split(x @ params["qkv"], 3, axis=-1)
    split_heads = lambda t: t.reshape(seq, HEADS, DIM // HEADS).transpose(1, 0, 2)  # noqa: E731
    q, k, v = map(split_heads, (q, k, v))
    scores = jnp.einsum("hqd,hkd->hqk", q, k) / jnp.sqrt(DIM // HEADS).astype(x.dtype)
    mask = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    scores = jnp.where(mask[None], scores, jnp.finfo(scores.dtype).min)
    weights = jax.nn.softmax(scores, axis=-1)
    heads = jnp.einsum("hqk,hkd->qhd", weights, v).reshape(seq, DIM)
    return heads @ params["out"]


def forward(params, tokens):
    x = params["embed"][tokens] + params["pos"][: tokens.shape[0]]
    x = x + attention(params, layer_norm(x, params["ln1"]))
    x = x + jax.nn.gelu(layer_norm(x, params["ln2"]) @ params["mlp_in"]) @ params["mlp_out"]
    return x @ params["embed"].T


def loss(params, batch):
    inputs, targets = batch[:, :-1], batch[:, 1:]
    logits = jax.vmap(forward, in_axes=(None, 0))(params, inputs)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.sum(jax.nn.one_hot(targets, VOCAB) * logp, axis=-1))


@jax.jit
def sgd_step(params, batch):
    value, grads = jax.value_and_grad(loss)(params, batch)
    return jax.tree_util.tree_map(lambda p, g: p - 0.5 * g, params, grads), value


def make_batch(key):
    start = random.randint(key, (BATCH, 1), 0, VOCAB)
    return (start + 2 * jnp.arange(SEQ + 1)[None, :]) % VOCAB


def main(key):
    k_params, k_data = random.split(key)
    params, batch = init_params(k_params), make_batch(k_data)
    losses = []
    for _ in range(5):
        params, value = sgd_step(params, batch)
        losses.append(value)
    logits = forward(params, batch[0, :-1])  # eagerly
    return {"losses": jnp.stack(losses), "logits": logits, "next": jnp.argmax(logits, axis=-1),
            "embed": params["embed"], "ln1_scale": params["ln1"][0]}


def export(key):
    k_params, k_data = random.split(key)
    return sgd_step, (init_params(k_params), make_batch(k_data))
