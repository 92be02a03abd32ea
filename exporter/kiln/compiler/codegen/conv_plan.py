"""The convolution's plan shared by its kernels (codegen/conv.py and the conv_* modules): the operands'
strided views and the convolution's sizes, and the input coordinate of an output position and tap."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..layout import contiguous_strides, region_views
from .loops import const64

TILE = 64


def _main_eqn(region):
    return next(e for e in reversed(region.eqns) if e.primitive.traits.fusion == "kernel")


@dataclass
class ConvPlan:
    dtype: np.dtype
    lhs: object  # View
    rhs: object
    n_out: int
    out_features: int
    in_per_group: int
    out_spatial: tuple[int, ...]
    kernel_spatial: tuple[int, ...]
    in_spatial: tuple[int, ...]
    strides: tuple[int, ...]
    pad_lo: tuple[int, ...]
    lhs_dilation: tuple[int, ...]
    rhs_dilation: tuple[int, ...]
    feature_groups: int
    batch_groups: int
    lhs_s: tuple  # (batch, feature, spatial...) strides of the lhs view
    rhs_s: tuple  # (out feature, in feature, spatial...)
    out_s: tuple  # (batch, feature, spatial...) strides of the contiguous output

    @property
    def groups(self) -> int:
        return self.feature_groups * self.batch_groups

    @property
    def block(self) -> int:
        return self.out_features // self.groups

    @property
    def tiles(self) -> int:
        return -(-self.block // TILE)

    @property
    def items(self) -> int:
        return self.n_out * int(np.prod(self.out_spatial, dtype=np.int64)) * self.groups * self.tiles


def _conv_plan(region) -> ConvPlan:
    eqn = _main_eqn(region)
    p = eqn.params
    views = region_views(region)
    lv, rv = views[eqn.invars[0].id], views[eqn.invars[1].id]
    lhs_spec, rhs_spec, out_spec = p["dimension_numbers"]
    out_shape = eqn.outvars[0].aval.shape
    ostrides = contiguous_strides(out_shape)
    return ConvPlan(
        dtype=np.dtype(eqn.outvars[0].aval.dtype), lhs=lv, rhs=rv,
        n_out=out_shape[out_spec[0]], out_features=out_shape[out_spec[1]],
        in_per_group=rv.shape[rhs_spec[1]],
        out_spatial=tuple(out_shape[d] for d in out_spec[2:]),
        kernel_spatial=tuple(rv.shape[d] for d in rhs_spec[2:]),
        in_spatial=tuple(lv.shape[d] for d in lhs_spec[2:]),
        strides=tuple(p["window_strides"]), pad_lo=tuple(lo for lo, _ in p["padding"]),
        lhs_dilation=tuple(p["lhs_dilation"]), rhs_dilation=tuple(p["rhs_dilation"]),
        feature_groups=p["feature_group_count"], batch_groups=p["batch_group_count"],
        lhs_s=tuple(lv.strides[d] for d in lhs_spec), rhs_s=tuple(rv.strides[d] for d in rhs_spec),
        out_s=tuple(ostrides[d] for d in out_spec),
    )



def _input_coordinate(b, p: ConvPlan, d: int, out_pos, tap):
    """(the input index along spatial dim d, inside?) of output position out_pos and kernel tap `tap` there:
    q = out_pos * stride + tap * rhs_dilation - pad_lo in the lhs-dilated, padded input, inside where it lands on
    an element of the input (0 <= q < its dilated extent, on the lhs dilation's grid), the index q / lhs_dilation."""
    q = b.sub(b.add(b.mul(out_pos, const64(p.strides[d])), b.mul(tap, const64(p.rhs_dilation[d]))), const64(p.pad_lo[d]))
    ld = p.lhs_dilation[d]
    extent = (p.in_spatial[d] - 1) * ld + 1 if p.in_spatial[d] else 0
    ok = b.and_(b.icmp_signed(">=", q, const64(0)), b.icmp_signed("<", q, const64(extent)))
    if ld > 1:
        ok = b.and_(ok, b.icmp_signed("==", b.srem(q, const64(ld)), const64(0)))
        q = b.sdiv(q, const64(ld))
    return q, ok

