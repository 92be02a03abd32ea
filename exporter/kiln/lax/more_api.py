"""More of jax.lax: cbrt, nextafter, dtype, scatter_sub, scatter_apply, reduce_xor, mulhi (integer high halves),
index_take, ragged_dot(_general) and conv_general_dilated_local; and the float64 exponent arithmetic (frexp64,
times_power_of_two) that nextafter and kiln.numpy's frexp, ldexp and nextafter share."""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from ..core import dtypes
from ..core.trace import get_aval
from . import prims
from .accuracy import check_accuracy
from .api import _index_array, _operands, _scatter_axes, broadcasted_iota, cumsum, dot_general, gather, scatter, scatter_add, transpose
from .conv import conv_dimension_numbers, conv_general_dilated_patches
from .elementwise import bitwise_and, shift_right_logical
from .math_prims import P
from .operands import asarray
from .reduce_api import reduce
from .structural_prims import concatenate

__all__ = ["cbrt", "nextafter", "dtype", "scatter_sub", "reduce_xor", "mulhi", "index_take", "ragged_dot",
           "conv_general_dilated_local", "scatter_apply", "RaggedDotDimensionNumbers", "ragged_dot_general"]


def _full(x, value):
    return np.full(get_aval(x).shape, value, get_aval(x).dtype)


def cbrt(x, *, accuracy=None):
    """The real cube root (negative for negative x, -0.0 for -0.0), exp(log|x| / 3) refined by a Newton step;
    kiln.numpy.cbrt is this function on promoted operands (accuracy=: lax/accuracy.py)."""
    check_accuracy("cbrt", accuracy)
    (a,) = _operands(x)
    if not dtypes.is_float(get_aval(a).dtype):
        raise TypeError(f"cbrt: x must be floating-point; got {get_aval(a).dtype}")
    magnitude = prims.abs.bind(a)
    finite = P["and"].bind(prims.lt.bind(magnitude, _full(a, np.inf)), prims.gt.bind(magnitude, _full(a, 0.0)))
    safe = prims.select.bind(finite, magnitude, _full(a, 1.0))
    y = prims.exp.bind(prims.div.bind(prims.log.bind(safe), _full(a, 3.0)))
    y = prims.sub.bind(y, prims.div.bind(prims.sub.bind(y, prims.div.bind(safe, prims.mul.bind(y, y))), _full(a, 3.0)))
    y = prims.select.bind(finite, y, magnitude)
    negative_zero = P["and"].bind(prims.eq.bind(a, _full(a, 0.0)),
                                  prims.lt.bind(prims.div.bind(_full(a, 1.0), a), _full(a, 0.0)))
    negative = P["or"].bind(prims.lt.bind(a, _full(a, 0.0)), negative_zero)
    return prims.select.bind(negative, prims.neg.bind(y), y)


def times_power_of_two(wide, n):
    """float64 `wide` * 2**n (int64 n) exactly, the power built by exp2 of two halves of n so neither overflows."""
    half = P["shift_right"].bind(n, np.full(get_aval(n).shape, 1, get_aval(n).dtype))
    rest = _as(prims.sub.bind(n, half), np.dtype(np.float64))
    return prims.mul.bind(prims.mul.bind(wide, P["exp2"].bind(_as(half, np.dtype(np.float64)))), P["exp2"].bind(rest))


def frexp64(wide):
    """(mantissa, exponent int64, regular) of float64 `wide`: wide = mantissa 2**exponent, 0.5 <= |mantissa| < 1,
    where regular (finite and nonzero); elsewhere the mantissa is wide and the exponent meaningless."""
    magnitude = prims.abs.bind(wide)
    regular = P["and"].bind(prims.lt.bind(magnitude, _full(wide, np.inf)), prims.gt.bind(magnitude, _full(wide, 0.0)))
    safe = prims.select.bind(regular, magnitude, _full(wide, 1.0))
    exponent = _as(prims.add.bind(P["floor"].bind(P["log2"].bind(safe)), _full(wide, 1.0)), np.dtype(np.int64))
    one = _full(exponent, 1)
    for _ in range(2):  # log2 may be off by one next to a power of two
        scaled = times_power_of_two(safe, prims.neg.bind(exponent))
        exponent = prims.select.bind(prims.ge.bind(scaled, _full(wide, 1.0)), prims.add.bind(exponent, one), exponent)
        exponent = prims.select.bind(prims.lt.bind(scaled, _full(wide, 0.5)), prims.sub.bind(exponent, one), exponent)
    mantissa = prims.select.bind(regular, times_power_of_two(wide, prims.neg.bind(exponent)), wide)
    return mantissa, exponent, regular


