"""kiln.nn: neural-network functions over kiln.numpy (differentiable, jit-able, vmap-able).

    import kiln.nn as nn
    y = nn.softmax(logits, axis=-1)

Activations: relu, relu6, gelu (tanh form or exact), silu (swish), sigmoid,
log_sigmoid, softplus; and jax.nn's elu, celu, selu, leaky_relu, glu, hard_tanh,
hard_sigmoid, hard_silu (hard_swish), soft_sign, squareplus, sparse_plus,
sparse_sigmoid, mish, log1mexp, identity, tanh (float16/bfloat16 computed in float32).
Normalizers: softmax, log_softmax, logsumexp, logmeanexp, standardize.
Encoding: one_hot. Pooling and convolution helpers: max_pool, avg_pool,
sum_pool, conv (thin wrappers of kiln.lax.reduce_window /
conv_general_dilated).
"""
from __future__ import annotations

import math

import numpy as np

from . import numpy as knp
from .core import dtypes
from .lax import _special_ops as _ops
from .lax import math_prims
from .lax import prims
from .lax.special_math import kernel as _kernel
from .numpy._base import asarray, aval, normalize_axes
from .scipy import special

__all__ = [
    "relu", "relu6", "gelu", "silu", "swish", "sigmoid", "log_sigmoid", "softplus", "softmax", "log_softmax", "logsumexp",
    "one_hot", "standardize", "max_pool", "avg_pool", "sum_pool", "conv",
]


def _float(x):
    x = asarray(x)
    a = aval(x)
    if not dtypes.is_float(a.dtype):
        x = knp.astype(x, np.float32)
    return x


def _wide(x, f32_to_f64: bool = False):
    """(x in its compute dtype, the result dtype). float16 and bfloat16 are storage types: computed in
    float32 and rounded once at the end; f32_to_f64 computes float32 in float64 too."""
    x = _float(x)
    dtype = aval(x).dtype
    if dtype.itemsize == 2 or (f32_to_f64 and dtype == np.float32):
        x = knp.astype(x, np.float64 if f32_to_f64 else np.float32)
    return x, dtype


def _narrow(y, dtype):
    return y if aval(y).dtype == dtype else knp.astype(y, dtype)


def relu(x):
    """max(x, 0); the gradient at 0 is 0, NaN stays NaN (as numpy.maximum and JAX)."""
    x = asarray(x)
    return knp.where(knp.less_equal(x, 0), knp.zeros_like(x), x)


def relu6(x):
    """min(max(x, 0), 6); NaN stays NaN."""
    x = asarray(x)
    zero, six = knp.zeros_like(x), knp.full_like(x, 6)
    return knp.where(knp.less_equal(x, 0), zero, knp.where(knp.greater_equal(x, 6), six, x))


def _tail(x):
    """(x >= 0, exp(-|x|)) with -|x| written as a select, so that the derivative at 0 is that of the x >= 0 branch."""
    pos = knp.greater_equal(x, 0)
    return pos, knp.exp(knp.where(pos, knp.negative(x), x))


def _sigmoid(x):
    pos, e = _tail(x)
    one_plus = knp.add(e, 1)
    return knp.where(pos, knp.reciprocal(one_plus), knp.divide(e, one_plus))


