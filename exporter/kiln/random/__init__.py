"""kiln.random: JAX's key-based random numbers (jax.random) on JAX's threefry-2x32 generator.

Keys are uint32 arrays of shape (2,) (JAX's raw keys, what jax.random.PRNGKey returns); `key` returns the
same. For the same key, the integer-valued draws (bits, randint, bernoulli, rademacher, permutation, choice,
categorical, split, fold_in) and uniform floats are bit-identical to JAX 0.10; draws that go through a
transcendental function (normal, exponential, gamma, ...) follow JAX's algorithm on the same bits and agree
to a few ulp (kiln's exp/log/erf are not XLA's). docs/random.md has the details. Every function works eagerly
on numpy, under kiln.jit and kiln.vmap (map over a batch of keys), and in exported Programs.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .. import lax
from .. import numpy as knp
from ..core import dtypes
from ..core.trace import Tracer
from ..lax.special_math import fma32
from ..transforms.api import vmap
from ..transforms.custom import custom_jvp
from ._prng import (
    U32, _UINT, canonical_shape, check_key, dtype_of, fold_in_key, quiet, random_bits, seed_key, shape_of,
    split_key,
)

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "key_impl", "key_dtype", "clone", "split", "fold_in", "bits", "uniform", "normal", "bernoulli",
    "randint", "categorical", "permutation", "choice", "truncated_normal", "multivariate_normal", "gamma",
    "loggamma", "beta", "chisquare", "t", "f", "pareto", "lognormal", "weibull_min", "rayleigh", "maxwell",
    "double_sided_maxwell", "wald", "triangular", "geometric", "generalized_normal", "ball", "orthogonal",
    "binomial", "multinomial",
    "dirichlet", "exponential", "laplace", "logistic", "gumbel", "cauchy", "rademacher", "poisson",
]

_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)


# --------------------------------------------------------------------------------------------- keys


def PRNGKey(seed):
    """A key from an integer seed: uint32[2] (JAX's raw key). A seed in int32's range gives (0, seed mod 2**32)
    as JAX does with its default 32-bit types; a wider seed gives its two 32-bit halves (JAX with x64)."""
    return seed_key(seed)


def key(seed, *, impl=None):
    """jax.random.key: here the same uint32[2] as PRNGKey (kiln has no typed key arrays; see docs/random.md)."""
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"kiln.random.key: only the 'threefry2x32' implementation exists, got {impl!r}")
    return seed_key(seed)


def key_data(keys):
    """The uint32 data of a key or of an array of keys (shape (..., 2)): the keys themselves."""
    keys = knp.asarray(keys)
    if dtype_of(keys) != U32 or shape_of(keys)[-1:] != (2,):
        raise TypeError(f"kiln.random.key_data: expected keys (uint32, last axis 2), got "
                        f"{dtype_of(keys)}{list(shape_of(keys))}")
    return keys


def wrap_key_data(key_bits_array, *, impl=None):
    """Keys from their uint32 data (shape (..., 2)): the data itself, checked."""
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"kiln.random.wrap_key_data: only 'threefry2x32' exists, got {impl!r}")
    return key_data(key_bits_array)


def key_impl(keys):
    """The generator behind keys: always 'threefry2x32'."""
    key_data(keys)
    return "threefry2x32"


def key_dtype(impl_spec=None):
    """jax.random.key_dtype: the dtype of kiln's keys, uint32 (kiln has no typed key arrays: a key is JAX's
    raw uint32[2] data, so this is the dtype of key(seed) and of key_data's result)."""
    if impl_spec not in (None, "threefry2x32"):
        raise ValueError(f"kiln.random.key_dtype: only the 'threefry2x32' implementation exists, got {impl_spec!r}")
    return U32


def clone(key):
    """jax.random.clone: the same key (kiln's keys are plain arrays, never consumed)."""
    return check_key("clone", key)


def split(key, num=2):
    """`num` new keys (an int or a shape), shape (*num, 2): key i hashes the counter (0, i)."""
    key = check_key("split", key)
    return split_key(key, canonical_shape(num, "split"))


def fold_in(key, data):
    """A new key from a key and a 32-bit integer (scalar; vmap for a batch)."""
    key = check_key("fold_in", key)
    data = knp.asarray(data)
    if shape_of(data) != ():
        raise TypeError(f"kiln.random.fold_in: data must be a scalar, got shape {shape_of(data)} (use kiln.vmap)")
    return fold_in_key(key, knp.astype(data, U32))


def _split2(key):
    keys = split_key(key, (2,))
    return keys[0], keys[1]


# ----------------------------------------------------------------------------------------- dtypes


def _float_dtype(dtype, name) -> np.dtype:
    """JAX's default float (float32) for None or `float`; a floating dtype otherwise."""
    if dtype is None or dtype is float:
        return _F32
    d = np.dtype(dtype)
    if not dtypes.is_float(d):
        raise ValueError(f"kiln.random.{name}: dtype must be a floating dtype, got {d}")
    return d


def _int_dtype(dtype, name) -> np.dtype:
    if dtype is None or dtype is int:
        return _I32
    d = np.dtype(dtype)
    if not dtypes.is_int(d):
        raise TypeError(f"kiln.random.{name}: dtype must be an integer dtype, got {d}")
    return d


def _finfo(dtype):
    return ml_dtypes.finfo(dtype) if dtype == dtypes.BFLOAT16 else np.finfo(dtype)


def _const(value, dtype):
    return np.asarray(value, dtype=dtype)


# ------------------------------------------------------------------------------------------- bits


def bits(key, shape=(), dtype=None):
    """Uniform random bits as unsigned integers (default uint32)."""
    key = check_key("bits", key)
    d = U32 if dtype is None else np.dtype(dtype)
    if d.kind != "u":
        raise ValueError(f"kiln.random.bits: dtype must be an unsigned integer dtype, got {d}")
    return random_bits(key, d.itemsize * 8, canonical_shape(shape, "bits"))


@quiet
def _uniform(key, shape, dtype, minval, maxval):
    info = _finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    rng_bits = 8 if nmant < 8 else nbits
    u = random_bits(key, rng_bits, shape)
    # JAX ORs the top nmant bits into 1.0's and subtracts 1 (bitcasts): m * 2**-nmant, exactly.
    mantissa = u >> _const(rng_bits - nmant, _UINT[rng_bits])
    floats = knp.astype(mantissa, dtype) * _const(2.0 ** -nmant, dtype)
    minval = knp.astype(knp.asarray(minval), dtype)
    maxval = knp.astype(knp.asarray(maxval), dtype)
    if dtype == _F32 or dtype.itemsize == 2:
        # XLA contracts floats * span + minval into one fused multiply-add, in float32 for float16 and
        # bfloat16 too (rounded once to them; the span is rounded to them first); fma32 gives the same
        # value through float64.
        f = lambda v: knp.astype(v, _F32)  # noqa: E731
        out = knp.astype(fma32(f(floats), f(maxval - minval), f(minval)), dtype)
    else:
        out = floats * (maxval - minval) + minval
    return knp.maximum(minval, knp.reshape(out, shape))


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Floats in [minval, maxval) (default float32)."""
    key = check_key("uniform", key)
    return _uniform(key, canonical_shape(shape, "uniform"), _float_dtype(dtype, "uniform"), minval, maxval)


# ------------------------------------------------------------------------------ continuous draws


def _normal(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(key, shape, dtype, lo, np.array(1.0, dtype))
    return _const(np.sqrt(2), dtype) * lax.erf_inv(u)


def normal(key, shape=(), dtype=None):
    """Standard normal draws: sqrt(2) * erf_inv(u) for u uniform in (-1, 1), as JAX."""
    key = check_key("normal", key)
    return _normal(key, canonical_shape(shape, "normal"), _float_dtype(dtype, "normal"))


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Draws from N(mean, cov) (mean (..., n), cov (..., n, n)): mean + factor @ z with z standard normal of shape
    shape + (n,) and cov = factor factor^T from method 'cholesky' (default), 'eigh' or 'svd', as JAX. The dtype
    is mean's and cov's (a float64 mean stays float64; Python lists are float32)."""
    key = check_key("multivariate_normal", key)
    if method not in ("cholesky", "eigh", "svd"):
        raise ValueError(f"kiln.random.multivariate_normal: method must be 'cholesky', 'eigh' or 'svd', got "
                         f"{method!r}")
    mean, cov = (knp.asarray(v, dtype=_F32) if isinstance(v, (list, tuple, int, float)) else knp.asarray(v)
                 for v in (mean, cov))
    common = np.result_type(dtype_of(mean), dtype_of(cov))
    dtype = _float_dtype(common if dtypes.is_float(common) else None, "multivariate_normal") if dtype is None \
        else _float_dtype(dtype, "multivariate_normal")
    mshape, cshape = shape_of(mean), shape_of(cov)
    if len(mshape) < 1 or len(cshape) < 2 or cshape[-2:] != (mshape[-1], mshape[-1]):
        raise ValueError(f"kiln.random.multivariate_normal: needs mean (..., n) and cov (..., n, n), got shapes "
                         f"{mshape} and {cshape}")
    batch = np.broadcast_shapes(mshape[:-1], cshape[:-2])
    shape = batch if shape is None else _broadcast_shape("multivariate_normal", shape, np.zeros(batch))
    mean, cov = knp.astype(mean, dtype), knp.astype(cov, dtype)
    if method == "cholesky":
        factor = knp.linalg.cholesky(cov)
    elif method == "eigh":
        w, v = knp.linalg.eigh(cov)
        factor = v * knp.expand_dims(knp.sqrt(w), -2)
    else:
        u, s, _ = knp.linalg.svd(cov)
        factor = u * knp.expand_dims(knp.sqrt(s), -2)
    z = _normal(key, (*shape, mshape[-1]), dtype)
    return mean + knp.einsum("...ij,...j->...i", factor, z)


def _broadcast_shape(name, shape, *params):
    shapes = [shape_of(knp.asarray(p)) for p in params]
    if shape is None:
        return np.broadcast_shapes(*shapes)
    shape = canonical_shape(shape, name)
    try:
        if np.broadcast_shapes(shape, *shapes) != shape:
            raise ValueError
    except ValueError:
        raise ValueError(f"kiln.random.{name}: shape {shape} is not broadcast-compatible with the parameters' "
                         f"shapes {shapes}") from None
    return shape


def _concrete(x):
    """x as a numpy array, or None when it is traced."""
    return None if isinstance(x, Tracer) else np.asarray(x)


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Normal draws within (lower, upper), by the inverse CDF as JAX: erf_inv of a uniform between erf(lower/√2)
    and erf(upper/√2), clipped inside the open interval. Traced bounds clip to the closed interval."""
    key = check_key("truncated_normal", key)
    dtype = _float_dtype(dtype, "truncated_normal")
    shape = _broadcast_shape("truncated_normal", shape, lower, upper)
    sqrt2 = _const(np.sqrt(2), dtype)
    lo = knp.astype(knp.asarray(lower), dtype)
    hi = knp.astype(knp.asarray(upper), dtype)
    a = knp.astype(lax.erf(knp.astype(lo / sqrt2, _wide(dtype))), dtype)
    b = knp.astype(lax.erf(knp.astype(hi / sqrt2, _wide(dtype))), dtype)
    out = sqrt2 * lax.erf_inv(_uniform(key, shape, dtype, a, b))
    clo, chi = _concrete(lower), _concrete(upper)
    if clo is not None and chi is not None:
        lo = np.nextafter(clo.astype(dtype), np.array(np.inf, dtype))
        hi = np.nextafter(chi.astype(dtype), np.array(-np.inf, dtype))
    return knp.clip(out, lo, hi)


def _wide(dtype):
    return _F32 if dtype.itemsize < 4 else dtype


def exponential(key, shape=(), dtype=None):
    """Exponential(1) draws: -log1p(-u)."""
    key = check_key("exponential", key)
    dtype = _float_dtype(dtype, "exponential")
    u = _uniform(key, canonical_shape(shape, "exponential"), dtype, 0.0, 1.0)
    return -knp.log1p(-u)


def laplace(key, shape=(), dtype=None):
    """Laplace(0, 1) draws: sign(u) * log1p(-|u|) for u uniform in (-1, 1)."""
    key = check_key("laplace", key)
    dtype = _float_dtype(dtype, "laplace")
    u = _uniform(key, canonical_shape(shape, "laplace"), dtype, -1.0 + float(_finfo(dtype).epsneg), 1.0)
    return knp.sign(u) * knp.log1p(-knp.abs(u))


def logistic(key, shape=(), dtype=None):
    """Logistic draws: log(u) - log1p(-u)."""
    key = check_key("logistic", key)
    dtype = _float_dtype(dtype, "logistic")
    x = _uniform(key, canonical_shape(shape, "logistic"), dtype, _finfo(dtype).tiny, 1.0)
    return knp.log(x) - knp.log1p(-x)


def _gumbel(key, shape, dtype):
    u = _uniform(key, shape, dtype, _finfo(dtype).tiny, 1.0)
    return -knp.log(-knp.log(u))


def _fixed_point_to_float32(hi, lo):
    """The 64-bit fixed-point fraction (hi, lo) / 2**64 as float32, truncated to 24 significant bits, as JAX's
    _safe_int_to_float: the bits after the leading one as the mantissa, the exponent from the leading zeros
    (the value assembled from them by exact float32 products, without a bitcast)."""
    hi_zeros, lo_zeros = lax.clz(hi), lax.clz(lo)
    all_high = hi_zeros == np.uint32(32)
    top = lax.shift_left(hi, hi_zeros) | knp.where(all_high, lax.shift_left(lo, lo_zeros),
                                                   lax.shift_right_logical(lo, np.uint32(32) - hi_zeros))
    mantissa = (top >> np.uint32(8)) & np.uint32((1 << 23) - 1)
    zeros = knp.where(all_high, lo_zeros + np.uint32(32), hi_zeros)  # the value is 2**-(zeros + 1) (1 + m 2**-23)
    scale = np.float32(0.5)
    for b in range(7):
        scale = scale * knp.where((zeros & np.uint32(1 << b)) != np.uint32(0), np.float32(2.0 ** -(1 << b)),
                                  np.float32(1))
    return (np.float32(1) + knp.astype(mantissa, _F32) * np.float32(2.0 ** -23)) * scale


def _gumbel_highest32(key, shape):
    """JAX's mode 'highest' for float32: a 64-bit fixed-point uniform u from two 32-bit words; below 1/2 u
    itself, in float32, gives -log(-log1p(-u)); above, 1 - u (the words' two's complement) gives
    -log(-log(1 - u)), so that both tails keep 24 significant bits."""
    words = random_bits(key, 32, (2, *shape))
    neg = ~words
    carry = knp.astype(neg[1] == np.uint32(0xFFFFFFFF), U32)
    neg = knp.stack([neg[0] + carry, neg[1] + np.uint32(1)])
    low_half = words[0] < np.uint32(1 << 31)
    chosen = knp.where(low_half, words, neg)
    x = _fixed_point_to_float32(chosen[0], chosen[1])
    return knp.where(low_half, -knp.log(-knp.log1p(-x)), -knp.log(-knp.log(x)))


def gumbel(key, shape=(), dtype=None, mode=None):
    """Gumbel draws: -log(-log(u)) (JAX's default mode 'low'); mode 'high' draws a second uniform to fill in the
    low bits of u below 1/2 and takes -log(-log1p(-u)), as JAX; mode 'highest' (float32; other dtypes as
    'high', as JAX) uses 64 random bits (_gumbel_highest32)."""
    key = check_key("gumbel", key)
    if mode not in (None, "low", "high", "highest"):
        raise ValueError(f"kiln.random.gumbel: mode must be 'low', 'high' or 'highest', got {mode!r}")
    shape, dtype = canonical_shape(shape, "gumbel"), _float_dtype(dtype, "gumbel")
    if mode is None or mode == "low":
        return _gumbel(key, shape, dtype)
    if mode == "highest" and dtype == _F32:
        return _gumbel_highest32(key, shape)
    info = _finfo(dtype)
    u = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
    high, low = u[0], u[1]
    x = knp.where(high >= _const(0.5, dtype), high,
                  high + _const(2.0 ** -info.nmant, dtype) * low + _const(info.tiny, dtype))
    return -knp.log(-knp.log1p(-x))


def cauchy(key, shape=(), dtype=None):
    """Cauchy draws: tan(pi * (u - 1/2))."""
    key = check_key("cauchy", key)
    dtype = _float_dtype(dtype, "cauchy")
    u = _uniform(key, canonical_shape(shape, "cauchy"), dtype, _finfo(dtype).eps, 1.0)
    return knp.tan(_const(np.pi, dtype) * (u - _const(0.5, dtype)))


# -------------------------------------------------------------------------------- discrete draws


def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Booleans true with probability p: uniform(dtype of p) < p (a Python p is float32)."""
    key = check_key("bernoulli", key)
    if mode not in ("low", "high"):
        raise ValueError(f"kiln.random.bernoulli: mode must be 'low' or 'high', got {mode!r}")
    p = knp.asarray(p, dtype=_F32) if isinstance(p, (int, float)) else knp.asarray(p)
    if not dtypes.is_float(dtype_of(p)):
        raise TypeError(f"kiln.random.bernoulli: p must have a floating dtype, got {dtype_of(p)}")
    shape = _broadcast_shape("bernoulli", shape, p)
    d = dtype_of(p)
    if mode == "high":
        u = _uniform(key, (2, *shape), d, 0.0, 1.0)
        return u[1] * _const(2.0 ** -_finfo(d).nmant, d) < p - u[0]
    return _uniform(key, shape, d, 0.0, 1.0) < p


def rademacher(key, shape=(), dtype=None):
    """-1 or +1 with equal probability (default int32; a float dtype as JAX allows)."""
    key = check_key("rademacher", key)
    dtype = _I32 if dtype is None or dtype is int else np.dtype(dtype)
    b = knp.astype(bernoulli(key, 0.5, canonical_shape(shape, "rademacher")), dtype)
    return knp.astype(2 * b - 1, dtype)


def _clip_to(val, dtype):
    """JAX's _convert_and_clip_integer: val (an integer array) clipped to dtype's range, then converted."""
    info, have = np.iinfo(dtype), np.iinfo(dtype_of(val))
    lo, hi = max(info.min, have.min), min(info.max, have.max)
    return knp.astype(knp.clip(val, _const(lo, dtype_of(val)), _const(hi, dtype_of(val))), dtype)


def _as_int(x):
    """A randint bound as an integer array (Python ints as int64, so any bound clips rather than overflows)."""
    x = knp.asarray(x, dtype=np.int64) if isinstance(x, int) else knp.asarray(x)
    return x if dtypes.is_int(dtype_of(x)) else knp.astype(x, np.int64)


@quiet
def _randint(key, shape, minval, maxval, dtype):
    info = np.iinfo(dtype)
    maxval_out_of_range = maxval > _clip_to(knp.asarray(_const(info.max, dtype)), dtype_of(maxval))
    minval, maxval = _clip_to(minval, dtype), _clip_to(maxval, dtype)
    nbits = info.bits
    k1, k2 = _split2(key)
    higher, lower = random_bits(k1, nbits, shape), random_bits(k2, nbits, shape)
    udt = _UINT[nbits]
    span = knp.astype(maxval - minval, udt)
    span = knp.where(maxval <= minval, _const(1, udt), span)
    span = knp.where(maxval_out_of_range & (maxval > minval), span + _const(1, udt), span)
    multiplier = knp.remainder(_const(2 ** (nbits // 2) % 2**nbits, udt), span)
    multiplier = knp.remainder(multiplier * multiplier, span)
    offset = knp.remainder(higher, span) * multiplier + knp.remainder(lower, span)
    offset = knp.remainder(offset, span)
    return knp.broadcast_to(minval + knp.astype(offset, dtype), shape)


def randint(key, shape, minval, maxval, dtype=None):
    """Integers in [minval, maxval) (default int32), JAX's algorithm: two draws of random bits combined modulo
    the span. Bounds outside dtype's range are clipped to it."""
    key = check_key("randint", key)
    dtype = _int_dtype(dtype, "randint")
    shape = canonical_shape(shape, "randint")
    _broadcast_shape("randint", shape, minval, maxval)
    minval, maxval = _as_int(minval), _as_int(maxval)
    info = np.iinfo(dtype)
    if info.bits < 32:
        minval = knp.clip(knp.astype(minval, _I32), int(info.min), int(info.max))
        maxval = knp.clip(knp.astype(maxval, _I32), int(info.min), int(info.max) + 1)
        return knp.astype(_randint(key, shape, minval, maxval, _I32), dtype)
    return _randint(key, shape, minval, maxval, dtype)


def _shuffle(key, x, axis):
    """JAX's shuffle: sorts by fresh 32-bit keys, ceil(3 log n / log(2**32 - 1)) times (once below 2**10 items)."""
    size = math.prod(shape_of(x))
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        key, subkey = _split2(key)
        sort_keys = random_bits(subkey, 32, shape_of(x))
        _, x = lax.sort_key_val(sort_keys, x, dimension=axis)
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of arange(x) (x an int) or of x along `axis` (all rows alike unless independent)."""
    key = check_key("permutation", key)
    x = knp.asarray(x)
    if shape_of(x) == ():
        if isinstance(x, Tracer) or not dtypes.is_int(dtype_of(x)):
            raise TypeError("kiln.random.permutation: x must be a concrete integer or an array of at least one axis")
        return _shuffle(key, knp.arange(int(x), dtype=_I32), 0)
    nd = len(shape_of(x))
    axis = axis % nd
    if independent or nd == 1:
        return _shuffle(key, x, axis)
    ind = _shuffle(key, knp.arange(shape_of(x)[axis], dtype=_I32), 0)
    return knp.take(x, ind, axis=axis)


def _top_k_indices(v, k):
    """lax.top_k's indices of a 1-d array: the k largest, ties to the lower index."""
    return knp.argsort(-v)[:k]


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Draws from arange(a) (a an int) or from a's entries along `axis`, as JAX: randint with replacement,
    a permutation's prefix without; with p, inverse-CDF draws (replace) or Gumbel top-k (no replace)."""
    key = check_key("choice", key)
    shape = canonical_shape(shape, "choice")
    arr = knp.asarray(a)
    scalar = shape_of(arr) == ()
    if scalar:
        n = int(np.asarray(a))
    else:
        axis = axis % len(shape_of(arr))
        n = shape_of(arr)[axis]
    draws = math.prod(shape)
    if draws == 0:
        return knp.zeros(shape, dtype_of(arr) if not scalar else _I32)
    if n <= 0:
        raise ValueError("kiln.random.choice: a must be greater than 0 unless no samples are taken")
    if not replace and draws > n:
        raise ValueError(f"kiln.random.choice: cannot take a larger sample (size {draws}) than the population "
                         f"(size {n}) when replace=False")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n)
            result = ind if scalar else knp.take(arr, ind, axis=axis)
        else:
            perm = permutation(key, n if scalar else arr, axis)
            result = perm[:draws] if scalar else knp.take(perm, knp.arange(draws), axis=axis)
    else:
        p = knp.asarray(p)
        if not dtypes.is_float(dtype_of(p)):
            p = knp.astype(p, _F32)
        if shape_of(p) != (n,):
            raise ValueError(f"kiln.random.choice: p must be None or a 1-d vector of size {n}, got shape "
                             f"{shape_of(p)}")
        if replace:
            cdf = knp.cumsum(p)
            r = cdf[-1] * (1 - _uniform(key, shape, dtype_of(p), 0.0, 1.0))
            ind = knp.sum(knp.astype(cdf < knp.expand_dims(r, -1), _I32), axis=-1)  # searchsorted, left
        else:
            g = _gumbel(key, (n,), dtype_of(p)) + knp.log(p)
            ind = _top_k_indices(g, draws)
        ind = knp.astype(ind, _I32)
        result = ind if scalar else knp.take(arr, ind, axis=axis)
    out_shape = tuple(shape) if scalar else shape_of(arr)[:axis] + tuple(shape) + shape_of(arr)[axis + 1:]
    return knp.reshape(result, out_shape)


def categorical(key, logits, axis=-1, shape=None, replace=True):
    """Category indices drawn with probabilities softmax(logits) along `axis` (the Gumbel-max trick, as JAX)."""
    key = check_key("categorical", key)
    logits = knp.asarray(logits)
    lshape = shape_of(logits)
    nd = len(lshape)
    axis = axis % nd
    batch = lshape[:axis] + lshape[axis + 1:]
    shape = batch if shape is None else canonical_shape(shape, "categorical")
    if shape[len(shape) - len(batch):] != batch:
        raise ValueError(f"kiln.random.categorical: shape {shape} must end with the logits' batch shape {batch}")
    prefix = shape[:len(shape) - len(batch)]
    d = dtype_of(logits)
    if replace:
        g = _gumbel(key, (*prefix, *lshape), d)
        return knp.astype(knp.argmax(g + knp.reshape(logits, (1,) * len(prefix) + lshape), axis=len(prefix) + axis),
                          _I32)
    g = logits + _gumbel(key, lshape, d)
    k = math.prod(prefix)
    if k > lshape[axis]:
        raise ValueError(f"kiln.random.categorical: {k} samples without replacement exceed the "
                         f"{lshape[axis]} categories")
    moved = knp.moveaxis(g, axis, -1)
    idx = knp.argsort(-moved, axis=-1)[..., :k]              # top_k, ties to the lower index
    idx = knp.moveaxis(idx, -1, 0)
    return knp.reshape(knp.astype(idx, _I32), shape)


# ------------------------------------------------------------------------------------------ gamma


def _gamma_one(key, alpha, log_space):
    """JAX's _gamma_one: Marsaglia and Tsang's rejection sampler for one alpha, boosted below 1."""
    d_ = dtype_of(alpha)
    zero, one, minus_one, two = (_const(v, d_) for v in (0, 1, -1, 2))
    boost_mask = alpha >= one
    alpha_orig = alpha
    alpha = knp.where(boost_mask, alpha, alpha + one)
    d = alpha - _const(1.0 / 3.0, d_)
    c = _const(1.0 / 3.0, d_) / knp.sqrt(d)

    def cond_fn(state):
        _, X, V, U = state
        return (U >= one - _const(0.0331, d_) * (X * X)) & \
            (knp.log(U) >= X * _const(0.5, d_) + d * ((one - V) + knp.log(V)))

    def body_fn(state):
        keys = split_key(state[0], (3,))
        k, x_key, u_key = keys[0], keys[1], keys[2]

        def next_kxv(kxv):
            kk, sub = _split2(kxv[0])
            x = _normal(sub, (), d_)
            return kk, x, one + x * c

        _, x, v = lax.while_loop(lambda kxv: kxv[2] <= zero, next_kxv, (x_key, zero, minus_one))
        return k, x * x, (v * v) * v, _uniform(u_key, (), d_, 0.0, 1.0)

    k, subkey = _split2(key)
    _, _, V, _ = lax.while_loop(cond_fn, body_fn, (k, zero, one, two))
    if log_space:
        log_samples = knp.log1p(-_uniform(subkey, (), d_, 0.0, 1.0))  # -exponential
        log_boost = knp.where(boost_mask | (log_samples == zero), zero, log_samples * (one / alpha_orig))
        return (knp.log(d) + knp.log(V)) + log_boost
    samples = one - _uniform(subkey, (), d_, 0.0, 1.0)
    boost = knp.where(boost_mask, one, knp.power(samples, one / alpha_orig))
    return (d * V) * boost


def _gamma_samples(key, a, log_space):
    shape = shape_of(a)
    n = math.prod(shape)
    keys = split_key(key, (n,))
    samples = vmap(lambda k, al: _gamma_one(k, al, log_space))(keys, knp.reshape(a, (n,)))
    return knp.reshape(samples, shape)


def _gamma_grad(sample, a, log_space):
    """d sample / d a at a fixed CDF value (implicit reparameterization, as JAX's gamma gradient):
    lax.random_gamma_grad in float64 (for log-space samples, divided by the sample)."""
    d, f64 = dtype_of(sample), np.dtype(np.float64)
    x = knp.exp(knp.astype(sample, f64)) if log_space else knp.astype(sample, f64)
    x = knp.maximum(x, np.finfo(np.float64).tiny)
    grad = lax.random_gamma_grad(knp.astype(a, f64), x)
    return knp.astype(grad / x if log_space else grad, d)


_GAMMA_SAMPLERS = {}


def _gamma_sampler(log_space):
    """The sampler with JAX's gradient in a (the rejection loops themselves are not differentiated)."""
    if log_space not in _GAMMA_SAMPLERS:
        @custom_jvp
        def sample(key, a):
            return _gamma_samples(key, a, log_space)

        @sample.defjvp
        def _(primals, tangents):
            key, a = primals
            x = _gamma_samples(key, a, log_space)
            return x, tangents[1] * _gamma_grad(x, a, log_space)

        _GAMMA_SAMPLERS[log_space] = sample
    return _GAMMA_SAMPLERS[log_space]


@quiet
def _gamma(key, a, shape, dtype, log_space):
    a = knp.broadcast_to(knp.astype(knp.asarray(a), dtype), shape)
    if math.prod(shape) == 0:
        return knp.zeros(shape, dtype)
    return _gamma_sampler(log_space)(key, a)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) draws: JAX's rejection sampler, one key per element (split(key, size))."""
    key = check_key("gamma", key)
    dtype = _float_dtype(dtype, "gamma")
    return _gamma(key, a, _broadcast_shape("gamma", shape, a), dtype, False)


def loggamma(key, a, shape=None, dtype=None):
    """log of Gamma(a, 1) draws, computed in log space (accurate for small a)."""
    key = check_key("loggamma", key)
    dtype = _float_dtype(dtype, "loggamma")
    return _gamma(key, a, _broadcast_shape("loggamma", shape, a), dtype, True)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) draws from two log-gamma draws, as JAX."""
    key = check_key("beta", key)
    dtype = _float_dtype(dtype, "beta")
    shape = _broadcast_shape("beta", shape, a, b)
    key_a, key_b = _split2(key)
    log_a = _gamma(key_a, a, shape, dtype, True)
    log_b = _gamma(key_b, b, shape, dtype, True)
    log_max = knp.maximum(log_a, log_b)
    ga, gb = knp.exp(log_a - log_max), knp.exp(log_b - log_max)
    return ga / (ga + gb)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) draws (alpha's last axis is the simplex): the softmax of log-gamma draws, as JAX."""
    key = check_key("dirichlet", key)
    dtype = _float_dtype(dtype, "dirichlet")
    ashape = shape_of(knp.asarray(alpha))
    if len(ashape) < 1:
        raise ValueError("kiln.random.dirichlet: alpha must have at least one axis")
    shape = ashape[:-1] if shape is None else canonical_shape(shape, "dirichlet")
    _broadcast_shape("dirichlet", shape, np.zeros(ashape[:-1]))
    log_g = _gamma(key, alpha, (*shape, ashape[-1]), dtype, True)
    e = knp.exp(log_g - knp.max(log_g, axis=-1, keepdims=True))
    return e / knp.sum(e, axis=-1, keepdims=True)


# ----------------------------------------------------------------------------------------- poisson


@quiet
def _poisson_knuth(key, lam, shape, dtype):
    def body(carry):
        i, k, rng, log_prod = carry
        rng, sub = _split2(rng)
        k = knp.where(log_prod > -lam, k + 1, k)
        return i + 1, k, rng, log_prod + knp.log(_uniform(sub, shape, _F32, 0.0, 1.0))

    def cond(carry):
        return knp.any(carry[3] > -lam)

    init = (np.int32(0), knp.zeros(shape, dtype), key, knp.zeros(shape, _F32))
    k = lax.while_loop(cond, body, init)[1]
    return knp.astype(k - 1, dtype)


@quiet
def _poisson_rejection(key, lam, shape, dtype):
    log_lam = knp.log(lam)
    b = np.float32(0.931) + np.float32(2.53) * knp.sqrt(lam)
    a = np.float32(-0.059) + np.float32(0.02483) * b
    inv_alpha = np.float32(1.1239) + np.float32(1.1328) / (b - np.float32(3.4))
    v_r = np.float32(0.9277) - np.float32(3.6224) / (b - np.float32(2))

    def body(carry):
        i, k_out, accepted, rng = carry
        keys = split_key(rng, (3,))
        rng, k0, k1 = keys[0], keys[1], keys[2]
        u = _uniform(k0, shape, _F32, 0.0, 1.0) - np.float32(0.5)
        v = _uniform(k1, shape, _F32, 0.0, 1.0)
        u_shifted = np.float32(0.5) - knp.abs(u)
        k = knp.floor((np.float32(2) * a / u_shifted + b) * u + lam + np.float32(0.43))
        s = knp.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(knp.maximum(k, np.float32(0)) + np.float32(1))
        accept1 = (u_shifted >= np.float32(0.07)) & (v <= v_r)
        reject = (k < np.float32(0)) | ((u_shifted < np.float32(0.013)) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, knp.where(accept, k, k_out), accepted | accept, rng

    def cond(carry):
        return knp.any(~carry[2])

    init = (np.int32(0), knp.full(shape, -1.0, _F32), knp.zeros(shape, np.bool_), key)
    return knp.astype(lax.while_loop(cond, body, init)[1], dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) draws (default int32): Knuth's method below lam = 10, transformed rejection (Hörmann's PTRS)
    from 10 on, both as JAX (float32, one loop over the whole array)."""
    key = check_key("poisson", key)
    dtype = _int_dtype(dtype, "poisson")
    shape = _broadcast_shape("poisson", shape, lam)
    lam = knp.broadcast_to(knp.astype(knp.asarray(lam), _F32), shape)
    use_knuth = knp.isnan(lam) | (lam < np.float32(10))
    lam_knuth = knp.where(use_knuth, lam, np.float32(0))
    lam_rejection = knp.where(use_knuth, np.float32(1e5), lam)
    result = knp.where(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype),
                       _poisson_rejection(key, lam_rejection, shape, dtype))
    return knp.where(lam == np.float32(0), knp.zeros_like(result), result)


# ------------------------------------------------------------------- more of jax.random's distributions


def _param(x, dtype):
    return knp.astype(knp.asarray(x), dtype)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square(df) draws: 2 exp(loggamma(df / 2)), as JAX."""
    key = check_key("chisquare", key)
    dtype = _float_dtype(dtype, "chisquare")
    shape = _broadcast_shape("chisquare", shape, df)
    return knp.exp(_gamma(key, _param(df, dtype) / _const(2, dtype), shape, dtype, True)) * _const(2, dtype)


def t(key, df, shape=None, dtype=None):
    """Student's t(df) draws: normal * sqrt((df / 2) / gamma(df / 2)), as JAX."""
    key = check_key("t", key)
    dtype = _float_dtype(dtype, "t")
    shape = _broadcast_shape("t", shape, df)
    key_n, key_g = _split2(key)
    n = _normal(key_n, shape, dtype)
    half_df = _param(df, dtype) / _const(2, dtype)
    return n * knp.sqrt(half_df / _gamma(key_g, half_df, shape, dtype, False))


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F(dfnum, dfden) draws: the ratio of two scaled chi-square draws, as JAX."""
    key = check_key("f", key)
    dtype = _float_dtype(dtype, "f")
    shape = _broadcast_shape("f", shape, dfnum, dfden)
    key_dfd, key_dfn = _split2(key)
    dfnum, dfden = _param(dfnum, dtype), _param(dfden, dtype)
    return (chisquare(key_dfn, dfnum, shape, dtype) / dfnum) / (chisquare(key_dfd, dfden, shape, dtype) / dfden)


def pareto(key, b, shape=None, dtype=None):
    """Pareto(b) draws: exp(exponential / b)."""
    key = check_key("pareto", key)
    dtype = _float_dtype(dtype, "pareto")
    shape = _broadcast_shape("pareto", shape, b)
    return knp.exp(exponential(key, shape, dtype) / _param(b, dtype))


def lognormal(key, sigma=np.float32(1), shape=None, dtype=None):
    """exp(sigma * normal) draws."""
    key = check_key("lognormal", key)
    dtype = _float_dtype(dtype, "lognormal")
    shape = _broadcast_shape("lognormal", shape, sigma)
    return knp.exp(_normal(key, shape, dtype) * _param(sigma, dtype))


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull draws: (-log1p(-u)) ** (1 / concentration) * scale."""
    key = check_key("weibull_min", key)
    dtype = _float_dtype(dtype, "weibull_min")
    u = _uniform(key, canonical_shape(shape, "weibull_min"), dtype, 0.0, 1.0)
    return knp.power(-knp.log1p(-u), 1.0 / _param(concentration, dtype)) * _param(scale, dtype)


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh(scale) draws: scale * sqrt(-2 log u)."""
    key = check_key("rayleigh", key)
    dtype = _float_dtype(dtype, "rayleigh")
    shape = _broadcast_shape("rayleigh", shape, scale)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    return knp.broadcast_to(_param(scale, dtype), shape) * knp.sqrt(knp.log(u) * _const(-2, dtype))


def maxwell(key, shape=(), dtype=None):
    """Maxwell draws: the norm of three standard normals."""
    key = check_key("maxwell", key)
    dtype = _float_dtype(dtype, "maxwell")
    z = _normal(key, (*canonical_shape(shape, "maxwell"), 3), dtype)
    return knp.sqrt(knp.sum(z * z, axis=-1))


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """A Maxwell draw with a random sign, scaled and shifted: sign * maxwell * scale + loc."""
    key = check_key("double_sided_maxwell", key)
    dtype = _float_dtype(dtype, "double_sided_maxwell")
    params = np.broadcast_shapes(shape_of(knp.asarray(loc)), shape_of(knp.asarray(scale)))
    shape = canonical_shape(shape, "double_sided_maxwell") or params
    shape = (*shape, *params) if shape != params else shape
    maxwell_key, sign_key = _split2(key)
    sign = rademacher(sign_key, shape, dtype)
    return sign * maxwell(maxwell_key, shape, dtype) * _param(scale, dtype) + _param(loc, dtype)


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) draws with the given mean and scale 1, by Michael, Schucany and Haas, as JAX."""
    key = check_key("wald", key)
    dtype = _float_dtype(dtype, "wald")
    shape = _broadcast_shape("wald", shape, mean)
    k1, k2 = _split2(key)
    mean = knp.broadcast_to(_param(mean, dtype), shape)
    v = _normal(k1, shape, dtype)
    z = _uniform(k2, shape, dtype, 0.0, 1.0)
    y = v * v
    mean_sq = mean * mean
    x = mean + mean_sq * y / 2 - mean / 2 * knp.sqrt(4 * mean * y + mean_sq * (y * y))
    return knp.where(z <= mean / (mean + x), x, mean_sq / x)


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular(left, mode, right) draws by the inverse CDF."""
    key = check_key("triangular", key)
    dtype = _float_dtype(dtype, "triangular")
    shape = _broadcast_shape("triangular", shape, left, mode, right)
    left, mode, right = (knp.broadcast_to(_param(v, dtype), shape) for v in (left, mode, right))
    fc = (mode - left) / (right - left)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    out1 = left + knp.sqrt(u * (right - left) * (mode - left))
    out2 = right - knp.sqrt((1 - u) * (right - left) * (right - mode))
    return knp.where(u < fc, out1, out2)


def geometric(key, p, shape=None, dtype=None):
    """Geometric(p) draws on {1, 2, ...} (default int32): floor(log u / log1p(-p)) + 1."""
    key = check_key("geometric", key)
    dtype = _int_dtype(dtype, "geometric")
    p = knp.asarray(p, dtype=_F32) if isinstance(p, (int, float)) else knp.asarray(p)
    if not dtypes.is_float(dtype_of(p)):
        p = knp.astype(p, _F32)
    shape = _broadcast_shape("geometric", shape, p)
    u = _uniform(key, shape, dtype_of(p), 0.0, 1.0)
    u = knp.where(u == 0, _const(1, dtype_of(p)), u)
    g = knp.floor(knp.log(u) / knp.broadcast_to(knp.log1p(-p), shape)) + 1
    return knp.astype(g, dtype)


def generalized_normal(key, p, shape=(), dtype=None):
    """Generalized normal draws of power p: a random sign times gamma(1/p) ** (1/p), as JAX."""
    key = check_key("generalized_normal", key)
    dtype = _float_dtype(dtype, "generalized_normal")
    shape = canonical_shape(shape, "generalized_normal")
    k0, k1 = _split2(key)
    g = _gamma(k0, 1 / p, shape, dtype, False)
    return rademacher(k1, shape, dtype) * g ** (1 / p)


def ball(key, d, p=2, shape=(), dtype=None):
    """Points uniform in the d-dimensional unit p-norm ball (shape + (d,)), as JAX."""
    key = check_key("ball", key)
    dtype = _float_dtype(dtype, "ball")
    shape = canonical_shape(shape, "ball")
    k1, k2 = _split2(key)
    g = generalized_normal(k1, p, (*shape, int(d)), dtype)
    e = exponential(k2, shape, dtype)
    return g / knp.expand_dims((knp.sum(knp.abs(g) ** p, axis=-1) + e) ** (1 / p), -1)


def orthogonal(key, n, shape=(), dtype=None, m=None):
    """Matrices (shape + (n, m), m = n by default) with orthonormal columns (or rows when n < m), Haar
    distributed: the Q of a Gaussian matrix's QR with the signs of R's diagonal moved into it, as JAX."""
    key = check_key("orthogonal", key)
    dtype = _float_dtype(dtype, "orthogonal")
    shape = canonical_shape(shape, "orthogonal")
    n = int(n)
    m = n if m is None else int(m)
    z = _normal(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = knp.linalg.qr(z)
    x = q * knp.expand_dims(knp.sign(knp.linalg.diagonal(r)), -2)
    return knp.linalg.matrix_transpose(x) if n < m else x


_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287)


def _stirling_approx_tail(k):
    """log k! minus Stirling's approximation: a table below 10, the series above (JAX's)."""
    d = dtype_of(k)
    kc = knp.clip(k, _const(0, d), _const(9, d))
    kp1sq = (kc + 1) * (kc + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (kc + 1)
    table = knp.take(np.asarray(_STIRLING_TAIL, d), knp.astype(knp.floor(kc), _I32))
    return knp.where(k <= 9, table, approx)


@quiet
def _binomial_inversion(key, count, prob, shape, dtype):
    log1minusprob = knp.log1p(-prob)

    def body(carry):
        i, num_geom, geom_sum, rng = carry
        keys = split_key(rng, (2,))
        num_geom = knp.where(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(keys[0], shape, dtype_of(prob), 0.0, 1.0)
        return i + 1, num_geom, geom_sum + knp.ceil(knp.log(u) / log1minusprob), keys[1]

    zeros = knp.zeros(shape, dtype_of(prob))
    k = lax.while_loop(lambda c: knp.any(c[2] <= count), body, (np.int32(0), zeros, zeros, key))[1]
    return knp.astype(k - 1, dtype)


@quiet
def _btrs(key, count, prob, shape, dtype):
    """Hörmann's transformed rejection with squeeze (BTRS) for count * prob > 10, as JAX."""
    stddev = knp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = knp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, rng = carry
        keys = split_key(rng, (3,))
        u = _uniform(keys[1], shape, dtype_of(prob), 0.0, 1.0) - 0.5
        v = _uniform(keys[2], shape, dtype_of(prob), 0.0, 1.0)
        us = 0.5 - knp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = knp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = knp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * knp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * knp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * knp.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k) - _stirling_approx_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, knp.where(accept, k, k_out), accepted | accept, keys[0]

    init = (np.int32(0), knp.full(shape, -1, dtype_of(prob)), knp.zeros(shape, np.bool_), key)
    return knp.astype(lax.while_loop(lambda c: knp.any(~c[2]), body, init)[1], dtype)


