"""JVP rules of the array primitives. Tangent code uses only linear primitives of the tangents."""
from __future__ import annotations

import numpy as np

from ..core.ad_util import Zero, add_any, instantiate
from ..core.trace import get_aval
from ..transforms.jvp import tangent_aval
from . import prims


def _full_like(x, value):
    a = get_aval(x)
    return prims.broadcast_in_dim.bind(np.asarray(value, a.dtype), shape=a.shape, broadcast_dimensions=())


def _scale(t, factor):
    """t * factor, where factor does not depend on tangents (Zero stays Zero)."""
    return t if isinstance(t, Zero) else prims.mul.bind(t, factor)


def _neg(t):
    return t if isinstance(t, Zero) else prims.neg.bind(t)


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


def _defjvp_zero(prim):
    """Rules for primitives with non-differentiable (integer or bool) results."""

    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        return out, Zero(tangent_aval(get_aval(out)))

    prim.jvp_rule = rule


def _add_rule(primals, tangents):
    return prims.add.bind(*primals), add_any(*tangents)


def _sub_rule(primals, tangents):
    tx, ty = tangents
    return prims.sub.bind(*primals), add_any(tx, _neg(ty))


def _mul_rule(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return prims.mul.bind(x, y), add_any(_scale(tx, y), _scale(ty, x))


def _div_rule(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    out = prims.div.bind(x, y)
    t = tx if isinstance(tx, Zero) else prims.div.bind(tx, y)
    if not isinstance(ty, Zero):
        t = add_any(t, prims.neg.bind(prims.mul.bind(ty, prims.div.bind(out, y))))
    return out, t


def _pow_rule(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    out = prims.pow.bind(x, y)
    t = Zero(tangent_aval(get_aval(out)))
    if not isinstance(tx, Zero):
        dx = prims.mul.bind(y, prims.pow.bind(x, prims.sub.bind(y, _full_like(y, 1))))
        t = add_any(t, prims.mul.bind(tx, dx))
    if not isinstance(ty, Zero):
        positive = prims.gt.bind(x, _full_like(x, 0))
        safe_x = prims.select.bind(positive, x, _full_like(x, 1))
        dy = prims.select.bind(positive, prims.mul.bind(out, prims.log.bind(safe_x)), _full_like(x, 0))
        t = add_any(t, prims.mul.bind(ty, dy))
    return out, t


def _minmax_rule(prim, pick_x):
    def rule(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        out = prim.bind(x, y)
        a = tangent_aval(get_aval(out))
        tx, ty = instantiate(tx, a), instantiate(ty, a)
        half = prims.mul.bind(prims.add.bind(tx, ty), _full_like(tx, 0.5))
        t = prims.select.bind(pick_x.bind(x, y), tx, prims.select.bind(pick_x.bind(y, x), ty, half))
        return out, t

    return rule


def _sign(x):
    zero = _full_like(x, 0)
    pos = prims.select.bind(prims.gt.bind(x, zero), _full_like(x, 1), zero)
    return prims.select.bind(prims.lt.bind(x, zero), _full_like(x, -1), pos)


def _select_rule(primals, tangents):
    (p, a, b), (_, ta, tb) = primals, tangents
    out = prims.select.bind(p, a, b)
    if isinstance(ta, Zero) and isinstance(tb, Zero):
        return out, Zero(tangent_aval(get_aval(out)))
    av = tangent_aval(get_aval(out))
    return out, prims.select.bind(p, instantiate(ta, av), instantiate(tb, av))


def _convert_rule(primals, tangents, *, new_dtype):
    (x,), (t,) = primals, tangents
    out = prims.convert.bind(x, new_dtype=new_dtype)
    if np.dtype(new_dtype).kind != "f" or isinstance(t, Zero):
        return out, Zero(tangent_aval(get_aval(out)))
    return out, prims.convert.bind(t, new_dtype=new_dtype)


def _reduce_extremum_rule(prim):
    def rule(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axes=axes)
        if isinstance(t, Zero):
            return out, Zero(tangent_aval(get_aval(out)))
        shape = get_aval(x).shape
        kept = tuple(i for i in range(len(shape)) if i not in axes)
        spread = prims.broadcast_in_dim.bind(out, shape=shape, broadcast_dimensions=kept)
        mask = prims.convert.bind(prims.eq.bind(x, spread), new_dtype=get_aval(x).dtype)
        count = prims.reduce_sum.bind(mask, axes=axes)
        picked = prims.reduce_sum.bind(prims.mul.bind(t, mask), axes=axes)
        return out, prims.div.bind(picked, count)

    return rule


def _dot_general_rule(primals, tangents, *, dimension_numbers):
    (x, y), (tx, ty) = primals, tangents
    out = prims.dot_general.bind(x, y, dimension_numbers=dimension_numbers)
    t = Zero(tangent_aval(get_aval(out)))
    if not isinstance(tx, Zero):
        t = add_any(t, prims.dot_general.bind(tx, y, dimension_numbers=dimension_numbers))
    if not isinstance(ty, Zero):
        t = add_any(t, prims.dot_general.bind(x, ty, dimension_numbers=dimension_numbers))
    return out, t


def register() -> None:
    prims.add.jvp_rule = _add_rule
    prims.sub.jvp_rule = _sub_rule
    prims.mul.jvp_rule = _mul_rule
    prims.div.jvp_rule = _div_rule
    prims.pow.jvp_rule = _pow_rule
    prims.max.jvp_rule = _minmax_rule(prims.max, prims.gt)
    prims.min.jvp_rule = _minmax_rule(prims.min, prims.lt)
    prims.neg.jvp_rule = lambda p, t: (prims.neg.bind(p[0]), _neg(t[0]))
    _defjvp_unary(prims.abs, lambda x, out: _sign(x))
    _defjvp_unary(prims.exp, lambda x, out: out)
    _defjvp_unary(prims.log, lambda x, out: prims.div.bind(_full_like(x, 1), x))
    _defjvp_unary(prims.tanh, lambda x, out: prims.sub.bind(_full_like(out, 1), prims.mul.bind(out, out)))
    _defjvp_unary(prims.sqrt, lambda x, out: prims.div.bind(_full_like(out, 0.5), out))
    # iota has no operands, so no trace ever sees it with a tangent: it needs no rules.
    for p in (prims.eq, prims.ne, prims.lt, prims.le, prims.gt, prims.ge):
        _defjvp_zero(p)
    prims.select.jvp_rule = _select_rule
    prims.convert.jvp_rule = _convert_rule
    for p in (prims.broadcast_in_dim, prims.reshape, prims.transpose, prims.reduce_sum):
        _defjvp_linear(p)
    prims.reduce_max.jvp_rule = _reduce_extremum_rule(prims.reduce_max)
    prims.reduce_min.jvp_rule = _reduce_extremum_rule(prims.reduce_min)
    prims.dot_general.jvp_rule = _dot_general_rule
    prims.stop_gradient.jvp_rule = lambda p, t: (prims.stop_gradient.bind(p[0]), Zero(tangent_aval(get_aval(p[0]))))
