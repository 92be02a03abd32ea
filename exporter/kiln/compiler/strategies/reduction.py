"""Reduction kernels (codegen/reduce.py): a region whose one reduction is its last equation and only output,
with its elementwise producers fused in, or followed by an epilogue on its result (reduce.has_epilogue;
not a split reduction's chunks or partials)."""
from __future__ import annotations

from ..codegen import reduce, row_fused
from . import KernelPlan, Strategy, own_kernel, reductions


def is_split(region) -> bool:
    """Whether the region's reduction is a split reduction's chunks or partials (split_reduction.py)."""
    from ..split_reduction import CHUNKS, PARTIALS

    split = set(map(id, CHUNKS.values())) | set(map(id, PARTIALS.values()))
    return any(id(e.primitive) in split for e in reductions(region))


class Reduction(Strategy):
    name = "reduction"

    def matches(self, region) -> bool:
        return (own_kernel(region) is None and len(reductions(region)) == 1 and not row_fused.is_row_fused(region)
                and not is_split(region))

    def plan(self, region, target) -> KernelPlan:
        return KernelPlan(self.name, reduce.work(region), reduce.parallel_items(region),
                          reduce.emit_reduce_kernel(region))


STRATEGY = Reduction()
