"""JAX's collectives over a named mapped axis, for kiln.vmap(..., axis_name=...) and kiln.pmap (which is vmap
on kiln's one host): psum, pmean, pmax, pmin, all_gather, psum_scatter, ppermute, axis_index, axis_size.

Each collective is a primitive whose params name its axes; its bind goes to the named vmap's trace (or to a
higher trace among its operands' first: a jvp, grad or jit nested inside the vmap), and the named vmap's rule
(`collective_batching_rule`, which BatchTrace consults before the primitive's ordinary batching rule) computes it
over that trace's batch axis, as JAX's vmap rules do: ``psum(x, 'i')`` is the sum of x over the mapped axis, the
same for every mapped element (unbatched); a value that does not vary along the axis sums to axis_size copies.
A vmap of another name between them keeps its own axis (the collective is elementwise for it). ``axis_name`` may be
a tuple of names (nested vmaps) for psum, pmean, pmax and pmin. ``axis_index_groups`` (JAX's pmap option: a
partition of the positions along one named axis) makes psum, pmean, pmax, pmin, all_gather and psum_scatter
compute within each element's group, under kiln.vmap and kiln.pmap alike (JAX's vmap refuses it). Calling one
outside a vmap of that name is JAX's NameError "unbound axis name".

Differentiation (grad, jvp, vjp inside the vmap) uses JAX's rules: psum, all_gather, psum_scatter and ppermute
are linear (their JVP applies them to the tangent); psum's transpose is psum, all_gather's is psum_scatter (and
the reverse), ppermute's is the inverse permutation. As in JAX's vmap and pmap (no varying-axis checks, which only
shard_map has), psum's transpose is psum whatever the cotangent: ``vmap(grad(lambda x: psum(x ** 2, 'i')),
axis_name='i')`` gives axis_size * 2x, the unbatched cotangent 1 summed over the axis, as JAX 0.10.2 gives.
pmax and pmin, which JAX does not differentiate, have a JVP here: the tangent at the elements that attain the
extreme (averaged over ties), as kiln's reduce_max.
"""
from __future__ import annotations

import numpy as np

from kiln.core import dtypes
from kiln.core.ad_util import Zero, instantiate
from kiln.core.aval import ShapedArray
from kiln.core.primitive import Primitive, register
from kiln.core.pytree import tree_flatten, tree_unflatten
from kiln.core.trace import GraphTrace, find_top_trace, get_aval
from kiln.transforms.batching import BatchTracer, find_named_axis, move_batch_axis
from kiln.transforms.transpose import is_linear

from . import api
from . import structural_prims as sp

__all__ = ["psum", "pmean", "pmax", "pmin", "axis_index", "axis_size", "all_gather", "psum_scatter", "ppermute",
           "pbroadcast", "pshuffle", "all_to_all", "pswapaxes"]


class CollectivePrimitive(Primitive):
    """A collective over named axes (params["axes"]): bound at the innermost named vmap's trace when no operand
    belongs to a higher one, so that operands that do not vary along the axis (constants, values of an enclosing
    transformation) still meet the axis."""

    def bind(self, *args, **params):
        trace = find_top_trace(args)
        named = [find_named_axis(name, self.name) for name in params["axes"]]
        for axis in named:
            if axis.level > trace.level:
                trace = axis
        if isinstance(trace, GraphTrace) and not trace.closed:  # staged (a jit, a loop body... inside the vmap):
            for axis in named:  # the graph captures a value of each named vmap, so its call runs there (inlined)
                if axis.level < trace.level:
                    anchor = getattr(axis, "_collective_anchor", None)
                    if anchor is None:
                        anchor = axis._collective_anchor = BatchTracer(axis, np.zeros((), np.int32), None)
                    trace.full_raise(anchor)
        outs = trace.process_primitive(self, [trace.full_raise(a) for a in args], params)
        return outs if self.multiple_results else outs[0]


