"""Window reductions (codegen/pool.py): reduce_window (pooling) and its gradients."""
from __future__ import annotations

from ..codegen import pool
from . import KernelPlan, Strategy, own_kernel


class Pooling(Strategy):
    name = "pooling"

    def matches(self, region) -> bool:
        return own_kernel(region) == "pooling"

    def plan(self, region, target) -> KernelPlan:
        return KernelPlan(self.name, pool.work(region), pool.parallel_items(region),
                          pool.emit_kernel(region))


STRATEGY = Pooling()
