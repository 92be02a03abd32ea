"""A small convnet trained with per-example clipped gradients (vmap of grad, as in differentially private
SGD): each example's gradient is clipped to a global norm before the batch average."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

CLIP = 1.0
BATCH = 6


def init_params(key):
    k1, k2, k3 = random.split(key, 3)
    return {"conv": random.normal(k1, (3, 3, 1, 4)) * 0.3,
            "dense": random.normal(k2, (4 * 4 * 4, 2)) * 0.1,
            "bias": random.normal(k3, (2,)) * 0.01}


def model(params, image):
    x = image[None, :, :, None]
    x = lax.conv_general_dilated(x, params["conv"], (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x = jax.nn.relu(x)
    return x.reshape(-1) @ params["dense"] + params["bias"]


def example_loss(params, image, label):
    logits = model(params, image)
    return jax.nn.logsumexp(logits) - logits[label]


def clipped_grad(params, image, label):
    grads = jax.grad(example_loss)(params, image, label)
    leaves = jax.tree_util.tree_leaves(grads)
    norm = jnp.sqrt(sum(jnp.sum(g * g) for g in leaves))
    scale = jnp.minimum(1.0, CLIP / (norm + 1e-6))
    return jax.tree_util.tree_map(lambda g: g * scale, grads)


@jax.jit
def private_step(params, images, labels):
    per_example = jax.vmap(clipped_grad, in_axes=(None, 0, 0))(params, images, labels)
    mean_grad = jax.tree_util.tree_map(lambda g: jnp.mean(g, axis=0), per_example)
    return jax.tree_util.tree_map(lambda p, g: p - 0.5 * g, params, mean_grad)


def make_data(key):
    k_img, k_lab = random.split(key)
    labels = random.bernoulli(k_lab, 0.5, (BATCH,)).astype(jnp.int32)
    images = random.uniform(k_img, (BATCH, 8, 8)) + labels[:, None, None] * jnp.eye(8)
    return images, labels


def main(key):
    k_params, k_data = random.split(key)
    params = init_params(k_params)
    images, labels = make_data(k_data)
    losses = []
    for _ in range(4):
        losses.append(jnp.mean(jax.vmap(example_loss, in_axes=(None, 0, 0))(params, images, labels)))
        params = private_step(params, images, labels)
    return {"losses": jnp.stack(losses), "conv": params["conv"], "dense": params["dense"]}


def export(key):
    k_params, k_data = random.split(key)
    images, labels = make_data(k_data)
    return private_step, (init_params(k_params), images, labels)