def nextafter(x1, x2):
    """The next float after x1 toward x2 in their dtype (floating point, one dtype), built from x1's exponent
    and the dtype's mantissa width; subnormals included, as numpy's; kiln.numpy.nextafter calls it."""
    a, b = _operands(x1, x2)
    d = get_aval(a).dtype
    if not dtypes.is_float(d) or get_aval(b).dtype != d:
        raise TypeError(f"nextafter: operands must be floating-point of one dtype; got {d} and {get_aval(b).dtype}")
    info = ml_dtypes.finfo(d)
    wide = _as(a, np.dtype(np.float64))
    mantissa, exponent, _ = frexp64(prims.abs.bind(wide))
    away = times_power_of_two(_full(wide, 1.0), prims.sub.bind(exponent, _full(exponent, int(info.nmant) + 1)))
    toward = prims.select.bind(prims.eq.bind(mantissa, _full(mantissa, 0.5)), prims.mul.bind(away, _full(away, 0.5)),
                               away)
    tiny = float(2.0 ** (int(info.minexp) - int(info.nmant)))
    away, toward = prims.max.bind(away, _full(away, tiny)), prims.max.bind(toward, _full(toward, tiny))
    outward = prims.eq.bind(prims.gt.bind(b, a), prims.gt.bind(a, _full(a, 0.0)))
    step = _as(prims.select.bind(outward, away, toward), d)
    up = prims.gt.bind(b, a)
    moved = prims.select.bind(up, prims.add.bind(a, step), prims.sub.bind(a, step))
    out = prims.select.bind(prims.eq.bind(a, _full(a, 0.0)), prims.select.bind(up, _full(a, tiny), _full(a, -tiny)),
                            moved)
    largest = float(info.max)
    infinite = prims.eq.bind(prims.abs.bind(a), _full(a, np.inf))
    out = prims.select.bind(infinite, prims.select.bind(prims.gt.bind(a, _full(a, 0.0)), _full(a, largest),
                                                        _full(a, -largest)), out)
    out = prims.select.bind(prims.eq.bind(a, b), b, out)
    nan = P["or"].bind(prims.ne.bind(a, a), prims.ne.bind(b, b))
    return prims.select.bind(nan, prims.add.bind(a, b), out)


def dtype(x):
    """The dtype of x: an array's, a dtype-like's (np.dtype(x)), a Python number's weak one (float32, int32,
    bool: kiln's default types, as JAX's without x64)."""
    if dtypes.is_python_scalar(x):
        return dtypes.python_scalar_dtype(x)
    if isinstance(x, (str, type, np.dtype)):
        return dtypes.canonical(np.dtype(x))
    return get_aval(asarray(x)).dtype


def scatter_sub(operand, indices, updates, axes, *, mode=None, indices_are_sorted=False, unique_indices=False):
    """operand with updates subtracted at the indexed slices (kiln's scatter form, as scatter_add)."""
    return scatter_add(operand, indices, prims.neg.bind(asarray(updates)), axes, mode=mode)


def scatter_apply(operand, indices, func, axes, *, update_shape=(), mode=None, indices_are_sorted=False,
                  unique_indices=False):
    """operand with the elementwise function func applied once at each indexed slice (duplicate indices
    included once), in kiln's scatter form (indices, axes, or ScatterDimensionNumbers that describe it) as
    scatter_add: func(operand) where a scattered mask is set, operand elsewhere."""
    x = asarray(operand)
    shape = get_aval(x).shape
    axes = _scatter_axes("scatter_apply", axes, shape, indices)
    idx, axes_ = _index_array("scatter_apply", indices, axes, get_aval(x))
    hit_shape = get_aval(idx).shape[:-1] + tuple(d for i, d in enumerate(shape) if i not in axes_)
    mask = scatter(np.zeros(shape, np.bool_), idx, np.ones(hit_shape, np.bool_), axes_, mode=mode)
    applied = asarray(func(x))
    if get_aval(applied).shape != shape or get_aval(applied).dtype != get_aval(x).dtype:
        got = get_aval(applied)
        raise TypeError(f"scatter_apply: func must keep the operand's shape and dtype {get_aval(x).dtype}"
                        f"{list(shape)}; got {got.dtype}{list(got.shape)}")
    return prims.select.bind(mask, applied, x)


