"""Fused elementwise kernels: one loop nest over the outputs' shape, innermost loop contiguous."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ..layout import collapse_dims, contiguous_strides, region_views
from . import scalar_ops
from .loops import const64, delinearize, dot_offsets, for_range, workgroup_slice
from .region_eval import evaluate, leaves_used, load_view, needed_equations


@dataclass(frozen=True)
class LoopShape:
    """A collapsed iteration space: `shape` with per-leaf and per-output strides."""

    shape: tuple[int, ...]
    leaf_strides: list[tuple[int, ...]]
    out_strides: list[tuple[int, ...]]

    @property
    def parallel_items(self) -> int:
        if len(self.shape) == 1:
            return self.shape[0]
        n = 1
        for d in self.shape[:-1]:
            n *= d
        return n


# A body whose per-element cost (OpTraits.cost, summed) reaches LONG_BODY_COST (a transcendental function: exp 20,
# log 20, tanh 25, gelu's exp 30) is one long dependency chain per vector (30 to 50 operations), which LLVM's cost
# model runs one vector at a time: the innermost loop computes several independent vectors per iteration
# (interleave_count), so that the out-of-order core overlaps their chains. 8 for a body of one transcendental
# function, 4 from VERY_LONG_BODY_COST on (more live values per chain: 8 spilled registers). One thread of a Zen 4,
# 1M float32 (ms, interleaving 1 / 2 / 4 / 8; x86-64-v4, and -v3 where given):
#   tanh(x*a+b)*c+x (cost 29): 0.44 / 0.41 / 0.39 / 0.35; v3: 0.76 / 0.65 / 0.56 / 0.51
#   nn.sigmoid (33): 0.34 / 0.31 / 0.32 / 0.29;  log(|x|+1) (22): 0.45 / 0.41 / 0.42 / 0.42
#   nn.gelu (42): 0.54 / 0.50 / 0.49 / 0.52; v3: 1.01 / 0.80 / 0.79 / 0.73
# Cheaper bodies keep LLVM's choice. The lanes compute the same operations at any interleaving: no bits change.
# Interleaving multiplies the vector body LLVM optimizes and compiles (a float64 erfinv kernel: 0.30 -> 0.83 s of
# LLVM), so only loops long enough for it to matter get it (the shape is static): at least INTERLEAVE_MIN_ELEMENTS
# elements (below, interleaving saves at most about a microsecond per call, less than a dispatch costs), and an innermost loop
# that runs at least two interleaved iterations of the widest float vector (16 lanes). The benchmarks' sizes
# (1M, 16M; rows of 256 and more) compile exactly as before.
LONG_BODY_COST = 20
VERY_LONG_BODY_COST = 40
INTERLEAVE_MIN_ELEMENTS = 4096
_WIDEST_FLOAT_LANES = 16


def interleave_count(cost: int, elements: int | None = None, innermost: int | None = None) -> int | None:
    """Vectors per iteration of the innermost loop of an elementwise body of per-element `cost` (None: LLVM's),
    over `elements` elements in all whose innermost loop runs `innermost` times (None: long)."""
    if cost < LONG_BODY_COST:
        return None
    count = 8 if cost < VERY_LONG_BODY_COST else 4
    if elements is not None and elements < INTERLEAVE_MIN_ELEMENTS:
        return None
    if innermost is not None and innermost < 2 * count * _WIDEST_FLOAT_LANES:
        return None
    return count


def scalar_loop(loops: LoopShape, eqns, region, target) -> bool:
    """Whether the innermost loop is shorter than one vector of the target's widest registers holds of the
    body's widest values (floats counted as float32 at least: float16 and bfloat16 compute in float32): LLVM's
    vector loop would never run, only its scalar tail, so it is not asked for (the vector body and its checks
    were half of a small kernel's LLVM time: a float64 erfinv over 7 elements 0.27 -> 0.14 s). x86-64 only,
    whose vector widths are fixed; the lanes compute the same operations either way: no bits change."""
    if target is None or target.arch != "x86_64" or not loops.shape:
        return False
    values = list(region.invars) + list(region.outvars) + [v for e in eqns for v in e.outvars]
    widest = max((max(np.dtype(v.aval.dtype).itemsize, 4 if np.dtype(v.aval.dtype).kind in "fcV" else 1)
                  for v in values), default=4)  # kind V: bfloat16
    return loops.shape[-1] < target.vector_bytes // widest


def plan_loops(region):
    views = region_views(region)
    shape = tuple(region.outvars[0].aval.shape)
    eqns = needed_equations(region.eqns, region.outvars)
    leaves = leaves_used(eqns, region.outvars, views)
    leaf_views = [views[v.id] for v in leaves]
    out_strides = [contiguous_strides(shape) for _ in region.outvars]
    collapsed, strides = collapse_dims(shape, [v.strides for v in leaf_views] + out_strides)
    loops = LoopShape(collapsed, strides[: len(leaves)], strides[len(leaves):])
    return eqns, leaves, leaf_views, loops


def parallel_items(region) -> int:
    """Units of work the workgroups split (0 when there are no elements)."""
    if any(d == 0 for d in region.outvars[0].aval.shape):
        return 0
    return plan_loops(region)[3].parallel_items


def emit_elementwise_kernel(region, target=None):
    """A BodyEmitter for a fused elementwise region (all outputs share one shape), for `target` (None: loops
    as LLVM vectorizes them anywhere)."""
    loops, emit_items = emit_elementwise_items(region, target)

    def body(b: ir.IRBuilder, pointers, workgroup_id, workgroup_count):
        if loops is None:
            return
        if len(loops.shape) == 1:
            lo, hi = aligned_slice(b, loops.parallel_items, workgroup_id, workgroup_count)
        else:
            lo, hi = workgroup_slice(b, loops.parallel_items, workgroup_id, workgroup_count)
        emit_items(b, pointers, lo, hi)

    return body


SLICE_GRANULE = 16
"""A 1-d elementwise kernel's workgroups split its elements at multiples of 16 (64 bytes of float32), so that
each workgroup's vectors start where the previous one's ended: 512-bit loads and stores of 64-byte aligned
buffers stay aligned instead of each crossing a cache line."""


def aligned_slice(b: ir.IRBuilder, total: int, workgroup_id, workgroup_count):
    """[lo, hi) of this workgroup: workgroup_slice over ceil(total / SLICE_GRANULE) granules, in elements
    (the last workgroup ends at `total`)."""
    granules = -(-total // SLICE_GRANULE)
    lo, hi = workgroup_slice(b, granules, workgroup_id, workgroup_count)
    g, n = const64(SLICE_GRANULE), const64(total)

    def clamp(v):
        v = b.mul(v, g)
        return b.select(b.icmp_unsigned("<", v, n), v, n)

    return clamp(lo), clamp(hi)


def emit_elementwise_items(region, target=None):
    """(LoopShape, emit_items) of a fused elementwise region whose outputs share one shape:
    emit_items(b, pointers, lo, hi) emits the loops over parallel items [lo, hi) (i64 values; an item is an
    element of a 1-d loop nest, else a row of its innermost dim), pointers being the region's inputs then
    outputs. The LoopShape is None when the outputs have no elements."""
    eqns, leaves, leaf_views, loops = plan_loops(region)
    size = 1
    for d in region.outvars[0].aval.shape:
        size *= d
    interleave = interleave_count(sum(e.primitive.traits.cost for e in eqns), size,
                                  loops.shape[-1] if loops.shape else 1)
    width = None
    if scalar_loop(loops, eqns, region, target):
        width = interleave = 1
    n_in = len(region.invars)

    def emit_items(b: ir.IRBuilder, pointers, lo, hi):
        out_ptrs = pointers[n_in:]

        def point(index):
            def leaf_value(var):
                k = leaves.index(var)
                view = leaf_views[k]
                return load_view(b, view, dot_offsets(b, index, loops.leaf_strides[k], const64(view.offset)), pointers)

            values = evaluate(b, eqns, region.outvars, leaf_value)
            for ptr, value, strides, out in zip(out_ptrs, values, loops.out_strides, region.outvars):
                scalar_ops.store(b, ptr, dot_offsets(b, index, strides), value, out.aval.dtype)

        if len(loops.shape) == 1:
            for_range(b, lo, hi, lambda i: point([i]), name="i", vector_width=width, interleave=interleave)
            return

        def outer(o):
            prefix = delinearize(b, o, loops.shape[:-1])
            for_range(b, 0, loops.shape[-1], lambda i: point(prefix + [i]), name="j", vector_width=width,
                      interleave=interleave)

        for_range(b, lo, hi, outer, name="o")

    return (loops if size else None), emit_items
