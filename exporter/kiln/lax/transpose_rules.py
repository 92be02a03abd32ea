"""Transpose rules of kiln.lax.prims' linear primitives, used by reverse mode (kiln.transforms.transpose)."""
from __future__ import annotations

import numpy as np

from ..core.aval import ShapedArray
from ..core.trace import get_aval
from ..transforms.transpose import is_linear
from . import prims


def _unbroadcast_sum(ct, operand_aval: ShapedArray, broadcast_dimensions):
    """The transpose of broadcast_in_dim: sum the broadcast axes back to the operand's shape."""
    ct_shape = _shape(ct)
    new_axes = tuple(i for i in range(len(ct_shape)) if i not in broadcast_dimensions)
    stretched = tuple(d for s, d in zip(operand_aval.shape, broadcast_dimensions) if s == 1 and ct_shape[d] != 1)
    axes = tuple(sorted(new_axes + stretched))
    out = prims.reduce_sum.bind(ct, axes=axes) if axes else ct
    if _shape(out) != operand_aval.shape:
        out = prims.reshape.bind(out, new_shape=operand_aval.shape)
    return out


def _shape(x):
    return get_aval(x).shape


def _add_t(ct, x, y):
    return [ct if is_linear(x) else None, ct if is_linear(y) else None]


def _sub_t(ct, x, y):
    return [ct if is_linear(x) else None, prims.neg.bind(ct) if is_linear(y) else None]


def _mul_t(ct, x, y):
    if is_linear(x) and is_linear(y):
        raise AssertionError("mul of two linear values is not linear")
    return [prims.mul.bind(ct, y) if is_linear(x) else None, prims.mul.bind(x, ct) if is_linear(y) else None]


def _div_t(ct, x, y):
    if is_linear(y):
        raise AssertionError("div is linear only in its numerator")
    return [prims.div.bind(ct, y), None]


def _select_t(ct, p, a, b):
    zeros = prims.broadcast_in_dim.bind(np.zeros((), _dtype(ct)), shape=_shape(ct), broadcast_dimensions=())
    return [None, prims.select.bind(p, ct, zeros) if is_linear(a) else None,
            prims.select.bind(p, zeros, ct) if is_linear(b) else None]


def _dtype(x):
    return get_aval(x).dtype


def _convert_t(ct, x, *, new_dtype):
    return [prims.convert.bind(ct, new_dtype=x.aval.dtype)]


def _broadcast_t(ct, x, *, shape, broadcast_dimensions):
    return [_unbroadcast_sum(ct, x.aval, broadcast_dimensions)]


def _reshape_t(ct, x, *, new_shape):
    return [prims.reshape.bind(ct, new_shape=x.aval.shape)]


def _transpose_t(ct, x, *, permutation):
    inverse = tuple(int(i) for i in np.argsort(permutation))
    return [prims.transpose.bind(ct, permutation=inverse)]


def _reduce_sum_t(ct, x, *, axes):
    kept = tuple(i for i in range(x.aval.ndim) if i not in axes)
    return [prims.broadcast_in_dim.bind(ct, shape=x.aval.shape, broadcast_dimensions=kept)]


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


def _remaining(original, *removed_lists):
    removed = set(i for r in removed_lists for i in r)
    return [i for i in original if i not in removed]


def _dot_transpose_lhs(ct, x_aval, y, *, dimension_numbers, swap_ans=False):
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_ndim = x_aval.ndim
    y_ndim = len(_shape(y))
    x_kept = _remaining(range(x_ndim), x_contract, x_batch)
    y_kept = _remaining(range(y_ndim), y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(ans_batch), tuple(y_batch)))
    x_contract_sorted_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    out_axes = tuple(int(i) for i in np.argsort(list(x_batch) + x_kept + x_contract_sorted_by_y))
    product = prims.dot_general.bind(ct, y, dimension_numbers=dims)
    return prims.transpose.bind(product, permutation=out_axes) if out_axes != tuple(range(len(out_axes))) else product


def _dot_general_t(ct, x, y, *, dimension_numbers):
    (xc, yc), (xb, yb) = dimension_numbers
    ct_x = _dot_transpose_lhs(ct, x.aval, y, dimension_numbers=dimension_numbers) if is_linear(x) else None
    ct_y = None
    if is_linear(y):
        swapped = ((yc, xc), (yb, xb))
        ct_y = _dot_transpose_lhs(ct, y.aval, x, dimension_numbers=swapped, swap_ans=True)
    return [ct_x, ct_y]


def register() -> None:
    prims.add.transpose_rule = _add_t
    prims.sub.transpose_rule = _sub_t
    prims.mul.transpose_rule = _mul_t
    prims.div.transpose_rule = _div_t
    prims.neg.transpose_rule = lambda ct, x: [prims.neg.bind(ct)]
    prims.select.transpose_rule = _select_t
    prims.convert.transpose_rule = _convert_t
    prims.broadcast_in_dim.transpose_rule = _broadcast_t
    prims.reshape.transpose_rule = _reshape_t
    prims.transpose.transpose_rule = _transpose_t
    prims.reduce_sum.transpose_rule = _reduce_sum_t
    prims.dot_general.transpose_rule = _dot_general_t
