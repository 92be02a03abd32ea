"""kiln.scipy.signal: scipy.signal's functions over kiln arrays."""
from __future__ import annotations

__all__: list[str] = []