def reduce_xor(operand, axes):
    """The exclusive or over `axes`: bool operands (odd counts of True) or integers (bitwise)."""
    x = asarray(operand)
    d = get_aval(x).dtype
    if not (d == np.bool_ or dtypes.is_int(d)):
        raise TypeError(f"reduce_xor: operand must be bool or integer; got {d}")
    return reduce(x, np.asarray(0, d), lambda a, b: P["xor"].bind(a, b), axes)


def _as(x, d):
    return x if get_aval(x).dtype == d else prims.convert.bind(x, new_dtype=np.dtype(d))


def mulhi(x, y, /):
    """The high half of the double-width product x * y of two integer arrays of one dtype (signed: of the
    signed product), as jax.lax.mulhi."""
    x, y = _operands(x, y)
    d = get_aval(x).dtype
    if not dtypes.is_int(d) or get_aval(y).dtype != d:
        raise TypeError(f"mulhi: operands must be integers of one dtype; got {d} and {get_aval(y).dtype}")
    bits = d.itemsize * 8
    if bits < 64:
        wide = np.dtype(np.int64 if d.kind == "i" else np.uint64)
        product = prims.mul.bind(_as(x, wide), _as(y, wide))
        return _as(P["shift_right"].bind(product, np.full(get_aval(product).shape, bits, wide)), d)
    u = np.dtype(np.uint64)
    a, b = _as(x, u), _as(y, u)
    low_mask = np.full(get_aval(a).shape, 0xFFFFFFFF, u)

    def halves(v):
        return bitwise_and(v, low_mask), shift_right_logical(v, np.uint64(32))

    (a_lo, a_hi), (b_lo, b_hi) = halves(a), halves(b)
    lo_lo, hi_lo = prims.mul.bind(a_lo, b_lo), prims.mul.bind(a_hi, b_lo)
    lo_hi, hi_hi = prims.mul.bind(a_lo, b_hi), prims.mul.bind(a_hi, b_hi)
    def upper(v):
        return shift_right_logical(v, np.uint64(32))

    cross = prims.add.bind(prims.add.bind(upper(lo_lo), bitwise_and(hi_lo, low_mask)), lo_hi)
    high = prims.add.bind(prims.add.bind(upper(hi_lo), upper(cross)), hi_hi)
    if d.kind == "i":  # signed: subtract b where a < 0 and a where b < 0 (mod 2^64)
        zero = np.zeros(get_aval(x).shape, d)
        high = prims.sub.bind(high, _as(prims.select.bind(prims.lt.bind(x, zero), y, zero), u))
        high = prims.sub.bind(high, _as(prims.select.bind(prims.lt.bind(y, zero), x, zero), u))
    return _as(high, d)




def index_take(src, idxs, axes):
    """src at the positions idxs (one 1-D integer array per axis in axes, all of one length n): shape
    (n, *src's other axes in order); indices wrap modulo the axis length, as JAX's."""
    x = asarray(src)
    shape = get_aval(x).shape
    axes = tuple(int(a) % len(shape) for a in axes)
    idxs = [asarray(i) for i in idxs]
    if len(idxs) != len(axes) or any(get_aval(i).ndim != 1 for i in idxs):
        raise TypeError(f"index_take: needs one 1-D index array per axis; got {len(idxs)} for axes {axes}")
    columns = []
    for i, axis in zip(idxs, axes):
        i = _as(i, np.dtype(np.int32)) if get_aval(i).dtype.itemsize < 4 else i
        size = np.full(get_aval(i).shape, shape[axis], get_aval(i).dtype)
        wrapped = P["rem"].bind(prims.add.bind(P["rem"].bind(i, size), size), size)
        columns.append(prims.reshape.bind(wrapped, new_shape=(get_aval(i).shape[0], 1)))
    dtype = np.result_type(*(get_aval(c).dtype for c in columns))
    index = concatenate([_as(c, dtype) for c in columns], 1)
    return gather(x, index, axes, mode="clip")


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """jax.lax.RaggedDotDimensionNumbers: the contraction, lhs's ragged dimensions and rhs's group dimensions."""

    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple

    def __post_init__(self):
        (lc, rc), (lb, rb) = self.dot_dimension_numbers
        canonical = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
        object.__setattr__(self, "dot_dimension_numbers", canonical)
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(self.lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(self.rhs_group_dimensions))


