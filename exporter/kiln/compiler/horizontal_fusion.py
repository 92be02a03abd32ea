"""Merging consecutive independent elementwise dispatches into one horizontal kernel.

A training step ends in one small elementwise kernel per parameter (the optimizer's update of each weight
and bias, of the moments, the bias gradients' scaling), each a dispatch of its own, as their shapes
differ and fusion merges only kernels of one shape. Here a run of consecutive elementwise dispatches
(the elementwise strategy's regions: no reduction, no kernel of its own) is ordered by dependency level
(a dispatch's level is one more than the highest level of the run's dispatches it reads), and each
level's dispatches, which read none of each other's outputs, become one region whose outputs have
several shapes, the horizontal strategy's (codegen/horizontal.py: a loop nest per shape, the workgroups
splitting all their elements). Adam's update of every parameter is then three dispatches: the moments,
the scalar bias corrections, the parameters. A merged region holds at most _MAX_GROUP dispatches and
_MAX_OUTPUTS outputs. A global's load within a run moves before the run (no dispatch writes a global), so
the loads of the optimizer's state do not cut it. It runs after row fusion and split reductions, whose regions it leaves alone.

Independent reductions merge too (fuse_reductions, before the elementwise regrouping): a reduction kernel
(the reduction strategy's, its epilogue included) that keeps its operand's last axis waits, while no step
reads its result and no host step comes, for the next such reduction over as many elements; the ones
found merge into one region at the last one's place, the multi_reduction strategy's (codegen/reduce.py's
segments: each reduction's work items, the workgroups splitting them all). The bias gradients' column
sums of every layer of a training step are then one dispatch. Plain reductions over the last axis of the
same rows x C (a layer norm's gradient sums) group the same way into a row-fused region (the row_fused
strategy's, where codegen/row_fused.plan takes it; row fusion's size rule applies). A group holds at most
_MAX_GROUP reductions; a reduction that finds no partner, or whose group no strategy takes, stays where it was.
"""
from __future__ import annotations

from ..core.ir import Var
from .fusion import DispatchStep, HostStep
from .row_fusion import _merge

_MAX_GROUP = 16
_MAX_OUTPUTS = 32


def _plain_elementwise(step) -> bool:
    from .strategies import BY_NAME

    return isinstance(step, DispatchStep) and BY_NAME["elementwise"].matches(step.region)


def fuse_horizontal(steps: list) -> list:
    """The steps with each run of consecutive elementwise dispatches regrouped (module docstring)."""
    result: list = []
    run: list[DispatchStep] = []
    for s in steps:
        if _plain_elementwise(s):
            run.append(s)
            continue
        if run and isinstance(s, HostStep) and s.eqn.primitive.name == "global_load":
            result.append(s)  # a run holds no store, so the load moves before the run's dispatches
            continue
        result.extend(_regroup(run))
        run = []
        result.append(s)
    result.extend(_regroup(run))
    return result


def _regroup(run: list[DispatchStep]) -> list[DispatchStep]:
    """A run's dispatches by dependency level (0: reads no output of the run; L: reads one of level L-1 at
    most), each level's in their order, chunks of each level merged: every dispatch still follows those it
    reads."""
    if len(run) < 2:
        return list(run)
    level_of: dict[int, int] = {}
    levels: list[list[DispatchStep]] = []
    for s in run:
        level = 1 + max((level_of.get(a.id, -1) for a in s.inputs if isinstance(a, Var)), default=-1)
        for o in s.outputs:
            level_of[o.id] = level
        while len(levels) <= level:
            levels.append([])
        levels[level].append(s)
    result: list[DispatchStep] = []
    for members in levels:
        chunk: list[DispatchStep] = []
        for s in members:
            if chunk and (len(chunk) >= _MAX_GROUP or sum(len(c.outputs) for c in chunk) + len(s.outputs) > _MAX_OUTPUTS):
                result.append(_merged(chunk))
                chunk = []
            chunk.append(s)
        if chunk:
            result.append(_merged(chunk))
    return result


def _merged(chunk: list[DispatchStep]) -> DispatchStep:
    if len(chunk) == 1:
        return chunk[0]
    outputs = {o.id for s in chunk for o in s.outputs}
    return _merge(f"horizontal_{chunk[0].name.rsplit('_', 1)[-1]}", chunk, outputs)


def _reduction_key(step):
    """The grouping key of a reduction kernel: ("columns", reduced elements) where it keeps its operand's
    last axis, ("rows", rows, C) for a plain reduction over the last axis of rows x C (row fusion's
    geometry and size rule), else None."""
    from .strategies import BY_NAME

    if not isinstance(step, DispatchStep) or not BY_NAME["reduction"].matches(step.region):
        return None
    eqn = next(e for e in step.region.eqns if e.primitive.traits.fusion == "reduction")
    shape = tuple(eqn.invars[0].aval.shape)
    axes = tuple(eqn.params.get("axes", ()))
    if shape and axes == (len(shape) - 1,) and step.region.eqns[-1] is eqn:
        from .row_fusion import _joins

        rows, columns = shape[:-1], shape[-1]
        return ("rows", rows, columns) if columns >= 2 and _joins(step, rows, columns) else None
    if not shape or len(shape) - 1 in axes or shape[-1] == 1:
        return None
    count = 1
    for d in axes:
        count *= shape[d]
    return ("columns", count)


def fuse_reductions(steps: list) -> list:
    """The steps with groups of independent reductions of one reduced size merged (module docstring)."""
    groups: list[list[int]] = []       # step indices of each group found
    open_groups: dict[tuple, list[int]] = {}
    produced_by: dict[int, tuple] = {}  # output var id of an open group's member -> the group's key

    def close(key):
        members = open_groups.pop(key)
        for i in members:
            for o in steps[i].outputs:
                produced_by.pop(o.id, None)
        if len(members) > 1:
            groups.append(members)

    for index, s in enumerate(steps):
        if not isinstance(s, DispatchStep):  # a host step (global store, control flow) ends every group
            for key in list(open_groups):
                close(key)
            continue
        for a in s.inputs:
            key = produced_by.get(a.id) if isinstance(a, Var) else None
            if key is not None and key in open_groups:
                close(key)
        key = _reduction_key(s)
        if key is None:
            continue
        open_groups.setdefault(key, []).append(index)
        for o in s.outputs:
            produced_by[o.id] = key
        if len(open_groups[key]) >= _MAX_GROUP:
            close(key)
    for key in list(open_groups):
        close(key)
    if not groups:
        return steps
    merged_at: dict[int, DispatchStep] = {}
    moved: set[int] = set()
    for members in groups:
        chunk = [steps[i] for i in members]
        outputs = {o.id for c in chunk for o in c.outputs}
        merged = _merge(f"reductions_{chunk[0].name.rsplit('_', 1)[-1]}", chunk, outputs)
        if not _accepted(merged.region):
            continue
        merged_at[members[-1]] = merged
        moved.update(members)
    return [merged_at[i] if i in merged_at else s for i, s in enumerate(steps) if i not in moved or i in merged_at]


def _accepted(region) -> bool:
    """Whether a strategy takes the merged reductions: multi_reduction (column reductions) or row_fused
    (row reductions over the same rows, one loop reading their operands)."""
    from .codegen import reduce, row_fused

    if reduce.is_multi(region):
        return True
    try:
        row_fused.plan(region)
    except row_fused.NotRowFusable:
        return False
    return row_fused.is_row_fused(region)
