"""Merging a matrix product with the elementwise kernel consuming its result (the matmul's epilogue).

After fusion a dense layer is two dispatches: the product, then bias + activation reading it back; the
backward pass has the same shape: dh = dz @ W^T, then dz' = dh * (1 - h*h) (or relu's mask). Here a
matmul dispatch followed by an elementwise dispatch of the product's shape that reads the product at the
element it writes becomes one matmul region with an epilogue (codegen/epilogue.py: each work item
applies it to the tile it has just computed, still in cache). Global loads between the two move before
the product (no dispatch writes a global). The product stays an output when a later step or the graph
reads it; otherwise it lives in an epilogue output's buffer. The merge is not made where the matmul
strategy refuses the region (codegen/matmul.epilogue_fusable: integers and halves, operands that are not
one strided dim per group, an empty product, an epilogue operand not a strided view of an input).
Runs after row fusion and split reductions and before horizontal fusion; linear in the plan's size.
"""
from __future__ import annotations

from ..core.ir import Var
from .fusion import DispatchStep, HostStep
from .row_fusion import _merge


def _is(step, name: str) -> bool:
    from .strategies import BY_NAME

    return isinstance(step, DispatchStep) and BY_NAME[name].matches(step.region)


def _bare_matmul(step) -> bool:
    from .codegen.epilogue import dot_equation

    return _is(step, "matmul") and dot_equation(step.region) is step.region.eqns[-1]


def fuse_epilogues(steps: list, graph_outvars) -> list:
    from .codegen.matmul import epilogue_fusable

    uses: dict[int, int] = {}
    for s in steps:
        atoms = s.inputs if isinstance(s, DispatchStep) else s.eqn.invars
        for a in atoms:
            if isinstance(a, Var):
                uses[a.id] = uses.get(a.id, 0) + 1
    returned = {a.id for a in graph_outvars if isinstance(a, Var)}
    result: list = []
    i = 0
    while i < len(steps):
        s = steps[i]
        if not _bare_matmul(s):
            result.append(s)
            i += 1
            continue
        j = i + 1
        while j < len(steps) and isinstance(steps[j], HostStep) and steps[j].eqn.primitive.name == "global_load":
            j += 1
        merged = None
        if j < len(steps) and _is(steps[j], "elementwise"):
            e = steps[j]
            product = s.outputs[0]
            reads = sum(1 for a in e.inputs if a.id == product.id)
            if reads and tuple(e.outputs[0].aval.shape) == tuple(product.aval.shape):
                outside = product.id in returned or uses.get(product.id, 0) > reads
                keep = {o.id for o in e.outputs} | ({product.id} if outside else set())
                candidate = _merge(s.name, [s, e], keep)
                if epilogue_fusable(candidate.region):
                    merged = candidate
                elif not outside:  # perhaps no output of the product's dtype: keep the product as one
                    candidate = _merge(s.name, [s, e], keep | {product.id})
                    merged = candidate if epilogue_fusable(candidate.region) else None
        if merged is None:
            result.append(s)
            i += 1
            continue
        result.extend(steps[i + 1:j])  # the global loads, before the merged product
        result.append(merged)
        i = j + 1
    return result
