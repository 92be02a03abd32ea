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