def _collective(name: str) -> CollectivePrimitive:
    prim = register(CollectivePrimitive(name))
    prim.def_traits(fusion="internal")  # a vmap's rule replaces it before any graph reaches the compiler

    def impl(*args, **params):  # only reached for a name no vmap binds, which bind refuses first
        raise NameError(f"unbound axis name: {params['axes'][0]}")

    prim.def_impl(impl)
    return prim


def _names(axis_name) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _split(trace, axes) -> tuple[bool, tuple]:
    """(whether `trace` is one of the named axes, the other names)."""
    mine = tuple(n for n in axes if find_named_axis(n, "collective") is trace)
    return bool(mine), tuple(n for n in axes if n not in mine)


def _tree(fn, x):
    leaves, tree = tree_flatten(x)
    return tree_unflatten(tree, [fn(leaf) for leaf in leaves])


def _zeros(shape, dtype):
    return api.broadcast_in_dim(np.zeros((), dtype), tuple(shape), ())


def _linear_jvp(prim):
    def jvp(primals, tangents, **params):
        out = prim.bind(primals[0], **params)
        t = tangents[0]
        return out, (Zero(get_aval(out)) if isinstance(t, Zero) else prim.bind(t, **params))

    return jvp


# ---- psum, pmax, pmin: reductions over the named axes

psum_p, pmax_p, pmin_p = _collective("psum"), _collective("pmax"), _collective("pmin")
for _p in (psum_p, pmax_p, pmin_p):
    _p.def_abstract_eval(lambda x, **params: x)


def _rows(value, rows):
    """value's rows (axis 0) at the concrete positions `rows` (an int array of any shape: its shape replaces
    axis 0)."""
    rows = np.asarray(rows, np.int32)
    return sp.gather(value, rows[..., None], (0,), "clip")


def _members(groups, n) -> np.ndarray:
    """For each position along the axis, the number of its group."""
    member = np.empty(n, np.int32)
    for k, group in enumerate(groups):
        member[list(group)] = k
    return member


def _grouped_reduce(value, groups, reduce):
    """value (mapped elements along axis 0) reduced within each of axis_index_groups: row i gets its group's
    reduction."""
    shape = get_aval(value).shape
    parts = [api.reshape(reduce(_rows(value, group), (0,)), (1,) + shape[1:]) for group in groups]
    per_group = parts[0] if len(parts) == 1 else sp.concatenate(parts, 0)
    return _rows(per_group, _members(groups, shape[0]))


def _reduction_batching(prim, reduce, unbatched):
    def rule(trace, tracers, params):
        (x,), axes, groups = tracers, params["axes"], params["groups"]
        mine, rest = _split(trace, axes)
        if not mine:
            return [BatchTracer(trace, prim.bind(x.value, axes=axes, groups=groups), x.batch_dim)]
        if groups is not None:  # one name (checked): each element gets its own group's reduction
            value = move_batch_axis(x.value, x.batch_dim, 0, trace.axis_size)
            return [BatchTracer(trace, _grouped_reduce(value, groups, reduce), 0)]
        value = unbatched(x.value, trace.axis_size) if x.batch_dim is None else reduce(x.value, (x.batch_dim,))
        if rest:  # the outer names, reduced in turn by their own vmaps
            value = prim.bind(value, axes=rest, groups=None)
        return [BatchTracer(trace, value, None)]

    return rule


def _times(value, n):
    return api.mul(value, np.asarray(n, get_aval(value).dtype))


psum_p.collective_batching_rule = _reduction_batching(psum_p, api.reduce_sum, _times)
pmax_p.collective_batching_rule = _reduction_batching(pmax_p, api.reduce_max, lambda a, n: a)
pmin_p.collective_batching_rule = _reduction_batching(pmin_p, api.reduce_min, lambda a, n: a)
psum_p.jvp_rule = _linear_jvp(psum_p)
psum_p.transpose_rule = lambda ct, x, *, axes, groups: [psum_p.bind(ct, axes=axes, groups=groups)]


