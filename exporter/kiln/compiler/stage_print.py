"""The printed form of every compilation stage (`kiln export --print STAGE`, DESIGN §2: if you cannot see a
stage, you cannot debug it).

`stage_text(result, stage)` renders one stage of a pipeline.CompileResult:

- trace: each public function's graph as traced;
- passes: the same after the passes (kernel calls inlined, complex lowering, folding, CSE, DCE);
- fusion: the partition into host steps and dispatch regions (graphs held by control flow included);
- strategy: per dispatch, its kernel, the kernel strategy that emits it (kiln.compiler.strategies) and
  what the strategy planned: workgroup items, work, workgroups, detail;
- schedule: the buffers with their lifetimes and the planned memory (kiln.compiler.schedule);
- llvm: each kernel's optimized LLVM IR;
- asm: each kernel's target assembly;
- module: the module file as `kiln dump` prints it.
"""
from __future__ import annotations

STAGES = ("trace", "passes", "fusion", "strategy", "schedule", "llvm", "asm", "module")


def stage_text(result, stage: str) -> str:
    """The text of `stage` (one of STAGES) for `result` (a kiln.compiler.pipeline.CompileResult)."""
    if stage not in STAGES:
        raise ValueError(f"unknown compilation stage {stage!r}: expected one of {', '.join(STAGES)}")
    return _RENDER[stage](result).rstrip("\n")


def _trace(result) -> str:
    return "\n\n".join(f"func {name}: {graph}" for name, graph in result.traced.items())


def _passes(result) -> str:
    return "\n\n".join(f"func {name}: {graph}" for name, graph in result.optimized.items())


def _nested(result, name):
    """(label, plan) of the function's graph and, after it, of each graph its control flow holds."""
    from .pipeline import _all_graphs

    for k, g in enumerate(_all_graphs(result.optimized[name])):
        plan = result.graph_plans.get(id(g))
        if plan is not None:
            yield (name if k == 0 else f"{name} (control flow graph {k})"), plan


def _fusion(result) -> str:
    out = []
    for name in result.optimized:
        for label, plan in _nested(result, name):
            out.append(f"func {label}: {len(plan.dispatches)} dispatches\n{plan}")
    return "\n\n".join(out)


def _strategy(result) -> str:
    from . import strategies

    kernels = result.kernels
    target = kernels._target
    variant = getattr(target, "variant", "")
    out = [f"target {target.triple} cpu={target.cpu}" + (f" variant={variant}" if variant else "")]
    variants = (getattr(result.spec, "provenance", None) or {}).get("variants")
    if variants:
        out[0] += (f" (the last of the variants {variants}; a dispatch runs the fewest workgroups any variant "
                   f"chose)")
    for name in result.optimized:
        for label, plan in _nested(result, name):
            out.append(f"func {label}:")
            for step in plan.dispatches:
                index, groups = kernels.dispatch_info(step)
                kplan = strategies.plan_region(step.region, target)
                detail = f" ({kplan.detail})" if kplan.detail else ""
                out.append(f"  {step.name} -> {kernels.kernels[index].name}: {kplan.strategy}{detail}, "
                           f"{kplan.parallel_items} items, work {kplan.work}, {groups} workgroups")
    return "\n".join(out)


def _schedule(result) -> str:
    text = result.schedule_text() if hasattr(result, "schedule_text") else ""
    return text or "(no schedule: this compiler builds none)"


def _llvm(result) -> str:
    kernels = result.kernels
    modules = kernels.optimized_modules()
    return "\n".join(f"; kernel {spec.name}\n{module}" for spec, module in zip(kernels.kernels, modules))


def _asm(result) -> str:
    return result.kernels.assembly()


def _module(result) -> str:
    from kiln.vm.reader import dump_text

    return dump_text(result.module_bytes)


_RENDER = {"trace": _trace, "passes": _passes, "fusion": _fusion, "strategy": _strategy, "schedule": _schedule,
           "llvm": _llvm, "asm": _asm, "module": _module}
