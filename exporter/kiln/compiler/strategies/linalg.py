"""Native dense linear algebra kernels (codegen/linalg.py): Cholesky, triangular solve and LU with
partial pivoting of a batch of real float32/float64 matrices, one dispatch per call, the batch split over
the workgroups (a triangular solve's matrices also by rows or column groups); and the pieces of a large
Cholesky split across dispatches (the SYRK update and the join of the factor, split by rows)."""
from __future__ import annotations

from ..codegen import linalg
from . import KernelPlan, Strategy, own_kernel


class Linalg(Strategy):
    name = "linalg"

    def matches(self, region) -> bool:
        return own_kernel(region) == "linalg"

    def plan(self, region, target) -> KernelPlan:
        emit, items, work, detail = linalg.plan(region, target)
        return KernelPlan(self.name, work, items, emit, detail)


STRATEGY = Linalg()
