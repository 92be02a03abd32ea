"""Merging a matrix product with the elementwise kernel consuming its result (the matmul's epilogue).

After fusion a dense layer is two dispatches: the product, then bias + activation reading it back; the
backward pass has the same shape: dh = dz @ W^T, then dz' = dh * (1 - h*h) (or relu's mask). Here a
matmul dispatch followed by an elementwise dispatch of the product's shape that reads the product at the
element it writes (and the elementwise dispatches after it that read those at their elements: bias
added, then the activation of a kept pre-activation) becomes one matmul region with an epilogue (codegen/epilogue.py: each work item
applies it to the tile it has just computed, still in cache). Global loads between the two move before
the product (no dispatch writes a global). The product stays an output when a later step or the graph
reads it; otherwise it lives in an epilogue output's buffer. The merge is not made where the matmul
strategy refuses the region (codegen/matmul.epilogue_fusable: integers and halves, operands that are not
one strided dim per group, an empty product, an epilogue operand not a strided view of an input).
A convolution's elementwise consumer merges the same way where the convolution strategy takes it
(codegen/conv.epilogue_fusable: the implicit GEMM with output pixels as rows, no groups; conv + bias +
relu in NHWC is one dispatch).
A reduction's elementwise consumer merges the same way (fuse_reduction_epilogues): a dispatch after a
plain reduction (or a split reduction's combine) whose outputs have the result's element count and that
reads the result at its elements (mean = sum / n, a loss's scalar tail, the scale after a column sum)
becomes the reduction kernel's epilogue, applied where each result element is stored
(codegen/reduce.epilogue_fusable refuses a layout op of the result other than a reshape, an operand
computed before the reduction).
Runs after row fusion and split reductions and before horizontal fusion; linear in the plan's size.
"""
from __future__ import annotations

from ..core.ir import Var
from .fusion import DispatchStep, HostStep
from .row_fusion import _merge, outputs_read_outside, use_counts


def _is(step, name: str) -> bool:
    from .strategies import BY_NAME

    return isinstance(step, DispatchStep) and BY_NAME[name].matches(step.region)


def _bare_matmul(step) -> bool:
    from .codegen.epilogue import dot_equation

    return (_is(step, "matmul") or _is(step, "conv")) and dot_equation(step.region) is step.region.eqns[-1]


def _bare_reduction(step) -> bool:
    """A plain reduction dispatch (its reduction last and its only output) or a split reduction's combine."""
    if not (_is(step, "reduction") or _is(step, "split_reduction")):
        return False
    last = step.region.eqns[-1]
    return (last.primitive.traits.fusion == "reduction" and "chunks" not in last.params
            and [v.id for v in step.region.outvars] == [last.outvars[0].id])


def fuse_epilogues(steps: list, graph_outvars) -> list:
    """Each matmul (or convolution) dispatch merged with the elementwise dispatches after it that read its
    product at their elements."""
    return _fuse(steps, graph_outvars, _bare_matmul,
                 lambda e, s: tuple(e.outputs[0].aval.shape) == tuple(s.outputs[0].aval.shape))


def fuse_reduction_epilogues(steps: list, graph_outvars) -> list:
    """Each reduction dispatch (a split reduction's combine included) merged with the elementwise
    dispatches after it that read its result at their elements: outputs of the result's element count
    (mean = sum / n; keepdims reshapes), codegen/reduce.py applying them as each result element is final."""
    return _fuse(steps, graph_outvars, _bare_reduction, lambda e, s: e.outputs[0].aval.size == s.outputs[0].aval.size)


def _fuse(steps: list, graph_outvars, starts, same_elements) -> list:
    uses, returned = use_counts(steps, graph_outvars)
    updates = _global_updates(steps)
    result: list = []
    i = 0
    while i < len(steps):
        s = steps[i]
        if not starts(s):
            result.append(s)
            i += 1
            continue
        group, loads, merged = [s], [], None
        j = i + 1
        while True:  # absorb the elementwise kernels that follow while they read the group at its elements
            k = j
            while k < len(steps) and isinstance(steps[k], HostStep) and steps[k].eqn.primitive.name == "global_load":
                k += 1
            if k >= len(steps) or not _is(steps[k], "elementwise"):
                break
            e = steps[k]
            produced = {o.id for g in group for o in g.outputs}
            if not any(a.id in produced for a in e.inputs) or not same_elements(e, s):
                break
            candidate = _fused(group + [e], uses, returned)
            if candidate is None:
                break
            if not _updates_stay_in_place(candidate, e, updates):
                break  # a global's update stays an elementwise kernel, written in place over the global
            group.append(e)
            loads += steps[j:k]
            merged = candidate
            j = k + 1
        if merged is None:
            result.append(s)
            i += 1
            continue
        result.extend(loads)  # the global loads, before the merged product
        result.append(merged)
        i = j
    return result


def _global_updates(steps: list) -> set[tuple[int, int]]:
    """(loaded value id, stored value id) of each mutable global loaded and later stored: an elementwise
    kernel reading the one and writing the other is that global's update, which schedule.global_updates
    writes in place over the global (memory_plan.inplace_pairs), so it merges into a product only where
    the merged kernel's output may still be written over the global (`_updates_stay_in_place`)."""
    from ..program.prims import global_load, global_store

    loads: dict[int, list[int]] = {}
    stores: dict[int, list[int]] = {}
    for st in steps:
        eqn = getattr(st, "eqn", None)
        if eqn is None or eqn.primitive not in (global_load, global_store):
            continue
        value = eqn.outvars[0] if eqn.primitive is global_load else eqn.invars[0]
        if isinstance(value, Var):
            (loads if eqn.primitive is global_load else stores).setdefault(eqn.params["slot"], []).append(value.id)
    return {(a, b) for slot, loaded in loads.items() for a in loaded for b in stores.get(slot, [])}


def _updates_stay_in_place(candidate: DispatchStep, e: DispatchStep, updates: set[tuple[int, int]]) -> bool:
    """Whether every global update the elementwise kernel `e` makes (a loaded value read, the value stored
    written) can still be written over the global in the merged region: memory_plan.inplace_pairs of the
    candidate pairs them (a matrix product's epilogue output over an epilogue operand, the accumulating
    output included as each item copies the operand first: an SGD step's `w - lr * (x^T @ dz)` becomes
    the gradient product's epilogue, updating w in place)."""
    from .memory_plan import inplace_pairs

    mine = {(a.id, o.id) for a in e.inputs for o in e.outputs} & updates
    if not mine:
        return True
    pairs = {(candidate.inputs[i].id, candidate.outputs[j].id) for i, j in inplace_pairs(candidate)
             if i < len(candidate.inputs) and j < len(candidate.outputs)}
    return mine <= pairs


def _fused(group: list[DispatchStep], uses: dict[int, int], returned: set[int]):
    """The group merged into one matmul region with an epilogue, or None where the strategy refuses it."""
    from .codegen import conv, matmul, reduce

    epilogue_fusable = conv.epilogue_fusable if _is(group[0], "conv") else \
        matmul.epilogue_fusable if _is(group[0], "matmul") else reduce.epilogue_fusable

    keep = outputs_read_outside(group, uses, returned)
    product = group[0].outputs[0].id
    for extra in (set(), {product}):  # with the product kept as an output when no other output can hold it
        candidate = _merge(group[0].name, group, keep | extra)
        if epilogue_fusable(candidate.region):
            return candidate
    return None
