"""numpy.linalg functions that need no factorization: trace and diagonal over the last two axes."""
from __future__ import annotations

from .. import products

__all__ = ["diagonal", "trace"]


def diagonal(x, /, *, offset=0):
    """numpy.linalg.diagonal: the diagonals of the matrices in the last two axes (numpy.diagonal's
    default is the first two)."""
    return products.diagonal(x, offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset=0, dtype=None):
    """numpy.linalg.trace: the traces of the matrices in the last two axes."""
    return products.trace(x, offset, axis1=-2, axis2=-1, dtype=dtype)
