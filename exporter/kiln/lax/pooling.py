"""Windowed reductions: `kiln.lax.reduce_window` (sum / max / min pooling) with JAX's semantics.

One primitive, `reduce_window[op, window_dimensions, window_strides, padding,
base_dilation, window_dilation]`, op in {'add', 'max', 'min'}. Padding and
the holes of base dilation hold the op's identity (0, -inf / dtype min,
+inf / dtype max), as XLA pads with the init value.

Derivatives: the sum is linear; its transpose is again a windowed sum over
the cotangent (JAX's _reduce_window_sum_transpose_rule with lax.pad folded
into base dilation and padding). For max/min, the tangent of each output is
the mean of the tangents at the window positions that attain the extremum
(`pooling_select.select_and_gather_add`, whose transpose select_and_scatter_add
is the gradient): kernels select the positions again from the operand, so no
index tensor or operand-sized constant exists.
"""
from __future__ import annotations

import builtins
import itertools

import numpy as np

from ..core import dtypes
from ..core.ad_util import Zero
from ..core.aval import ShapedArray
from ..core.primitive import Primitive, register
from ..core.trace import Tracer, get_aval
from ..transforms.batching import move_batch_axis
from ..transforms.jvp import tangent_aval
from . import prims
from .conv import _vjp_lhs_padding, dilate_dim, padtype_to_pads
from .operands import asarray, broadcast_to
from .pooling_select import select_and_gather_add_p
from .prims import ShapeError

__all__ = ["reduce_window", "add", "max", "min", "reduce_window_identity"]

_OPS = ("add", "max", "min")


