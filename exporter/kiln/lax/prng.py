"""Counter-based bit generators: Threefry-2x32 (JAX's, which kiln.random's keys use) and Philox-4x32-10, and
jax.lax.rng_bit_generator on them.

rng_bit_generator's bits are kiln's own, as XLA's are its platform's ("the platform specific default
algorithm"): for the uint32[4] key (k0, k1, s0, s1), Threefry first hashes the state (s0, s1) under
(k0, k1) into a fresh cipher key, then encrypts the block counters 0, 1, ...; Philox encrypts the counters
(i, 0, s0, s1) under (k0, k1). The returned key is XLA's (JAX 0.10.2 on CPU): the 64-bit state s0 + 2^32 s1
advanced by the number of blocks XLA's generator uses (_xla_blocks), so a key stream is JAX's; a different
state gives an independent stream. RNG_DEFAULT is Philox, as XLA's CPU default.
"""
from __future__ import annotations

import enum
import math

import numpy as np

from ..core import dtypes
from ..core.trace import get_aval
from . import prims
from .api import iota
from .more_api import mulhi
from .operands import asarray
from .structural_prims import concatenate, slice as slice_array

__all__ = ["threefry2x32", "philox4x32", "RandomAlgorithm", "rng_bit_generator"]

U32 = np.dtype(np.uint32)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(k1, k2, x1, x2):
    """The Threefry-2x32 block cipher (20 rounds) of the counter pair (x1, x2) under the key (k1, k2), elementwise
    with broadcasting; every operand is uint32. JAX's unrolled lowering, round for round."""
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    x0, x1 = x1 + ks[0], x2 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = x0 ^ ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r)))
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


_PHILOX_M = (np.uint32(0xD2511F53), np.uint32(0xCD9E8D57))
_PHILOX_W = (np.uint32(0x9E3779B9), np.uint32(0xBB67AE85))


def philox4x32(k0, k1, c0, c1, c2, c3):
    """The Philox-4x32 block cipher (10 rounds; Salmon et al. 2011) of the counter (c0, c1, c2, c3) under the
    key (k0, k1), elementwise with broadcasting; every operand is uint32."""
    for _ in range(10):
        m0 = asarray(c0) * _PHILOX_M[0]
        m2 = asarray(c2) * _PHILOX_M[1]
        hi0 = mulhi(asarray(c0), _full_like(c0, _PHILOX_M[0]))
        hi2 = mulhi(asarray(c2), _full_like(c2, _PHILOX_M[1]))
        c0, c1, c2, c3 = hi2 ^ c1 ^ k0, m2, hi0 ^ c3 ^ k1, m0
        k0, k1 = k0 + _PHILOX_W[0], k1 + _PHILOX_W[1]
    return c0, c1, c2, c3


def _full_like(x, value):
    aval = get_aval(asarray(x))
    return np.full(aval.shape, value, aval.dtype)


class RandomAlgorithm(enum.IntEnum):
    """jax.lax.RandomAlgorithm: the generator of rng_bit_generator (RNG_DEFAULT is Philox, as XLA's CPU one)."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


def _words(key, blocks: int, algorithm: RandomAlgorithm):
    """blocks * (2 or 4) uint32 words, the blocks' outputs in order."""
    counter = iota(U32, blocks)
    zero = np.zeros(blocks, U32)
    if algorithm == RandomAlgorithm.RNG_PHILOX:
        outs = philox4x32(key[0], key[1], counter, zero, zero + key[2], zero + key[3])
    else:
        fresh = threefry2x32(key[0], key[1], key[2], key[3])
        outs = threefry2x32(fresh[0], fresh[1], zero, counter)
    columns = [prims.reshape.bind(asarray(o) + zero, new_shape=(blocks, 1)) for o in outs]
    return prims.reshape.bind(concatenate(columns, 1), new_shape=(blocks * len(outs),))


def _xla_blocks(shape: tuple, itemsize: int, algorithm: RandomAlgorithm) -> int:
    """How far XLA's generator advances the state for `shape` values (JAX 0.10.2, CPU): Philox makes 4 words a
    block (a 64-bit value takes two), Threefry 2, one per 64-bit value; for narrower values Threefry halves
    the shape along an even dimension, or rounds the largest one up when every dimension is odd."""
    n = math.prod(shape)
    if algorithm == RandomAlgorithm.RNG_PHILOX:
        return -(-n * (2 if itemsize == 8 else 1) // 4)
    if itemsize == 8 or n == 0:
        return n
    if n % 2 == 0:
        return n // 2
    largest = max(shape, default=1)
    return -(-largest // 2) * (n // largest)


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT, *, out_sharding=None):
    """(new_key, bits): uniformly random bits of an integer dtype and shape from a uint32[4] key (see the module
    for which bits); out_sharding is accepted and unused (one host)."""
    key = asarray(key)
    aval = get_aval(key)
    if aval.dtype != U32 or aval.shape != (4,):
        raise TypeError(f"rng_bit_generator: the key must be a uint32 array of shape (4,); got "
                        f"{aval.dtype}{list(aval.shape)}")
    dtype = dtypes.canonical(dtype)
    if not dtypes.is_int(dtype):
        raise TypeError(f"rng_bit_generator: dtype must be an integer dtype; got {dtype}")
    try:
        algorithm = RandomAlgorithm(algorithm)
    except ValueError:
        raise ValueError(f"rng_bit_generator: unknown algorithm {algorithm!r}; the algorithms are "
                         f"{[a.name for a in RandomAlgorithm]}") from None
    if algorithm == RandomAlgorithm.RNG_DEFAULT:
        algorithm = RandomAlgorithm.RNG_PHILOX
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    n = math.prod(shape)
    per_value = 2 if dtype.itemsize == 8 else 1
    per_block = 4 if algorithm == RandomAlgorithm.RNG_PHILOX else 2
    blocks = max(1, -(-n * per_value // per_block))
    if blocks >= 2**32:
        raise ValueError(f"rng_bit_generator: {n} values at once is more than the generator's 2**32 blocks")
    with np.errstate(over="ignore"):
        words = slice_array(_words(key, blocks, algorithm), (0,), (n * per_value,))
        unsigned = np.dtype(f"uint{dtype.itemsize * 8}")
        if per_value == 2:
            pairs = prims.reshape.bind(words, new_shape=(n, 2))
            hi = prims.convert.bind(prims.reshape.bind(slice_array(pairs, (0, 0), (n, 1)), new_shape=(n,)),
                                    new_dtype=unsigned)
            lo = prims.convert.bind(prims.reshape.bind(slice_array(pairs, (0, 1), (n, 2)), new_shape=(n,)),
                                    new_dtype=unsigned)
            values = (hi << np.uint64(32)) | lo
        else:
            values = prims.convert.bind(words, new_dtype=unsigned) if unsigned != U32 else words
        if unsigned != dtype:
            from .bitcast import bitcast_convert_type

            values = bitcast_convert_type(values, dtype)
        bits = prims.reshape.bind(values, new_shape=shape)
        advance = np.uint32(_xla_blocks(shape, dtype.itemsize, algorithm))
        state = key[2] + advance
        carry = prims.convert.bind(prims.lt.bind(asarray(state), np.full((), advance, U32)), new_dtype=U32)
        new_key = concatenate([prims.reshape.bind(asarray(v), new_shape=(1,))
                               for v in (key[0], key[1], state, key[3] + carry)], 0)
    return new_key, bits
