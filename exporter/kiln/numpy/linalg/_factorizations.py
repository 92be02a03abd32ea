"""numpy.linalg's factorizations (cholesky, qr, svd, eigh, ...) and the functions built on them."""
from __future__ import annotations

__all__: list[str] = []
