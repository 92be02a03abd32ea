"""Transposition of linear code, the core of reverse mode (see linearize.py).

A primitive's `transpose_rule(cotangent, *operands, **params)` receives the output cotangent and the
operands, where linear operands are `UndefinedPrimal` (their value is not needed, only their type),
and returns one cotangent per operand (None for non-linear operands).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.aval import ShapedArray


@dataclass(frozen=True)
class UndefinedPrimal:
    """A linear operand in a transpose rule."""

    aval: ShapedArray


def is_linear(x) -> bool:
    return isinstance(x, UndefinedPrimal)