@quiet
def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) draws as floats (default float32, as JAX): inversion by geometric waiting times where
    n * min(p, 1 - p) <= 10, BTRS rejection above; NaN for an invalid p or n, inf for infinite n."""
    key = check_key("binomial", key)
    dtype = _float_dtype(dtype, "binomial")
    shape = _broadcast_shape("binomial", shape, n, p)
    p = knp.asarray(p, dtype=_F32) if isinstance(p, (int, float)) else knp.asarray(p)
    if not dtypes.is_float(dtype_of(p)):
        p = knp.astype(p, _F32)
    pd = dtype_of(p)
    count = knp.broadcast_to(_param(n, pd), shape)
    prob = knp.broadcast_to(p, shape)
    p_lt_half = prob < 0.5
    q = knp.where(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = knp.isnan(count) | (count < 0.0)
    count_inf = knp.isinf(count)
    q_is_nan, q_l_0 = knp.isnan(q), q < 0.0
    q = knp.where(q_is_nan | q_l_0, _const(0.01, pd), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = knp.floor(count)
    count_inv = knp.where(use_inversion, count, _const(0, pd))
    count_btrs = knp.where(use_inversion, _const(1e4, pd), count)
    q_btrs = knp.where(use_inversion, _const(0.5, pd), q)
    samples = knp.where(use_inversion, _binomial_inversion(key, count_inv, q, shape, dtype),
                        _btrs(key, count_btrs, q_btrs, shape, dtype))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = knp.where(invalid, _const(np.nan, dtype), samples)
    samples = knp.where(count_inf & ~invalid, _const(np.inf, dtype), samples)
    return knp.where(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                     knp.astype(count, dtype) - samples)


def multinomial(key, n, p, *, shape=None, dtype=None):
    """Multinomial(n, p) counts over p's last axis (default float32): one binomial per category on what
    remains, in a scan, as JAX."""
    key = check_key("multinomial", key)
    dtype = _float_dtype(dtype, "multinomial")
    p = knp.asarray(p, dtype=_F32) if isinstance(p, (list, tuple)) else knp.asarray(p)
    if not dtypes.is_float(dtype_of(p)):
        p = knp.astype(p, _F32)
    pd = dtype_of(p)
    shape = shape_of(p) if shape is None else canonical_shape(shape, "multinomial")
    n = knp.broadcast_to(_param(n, pd), shape[:-1])
    p = knp.moveaxis(knp.broadcast_to(p, shape), -1, 0)
    remaining = knp.flip(knp.cumsum(knp.flip(p, 0), axis=0), 0)
    ratios = p / knp.where(remaining == 0, _const(1, pd), remaining)
    keys = split_key(key, (shape[-1],))

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        count = binomial(k, remainder, knp.clip(ratio, 0, 1), dtype=pd)
        return remainder - count, count

    _, counts = lax.scan(step, n, (ratios, keys))
    return knp.astype(knp.moveaxis(counts, 0, -1), dtype)

