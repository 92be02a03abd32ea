"""kiln.nn: neural-network functions over kiln.numpy (differentiable, jit-able, vmap-able).

    import kiln.nn as nn
    y = nn.softmax(logits, axis=-1)

Activations: relu, relu6, gelu (tanh form or exact), silu (swish), sigmoid,
softplus. Normalizers: softmax, log_softmax, logsumexp, standardize.
Encoding: one_hot. Pooling and convolution helpers: max_pool, avg_pool,
sum_pool, conv (thin wrappers of kiln.lax.reduce_window /
conv_general_dilated).
"""
from __future__ import annotations

import math

import numpy as np

from . import numpy as knp
from .core import dtypes
from .lax import prims
from .numpy._base import asarray, aval, normalize_axes

__all__ = [
    "relu", "relu6", "gelu", "silu", "swish", "sigmoid", "softplus", "softmax", "log_softmax", "logsumexp",
    "one_hot", "standardize", "max_pool", "avg_pool", "sum_pool", "conv",
]


def _float(x):
    x = asarray(x)
    a = aval(x)
    if not dtypes.is_float(a.dtype):
        x = knp.astype(x, np.float32) if hasattr(knp, "astype") else knp.asarray(x, np.float32)
    return x


def _stop(x):
    from .transforms.api import stop_gradient

    return stop_gradient(x)


def relu(x):
    """max(x, 0); the gradient at 0 is 0."""
    x = asarray(x)
    return knp.where(knp.greater(x, 0), x, knp.zeros_like(x))


def relu6(x):
    """min(max(x, 0), 6)."""
    x = asarray(x)
    zero, six = knp.zeros_like(x), knp.full_like(x, 6)
    return knp.where(knp.greater(x, 0), knp.where(knp.less(x, 6), x, six), zero)


def sigmoid(x):
    """1 / (1 + exp(-x)), computed as (1 + tanh(x/2)) / 2: no overflow for any x."""
    x = _float(x)
    return 0.5 * (1 + knp.tanh(0.5 * x))


def silu(x):
    """x * sigmoid(x) (swish)."""
    x = _float(x)
    return x * sigmoid(x)


swish = silu


def softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)): no overflow for large x."""
    x = _float(x)
    log1p = getattr(knp, "log1p", None)
    tail = knp.exp(-knp.abs(x))
    return knp.maximum(x, 0) + (log1p(tail) if log1p is not None else knp.log(1 + tail))


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
# Numerical Recipes' erfc (Chebyshev fit, fractional error < 1.2e-7 everywhere), used until kiln.numpy has erfc.
_ERFC_COEFFS = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
                1.48851587, -0.82215223, 0.17087277)


def _erfc(z):
    native = getattr(knp, "erfc", None)
    if native is not None:
        return native(z)
    az = knp.abs(z)
    t = 1 / (1 + 0.5 * az)
    poly = _ERFC_COEFFS[-1]
    for c in reversed(_ERFC_COEFFS[:-1]):
        poly = c + t * poly
    ans = t * knp.exp(-az * az + poly)
    return knp.where(knp.greater_equal(z, 0), ans, 2 - ans)


def gelu(x, approximate: bool = True):
    """GELU. approximate=True: the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as JAX's default;
    approximate=False: the exact x * Phi(x) = 0.5 x erfc(-x / sqrt(2))."""
    x = _float(x)
    if approximate:
        return 0.5 * x * (1 + knp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))
    erf = getattr(knp, "erf", None)
    if erf is not None:
        return 0.5 * x * (1 + erf(_INV_SQRT2 * x))
    return 0.5 * x * _erfc(-_INV_SQRT2 * x)


def _axes(x, axis, where):
    return normalize_axes(axis, aval(x).ndim, where)


def logsumexp(a, axis=None, keepdims: bool = False):
    """log(sum(exp(a), axis)), stable: the max is subtracted first (and -inf rows give -inf, not nan)."""
    x = _float(a)
    axes = _axes(x, axis, "logsumexp")
    if not axes:
        return x
    m = _stop(knp.max(x, axis=axes, keepdims=True))
    finite = knp.less(knp.abs(m), np.inf)
    m = knp.where(finite, m, knp.zeros_like(m))
    out = knp.log(knp.sum(knp.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdims else knp.squeeze(out, axis=axes)


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x), axis), with the max subtracted first."""
    x = _float(x)
    axes = _axes(x, axis, "softmax")
    m = _stop(knp.max(x, axis=axes, keepdims=True))
    e = knp.exp(x - m)
    return e / knp.sum(e, axis=axes, keepdims=True)


def log_softmax(x, axis=-1):
    """x - logsumexp(x, axis, keepdims=True)."""
    x = _float(x)
    axes = _axes(x, axis, "log_softmax")
    m = _stop(knp.max(x, axis=axes, keepdims=True))
    shifted = x - m
    return shifted - knp.log(knp.sum(knp.exp(shifted), axis=axes, keepdims=True))