def _extreme_jvp(prim):
    def jvp(primals, tangents, *, axes, groups):
        x, t = primals[0], tangents[0]
        out = prim.bind(x, axes=axes, groups=groups)
        if isinstance(t, Zero):
            return out, Zero(get_aval(out))
        attains = api.eq(x, out)
        dtype = get_aval(x).dtype
        count = psum_p.bind(api.convert_element_type(attains, dtype), axes=axes, groups=groups)
        picked = api.select(attains, instantiate(t, get_aval(x)), _zeros(get_aval(x).shape, dtype))
        return out, api.div(psum_p.bind(picked, axes=axes, groups=groups), count)

    return jvp


pmax_p.jvp_rule, pmin_p.jvp_rule = _extreme_jvp(pmax_p), _extreme_jvp(pmin_p)


def _check_groups(where, axis_index_groups, axis_name=None, same_size=False):
    """axis_index_groups as a tuple of tuples (None stays None), checked as JAX checks it: a partition of the
    positions along one named axis (every position in exactly one group); same_size for the collectives whose
    result's shape is the group's size (all_gather, psum_scatter)."""
    if axis_index_groups is None:
        return None
    if axis_name is None:
        raise ValueError(f"{where}: axis_index_groups is not supported here")
    names = _names(axis_name)
    if len(names) != 1:
        raise ValueError(f"{where}: axis_index_groups needs a single axis name, got axis_name={axis_name!r}")
    try:
        groups = tuple(tuple(int(i) for i in group) for group in axis_index_groups)
    except TypeError:
        raise TypeError(f"{where}: axis_index_groups must be a list of lists of axis indices, got "
                        f"{axis_index_groups!r}") from None
    n = axis_size(axis_name)
    if sorted(i for group in groups for i in group) != list(range(n)) or not all(groups):
        raise ValueError(f"{where}: axis_index_groups must cover all indices exactly once (0..{n - 1} of axis "
                         f"{names[0]!r}), got {axis_index_groups!r}")
    if same_size and len({len(group) for group in groups}) != 1:
        raise ValueError(f"{where}: axis_index_groups must all be the same size, got {axis_index_groups!r}")
    return groups


def psum(x, axis_name, *, axis_index_groups=None):
    """The sum of x (a tree) over the mapped axis named axis_name (a name or a tuple of names); with
    axis_index_groups (a partition of the positions along one axis), over each element's group."""
    axes = _names(axis_name)
    groups = _check_groups("psum", axis_index_groups, axis_name) if axes else None
    return _tree(lambda v: psum_p.bind(v, axes=axes, groups=groups) if axes else v, x)


def pmean(x, axis_name, *, axis_index_groups=None):
    """The mean of x (a tree) over the mapped axis named axis_name (integers give float32); with
    axis_index_groups, over each element's group (divided by that group's size)."""
    names = _names(axis_name)
    groups = _check_groups("pmean", axis_index_groups, axis_name) if names else None

    def mean(v):
        total = psum(v, axis_name, axis_index_groups=groups)
        dtype = get_aval(total).dtype
        if not dtypes.is_inexact(dtype):
            total, dtype = api.convert_element_type(total, np.float32), np.dtype(np.float32)
        if groups is not None and len({len(g) for g in groups}) > 1:  # each element's own group's size
            return api.div(total, psum(np.ones((), dtype), axis_name, axis_index_groups=groups))
        size = (len(groups[0]) if groups is not None else axis_size(axis_name)) if names else 1
        return api.div(total, np.asarray(size, dtype))

    return _tree(mean, x)


def pmax(x, axis_name, *, axis_index_groups=None):
    """The maximum of x (a tree) over the mapped axis named axis_name (each element's group's, with
    axis_index_groups)."""
    axes = _names(axis_name)
    groups = _check_groups("pmax", axis_index_groups, axis_name) if axes else None
    return _tree(lambda v: pmax_p.bind(v, axes=axes, groups=groups) if axes else v, x)


