"""A ResNet-style block trained with its gradient: a 3x3 convolution (lax.conv_general_dilated, NHWC/HWIO),
batch normalization from the batch's statistics with running averages carried as state (value_and_grad
with has_aux), a second convolution, the residual add, max pooling and global average pooling with
lax.reduce_window, and a linear classifier."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

BATCH, SIZE, CHANNELS, CLASSES, MOMENTUM = 4, 8, 4, 3, 0.9


def init(key):
    k1, k2, k3, k4 = random.split(key, 4)
    params = {"stem": random.normal(k1, (3, 3, 1, CHANNELS)) * 0.4,
              "conv1": random.normal(k2, (3, 3, CHANNELS, CHANNELS)) * 0.2,
              "conv2": random.normal(k3, (3, 3, CHANNELS, CHANNELS)) * 0.2,
              "gamma": jnp.ones(CHANNELS, jnp.float32), "beta": jnp.zeros(CHANNELS, jnp.float32),
              "head": random.normal(k4, (CHANNELS, CLASSES)) * 0.3}
    stats = {"mean": jnp.zeros(CHANNELS, jnp.float32), "var": jnp.ones(CHANNELS, jnp.float32)}
    return params, stats


def conv(x, w, stride=1):
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def batch_norm(x, gamma, beta, eps=1e-5):
    mean = jnp.mean(x, axis=(0, 1, 2))
    var = jnp.var(x, axis=(0, 1, 2))
    return gamma * (x - mean) * lax.rsqrt(var + eps) + beta, (mean, var)


def forward(params, images):
    x = jax.nn.relu(conv(images, params["stem"]))
    x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = conv(x, params["conv1"])
    h, (mean, var) = batch_norm(h, params["gamma"], params["beta"])
    h = conv(jax.nn.relu(h), params["conv2"])
    x = jax.nn.relu(x + h)
    side = x.shape[1]
    pooled = lax.reduce_window(x, 0.0, lax.add, (1, side, side, 1), (1, 1, 1, 1), "VALID") / (side * side)
    return pooled.reshape(x.shape[0], -1) @ params["head"], (mean, var)


def loss(params, images, labels):
    logits, batch_stats = forward(params, images)
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1)), batch_stats


@jax.jit
def train_step(params, stats, images, labels):
    (value, (mean, var)), grads = jax.value_and_grad(loss, has_aux=True)(params, images, labels)
    params = jax.tree_util.tree_map(lambda p, g: p - 0.2 * g, params, grads)
    stats = {"mean": MOMENTUM * stats["mean"] + (1 - MOMENTUM) * mean,
             "var": MOMENTUM * stats["var"] + (1 - MOMENTUM) * var}
    return params, stats, value


def make_data(key):
    k1, k2 = random.split(key)
    labels = random.randint(k1, (BATCH,), 0, CLASSES)
    freq = (labels[:, None, None] + 1).astype(jnp.float32)
    grid = jnp.arange(SIZE, dtype=jnp.float32)
    images = jnp.sin(freq * grid[None, :, None] / 3) * jnp.cos(grid[None, None, :] / 2)
    return (images + 0.1 * random.normal(k2, images.shape))[..., None], labels


def main(key):
    k_init, k_data = random.split(key)
    (params, stats), (images, labels) = init(k_init), make_data(k_data)
    losses = []
    for _ in range(4):
        params, stats, value = train_step(params, stats, images, labels)
        losses.append(value)
    return {"losses": jnp.stack(losses), "stem": params["stem"], "conv2": params["conv2"], "gamma": params["gamma"],
            "running_mean": stats["mean"], "running_var": stats["var"]}


def export(key):
    k_init, k_data = random.split(key)
    return train_step, init(k_init) + make_data(k_data)
