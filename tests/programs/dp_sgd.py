"""Differentially private SGD (Abadi et al. 2016, as in JAX's examples/differentially_private_sgd.py):
per-example gradients by vmap(grad) with in_axes over a batch of single examples, each example's
gradient clipped to an L2 norm over the whole pytree (tree_leaves, vdot), Gaussian noise per leaf from
keys made by fold_in and split, a NamedTuple of parameters, and a jit-ed update with static_argnums."""
from typing import NamedTuple

import kiln as jax
import kiln.numpy as jnp
from kiln import random

FEATURES, HIDDEN, CLASSES, BATCH = 6, 8, 3, 10


class Params(NamedTuple):
    w1: jnp.ndarray
    b1: jnp.ndarray
    w2: jnp.ndarray
    b2: jnp.ndarray


def init_params(key):
    k1, k2 = random.split(key)
    return Params(random.normal(k1, (FEATURES, HIDDEN)) * 0.5, jnp.zeros(HIDDEN, jnp.float32),
                  random.normal(k2, (HIDDEN, CLASSES)) * 0.5, jnp.zeros(CLASSES, jnp.float32))


def predict(params, x):
    h = jax.nn.relu(x @ params.w1 + params.b1)
    return h @ params.w2 + params.b2


def loss(params, batch):
    x, y = batch
    logits = predict(params, x)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, CLASSES), axis=-1))


def clipped_grad(params, l2_norm_clip, single_example_batch):
    grads = jax.grad(loss)(params, single_example_batch)
    leaves, treedef = jax.tree_util.tree_flatten(grads)
    total_norm = jnp.sqrt(sum(jnp.vdot(g, g) for g in leaves))
    divisor = jnp.maximum(total_norm / l2_norm_clip, 1.)
    return jax.tree_util.tree_unflatten(treedef, [g / divisor for g in leaves])


def private_grad(params, batch, key, l2_norm_clip, noise_multiplier, batch_size):
    # add a singleton batch axis so each example still looks like a batch to `loss`
    expanded = jax.tree_util.tree_map(lambda a: jnp.expand_dims(a, 1), batch)
    per_example = jax.vmap(clipped_grad, in_axes=(None, None, 0))(params, l2_norm_clip, expanded)
    summed = jax.tree_util.tree_map(lambda g: jnp.sum(g, axis=0), per_example)
    leaves, treedef = jax.tree_util.tree_flatten(summed)
    keys = random.split(key, len(leaves))
    noised = [g + l2_norm_clip * noise_multiplier * random.normal(k, g.shape) for g, k in zip(leaves, keys)]
    return jax.tree_util.tree_unflatten(treedef, [g / batch_size for g in noised])


def update(params, batch, key, step, batch_size, lr=0.5):
    key = random.fold_in(key, step)
    grads = private_grad(params, batch, key, 1.0, 0.3, batch_size)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), loss(params, batch)


def make_data(key):
    k1, k2 = random.split(key)
    x = random.normal(k1, (BATCH, FEATURES))
    y = random.randint(k2, (BATCH,), 0, CLASSES)
    return x, y


def main(key):
    k_params, k_data, k_noise = random.split(key, 3)
    params = init_params(k_params)
    batch = make_data(k_data)
    step = jax.jit(update, static_argnums=(4,))
    losses = []
    for i in range(4):
        params, value = step(params, batch, k_noise, i, BATCH)
        losses.append(value)
    accuracy = jnp.mean(jnp.argmax(predict(params, batch[0]), axis=-1) == batch[1])
    return {"losses": jnp.stack(losses), "w1": params.w1, "b2": params.b2, "accuracy": accuracy}


def export(key):
    k_params, k_data, k_noise = random.split(key, 3)
    return (lambda p, b, k, s: update(p, b, k, s, BATCH)), (init_params(k_params), make_data(k_data), k_noise,
                                                          jnp.int32(2))
