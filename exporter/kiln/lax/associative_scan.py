"""kiln.lax.associative_scan: an inclusive scan with an associative combine in O(log n) rounds of whole-array
operations (the even/odd recursion of Blelloch's scan), as jax.lax.associative_scan."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..core import dtypes
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.trace import get_aval
from . import prims
from .api import _axis
from .operands import asarray
from .shape_api import slice_in_dim
from .structural_prims import concatenate, pad, rev

__all__ = ["associative_scan"]


def _take(x, axis: int, start: int, stop: int | None, step: int = 1):
    return slice_in_dim(x, start, stop, step, axis)


def _interleave(even, odd, axis: int):
    """[e0, o0, e1, o1, ...] along axis (len(even) is len(odd) or one more): each spread with zero gaps, then
    added (or-ed for bool), since the other holds zeros there."""
    n_even, n_odd = get_aval(even).shape[axis], get_aval(odd).shape[axis]
    nd = get_aval(even).ndim
    zero = np.zeros((), get_aval(even).dtype)

    def spread(x, lo, hi):
        config = [(0, 0, 0)] * nd
        config[axis] = (lo, hi, 1)
        return pad(x, zero, config)

    a = spread(even, 0, 1 if n_even == n_odd else 0)
    b = spread(odd, 1, 0 if n_even == n_odd else 1)
    if dtypes.is_bool(get_aval(even).dtype):
        return prims.max.bind(a, b)
    return prims.add.bind(a, b)


def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """The inclusive scan of fn over axis of elems (a tree of arrays of equal length along axis):
    out[i] = fn(... fn(fn(elems[0], elems[1]), elems[2]) ..., elems[i]), combined in a tree order, so fn must be
    associative. fn takes and returns trees like elems, elementwise over their leading (scan) slices.
    reverse=True scans from the end."""
    leaves, treedef = tree_flatten(elems)
    leaves = [asarray(x) for x in leaves]
    if not leaves:
        raise ValueError("associative_scan: elems has no arrays")
    nd = get_aval(leaves[0]).ndim
    axis = _axis("associative_scan", axis, nd)
    sizes = {get_aval(x).shape[axis] if get_aval(x).ndim > axis else None for x in leaves}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"associative_scan: every array of elems needs the same length along axis {axis}; got "
                         f"shapes {[get_aval(x).shape for x in leaves]}")
    if reverse:
        leaves = [rev(x, (axis,)) for x in leaves]

    def combine(a, b):
        out = fn(tree_unflatten(treedef, a), tree_unflatten(treedef, b))
        out_leaves, out_def = tree_flatten(out)
        if out_def != treedef:
            raise ValueError(f"associative_scan: fn must return the structure of elems ({treedef}); got {out_def}")
        return [asarray(x) for x in out_leaves]

    def scan(xs):
        n = get_aval(xs[0]).shape[axis]
        if n < 2:
            return xs
        reduced = combine([_take(x, axis, 0, -1, 2) for x in xs], [_take(x, axis, 1, None, 2) for x in xs])
        odd = scan(reduced)
        if n % 2 == 0:
            even = combine([_take(o, axis, 0, -1) for o in odd], [_take(x, axis, 2, None, 2) for x in xs])
        else:
            even = combine(odd, [_take(x, axis, 2, None, 2) for x in xs])
        even = [concatenate([_take(x, axis, 0, 1), e], axis) if get_aval(e).shape[axis] else _take(x, axis, 0, 1)
                for x, e in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    out = scan(leaves)
    if reverse:
        out = [rev(x, (axis,)) for x in out]
    return tree_unflatten(treedef, out)
