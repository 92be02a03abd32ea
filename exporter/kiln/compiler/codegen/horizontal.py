"""Horizontal elementwise kernels: independent elementwise regions of different shapes in one dispatch.

A training step ends in many small elementwise kernels (each parameter's update, each bias gradient's
scaling), one dispatch each; horizontal_fusion.py merges consecutive independent ones into one region.
Its outputs are grouped by shape into segments (first appearance order); each segment is the elementwise
strategy's loop nest over its shape (codegen/elementwise.py), computing only the equations its outputs
need. The workgroups split the segments' elements laid end to end: a segment's item (a row of its
innermost dim, or an element of a 1-d nest) goes to the workgroup whose slice holds the item's first
element, so every item is computed exactly once and the split follows the work, not the item counts.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...core.ir import Graph
from .elementwise import emit_elementwise_items
from .loops import const64, workgroup_slice
from .region_eval import needed_equations


@dataclass
class Segment:
    region: Graph          # the merged region's inputs and equations, this segment's outputs
    positions: list[int]   # the segment's outputs' positions among the merged region's outputs
    elements: int          # elements of the segment's shape
    per_item: int          # elements per parallel item (the innermost collapsed dim, or 1)
    cost: int              # OpTraits.cost of the equations the segment computes


def segments(region: Graph) -> list[Segment]:
    """The region's outputs grouped by shape, each group with its loop nest's geometry."""
    by_shape: dict[tuple, list[int]] = {}
    for i, v in enumerate(region.outvars):
        by_shape.setdefault(tuple(v.aval.shape), []).append(i)
    result = []
    for shape, positions in by_shape.items():
        sub = Graph(region.invars, [], [], region.eqns, [region.outvars[i] for i in positions])
        loops, _ = emit_elementwise_items(sub)
        elements = 1
        for d in shape:
            elements *= d
        per_item = loops.shape[-1] if loops is not None and len(loops.shape) > 1 else 1
        cost = sum(e.primitive.traits.cost for e in needed_equations(region.eqns, sub.outvars))
        result.append(Segment(sub, positions, elements, per_item, cost))
    return result


def is_horizontal(region: Graph) -> bool:
    """Whether an elementwise region's outputs have more than one shape (several segments)."""
    return len({tuple(v.aval.shape) for v in region.outvars}) > 1


def work(region: Graph) -> int:
    return sum(s.elements * (1 + s.cost // 4) for s in segments(region))


def parallel_items(region: Graph) -> int:
    """The elements of all segments (the workgroups split them laid end to end)."""
    return sum(s.elements for s in segments(region))


def emit_kernel(region: Graph):
    segs = segments(region)
    total = sum(s.elements for s in segs)
    n_in = len(region.invars)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if total == 0:
            return
        lo, hi = workgroup_slice(b, total, workgroup_id, workgroup_count)
        base = 0
        for seg in segs:
            if seg.elements:
                _, emit_items = emit_elementwise_items(seg.region)
                seg_pointers = list(pointers[:n_in]) + [pointers[n_in + i] for i in seg.positions]
                first = _item_at(b, lo, base, seg)
                last = _item_at(b, hi, base, seg)
                emit_items(b, seg_pointers, first, last)
            base += seg.elements

    return body


def _item_at(b: ir.IRBuilder, x, base: int, seg: Segment):
    """The first item of `seg` whose first element is at or after global element x:
    ceil(clamp(x - base, 0, elements) / per_item)."""
    local = b.sub(x, const64(base))
    local = b.select(b.icmp_signed("<", local, const64(0)), const64(0), local)
    local = b.select(b.icmp_signed(">", local, const64(seg.elements)), const64(seg.elements), local)
    if seg.per_item == 1:
        return local
    return b.udiv(b.add(local, const64(seg.per_item - 1)), const64(seg.per_item))