def pmin(x, axis_name, *, axis_index_groups=None):
    """The minimum of x (a tree) over the mapped axis named axis_name (each element's group's, with
    axis_index_groups)."""
    axes = _names(axis_name)
    groups = _check_groups("pmin", axis_index_groups, axis_name) if axes else None
    return _tree(lambda v: pmin_p.bind(v, axes=axes, groups=groups) if axes else v, x)


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


def _one_name(where, axis_name):
    names = _names(axis_name)
    if len(names) != 1:  # JAX's vmap and pmap refuse several names for all_gather and psum_scatter too
        raise ValueError(f"{where}: axis_name must be a single axis name here, got {axis_name!r}")
    return names


# ---- all_gather and psum_scatter: each the other's transpose

all_gather_p, psum_scatter_p = _collective("all_gather"), _collective("psum_scatter")


def _all_gather_shape(shape, axis, tiled, size):
    if tiled:
        return shape[:axis] + (shape[axis] * size,) + shape[axis + 1:]
    return shape[:axis] + (size,) + shape[axis:]


def _psum_scatter_shape(where, shape, axis, tiled, size):
    if tiled:
        if shape[axis] % size:
            raise ValueError(f"{where}: dimension {axis} of {shape} is not a multiple of the axis size {size}")
        return shape[:axis] + (shape[axis] // size,) + shape[axis + 1:]
    if shape[axis] != size:
        raise ValueError(f"{where}: dimension {axis} of {shape} must equal the axis size {size} (or use tiled=True)")
    return shape[:axis] + shape[axis + 1:]


all_gather_p.def_abstract_eval(lambda x, *, axes, axis, tiled, size, groups: ShapedArray(
    _all_gather_shape(x.shape, axis, tiled, size), x.dtype, x.weak_type))
psum_scatter_p.def_abstract_eval(lambda x, *, axes, axis, tiled, size, groups: ShapedArray(
    _psum_scatter_shape("psum_scatter", x.shape, axis, tiled, size), x.dtype, x.weak_type))


def _all_gather_batching(trace, tracers, params):
    x, = tracers
    axis, tiled, size = params["axis"], params["tiled"], params["size"]
    mine, _ = _split(trace, params["axes"])
    if not mine:  # another vmap's axis: gather with this one's batch axis first
        value = move_batch_axis(x.value, x.batch_dim, 0, trace.axis_size)
        return [BatchTracer(trace, all_gather_p.bind(value, **{**params, "axis": axis + 1}), 0)]
    groups = params["groups"]
    if groups is not None:  # element i gets its group's members stacked, in the group's order
        value = move_batch_axis(x.value, x.batch_dim, 0, trace.axis_size)
        members = _members(groups, trace.axis_size)
        stacked = _rows(value, [groups[members[i]] for i in range(trace.axis_size)])  # (n, size, x's dims)
        ndim = get_aval(stacked).ndim
        order = [0] + list(range(2, 2 + axis)) + [1] + list(range(2 + axis, ndim))
        stacked = api.transpose(stacked, tuple(order))
        if tiled:
            shape = get_aval(stacked).shape
            stacked = api.reshape(stacked, shape[:1 + axis] + (shape[1 + axis] * shape[2 + axis],) + shape[3 + axis:])
        return [BatchTracer(trace, stacked, 0)]
    stacked = move_batch_axis(x.value, x.batch_dim, axis, size)
    if tiled:
        shape = get_aval(stacked).shape
        stacked = api.reshape(stacked, shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])
    return [BatchTracer(trace, stacked, None)]