def sigmoid(x):
    """1 / (1 + exp(-x)), with e = exp(-|x|): 1 / (1 + e) for x >= 0 and e / (1 + e) below, so that both tails keep
    their relative accuracy (sigmoid(-100) = 3.7e-44 in float32) and nothing overflows."""
    x, dtype = _wide(x)
    return _narrow(_sigmoid(x), dtype)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x): -log1p(exp(-x)) for x >= 0, x - log1p(exp(x)) below."""
    x, dtype = _wide(x)
    pos, e = _tail(x)
    l1p = knp.log1p(e)
    return _narrow(knp.where(pos, knp.negative(l1p), knp.subtract(x, l1p)), dtype)


def silu(x):
    """x * sigmoid(x) (swish): x / (1 + e) for x >= 0 and x * e / (1 + e) below, e = exp(-|x|). Where e is
    subnormal (x < -87 in float32, -708 in float64) the numerator is x * h * h with h = exp(x / 2), so that the
    result keeps its relative accuracy down to where it is subnormal itself."""
    x, dtype = _wide(x)
    pos, e = _tail(x)
    one_plus = knp.add(e, 1)
    half = knp.exp(knp.multiply(knp.minimum(x, 0), 0.5))
    deep = knp.less(x, -87.0 if aval(x).dtype == np.float32 else -708.0)
    numerator = knp.where(deep, knp.multiply(knp.multiply(x, half), half), knp.multiply(x, e))
    return _narrow(knp.where(pos, knp.divide(x, one_plus), knp.divide(numerator, one_plus)), dtype)


swish = silu


def softplus(x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): no overflow for large x, relative accuracy for x << 0."""
    x, dtype = _wide(x)
    pos, e = _tail(x)
    l1p = knp.log1p(e)
    return _narrow(knp.where(pos, knp.add(x, l1p), l1p), dtype)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_GELU_K1, _GELU_K3 = math_prims.GELU_K1, math_prims.GELU_K3  # gelu(x) = x sigmoid(z), z = K1 x + K3 x^3
_GELU_X_CLAMP = math_prims.GELU_CLAMP  # |x| clamped here in z and z': gelu is x or -0 there, its derivative 1 or -0
_GELU_DEEP = math_prims.GELU_DEEP  # below, e = exp(-|z|) (z < -57) is formed as e_s = e 2^64, the results scaled last


def _gelu_tanh32_parts(x):
    """The shared part of float32 gelu (tanh form) and its derivative, for float32 x: (x >= 0, x < -8.5, xc, e_s,
    1 + e) with e = exp(-|z|), e_s = e 2^64 for x < -8.5 (where e would be subnormal) and e elsewhere, xc = x clamped
    to +-12.5. e_s is the primitive gelu_exp32 (kiln.compiler.mathlib's gelu_exp): z computed as two float32,
    hi + lo, and exp(hi + lo) in float32 with lo inside its reduction, so that the steep tail does not multiply the
    rounding of z (a float32 z is off by about |z| 2^-24, and exp(z) by as much relative: 100 ulp at x = -10).
    Below -8.5, e < 2^-82 and 1 + e is 1 exactly: the select takes that 1 (the same bits as adding e), so e itself
    is never formed."""
    xc = _ops.where(_ops.less(x, np.float32(-_GELU_X_CLAMP)), np.float32(-_GELU_X_CLAMP),
                   _ops.where(_ops.greater(x, np.float32(_GELU_X_CLAMP)), np.float32(_GELU_X_CLAMP), x))  # NaN stays
    pos = _ops.greater_equal(x, np.float32(0))
    deep = _ops.less(x, np.float32(_GELU_DEEP))
    e_s = math_prims.P["gelu_exp32"].bind(x)
    one_plus_e = _ops.where(deep, _ops.full_like(x, 1), _ops.add(e_s, np.float32(1)))
    return pos, deep, xc, e_s, one_plus_e


def _gelu_unscale(deep, v):
    """v 2^-64 where deep (x < -8.5: v was formed from e_s = e 2^64), v elsewhere: a subnormal result is rounded
    once, by this product."""
    return _ops.where(deep, _ops.multiply(v, np.float32(2.0 ** -64)), v)


def _gelu_tanh32_kernel(x):
    """x / (1 + e) for x >= 0, x e / (1 + e) below (e = exp(-|z|)), with one division; where e is tiny the quotient
    x e_s / (1 + e) is formed at 2^64 times the result and scaled last, so a subnormal result is rounded once."""
    pos, deep, _, e_s, one_plus_e = _gelu_tanh32_parts(x)
    numerator = _ops.where(pos, x, _ops.multiply(x, e_s))
    return _gelu_unscale(deep, _ops.divide(numerator, one_plus_e))


