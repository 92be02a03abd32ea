"""Merging a partition's consecutive dispatches over the same rows into one row-fused reduction kernel.

After fusion, a softmax is four dispatches (max, exp(x - max) materialized, sum, divide) and a layer
norm five. Starting at each reduction over the last axis, the dispatches that follow it while they
stay on the same rows (reductions over the last axis of the same `rows x C` values, elementwise
kernels of shape (rows, C), (rows) or (rows, 1), each reading a value of the group) merge into one
region for the row-fused strategy (codegen/row_fused.py, which decides what a region may hold: a
merge it refuses is not made), with the elementwise kernel just before the reduction when the
reduction reads it (an expensive value fusion materialized because two kernels read it, such as
exp(x) in exp(x) / sum(exp(x))). Values used only inside a group are no longer materialized; the
others are the merged kernel's outputs.

The merged kernel's workgroups take whole rows and its loops vectorize along a row: with fewer than
_MIN_ROWS rows, or rows shorter than _MIN_COLUMNS, of more than _SMALL elements in all, the kernels
stay apart (a softmax of rows of 16 was 1.4x slower merged, its exp no longer vectorized across rows). Groups are capped at _MAX_GROUP dispatches, so the pass is
linear in the plan's size.
"""
from __future__ import annotations

from ..core.ir import Equation, Graph, Literal, Var
from .codegen import row_fused
from .fusion import DispatchStep, HostStep

_MAX_GROUP = 16
_MIN_ROWS = 64
_MIN_COLUMNS = 64
_SMALL = 1 << 16


def _row_geometry(step: DispatchStep):
    """(rows shape, C) of a dispatch that reduces over the last axis, else None."""
    reductions = [e for e in step.region.eqns if e.primitive.traits.fusion == "reduction"]
    if len(reductions) != 1:
        return None
    shape = tuple(reductions[0].invars[0].aval.shape)
    if not shape or tuple(reductions[0].params["axes"]) != (len(shape) - 1,) or shape[-1] < 2:
        return None
    return shape[:-1], shape[-1]


def _joins(step: DispatchStep, rows, columns) -> bool:
    count = 1
    for d in rows:
        count *= d
    if (count < _MIN_ROWS or columns < _MIN_COLUMNS) and count * columns > _SMALL:
        return False  # an elementwise kernel's parallelism or vector width would shrink to a few rows or columns
    geometry = _row_geometry(step)
    if geometry is not None:
        return geometry == (rows, columns)
    if any(not _in_row_kernel(e) for e in step.region.eqns):
        return False
    allowed = (rows, rows + (1,), rows + (columns,))
    return all(tuple(v.aval.shape) in allowed for v in step.outputs)


def _reads_group(step: DispatchStep, group: list[DispatchStep]) -> bool:
    produced = {o.id for s in group for o in s.outputs}
    return any(a.id in produced for a in step.inputs)


def _in_row_kernel(eqn: Equation) -> bool:
    return eqn.primitive.traits.fusion in ("elementwise", "layout", "iota")


def _merge(name: str, group: list[DispatchStep], used_outside: set[int]) -> DispatchStep:
    """One dispatch computing the group's steps; outputs: what later steps or the graph read."""
    inner: dict[int, Var] = {}  # outer var id -> var of the merged region
    inputs: list[Var] = []
    invars: list[Var] = []
    eqns: list[Equation] = []
    for step in group:
        rename: dict[int, Var] = {}
        for outer, v in zip(step.inputs, step.region.invars):
            if outer.id not in inner:
                fresh = Var(v.aval, v.hint)
                inner[outer.id] = fresh
                inputs.append(outer)
                invars.append(fresh)
            rename[v.id] = inner[outer.id]
        for e in step.region.eqns:
            ins = [a if isinstance(a, Literal) else rename[a.id] for a in e.invars]
            outs = []
            for v in e.outvars:
                rename[v.id] = fresh = Var(v.aval, v.hint)
                outs.append(fresh)
            eqns.append(Equation(e.primitive, ins, outs, dict(e.params), e.source_info))
        for outer, v in zip(step.outputs, step.region.outvars):
            inner[outer.id] = rename[v.id]
    outputs = [o for s in group for o in s.outputs if o.id in used_outside]
    region = Graph(invars, [], [], eqns, [inner[o.id] for o in outputs])
    return DispatchStep(name, region, inputs, outputs)


def use_counts(steps: list, graph_outvars) -> tuple[dict[int, int], set[int]]:
    """(value id -> how many steps read it, the ids of the values the graph returns): what decides which
    values a merge of steps must still write (outputs_read_outside)."""
    uses: dict[int, int] = {}
    for s in steps:
        atoms = s.inputs if isinstance(s, DispatchStep) else s.eqn.invars
        for a in atoms:
            if isinstance(a, Var):
                uses[a.id] = uses.get(a.id, 0) + 1
    return uses, {a.id for a in graph_outvars if isinstance(a, Var)}


def outputs_read_outside(group: list[DispatchStep], uses: dict[int, int], returned: set[int]) -> set[int]:
    """The ids of the group's outputs that the graph returns or a step outside the group reads: the outputs
    its merged kernel keeps (the others live only inside it)."""
    outputs = {o.id for s in group for o in s.outputs}
    inside: dict[int, int] = {}
    for s in group:
        for a in s.inputs:
            if a.id in outputs:
                inside[a.id] = inside.get(a.id, 0) + 1
    return {o for o in outputs if o in returned or uses.get(o, 0) > inside.get(o, 0)}


def fuse_rows(steps: list, graph_outvars) -> list:
    """The steps with each run of row-compatible dispatches merged (see the module docstring)."""
    uses, returned = use_counts(steps, graph_outvars)
    result: list = []
    group: list[DispatchStep] = []
    merged: DispatchStep | None = None

    def flush():
        nonlocal merged
        if merged is not None:
            result.append(merged)
        else:
            result.extend(group)
        group.clear()
        merged = None

    def try_merge(candidate: list[DispatchStep]):
        used_outside = outputs_read_outside(candidate, uses, returned)
        step = _merge(f"row_fused_{candidate[0].name.rsplit('_', 1)[-1]}", candidate, used_outside)
        try:
            row_fused.plan(step.region)
        except row_fused.NotRowFusable:
            return None
        return step

    geometry = None
    for s in steps:
        if isinstance(s, HostStep) or not isinstance(s, DispatchStep):
            flush()
            result.append(s)
            continue
        if group and len(group) < _MAX_GROUP and _joins(s, *geometry) and _reads_group(s, group):
            attempt = try_merge(group + [s])
            if attempt is not None:
                group.append(s)
                merged = attempt
                continue
        flush()
        geometry = _row_geometry(s)
        if geometry is None:
            result.append(s)
            continue
        prev = result[-1] if result else None
        if isinstance(prev, DispatchStep) and _row_geometry(prev) is None and _joins(prev, *geometry) \
                and _reads_group(s, [prev]):
            attempt = try_merge([prev, s])  # the producer kernel of a value the reduction reads (exp(x) used twice)
            # (a merge that would be a plain reduction region is left to fusion's own reduction kernels)
            if attempt is not None and row_fused.is_row_fused(attempt.region):
                group.extend([result.pop(), s])
                merged = attempt
                continue
        group.append(s)
    flush()
    return result
