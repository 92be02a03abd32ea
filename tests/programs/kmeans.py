"""k-means clustering: centroids initialized from a random permutation of the points, Lloyd iterations in
lax.fori_loop with distances from jnp.linalg.norm, and the final inertia."""
import kiln as jax
import kiln.numpy as jnp
from kiln import lax, random

K, ITERATIONS = 3, 6


def assign(points, centroids):
    distances = jnp.linalg.norm(points[:, None, :] - centroids[None, :, :], axis=-1)
    return jnp.argmin(distances, axis=1), jnp.min(distances, axis=1)


@jax.jit
def kmeans(points, initial):
    def lloyd(i, centroids):
        labels, _ = assign(points, centroids)
        one_hot = jax.nn.one_hot(labels, K)
        counts = jnp.sum(one_hot, axis=0)
        sums = one_hot.T @ points
        return jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1.0)[:, None], centroids)

    centroids = lax.fori_loop(0, ITERATIONS, lloyd, initial)
    labels, distances = assign(points, centroids)
    return centroids, labels, jnp.sum(distances ** 2)


def make_points(key):
    k_centers, k_noise, k_labels = random.split(key, 3)
    centers = 3.0 * random.normal(k_centers, (K, 2))
    labels = random.randint(k_labels, (60,), 0, K)
    return centers[labels] + 0.5 * random.normal(k_noise, (60, 2))


def main(key):
    k_points, k_init = random.split(key)
    points = make_points(k_points)
    initial = points[random.permutation(k_init, points.shape[0])[:K]]
    centroids, labels, inertia = kmeans(points, initial)
    order = jnp.argsort(centroids[:, 0])
    return {"centroids": centroids[order], "inertia": inertia, "sizes": jnp.bincount(labels, length=K)[order]}


def export(key):
    k_points, k_init = random.split(key)
    points = make_points(k_points)
    return kmeans, (points, points[random.permutation(k_init, points.shape[0])[:K]])
