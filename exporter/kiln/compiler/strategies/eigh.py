"""The native symmetric eigendecomposition (codegen/linalg_eigh.py): the kernel primitive eigh_ql
(kiln.lax._eigh_ql) that eigh binds for real float32/float64 matrices, one dispatch per call, the batch's
matrices split over the workgroups."""
from __future__ import annotations

from ..codegen import linalg_eigh
from . import KernelPlan, Strategy, own_kernel


class Eigh(Strategy):
    name = "eigh"

    def matches(self, region) -> bool:
        return own_kernel(region) == "eigh"

    def plan(self, region, target) -> KernelPlan:
        emit, items, work = linalg_eigh.plan(region, target)
        return KernelPlan(self.name, work, items, emit)


STRATEGY = Eigh()
