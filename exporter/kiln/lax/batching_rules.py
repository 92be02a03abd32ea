"""Batching (vmap) rules of the array primitives."""
from __future__ import annotations

from ..core.trace import get_aval
from ..transforms.batching import move_batch_axis
from . import prims


def _elementwise_rule(prim):
    def rule(values, dims, *, axis_size, **params):
        moved = [move_batch_axis(v, d, 0, axis_size) for v, d in zip(values, dims)]
        return prim.bind(*moved, **params), 0

    return rule


def _broadcast_rule(values, dims, *, axis_size, shape, broadcast_dimensions):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    out = prims.broadcast_in_dim.bind(
        x, shape=(axis_size,) + tuple(shape), broadcast_dimensions=(0,) + tuple(d + 1 for d in broadcast_dimensions)
    )
    return out, 0


def _reshape_rule(values, dims, *, axis_size, new_shape):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    return prims.reshape.bind(x, new_shape=(axis_size,) + tuple(new_shape)), 0


def _transpose_rule(values, dims, *, axis_size, permutation):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    return prims.transpose.bind(x, permutation=(0,) + tuple(p + 1 for p in permutation)), 0


def _reduce_rule(prim):
    def rule(values, dims, *, axis_size, axes):
        x = move_batch_axis(values[0], dims[0], 0, axis_size)
        return prim.bind(x, axes=tuple(a + 1 for a in axes)), 0

    return rule


def _dot_general_rule(values, dims, *, axis_size, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = values
    ld, rd = dims
    shift = lambda axes: tuple(a + 1 for a in axes)  # noqa: E731
    if ld is not None and rd is not None:
        lhs = move_batch_axis(lhs, ld, 0, axis_size)
        rhs = move_batch_axis(rhs, rd, 0, axis_size)
        new = ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb)))
        return prims.dot_general.bind(lhs, rhs, dimension_numbers=new), 0
    if ld is not None:
        lhs = move_batch_axis(lhs, ld, 0, axis_size)
        new = ((shift(lc), rc), (shift(lb), rb))
        return prims.dot_general.bind(lhs, rhs, dimension_numbers=new), len(lb)
    rhs = move_batch_axis(rhs, rd, 0, axis_size)
    new = ((lc, shift(rc)), (lb, shift(rb)))
    lhs_free = get_aval(lhs).ndim - len(lc) - len(lb)
    return prims.dot_general.bind(lhs, rhs, dimension_numbers=new), len(lb) + lhs_free


def register() -> None:
    for prim in (prims.add, prims.sub, prims.mul, prims.div, prims.pow, prims.max, prims.min, prims.neg,
                 prims.abs, prims.exp, prims.log, prims.tanh, prims.sqrt, prims.eq, prims.ne, prims.lt,
                 prims.le, prims.gt, prims.ge, prims.select, prims.convert):
        prim.batching_rule = _elementwise_rule(prim)
    prims.broadcast_in_dim.batching_rule = _broadcast_rule
    prims.reshape.batching_rule = _reshape_rule
    prims.transpose.batching_rule = _transpose_rule
    for prim in (prims.reduce_sum, prims.reduce_max, prims.reduce_min):
        prim.batching_rule = _reduce_rule(prim)
    prims.dot_general.batching_rule = _dot_general_rule
    prims.stop_gradient.batching_rule = lambda v, d, axis_size: (prims.stop_gradient.bind(v[0]), d[0])