_RAGGED_DOT = RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))  # ragged_dot's (m, k) x (g, k, n)


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None):
    """jax.lax.ragged_dot_general for the dimension numbers of ragged_dot (lhs (m, k) ragged along m, rhs
    (g, k, n) grouped along g): ragged_dot. Other forms raise NotImplementedError."""
    if RaggedDotDimensionNumbers(*dataclasses.astuple(ragged_dot_dimension_numbers)) != _RAGGED_DOT:
        raise NotImplementedError(f"ragged_dot_general: only ragged_dot's dimension numbers {_RAGGED_DOT} are "
                                  f"supported; got {ragged_dot_dimension_numbers}")
    return ragged_dot(lhs, rhs, group_sizes, precision, preferred_element_type, group_offset)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None, group_offset=None):
    """lhs (m, k) times one of the g matrices of rhs (g, k, n) per row: the rows come in consecutive groups of
    group_sizes[i] rows (int32, g of them), each multiplied by rhs[i]; rows past the groups give 0. Every group's
    product is computed and the rows select theirs (g times the work of one matmul)."""
    if group_offset is not None:
        raise NotImplementedError("ragged_dot: group_offset is not supported (as in JAX outside its TPU kernels)")
    lhs, rhs, sizes = asarray(lhs), asarray(rhs), asarray(group_sizes)
    (m, k), (g, k2, n) = get_aval(lhs).shape, get_aval(rhs).shape
    if k != k2 or get_aval(sizes).shape != (g,) or not dtypes.is_int(get_aval(sizes).dtype):
        sizes_aval = get_aval(sizes)
        raise TypeError(f"ragged_dot: expected lhs (m, k), rhs (g, k, n) and integer group_sizes (g,); got "
                        f"{get_aval(lhs).shape}, {get_aval(rhs).shape} and {sizes_aval.dtype}{list(sizes_aval.shape)}")
    products = dot_general(lhs, rhs, (((1,), (1,)), ((), ())), precision, preferred_element_type)  # (m, g, n)
    ends = _as(cumsum(sizes), np.dtype(np.int32))
    starts = prims.sub.bind(ends, _as(sizes, np.dtype(np.int32)))
    grid = (m, g)
    rows = broadcasted_iota(np.int32, grid, 0)

    def per_group(v):
        return prims.broadcast_in_dim.bind(v, shape=grid, broadcast_dimensions=(1,))

    in_group = P["and"].bind(prims.ge.bind(rows, per_group(starts)), prims.lt.bind(rows, per_group(ends)))
    mask = prims.broadcast_in_dim.bind(in_group, shape=(m, g, n), broadcast_dimensions=(0, 1))
    out_dtype = get_aval(products).dtype
    selected = prims.select.bind(mask, products, np.zeros((m, g, n), out_dtype))
    return prims.reduce_sum.bind(selected, axes=(1,))


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape, lhs_dilation=None, rhs_dilation=None,
                               dimension_numbers=None, precision=None):
    """A locally connected layer (jax.lax.conv_general_dilated_local): a convolution with its own kernel at each
    output position. rhs has the output's spatial axes where a kernel has its window's, and the window and input
    channels fused into its I axis (channel-major, then the window positions in rhs_spec's order). As JAX: the
    patches (conv_general_dilated_patches) contracted with rhs, one dot_general batched over the positions."""
    lhs = asarray(lhs)
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
                                           dimension_numbers, precision)
    _, rhs_spec, out_spec = conv_dimension_numbers(get_aval(lhs).shape, (1, 1) + tuple(filter_shape),
                                                   dimension_numbers)
    lhs_batch, rhs_batch = list(out_spec[2:]), list(rhs_spec[2:])
    rhs_batch = [rhs_batch[i] for i in sorted(range(len(rhs_batch)), key=lambda k: lhs_batch[k])]
    out = dot_general(patches, rhs, (([out_spec[1]], [rhs_spec[1]]), (sorted(lhs_batch), rhs_batch)), precision)
    ndim = get_aval(out).ndim  # (positions..., N, O): N and O go to out_spec's places, as numpy's moveaxis
    order = list(range(ndim - 2))
    for destination, source in sorted(zip((out_spec[0], out_spec[1]), (ndim - 2, ndim - 1))):
        order.insert(destination, source)
    return transpose(out, tuple(order))
