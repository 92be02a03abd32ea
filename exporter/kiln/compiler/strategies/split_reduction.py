"""Split reductions (split_reduction.py makes the regions, codegen/reduce.py emits them): a large reduction
with few outputs as `reduce_<op>_chunks` (fixed ranges, unrounded partials) and `reduce_<op>_partials`
(the partials combined in chunk order)."""
from __future__ import annotations

from ..codegen import reduce, row_fused
from . import KernelPlan, Strategy, own_kernel, reductions
from .reduction import is_split


class SplitReduction(Strategy):
    name = "split_reduction"

    def matches(self, region) -> bool:
        return (own_kernel(region) is None and len(reductions(region)) == 1 and not row_fused.is_row_fused(region)
                and is_split(region))

    def plan(self, region, target) -> KernelPlan:
        return KernelPlan(self.name, reduce.work(region), reduce.parallel_items(region),
                          reduce.emit_reduce_kernel(region),
                          self.kind(region).rsplit("_", 1)[-1])


STRATEGY = SplitReduction()
