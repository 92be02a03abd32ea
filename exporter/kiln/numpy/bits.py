"""numpy.packbits and unpackbits: booleans packed eight to a uint8 along an axis, and back."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ._base import asarray, aval, convert, normalize_axes
from .elementwise import multiply, not_equal
from .math import bitwise_and, right_shift
from .reductions import sum as sum_
from .shape import concatenate, moveaxis, ravel, reshape


def _bit_weights(bitorder, name):
    if bitorder not in ("big", "little"):
        raise ValueError(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}")
    weights = 1 << np.arange(8)
    return (weights[::-1] if bitorder == "big" else weights).astype(np.uint8)


def packbits(a, axis=None, bitorder="big"):
    """numpy.packbits: nonzero elements become 1 bits, eight to a uint8 along axis (the flattened array when
    axis is None), the last byte padded with 0 bits."""
    x = asarray(a)
    if not (dtypes.is_int(aval(x).dtype) or dtypes.is_bool(aval(x).dtype)):
        raise TypeError(f"packbits: expected an input array of integer or boolean data type, got {aval(x).dtype}")
    weights = _bit_weights(bitorder, "packbits")
    if axis is None:
        x, axis = ravel(x), 0
    ax = normalize_axes(axis, aval(x).ndim, "packbits")[0]
    bits = moveaxis(convert(not_equal(x, 0), np.uint8), ax, -1)
    n = aval(bits).shape[-1]
    padding = -n % 8
    if padding:
        bits = concatenate([bits, np.zeros(aval(bits).shape[:-1] + (padding,), np.uint8)], axis=-1)
    grouped = reshape(bits, aval(bits).shape[:-1] + ((n + padding) // 8, 8))
    packed = sum_(multiply(grouped, weights), axis=-1, dtype=np.uint8)
    return moveaxis(packed, -1, ax)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """numpy.unpackbits: each uint8 becomes its eight bits along axis (flattened when axis is None); count
    keeps that many bits (negative: drops them from the end; more than there are: pads zeros)."""
    x = asarray(a)
    if aval(x).dtype != np.uint8:
        raise TypeError(f"unpackbits: expected an input array of unsigned byte data type, got {aval(x).dtype}")
    weights = _bit_weights(bitorder, "unpackbits")
    shifts = np.log2(weights).astype(np.uint8)
    if axis is None:
        x, axis = ravel(x), 0
    ax = normalize_axes(axis, aval(x).ndim, "unpackbits")[0]
    moved = moveaxis(x, ax, -1)
    bits = bitwise_and(right_shift(reshape(moved, aval(moved).shape + (1,)), shifts), np.uint8(1))
    bits = reshape(bits, aval(moved).shape[:-1] + (aval(moved).shape[-1] * 8,))
    total = aval(bits).shape[-1]
    if count is not None:
        keep = int(count) if count >= 0 else max(total + int(count), 0)
        if keep <= total:
            bits = bits[..., :keep]
        else:
            bits = concatenate([bits, np.zeros(aval(bits).shape[:-1] + (keep - total,), np.uint8)], axis=-1)
    return moveaxis(bits, -1, ax)


__all__ = ["packbits", "unpackbits"]
