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
    if isinstance(x, Tracer):
        return x.aval
    if isinstance(x, ShapedArray):
        return x
    try:
        return aval_of(x)
    except (TypeError, ValueError, dtypes.DTypeError) as e:
        raise TypeError(f"{where}: expected an array, got {type(x).__name__} ({e})") from None


def as_runtime_array(x, aval: ShapedArray) -> np.ndarray:
    """A concrete argument as the contiguous array the runtime receives.

    Python scalars take the declared dtype; arrays pass unchanged, so that the
    runtime reports a wrong dtype or shape instead of kiln silently casting.
    """
    if isinstance(x, (bool, int, float)):
        return np.asarray(x, dtype=aval.dtype)
    arr = np.asarray(x)
    return arr if arr.flags.c_contiguous else np.array(arr, order="C")


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
