"""Matrix products (codegen/matmul.py): dot_general over strided views, register-blocked for the target."""
from __future__ import annotations

from ..codegen import matmul
from . import KernelPlan, Strategy, own_kernel


class Matmul(Strategy):
    name = "matmul"

    def matches(self, region) -> bool:
        return own_kernel(region) == "matmul"

    def plan(self, region, target) -> KernelPlan:
        return KernelPlan(self.name, matmul.work(region), matmul.parallel_items(region, target),
                          matmul.emit_matmul_kernel(region, target))


STRATEGY = Matmul()
