"""Flattening call arguments into abstract signatures: the compile cache key."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes
from .aval import ShapedArray, aval_of
from .pytree import TreeDef, tree_flatten
from .trace import Tracer


@dataclass(frozen=True)
class Signature:
    """Tree structure, leaf abstract values and static arguments of a call."""

    treedef: TreeDef
    avals: tuple[ShapedArray, ...]
    statics: tuple


def leaf_aval(x, where: str) -> ShapedArray:
    """The abstract value of a call's argument leaf, or a TypeError naming `where`.

    A runtime argument may have either byte order: the runtime binding copies
    it into native order (kiln.vm.runtime), so its aval is the native dtype."""
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, ShapedArray):
        return x
    try:
        if isinstance(x, np.ndarray) and not x.dtype.isnative and not isinstance(x, np.ma.MaskedArray):
            return ShapedArray(x.shape, x.dtype.newbyteorder("="))
        aval = aval_of(x)
    except (TypeError, ValueError, dtypes.DTypeError) as e:
        raise TypeError(f"{where}: expected an array, got {type(x).__name__} ({e})") from None
    if aval.weak_type and isinstance(x, int) and not isinstance(x, bool) and dtypes.is_int(aval.dtype):
        info = np.iinfo(aval.dtype)
        if not info.min <= x <= info.max:
            raise OverflowError(f"{where}: the Python int {x} does not fit in {aval.dtype}, the dtype of "
                                f"Python ints; pass a numpy array or scalar of a wider dtype (np.int64({x}))")
    return aval


def split_static(args: tuple, static_argnums: tuple[int, ...]):
    dynamic = tuple(a for i, a in enumerate(args) if i not in static_argnums)
    statics = tuple((i, args[i]) for i in static_argnums if i < len(args))
    for i, value in statics:
        try:
            hash(value)
        except TypeError:
            raise TypeError(f"static argument {i} must be hashable, got {type(value).__name__}") from None
    return dynamic, statics


def signature_of(args: tuple, statics: tuple, where: str) -> tuple[Signature, list]:
    leaves, treedef = tree_flatten(args)
    avals = tuple(leaf_aval(x, f"{where}: argument leaf {i}") for i, x in enumerate(leaves))
    return Signature(treedef, avals, statics), leaves
