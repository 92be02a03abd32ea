"""Horizontal elementwise kernels (codegen/horizontal.py): independent elementwise regions of different
shapes merged into one dispatch (horizontal_fusion.py), one loop nest per output shape."""
from __future__ import annotations

from ..codegen import horizontal
from ..codegen.pipeline import widest_vectors
from . import KernelPlan, Strategy, own_kernel, reductions


class Horizontal(Strategy):
    name = "horizontal"

    def matches(self, region) -> bool:
        return own_kernel(region) is None and not reductions(region) and horizontal.is_horizontal(region)

    def kind(self, region) -> str:
        return "horizontal"

    def plan(self, region, target) -> KernelPlan:
        segments = horizontal.segments(region)
        return KernelPlan(self.name, horizontal.work(region), horizontal.parallel_items(region),
                          widest_vectors(horizontal.emit_kernel(region), target), detail=f"{len(segments)} segments")


STRATEGY = Horizontal()
