"""JAX's collectives over a named mapped axis, for kiln.vmap(..., axis_name=...) and kiln.pmap (which is vmap
on kiln's one host): psum, pmean, pmax, pmin, axis_index, axis_size, all_gather, psum_scatter is not here.

Under vmap every collective is a reduction (or an index) over the mapped axis: ``psum(x, 'i')`` is the sum of x
over the mapped axis, the same for every mapped element (unbatched), as JAX's vmap rule gives; a value that does
not vary along the axis sums to axis_size copies. ``axis_name`` may be a tuple of names (nested vmaps), reduced
in turn. Calling one outside a vmap of that name is JAX's NameError "unbound axis name". The value must be one
the named vmap sees: a collective on a value of a transformation nested inside the vmap (a grad inside the vmap,
applied to its intermediate values) is an error naming the levels; apply it to the transformation's outputs
(``lax.pmean(grad(loss)(params, batch), 'batch')``, the usual data-parallel step, works).
"""
from __future__ import annotations

import numpy as np

from kiln.core import dtypes
from kiln.core.errors import UnexpectedTracerError
from kiln.core.pytree import tree_flatten, tree_unflatten
from kiln.core.trace import get_aval
from kiln.transforms.batching import BatchingError, BatchTracer, find_named_axis, move_batch_axis

from . import api

__all__ = ["psum", "pmean", "pmax", "pmin", "axis_index", "axis_size", "all_gather"]


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _traces(axis_name, where):
    """The named vmaps' traces, innermost first (a value is reduced over its inner axes before its outer ones)."""
    return sorted((find_named_axis(n, where) for n in _names(axis_name)), key=lambda t: -t.level)


def _raise_into(trace, x, where):
    try:
        return trace.full_raise(x)
    except UnexpectedTracerError:
        raise BatchingError(f"{where}: the value belongs to a transformation or kiln.jit nested inside the vmap "
                            f"named {trace.axis_name!r} (level {x._trace.level} above {trace.level}); apply the "
                            "collective to that transformation's outputs instead") from None


def _reduce_over(trace, x, where, reduce, unbatched):
    """x reduced over `trace`'s mapped axis; a vmap between x and `trace` keeps its own batch axis."""
    if isinstance(x, BatchTracer) and x._trace.level > trace.level and isinstance(x._trace, type(trace)):
        return BatchTracer(x._trace, _reduce_over(trace, x.value, where, reduce, unbatched), x.batch_dim)
    t = _raise_into(trace, x, where)
    value = unbatched(t.value, trace.axis_size) if t.batch_dim is None else reduce(t.value, t.batch_dim)
    return BatchTracer(trace, value, None)


def _over_axis(x, axis_name, where, reduce, unbatched):
    """`reduce(value, dim)` of x's value along each named trace's batch axis (`unbatched(value, size)` where x
    does not vary along it), as a value the named trace holds unbatched."""
    for trace in _traces(axis_name, where):
        x = _reduce_over(trace, x, where, reduce, unbatched)
    return x


def _tree(fn, x):
    leaves, tree = tree_flatten(x)
    return tree_unflatten(tree, [fn(leaf) for leaf in leaves])


def _times(value, n):
    return api.mul(value, np.asarray(n, get_aval(value).dtype))


def psum(x, axis_name, *, axis_index_groups=None):
    """The sum of x (a tree) over the mapped axis named axis_name."""
    if axis_index_groups is not None:
        raise ValueError("psum: axis_index_groups is not supported (it splits devices into groups)")
    return _tree(lambda v: _over_axis(v, axis_name, "psum", lambda a, d: api.reduce_sum(a, (d,)), _times), x)


def pmean(x, axis_name, *, axis_index_groups=None):
    """The mean of x (a tree) over the mapped axis named axis_name (integers give float32)."""
    if axis_index_groups is not None:
        raise ValueError("pmean: axis_index_groups is not supported (it splits devices into groups)")
    size = axis_size(axis_name) if _names(axis_name) else 1

    def mean(v):
        total = psum(v, axis_name)
        dtype = get_aval(total).dtype
        if not dtypes.is_inexact(dtype):
            total, dtype = api.convert_element_type(total, np.float32), np.dtype(np.float32)
        return api.div(total, np.asarray(size, dtype))

    return _tree(mean, x)


def pmax(x, axis_name, *, axis_index_groups=None):
    """The maximum of x (a tree) over the mapped axis named axis_name."""
    return _tree(lambda v: _over_axis(v, axis_name, "pmax", lambda a, d: api.reduce_max(a, (d,)),
                                      lambda a, n: a), x)


def pmin(x, axis_name, *, axis_index_groups=None):
    """The minimum of x (a tree) over the mapped axis named axis_name."""
    return _tree(lambda v: _over_axis(v, axis_name, "pmin", lambda a, d: api.reduce_min(a, (d,)),
                                      lambda a, n: a), x)


def axis_index(axis_name):
    """The position (int32) along the mapped axis named axis_name."""
    names = _names(axis_name)
    index = None
    for name in names:  # row-major over several names, as JAX's
        trace = find_named_axis(name, "axis_index")
        here = BatchTracer(trace, np.arange(trace.axis_size, dtype=np.int32), 0)
        index = here if index is None else api.add(api.mul(index, np.int32(trace.axis_size)), here)
    return index


def axis_size(axis_name) -> int:
    """The size of the mapped axis named axis_name (a product for several names)."""
    size = 1
    for name in _names(axis_name):
        size *= find_named_axis(name, "axis_size").axis_size
    return size


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False):
    """Every mapped element's x stacked along a new axis `axis` (concatenated along `axis` when tiled)."""
    if axis_index_groups is not None:
        raise ValueError("all_gather: axis_index_groups is not supported (it splits devices into groups)")

    def gather(v):
        trace = find_named_axis(axis_name, "all_gather")
        t = _raise_into(trace, v, "all_gather")
        ndim = get_aval(t).ndim
        at = axis % (ndim + 1)
        stacked = move_batch_axis(t.value, t.batch_dim, at, trace.axis_size)
        if tiled:
            shape = get_aval(stacked).shape
            if at == ndim:
                raise ValueError(f"all_gather: tiled needs an existing axis, got axis={axis} for rank {ndim}")
            stacked = api.reshape(stacked, shape[:at] + (shape[at] * shape[at + 1],) + shape[at + 2:])
        return BatchTracer(trace, stacked, None)

    return _tree(gather, x)
