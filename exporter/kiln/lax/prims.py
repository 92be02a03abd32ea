"""The array primitives (kiln's lax level): strict shapes and dtypes, no implicit broadcasting.

kiln.numpy builds numpy semantics (promotion, broadcasting) on top of these.
Each primitive registers its eager numpy implementation and abstract
evaluation here; transformations and the compiler attach their rules elsewhere.
"""
from __future__ import annotations

import numpy as np

from ..core import ad_util, dtypes
from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from ..core.trace import current_graph_trace


class ShapeError(TypeError):
    """Operands whose shapes or dtypes a primitive cannot accept."""


def _same_operands(name, *avals):
    first = avals[0]
    for a in avals[1:]:
        if a.shape != first.shape or a.dtype != first.dtype:
            raise ShapeError(f"{name}: operands must match; got {', '.join(str(x) for x in avals)}")
    return first


def _elementwise(name: str, numpy_fn, arity: int, *, result_dtype=None, accepts=None) -> Primitive:
    """Registers an elementwise primitive over same-shape, same-dtype operands."""
    prim = register(Primitive(name))
    prim.elementwise = True

    def abstract_eval(*avals):
        base = _same_operands(name, *avals)
        if accepts is not None and not accepts(base.dtype):
            raise ShapeError(f"{name} does not accept dtype {base.dtype}")
        dtype = result_dtype if result_dtype is not None else base.dtype
        weak = all(a.weak_type for a in avals) and result_dtype is None
        return ShapedArray(base.shape, dtype, weak)

    def impl(*values):
        dtype = result_dtype if result_dtype is not None else np.asarray(values[0]).dtype
        with np.errstate(all="ignore"):
            return np.asarray(numpy_fn(*values)).astype(dtype, copy=False)

    assert arity in (1, 2, 3)
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(impl)
    return prim


def _not_bool(d):
    return not dtypes.is_bool(d)


def _is_float(d):
    return dtypes.is_float(d)


def _int_div(a, b):
    """Division; for integers C's truncation toward zero, x/0 = 0 and INT_MIN/-1 wrapping, as compiled."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iu":
        with np.errstate(all="ignore"):
            b_safe = np.where(b == 0, 1, b).astype(b.dtype)
            q = a // b_safe  # floor, without the overflow of |INT_MIN|
            r = a - q * b_safe
            q = q + ((r != 0) & ((a < 0) != (b_safe < 0))).astype(q.dtype)
        return np.where(b == 0, 0, q).astype(a.dtype)
    return np.divide(a, b)


def _pow(a, b):
    if np.asarray(a).dtype.kind in "iu":
        return np.power(a, np.maximum(b, 0))
    return np.power(a, b)


add = _elementwise("add", np.add, 2)
sub = _elementwise("sub", np.subtract, 2, accepts=_not_bool)
mul = _elementwise("mul", np.multiply, 2)
div = _elementwise("div", _int_div, 2, accepts=_not_bool)
pow = _elementwise("pow", _pow, 2, accepts=_not_bool)
max = _elementwise("max", np.maximum, 2)
min = _elementwise("min", np.minimum, 2)
neg = _elementwise("neg", np.negative, 1, accepts=_not_bool)
abs = _elementwise("abs", np.abs, 1, accepts=_not_bool)
exp = _elementwise("exp", np.exp, 1, accepts=_is_float)
log = _elementwise("log", np.log, 1, accepts=_is_float)
tanh = _elementwise("tanh", np.tanh, 1, accepts=_is_float)
sqrt = _elementwise("sqrt", np.sqrt, 1, accepts=_is_float)

_BOOL = np.dtype(np.bool_)
eq = _elementwise("eq", np.equal, 2, result_dtype=_BOOL)
ne = _elementwise("ne", np.not_equal, 2, result_dtype=_BOOL)
lt = _elementwise("lt", np.less, 2, result_dtype=_BOOL)
le = _elementwise("le", np.less_equal, 2, result_dtype=_BOOL)
gt = _elementwise("gt", np.greater, 2, result_dtype=_BOOL)
ge = _elementwise("ge", np.greater_equal, 2, result_dtype=_BOOL)


select = register(Primitive("select"))
select.elementwise = True


@select.def_abstract_eval
def _select_abstract(pred, on_true, on_false):
    if pred.dtype != _BOOL or pred.shape != on_true.shape:
        raise ShapeError(f"select: predicate must be bool of shape {on_true.shape}, got {pred}")
    _same_operands("select", on_true, on_false)
    return on_true.update(weak_type=on_true.weak_type and on_false.weak_type)


@select.def_impl
def _select_impl(pred, on_true, on_false):
    return np.where(pred, on_true, on_false).astype(np.asarray(on_true).dtype, copy=False)


convert = register(Primitive("convert"))
convert.elementwise = True


@convert.def_abstract_eval
def _convert_abstract(x, *, new_dtype):
    return ShapedArray(x.shape, new_dtype)


@convert.def_impl
def _convert_impl(x, *, new_dtype):
    """numpy's astype, except float -> int truncates and saturates (NaN -> 0), as compiled code does."""
    x = np.asarray(x)
    if dtypes.is_bool(new_dtype):
        return x != 0
    with np.errstate(all="ignore"):
        if dtypes.is_int(new_dtype) and dtypes.is_float(x.dtype):
            info = np.iinfo(new_dtype)
            t = np.trunc(x.astype(np.float64))
            lo, hi = float(info.min), float(info.max) + 1.0  # both exact in float64
            inside = (t >= lo) & (t < hi)
            out = np.where(inside, t, 0).astype(new_dtype)
            out = np.where(t >= hi, info.max, out)
            return np.where(t < lo, info.min, out).astype(new_dtype)
        return x.astype(new_dtype)


