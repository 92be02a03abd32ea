"""Keys and bits: JAX's threefry-2x32 generator with its default (partitionable) layout, written with kiln.numpy
operations on uint32 arrays, so it runs eagerly on numpy, traces under kiln.jit and vmap, and exports.

A key is a uint32 array of shape (2,), JAX's raw ("legacy") key. For the same key every function here gives
the bits JAX 0.10 gives (jax_threefry_partitionable True, its default): element i of a draw of shape S hashes
the 64-bit counter i (its two 32-bit halves) with the key; split and fold_in hash (0, i) and (0, data).
"""
from __future__ import annotations

import functools
import math
import operator

import numpy as np

from .. import lax
from .. import numpy as knp
from ..core import dtypes
from ..core.trace import get_aval
from ..lax.prng import threefry2x32  # noqa: F401  (kiln.random's generator; lax.rng_bit_generator's too)

U32 = np.dtype(np.uint32)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: U32, 64: np.dtype(np.uint64)}


def quiet(fn):
    """Eagerly, numpy warns when a 0-d uint32 addition wraps (threefry wraps on purpose) and where a sampler
    computes a branch that a select then drops (inf - inf in binomial): JAX warns about neither."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(*args, **kwargs)
    return wrapper


def dtype_of(x) -> np.dtype:
    return np.dtype(get_aval(x).dtype)


def shape_of(x) -> tuple:
    return tuple(get_aval(x).shape)


def canonical_shape(shape, name: str) -> tuple:
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"kiln.random.{name}: shape must be a tuple of integers, got {shape!r}") from None


def check_key(name: str, key):
    """The key as a kiln array of uint32[2]; anything else is a TypeError naming the function."""
    key = knp.asarray(key)
    a = get_aval(key)
    if np.dtype(a.dtype) != U32 or tuple(a.shape) != (2,):
        batched = " (a batch of keys: use kiln.vmap over them)" if np.dtype(a.dtype) == U32 and \
            tuple(a.shape[-1:]) == (2,) else ""
        raise TypeError(f"kiln.random.{name}: expected a key, a uint32 array of shape (2,) from PRNGKey, split or "
                        f"fold_in, got {np.dtype(a.dtype)}{list(a.shape)}{batched}")
    return key


def counters(shape):
    """JAX's iota_2x32_shape: the high and low halves of the row-major element index (the high half is 0 below
    2**32 elements, kept as a scalar)."""
    n = math.prod(shape)
    if n >= 2**32:
        raise ValueError(f"kiln.random: {n} draws at once is more than 2**32")
    lo = knp.reshape(lax.iota(U32, n), shape) if shape else np.uint32(0)
    return np.uint32(0), lo


def _hash_counters(key, shape):
    hi, lo = counters(shape)
    b1, b2 = threefry2x32(key[0], key[1], hi, lo)
    return knp.broadcast_to(b1, shape), knp.broadcast_to(b2, shape)


@quiet
def random_bits(key, bit_width: int, shape):
    """uint<bit_width> bits of `shape`: b1 ^ b2 (32 bits or fewer, truncated), or b1 << 32 | b2 (64)."""
    b1, b2 = _hash_counters(key, shape)
    if bit_width == 64:
        u64 = _UINT[64]
        return (knp.astype(b1, u64) << np.uint64(32)) | knp.astype(b2, u64)
    bits = b1 ^ b2
    return bits if bit_width == 32 else knp.astype(bits, _UINT[bit_width])


@quiet
def split_key(key, shape):
    b1, b2 = _hash_counters(key, shape)
    return knp.stack([b1, b2], axis=len(shape))


@quiet
def fold_in_key(key, data):
    b1, b2 = threefry2x32(key[0], key[1], np.uint32(0), data)
    return knp.stack([b1, b2])


_INT32_MIN, _INT32_MAX = -2**31, 2**31 - 1


@quiet
def seed_key(seed):
    """JAX's threefry_seed: a seed in int32's range gives (0, seed mod 2**32), JAX's result with its default
    32-bit types; a wider integer gives its high and low 32-bit halves, as JAX with jax_enable_x64."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        s = int(seed)
        if not -2**63 <= s < 2**64:
            raise OverflowError(f"kiln.random.PRNGKey: seed {s} does not fit in 64 bits")
        hi = 0 if _INT32_MIN <= s <= _INT32_MAX else (s >> 32) & 0xFFFFFFFF
        return np.array([hi, s & 0xFFFFFFFF], U32)
    seed = knp.asarray(seed)
    a = get_aval(seed)
    if a.shape != ():
        raise TypeError(f"kiln.random.PRNGKey: the seed must be a scalar, got shape {tuple(a.shape)} "
                        "(use kiln.vmap for a batch of keys)")
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"kiln.random.PRNGKey: the seed must be an integer, got {np.dtype(a.dtype)}")
    d = np.dtype(a.dtype)
    lo = knp.astype(seed, U32)
    if d.itemsize < 8:
        return knp.stack([knp.zeros((), U32), lo])
    wide = knp.astype(knp.right_shift(knp.astype(seed, np.uint64), np.uint64(32)), U32)
    in_int32 = (seed >= _INT32_MIN) & (seed <= _INT32_MAX) if d.kind == "i" else seed <= _INT32_MAX
    return knp.stack([knp.where(in_int32, np.uint32(0), wide), lo])
