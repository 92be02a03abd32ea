"""numpy.linalg on the triangular factorizations: cholesky, solve, inv, det, slogdet, matrix_power of negative powers."""
from __future__ import annotations

__all__: list[str] = []
