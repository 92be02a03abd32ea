"""Structural primitives: slicing, padding, reversal, concatenation, gather/scatter,
dynamic slices, sorting, cumulative ops, argmax/argmin and reduce_prod.

Each primitive is one registration: eager numpy implementation, abstract
evaluation, and its JVP / transpose / batching rules (all defined here).
Code generation: `slice` and `rev` are strided views (kiln.compiler.layout),
so they fuse into elementwise kernels and into every kernel that reads its
operands through views; the others declare the `structural` kernel strategy and are emitted by
kiln.compiler.codegen.structural (reduce_prod by the reduction kernels).

Index semantics (as in JAX):
- gather with mode="clip" clamps every index into range (numpy indexing of a
  traced array never raises for an out-of-range index; it reads the nearest
  valid element); mode="fill" reads 0 for out-of-range indices.
- scatter with mode="drop" ignores updates whose index is out of range;
  mode="clip" clamps them.
- dynamic_slice / dynamic_update_slice clamp their start indices so that the
  whole slice lies inside the operand.
- sort orders lexicographically by the first `num_keys` operands, NaN last.
  Ties among all the keys may come out in any order in compiled code: callers
  that need stability (kiln.numpy.sort/argsort do) append an iota key.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero, instantiate, zeros_like_aval
from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from ..core.trace import get_aval
from ..transforms.batching import move_batch_axis
from ..transforms.jvp import DifferentiationError, tangent_aval
from ..transforms.transpose import is_linear
from . import prims
from .control_flow import scan
from .prims import ShapeError

_INT = np.dtype(np.int32)


def _full(shape, value, dtype):
    return prims.broadcast_in_dim.bind(np.asarray(value, dtype), shape=tuple(shape), broadcast_dimensions=())


def _is_zero(t) -> bool:
    return isinstance(t, Zero)


def _zero_tangent(x):
    return Zero(tangent_aval(get_aval(x)))


def _inst(t, x):
    return instantiate(t, tangent_aval(get_aval(x)))


def _undefined(x) -> bool:
    return is_linear(x)


def _check_int(name, a: ShapedArray, what: str):
    if not dtypes.is_int(a.dtype):
        raise ShapeError(f"{name}: {what} must be integers, got {a}")


def _scalar_for(dtype, value):
    """A Python scalar of dtype's kind (kept in params: hashable, printable)."""
    v = np.asarray(value).astype(dtype).item()
    return v


# --------------------------------------------------------------------------- slice

slice_p = register(Primitive("slice"))
slice_p.def_traits(fusion="layout")


