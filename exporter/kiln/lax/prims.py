"""The array primitives (kiln's lax level): strict shapes and dtypes, no implicit broadcasting.

kiln.numpy builds numpy semantics (promotion, broadcasting) on top of these.
Each primitive registers its eager numpy implementation and abstract
evaluation here, and its JVP, transpose and batching rules in the sections
below; the compiler attaches its lowering elsewhere.
"""
from __future__ import annotations

import numpy as np

from ..core import ad_util, dtypes
from ..core.ad_util import Zero, add_any, instantiate
from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from ..core.trace import current_graph_trace, get_aval
from ..transforms.batching import move_batch_axis
from ..transforms.jvp import tangent_aval
from ..transforms.transpose import is_linear


class ShapeError(TypeError):
    """Operands whose shapes or dtypes a primitive cannot accept."""


def _same_operands(name, *avals):
    first = avals[0]
    for a in avals[1:]:
        if a.shape != first.shape or a.dtype != first.dtype:
            raise ShapeError(f"{name}: operands must match; got {', '.join(str(x) for x in avals)}")
    return first


def _elementwise(name: str, numpy_fn, arity: int, *, result_dtype=None, accepts=None, **traits) -> Primitive:
    """Registers an elementwise primitive over same-shape, same-dtype operands; `traits`: its other OpTraits
    (cost, math, exact_in_narrow)."""
    prim = register(Primitive(name))
    prim.def_traits(fusion="elementwise", **traits)

    def abstract_eval(*avals):
        base = _same_operands(name, *avals)
        if accepts is not None and not accepts(base.dtype):
            raise ShapeError(f"{name} does not accept dtype {base.dtype}")
        dtype = _result_dtype(result_dtype, base.dtype)
        weak = all(a.weak_type for a in avals) and (result_dtype is None or callable(result_dtype))
        return ShapedArray(base.shape, dtype, weak)

    def impl(*values):
        dtype = _result_dtype(result_dtype, np.asarray(values[0]).dtype)
        with np.errstate(all="ignore"):
            return np.asarray(numpy_fn(*values)).astype(dtype, copy=False)

    assert arity in (1, 2, 3)
    prim.def_abstract_eval(abstract_eval)
    prim.def_impl(impl)
    return prim


def _result_dtype(result_dtype, operand_dtype):
    """An elementwise primitive's result dtype: the operands', a fixed one, or a function of the operands'."""
    if result_dtype is None:
        return operand_dtype
    return result_dtype(operand_dtype) if callable(result_dtype) else result_dtype


def _not_bool(d):
    return not dtypes.is_bool(d)


def _is_float(d):
    return dtypes.is_inexact(d)


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
div = _elementwise("div", _int_div, 2, accepts=_not_bool, cost=4)
pow = _elementwise("pow", _pow, 2, accepts=_not_bool, cost=45, math="pow")
max = _elementwise("max", np.maximum, 2, exact_in_narrow=True)
min = _elementwise("min", np.minimum, 2, exact_in_narrow=True)
neg = _elementwise("neg", np.negative, 1, accepts=_not_bool, exact_in_narrow=True)
abs = _elementwise("abs", np.abs, 1, accepts=_not_bool, result_dtype=dtypes.real_dtype,  # |complex| is real
                   exact_in_narrow=True)
exp = _elementwise("exp", np.exp, 1, accepts=_is_float, cost=20, math="exp")
log = _elementwise("log", np.log, 1, accepts=_is_float, cost=20, math="log")
tanh = _elementwise("tanh", np.tanh, 1, accepts=_is_float, cost=25, math="tanh")
sqrt = _elementwise("sqrt", np.sqrt, 1, accepts=_is_float, cost=4, math="sqrt")

_BOOL = np.dtype(np.bool_)
eq = _elementwise("eq", np.equal, 2, result_dtype=_BOOL)
ne = _elementwise("ne", np.not_equal, 2, result_dtype=_BOOL)
lt = _elementwise("lt", np.less, 2, result_dtype=_BOOL)
le = _elementwise("le", np.less_equal, 2, result_dtype=_BOOL)
gt = _elementwise("gt", np.greater, 2, result_dtype=_BOOL)
ge = _elementwise("ge", np.greater_equal, 2, result_dtype=_BOOL)


select = register(Primitive("select"))
select.def_traits(fusion="elementwise", exact_in_narrow=True)


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
convert.def_traits(fusion="elementwise", exact_in_narrow=True)  # the rounding is convert's own
convert.weak_from_operands = False  # weak_type= decides (astype is strong)


