"""kiln.scipy.spatial: scipy.spatial.transform's Rotation and Slerp (JAX's jax.scipy.spatial)."""
from . import transform  # noqa: F401

__all__ = ["transform"]
