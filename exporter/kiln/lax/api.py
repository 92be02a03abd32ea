"""kiln.lax's primitive-level functions: strict shapes and dtypes, as in jax.lax.

Python scalars take the dtype of the array operand; arrays must already agree.
"""
from __future__ import annotations

import enum
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from ..core import dtypes
from ..core.pytree import tree_flatten, tree_unflatten
from ..core.trace import Tracer, get_aval
from . import prims
from . import structural_prims
from .accuracy import check_accuracy
from .math_prims import P
from .operands import asarray


def _operands(*xs):
    """Arrays stay as they are; Python scalars take the dtype of the first array operand."""
    arrays = [x for x in xs if not isinstance(x, (bool, int, float)) or isinstance(x, np.generic)]
    dtype = get_aval(arrays[0]).dtype if arrays else dtypes.python_scalar_dtype(xs[0])
    out = []
    for x in xs:
        if dtypes.is_python_scalar(x):
            x = np.asarray(x, dtype)
        out.append(x)
    shape = next((get_aval(x).shape for x in out if get_aval(x).shape), ())
    return [prims.broadcast_in_dim.bind(x, shape=shape, broadcast_dimensions=()) if get_aval(x).shape == () and shape
            else x for x in out]


def _binary(prim):
    def fn(x, y):
        return prim.bind(*_operands(x, y))

    fn.__name__ = fn.__qualname__ = prim.name  # Python names it in call errors
    fn.__doc__ = f"lax.{prim.name}: elementwise, operands of equal shape and dtype (scalars broadcast)."
    return fn


def _unary(prim, *, accuracy: bool = False):
    """lax.<prim>(x); with accuracy=True it also takes JAX's accuracy= keyword (checked, see lax/accuracy.py)."""
    if accuracy:
        def fn(x, *, accuracy=None):
            check_accuracy(prim.name, accuracy)
            return prim.bind(*_operands(x))
    else:
        def fn(x):
            return prim.bind(*_operands(x))

    fn.__name__ = fn.__qualname__ = prim.name  # Python names it in call errors
    fn.__doc__ = f"lax.{prim.name}: elementwise."
    return fn


add, sub, mul, div, pow = (_binary(p) for p in (prims.add, prims.sub, prims.mul, prims.div, prims.pow))
max, min = _binary(prims.max), _binary(prims.min)
eq, ne, lt, le, gt, ge = (_binary(p) for p in (prims.eq, prims.ne, prims.lt, prims.le, prims.gt, prims.ge))
neg, abs = _unary(prims.neg), _unary(prims.abs)
exp, log, tanh, sqrt = (_unary(p, accuracy=True) for p in (prims.exp, prims.log, prims.tanh, prims.sqrt))


def stop_gradient(x):
    """x (a tree of arrays) with derivatives stopped: every transformation treats it as a constant."""
    leaves, treedef = tree_flatten(x)
    return tree_unflatten(treedef, [prims.stop_gradient.bind(asarray(v)) for v in leaves])


def select(pred, on_true, on_false):
    """pred ? on_true : on_false elementwise; pred is bool of the operands' shape."""
    return prims.select.bind(pred, *_operands(on_true, on_false))


def convert_element_type(operand, new_dtype):
    return prims.convert.bind(operand, new_dtype=dtypes.canonical(new_dtype))


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    return prims.broadcast_in_dim.bind(operand, shape=tuple(shape), broadcast_dimensions=tuple(broadcast_dimensions))


def reshape(operand, new_sizes):
    return prims.reshape.bind(operand, new_shape=tuple(new_sizes))


def transpose(operand, permutation):
    return prims.transpose.bind(operand, permutation=tuple(permutation))