def one_hot(x, num_classes: int, *, dtype=np.float32, axis=-1):
    """One-hot encoding of integer x: a new axis of size num_classes (at `axis`), 1 where x equals the index.
    Out-of-range values (negative or >= num_classes) give all-zero rows, as in JAX."""
    x = asarray(x)
    a = aval(x)
    if not (dtypes.is_int(a.dtype) or dtypes.is_bool(a.dtype)):
        raise TypeError(f"one_hot: x must be an integer array; got {a.dtype}. Convert it with astype first")
    num_classes = int(num_classes)
    out_ndim = a.ndim + 1
    axis = int(axis)
    if not -out_ndim <= axis < out_ndim:
        raise ValueError(f"one_hot: axis {axis} is out of bounds for a result of {out_ndim} dimensions")
    axis %= out_ndim
    shape = a.shape[:axis] + (num_classes,) + a.shape[axis:]
    index_dtype = np.dtype(np.int64)
    if isinstance(x, np.ndarray) and not _tracing():
        classes = np.arange(num_classes, dtype=index_dtype).reshape([-1 if i == axis else 1 for i in range(out_ndim)])
        return (np.expand_dims(x.astype(index_dtype), axis) == classes).astype(dtype)
    classes = prims.iota.bind(shape=shape, dimension=axis, dtype=index_dtype)
    keep = tuple(i for i in range(out_ndim) if i != axis)
    spread = prims.broadcast_in_dim.bind(_convert(x, index_dtype), shape=shape, broadcast_dimensions=keep)
    return _convert(prims.eq.bind(spread, classes), np.dtype(dtype))


def _tracing() -> bool:
    from .core.trace import current_graph_trace

    return current_graph_trace() is not None


def _convert(x, dtype):
    from .numpy._base import convert

    return convert(x, dtype)


def standardize(x, axis=-1, mean=None, variance=None, epsilon: float = 1e-5, where=None):
    """(x - mean) / sqrt(variance + epsilon) over `axis` (layer-norm without scale and shift).
    mean and variance default to the statistics of x over axis (variance = mean((x - mean)^2))."""
    if where is not None:
        raise ValueError("standardize: the `where` mask is not supported; pass mean and variance computed as you need")
    x = _float(x)
    axes = _axes(x, axis, "standardize")
    if mean is None:
        mean = knp.mean(x, axis=axes, keepdims=True)
    if variance is None:
        centered = x - mean
        variance = knp.mean(centered * centered, axis=axes, keepdims=True)
    return (x - mean) / knp.sqrt(variance + epsilon)


# ----------------------------------------------------------------------------- pooling and convolution


def _window(x, window_shape, strides, channels_last: bool):
    """Full-rank window/stride tuples from spatial ones (batch and channel dims untouched)."""
    nd = aval(x).ndim
    window_shape = tuple(int(w) for w in window_shape)
    nsp = len(window_shape)
    strides = tuple(int(s) for s in strides) if strides is not None else (1,) * nsp
    if len(strides) != nsp:
        raise ValueError(f"pooling: strides {strides} must have one entry per window dimension {window_shape}")
    if nd == nsp:
        return window_shape, strides
    lead = nd - nsp - (1 if channels_last else 0)
    if lead < 0:
        raise ValueError(f"pooling: a {nsp}-d window does not fit an array of {nd} dimensions")
    tail = (1,) if channels_last else ()
    return (1,) * lead + window_shape + tail, (1,) * lead + strides + tail


def _pad_full(x, padding, window_shape, strides, channels_last: bool):
    if isinstance(padding, str):
        return padding
    nd = aval(x).ndim
    pads = tuple(tuple(p) for p in padding)
    nsp = len(pads)
    lead = nd - nsp - (1 if channels_last and nd != nsp else 0)
    tail = ((0, 0),) if channels_last and nd != nsp else ()
    return ((0, 0),) * lead + pads + tail


def max_pool(x, window_shape, strides=None, padding="VALID", channels_last: bool = True):
    """Max pooling over the spatial dims (flax's nn.max_pool layout: (batch..., spatial..., channels))."""
    from .lax.pooling import reduce_window

    x = asarray(x)
    w, s = _window(x, window_shape, strides, channels_last)
    return reduce_window(x, -np.inf if dtypes.is_float(aval(x).dtype) else _min_of(aval(x).dtype), "max", w, s,
                         _pad_full(x, padding, window_shape, strides, channels_last))


def _min_of(dtype):
    return np.iinfo(dtype).min if not dtypes.is_bool(dtype) else False


def sum_pool(x, window_shape, strides=None, padding="VALID", channels_last: bool = True):
    from .lax.pooling import reduce_window

    x = asarray(x)
    w, s = _window(x, window_shape, strides, channels_last)
    return reduce_window(x, 0, "add", w, s, _pad_full(x, padding, window_shape, strides, channels_last))


def avg_pool(x, window_shape, strides=None, padding="VALID", channels_last: bool = True,
             count_include_pad: bool = True):
    """Average pooling: the window sum divided by the window size (count_include_pad=True, as flax), or
    by the number of real (non-padding) elements in each window."""
    x = _float(x)
    total = sum_pool(x, window_shape, strides, padding, channels_last)
    if count_include_pad:
        return total / float(np.prod(window_shape))
    from .lax.pooling import reduce_window_p

    a = aval(x)
    ones = np.ones(a.shape, a.dtype)
    w, s = _window(x, window_shape, strides, channels_last)
    from .lax.conv import padtype_to_pads

    pads = padtype_to_pads(a.shape, w, s, _pad_full(x, padding, window_shape, strides, channels_last))
    counts = reduce_window_p.impl(ones, op="add", window_dimensions=w, window_strides=s, padding=pads,
                                  base_dilation=(1,) * a.ndim, window_dilation=(1,) * a.ndim)
    return total / counts


def conv(x, w, strides=None, padding="SAME", dilation=None, feature_group_count: int = 1):
    """Channels-last convolution: x (batch, spatial..., in), w (spatial..., in / groups, out)."""
    from .lax.conv import conv_general_dilated

    nd = aval(asarray(x)).ndim
    sp = "".join("HWDXYZUV"[i] for i in range(nd - 2))
    return conv_general_dilated(x, w, strides or (1,) * (nd - 2), padding, rhs_dilation=dilation,
                                dimension_numbers=(f"N{sp}C", f"{sp}IO", f"N{sp}C"),
                                feature_group_count=feature_group_count)
