"""Products: matmul (with batch dimensions), dot."""
from __future__ import annotations

from ..lax import prims
from ._base import asarray, aval, broadcast_shapes, broadcast_to, promote
from .shape import reshape


def matmul(x1, x2):
    """numpy.matmul: 1-D operands are promoted to matrices, batch dimensions broadcast."""
    a, b = promote(asarray(x1), asarray(x2))
    sa, sb = aval(a).shape, aval(b).shape
    if not sa or not sb:
        raise ValueError("matmul: input operand does not have enough dimensions (0-d operands are not allowed)")
    a2 = reshape(a, (1,) + sa) if len(sa) == 1 else a
    b2 = reshape(b, sb + (1,)) if len(sb) == 1 else b
    sa2, sb2 = aval(a2).shape, aval(b2).shape
    if sa2[-1] != sb2[-2]:
        raise ValueError(f"matmul: mismatch in core dimension: {sa} @ {sb} ({sa2[-1]} != {sb2[-2]})")
    batch = broadcast_shapes(sa2[:-2], sb2[:-2], where="matmul")
    a3 = broadcast_to(a2, batch + sa2[-2:])
    b3 = broadcast_to(b2, batch + sb2[-2:])
    nb = len(batch)
    dims = (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))
    out = prims.dot_general.bind(a3, b3, dimension_numbers=dims)
    out_shape = batch + (sa2[-2],) * (len(sa) > 1) + (sb2[-1],) * (len(sb) > 1)
    return reshape(out, out_shape)


def dot(a, b):
    """numpy.dot: scalar product, matrix product, or contraction of a's last axis with b's second-to-last."""
    x, y = promote(asarray(a), asarray(b))
    sx, sy = aval(x).shape, aval(y).shape
    if not sx or not sy:
        from .elementwise import multiply

        return multiply(x, y)
    if len(sy) <= 2:
        return matmul(x, y)
    cy = len(sy) - 2
    if sx[-1] != sy[cy]:
        raise ValueError(f"dot: shapes {sx} and {sy} not aligned: {sx[-1]} (dim {len(sx) - 1}) != {sy[cy]} (dim {cy})")
    return prims.dot_general.bind(x, y, dimension_numbers=(((len(sx) - 1,), (cy,)), ((), ())))