def _gelu_tanh32_derivative(x):
    """gelu'(x) = s (1 + x z' (1 - s)), s = sigmoid(z), z' = K1 + 3 K3 x^2: r (1 + x z' e r) for x >= 0 and
    e r (1 + x z' r) below, r = 1 / (1 + e); e from the same double-float z as the value (the left tail's
    e r is formed scaled, as in the value). x z' uses x clamped to +-12, where the result is 1 or 0 already."""
    pos, deep, xc, e_s, one_plus_e = _gelu_tanh32_parts(x)
    r = _ops.divide(np.float32(1), one_plus_e)
    xz = _ops.multiply(xc, _ops.add(_ops.multiply(_ops.multiply(xc, xc), np.float32(3 * _GELU_K3)), np.float32(_GELU_K1)))
    above = _ops.multiply(r, _ops.add(_ops.multiply(xz, _ops.multiply(e_s, r)), np.float32(1)))  # e_s = e for x >= 0
    below = _gelu_unscale(deep, _ops.multiply(_ops.multiply(e_s, r), _ops.add(_ops.multiply(xz, r), np.float32(1))))
    return _ops.where(pos, above, below)


# float32 gelu (tanh form) as one primitive (a kiln.lax.special_math kernel, inlined before fusion) whose partial
# derivative is _gelu_tanh32_derivative, a composition of lax operations (higher derivatives go through its formula)
_gelu_tanh32 = _kernel("gelu_tanh32", np.float32)(_gelu_tanh32_kernel)
_gelu_tanh32.defpartials(lambda x, out: [lambda: _gelu_tanh32_derivative(x)])


def gelu(x, approximate: bool = True):
    """GELU. approximate=True: the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as JAX's default,
    computed as x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) (the same function, without 1 + tanh cancelling
    to 0 for x << 0); approximate=False: the exact x * Phi(x) = 0.5 x erfc(-x / sqrt(2)).

    The argument z of sigmoid or erfc carries a rounding error that the steep left tail multiplies (by about
    0.2 |x|^3 or x^2). float32's tanh form computes z as two float32 (hi + lo: double-float32 arithmetic with
    fused multiply-adds, or float64 split in two on x86-64 without FMA) and takes
    exp(hi + lo) in float32, lo inside exp's range reduction (the primitive gelu_exp32; docs/accuracy.md states
    the bound); its derivative is computed the same way
    (_gelu_tanh32_derivative). The exact form in float32, and both forms in float16 and bfloat16, are
    computed in float64 and rounded once (0 ulp measured)."""
    from .lax.math_prims import erfc

    x = _float(x)
    if approximate and aval(x).dtype == np.float32:
        return _gelu_tanh32(x)
    x, dtype = _wide(x, f32_to_f64=True)
    if approximate:
        inner = knp.multiply(knp.add(x, knp.multiply(knp.multiply(knp.multiply(x, x), x), 0.044715)),
                             2 * _SQRT_2_OVER_PI)
        out = knp.multiply(x, _sigmoid(inner))
    else:
        out = knp.multiply(knp.multiply(x, 0.5), erfc(knp.multiply(x, -_INV_SQRT2)))
    return _narrow(out, dtype)


