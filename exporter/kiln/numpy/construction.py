"""Building and rearranging arrays: meshgrid, logspace, tri*, append/insert/delete, block, stacks and splits, choose/select/piecewise, ..."""
from __future__ import annotations

__all__: list[str] = []
