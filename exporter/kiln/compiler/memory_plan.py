"""Planned memory: the intermediates of a function placed at offsets of one arena, at export.

A function's top-level dispatches write buffers that later dispatches read. Those that only kernels
touch (not returned, not stored into a global, not handed to control flow or a view) are dead once
their last reader has run, so their memory can be shared: each gets an offset in the function's
transient arena such that two buffers whose lifetimes overlap never overlap in memory (lifetimes are
step intervals [written, last read], both ends inclusive, so a kernel never writes over its own
inputs). The runtime allocates the arena once per context and function (bytecode alloc.transient),
so a steady-state call allocates only its results. docs/vm.md, "Planned memory".
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

from ..core.ir import Graph, Var
from ..vm_types import tensor_type

ALIGNMENT = 64  # KILN_BUFFER_ALIGNMENT: each buffer starts on a cache line
_ENABLED = contextvars.ContextVar("kiln_memory_planning", default=True)


@contextlib.contextmanager
def planning_disabled():
    """Compiles inside the block allocate every intermediate on its own (alloc), as before planned
    memory: the reference the planned modules are tested against."""
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


@dataclass(frozen=True)
class TransientPlan:
    """Offsets (bytes) of the planned buffers by value id, and the arena's size."""

    offsets: dict[int, int]
    size: int
    enabled: bool = True  # False inside planning_disabled(): no alloc.transient nor alloc.result


def step_inputs(step) -> list:
    """The values a step reads: a dispatch's inputs, a host step's operands."""
    return list(step.inputs) if getattr(step, "region", None) is not None else list(step.eqn.invars)


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def _intervals(graph: Graph, steps: list) -> dict[int, tuple[int, int, int]]:
    """value id -> (first step, last step, bytes) of every dispatch output only kernels read."""
    defined: dict[int, tuple[int, int]] = {}
    for index, step in enumerate(steps):
        if getattr(step, "region", None) is not None:
            for v in step.outputs:
                size = tensor_type(v.aval).byte_size
                if size:
                    defined[v.id] = (index, size)
    last: dict[int, int] = {}
    excluded: set[int] = {a.id for a in graph.outvars if isinstance(a, Var)}
    for index, step in enumerate(steps):
        kernel = getattr(step, "region", None) is not None
        for a in step_inputs(step):
            if isinstance(a, Var) and a.id in defined:
                last[a.id] = index
                if not kernel:
                    excluded.add(a.id)
    return {vid: (first, last.get(vid, first), size) for vid, (first, size) in defined.items()
            if vid not in excluded}


def result_slots(graph: Graph, steps: list) -> dict[int, int]:
    """value id -> result index of the results a top-level dispatch writes and only kernels read
    otherwise: alloc.result may place them in the caller's destination (kiln_context_invoke_host),
    so the kernel writes the caller's memory and no copy follows. A value returned twice is left out
    (two destinations cannot both be its memory)."""
    positions: dict[int, list[int]] = {}
    for k, a in enumerate(graph.outvars):
        if isinstance(a, Var):
            positions.setdefault(a.id, []).append(k)
    outputs = {v.id for step in steps if getattr(step, "region", None) is not None for v in step.outputs}
    host_read = {a.id for step in steps if getattr(step, "region", None) is None
                 for a in step_inputs(step) if isinstance(a, Var)}
    return {vid: ks[0] for vid, ks in positions.items()
            if len(ks) == 1 and vid in outputs and vid not in host_read}


def plan_transients(graph: Graph, steps: list) -> TransientPlan:
    """Packs the graph's kernel-only intermediates into one arena: largest first, each at the lowest
    aligned offset clear of every placed buffer whose lifetime overlaps its own."""
    if not _ENABLED.get():
        return TransientPlan({}, 0, enabled=False)
    intervals = _intervals(graph, steps)
    order = sorted(intervals, key=lambda vid: (-intervals[vid][2], intervals[vid][0], vid))
    placed: list[tuple[int, int, int, int]] = []  # (first, last, offset, end)
    offsets: dict[int, int] = {}
    size = 0
    for vid in order:
        first, last, nbytes = intervals[vid]
        nbytes = _aligned(nbytes)
        busy = sorted((o, e) for f, l, o, e in placed if f <= last and first <= l)
        offset = 0
        for start, end in busy:
            if offset + nbytes <= start:
                break
            offset = max(offset, end)
        offsets[vid] = offset
        placed.append((first, last, offset, offset + nbytes))
        size = max(size, offset + nbytes)
    return TransientPlan(offsets, size)