def reduce_window_identity(op: str, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if op == "add":
        return np.zeros((), dtype)
    if dtypes.is_float(dtype):
        return np.asarray(-np.inf if op == "max" else np.inf, dtype)
    if dtype.kind == "b":
        return np.asarray(op == "min", dtype)
    info = np.iinfo(dtype)
    return np.asarray(info.min if op == "max" else info.max, dtype)


def window_out_shape(shape, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    out = []
    for d, w, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding, base_dilation, window_dilation):
        padded = dilate_dim(d, bd) + lo + hi
        out.append(builtins.max(0, (padded - dilate_dim(w, wd)) // s + 1))
    return tuple(out)


reduce_window_p = register(Primitive("reduce_window"))
reduce_window_p.def_traits(fusion="kernel", kernel="pooling")


@reduce_window_p.def_abstract_eval
def _abstract(x, *, op, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    if op not in _OPS:
        raise ShapeError(f"reduce_window: op must be one of {_OPS}; got {op!r}")
    if op == "add" and dtypes.is_bool(x.dtype):
        raise ShapeError("reduce_window: add over bool is not supported; convert to a number type first")
    n = x.ndim
    for name, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                    ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if len(v) != n or any(int(e) < 1 for e in v):
            raise ShapeError(f"reduce_window: {name} must be {n} positive ints for {x}; got {v}")
    if len(padding) != n:
        raise ShapeError(f"reduce_window: padding needs {n} (low, high) pairs for {x}; got {padding}")
    shape = window_out_shape(x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
    return ShapedArray(shape, x.dtype, x.weak_type)


@reduce_window_p.def_impl
def reduce_window_reference(x, *, op, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    """The numpy reference: dilate and pad with the identity, combine one strided slice per window offset."""
    x = np.asarray(x)
    dtype = x.dtype
    fill = reduce_window_identity(op, dtype)
    work = np.float64 if (op == "add" and dtypes.is_float(dtype)) else dtype
    shape = tuple(dilate_dim(d, b) for d, b in zip(x.shape, base_dilation))
    dilated = np.full(shape, fill, work)
    dilated[tuple(slice(None, None, b) for b in base_dilation)] = x
    widths = [(builtins.max(lo, 0), builtins.max(hi, 0)) for lo, hi in padding]
    padded = np.pad(dilated, widths, constant_values=fill)
    padded = padded[tuple(slice(-builtins.min(lo, 0), padded.shape[k] + builtins.min(hi, 0)) for k, (lo, hi) in enumerate(padding))]
    out_shape = window_out_shape(x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
    out = np.full(out_shape, fill, work)
    combine = {"add": np.add, "max": np.maximum, "min": np.minimum}[op]
    if out.size:
        for kpos in itertools.product(*[range(w) for w in window_dimensions]):
            sl = tuple(slice(k * wd, k * wd + s * (o - 1) + 1, s)
                       for k, wd, s, o in zip(kpos, window_dilation, window_strides, out_shape))
            with np.errstate(all="ignore"):
                out = combine(out, padded[sl])
    with np.errstate(all="ignore"):
        return np.asarray(out).astype(dtype)


# ----------------------------------------------------------------------------- public API

# Functions of the layers above accepted as reduce_window's computation: function -> op name.
_EXTRA_WINDOW_OPS: dict = {}


def register_window_op(fn, op: str) -> None:
    """Lets reduce_window accept `fn` (kiln.numpy.maximum, say) as the computation `op`."""
    _EXTRA_WINDOW_OPS[fn] = op


def _op_name(op) -> str:
    if isinstance(op, str) and op in _OPS:
        return op
    names = {add: "add", max: "max", min: "min", np.add: "add", np.maximum: "max", np.minimum: "min",
             prims.add: "add", prims.max: "max", prims.min: "min"}
    names.update(_EXTRA_WINDOW_OPS)
    try:
        return names[getattr(op, "__kiln_unwrapped__", op)]  # a public function returning kiln arrays
    except (KeyError, TypeError):
        raise ValueError(
            f"kiln.lax.reduce_window supports op kiln.lax.add, kiln.lax.max or kiln.lax.min (or 'add'/'max'/'min'); "
            f"got {op!r}. Write other window reductions from these (e.g. average pooling = sum / count)"
        ) from None


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None, padding="VALID",
                  base_dilation=None, window_dilation=None):
    """JAX's lax.reduce_window for computation in {kiln.lax.add, kiln.lax.max, kiln.lax.min}.

    init_value must be a concrete scalar: the op's identity (0 for add) or,
    for max/min, any value (it takes part in every window).
    padding: 'SAME', 'VALID' or one (low, high) pair per dimension.
    """
    op = _op_name(computation)
    x = asarray(operand)
    a = get_aval(x)
    n = a.ndim

    def ints(v, name, default=1):
        if v is None:
            return (default,) * n
        v = tuple(int(e) for e in v)
        if len(v) != n:
            raise ValueError(f"reduce_window: {name} needs {n} values (one per dimension of the operand {a.shape}); got {v}")
        return v

    window_dimensions = ints(window_dimensions, "window_dimensions")
    window_strides = ints(window_strides, "window_strides")
    base_dilation = ints(base_dilation, "base_dilation")
    window_dilation = ints(window_dilation, "window_dilation")
    if isinstance(init_value, Tracer):
        raise ValueError("reduce_window: init_value must be a concrete scalar (a Python or numpy number), not a traced value")
    init = np.asarray(init_value)
    if init.shape != ():
        raise ValueError(f"reduce_window: init_value must be a scalar; got shape {init.shape}")
    identity = reduce_window_identity(op, a.dtype)
    if op == "add" and init != 0:
        raise ValueError(f"reduce_window with add: init_value must be 0 (the identity of add); got {init_value!r}")
    dilated = [dilate_dim(d, b) for d, b in zip(a.shape, base_dilation)]
    pads = padtype_to_pads(dilated, [dilate_dim(w, d) for w, d in zip(window_dimensions, window_dilation)],
                           window_strides, padding)
    if n == 0:
        out = x
    else:
        params = dict(op=op, window_dimensions=window_dimensions, window_strides=window_strides, padding=pads,
                      base_dilation=base_dilation, window_dilation=window_dilation)
        reduce_window_p.abstract_eval(a, **params)  # checks shapes eagerly too
        out = reduce_window_p.bind(x, **params)
    if op != "add" and init.astype(a.dtype) != identity:
        combine = prims.max if op == "max" else prims.min
        out = combine.bind(out, broadcast_to(init.astype(a.dtype), get_aval(out).shape))
    return out


from .api import add, max, min  # noqa: E402,A004 - jax.lax's elementwise ops also name reduce_window's op


# ----------------------------------------------------------------------------- rules


def _sum_transpose(ct, x, *, op, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    assert op == "add"
    in_shape = x.aval.shape
    pads = _vjp_lhs_padding(in_shape, window_dimensions, window_strides, get_aval(ct).shape, padding,
                            base_dilation, window_dilation)
    out = reduce_window_p.bind(ct, op="add", window_dimensions=window_dimensions, window_strides=tuple(base_dilation),
                               padding=pads, base_dilation=tuple(window_strides), window_dilation=tuple(window_dilation))
    assert get_aval(out).shape == in_shape, (get_aval(out).shape, in_shape)
    return [out]


def _jvp(primals, tangents, *, op, **params):
    (x,), (t,) = primals, tangents
    out = reduce_window_p.bind(x, op=op, **params)
    if isinstance(t, Zero):
        return out, Zero(tangent_aval(get_aval(out)))
    if op == "add":
        return out, reduce_window_p.bind(t, op=op, **params)
    # the mean of the tangents at the positions attaining the extremum, selected again from x inside the
    # kernel (pooling_select); its transpose, select_and_scatter_add, is reverse mode's max-pool gradient
    return out, select_and_gather_add_p.bind(t, x, op=op, **params)


def _batching(values, dims, *, axis_size, op, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    x = move_batch_axis(values[0], dims[0], 0, axis_size)
    out = reduce_window_p.bind(
        x, op=op, window_dimensions=(1,) + tuple(window_dimensions), window_strides=(1,) + tuple(window_strides),
        padding=((0, 0),) + tuple(padding), base_dilation=(1,) + tuple(base_dilation),
        window_dilation=(1,) + tuple(window_dilation),
    )
    return out, 0


reduce_window_p.jvp_rule = _jvp
reduce_window_p.transpose_rule = _sum_transpose
reduce_window_p.batching_rule = _batching