class Precision(enum.Enum):
    """jax.lax.Precision: DEFAULT, HIGH, HIGHEST (or their strings). Accepted wherever JAX takes precision=;
    kiln has no reduced-precision matrix units, so every level computes in the operands' full precision."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        return _PRECISION_NAMES.get(value)

    def __repr__(self):
        return f"Precision.{self.name}"

    def __str__(self):
        return self.name


_PRECISION_NAMES = {"default": Precision.DEFAULT, "fastest": Precision.DEFAULT, "bfloat16": Precision.DEFAULT,
                    "high": Precision.HIGH, "bfloat16_3x": Precision.HIGH, "tensorfloat32": Precision.HIGH,
                    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST}


class DotAlgorithm(NamedTuple):
    """jax.lax.DotAlgorithm: the storage and accumulation types of a dot product. Accepted as precision=, and,
    like Precision, without effect: kiln computes in the operands' dtype (preferred_element_type sets the
    result's)."""

    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


DotAlgorithmPreset = enum.Enum("DotAlgorithmPreset", [
    "DEFAULT", "ANY_F8_ANY_F8_F32", "ANY_F8_ANY_F8_F32_FAST_ACCUM", "ANY_F8_ANY_F8_ANY", "ANY_F8_ANY_F8_ANY_FAST_ACCUM",
    "F16_F16_F16", "F16_F16_F32", "BF16_BF16_BF16", "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6",
    "BF16_BF16_F32_X9", "TF32_TF32_F32", "TF32_TF32_F32_X3", "F32_F32_F32", "F64_F64_F64"])
DotAlgorithmPreset.__doc__ = "jax.lax.DotAlgorithmPreset: named dot algorithms, accepted as precision= (no effect)."


# jax.lax's type aliases, for annotations in ported code
PrecisionLike = Precision | str | tuple | DotAlgorithm | DotAlgorithmPreset | None
DotDimensionNumbers = tuple
ConvGeneralDilatedDimensionNumbers = tuple | None


def canonicalize_precision(precision, where: str = "precision"):
    """None, or a (lhs, rhs) pair of Precision from None, a Precision, one of its strings, or a pair of either
    (a DotAlgorithm or DotAlgorithmPreset gives HIGHEST); a ValueError naming `where` otherwise."""
    if precision is None:
        return None
    if isinstance(precision, (DotAlgorithm, DotAlgorithmPreset)):  # storage types kiln does not narrow to
        return Precision.HIGHEST, Precision.HIGHEST
    if isinstance(precision, Precision):
        return precision, precision
    if isinstance(precision, str) and precision in _PRECISION_NAMES:
        return _PRECISION_NAMES[precision], _PRECISION_NAMES[precision]
    if isinstance(precision, (tuple, list)) and len(precision) == 2:
        if all(isinstance(p, (Precision, str)) for p in precision):
            try:
                return tuple(canonicalize_precision(p, where)[0] for p in precision)
            except ValueError:
                pass
    raise ValueError(f"{where}: precision must be None, a kiln.lax.Precision, one of "
                     f"{sorted(_PRECISION_NAMES)}, a pair of them, or a DotAlgorithm(Preset); got {precision!r}")


def _dtype_rank(dtype):
    """XLA's order of dtypes for mixed-dtype dot products (JAX's dot_general dtype rule)."""
    if dtypes.is_float(dtype):
        info = ml_dtypes.finfo(dtype)
        return (info.maxexp, info.nmant, dtype.itemsize * 8, True)
    if dtypes.is_bool(dtype):
        return (-1, -1, 1, True)
    return (-1, -1, dtype.itemsize * 8, dtype.kind == "i")


