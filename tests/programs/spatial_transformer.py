"""A spatial transformer (Jaderberg et al. 2015) aligning an image to a template: an affine grid from a 2x3
matrix, bilinear sampling by jax.scipy.ndimage.map_coordinates (order=1, mode="constant"), a Gaussian blur by
jax.scipy.signal.convolve2d (mode="same") before comparing, jax.image.resize to a coarser level of the pyramid,
and gradient descent on the affine parameters (coarse level first, then fine) with vmap over channels."""
import kiln as jax
import kiln.numpy as jnp
from kiln import random
from kiln.scipy.ndimage import map_coordinates
from kiln.scipy.signal import convolve2d

SIZE = 16
# the start: near the identity but off it, so that no sample point sits exactly on a pixel, where bilinear
# sampling has a kink and its gradient depends on the last bit of the coordinate
THETA0 = [[1.0, 0.0, 0.013], [0.0, 1.0, -0.021]]


def gaussian_kernel(sigma=1.0, radius=2):
    t = jnp.arange(-radius, radius + 1, dtype=jnp.float32)
    g = jnp.exp(-0.5 * (t / sigma) ** 2)
    k = jnp.outer(g, g)
    return k / k.sum()


def warp(image, theta):
    h, w = image.shape[-2:]
    ys, xs = jnp.meshgrid(jnp.linspace(-1, 1, h), jnp.linspace(-1, 1, w), indexing="ij")
    grid = jnp.stack([xs.ravel(), ys.ravel(), jnp.ones(h * w)])
    src = theta @ grid  # normalized source coordinates
    coords = jnp.stack([(src[1] + 1) * (h - 1) / 2, (src[0] + 1) * (w - 1) / 2])
    sample = lambda channel: map_coordinates(channel, coords, order=1, mode="constant", cval=0.0).reshape(h, w)
    return jax.vmap(sample)(image)


def loss(theta, image, template):
    kernel = gaussian_kernel()
    blur = jax.vmap(lambda c: convolve2d(c, kernel, mode="same"))
    return jnp.mean((blur(warp(image, theta)) - blur(template)) ** 2)


@jax.jit
def align_step(theta, image, template):
    value, g = jax.value_and_grad(loss)(theta, image, template)
    return theta - 2.0 * g, value


def make_images(key):
    k1, k2 = random.split(key)
    yy, xx = jnp.meshgrid(jnp.arange(SIZE), jnp.arange(SIZE), indexing="ij")
    blob = lambda cy, cx: jnp.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 8.0)
    template = jnp.stack([blob(7.0, 8.0), 0.5 * blob(9.0, 6.0)]).astype(jnp.float32)
    shift = random.uniform(k1, (2,), minval=-0.15, maxval=0.15)
    true_theta = jnp.array([[1.0, 0.05, 0.0], [-0.05, 1.0, 0.0]]) + jnp.zeros((2, 3)).at[:, 2].set(shift)
    image = warp(template, jnp.linalg.inv(jnp.vstack([true_theta, jnp.array([0.0, 0.0, 1.0])]))[:2])
    return image + 0.01 * random.normal(k2, image.shape), template


def main(key):
    image, template = make_images(key)
    theta = jnp.array(THETA0, jnp.float32)
    small = lambda im: jax.image.resize(im, (im.shape[0], SIZE // 2, SIZE // 2), method="linear")
    losses = []
    for _ in range(3):  # coarse level
        theta, value = align_step(theta, small(image), small(template))
        losses.append(value)
    for _ in range(3):  # fine level
        theta, value = align_step(theta, image, template)
        losses.append(value)
    return {"losses": jnp.stack(losses), "theta": theta, "warped": warp(image, theta)[0, ::3, ::3],
            "small": small(template)[1]}


def export(key):
    image, template = make_images(key)
    return align_step, (jnp.array(THETA0, jnp.float32), image, template)