@convert.def_abstract_eval
def _convert_abstract(x, *, new_dtype, weak_type=False):
    """weak_type=True marks the result weakly typed (it promotes like a Python number), as jax.lax's
    convert_element_type does; kiln.numpy uses it for Python numbers and creation functions when traced."""
    return ShapedArray(x.shape, new_dtype, weak_type)


@convert.def_impl
def _convert_impl(x, *, new_dtype, weak_type=False):
    """numpy's astype, except float -> int truncates and saturates (NaN -> 0), as compiled code does;
    complex -> real keeps the real part (numpy's, without its ComplexWarning; JAX's)."""
    x = np.asarray(x)
    if dtypes.is_bool(new_dtype):
        return x != 0
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        x = x.real
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
broadcast_in_dim.def_traits(fusion="layout")


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
reshape.def_traits(fusion="layout")


@reshape.def_abstract_eval
def _reshape_abstract(x, *, new_shape):
    if int(np.prod(new_shape, dtype=np.int64)) != x.size:
        raise ShapeError(f"reshape: cannot reshape {x} to {new_shape}")
    return ShapedArray(new_shape, x.dtype, x.weak_type)


@reshape.def_impl
def _reshape_impl(x, *, new_shape):
    return np.reshape(x, new_shape).copy()


transpose = register(Primitive("transpose"))
transpose.def_traits(fusion="layout")


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
    prim.def_traits(fusion="reduction", reduction=name[len("reduce_"):])

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
dot_general.def_traits(fusion="kernel", kernel="matmul")


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
    if lhs.dtype == dtypes.BFLOAT16:  # a storage type numpy cannot multiply: computed in float32, as in kernels
        return np.asarray(np.einsum(spec, lhs.astype(np.float32), rhs.astype(np.float32))).astype(lhs.dtype)
    return np.asarray(np.einsum(spec, lhs, rhs)).astype(lhs.dtype)


iota = register(Primitive("iota"))
iota.def_traits(fusion="iota")


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
stop_gradient.def_traits(fusion="elementwise")
stop_gradient.def_abstract_eval(lambda x: x)
stop_gradient.def_impl(lambda x: np.asarray(x))


def zeros_like_shaped_array(aval: ShapedArray):
    """Zeros of aval's shape, dtype and weak type: a numpy array eagerly and for 0-d (a kiln array when
    weak), a broadcast when traced."""
    if aval.shape == () or current_graph_trace() is None:
        zeros = np.zeros(aval.shape, aval.dtype)
    else:
        zeros = broadcast_in_dim.bind(np.zeros((), aval.dtype), shape=aval.shape, broadcast_dimensions=())
    return convert.bind(zeros, new_dtype=aval.dtype, weak_type=True) if aval.weak_type else zeros


ad_util.register_add(add.bind)
ad_util.register_zeros(ShapedArray, zeros_like_shaped_array)
ad_util.register_convert(convert.bind)


# ----------------------------------------------------------------------------- JVP rules
# JVP rules of the array primitives. Tangent code uses only linear primitives of the tangents.


def _full_like(x, value):
    a = get_aval(x)
    return broadcast_in_dim.bind(np.asarray(value, a.dtype), shape=a.shape, broadcast_dimensions=())


def _scale(t, factor):
    """t * factor, where factor does not depend on tangents (Zero stays Zero)."""
    return t if isinstance(t, Zero) else mul.bind(t, factor)


def _neg(t):
    return t if isinstance(t, Zero) else neg.bind(t)


def _defjvp_linear(prim):
    """Rules for primitives linear in all operands: apply the primitive to the tangents."""

    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        ts = [instantiate(t, tangent_aval(get_aval(p))) for t, p in zip(tangents, primals)]
        return out, prim.bind(*ts, **params)

    prim.jvp_rule = rule


