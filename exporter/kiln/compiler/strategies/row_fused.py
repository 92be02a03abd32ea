"""Row-fused reductions (codegen/row_fused.py): reductions over the last axis with their elementwise
producers and consumers on the same rows in one kernel (row_fusion.py merges the regions)."""
from __future__ import annotations

from ..codegen import row_fused
from . import KernelPlan, Strategy, own_kernel


class RowFused(Strategy):
    name = "row_fused"

    def matches(self, region) -> bool:
        return own_kernel(region) is None and row_fused.is_row_fused(region)

    def kind(self, region) -> str:
        return "row_fused"

    def plan(self, region, target) -> KernelPlan:
        return KernelPlan(self.name, row_fused.work(region), row_fused.parallel_items(region),
                          row_fused.emit_kernel(region, target))


STRATEGY = RowFused()
