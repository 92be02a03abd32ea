"""Mixed-precision training in the style of DeepMind's jmp: float32 master parameters cast to bfloat16 for
the forward and backward pass (tree_map astype), a dynamic loss scale that grows after a run of finite steps
and halves on overflow, gradients unscaled in float32 and checked with jnp.isfinite over the whole tree, and
the update skipped through lax.cond on a pytree (the state a NamedTuple) when they are not finite."""
from typing import NamedTuple

import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

IN, HIDDEN, OUT, BATCH = 8, 16, 4, 12


class TrainState(NamedTuple):
    params: dict
    loss_scale: jnp.ndarray
    good_steps: jnp.ndarray


def init_params(key):
    k1, k2 = random.split(key)
    init = jax.nn.initializers.lecun_normal()
    return {"w1": init(k1, (IN, HIDDEN)), "b1": jnp.zeros(HIDDEN, jnp.float32),
            "w2": init(k2, (HIDDEN, OUT)), "b2": jnp.zeros(OUT, jnp.float32)}


def forward(params, x):
    h = jax.nn.gelu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def loss_fn(params, x, y, scale):
    half = jax.tree_util.tree_map(lambda p: p.astype(jnp.bfloat16), params)
    logits = forward(half, x.astype(jnp.bfloat16)).astype(jnp.float32)
    loss = jnp.sum(jax.nn.logsumexp(logits, axis=-1) - jnp.sum(logits * y, axis=-1))
    return loss * scale, loss


def all_finite(tree):
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in jax.tree_util.tree_leaves(tree)]))


@jax.jit
def train_step(state, x, y):
    grads, loss = jax.grad(loss_fn, has_aux=True)(state.params, x, y, state.loss_scale)
    grads = jax.tree_util.tree_map(lambda g: g.astype(jnp.float32) / state.loss_scale, grads)
    finite = all_finite(grads)

    def apply(s):
        params = jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, s.params, grads)
        grow = s.good_steps + 1 >= 2
        return TrainState(params, jnp.where(grow, s.loss_scale * 2, s.loss_scale),
                          jnp.where(grow, 0, s.good_steps + 1))

    def skip(s):
        return TrainState(s.params, s.loss_scale / 2, jnp.zeros_like(s.good_steps))

    return lax.cond(finite, apply, skip, state), loss, finite


def make_batch(key):
    k1, k2 = random.split(key)
    x = random.normal(k1, (BATCH, IN))
    return x, jax.nn.one_hot(random.randint(k2, (BATCH,), 0, OUT), OUT)


def main(key):
    k_params, k_data = random.split(key)
    x, y = make_batch(k_data)
    # a scale near float32's (and bfloat16's) limit: its growth overflows the gradients once, so the skip
    # branch runs too
    state = TrainState(init_params(k_params), jnp.float32(2.0 ** 125), jnp.int32(0))
    losses, finites, scales = [], [], []
    for _ in range(6):
        state, loss, finite = train_step(state, x, y)
        losses.append(loss)
        finites.append(finite)
        scales.append(state.loss_scale)
    return {"losses": jnp.stack(losses), "finite": jnp.stack(finites), "scales": jnp.stack(scales),
            "w2": state.params["w2"]}


def export(key):
    k_params, k_data = random.split(key)
    return train_step, (TrainState(init_params(k_params), jnp.float32(2.0 ** 15), jnp.int32(1)), *make_batch(k_data))
