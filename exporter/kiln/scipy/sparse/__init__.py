"""kiln.scipy.sparse: the iterative solvers of scipy.sparse.linalg (JAX's jax.scipy.sparse)."""
from . import linalg  # noqa: F401

__all__ = ["linalg"]
