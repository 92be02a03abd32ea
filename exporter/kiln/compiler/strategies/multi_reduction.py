"""Independent reductions in one kernel (codegen/reduce.py's segments; horizontal_fusion.fuse_reductions
merges the regions): each segment a reduction kernel's work items (with its epilogue), the workgroups
splitting all segments' items laid end to end (the bias gradients' column sums of a training step)."""
from __future__ import annotations

from ..codegen import reduce
from . import KernelPlan, Strategy, own_kernel


class MultiReduction(Strategy):
    name = "multi_reduction"

    def matches(self, region) -> bool:
        return own_kernel(region) is None and reduce.is_multi(region)

    def kind(self, region) -> str:
        return "reductions"

    def plan(self, region, target) -> KernelPlan:
        return KernelPlan(self.name, reduce.multi_work(region), reduce.multi_parallel_items(region),
                          reduce.emit_multi_kernel(region), detail=f"{len(reduce.segments(region))} segments")


STRATEGY = MultiReduction()