def _psum_scatter_batching(trace, tracers, params):
    x, = tracers
    axis, tiled, size = params["axis"], params["tiled"], params["size"]
    mine, _ = _split(trace, params["axes"])
    if not mine:
        value = move_batch_axis(x.value, x.batch_dim, 0, trace.axis_size)
        return [BatchTracer(trace, psum_scatter_p.bind(value, **{**params, "axis": axis + 1}), 0)]
    groups = params["groups"]
    if groups is not None:  # element i gets block (its position in its group) of its group's sum
        summed = _grouped_reduce(move_batch_axis(x.value, x.batch_dim, 0, trace.axis_size), groups, api.reduce_sum)
        shape = get_aval(summed).shape
        if tiled:
            summed = api.reshape(summed, shape[:1 + axis] + (size, shape[1 + axis] // size) + shape[2 + axis:])
        position = np.zeros(trace.axis_size, np.int64)
        for group in groups:
            position[list(group)] = np.arange(len(group))
        dtype = get_aval(summed).dtype
        mask = (position[:, None] == np.arange(size)[None, :]).astype(dtype)  # (n, size): the block each one takes
        mshape = get_aval(summed).shape
        mask = api.broadcast_in_dim(mask, mshape, (0, 1 + axis))
        return [BatchTracer(trace, api.reduce_sum(api.mul(summed, mask), (1 + axis,)), 0)]
    total = _times(x.value, size) if x.batch_dim is None else api.reduce_sum(x.value, (x.batch_dim,))
    if tiled:
        shape = get_aval(total).shape
        total = api.reshape(total, shape[:axis] + (size, shape[axis] // size) + shape[axis + 1:])
    return [BatchTracer(trace, total, axis)]


all_gather_p.collective_batching_rule = _all_gather_batching
psum_scatter_p.collective_batching_rule = _psum_scatter_batching
all_gather_p.jvp_rule = _linear_jvp(all_gather_p)
psum_scatter_p.jvp_rule = _linear_jvp(psum_scatter_p)
all_gather_p.transpose_rule = lambda ct, x, **params: [psum_scatter_p.bind(ct, **params)]
psum_scatter_p.transpose_rule = lambda ct, x, **params: [all_gather_p.bind(ct, **params)]


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False):
    """Every mapped element's x stacked along a new axis `axis` (concatenated along `axis` when tiled); with
    axis_index_groups (groups of one size), the members of each element's group, in the group's order."""
    axes = _one_name("all_gather", axis_name)
    groups = _check_groups("all_gather", axis_index_groups, axis_name, same_size=True)
    size = axis_size(axis_name) if groups is None else len(groups[0])

    def gather(v):
        ndim = get_aval(v).ndim
        if tiled and ndim == 0:
            raise ValueError(f"all_gather: tiled needs an existing axis, got axis={axis} for rank 0")
        if not -(ndim + (not tiled)) <= axis < ndim + (not tiled):
            raise ValueError(f"all_gather: axis={axis} is out of range for rank {ndim}{' (tiled)' if tiled else ''}")
        at = axis % (ndim if tiled else ndim + 1)
        return all_gather_p.bind(v, axes=axes, axis=at, tiled=bool(tiled), size=size, groups=groups)

    return _tree(gather, x)


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """The sum of x over the mapped axis named axis_name, scattered: mapped element i gets block i of dimension
    `scatter_dimension` (which must have the axis' size, and is removed; or with tiled, a multiple of it, and is
    divided); with axis_index_groups (groups of one size), the sum over each element's group, of which it gets
    the block of its position in the group."""
    axes = _one_name("psum_scatter", axis_name)
    groups = _check_groups("psum_scatter", axis_index_groups, axis_name, same_size=True)
    size = axis_size(axis_name) if groups is None else len(groups[0])

    def scatter(v):
        ndim = get_aval(v).ndim
        if ndim == 0:
            raise ValueError("psum_scatter: the operand needs a dimension to scatter, got a scalar")
        if not -ndim <= scatter_dimension < ndim:
            raise ValueError(f"psum_scatter: scatter_dimension={scatter_dimension} is out of range for rank {ndim}")
        _psum_scatter_shape("psum_scatter", get_aval(v).shape, scatter_dimension % ndim, tiled, size)
        return psum_scatter_p.bind(v, axes=axes, axis=scatter_dimension % ndim, tiled=bool(tiled), size=size,
                                   groups=groups)

    return _tree(scatter, x)


# ---- ppermute: a permutation of the mapped elements; its transpose is the inverse permutation

ppermute_p = _collective("ppermute")
ppermute_p.def_abstract_eval(lambda x, *, axes, perm: x)


def _ppermute_batching(trace, tracers, params):
    x, = tracers
    mine, _ = _split(trace, params["axes"])
    if not mine:
        return [BatchTracer(trace, ppermute_p.bind(x.value, **params), x.batch_dim)]
    n = trace.axis_size
    value = move_batch_axis(x.value, x.batch_dim, 0, n)
    shape = get_aval(value).shape
    source = {dst: src for src, dst in params["perm"]}
    rows = []
    for i in range(n):
        if i in source:
            j = source[i]
            rows.append(sp.slice(value, (j,) + (0,) * (len(shape) - 1), (j + 1,) + shape[1:]))
        else:
            rows.append(_zeros((1,) + shape[1:], get_aval(value).dtype))
    return [BatchTracer(trace, rows[0] if n == 1 else sp.concatenate(rows, 0), 0)]


ppermute_p.collective_batching_rule = _ppermute_batching
ppermute_p.jvp_rule = _linear_jvp(ppermute_p)
ppermute_p.transpose_rule = lambda ct, x, *, axes, perm: [
    ppermute_p.bind(ct, axes=axes, perm=tuple((dst, src) for src, dst in perm))]


def ppermute(x, axis_name, perm):
    """Mapped element `dst` gets the x of element `src` for each pair (src, dst) of `perm`; an element no pair
    sends to gets zeros. Sources and destinations must each be distinct positions along the axis."""
    axes = _one_name("ppermute", axis_name)
    n = axis_size(axis_name)
    pairs = tuple((int(s), int(d)) for s, d in perm)
    for which, values in (("source", [s for s, _ in pairs]), ("destination", [d for _, d in pairs])):
        if len(set(values)) != len(values):
            raise ValueError(f"ppermute: perm has a repeated {which}: {list(perm)!r}")
        if any(not 0 <= v < n for v in values):
            raise ValueError(f"ppermute: perm {list(perm)!r} names a {which} outside the axis of size {n}")
    return _tree(lambda v: ppermute_p.bind(v, axes=axes, perm=pairs), x)


def pbroadcast(x, axis_name, source):
    """Every mapped element gets the x of element `source` (JAX's collective broadcast)."""
    n = axis_size(axis_name)
    if not 0 <= int(source) < n:
        raise ValueError(f"pbroadcast: source {source} is outside the axis of size {n}")

    def take(v):
        gathered = all_gather(v, axis_name)
        shape = get_aval(gathered).shape
        row = sp.slice(gathered, (int(source),) + (0,) * (len(shape) - 1), (int(source) + 1,) + shape[1:])
        return api.reshape(row, shape[1:])

    return _tree(take, x)


def pshuffle(x, axis_name, perm):
    """ppermute with the permutation given as sources: mapped element i gets the x of element ``perm[i]``."""
    return ppermute(x, axis_name, [(int(src), dst) for dst, src in enumerate(perm)])


# ---- all_to_all: the mapped axis becomes `concat_axis`, and `split_axis` becomes the mapped axis

all_to_all_p = _collective("all_to_all")


def _all_to_all_shape(shape, split, concat, tiled, size):
    if tiled:
        if shape[split] % size:
            raise ValueError(f"all_to_all: dimension {split} of {shape} is not a multiple of the axis size {size}")
        out = list(shape)
        out[split] //= size
        out[concat] *= size
        return tuple(out)
    if shape[split] != size:
        raise ValueError(f"all_to_all: dimension {split} of {shape} must equal the axis size {size} "
                         "(or use tiled=True)")
    rest = shape[:split] + shape[split + 1:]
    return rest[:concat] + (size,) + rest[concat:]


all_to_all_p.def_abstract_eval(lambda x, *, axes, split, concat, tiled, size: ShapedArray(
    _all_to_all_shape(x.shape, split, concat, tiled, size), x.dtype, x.weak_type))


def _all_to_all_batching(trace, tracers, params):
    x, = tracers
    split, concat, tiled, n = params["split"], params["concat"], params["tiled"], params["size"]
    mine, _ = _split(trace, params["axes"])
    value = move_batch_axis(x.value, x.batch_dim, 0, trace.axis_size)
    if not mine:
        return [BatchTracer(trace, all_to_all_p.bind(value, **{**params, "split": split + 1,
                                                              "concat": concat + 1}), 0)]
    shape = get_aval(value).shape  # (j, x's dims): j the source element
    if not tiled:  # dims of the result: i (the new mapped axis) = x's split, then x's others with j at concat
        others = [1 + d for d in range(len(shape) - 1) if d != split]
        return [BatchTracer(trace, api.transpose(value, tuple([1 + split] + others[:concat] + [0] + others[concat:])),
                            0)]
    k = shape[1 + split] // n  # split's blocks: (i, k); the j blocks concatenated along concat (j major)
    value = api.reshape(value, shape[:1 + split] + (n, k) + shape[2 + split:])
    dims = [1 + d + (d >= split) for d in range(len(shape) - 1)]  # x's dims in the reshaped value (split -> k)
    order = [1 + split] + dims[:concat] + [0] + dims[concat:]
    moved = api.transpose(value, tuple(order))
    mshape = get_aval(moved).shape
    at = 1 + concat
    return [BatchTracer(trace, api.reshape(moved, mshape[:at] + (mshape[at] * mshape[at + 1],) + mshape[at + 2:]), 0)]


all_to_all_p.collective_batching_rule = _all_to_all_batching
all_to_all_p.jvp_rule = _linear_jvp(all_to_all_p)
all_to_all_p.transpose_rule = lambda ct, x, *, axes, split, concat, tiled, size: [
    all_to_all_p.bind(ct, axes=axes, split=concat, concat=split, tiled=tiled, size=size)]


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """The mapped axis materialized at `concat_axis` and `split_axis` mapped instead: element i gets block i of
    every element's `split_axis` (which must have the axis' size, or with tiled a multiple of it), stacked along a
    new axis `concat_axis` (concatenated along `concat_axis` when tiled)."""
    if axis_index_groups is not None:
        raise ValueError("all_to_all: axis_index_groups is not supported (kiln has it for psum, pmean, pmax, pmin, "
                         "all_gather and psum_scatter)")
    axes = _one_name("all_to_all", axis_name)
    size = axis_size(axis_name)

    def exchange(v):
        ndim = get_aval(v).ndim
        if ndim == 0:
            raise ValueError("all_to_all: the operand needs a dimension to split, got a scalar")
        for name, a in (("split_axis", split_axis), ("concat_axis", concat_axis)):
            if not -ndim <= a < ndim:
                raise ValueError(f"all_to_all: {name}={a} is out of range for rank {ndim}")
        split, concat = split_axis % ndim, concat_axis % ndim
        _all_to_all_shape(get_aval(v).shape, split, concat, tiled, size)
        return all_to_all_p.bind(v, axes=axes, split=split, concat=concat, tiled=bool(tiled), size=size)

    return _tree(exchange, x)


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """The mapped axis and the unmapped axis `axis` (whose size must be the axis size) swapped: JAX's
    ``all_to_all(x, axis_name, axis, axis)``."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)