def _slice_shape(shape, start, limit, strides):
    out = []
    for d, s, l, st in zip(shape, start, limit, strides):
        if not (0 <= s <= l <= d) or st < 1:
            raise ShapeError(f"slice: bad start {start}, limit {limit}, strides {strides} for shape {shape}")
        out.append(max(0, -(-(l - s) // st)))
    return tuple(out)


@slice_p.def_abstract_eval
def _slice_abstract(x, *, start_indices, limit_indices, strides):
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        raise ShapeError(f"slice: need {x.ndim} start/limit/stride values for {x}")
    return ShapedArray(_slice_shape(x.shape, start_indices, limit_indices, strides), x.dtype, x.weak_type)


@slice_p.def_impl
def _slice_impl(x, *, start_indices, limit_indices, strides):
    x = np.asarray(x)
    return x[tuple(builtins.slice(s, l, st) for s, l, st in zip(start_indices, limit_indices, strides))].copy()


def slice(x, start_indices, limit_indices, strides=None):  # noqa: A001
    """lax.slice: x[start:limit:stride] along every axis (static bounds)."""
    nd = get_aval(x).ndim
    strides = (1,) * nd if strides is None else tuple(int(s) for s in strides)
    return slice_p.bind(x, start_indices=tuple(int(s) for s in start_indices),
                        limit_indices=tuple(int(s) for s in limit_indices), strides=strides)


def _slice_t(ct, x, *, start_indices, limit_indices, strides):
    shape = x.aval.shape
    out_shape = get_aval(ct).shape
    config = []
    for d, s, st, m in zip(shape, start_indices, strides, out_shape):
        if m == 0:
            config.append((0, d, 0))
        else:
            last = s + (m - 1) * st
            config.append((s, d - last - 1, st - 1))
    if any(m == 0 for m in out_shape):
        return [zeros_like_aval(x.aval)]
    return [pad_p.bind(ct, padding_config=tuple(config), padding_value=_scalar_for(x.aval.dtype, 0))]


def _slice_batch(values, dims, *, axis_size, start_indices, limit_indices, strides):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    return slice_p.bind(x, start_indices=(0,) + tuple(start_indices), limit_indices=(axis_size,) + tuple(limit_indices),
                        strides=(1,) + tuple(strides)), 0


# --------------------------------------------------------------------------- rev

rev_p = register(Primitive("rev"))
rev_p.def_traits(fusion="layout")


@rev_p.def_abstract_eval
def _rev_abstract(x, *, dimensions):
    if any(d < 0 or d >= x.ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise ShapeError(f"rev: bad dimensions {dimensions} for {x}")
    return x


@rev_p.def_impl
def _rev_impl(x, *, dimensions):
    return np.flip(np.asarray(x), tuple(dimensions)).copy()


def rev(x, dimensions):
    return rev_p.bind(x, dimensions=tuple(sorted(int(d) for d in dimensions)))


def _rev_batch(values, dims, *, axis_size, dimensions):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    return rev_p.bind(x, dimensions=tuple(d + 1 for d in dimensions)), 0


# --------------------------------------------------------------------------- pad

pad_p = register(Primitive("pad"))
pad_p.kernel_kind = "pad"
pad_p.def_traits(fusion="kernel", kernel="structural")


def _pad_shape(shape, config):
    out = []
    for d, (lo, hi, interior) in zip(shape, config):
        if interior < 0:
            raise ShapeError(f"pad: interior padding must be >= 0, got {config}")
        n = lo + hi + d + builtins.max(d - 1, 0) * interior
        if n < 0:
            raise ShapeError(f"pad: padding {config} gives a negative dimension for shape {shape}")
        out.append(n)
    return tuple(out)


@pad_p.def_abstract_eval
def _pad_abstract(x, *, padding_config, padding_value):
    if len(padding_config) != x.ndim:
        raise ShapeError(f"pad: need {x.ndim} (lo, hi, interior) triples for {x}, got {padding_config}")
    return ShapedArray(_pad_shape(x.shape, padding_config), x.dtype, x.weak_type)


@pad_p.def_impl
def _pad_impl(x, *, padding_config, padding_value):
    x = np.asarray(x)
    full_shape = [lo_p + hi_p + d + builtins.max(d - 1, 0) * i
                  for d, (lo_p, hi_p, i) in zip(x.shape, [(builtins.max(lo, 0), builtins.max(hi, 0), i) for lo, hi, i in padding_config])]
    out = np.full(full_shape, np.asarray(padding_value).astype(x.dtype), x.dtype)
    index = tuple(builtins.slice(builtins.max(lo, 0), builtins.max(lo, 0) + (d + builtins.max(d - 1, 0) * i), i + 1)
                  for d, (lo, hi, i) in zip(x.shape, padding_config))
    out[index] = x
    crop = tuple(builtins.slice(-builtins.min(lo, 0), n + builtins.min(hi, 0)) for n, (lo, hi, _) in zip(full_shape, padding_config))
    return out[crop].copy()


def pad(x, padding_value, padding_config):
    """lax.pad: (lo, hi, interior) per axis; negative lo/hi crop; padding_value is a static scalar."""
    dtype = get_aval(x).dtype
    return pad_p.bind(x, padding_config=tuple((int(a), int(b), int(c)) for a, b, c in padding_config),
                      padding_value=_scalar_for(dtype, padding_value))


def _pad_t(ct, x, *, padding_config, padding_value):
    # undo cropping (negative lo/hi) with zeros, then take every (interior+1)-th element
    uncrop = tuple((builtins.max(-lo, 0), builtins.max(-hi, 0), 0) for lo, hi, _ in padding_config)
    t = ct
    if any(a or b for a, b, _ in uncrop):
        t = pad_p.bind(ct, padding_config=uncrop, padding_value=_scalar_for(x.aval.dtype, 0))
    shape = get_aval(t).shape
    start = tuple(builtins.max(lo, 0) for lo, _, _ in padding_config)
    strides = tuple(i + 1 for _, _, i in padding_config)
    limit = tuple(s + (d - 1) * st + 1 if d else s for s, d, st in zip(start, x.aval.shape, strides))
    limit = tuple(builtins.min(l, n) for l, n in zip(limit, shape))
    return [slice_p.bind(t, start_indices=start, limit_indices=limit, strides=strides)]


def _pad_jvp(primals, tangents, *, padding_config, padding_value):
    (x,), (t,) = primals, tangents
    out = pad_p.bind(x, padding_config=padding_config, padding_value=padding_value)
    if _is_zero(t):
        return out, _zero_tangent(out)
    zero = _scalar_for(get_aval(t).dtype, 0)
    return out, pad_p.bind(t, padding_config=padding_config, padding_value=zero)


def _pad_batch(values, dims, *, axis_size, padding_config, padding_value):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    return pad_p.bind(x, padding_config=((0, 0, 0),) + tuple(padding_config), padding_value=padding_value), 0


# --------------------------------------------------------------------------- concatenate

concatenate_p = register(Primitive("concatenate"))
concatenate_p.kernel_kind = "concatenate"
concatenate_p.def_traits(fusion="kernel", kernel="structural")


@concatenate_p.def_abstract_eval
def _concatenate_abstract(*xs, dimension):
    if not xs:
        raise ShapeError("concatenate: need at least one operand")
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        raise ShapeError(f"concatenate: dimension {dimension} out of range for {first}")
    for x in xs[1:]:
        if x.dtype != first.dtype or x.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != dimension):
            raise ShapeError(f"concatenate: operands {', '.join(str(a) for a in xs)} do not fit along axis {dimension}")
    shape = list(first.shape)
    shape[dimension] = builtins.sum(x.shape[dimension] for x in xs)
    return ShapedArray(tuple(shape), first.dtype, builtins.all(x.weak_type for x in xs))


@concatenate_p.def_impl
def _concatenate_impl(*xs, dimension):
    return np.concatenate([np.asarray(x) for x in xs], axis=dimension)


def concatenate(xs, dimension):
    return concatenate_p.bind(*xs, dimension=int(dimension))


def _concatenate_jvp(primals, tangents, *, dimension):
    out = concatenate_p.bind(*primals, dimension=dimension)
    if builtins.all(_is_zero(t) for t in tangents):
        return out, _zero_tangent(out)
    return out, concatenate_p.bind(*[_inst(t, p) for t, p in zip(tangents, primals)], dimension=dimension)


def _concatenate_t(ct, *xs, dimension):
    out, start = [], 0
    shape = get_aval(ct).shape
    for x in xs:
        a = x.aval if _undefined(x) else get_aval(x)
        n = a.shape[dimension]
        if _undefined(x):
            lo = tuple(start if i == dimension else 0 for i in range(len(shape)))
            hi = tuple(start + n if i == dimension else d for i, d in enumerate(shape))
            out.append(slice_p.bind(ct, start_indices=lo, limit_indices=hi, strides=(1,) * len(shape)))
        else:
            out.append(None)
        start += n
    return out


def _concatenate_batch(values, dims, *, axis_size, dimension):
    xs = [move_batch_axis(v, d, 0, axis_size) for v, d in zip(values, dims)]
    return concatenate_p.bind(*xs, dimension=dimension + 1), 0


# --------------------------------------------------------------------------- gather / scatter

gather_p = register(Primitive("gather"))
gather_p.kernel_kind = "gather"
gather_p.def_traits(fusion="kernel", kernel="structural")


def _gather_shapes(name, operand, indices, axes):
    _check_int(name, indices, "indices")
    if indices.ndim < 1 or indices.shape[-1] != len(axes):
        raise ShapeError(f"{name}: indices {indices} must end in an axis of size {len(axes)} (one per indexed axis {axes})")
    if any(a < 0 or a >= operand.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ShapeError(f"{name}: bad axes {axes} for {operand}")
    batch = indices.shape[:-1]
    rest = tuple(d for i, d in enumerate(operand.shape) if i not in axes)
    return batch, rest


@gather_p.def_abstract_eval
def _gather_abstract(operand, indices, *, axes, mode):
    if mode not in ("clip", "fill"):
        raise ShapeError(f"gather: mode must be 'clip' or 'fill', got {mode!r}")
    batch, rest = _gather_shapes("gather", operand, indices, axes)
    if mode == "clip" and int(np.prod(batch, dtype=np.int64)) and any(operand.shape[a] == 0 for a in axes):
        raise ShapeError(f"gather: cannot index into a zero-size axis of {operand}")
    return ShapedArray(batch + rest, operand.dtype, operand.weak_type)


def _flat_indices(operand_shape, indices, axes, mode):
    k = len(axes)
    idx = np.asarray(indices).reshape(-1, k).astype(np.int64)
    sizes = np.array([operand_shape[a] for a in axes], np.int64)
    if mode == "clip":
        return np.clip(idx, 0, np.maximum(sizes - 1, 0)), np.ones(idx.shape[0], bool)
    valid = np.all((idx >= 0) & (idx < sizes), axis=1)
    return np.where(valid[:, None], idx, 0), valid


@gather_p.def_impl
def _gather_impl(operand, indices, *, axes, mode):
    operand = np.asarray(operand)
    batch = np.shape(indices)[:-1]
    rest = tuple(d for i, d in enumerate(operand.shape) if i not in axes)
    idx, valid = _flat_indices(operand.shape, indices, axes, mode)
    if idx.shape[0] == 0 or any(operand.shape[a] == 0 for a in axes):
        return np.zeros(batch + rest, operand.dtype)
    moved = np.moveaxis(operand, axes, tuple(range(len(axes))))
    out = moved[tuple(idx[:, j] for j in range(len(axes)))].copy()
    out[~valid] = 0
    return out.reshape(batch + rest)


def gather(operand, indices, axes, mode="clip"):
    return gather_p.bind(operand, indices, axes=tuple(int(a) for a in axes), mode=mode)


scatter_p = register(Primitive("scatter"))
scatter_p.kernel_kind = "scatter"
scatter_p.def_traits(fusion="kernel", kernel="structural")
_UPDATES = ("set", "add", "mul", "min", "max")


@scatter_p.def_abstract_eval
def _scatter_abstract(operand, indices, updates, *, axes, update, mode):
    if update not in _UPDATES or mode not in ("clip", "drop"):
        raise ShapeError(f"scatter: update must be one of {_UPDATES} and mode 'clip' or 'drop'; got {update!r}, {mode!r}")
    batch, rest = _gather_shapes("scatter", operand, indices, axes)
    if updates.shape != batch + rest or updates.dtype != operand.dtype:
        raise ShapeError(f"scatter: updates must be {ShapedArray(batch + rest, operand.dtype)}, got {updates}")
    if mode == "clip" and int(np.prod(batch, dtype=np.int64)) and any(operand.shape[a] == 0 for a in axes):
        raise ShapeError(f"scatter: cannot index into a zero-size axis of {operand}")
    return operand  # the operand's weak type too, as JAX's scatter


_UFUNCS = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


@scatter_p.def_impl
def _scatter_impl(operand, indices, updates, *, axes, update, mode):
    out = np.array(operand, copy=True)
    k = len(axes)
    idx, valid = _flat_indices(out.shape, indices, axes, "clip" if mode == "clip" else "fill")
    rest = tuple(d for i, d in enumerate(out.shape) if i not in axes)
    upd = np.asarray(updates).reshape((-1,) + rest)[valid]
    idx = idx[valid]
    if idx.shape[0] == 0:
        return out
    moved = np.moveaxis(out, axes, tuple(range(k)))
    where = tuple(idx[:, j] for j in range(k))
    if update == "set":
        for i in range(idx.shape[0]):  # sequential: the last of duplicate indices wins
            moved[tuple(w[i] for w in where)] = upd[i]
    else:
        _UFUNCS[update].at(moved, where, upd)
    return out


def scatter(operand, indices, updates, axes, update="set", mode="drop"):
    return scatter_p.bind(operand, indices, updates, axes=tuple(int(a) for a in axes), update=update, mode=mode)


def _gather_jvp(primals, tangents, *, axes, mode):
    (x, idx), (t, _) = primals, tangents
    out = gather_p.bind(x, idx, axes=axes, mode=mode)
    if _is_zero(t):
        return out, _zero_tangent(out)
    return out, gather_p.bind(t, idx, axes=axes, mode=mode)


def _gather_t(ct, x, idx, *, axes, mode):
    zeros = zeros_like_aval(x.aval)
    return [scatter_p.bind(zeros, idx, ct, axes=axes, update="add", mode="clip" if mode == "clip" else "drop"), None]


def _scatter_jvp(primals, tangents, *, axes, update, mode):
    (x, idx, u), (tx, _, tu) = primals, tangents
    params = dict(axes=axes, update=update, mode=mode)
    out = scatter_p.bind(x, idx, u, **params)
    if _is_zero(tx) and _is_zero(tu):
        return out, _zero_tangent(out)
    if update in ("set", "add"):
        return out, scatter_p.bind(_inst(tx, x), idx, _inst(tu, u), **params)
    if update == "mul":
        if not _is_zero(tu):
            raise DifferentiationError(
                "differentiating x.at[idx].multiply(u) with respect to u is not supported; build the factors "
                "with knp.ones_like(x).at[idx].set(u) and multiply x by them instead")
        return out, scatter_p.bind(tx, idx, u, **params)
    # min / max: the tangent of whichever operand produced each result, averaged over ties
    gmode = "clip" if mode == "clip" else "fill"
    dt = get_aval(out).dtype
    hit_x = prims.convert.bind(prims.eq.bind(out, x), new_dtype=dt)
    picked_u = prims.convert.bind(prims.eq.bind(gather_p.bind(out, idx, axes=axes, mode=gmode), u), new_dtype=dt)
    zeros = zeros_like_aval(get_aval(out))
    count = prims.add.bind(hit_x, scatter_p.bind(zeros, idx, picked_u, axes=axes, update="add", mode=mode))
    total = prims.mul.bind(_inst(tx, x), hit_x)
    if not _is_zero(tu):
        total = prims.add.bind(total, scatter_p.bind(zeros, idx, prims.mul.bind(tu, picked_u), axes=axes, update="add", mode=mode))
    # positions that no operand reached keep x's tangent (count is at least 1 wherever out == x)
    safe = prims.select.bind(prims.eq.bind(count, zeros), _full(get_aval(out).shape, 1, dt), count)
    return out, prims.div.bind(total, safe)


def _scatter_t(ct, x, idx, u, *, axes, update, mode):
    if update == "mul" and _undefined(x) and not _undefined(u):
        # out = x * (the product of the updates landing on each element): linear in x
        return [scatter_p.bind(ct, idx, u, axes=axes, update="mul", mode=mode), None, None]
    if update not in ("set", "add"):
        raise AssertionError(f"scatter {update} is not linear in its updates")
    ct_x = ct_u = None
    if _undefined(x):
        if update == "add":
            ct_x = ct
        else:
            ua = u.aval if _undefined(u) else get_aval(u)
            ct_x = scatter_p.bind(ct, idx, zeros_like_aval(ua), axes=axes, update="set", mode=mode)
    if _undefined(u):
        ct_u = gather_p.bind(ct, idx, axes=axes, mode="clip" if mode == "clip" else "fill")
    return [ct_x, None, ct_u]


def _with_batch_iota(indices, axis_size):
    """indices (B, ..., k) -> (B, ..., k+1) with the batch position prepended as a new first index."""
    a = get_aval(indices)
    shape = a.shape[:-1] + (1,)
    iota = prims.iota.bind(shape=shape, dimension=0, dtype=a.dtype)
    return concatenate_p.bind(iota, indices, dimension=a.ndim - 1)


def _gather_batch(values, dims, *, axis_size, axes, mode):
    (x, idx), (dx, di) = values, dims
    if di is None:
        x = move_batch_axis(x, dx, 0, axis_size)
        out = gather_p.bind(x, idx, axes=tuple(a + 1 for a in axes), mode=mode)
        return out, get_aval(idx).ndim - 1
    idx = move_batch_axis(idx, di, 0, axis_size)
    if dx is None:
        return gather_p.bind(x, idx, axes=axes, mode=mode), 0
    x = move_batch_axis(x, dx, 0, axis_size)
    return gather_p.bind(x, _with_batch_iota(idx, axis_size), axes=(0,) + tuple(a + 1 for a in axes), mode=mode), 0


def _scatter_batch(values, dims, *, axis_size, axes, update, mode):
    (x, idx, u), (dx, di, du) = values, dims
    x = move_batch_axis(x, dx, 0, axis_size)
    new_axes = tuple(a + 1 for a in axes)
    if di is None:
        u = move_batch_axis(u, du, get_aval(idx).ndim - 1, axis_size)
        return scatter_p.bind(x, idx, u, axes=new_axes, update=update, mode=mode), 0
    idx = move_batch_axis(idx, di, 0, axis_size)
    u = move_batch_axis(u, du, 0, axis_size)
    return scatter_p.bind(x, _with_batch_iota(idx, axis_size), u, axes=(0,) + new_axes, update=update, mode=mode), 0


# --------------------------------------------------------------------------- dynamic slices

dynamic_slice_p = register(Primitive("dynamic_slice"))
dynamic_slice_p.kernel_kind = "dynamic_slice"
dynamic_slice_p.def_traits(fusion="kernel", kernel="structural")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract(x, *starts, slice_sizes):
    if len(starts) != x.ndim or len(slice_sizes) != x.ndim:
        raise ShapeError(f"dynamic_slice: need {x.ndim} start indices and slice sizes for {x}")
    for s in starts:
        if s.shape != ():
            raise ShapeError(f"dynamic_slice: start indices must be scalars, got {s}")
        _check_int("dynamic_slice", s, "start indices")
    if any(not 0 <= z <= d for z, d in zip(slice_sizes, x.shape)):
        raise ShapeError(f"dynamic_slice: slice sizes {slice_sizes} do not fit in {x}")
    return ShapedArray(tuple(slice_sizes), x.dtype, x.weak_type)


def _clamped_starts(shape, sizes, starts):
    return [int(np.clip(int(np.asarray(s)), 0, d - z)) for s, d, z in zip(starts, shape, sizes)]


@dynamic_slice_p.def_impl
def _dynamic_slice_impl(x, *starts, slice_sizes):
    x = np.asarray(x)
    st = _clamped_starts(x.shape, slice_sizes, starts)
    return x[tuple(builtins.slice(s, s + z) for s, z in zip(st, slice_sizes))].copy()


def dynamic_slice(x, starts, slice_sizes):
    return dynamic_slice_p.bind(x, *starts, slice_sizes=tuple(int(s) for s in slice_sizes))


dynamic_update_slice_p = register(Primitive("dynamic_update_slice"))
dynamic_update_slice_p.kernel_kind = "dynamic_update_slice"
dynamic_update_slice_p.def_traits(fusion="kernel", kernel="structural")


@dynamic_update_slice_p.def_abstract_eval
def _dus_abstract(x, update, *starts):
    if update.dtype != x.dtype or update.ndim != x.ndim or any(u > d for u, d in zip(update.shape, x.shape)):
        raise ShapeError(f"dynamic_update_slice: update {update} does not fit in {x}")
    if len(starts) != x.ndim:
        raise ShapeError(f"dynamic_update_slice: need {x.ndim} start indices for {x}")
    for s in starts:
        if s.shape != ():
            raise ShapeError(f"dynamic_update_slice: start indices must be scalars, got {s}")
        _check_int("dynamic_update_slice", s, "start indices")
    return x.update(weak_type=x.weak_type and update.weak_type)


@dynamic_update_slice_p.def_impl
def _dus_impl(x, update, *starts):
    out = np.array(x, copy=True)
    update = np.asarray(update)
    st = _clamped_starts(out.shape, update.shape, starts)
    out[tuple(builtins.slice(s, s + z) for s, z in zip(st, update.shape))] = update
    return out


def dynamic_update_slice(x, update, starts):
    return dynamic_update_slice_p.bind(x, update, *starts)


def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    x, *starts = primals
    out = dynamic_slice_p.bind(x, *starts, slice_sizes=slice_sizes)
    if _is_zero(tangents[0]):
        return out, _zero_tangent(out)
    return out, dynamic_slice_p.bind(tangents[0], *starts, slice_sizes=slice_sizes)


def _dynamic_slice_t(ct, x, *starts, slice_sizes):
    return [dynamic_update_slice_p.bind(zeros_like_aval(x.aval), ct, *starts)] + [None] * len(starts)


def _dus_jvp(primals, tangents):
    x, u, *starts = primals
    tx, tu = tangents[0], tangents[1]
    out = dynamic_update_slice_p.bind(x, u, *starts)
    if _is_zero(tx) and _is_zero(tu):
        return out, _zero_tangent(out)
    return out, dynamic_update_slice_p.bind(_inst(tx, x), _inst(tu, u), *starts)


def _dus_t(ct, x, u, *starts):
    ua = u.aval if _undefined(u) else get_aval(u)
    ct_x = dynamic_update_slice_p.bind(ct, zeros_like_aval(ua), *starts) if _undefined(x) else None
    ct_u = dynamic_slice_p.bind(ct, *starts, slice_sizes=ua.shape) if _undefined(u) else None
    return [ct_x, ct_u] + [None] * len(starts)


def _point_indices(starts, sizes, shape, axis_size):
    """Batched starts (each (B,)) -> gather indices (B, *sizes, ndim) of the clamped slice, int32."""
    nd = len(shape)
    cols = []
    for d, (s, z, n) in enumerate(zip(starts, sizes, shape)):
        s = prims.convert.bind(s, new_dtype=_INT) if get_aval(s).dtype != _INT else s
        lo, hi = _full((axis_size,), 0, _INT), _full((axis_size,), n - z, _INT)
        s = prims.max.bind(prims.min.bind(s, hi), lo)
        full_shape = (axis_size,) + tuple(sizes) + (1,)
        spread = prims.broadcast_in_dim.bind(s, shape=full_shape, broadcast_dimensions=(0,))
        cols.append(prims.add.bind(spread, prims.iota.bind(shape=full_shape, dimension=d + 1, dtype=_INT)))
    return concatenate_p.bind(*cols, dimension=nd + 1) if nd > 1 else cols[0]


def _dynamic_slice_batch(values, dims, *, axis_size, slice_sizes):
    x, *starts = values
    dx, *dstarts = dims
    if builtins.all(d is None for d in dstarts):
        x = move_batch_axis(x, dx, 0, axis_size)
        zero = np.zeros((), get_aval(starts[0]).dtype) if starts else np.int32(0)
        return dynamic_slice_p.bind(x, zero, *starts, slice_sizes=(axis_size,) + tuple(slice_sizes)), 0
    shape = get_aval(x).shape if dx is None else tuple(d for i, d in enumerate(get_aval(x).shape) if i != dx)
    starts = [move_batch_axis(s, d, 0, axis_size) for s, d in zip(starts, dstarts)]
    idx = _point_indices(starts, slice_sizes, shape, axis_size)
    return _gather_batch([x, idx], [dx, 0], axis_size=axis_size, axes=tuple(range(len(shape))), mode="clip")


def _dus_batch(values, dims, *, axis_size):
    x, u, *starts = values
    dx, du, *dstarts = dims
    if builtins.all(d is None for d in dstarts):
        x = move_batch_axis(x, dx, 0, axis_size)
        u = move_batch_axis(u, du, 0, axis_size)
        zero = np.zeros((), get_aval(starts[0]).dtype) if starts else np.int32(0)
        return dynamic_update_slice_p.bind(x, u, zero, *starts), 0
    shape = get_aval(x).shape if dx is None else tuple(d for i, d in enumerate(get_aval(x).shape) if i != dx)
    ushape = get_aval(u).shape if du is None else tuple(d for i, d in enumerate(get_aval(u).shape) if i != du)
    starts = [move_batch_axis(s, d, 0, axis_size) for s, d in zip(starts, dstarts)]
    idx = _point_indices(starts, ushape, shape, axis_size)
    return _scatter_batch([x, idx, u], [dx, 0, du], axis_size=axis_size, axes=tuple(range(len(shape))),
                          update="set", mode="clip")


# --------------------------------------------------------------------------- sort

sort_p = register(Primitive("sort", multiple_results=True))
sort_p.kernel_kind = "sort"
sort_p.def_traits(fusion="kernel", kernel="structural")


@sort_p.def_abstract_eval
def _sort_abstract(*xs, dimension, num_keys):
    if not xs or not 1 <= num_keys <= len(xs):
        raise ShapeError(f"sort: need 1 <= num_keys <= {len(xs)} operands, got num_keys={num_keys}")
    shape = xs[0].shape
    if any(x.shape != shape for x in xs):
        raise ShapeError(f"sort: operands must share a shape, got {', '.join(str(x) for x in xs)}")
    if not 0 <= dimension < len(shape):
        raise ShapeError(f"sort: dimension {dimension} out of range for shape {shape}")
    return list(xs)


def _sort_order(keys, dimension):
    """Stable lexicographic order (NaN last) along `dimension` of same-shape keys."""
    moved = [np.moveaxis(np.asarray(k), dimension, -1) for k in keys]
    if moved[0].size == 0:
        return np.zeros(moved[0].shape, np.int64)
    return np.lexsort(moved[::-1], axis=-1)


@sort_p.def_impl
def _sort_impl(*xs, dimension, num_keys):
    order = _sort_order(xs[:num_keys], dimension)
    outs = []
    for x in xs:
        m = np.moveaxis(np.asarray(x), dimension, -1)
        outs.append(np.moveaxis(np.take_along_axis(m, order, axis=-1), -1, dimension).copy())
    return outs


def sort(xs, dimension=-1, num_keys=1):
    xs = list(xs)
    nd = get_aval(xs[0]).ndim
    return sort_p.bind(*xs, dimension=int(dimension) % nd, num_keys=int(num_keys))


def _sort_jvp(primals, tangents, *, dimension, num_keys):
    shape = get_aval(primals[0]).shape
    iota = prims.iota.bind(shape=shape, dimension=dimension, dtype=_INT)
    outs = sort_p.bind(*primals, iota, dimension=dimension, num_keys=num_keys)
    perm = outs[-1]
    tangent_outs = []
    for p, t, o in zip(primals, tangents, outs):
        tangent_outs.append(_zero_tangent(o) if _is_zero(t) else take_along(t, perm, dimension))
    return outs[:-1], tangent_outs


def take_along(x, idx, axis):
    """x[..., idx[...], ...] along `axis` for idx of x's shape (in range), as a gather."""
    shape = get_aval(idx).shape
    nd = len(shape)
    if nd == 1:
        return gather_p.bind(x, prims.reshape.bind(idx, new_shape=shape + (1,)), axes=(0,), mode="clip")
    cols = []
    for d in range(nd):
        col = idx if d == axis else prims.iota.bind(shape=shape, dimension=d, dtype=get_aval(idx).dtype)
        cols.append(prims.reshape.bind(col, new_shape=shape + (1,)))
    return gather_p.bind(x, concatenate_p.bind(*cols, dimension=nd), axes=tuple(range(nd)), mode="clip")


def _sort_batch(values, dims, *, axis_size, dimension, num_keys):
    xs = [move_batch_axis(v, d, 0, axis_size) for v, d in zip(values, dims)]
    return sort_p.bind(*xs, dimension=dimension + 1, num_keys=num_keys), [0] * len(xs)


# --------------------------------------------------------------------------- cumulative ops

def _cumulative(name, ufunc):
    prim = register(Primitive(name))
    prim.kernel_kind = "cumulative"
    prim.def_traits(fusion="kernel", kernel="structural")
    prim.cumulative = name[3:]

    @prim.def_abstract_eval
    def abstract(x, *, axis, reverse):
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"{name}: axis {axis} out of range for {x}")
        if name == "cumsum" and dtypes.is_bool(x.dtype):
            raise ShapeError(f"{name}: bool operands are not accepted; convert to an integer dtype first")
        return x

    @prim.def_impl
    def impl(x, *, axis, reverse):
        x = np.asarray(x)
        if reverse:
            x = np.flip(x, axis)
        with np.errstate(all="ignore"):
            out = ufunc.accumulate(x, axis=axis, dtype=x.dtype) if x.size else x.copy()
        out = np.asarray(out).astype(x.dtype)
        return np.flip(out, axis).copy() if reverse else out

    def batch(values, dims, *, axis_size, axis, reverse):
        x = move_batch_axis(values[0], dims[0], 0, axis_size)
        return prim.bind(x, axis=axis + 1, reverse=reverse), 0

    prim.batching_rule = batch
    return prim


cumsum_p = _cumulative("cumsum", np.add)
cumprod_p = _cumulative("cumprod", np.multiply)
cummax_p = _cumulative("cummax", np.maximum)
cummin_p = _cumulative("cummin", np.minimum)


def _cumsum_jvp(primals, tangents, *, axis, reverse):
    out = cumsum_p.bind(primals[0], axis=axis, reverse=reverse)
    t = tangents[0]
    return out, (t if _is_zero(t) else cumsum_p.bind(t, axis=axis, reverse=reverse))


def _cumsum_t(ct, x, *, axis, reverse):
    return [cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


def _shift_in(x, axis, reverse, fill):
    """x shifted one step along axis (toward the end, or the start when reverse), `fill` entering."""
    a = get_aval(x)
    n = a.shape[axis]
    nd = a.ndim
    if n == 0:
        return x
    lo = [0] * nd
    hi = list(a.shape)
    if reverse:
        lo[axis] = 1
    else:
        hi[axis] = n - 1
    part = slice_p.bind(x, start_indices=tuple(lo), limit_indices=tuple(hi), strides=(1,) * nd)
    config = [(0, 0, 0)] * nd
    config[axis] = (0, 1, 0) if reverse else (1, 0, 0)
    return pad_p.bind(part, padding_config=tuple(config), padding_value=_scalar_for(a.dtype, fill))


def _cumprod_jvp(primals, tangents, *, axis, reverse):
    (x,), (t,) = primals, tangents
    out = cumprod_p.bind(x, axis=axis, reverse=reverse)
    if _is_zero(t):
        return out, _zero_tangent(out)
    # d out_i = x_i * d out_{i-1} + out_{i-1} * t_i: a linear recurrence, run as a scan along the axis
    prev = _shift_in(out, axis, reverse, 1)
    b = prims.mul.bind(t, prev)
    a = get_aval(x)
    perm = (axis,) + tuple(i for i in range(a.ndim) if i != axis)
    inv = tuple(int(i) for i in np.argsort(perm))
    xs_a = prims.transpose.bind(x, permutation=perm)
    xs_b = prims.transpose.bind(b, permutation=perm)
    init = _full(a.shape[:axis] + a.shape[axis + 1:], 0, a.dtype)

    def step(carry, ab):
        y = prims.add.bind(prims.mul.bind(ab[0], carry), ab[1])
        return y, y

    _, ys = scan(step, init, (xs_a, xs_b), reverse=reverse)
    return out, prims.transpose.bind(ys, permutation=inv)


def _cumextremum_jvp(prim):
    def rule(primals, tangents, *, axis, reverse):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis=axis, reverse=reverse)
        if _is_zero(t):
            return out, _zero_tangent(out)
        a = get_aval(x)
        n = a.shape[axis]
        iota = prims.iota.bind(shape=a.shape, dimension=axis, dtype=_INT)
        if reverse:
            iota = prims.sub.bind(_full(a.shape, n - 1, _INT), iota)
        # position of the element each running extremum came from: the last index (in scan order) where
        # the element equals the running extremum
        marks = prims.select.bind(prims.eq.bind(x, out), iota, _full(a.shape, -1, _INT))
        pos = cummax_p.bind(marks, axis=axis, reverse=reverse)
        pos = prims.max.bind(pos, _full(a.shape, 0, _INT))
        if reverse:
            pos = prims.sub.bind(_full(a.shape, n - 1, _INT), pos)
        return out, take_along(t, pos, axis)

    return rule


# --------------------------------------------------------------------------- argmax / argmin

def _arg_extremum(name, numpy_fn):
    prim = register(Primitive(name))
    prim.kernel_kind = "argreduce"
    prim.def_traits(fusion="kernel", kernel="structural")
    prim.arg_op = name[3:]

    @prim.def_abstract_eval
    def abstract(x, *, axis, index_dtype):
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"{name}: axis {axis} out of range for {x}")
        if x.shape[axis] == 0:
            raise ShapeError(f"{name}: attempt to get {name} of an empty sequence")
        return ShapedArray(x.shape[:axis] + x.shape[axis + 1:], index_dtype)

    @prim.def_impl
    def impl(x, *, axis, index_dtype):
        return np.asarray(numpy_fn(np.asarray(x), axis=axis)).astype(index_dtype)

    def jvp(primals, tangents, *, axis, index_dtype):
        out = prim.bind(primals[0], axis=axis, index_dtype=index_dtype)
        return out, _zero_tangent(out)

    def batch(values, dims, *, axis_size, axis, index_dtype):
        x = move_batch_axis(values[0], dims[0], 0, axis_size)
        return prim.bind(x, axis=axis + 1, index_dtype=index_dtype), 0

    prim.jvp_rule = jvp
    prim.batching_rule = batch
    return prim


argmax_p = _arg_extremum("argmax", np.argmax)
argmin_p = _arg_extremum("argmin", np.argmin)


# --------------------------------------------------------------------------- reduce_prod

reduce_prod_p = register(Primitive("reduce_prod"))
reduce_prod_p.def_traits(fusion="reduction", reduction="prod")


@reduce_prod_p.def_abstract_eval
def _reduce_prod_abstract(x, *, axes):
    if any(a < 0 or a >= x.ndim for a in axes) or len(set(axes)) != len(axes):
        raise ShapeError(f"reduce_prod: bad axes {axes} for {x}")
    return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype, x.weak_type)


@reduce_prod_p.def_impl
def _reduce_prod_impl(x, *, axes):
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        return np.asarray(np.prod(x, axis=tuple(axes), dtype=x.dtype)).astype(x.dtype)


def _reduce_prod_jvp(primals, tangents, *, axes):
    (x,), (t,) = primals, tangents
    out = reduce_prod_p.bind(x, axes=axes)
    if _is_zero(t):
        return out, _zero_tangent(out)
    a = get_aval(x)
    kept = tuple(i for i in range(a.ndim) if i not in axes)
    perm = kept + tuple(axes)
    n = int(np.prod([a.shape[i] for i in axes], dtype=np.int64))
    flat_shape = tuple(a.shape[i] for i in kept) + (n,)

    def flat(v):
        return prims.reshape.bind(prims.transpose.bind(v, permutation=perm), new_shape=flat_shape)

    y = flat(x)
    last = len(flat_shape) - 1
    # products of everything before / after each element: zero-safe (no division)
    before = _shift_in(cumprod_p.bind(y, axis=last, reverse=False), last, False, 1)
    after = _shift_in(cumprod_p.bind(y, axis=last, reverse=True), last, True, 1)
    others = prims.mul.bind(before, after)
    return out, prims.reduce_sum.bind(prims.mul.bind(flat(t), others), axes=(last,))


def _reduce_prod_batch(values, dims, *, axis_size, axes):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    return reduce_prod_p.bind(x, axes=tuple(a + 1 for a in axes)), 0


# --------------------------------------------------------------------------- rule registration

def _linear_jvp(prim):
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if _is_zero(tangents[0]):
            return out, _zero_tangent(out)
        return out, prim.bind(tangents[0], **params)

    return rule


slice_p.jvp_rule = _linear_jvp(slice_p)
slice_p.transpose_rule = _slice_t
slice_p.batching_rule = _slice_batch
rev_p.jvp_rule = _linear_jvp(rev_p)
rev_p.transpose_rule = lambda ct, x, *, dimensions: [rev_p.bind(ct, dimensions=dimensions)]
rev_p.batching_rule = _rev_batch
pad_p.jvp_rule = _pad_jvp
pad_p.transpose_rule = _pad_t
pad_p.batching_rule = _pad_batch
concatenate_p.jvp_rule = _concatenate_jvp
concatenate_p.transpose_rule = _concatenate_t
concatenate_p.batching_rule = _concatenate_batch
gather_p.jvp_rule = _gather_jvp
gather_p.transpose_rule = _gather_t
gather_p.batching_rule = _gather_batch
scatter_p.jvp_rule = _scatter_jvp
scatter_p.transpose_rule = _scatter_t
scatter_p.batching_rule = _scatter_batch
dynamic_slice_p.jvp_rule = _dynamic_slice_jvp
dynamic_slice_p.transpose_rule = _dynamic_slice_t
dynamic_slice_p.batching_rule = _dynamic_slice_batch
dynamic_update_slice_p.jvp_rule = _dus_jvp
dynamic_update_slice_p.transpose_rule = _dus_t
dynamic_update_slice_p.batching_rule = _dus_batch
sort_p.jvp_rule = _sort_jvp
sort_p.batching_rule = _sort_batch
cumsum_p.jvp_rule = _cumsum_jvp
cumsum_p.transpose_rule = _cumsum_t
cumprod_p.jvp_rule = _cumprod_jvp
cummax_p.jvp_rule = _cumextremum_jvp(cummax_p)
cummin_p.jvp_rule = _cumextremum_jvp(cummin_p)
reduce_prod_p.jvp_rule = _reduce_prod_jvp
reduce_prod_p.batching_rule = _reduce_prod_batch
