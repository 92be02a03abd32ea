"""kiln.lax's primitive-level functions: strict shapes and dtypes, as in jax.lax.

Python scalars take the dtype of the array operand; arrays must already agree.
"""
from __future__ import annotations

import numpy as np

from ..core import dtypes
from . import prims


def _aval(x):
    from ..numpy._base import aval

    return aval(x)


def _operands(*xs):
    """Arrays stay as they are; Python scalars take the dtype of the first array operand."""
    arrays = [x for x in xs if not isinstance(x, (bool, int, float)) or isinstance(x, np.generic)]
    dtype = _aval(arrays[0]).dtype if arrays else dtypes.python_scalar_dtype(xs[0])
    out = []
    for x in xs:
        if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
            x = np.asarray(x, dtype)
        out.append(x)
    shape = next((_aval(x).shape for x in out if _aval(x).shape), ())
    return [prims.broadcast_in_dim.bind(x, shape=shape, broadcast_dimensions=()) if _aval(x).shape == () and shape
            else x for x in out]


def _binary(prim):
    def fn(x, y):
        return prim.bind(*_operands(x, y))

    fn.__name__ = prim.name
    fn.__doc__ = f"lax.{prim.name}: elementwise, operands of equal shape and dtype (scalars broadcast)."
    return fn


def _unary(prim):
    def fn(x):
        return prim.bind(*_operands(x))

    fn.__name__ = prim.name
    fn.__doc__ = f"lax.{prim.name}: elementwise."
    return fn


add, sub, mul, div, pow = (_binary(p) for p in (prims.add, prims.sub, prims.mul, prims.div, prims.pow))
max, min = _binary(prims.max), _binary(prims.min)
eq, ne, lt, le, gt, ge = (_binary(p) for p in (prims.eq, prims.ne, prims.lt, prims.le, prims.gt, prims.ge))
neg, abs, exp, log, tanh, sqrt = (_unary(p) for p in (prims.neg, prims.abs, prims.exp, prims.log, prims.tanh, prims.sqrt))


def select(pred, on_true, on_false):
    """pred ? on_true : on_false elementwise; pred is bool of the operands' shape."""
    return prims.select.bind(pred, *_operands(on_true, on_false))


def convert_element_type(operand, new_dtype):
    return prims.convert.bind(operand, new_dtype=dtypes.canonical(new_dtype))


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    return prims.broadcast_in_dim.bind(operand, shape=tuple(shape), broadcast_dimensions=tuple(broadcast_dimensions))


def reshape(operand, new_sizes):
    return prims.reshape.bind(operand, new_shape=tuple(new_sizes))


def transpose(operand, permutation):
    return prims.transpose.bind(operand, permutation=tuple(permutation))


def dot_general(lhs, rhs, dimension_numbers):
    """Contraction ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), as in jax.lax.dot_general."""
    (lc, rc), (lb, rb) = dimension_numbers
    dims = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    return prims.dot_general.bind(lhs, rhs, dimension_numbers=dims)


def reduce_sum(operand, axes):
    return prims.reduce_sum.bind(operand, axes=tuple(sorted(axes)))


def reduce_max(operand, axes):
    return prims.reduce_max.bind(operand, axes=tuple(sorted(axes)))


def reduce_min(operand, axes):
    return prims.reduce_min.bind(operand, axes=tuple(sorted(axes)))


def iota(dtype, size: int):
    """[0, 1, ..., size-1] of dtype."""
    return prims.iota.bind(shape=(int(size),), dimension=0, dtype=dtypes.canonical(dtype))


def broadcasted_iota(dtype, shape, dimension: int):
    return prims.iota.bind(shape=tuple(shape), dimension=int(dimension), dtype=dtypes.canonical(dtype))
