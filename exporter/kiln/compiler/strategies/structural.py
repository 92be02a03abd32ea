"""Structural kernels (codegen/structural.py): pad, concatenate, gather, scatter, dynamic slices, sort,
cumulative ops, argmax/argmin."""
from __future__ import annotations

from ..codegen import structural
from . import KernelPlan, Strategy, own_kernel


class Structural(Strategy):
    name = "structural"

    def matches(self, region) -> bool:
        return own_kernel(region) == "structural"

    def plan(self, region, target) -> KernelPlan:
        emit, items, work = structural.plan(region)
        return KernelPlan(self.name, work, items, emit)


STRATEGY = Structural()