logsumexp = special.logsumexp  # jax.nn.logsumexp is jax.scipy.special.logsumexp (b=, return_sign=, where=)


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x), axis), with the max subtracted first (kiln.scipy.special.softmax, axis -1 by default)."""
    return special.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    """x - logsumexp(x, axis, keepdims=True) (kiln.scipy.special.log_softmax, axis -1 by default)."""
    return special.log_softmax(x, axis=axis)


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
    mean and variance default to the statistics of x over axis (variance = mean((x - mean)^2)).
    float16 and bfloat16 are computed in float32; the result has the dtype of x (promoted with mean and variance
    where those are given as arrays)."""
    if where is not None:
        raise ValueError("standardize: the `where` mask is not supported; pass mean and variance computed as you need")
    x = _float(x)
    infos = [(aval(v).dtype, aval(v).weak_type) for v in (x, mean, variance) if v is not None]
    out_dtype, _ = dtypes.result_type(*infos)
    x, _ = _wide(x)
    axes = normalize_axes(axis, aval(x).ndim, "standardize")
    if mean is None:
        mean = knp.mean(x, axis=axes, keepdims=True)
    if variance is None:
        centered = knp.subtract(x, mean)
        variance = knp.mean(knp.multiply(centered, centered), axis=axes, keepdims=True)
    out = knp.divide(knp.subtract(x, mean), knp.sqrt(knp.add(variance, epsilon)))
    return _narrow(out, np.dtype(out_dtype))


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
    dtype = aval(x).dtype
    if dtype == dtypes.BFLOAT16:  # max is exact: pooled in float32 (reduce_window takes bfloat16 for an integer)
        x = knp.astype(x, np.float32)
    w, s = _window(x, window_shape, strides, channels_last)
    out = reduce_window(x, -np.inf if dtypes.is_float(dtype) else _min_of(dtype), "max", w, s,
                        _pad_full(x, padding, window_shape, strides, channels_last))
    return _narrow(out, dtype)


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
        return knp.divide(total, float(np.prod(window_shape)))
    from .lax.pooling import reduce_window_p

    a = aval(x)
    ones = np.ones(a.shape, a.dtype)
    w, s = _window(x, window_shape, strides, channels_last)
    from .lax.conv import padtype_to_pads

    pads = padtype_to_pads(a.shape, w, s, _pad_full(x, padding, window_shape, strides, channels_last))
    counts = reduce_window_p.impl(ones, op="add", window_dimensions=w, window_strides=s, padding=pads,
                                  base_dilation=(1,) * a.ndim, window_dilation=(1,) * a.ndim)
    return knp.divide(total, counts)


def conv(x, w, strides=None, padding="SAME", dilation=None, feature_group_count: int = 1):
    """Channels-last convolution: x (batch, spatial..., in), w (spatial..., in / groups, out)."""
    from .lax.conv import conv_general_dilated

    nd = aval(asarray(x)).ndim
    sp = "".join("HWDXYZUV"[i] for i in range(nd - 2))
    return conv_general_dilated(x, w, strides or (1,) * (nd - 2), padding, rhs_dilation=dilation,
                                dimension_numbers=(f"N{sp}C", f"{sp}IO", f"N{sp}C"),
                                feature_group_count=feature_group_count)


# ----------------------------------------------------------------------------- more of jax.nn's activations

__all__ += ["elu", "celu", "selu", "leaky_relu", "glu", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish",
            "soft_sign", "squareplus", "sparse_plus", "sparse_sigmoid", "mish", "log1mexp", "logmeanexp", "identity",
            "tanh"]


def elu(x, alpha=1.0):
    """x for x > 0, alpha (exp(x) - 1) below (expm1 of x where x <= 0 only, so that large x do not overflow)."""
    x, dtype = _wide(x)
    pos = knp.greater(x, 0)
    return _narrow(knp.where(pos, x, knp.multiply(alpha, knp.expm1(knp.where(pos, knp.zeros_like(x), x)))), dtype)


