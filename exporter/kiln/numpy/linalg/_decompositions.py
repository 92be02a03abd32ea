"""numpy.linalg on the orthogonal and spectral factorizations: qr, svd, svdvals, eigh, eigvalsh, pinv, lstsq, matrix_rank, cond."""
from __future__ import annotations

__all__: list[str] = []
