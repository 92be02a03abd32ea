"""Differentiation values shared by the transforms and the rules: the symbolic zero, `add_any`, zeros.

The array operations behind `add_any` and `zeros_like_aval` are primitives of kiln.lax, which sits
above core: kiln.lax registers them here when it is imported (`register_add`, `register_zeros`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .aval import ShapedArray


@dataclass(frozen=True)
class Zero:
    """A tangent or cotangent known to be zero; carries the abstract value it stands for."""

    aval: ShapedArray


_add_arrays: list[Callable[[Any, Any], Any]] = []
_zeros_makers: dict[type, Callable[[Any], Any]] = {}


def register_add(add: Callable[[Any, Any], Any]) -> None:
    """Sets the elementwise addition that `add_any` uses for two non-zero values."""
    _add_arrays[:] = [add]


def register_zeros(aval_type: type, make: Callable[[Any], Any]) -> None:
    """Sets how `zeros_like_aval` builds a zero array for abstract values of `aval_type`."""
    _zeros_makers[aval_type] = make


def add_any(a, b):
    """a + b for tangents or cotangents, either of which may be a symbolic Zero."""
    if isinstance(a, Zero):
        return b
    if isinstance(b, Zero):
        return a
    return _add_arrays[0](a, b)


def zeros_like_aval(aval):
    """A real zero array of aval's shape and dtype."""
    return _zeros_makers[type(aval)](aval)


def instantiate(value, aval):
    """A real zero array for a Zero, the value itself otherwise."""
    return zeros_like_aval(aval) if isinstance(value, Zero) else value
