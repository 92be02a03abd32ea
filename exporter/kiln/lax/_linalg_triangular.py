"""The triangular factorizations: cholesky, triangular_solve, lu (partial pivoting)."""
from __future__ import annotations

__all__: list[str] = []
