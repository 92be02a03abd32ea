"""Searching, sorting and sets: searchsorted, partition, lexsort, isin, the set functions, isclose/allclose/array_equal."""
from __future__ import annotations

__all__: list[str] = []
