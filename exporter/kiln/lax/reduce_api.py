"""jax.lax.reduce with any associative, commutative computation, and cumlogsumexp.

reduce folds each reduced axis in halves (O(log n) elementwise applications of the computation, traced like any
function), so it needs no registered monoid; the init value is combined once, as an identity should be.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..core import dtypes
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.trace import get_aval
from . import prims
from .api import _axis
from .associative_scan import associative_scan
from .math_prims import P
from .operands import asarray
from .shape_api import slice_in_dim, squeeze
from .structural_prims import concatenate

__all__ = ["reduce", "cumlogsumexp"]


def _combine(computation: Callable, treedef, a: list, b: list, where: str) -> list:
    out_leaves, out_def = tree_flatten(computation(tree_unflatten(treedef, a), tree_unflatten(treedef, b)))
    if out_def != treedef:
        raise ValueError(f"{where}: the computation must return the structure of the operands ({treedef}); got "
                         f"{out_def}")
    return [asarray(x) for x in out_leaves]


def reduce(operands, init_values, computation: Callable, dimensions):  # noqa: A001 - jax.lax's name
    """The reduction of operands (an array or a tree of arrays of one shape) over `dimensions` with
    computation(x, y), an associative and commutative function of two such trees, starting from init_values
    (a scalar or tree of scalars that is the computation's identity)."""
    leaves, treedef = tree_flatten(operands)
    init_leaves, init_def = tree_flatten(init_values)
    if init_def != treedef:
        raise ValueError(f"reduce: init_values must have the structure of operands ({treedef}); got {init_def}")
    leaves = [asarray(x) for x in leaves]
    shape = get_aval(leaves[0]).shape
    if any(get_aval(x).shape != shape for x in leaves):
        raise ValueError(f"reduce: operands must have one shape; got {[get_aval(x).shape for x in leaves]}")
    axes = sorted({_axis("reduce", d, len(shape)) for d in dimensions}, reverse=True)
    for axis in axes:
        while get_aval(leaves[0]).shape[axis] > 1:
            n = get_aval(leaves[0]).shape[axis]
            half = n // 2
            folded = _combine(computation, treedef, [slice_in_dim(x, 0, half, 1, axis) for x in leaves],
                              [slice_in_dim(x, half, 2 * half, 1, axis) for x in leaves], "reduce")
            if n % 2:  # the odd last element waits for the next round
                folded = [concatenate([f, slice_in_dim(x, n - 1, n, 1, axis)], axis) for f, x in zip(folded, leaves)]
            leaves = folded
    out_shape = tuple(d for i, d in enumerate(shape) if i not in axes)
    inits = [prims.broadcast_in_dim.bind(np.asarray(v, get_aval(x).dtype), shape=out_shape, broadcast_dimensions=())
             if out_shape else np.asarray(v, get_aval(x).dtype) for v, x in zip(init_leaves, leaves)]
    if any(shape[a] == 0 for a in axes):
        return tree_unflatten(treedef, inits)
    reduced = [squeeze(x, axes) for x in leaves]
    return tree_unflatten(treedef, _combine(computation, treedef, inits, reduced, "reduce"))


def _logaddexp(a, b):
    """log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)); where a == b (infinities too), a + log 2."""
    top = prims.max.bind(a, b)
    gap = prims.neg.bind(prims.abs.bind(prims.sub.bind(a, b)))
    out = prims.add.bind(top, P["log1p"].bind(prims.exp.bind(gap)))
    aval = get_aval(a)
    log2 = np.asarray(math.log(2.0), aval.dtype)
    log2 = prims.broadcast_in_dim.bind(log2, shape=aval.shape, broadcast_dimensions=()) if aval.shape else log2
    return prims.select.bind(prims.eq.bind(a, b), prims.add.bind(a, log2), out)


def cumlogsumexp(operand, axis: int = 0, reverse: bool = False):
    """log(cumsum(exp(operand))) along axis, without overflow (float operands)."""
    x = asarray(operand)
    if not dtypes.is_float(get_aval(x).dtype):
        raise TypeError(f"cumlogsumexp: operand must be floating-point; got {get_aval(x).dtype}")
    axis = _axis("cumlogsumexp", axis, get_aval(x).ndim)
    return associative_scan(_logaddexp, x, reverse=reverse, axis=axis)

