"""kiln.scipy.stats: scipy.stats's functions over kiln arrays."""
from __future__ import annotations

__all__: list[str] = []
