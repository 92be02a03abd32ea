"""A NeRF-style radiance field (Mildenhall et al. 2020, as in the JAX reference code jaxnerf): sinusoidal
positional encoding of 3-d points, an MLP giving density and colour, stratified samples along rays with
jittered depths, and volume rendering by cumsum/cumprod of alphas (exclusive transmittance by
concatenate), then a photometric loss trained with value_and_grad(has_aux=True) and momentum SGD."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random

FREQS, HIDDEN, RAYS, SAMPLES, NEAR, FAR = 4, 16, 6, 8, 2.0, 6.0


def positional_encoding(x, freqs=FREQS):
    scales = 2.0 ** jnp.arange(freqs)
    xb = (x[..., None, :] * scales[:, None]).reshape(x.shape[:-1] + (-1,))
    four = jnp.sin(jnp.concatenate([xb, xb + 0.5 * jnp.pi], axis=-1))
    return jnp.concatenate([x, four], axis=-1)


def init_mlp(key, sizes):
    keys = random.split(key, len(sizes) - 1)
    return [{"w": random.normal(k, (m, n)) * jnp.sqrt(2.0 / m), "b": jnp.zeros((n,), jnp.float32)}
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def mlp(params, x):
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def render(params, origins, directions, key):
    t = jnp.linspace(NEAR, FAR, SAMPLES)
    t = t + random.uniform(key, origins.shape[:-1] + (SAMPLES,)) * (FAR - NEAR) / SAMPLES
    points = origins[..., None, :] + t[..., :, None] * directions[..., None, :]
    raw = mlp(params, positional_encoding(points))
    rgb, sigma = jax.nn.sigmoid(raw[..., :3]), jax.nn.softplus(raw[..., 3])
    deltas = jnp.concatenate([t[..., 1:] - t[..., :-1], jnp.broadcast_to(1e10, t[..., :1].shape)], axis=-1)
    deltas = deltas * jnp.linalg.norm(directions[..., None, :], axis=-1)
    alpha = 1.0 - jnp.exp(-sigma * deltas)
    accum = jnp.cumprod(1.0 - alpha + 1e-10, axis=-1)
    transmittance = jnp.concatenate([jnp.ones_like(accum[..., :1]), accum[..., :-1]], axis=-1)
    weights = alpha * transmittance
    color = jnp.sum(weights[..., None] * rgb, axis=-2)
    depth = jnp.sum(weights * t, axis=-1)
    acc = weights.sum(axis=-1)
    return color, depth, acc


def loss_fn(params, rays, target, key):
    color, depth, acc = render(params, rays[0], rays[1], key)
    mse = jnp.mean((color - target) ** 2)
    return mse, {"psnr": -10.0 * jnp.log10(mse), "depth": depth, "cumdist": jnp.cumsum(depth)}


@jax.jit
def train_step(params, velocity, rays, target, key):
    (mse, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, rays, target, key)
    velocity = jax.tree_util.tree_map(lambda v, g: 0.9 * v + g, velocity, grads)
    params = jax.tree_util.tree_map(lambda p, v: p - 0.05 * v, params, velocity)
    return params, velocity, mse, aux


def make_rays(key):
    k1, k2, k3 = random.split(key, 3)
    origins = random.normal(k1, (RAYS, 3)) * 0.1
    directions = random.normal(k2, (RAYS, 3))
    directions = directions / jnp.linalg.norm(directions, axis=-1, keepdims=True)
    target = random.uniform(k3, (RAYS, 3))
    return (origins, directions), target


def main(key):
    k_params, k_rays, k_train = random.split(key, 3)
    params = init_mlp(k_params, [3 + 6 * FREQS, HIDDEN, HIDDEN, 4])
    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    rays, target = make_rays(k_rays)
    losses, psnrs = [], []
    for k in random.split(k_train, 4):
        params, velocity, mse, aux = train_step(params, velocity, rays, target, k)
        losses.append(mse)
        psnrs.append(aux["psnr"])
    color, depth, acc = render(params, rays[0], rays[1], k_train)  # eagerly
    return {"losses": jnp.stack(losses), "psnr": jnp.stack(psnrs), "color": color, "depth": depth, "acc": acc,
            "cumdist": aux["cumdist"]}


def export(key):
    k_params, k_rays, k_train = random.split(key, 3)
    params = init_mlp(k_params, [3 + 6 * FREQS, HIDDEN, HIDDEN, 4])
    rays, target = make_rays(k_rays)
    return train_step, (params, jax.tree_util.tree_map(jnp.zeros_like, params), rays, target, k_train)
