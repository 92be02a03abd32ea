"""Fused elementwise kernels (codegen/elementwise.py): regions without a reduction or a kernel of its own whose
outputs share one shape (outputs of several shapes are the horizontal strategy's)."""
from __future__ import annotations

from ..codegen import elementwise, horizontal
from ..codegen.pipeline import widest_vectors
from . import KernelPlan, Strategy, own_kernel, reductions


class Elementwise(Strategy):
    name = "elementwise"

    def matches(self, region) -> bool:
        return own_kernel(region) is None and not reductions(region) and not horizontal.is_horizontal(region)

    def plan(self, region, target) -> KernelPlan:
        cost = sum(e.primitive.traits.cost for e in region.eqns)  # OpTraits.cost: the one cost table
        size = max(region.outvars[0].aval.size, 0)
        return KernelPlan(self.name, size * (1 + cost // 4), elementwise.parallel_items(region),
                          widest_vectors(elementwise.emit_elementwise_kernel(region, target), target))


STRATEGY = Elementwise()