def dot_operand_dtypes(where: str, lhs_dtype, rhs_dtype, preferred_element_type):
    """(the dtype both operands are converted to, the result's dtype) under JAX's rules: mixed dtypes take the
    one of larger exponent range, then precision, then width (float16 x bfloat16 is bfloat16), preferred_element_type sets the result (integers not narrower). The
    operands are converted to the result dtype when that is wider, so that int8 x int8 -> int32 and bfloat16 ->
    float32 accumulate in the result dtype; a narrower float result is the full-precision product rounded."""
    lhs_dtype, rhs_dtype = np.dtype(lhs_dtype), np.dtype(rhs_dtype)
    common = lhs_dtype if _dtype_rank(lhs_dtype) >= _dtype_rank(rhs_dtype) else rhs_dtype
    if preferred_element_type is None:
        return common, common
    try:
        preferred = dtypes.canonical(preferred_element_type)
    except (TypeError, ValueError, dtypes.DTypeError) as e:
        raise TypeError(f"{where}: preferred_element_type {preferred_element_type!r} is not a kiln dtype ({e})") \
            from None
    if not dtypes.is_float(common) and preferred.itemsize < common.itemsize:
        raise TypeError(f"{where}: preferred_element_type {preferred} must not be narrower than the operands' "
                        f"type {common}")
    if dtypes.is_float(common) and dtypes.is_float(preferred) and preferred.itemsize < common.itemsize:
        return common, preferred
    return preferred, preferred


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """Contraction ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), as in jax.lax.dot_general.

    precision is checked and has no effect (see Precision); preferred_element_type sets the result dtype
    (dot_operand_dtypes)."""
    canonicalize_precision(precision, "dot_general")
    (lc, rc), (lb, rb) = dimension_numbers
    dims = ((_index_tuple(lc), _index_tuple(rc)), (_index_tuple(lb), _index_tuple(rb)))
    lhs, rhs = asarray(lhs), asarray(rhs)
    operand_dtype, out_dtype = dot_operand_dtypes("dot_general", get_aval(lhs).dtype, get_aval(rhs).dtype,
                                                  preferred_element_type)
    out = prims.dot_general.bind(_to_dtype(lhs, operand_dtype), _to_dtype(rhs, operand_dtype),
                                 dimension_numbers=dims)
    return _to_dtype(out, out_dtype)


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None):
    """jax.lax.dot: a vector/matrix product (the last axis of lhs with the first of rhs, both of rank 1 or 2),
    or dot_general where dimension_numbers are given."""
    lhs, rhs = asarray(lhs), asarray(rhs)
    ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
    if dimension_numbers is None:
        if not (1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and ls[-1] == rs[0]):
            raise ValueError("lax.dot: dimension_numbers must be given for anything but an un-batched "
                             f"matrix-matrix, matrix-vector or vector-vector product; got shapes {ls} and {rs}")
        dimension_numbers = (((len(ls) - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)


def _index_tuple(v) -> tuple:
    return (int(v),) if isinstance(v, (int, np.integer)) else tuple(int(i) for i in v)


def _to_dtype(x, dtype):
    return x if get_aval(x).dtype == dtype else prims.convert.bind(x, new_dtype=np.dtype(dtype))


def reduce_sum(operand, axes):
    """lax.reduce_sum. With kiln.config's jax_allow_f16_reductions False, a float16/bfloat16 operand summed over a
    dimension longer than 1 is an error, as JAX's (kiln.numpy's sums accumulate in float32 and bind the primitive
    themselves, as jnp's upcast, unaffected)."""
    from ..config import config

    if not config.jax_allow_f16_reductions:
        a = get_aval(operand)
        if a.dtype in (np.float16, dtypes.BFLOAT16) and not all(a.shape[d] == 1 for d in axes):
            raise ValueError(f"reduce_sum on operand {a.str_short()} is not allowed when "
                             "jax_allow_f16_reductions=False.")
    return prims.reduce_sum.bind(operand, axes=tuple(sorted(axes)))


def reduce_max(operand, axes):
    return prims.reduce_max.bind(operand, axes=tuple(sorted(axes)))


def reduce_min(operand, axes):
    return prims.reduce_min.bind(operand, axes=tuple(sorted(axes)))


def iota(dtype, size: int):
    """[0, 1, ..., size-1] of dtype."""
    return prims.iota.bind(shape=(int(size),), dimension=0, dtype=dtypes.canonical(dtype))


def broadcasted_iota(dtype, shape, dimension: int):
    return prims.iota.bind(shape=tuple(shape), dimension=int(dimension), dtype=dtypes.canonical(dtype))


# --------------------------------------------------------------------------- structural functions
# The public forms of kiln.lax.structural_prims, with jax.lax's signatures where kiln has the same
# operation (dynamic_slice, dynamic_update_slice, slice, pad, rev, concatenate, sort, cumsum, ...)
# and a documented simplified form where it does not (gather, scatter).

def _is_tracer(x) -> bool:
    return isinstance(x, Tracer)


def _start_indices(fn: str, shape, start_indices):
    """One scalar integer start per dimension; negative starts count from the end (as in JAX: i + dim when
    i < 0); the primitive then clamps them so the slice fits. Narrow ints are widened to int32 first."""
    nd = len(shape)
    if (_is_tracer(start_indices) or isinstance(start_indices, np.ndarray)) and get_aval(start_indices).ndim == 1:
        starts = [start_indices[k] for k in range(get_aval(start_indices).shape[0])]
    elif isinstance(start_indices, (tuple, list)):
        starts = list(start_indices)
    else:
        raise TypeError(f"{fn}: start_indices must be a sequence of scalar integers or a 1-D integer array, "
                        f"got {type(start_indices).__name__}")
    if len(starts) != nd:
        raise TypeError(f"{fn}: got {len(starts)} start indices for an operand of shape {tuple(shape)}; "
                        f"give one per dimension ({nd})")
    out = []
    for k, (s, d) in enumerate(zip(starts, shape)):
        if _is_tracer(s):
            a = s.aval
            if a.shape != () or not dtypes.is_int(a.dtype):
                raise TypeError(f"{fn}: start index {k} must be an integer scalar, got {a}")
            if a.dtype.itemsize < 4:
                s = prims.convert.bind(s, new_dtype=np.dtype(np.int32))
            dt = get_aval(s).dtype
            if dt.kind == "i":
                zero = np.zeros((), dt)
                s = prims.select.bind(prims.lt.bind(s, zero), prims.add.bind(s, np.asarray(d, dt)), s)
            out.append(s)
            continue
        v = np.asarray(s)
        if v.shape != () or v.dtype.kind not in "iu":
            raise TypeError(f"{fn}: start index {k} must be an integer scalar, got {s!r}")
        v = int(v)
        if v < 0:
            v += d
        out.append(np.int64(v) if not -2**31 <= v < 2**31 else np.int32(v))
    return out


def dynamic_slice(operand, start_indices, slice_sizes):
    """jax.lax.dynamic_slice: operand[s0:s0+z0, s1:s1+z1, ...] for start indices known only at run time.

    start_indices: one integer scalar per dimension (Python ints, numpy or traced scalars) or a 1-D integer
    array. Negative starts count from the end (i + dim), and every start is then clamped to
    [0, dim - size] so that the slice lies inside the operand, as in JAX. slice_sizes are static ints.
    """
    x = asarray(operand)
    shape = get_aval(x).shape
    sizes = tuple(int(z) for z in slice_sizes)
    if len(sizes) != len(shape):
        raise TypeError(f"dynamic_slice: got {len(sizes)} slice sizes for an operand of shape {shape}; give one per dimension")
    for k, (z, d) in enumerate(zip(sizes, shape)):
        if not 0 <= z <= d:
            raise TypeError(f"dynamic_slice: slice size {z} of dimension {k} does not fit in an operand of shape {shape}")
    starts = _start_indices("dynamic_slice", shape, start_indices)
    return structural_prims.dynamic_slice_p.bind(x, *starts, slice_sizes=sizes)


def dynamic_update_slice(operand, update, start_indices):
    """jax.lax.dynamic_update_slice: operand with update written at start_indices (known at run time).

    update has operand's dtype and rank and fits inside it; start_indices as in dynamic_slice (negative
    starts count from the end, then clamped so that the whole update lands inside the operand).
    """
    x, u = asarray(operand), asarray(update)
    xa, ua = get_aval(x), get_aval(u)
    if ua.dtype != xa.dtype:
        raise TypeError(f"dynamic_update_slice: update dtype {ua.dtype} differs from operand dtype {xa.dtype}; "
                        f"convert it first (update.astype({xa.dtype}))")
    if ua.ndim != xa.ndim or any(a > b for a, b in zip(ua.shape, xa.shape)):
        raise TypeError(f"dynamic_update_slice: update of shape {ua.shape} does not fit in an operand of shape {xa.shape}")
    starts = _start_indices("dynamic_update_slice", xa.shape, start_indices)
    return structural_prims.dynamic_update_slice_p.bind(x, u, *starts)


def _axis(fn, axis, nd):
    axis = int(axis)
    if not -nd <= axis < nd:
        raise TypeError(f"{fn}: axis {axis} is out of range for an operand of rank {nd}")
    return axis % nd


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0):
    """jax.lax.dynamic_slice_in_dim: dynamic_slice along one axis (operand[..., i:i+size, ...])."""
    shape = get_aval(operand).shape
    axis = _axis("dynamic_slice_in_dim", axis, len(shape))
    starts = [0] * len(shape)
    starts[axis] = start_index
    sizes = list(shape)
    sizes[axis] = slice_size
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True):
    """jax.lax.dynamic_index_in_dim: the element `index` along axis (kept as a size-1 axis if keepdims)."""
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    if keepdims:
        return out
    shape = get_aval(out).shape
    axis = _axis("dynamic_index_in_dim", axis, len(shape))
    return prims.reshape.bind(out, new_shape=shape[:axis] + shape[axis + 1:])


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    """jax.lax.dynamic_update_slice_in_dim: dynamic_update_slice along one axis."""
    nd = get_aval(operand).ndim
    axis = _axis("dynamic_update_slice_in_dim", axis, nd)
    starts = [0] * nd
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts)


