"""kiln.scipy.integrate: scipy.integrate.trapezoid (JAX's jax.scipy.integrate), kiln.numpy's trapezoid."""
from __future__ import annotations

from ..numpy import trapezoid

__all__ = ["trapezoid"]
