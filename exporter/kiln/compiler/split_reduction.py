"""Full and column reductions at memory bandwidth: a large reduction with too few outputs to keep the
workgroups busy runs as two kernels, partials then their combine (a two-level parallel combine).

The partials kernel (`reduce_<op>_chunks`) reduces `chunks` ranges of the outermost reduced dim of the
operand, each chunk of each output a workgroup item, and stores the accumulators unrounded (float64
for float sums, see codegen/reduce.accumulator_dtype); the combine kernel (`reduce_<op>_partials`)
reduces them in chunk order and rounds once. The chunk count is fixed when compiling, so a result
has the same bits for every worker count; float sums are exactly as accurate as in one kernel
(float64 accumulation, one rounding).
"""
from __future__ import annotations

import numpy as np

from ..core.aval import ShapedArray
from ..core.ir import Equation, Graph, Var
from ..core.primitive import Primitive
from .codegen import reduce, row_fused
from .fusion import DispatchStep

MIN_SIZE = 1 << 18
"""Operands of fewer elements keep one kernel (its one or few workgroups are quick enough)."""
TARGET_ITEMS = 64
"""Workgroup items the partials kernel aims at (compile.choose_workgroups makes at most 64 groups)."""
MIN_CHUNK = 1 << 15
"""Elements of the operand per item at least."""


def _chunks_primitive(op: str) -> Primitive:
    prim = Primitive(f"reduce_{op}_chunks")
    prim.def_traits(fusion="reduction", reduction=op)

    @prim.def_abstract_eval
    def abstract_eval(x, *, axes, chunks, dtype):
        kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return ShapedArray((chunks,) + kept, reduce.accumulator_dtype(op, dtype))

    return prim


def _partials_primitive(op: str) -> Primitive:
    prim = Primitive(f"reduce_{op}_partials")
    prim.def_traits(fusion="reduction", reduction=op)

    @prim.def_abstract_eval
    def abstract_eval(x, *, axes, dtype):
        return ShapedArray(x.shape[1:], np.dtype(dtype))

    return prim


CHUNKS = {op: _chunks_primitive(op) for op in ("sum", "max", "min")}
PARTIALS = {op: _partials_primitive(op) for op in ("sum", "max", "min")}


def chunk_count(region) -> int:
    """How many partials a reduction region is split into (1: not split)."""
    eqn = region.eqns[-1]
    if eqn.primitive.name not in ("reduce_sum", "reduce_max", "reduce_min") or row_fused.is_row_fused(region):
        return 1
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    size = int(eqn.invars[0].aval.size)
    if dtype == np.bool_ or size < MIN_SIZE:
        return 1
    p = reduce._plan(region)
    if p.empty_output or not p.red_shape or p.base_items >= TARGET_ITEMS:
        return 1
    chunks = min(-(-TARGET_ITEMS // p.base_items), p.red_shape[0], size // (MIN_CHUNK * p.base_items))
    acc_bytes = reduce.accumulator_dtype(p.op, dtype).itemsize
    while chunks > 1 and chunks * p.kept_size * acc_bytes * 4 > size * dtype.itemsize:
        chunks //= 2  # partials stay within a quarter of the operand's bytes
    return max(chunks, 1)


def split_reductions(steps: list) -> list:
    """The steps with each reduction chunk_count splits replaced by its partials and combine kernels."""
    result = []
    for step in steps:
        chunks = chunk_count(step.region) if isinstance(step, DispatchStep) else 1
        if chunks == 1:
            result.append(step)
            continue
        region = step.region
        eqn = region.eqns[-1]
        op = eqn.primitive.traits.reduction
        dtype = np.dtype(eqn.outvars[0].aval.dtype)
        params = {"axes": tuple(eqn.params["axes"]), "chunks": chunks, "dtype": dtype}
        aval = CHUNKS[op].abstract_eval(eqn.invars[0].aval, **params)[0]
        inner, outer = Var(aval), Var(aval)
        first = Graph(region.invars, [], [], region.eqns[:-1] + [Equation(CHUNKS[op], [eqn.invars[0]], [inner], params,
                                                                          eqn.source_info)], [inner])
        partials, result_var = Var(aval), Var(eqn.outvars[0].aval)
        second = Graph([partials], [], [], [Equation(PARTIALS[op], [partials], [result_var], {"axes": (0,), "dtype": dtype},
                                                     eqn.source_info)], [result_var])
        result.append(DispatchStep(f"{step.name}_chunks", first, step.inputs, [outer]))
        result.append(DispatchStep(f"{step.name}_partials", second, [outer], step.outputs))
    return result
