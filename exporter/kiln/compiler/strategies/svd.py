"""Native QR and SVD kernels (codegen/linalg_svd.py): the kernel primitives kiln.lax._linalg_native binds for
real float32/float64 qr and svd, one dispatch per call, the batch's matrices split over the workgroups."""
from __future__ import annotations

from ..codegen import linalg_svd
from . import KernelPlan, Strategy, own_kernel


class Svd(Strategy):
    name = "svd"

    def matches(self, region) -> bool:
        return own_kernel(region) == "svd"

    def plan(self, region, target) -> KernelPlan:
        emit, items, work, detail = linalg_svd.plan(region, target)
        return KernelPlan(self.name, work, items, emit, detail)


STRATEGY = Svd()
