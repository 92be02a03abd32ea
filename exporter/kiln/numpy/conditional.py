"""Choosing between arrays elementwise: choose, select and piecewise (numpy's semantics; traced arrays welcome,
with the static parts static: the number of choices, conditions and functions)."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import Tracer
from ._base import asarray, aval, broadcast_shapes as _broadcast_shapes, broadcast_to, convert, promote
from .elementwise import equal, where


def choose(a, choices, out=None, mode="raise"):
    """numpy.choose: element i of the result is choices[a[i]][i], all broadcast together. mode 'raise'
    (a must be concrete), 'wrap' or 'clip'."""
    if out is not None:
        raise NotImplementedError("choose: out= is not supported: kiln arrays are immutable; use the returned array")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    index = a if isinstance(a, Tracer) else np.asarray(a)
    if not dtypes.is_int(aval(index).dtype):
        raise TypeError(f"choose: the index array must be integer, got {aval(index).dtype}")
    options = promote(*[asarray(c) for c in choices]) if not hasattr(choices, "shape") else \
        [asarray(choices)[i] for i in range(aval(asarray(choices)).shape[0])]
    n = len(options)
    if mode == "raise":
        if isinstance(index, Tracer):
            raise ValueError("choose: mode='raise' needs a concrete index array (a traced index cannot raise); "
                             "pass mode='clip' or 'wrap'")
        if index.size and (index.min() < 0 or index.max() >= n):
            raise ValueError(f"choose: invalid entry in choice array (entries must be in [0, {n}))")
    elif mode == "wrap":
        from .math import remainder

        index = remainder(index, n)
    else:
        from .math import clip

        index = clip(index, 0, n - 1)
    shape = _broadcast_shapes(aval(index).shape, *[aval(c).shape for c in options], where="choose")
    result = broadcast_to(options[0], shape)
    for k in range(1, n):
        result = where(equal(index, k), options[k], result)
    return result


def select(condlist, choicelist, default=0):
    """numpy.select: from the first true condition's choice, else default (a Python number is weak)."""
    if len(condlist) != len(choicelist):
        raise ValueError("select: list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select: select with an empty condition list is not possible")
    conds = []
    for i, c in enumerate(condlist):
        c = asarray(c)
        if not dtypes.is_bool(aval(c).dtype):
            raise TypeError(f"select: invalid entry {i} in condlist: should be boolean ndarray")
        conds.append(c)
    options = promote(*[c if dtypes.is_python_scalar(c) else asarray(c) for c in choicelist], default)
    result = options[-1]
    for c, v in zip(reversed(conds), reversed(options[:-1])):
        result = where(c, v, result)
    shape = _broadcast_shapes(*[aval(o).shape for o in options], *[aval(c).shape for c in conds], where="select")
    return broadcast_to(result, shape)


def piecewise(x, condlist, funclist, *args, **kw):
    """numpy.piecewise: funclist[i] where condlist[i] holds (later conditions win, as numpy), an extra last
    function where none holds, 0 elsewhere. Each function runs on the whole array and its result is selected
    (as in jax.numpy), so it must accept any element; the result keeps x's dtype."""
    v = asarray(x)
    conds = [asarray(c) for c in (_one_condition(condlist, aval(v).ndim) and [condlist] or condlist)]
    if len(funclist) == len(conds) + 1:
        from .math import logical_not, logical_or

        rest = conds[0]
        for c in conds[1:]:
            rest = logical_or(rest, c)
        conds = conds + [logical_not(rest)]
    elif len(funclist) != len(conds):
        raise ValueError(f"piecewise: with {len(conds)} condition(s), either {len(conds)} or {len(conds) + 1} "
                         f"functions are expected, got {len(funclist)}")
    d = aval(v).dtype
    result = broadcast_to(np.zeros((), d), aval(v).shape)
    for c, f in zip(conds, funclist):
        value = f(v, *args, **kw) if callable(f) else f
        result = where(c, convert(asarray(value), d), result)
    return result


def _one_condition(condlist, ndim) -> bool:
    """numpy's reading of piecewise's condlist: a scalar is one condition, and so is a sequence whose first
    entry is a scalar (when x is not 0-d); an array of x's rank is one condition too (numpy fails there)."""
    if hasattr(condlist, "shape"):
        rank = aval(asarray(condlist)).ndim
        return rank == 0 or rank == ndim
    if isinstance(condlist, (bool, np.bool_)):
        return True
    first = condlist[0]
    return ndim != 0 and not isinstance(first, list) and not (hasattr(first, "shape") and aval(asarray(first)).ndim)


__all__ = ["choose", "select", "piecewise"]
