"""The orthogonal and spectral factorizations: qr (Householder), eigh, svd."""
from __future__ import annotations

__all__: list[str] = []
