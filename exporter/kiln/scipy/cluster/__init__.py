"""kiln.scipy.cluster: scipy.cluster.vq's vq (JAX's jax.scipy.cluster)."""
from . import vq  # noqa: F401

__all__ = ["vq"]