broadcast_in_dim = register(Primitive("broadcast_in_dim"))


@broadcast_in_dim.def_abstract_eval
def _broadcast_abstract(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim or sorted(set(broadcast_dimensions)) != list(broadcast_dimensions):
        raise ShapeError(f"broadcast_in_dim: bad broadcast_dimensions {broadcast_dimensions} for {x}")
    for src, dst in zip(x.shape, broadcast_dimensions):
        if dst >= len(shape) or src not in (1, shape[dst]):
            raise ShapeError(f"broadcast_in_dim: cannot broadcast {x} to {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type)


@broadcast_in_dim.def_impl
def _broadcast_impl(x, *, shape, broadcast_dimensions):
    x = np.asarray(x)
    expanded = [1] * len(shape)
    for src, dst in zip(x.shape, broadcast_dimensions):
        expanded[dst] = src
    return np.broadcast_to(x.reshape(expanded), shape).copy()


reshape = register(Primitive("reshape"))


@reshape.def_abstract_eval
def _reshape_abstract(x, *, new_shape):
    if int(np.prod(new_shape, dtype=np.int64)) != x.size:
        raise ShapeError(f"reshape: cannot reshape {x} to {new_shape}")
    return ShapedArray(new_shape, x.dtype, x.weak_type)


@reshape.def_impl
def _reshape_impl(x, *, new_shape):
    return np.reshape(x, new_shape).copy()


transpose = register(Primitive("transpose"))


@transpose.def_abstract_eval
def _transpose_abstract(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ShapeError(f"transpose: {permutation} is not a permutation of the axes of {x}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


@transpose.def_impl
def _transpose_impl(x, *, permutation):
    return np.transpose(x, permutation).copy()


def _reduction(name: str, numpy_fn) -> Primitive:
    prim = register(Primitive(name))
    prim.reduction = name[len("reduce_"):]

    @prim.def_abstract_eval
    def abstract_eval(x, *, axes):
        if any(a < 0 or a >= x.ndim for a in axes) or len(set(axes)) != len(axes):
            raise ShapeError(f"{name}: bad axes {axes} for {x}")
        if name != "reduce_sum" and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{name}: reduction over an empty axis has no identity")
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype, x.weak_type)

    @prim.def_impl
    def impl(x, *, axes):
        x = np.asarray(x)
        return np.asarray(numpy_fn(x, axis=tuple(axes))).astype(x.dtype)

    return prim


reduce_sum = _reduction("reduce_sum", np.sum)
reduce_max = _reduction("reduce_max", np.max)
reduce_min = _reduction("reduce_min", np.min)


dot_general = register(Primitive("dot_general"))


@dot_general.def_abstract_eval
def _dot_general_abstract(lhs, rhs, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if lhs.dtype != rhs.dtype:
        raise ShapeError(f"dot_general: operand dtypes differ: {lhs} and {rhs}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ShapeError(f"dot_general: bad dimension numbers {dimension_numbers}")
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        if lhs.shape[a] != rhs.shape[b]:
            raise ShapeError(f"dot_general: dimension {a} of {lhs} does not match dimension {b} of {rhs}")
    batch = [lhs.shape[i] for i in lb]
    lfree = [d for i, d in enumerate(lhs.shape) if i not in lc and i not in lb]
    rfree = [d for i, d in enumerate(rhs.shape) if i not in rc and i not in rb]
    return ShapedArray(tuple(batch + lfree + rfree), lhs.dtype, lhs.weak_type and rhs.weak_type)


@dot_general.def_impl
def _dot_general_impl(lhs, rhs, *, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lsub = [None] * lhs.ndim
    rsub = [None] * rhs.ndim
    for a, b in zip(lb, rb):
        lsub[a] = rsub[b] = next(letters)
    for a, b in zip(lc, rc):
        lsub[a] = rsub[b] = next(letters)
    for i in range(lhs.ndim):
        lsub[i] = lsub[i] or next(letters)
    for i in range(rhs.ndim):
        rsub[i] = rsub[i] or next(letters)
    out = [lsub[a] for a in lb]
    out += [lsub[i] for i in range(lhs.ndim) if i not in lc and i not in lb]
    out += [rsub[i] for i in range(rhs.ndim) if i not in rc and i not in rb]
    spec = f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}"
    return np.asarray(np.einsum(spec, lhs, rhs)).astype(lhs.dtype)


iota = register(Primitive("iota"))


@iota.def_abstract_eval
def _iota_abstract(*, shape, dimension, dtype):
    return ShapedArray(shape, dtype)


@iota.def_impl
def _iota_impl(*, shape, dimension, dtype):
    index = np.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(index.reshape(expanded), shape).copy()


stop_gradient = register(Primitive("stop_gradient"))
stop_gradient.elementwise = True
stop_gradient.def_abstract_eval(lambda x: x)
stop_gradient.def_impl(lambda x: np.asarray(x))


def zeros_like_shaped_array(aval: ShapedArray):
    """Zeros of aval's shape and dtype: a numpy array eagerly and for 0-d, a broadcast when traced."""
    if aval.shape == () or current_graph_trace() is None:
        return np.zeros(aval.shape, aval.dtype)
    return broadcast_in_dim.bind(np.zeros((), aval.dtype), shape=aval.shape, broadcast_dimensions=())


ad_util.register_add(add.bind)
ad_util.register_zeros(ShapedArray, zeros_like_shaped_array)
