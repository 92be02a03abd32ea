"""Differentiation values shared by the transforms and the rules: the symbolic zero, `add_any`, zeros.

The array operations behind `add_any` and `zeros_like_aval` are primitives of kiln.lax, which sits
above core: kiln.lax registers them here when it is imported (`register_add`, `register_zeros`,
`register_convert`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .aval import ShapedArray
from .trace import get_aval


@dataclass(frozen=True)
class Zero:
    """A tangent or cotangent known to be zero; carries the abstract value it stands for."""

    aval: ShapedArray


_add_arrays: list[Callable[[Any, Any], Any]] = []
_zeros_makers: dict[type, Callable[[Any], Any]] = {}
_converts: list[Callable[..., Any]] = []


def register_add(add: Callable[[Any, Any], Any]) -> None:
    """Sets the elementwise addition that `add_any` uses for two non-zero values."""
    _add_arrays[:] = [add]


def register_zeros(aval_type: type, make: Callable[[Any], Any]) -> None:
    """Sets how `zeros_like_aval` builds a zero array for abstract values of `aval_type`."""
    _zeros_makers[aval_type] = make


def register_convert(convert: Callable[..., Any]) -> None:
    """Sets the dtype conversion (convert(x, new_dtype=, weak_type=)) that `with_primal_type` uses."""
    _converts[:] = [convert]


def with_primal_type(ct, aval):
    """The cotangent ct with its primal's dtype and weak type (aval's), as JAX's gradients have: the
    gradient at a weakly typed input is weakly typed, so it promotes as the input did."""
    ct_aval = get_aval(ct)
    if ct_aval.dtype == aval.dtype and ct_aval.weak_type == aval.weak_type:
        return ct
    return _converts[0](ct, new_dtype=aval.dtype, weak_type=aval.weak_type)


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