def _defjvp_unary(prim, derivative):
    """Unary rules t_out = t * derivative(x, out)."""

    def rule(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        return out, _scale(t, derivative(x, out))

    prim.jvp_rule = rule


def defjvp_zero(prim):
    """Rules for primitives with non-differentiable (integer or bool) results."""

    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        return out, Zero(tangent_aval(get_aval(out)))

    prim.jvp_rule = rule


def _add_rule(primals, tangents):
    return add.bind(*primals), add_any(*tangents)


def _sub_rule(primals, tangents):
    tx, ty = tangents
    return sub.bind(*primals), add_any(tx, _neg(ty))


def _mul_rule(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return mul.bind(x, y), add_any(_scale(tx, y), _scale(ty, x))


def _div_rule(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    out = div.bind(x, y)
    t = tx if isinstance(tx, Zero) else div.bind(tx, y)
    if not isinstance(ty, Zero):
        t = add_any(t, neg.bind(mul.bind(ty, div.bind(out, y))))
    return out, t


def _pow_rule(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    out = pow.bind(x, y)
    t = Zero(tangent_aval(get_aval(out)))
    if not isinstance(tx, Zero):
        dx = mul.bind(y, pow.bind(x, sub.bind(y, _full_like(y, 1))))
        t = add_any(t, mul.bind(tx, dx))
    if not isinstance(ty, Zero):
        positive = gt.bind(x, _full_like(x, 0))
        safe_x = select.bind(positive, x, _full_like(x, 1))
        dy = select.bind(positive, mul.bind(out, log.bind(safe_x)), _full_like(x, 0))
        t = add_any(t, mul.bind(ty, dy))
    return out, t


def _minmax_rule(prim, pick_x):
    def rule(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        out = prim.bind(x, y)
        a = tangent_aval(get_aval(out))
        tx, ty = instantiate(tx, a), instantiate(ty, a)
        half = mul.bind(add.bind(tx, ty), _full_like(tx, 0.5))
        t = select.bind(pick_x.bind(x, y), tx, select.bind(pick_x.bind(y, x), ty, half))
        return out, t

    return rule


def _sign(x):
    zero = _full_like(x, 0)
    pos = select.bind(gt.bind(x, zero), _full_like(x, 1), zero)
    return select.bind(lt.bind(x, zero), _full_like(x, -1), pos)


def _select_rule(primals, tangents):
    (p, a, b), (_, ta, tb) = primals, tangents
    out = select.bind(p, a, b)
    if isinstance(ta, Zero) and isinstance(tb, Zero):
        return out, Zero(tangent_aval(get_aval(out)))
    av = tangent_aval(get_aval(out))
    return out, select.bind(p, instantiate(ta, av), instantiate(tb, av))


def _convert_rule(primals, tangents, *, new_dtype, weak_type=False):
    (x,), (t,) = primals, tangents
    out = convert.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if not dtypes.is_inexact(new_dtype) or isinstance(t, Zero):  # bfloat16 included (its numpy kind is "V")
        return out, Zero(tangent_aval(get_aval(out)))
    return out, convert.bind(t, new_dtype=new_dtype, weak_type=weak_type)


def _reduce_extremum_rule(prim):
    def rule(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axes=axes)
        if isinstance(t, Zero):
            return out, Zero(tangent_aval(get_aval(out)))
        shape = get_aval(x).shape
        kept = tuple(i for i in range(len(shape)) if i not in axes)
        spread = broadcast_in_dim.bind(out, shape=shape, broadcast_dimensions=kept)
        mask = convert.bind(eq.bind(x, spread), new_dtype=get_aval(x).dtype)
        count = reduce_sum.bind(mask, axes=axes)
        picked = reduce_sum.bind(mul.bind(t, mask), axes=axes)
        return out, div.bind(picked, count)

    return rule


def _dot_general_jvp(primals, tangents, *, dimension_numbers):
    (x, y), (tx, ty) = primals, tangents
    out = dot_general.bind(x, y, dimension_numbers=dimension_numbers)
    t = Zero(tangent_aval(get_aval(out)))
    if not isinstance(tx, Zero):
        t = add_any(t, dot_general.bind(tx, y, dimension_numbers=dimension_numbers))
    if not isinstance(ty, Zero):
        t = add_any(t, dot_general.bind(x, ty, dimension_numbers=dimension_numbers))
    return out, t


def _register_jvp_rules() -> None:
    add.jvp_rule = _add_rule
    sub.jvp_rule = _sub_rule
    mul.jvp_rule = _mul_rule
    div.jvp_rule = _div_rule
    pow.jvp_rule = _pow_rule
    max.jvp_rule = _minmax_rule(max, gt)
    min.jvp_rule = _minmax_rule(min, lt)
    neg.jvp_rule = lambda p, t: (neg.bind(p[0]), _neg(t[0]))
    _defjvp_unary(abs, lambda x, out: _sign(x))
    _defjvp_unary(exp, lambda x, out: out)
    _defjvp_unary(log, lambda x, out: div.bind(_full_like(x, 1), x))
    _defjvp_unary(tanh, lambda x, out: sub.bind(_full_like(out, 1), mul.bind(out, out)))
    _defjvp_unary(sqrt, lambda x, out: div.bind(_full_like(out, 0.5), out))
    # iota has no operands, so no trace ever sees it with a tangent: it needs no rules.
    for p in (eq, ne, lt, le, gt, ge):
        defjvp_zero(p)
    select.jvp_rule = _select_rule
    convert.jvp_rule = _convert_rule
    for p in (broadcast_in_dim, reshape, transpose, reduce_sum):
        _defjvp_linear(p)
    reduce_max.jvp_rule = _reduce_extremum_rule(reduce_max)
    reduce_min.jvp_rule = _reduce_extremum_rule(reduce_min)
    dot_general.jvp_rule = _dot_general_jvp
    stop_gradient.jvp_rule = lambda p, t: (stop_gradient.bind(p[0]), Zero(tangent_aval(get_aval(p[0]))))


_register_jvp_rules()


# ----------------------------------------------------------------------------- transpose rules
# Transpose rules of kiln.lax.prims' linear primitives, used by reverse mode (kiln.transforms.transpose).


def _unbroadcast_sum(ct, operand_aval: ShapedArray, broadcast_dimensions):
    """The transpose of broadcast_in_dim: sum the broadcast axes back to the operand's shape."""
    ct_shape = _shape(ct)
    new_axes = tuple(i for i in range(len(ct_shape)) if i not in broadcast_dimensions)
    stretched = tuple(d for s, d in zip(operand_aval.shape, broadcast_dimensions) if s == 1 and ct_shape[d] != 1)
    axes = tuple(sorted(new_axes + stretched))
    out = reduce_sum.bind(ct, axes=axes) if axes else ct
    if _shape(out) != operand_aval.shape:
        out = reshape.bind(out, new_shape=operand_aval.shape)
    return out


def _shape(x):
    return get_aval(x).shape


def _add_t(ct, x, y):
    return [ct if is_linear(x) else None, ct if is_linear(y) else None]


def _sub_t(ct, x, y):
    return [ct if is_linear(x) else None, neg.bind(ct) if is_linear(y) else None]


def _mul_t(ct, x, y):
    if is_linear(x) and is_linear(y):
        raise AssertionError("mul of two linear values is not linear")
    return [mul.bind(ct, y) if is_linear(x) else None, mul.bind(x, ct) if is_linear(y) else None]


def _div_t(ct, x, y):
    if is_linear(y):
        raise AssertionError("div is linear only in its numerator")
    return [div.bind(ct, y), None]


def _select_t(ct, p, a, b):
    zeros = broadcast_in_dim.bind(np.zeros((), _dtype(ct)), shape=_shape(ct), broadcast_dimensions=())
    return [None, select.bind(p, ct, zeros) if is_linear(a) else None,
            select.bind(p, zeros, ct) if is_linear(b) else None]


def _dtype(x):
    return get_aval(x).dtype


def _convert_t(ct, x, *, new_dtype, weak_type=False):
    return [convert.bind(ct, new_dtype=x.aval.dtype, weak_type=x.aval.weak_type)]


def _broadcast_t(ct, x, *, shape, broadcast_dimensions):
    return [_unbroadcast_sum(ct, x.aval, broadcast_dimensions)]


def _reshape_t(ct, x, *, new_shape):
    return [reshape.bind(ct, new_shape=x.aval.shape)]


def _transpose_t(ct, x, *, permutation):
    inverse = tuple(int(i) for i in np.argsort(permutation))
    return [transpose.bind(ct, permutation=inverse)]


def _reduce_sum_t(ct, x, *, axes):
    kept = tuple(i for i in range(x.aval.ndim) if i not in axes)
    return [broadcast_in_dim.bind(ct, shape=x.aval.shape, broadcast_dimensions=kept)]


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


def _remaining(original, *removed_lists):
    removed = set(i for r in removed_lists for i in r)
    return [i for i in original if i not in removed]


def _dot_transpose_lhs(ct, x_aval, y, *, dimension_numbers, swap_ans=False):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_ndim = x_aval.ndim
    y_ndim = len(_shape(y))
    x_kept = _remaining(range(x_ndim), x_contract, x_batch)
    y_kept = _remaining(range(y_ndim), y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(ans_batch), tuple(y_batch)))
    x_contract_sorted_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    out_axes = tuple(int(i) for i in np.argsort(list(x_batch) + x_kept + x_contract_sorted_by_y))
    product = dot_general.bind(ct, y, dimension_numbers=dims)
    return transpose.bind(product, permutation=out_axes) if out_axes != tuple(range(len(out_axes))) else product


def _dot_general_t(ct, x, y, *, dimension_numbers):
    (xc, yc), (xb, yb) = dimension_numbers
    ct_x = _dot_transpose_lhs(ct, x.aval, y, dimension_numbers=dimension_numbers) if is_linear(x) else None
    ct_y = None
    if is_linear(y):
        swapped = ((yc, xc), (yb, xb))
        ct_y = _dot_transpose_lhs(ct, y.aval, x, dimension_numbers=swapped, swap_ans=True)
    return [ct_x, ct_y]


def _register_transpose_rules() -> None:
    add.transpose_rule = _add_t
    sub.transpose_rule = _sub_t
    mul.transpose_rule = _mul_t
    div.transpose_rule = _div_t
    neg.transpose_rule = lambda ct, x: [neg.bind(ct)]
    select.transpose_rule = _select_t
    convert.transpose_rule = _convert_t
    broadcast_in_dim.transpose_rule = _broadcast_t
    reshape.transpose_rule = _reshape_t
    transpose.transpose_rule = _transpose_t
    reduce_sum.transpose_rule = _reduce_sum_t
    dot_general.transpose_rule = _dot_general_t


_register_transpose_rules()


# ----------------------------------------------------------------------------- batching rules
# Batching (vmap) rules of the array primitives.


def _elementwise_rule(prim):
    def rule(values, dims, *, axis_size, **params):
        moved = [move_batch_axis(v, d, 0, axis_size) for v, d in zip(values, dims)]
        return prim.bind(*moved, **params), 0

    return rule


def _broadcast_rule(values, dims, *, axis_size, shape, broadcast_dimensions):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    out = broadcast_in_dim.bind(
        x, shape=(axis_size,) + tuple(shape), broadcast_dimensions=(0,) + tuple(d + 1 for d in broadcast_dimensions)
    )
    return out, 0


def _reshape_rule(values, dims, *, axis_size, new_shape):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    return reshape.bind(x, new_shape=(axis_size,) + tuple(new_shape)), 0


def _transpose_rule(values, dims, *, axis_size, permutation):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    return transpose.bind(x, permutation=(0,) + tuple(p + 1 for p in permutation)), 0


def _reduce_rule(prim):
    def rule(values, dims, *, axis_size, axes):
        x = move_batch_axis(values[0], dims[0], 0, axis_size)
        return prim.bind(x, axes=tuple(a + 1 for a in axes)), 0

    return rule


def _dot_general_batch(values, dims, *, axis_size, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = values
    ld, rd = dims
    shift = lambda axes: tuple(a + 1 for a in axes)  # noqa: E731
    if ld is not None and rd is not None:
        lhs = move_batch_axis(lhs, ld, 0, axis_size)
        rhs = move_batch_axis(rhs, rd, 0, axis_size)
        new = ((shift(lc), shift(rc)), ((0,) + shift(lb), (0,) + shift(rb)))
        return dot_general.bind(lhs, rhs, dimension_numbers=new), 0
    if ld is not None:
        lhs = move_batch_axis(lhs, ld, 0, axis_size)
        new = ((shift(lc), rc), (shift(lb), rb))
        return dot_general.bind(lhs, rhs, dimension_numbers=new), len(lb)
    rhs = move_batch_axis(rhs, rd, 0, axis_size)
    new = ((lc, shift(rc)), (lb, shift(rb)))
    lhs_free = get_aval(lhs).ndim - len(lc) - len(lb)
    return dot_general.bind(lhs, rhs, dimension_numbers=new), len(lb) + lhs_free


def _register_batching_rules() -> None:
    for prim in (add, sub, mul, div, pow, max, min, neg,
                 abs, exp, log, tanh, sqrt, eq, ne, lt,
                 le, gt, ge, select, convert):
        prim.batching_rule = _elementwise_rule(prim)
    broadcast_in_dim.batching_rule = _broadcast_rule
    reshape.batching_rule = _reshape_rule
    transpose.batching_rule = _transpose_rule
    for prim in (reduce_sum, reduce_max, reduce_min):
        prim.batching_rule = _reduce_rule(prim)
    dot_general.batching_rule = _dot_general_batch
    stop_gradient.batching_rule = lambda v, d, axis_size: (stop_gradient.bind(v[0]), d[0])


_register_batching_rules()