class GatherScatterMode(str, enum.Enum):
    """jax.lax.GatherScatterMode; each member equals its string, so gather and scatter take either
    (ONE_HOT is not supported)."""

    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"
    ONE_HOT = "one_hot"

    @classmethod
    def from_any(cls, s):
        """A member from a member, its string, or None (FILL_OR_DROP, JAX's default)."""
        if s is None:
            return cls.FILL_OR_DROP
        return s if isinstance(s, cls) else cls(s)


_GATHER_MODES = {"clip": "clip", "promise_in_bounds": "clip", "fill": "fill", None: "fill"}
_SCATTER_MODES = {"clip": "clip", "promise_in_bounds": "clip", "drop": "drop", "fill": "drop", None: "drop"}


def _index_array(fn, indices, axes, operand_aval):
    idx = asarray(indices)
    ia = get_aval(idx)
    if not dtypes.is_int(ia.dtype):
        raise TypeError(f"{fn}: indices must be integers, got {ia}")
    axes = tuple(int(a) for a in axes)
    if any(not -operand_aval.ndim <= a < operand_aval.ndim for a in axes):
        raise TypeError(f"{fn}: axes {axes} out of range for an operand of shape {operand_aval.shape}")
    axes = tuple(a % operand_aval.ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise TypeError(f"{fn}: repeated axis in {axes}")
    if ia.ndim < 1 or ia.shape[-1] != len(axes):
        raise TypeError(f"{fn}: indices of shape {ia.shape} must end in an axis of size {len(axes)} "
                        f"(one index per axis in {axes})")
    return idx, axes


class GatherDimensionNumbers(NamedTuple):
    """jax.lax.GatherDimensionNumbers. kiln.lax.gather takes them (with slice_sizes) where they describe kiln's
    whole-slice gather (_whole_slice_axes); other gathers raise NotImplementedError."""

    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """jax.lax.ScatterDimensionNumbers, taken by kiln.lax.scatter and its variants where they describe kiln's
    whole-slice scatter (_whole_slice_axes)."""

    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


def _whole_slice_axes(fn: str, window_dims, collapsed, index_map, batching, operand_shape, indices, slice_sizes):
    """The axes of kiln's gather/scatter form for JAX dimension numbers that describe it: the indices' last axis
    indexes the operand axes index_map, those axes are collapsed (slice size 1), every other axis is taken
    whole, and the window (offset) dimensions come after the index batch dimensions, in order."""
    operand_shape = tuple(operand_shape)
    index_map = tuple(int(a) for a in index_map)
    batch_rank = get_aval(asarray(indices)).ndim - 1
    rest = [d for i, d in enumerate(operand_shape) if i not in index_map]
    expected = tuple(1 if i in index_map else d for i, d in enumerate(operand_shape))
    if tuple(batching[0]) or tuple(batching[1]):
        raise NotImplementedError(f"{fn}: batching dimensions are not supported (vmap the whole-slice form)")
    if sorted(int(a) for a in collapsed) != sorted(index_map) or (
            slice_sizes is not None and tuple(int(s) for s in slice_sizes) != expected) or (
            tuple(int(d) for d in window_dims) != tuple(range(batch_rank, batch_rank + len(rest)))):
        raise NotImplementedError(
            f"{fn}: kiln takes dimension numbers that pick whole slices: the indexed axes {index_map} collapsed "
            f"(slice size 1), every other axis whole (slice_sizes {expected}), the window dimensions last "
            f"{tuple(range(batch_rank, batch_rank + len(rest)))}; got {window_dims}, {collapsed}, slice_sizes "
            f"{slice_sizes} (see gather's docstring for the (indices, axes) form)")
    return index_map


def gather(operand, indices, axes, slice_sizes=None, *, unique_indices=False, indices_are_sorted=False, mode=None,
           fill_value=None):
    """Gather whole slices of `operand` at integer positions (kiln's simplified form of jax.lax.gather).

    indices has shape (*batch, len(axes)): indices[..., k] is a position along operand axis axes[k]. The
    result has shape batch + (the operand's dimensions not in axes, in order), so that
        gather(x, idx, axes)[b] == moveaxis(x, axes, range(len(axes)))[tuple(idx[b])]
    e.g. gather(x, i[:, None], (0,)) == x[i] (rows) and gather(x, ij, (0, 1)) == x[ij[:, 0], ij[:, 1]].

    mode: "fill" (the default, as in JAX) reads fill_value (default 0) for an index row with any
    out-of-range entry; "clip" (or "promise_in_bounds") clamps every index into range. Negative indices are
    out of range (they do not wrap; kiln.numpy indexing wraps them before calling this).
    JAX's call, gather(operand, indices, GatherDimensionNumbers(...), slice_sizes), is taken where the dimension
    numbers describe this whole-slice form (_whole_slice_axes); unique_indices and indices_are_sorted are hints.
    """
    x = asarray(operand)
    xa = get_aval(x)
    if isinstance(axes, GatherDimensionNumbers):
        axes = _whole_slice_axes("gather", axes.offset_dims, axes.collapsed_slice_dims, axes.start_index_map,
                                 (axes.operand_batching_dims, axes.start_indices_batching_dims), xa.shape, indices,
                                 slice_sizes)
    elif slice_sizes is not None:
        raise TypeError("gather: slice_sizes goes with JAX's GatherDimensionNumbers; kiln's (indices, axes) form "
                        "takes whole slices")
    if mode not in _GATHER_MODES:
        raise ValueError(f"gather: mode must be 'fill', 'clip' or 'promise_in_bounds', got {mode!r}")
    idx, axes = _index_array("gather", indices, axes, xa)
    m = _GATHER_MODES[mode]
    out = structural_prims.gather_p.bind(x, idx, axes=axes, mode=m)
    if m == "clip" or fill_value is None or np.asarray(fill_value) == 0:
        return out
    valid = _rows_in_range(idx, axes, xa.shape)
    oa = get_aval(out)
    valid = prims.broadcast_in_dim.bind(valid, shape=oa.shape, broadcast_dimensions=tuple(range(get_aval(valid).ndim)))
    fill = prims.broadcast_in_dim.bind(np.asarray(fill_value).astype(oa.dtype), shape=oa.shape, broadcast_dimensions=())
    return prims.select.bind(valid, out, fill)


def _rows_in_range(idx, axes, shape):
    """bool (*batch,): every index of the row is in [0, size of its axis)."""
    ia = get_aval(idx)
    dt = ia.dtype
    lo = prims.ge.bind(idx, prims.broadcast_in_dim.bind(np.zeros((), dt), shape=ia.shape, broadcast_dimensions=()))
    sizes = np.array([shape[a] for a in axes]).astype(dt)
    hi = prims.lt.bind(idx, prims.broadcast_in_dim.bind(sizes, shape=ia.shape, broadcast_dimensions=(ia.ndim - 1,)))
    ok = prims.convert.bind(_and(lo, hi), new_dtype=np.dtype(np.int32))
    return prims.eq.bind(prims.reduce_min.bind(ok, axes=(ia.ndim - 1,)),
                         prims.broadcast_in_dim.bind(np.int32(1), shape=ia.shape[:-1], broadcast_dimensions=()))


def _and(p, q):
    return P["and"].bind(p, q)


_SCATTER_UPDATES = ("set", "add", "mul", "min", "max")


def _scatter_axes(fn, axes, operand_shape, indices):
    """axes, or the axes of ScatterDimensionNumbers that describe kiln's whole-slice scatter."""
    if not isinstance(axes, ScatterDimensionNumbers):
        return axes
    return _whole_slice_axes(fn, axes.update_window_dims, axes.inserted_window_dims, axes.scatter_dims_to_operand_dims,
                             (axes.operand_batching_dims, axes.scatter_indices_batching_dims), operand_shape, indices,
                             None)


def scatter(operand, indices, updates, axes, *, update="set", mode=None, indices_are_sorted=False,
            unique_indices=False):
    """Scatter `updates` into whole slices of `operand` (kiln's simplified form of jax.lax.scatter).

    indices as in gather: shape (*batch, len(axes)), one position per axis in axes; updates has the shape
    gather would return, batch + (the operand's dimensions not in axes), and the operand's dtype.
    update: "set" (the last of duplicate indices wins), "add", "mul", "min" or "max" (duplicates combine).
    mode: "drop" (the default, as in JAX; also "fill") skips updates whose index row is out of range;
    "clip" (or "promise_in_bounds") clamps the indices into range. Returns a new array. axes may be JAX's
    ScatterDimensionNumbers where they describe this whole-slice form (_whole_slice_axes); indices_are_sorted
    and unique_indices are hints.
    """
    x, u = asarray(operand), asarray(updates)
    xa, ua = get_aval(x), get_aval(u)
    axes = _scatter_axes("scatter", axes, xa.shape, indices)
    if mode not in _SCATTER_MODES:
        raise ValueError(f"scatter: mode must be 'drop', 'clip' or 'promise_in_bounds', got {mode!r}")
    if update not in _SCATTER_UPDATES:
        raise ValueError(f"scatter: update must be one of {_SCATTER_UPDATES}, got {update!r}")
    idx, axes = _index_array("scatter", indices, axes, xa)
    want = get_aval(idx).shape[:-1] + tuple(d for i, d in enumerate(xa.shape) if i not in axes)
    if ua.shape != want:
        raise TypeError(f"scatter: updates must have shape {want} (index batch + the operand's other dimensions), "
                        f"got {ua.shape}")
    if ua.dtype != xa.dtype:
        raise TypeError(f"scatter: updates dtype {ua.dtype} differs from operand dtype {xa.dtype}; "
                        f"convert it first (updates.astype({xa.dtype}))")
    return structural_prims.scatter_p.bind(x, idx, u, axes=axes, update=update, mode=_SCATTER_MODES[mode])


def scatter_add(operand, indices, updates, axes, *, mode=None, indices_are_sorted=False, unique_indices=False):
    """scatter with update="add" (duplicate indices accumulate)."""
    return scatter(operand, indices, updates, axes, update="add", mode=mode)


def scatter_mul(operand, indices, updates, axes, *, mode=None, indices_are_sorted=False, unique_indices=False):
    """scatter with update="mul"."""
    return scatter(operand, indices, updates, axes, update="mul", mode=mode)


def scatter_min(operand, indices, updates, axes, *, mode=None, indices_are_sorted=False, unique_indices=False):
    """scatter with update="min"."""
    return scatter(operand, indices, updates, axes, update="min", mode=mode)


def scatter_max(operand, indices, updates, axes, *, mode=None, indices_are_sorted=False, unique_indices=False):
    """scatter with update="max"."""
    return scatter(operand, indices, updates, axes, update="max", mode=mode)


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """jax.lax.sort: one array, or a sequence sorted together lexicographically by the first num_keys
    (NaN last). is_stable=True (the default) keeps ties in their original order."""
    single = not isinstance(operand, (tuple, list))
    xs = [asarray(operand)] if single else [asarray(o) for o in operand]
    nd = get_aval(xs[0]).ndim
    if nd == 0:
        raise TypeError("sort: the operand must have at least one dimension")
    dim = _axis("sort", dimension, nd)
    if not 1 <= num_keys <= len(xs):
        raise TypeError(f"sort: num_keys must be between 1 and the number of operands ({len(xs)}), got {num_keys}")
    if is_stable:
        iota = prims.iota.bind(shape=get_aval(xs[0]).shape, dimension=dim, dtype=np.dtype(np.int32))
        outs = structural_prims.sort_p.bind(*xs[:num_keys], iota, *xs[num_keys:], dimension=dim, num_keys=num_keys + 1)
        outs = outs[:num_keys] + outs[num_keys + 1:]
    else:
        outs = structural_prims.sort_p.bind(*xs, dimension=dim, num_keys=num_keys)
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """jax.lax.sort_key_val: (sorted keys, values permuted the same way)."""
    return sort((keys, values), dimension, is_stable, 1)


def _cumulative(name):
    def fn(operand, axis=0, reverse=False):
        x = asarray(operand)
        return getattr(structural_prims, f"{name}_p").bind(x, axis=_axis(name, axis, get_aval(x).ndim), reverse=bool(reverse))

    fn.__name__ = fn.__qualname__ = name  # Python names it in call errors
    fn.__doc__ = f"jax.lax.{name}: the running {name[3:]} along axis (from the end if reverse), same shape and dtype."
    return fn


cumsum, cumprod, cummax, cummin = (_cumulative(n) for n in ("cumsum", "cumprod", "cummax", "cummin"))


def argmax(operand, axis, index_dtype):
    """jax.lax.argmax: the index of the first maximum along axis (NaN counts as the maximum, as in numpy)."""
    x = asarray(operand)
    return structural_prims.argmax_p.bind(x, axis=_axis("argmax", axis, get_aval(x).ndim), index_dtype=dtypes.canonical(index_dtype))


def argmin(operand, axis, index_dtype):
    """jax.lax.argmin: the index of the first minimum along axis (NaN counts as the minimum, as in numpy)."""
    x = asarray(operand)
    return structural_prims.argmin_p.bind(x, axis=_axis("argmin", axis, get_aval(x).ndim), index_dtype=dtypes.canonical(index_dtype))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding, base_dilation=None,
                              window_dilation=None) -> tuple[int, ...]:
    """The output shape of reduce_window: padding is (low, high) pairs, dilations default to 1s."""
    from .pooling import window_out_shape

    ones = (1,) * len(operand_shape)
    return window_out_shape(tuple(int(d) for d in operand_shape), window_dimensions, window_strides,
                            [tuple(int(v) for v in p) for p in padding],
                            ones if base_dilation is None else base_dilation,
                            ones if window_dilation is None else window_dilation)
