"""The derivatives of max/min pooling: select-and-gather and select-and-scatter over the windows.

Two primitives, both linear in their first operand, with reduce_window's window parameters
(op in {'max', 'min'}, window_dimensions, window_strides, padding, base_dilation, window_dilation):

- `select_and_gather_add(t, x)` (out-shaped): for each window of x, the mean of t over the window's
  positions whose x attains the window's extremum (the forward derivative of reduce_window max/min);
- `select_and_scatter_add(c, x)` (x-shaped): each window's c[o] shared evenly among the positions of
  x attaining its extremum and summed per position (the transpose of the gather: reverse mode).

Ties share evenly (the mean), padding and base-dilation holes never take part, and a window without
a real position (all padding) or whose extremum is NaN selects nothing. Kernels recompute each
window's selection from x (kiln.compiler.codegen.pool_select), so no index tensor and no constant of
the operand's size exists; the gradient of max pooling is one kernel reading x and the cotangent.
JAX's primitives of these names pick one position per window instead of sharing ties.
"""
from __future__ import annotations

import builtins
import itertools

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from ..core.trace import get_aval
from ..transforms.batching import move_batch_axis
from ..transforms.jvp import tangent_aval
from ..transforms.transpose import is_linear
from .prims import ShapeError

__all__ = ["select_and_gather_add", "select_and_scatter_add"]

_PARAMS = ("op", "window_dimensions", "window_strides", "padding", "base_dilation", "window_dilation")


def _dilate(d: int, r: int) -> int:
    return 0 if d == 0 else 1 + r * (d - 1)


