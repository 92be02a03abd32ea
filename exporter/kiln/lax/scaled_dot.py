"""jax.lax.scaled_dot: a dot_general of block-scaled operands, (lhs * lhs_scale) @ (rhs * rhs_scale), each
scale repeated along the contracting dimensions it is smaller in (its "subchannels"). kiln computes in
float32 (float64 when an operand is float64) and rounds once to preferred_element_type (JAX's default:
bfloat16). jax.nn.scaled_matmul is this with its (B, M, K) x (B, N, K) layout (kiln.nn.scaled_matmul)."""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from ..core.trace import get_aval
from . import prims
from .api import dot_general
from .operands import asarray

__all__ = ["scaled_dot"]


def _repeat(x, axis: int, times: int):
    """x with every element repeated `times` times along axis (numpy.repeat)."""
    if times == 1:
        return x
    shape = get_aval(x).shape
    spread = prims.broadcast_in_dim.bind(x, shape=shape[:axis + 1] + (times,) + shape[axis + 1:],
                                         broadcast_dimensions=tuple(range(axis + 1)) + tuple(
                                             range(axis + 2, len(shape) + 1)))
    return prims.reshape.bind(spread, new_shape=shape[:axis] + (shape[axis] * times,) + shape[axis + 1:])


def apply_block_scale(where: str, name: str, x, scale, contracting, compute):
    """x * scale in the compute dtype, scale repeated along the contracting dimensions of x it divides."""
    x = prims.convert.bind(x, new_dtype=compute) if get_aval(x).dtype != compute else x
    if scale is None:
        return x
    scale = asarray(scale)
    shape, scale_shape = get_aval(x).shape, get_aval(scale).shape
    if len(scale_shape) != len(shape):
        raise TypeError(f"{where}: {name}_scale must have the rank of {name} ({len(shape)}); got shape {scale_shape}")
    for axis, (size, scale_size) in enumerate(zip(shape, scale_shape)):
        if axis in contracting:
            if scale_size < 1 or size % scale_size:
                raise TypeError(f"{where}: {name}'s contracting dimension {axis} ({size}) is not a multiple of "
                                f"{name}_scale's ({scale_size})")
            scale = _repeat(scale, axis, size // scale_size)
        elif size != scale_size:
            raise TypeError(f"{where}: {name}_scale's dimension {axis} ({scale_size}) must equal {name}'s ({size}) "
                            "outside the contracting dimensions")
    if get_aval(scale).dtype != compute:
        scale = prims.convert.bind(scale, new_dtype=compute)
    return prims.mul.bind(x, scale)


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None, preferred_element_type=None):
    """(lhs * lhs_scale) dot_general (rhs * rhs_scale) in preferred_element_type (default bfloat16, as JAX);
    dimension_numbers default to a batched matrix product: lhs's last axis with rhs's second to last, the
    leading ndim - 2 axes batched."""
    lhs, rhs = asarray(lhs), asarray(rhs)
    n = get_aval(lhs).ndim
    if dimension_numbers is None:
        if n < 2:
            raise TypeError(f"scaled_dot: operands of rank 0 or 1 need dimension_numbers; lhs has rank {n}")
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    (lc, rc), _ = dimension_numbers
    wide = any(get_aval(v).dtype == np.float64 for v in (lhs, rhs))
    compute = np.dtype(np.float64 if wide else np.float32)
    out = dot_general(apply_block_scale("scaled_dot", "lhs", lhs, lhs_scale, tuple(lc), compute),
                      apply_block_scale("scaled_dot", "rhs", rhs, rhs_scale, tuple(rc), compute),
                      dimension_numbers, preferred_element_type=compute)
    target = dtypes.canonical(dtypes.BFLOAT16 if preferred_element_type is None else preferred_element_type)
    return out if get_aval(out).dtype == target else prims.convert.bind(out, new_dtype=target)
