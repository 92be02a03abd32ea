"""kiln.scipy: scipy's special functions, linear algebra, distributions and signal processing over kiln
arrays (JAX's jax.scipy), eagerly, under kiln.jit and in exported modules."""
from . import (  # noqa: F401
    cluster, fft, integrate, interpolate, linalg, ndimage, optimize, signal, sparse, spatial, special, stats,
)

__all__ = ["cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "optimize", "signal", "sparse", "spatial",
           "special", "stats"]