def window_out_shape(shape, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    return tuple(builtins.max(0, (_dilate(d, bd) + lo + hi - _dilate(w, wd)) // s + 1)
                 for d, w, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding,
                                                      base_dilation, window_dilation))


def _check(name, source, x, op, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    if op not in ("max", "min"):
        raise ShapeError(f"{name}: op must be 'max' or 'min'; got {op!r}")
    if not dtypes.is_float(x.dtype) or source.dtype != x.dtype:
        raise ShapeError(f"{name}: operands must be floats of one dtype; got {source} and {x}")
    n = x.ndim
    for pname, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                     ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if len(v) != n or any(int(e) < 1 for e in v):
            raise ShapeError(f"{name}: {pname} must be {n} positive ints for {x}; got {v}")
    if len(padding) != n:
        raise ShapeError(f"{name}: padding needs {n} (low, high) pairs for {x}; got {padding}")
    return window_out_shape(x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)


select_and_gather_add_p = register(Primitive("select_and_gather_add"))
select_and_scatter_add_p = register(Primitive("select_and_scatter_add"))
for _p in (select_and_gather_add_p, select_and_scatter_add_p):
    _p.def_traits(fusion="kernel", kernel="pooling")


@select_and_gather_add_p.def_abstract_eval
def _gather_abstract(t, x, **params):
    out = _check("select_and_gather_add", t, x, **params)
    if t.shape != x.shape:
        raise ShapeError(f"select_and_gather_add: the tangent {t} must have the operand's shape {x.shape}")
    return ShapedArray(out, x.dtype, t.weak_type)


@select_and_scatter_add_p.def_abstract_eval
def _scatter_abstract(c, x, **params):
    out = _check("select_and_scatter_add", c, x, **params)
    if c.shape != out:
        raise ShapeError(f"select_and_scatter_add: the cotangent {c} must have the pooled shape {out}")
    return ShapedArray(x.shape, x.dtype, c.weak_type)


def _selection(x, *, op, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    """(window offsets, per offset: (slices of the padded dilated operand, selected mask), counts,
    the padded dilated shape, the slices that place x in it) in numpy."""
    x = np.asarray(x)
    shape = tuple(_dilate(d, b) for d, b in zip(x.shape, base_dilation))
    fill = -np.inf if op == "max" else np.inf
    lows = [builtins.max(lo, 0) for lo, _ in padding]
    padded_shape = tuple(s + builtins.max(lo, 0) + builtins.max(hi, 0) for s, (lo, hi) in zip(shape, padding))
    place = tuple(slice(lo, lo + s, b) for lo, s, b in zip(lows, shape, base_dilation))
    values = np.full(padded_shape, fill, np.float64)
    real = np.zeros(padded_shape, bool)
    values[place] = x
    real[place] = True
    crop = tuple(slice(-builtins.min(lo, 0), padded_shape[k] + builtins.min(hi, 0)) for k, (lo, hi) in enumerate(padding))
    out_shape = window_out_shape(x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
    windows = []
    for kpos in itertools.product(*[range(w) for w in window_dimensions]):
        sl = tuple(slice(c.start + k * wd, c.start + k * wd + s * (o - 1) + 1, s) if o else slice(0, 0)
                   for c, k, wd, s, o in zip(crop, kpos, window_dilation, window_strides, out_shape))
        windows.append(sl)
    extreme = np.full(out_shape, fill)
    with np.errstate(invalid="ignore"):
        for sl in windows:
            v = np.where(real[sl], values[sl], fill)
            extreme = np.maximum(extreme, v) if op == "max" else np.minimum(extreme, v)
        hits = [real[sl] & (values[sl] == extreme) for sl in windows]
    counts = np.maximum(sum(h.astype(np.int64) for h in hits), 1) if hits else np.ones(out_shape, np.int64)
    return windows, hits, counts, padded_shape, place


@select_and_gather_add_p.def_impl
def _gather_impl(t, x, **params):
    t = np.asarray(t)
    windows, hits, counts, padded_shape, place = _selection(x, **params)
    tp = np.zeros(padded_shape, np.float64)
    tp[place] = t
    total = np.zeros(counts.shape, np.float64)
    for sl, hit in zip(windows, hits):
        total += np.where(hit, tp[sl], 0.0)
    return (total / counts).astype(t.dtype)


@select_and_scatter_add_p.def_impl
def _scatter_impl(c, x, **params):
    c = np.asarray(c)
    windows, hits, counts, padded_shape, place = _selection(x, **params)
    share = c.astype(np.float64) / counts
    out = np.zeros(padded_shape, np.float64)
    for sl, hit in zip(windows, hits):
        out[sl] += np.where(hit, share, 0.0)
    return out[place].astype(c.dtype)


def select_and_gather_add(t, x, **params):
    """For each window of x, the mean of t over the positions attaining its extremum (params: op,
    window_dimensions, window_strides, padding as (low, high) pairs, base_dilation, window_dilation)."""
    select_and_gather_add_p.abstract_eval(get_aval(t), get_aval(x), **params)  # checks eagerly too
    return select_and_gather_add_p.bind(t, x, **params)


def select_and_scatter_add(c, x, **params):
    """Each window's c shared evenly among the positions of x attaining its extremum, summed per position."""
    select_and_scatter_add_p.abstract_eval(get_aval(c), get_aval(x), **params)  # checks eagerly too
    return select_and_scatter_add_p.bind(c, x, **params)


# ----------------------------------------------------------------------------- rules


def _linear_jvp(prim):
    def jvp(primals, tangents, **params):
        (s, x), (ds, _) = primals, tangents  # the selection is piecewise constant in x: no derivative
        out = prim.bind(s, x, **params)
        if isinstance(ds, Zero):
            return out, Zero(tangent_aval(get_aval(out)))
        return out, prim.bind(ds, x, **params)
    return jvp


def _transpose_to(other):
    def transpose(ct, s, x, **params):
        if is_linear(x):
            raise AssertionError(f"{other.name}'s transpose: the operand selecting the windows must be known")
        if isinstance(ct, Zero):
            return [None, None]
        return [other.bind(ct, x, **params), None]
    return transpose


def _batching(prim):
    def batch(values, dims, *, axis_size, op, window_dimensions, window_strides, padding, base_dilation,
              window_dilation):
        s, x = (move_batch_axis(v, d, 0, axis_size) for v, d in zip(values, dims))
        out = prim.bind(s, x, op=op, window_dimensions=(1,) + tuple(window_dimensions),
                        window_strides=(1,) + tuple(window_strides), padding=((0, 0),) + tuple(padding),
                        base_dilation=(1,) + tuple(base_dilation), window_dilation=(1,) + tuple(window_dilation))
        return out, 0
    return batch


select_and_gather_add_p.jvp_rule = _linear_jvp(select_and_gather_add_p)
select_and_scatter_add_p.jvp_rule = _linear_jvp(select_and_scatter_add_p)
select_and_gather_add_p.transpose_rule = _transpose_to(select_and_scatter_add_p)
select_and_scatter_add_p.transpose_rule = _transpose_to(select_and_gather_add_p)
select_and_gather_add_p.batching_rule = _batching(select_and_gather_add_p)
select_and_scatter_add_p.batching_rule = _batching(select_and_scatter_add_p)