def celu(x, alpha=1.0):
    """max(x, 0) + alpha (exp(min(x, 0) / alpha) - 1): elu continuously differentiable in alpha."""
    x, dtype = _wide(x)
    negative = knp.expm1(knp.divide(knp.minimum(x, 0), alpha))
    return _narrow(knp.add(knp.maximum(x, 0), knp.multiply(alpha, negative)), dtype)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants (Klambauer et al. 2017)."""
    x, dtype = _wide(x)
    return _narrow(knp.multiply(_SELU_SCALE, elu(x, _SELU_ALPHA)), dtype)


def leaky_relu(x, negative_slope=1e-2):
    """x for x >= 0, negative_slope * x below."""
    x, dtype = _wide(x)
    return _narrow(knp.where(knp.greater_equal(x, 0), x, knp.multiply(negative_slope, x)), dtype)


def hard_tanh(x):
    """x clipped to [-1, 1] (NaN stays NaN)."""
    x = _float(x)
    return knp.where(knp.greater(x, 1), knp.ones_like(x), knp.where(knp.less(x, -1), knp.full_like(x, -1), x))


def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    x, dtype = _wide(x)
    return _narrow(knp.divide(relu6(knp.add(x, 3.0)), 6.0), dtype)


def hard_silu(x):
    """x * hard_sigmoid(x) (hard_swish)."""
    x, dtype = _wide(x)
    return _narrow(knp.multiply(x, hard_sigmoid(x)), dtype)


hard_swish = hard_silu


def soft_sign(x):
    """x / (|x| + 1)."""
    x, dtype = _wide(x)
    return _narrow(knp.divide(x, knp.add(knp.abs(x), 1)), dtype)


def squareplus(x, b=4):
    """(x + sqrt(x^2 + b)) / 2, a smooth relu."""
    x, dtype = _wide(x)
    return _narrow(knp.divide(knp.add(x, knp.sqrt(knp.add(knp.square(x), b))), 2), dtype)


def sparse_plus(x):
    """0 for x <= -1, (x + 1)^2 / 4 between, x for x >= 1."""
    x, dtype = _wide(x)
    middle = knp.divide(knp.square(knp.add(x, 1.0)), 4.0)
    return _narrow(knp.where(knp.less_equal(x, -1.0), knp.zeros_like(x),
                             knp.where(knp.greater_equal(x, 1.0), x, middle)), dtype)


def sparse_sigmoid(x):
    """(x + 1) / 2 clipped to [0, 1]."""
    x, dtype = _wide(x)
    return _narrow(knp.multiply(0.5, knp.clip(knp.add(x, 1.0), 0.0, 2.0)), dtype)


def mish(x):
    """x * tanh(softplus(x))."""
    x, dtype = _wide(x)
    return _narrow(knp.multiply(x, knp.tanh(softplus(x))), dtype)


def log1mexp(x):
    """log(1 - exp(-x)) for x >= 0: log(-expm1(-x)) below log 2, log1p(-exp(-x)) above (Maechler 2012)."""
    x, dtype = _wide(x)
    small = knp.less(x, math.log(2.0))
    return _narrow(knp.where(small, knp.log(knp.negative(knp.expm1(knp.negative(x)))),
                             knp.log1p(knp.negative(knp.exp(knp.negative(x))))), dtype)


def identity(x):
    """x itself, as an array."""
    return asarray(x)


def tanh(x):
    return knp.tanh(x)


def glu(x, axis=-1):
    """Gated linear unit: x split into two halves along axis, first * sigmoid(second)."""
    x = asarray(x)
    a = aval(x)
    axis = int(axis)
    if not -a.ndim <= axis < a.ndim:
        raise ValueError(f"glu: axis {axis} is out of bounds for an array of {a.ndim} dimensions")
    size = a.shape[axis]
    if size % 2:
        raise ValueError(f"glu: the size {size} of axis {axis} must be even, to split it into two halves")
    first, second = knp.split(x, 2, axis=axis)
    return knp.multiply(first, sigmoid(second))


def logmeanexp(x, axis=None, where=None, keepdims: bool = False):
    """logsumexp(x, axis) - log(n), n the number of elements reduced."""
    if where is not None:
        raise ValueError("logmeanexp: the `where` mask is not supported; select the elements first")
    x = asarray(x)
    lse = logsumexp(x, axis=axis, keepdims=keepdims)
    shape = aval(x).shape
    count = int(np.prod([shape[i] for i in normalize_axes(axis, len(shape), "logmeanexp")], dtype=np.int64))
    return knp.subtract(lse, np.asarray(math.log(count), aval(lse).dtype))


# ----------------------------------------------------------------------------- attention

__all__ += ["dot_product_attention"]


def _large_negative(dtype):
    """JAX's masked-logit value: -0.7 x the largest finite value (capped at float32's, so that it stays finite
    in the float32 softmax)."""
    biggest = min(float(_finfo_max(dtype)), float(np.finfo(np.float32).max))
    return -0.7 * biggest


def _finfo_max(dtype):
    import ml_dtypes

    return ml_dtypes.finfo(dtype).max


def _to_4d(t):
    t = asarray(t)
    nd = aval(t).ndim
    return knp.reshape(t, (1,) * (4 - nd) + aval(t).shape) if nd < 4 else t


def _grouped(t, groups, heads, kv_heads, name):
    """A (B, N or 1, T, S) bias or mask as (B, K or 1, G or 1, T, S), K x G = N query heads."""
    if t is None:
        return None
    b, n, tq, s = aval(t).shape
    if n == 1:
        return knp.reshape(t, (b, 1, 1, tq, s))
    if n != heads:
        raise ValueError(f"dot_product_attention: {name} has {n} heads; it needs 1 or the query's {heads}")
    return knp.reshape(t, (b, kv_heads, groups, tq, s))


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None, is_causal: bool = False,
                          query_seq_lengths=None, key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual: bool = False):
    """jax.nn.dot_product_attention (its 'xla' implementation): softmax(q k^T * scale + bias, masked) v.

    query (B, T, N, H), key and value (B, S, K, H), N a multiple of K (grouped-query attention); the batch axis
    may be left out. bias and mask (bool, True = attend) broadcast to (B, N, T, S); is_causal, local_window_size
    (left, right) and the sequence lengths add masks. As JAX: logits in float32 (float64 for float64 inputs),
    the softmax in float32, masked logits set to -0.7 x the largest float32, padded query rows zero.
    return_residual=True also gives logsumexp of the logits (B, T, N), gradients stopped."""
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: implementation {implementation!r} is not available in kiln; use "
                         "None or 'xla'")
    q_in = asarray(query)
    out_shape = aval(q_in).shape
    q, k, v = _to_4d(q_in), _to_4d(key), _to_4d(value)
    b, s, kv_heads, h = aval(k).shape
    if aval(v).shape != (b, s, kv_heads, h) or aval(v).dtype != aval(k).dtype:
        raise ValueError(f"dot_product_attention: value must have key's shape {(b, s, kv_heads, h)} and dtype "
                         f"{aval(k).dtype}; got {aval(v).shape} {aval(v).dtype}")
    qb, t, heads, qh = aval(q).shape
    if qb != b or qh != h or aval(q).dtype != aval(k).dtype:
        raise ValueError(f"dot_product_attention: query must be (B={b}, T, N, H={h}) of dtype {aval(k).dtype}; "
                         f"got {aval(q).shape} {aval(q).dtype}")
    if heads % kv_heads:
        raise ValueError(f"dot_product_attention: the number of query heads must be a multiple of key/value heads, "
                         f"but got {heads} vs {kv_heads}")
    if mask is not None and not dtypes.is_bool(aval(asarray(mask)).dtype):
        raise ValueError(f"dot_product_attention: mask must be bool; got {aval(asarray(mask)).dtype}")
    groups = heads // kv_heads
    dtype = aval(k).dtype
    logits_dtype = np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)
    scale = 1.0 / math.sqrt(h) if scale is None else scale
    qg = knp.reshape(q, (b, t, kv_heads, groups, h))
    logits = knp.einsum("btkgh,bskh->bkgts", qg, k, preferred_element_type=logits_dtype)
    logits = knp.multiply(logits, np.asarray(scale, logits_dtype))
    if bias is not None:
        logits = knp.astype(knp.add(logits, _grouped(_to_4d(bias), groups, heads, kv_heads, "bias")), logits_dtype)
    keep = None
    if mask is not None:
        keep = _grouped(_to_4d(mask), groups, heads, kv_heads, "mask")
    rows = np.arange(t)[:, None]
    cols = np.arange(s)[None, :]
    static = np.ones((t, s), bool)
    if is_causal:
        static &= cols <= rows
    if local_window_size is not None:
        left, right = (local_window_size, local_window_size) if isinstance(local_window_size, int) \
            else local_window_size
        static &= (rows <= cols + left) & (rows >= cols - right)
    if is_causal or local_window_size is not None:
        keep = static if keep is None else knp.logical_and(keep, static)
    q_lengths = None if query_seq_lengths is None else asarray(query_seq_lengths)
    if q_lengths is not None or key_value_seq_lengths is not None:
        padding = np.ones((1, t, s), bool)
        if q_lengths is not None:
            padding = knp.logical_and(padding, knp.less(np.arange(t)[None, :, None], q_lengths[:, None, None]))
        if key_value_seq_lengths is not None:
            kv_lengths = asarray(key_value_seq_lengths)
            padding = knp.logical_and(padding, knp.less(np.arange(s)[None, None, :], kv_lengths[:, None, None]))
        padding = knp.reshape(padding, (aval(padding).shape[0], 1, 1, t, s))
        keep = padding if keep is None else knp.logical_and(keep, padding)
    if keep is not None:
        logits = knp.where(keep, logits, np.asarray(_large_negative(logits_dtype), logits_dtype))
    logits32 = knp.astype(logits, np.float32)
    probs = knp.astype(softmax(logits32, axis=-1), dtype)
    encoded = knp.einsum("bkgts,bskh->btkgh", probs, v)
    encoded = knp.reshape(encoded, (b, t, heads, h))
    if q_lengths is not None:
        rows_kept = knp.less(np.arange(t)[None, :], q_lengths[:, None])
        encoded = knp.multiply(encoded, knp.astype(rows_kept, dtype)[:, :, None, None])
    encoded = knp.reshape(encoded, out_shape)
    if not return_residual:
        return encoded
    residual = knp.astype(logsumexp(logits32, axis=-1), dtype)  # (b, k, g, t)
    residual = knp.reshape(knp.transpose(knp.reshape(residual, (b, heads, t)), (0, 2, 1)), out_shape[:-1])
    return encoded, prims.stop_gradient.bind(residual)


# ----------------------------------------------------------------------------- initializers

def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """jax.nn.scaled_matmul: Σ_k lhs[b, m, k] a[b, m, k // block_a] rhs[b, n, k] s[b, n, k // block_b] for
    lhs (B, M, K), rhs (B, N, K) and scales (B, M, K_a), (B, N, K_b) whose last sizes divide K: the
    block-scaled product of microscaling formats, here in kiln's float dtypes (kiln.lax.scaled_dot)."""
    from .lax.scaled_dot import scaled_dot

    lhs, rhs = asarray(lhs), asarray(rhs)
    for name, x in (("lhs", lhs), ("rhs", rhs), ("lhs_scales", lhs_scales), ("rhs_scales", rhs_scales)):
        if aval(asarray(x)).ndim != 3:
            raise ValueError(f"scaled_matmul: {name} must be 3-d (B, rows, K); got shape {aval(asarray(x)).shape}")
    return scaled_dot(lhs, rhs, lhs_scale=lhs_scales, rhs_scale=rhs_scales,
                      dimension_numbers=(((2,), (2,)), ((0,), (0,))), preferred_element_type=preferred_element_type)


__all__ += ["scaled_matmul"]

import sys  # noqa: E402

from . import nn_initializers as initializers  # noqa: E402

# kiln.nn is a module, not a package: registered so that `import kiln.nn.initializers` finds it too
sys.modules[__name__ + ".initializers"] = initializers
__all__ += ["initializers"]
