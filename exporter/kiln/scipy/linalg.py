"""kiln.scipy.linalg: scipy.linalg's functions over kiln arrays."""
from __future__ import annotations

__all__: list[str] = []
