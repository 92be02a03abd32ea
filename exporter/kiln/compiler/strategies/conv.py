"""Convolutions (codegen/conv.py chooses): Winograd (conv_winograd.py), implicit GEMM over the matmul microkernel
(conv_gemm.py), depthwise (conv_depthwise.py) or the generic loops."""
from __future__ import annotations

from ..codegen import conv
from . import KernelPlan, Strategy, own_kernel


class Conv(Strategy):
    name = "conv"

    def matches(self, region) -> bool:
        return own_kernel(region) == "conv"

    def plan(self, region, target) -> KernelPlan:
        return KernelPlan(self.name, conv.work(region, target), conv.parallel_items(region, target),
                          conv.emit_kernel(region, target), conv.strategy(region, target))


STRATEGY = Conv()
