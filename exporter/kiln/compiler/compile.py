"""The compiler's entry point: dispatch steps of one or more plans -> one linked kernel image.

Each distinct kernel is an LLVM module of its own, optimized and emitted to an object that the
persistent cache (`kiln.compiler.cache`) keeps; the objects are linked into one image.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.ir import Graph, Literal
from . import cache as kernel_cache
from . import strategies
from .codegen.kernel import define_kernel
from .codegen.pipeline import emit_assembly, emit_object, new_module, optimize
from .codegen.types import byte_size
from .fusion import DispatchStep, Plan
from .link import link_objects
from .perturb import perturbed
from .specs import BindingSpec, KernelImageSpec, KernelSpec
from .target import Target
from .timing import stage

_WORK_PER_GROUP = 1 << 16
_MAX_WORKGROUPS = 64


@dataclass
class CompiledKernels:
    """One kernel image for all dispatches, the kernels in it, and where each step goes."""

    image: KernelImageSpec
    kernels: list[KernelSpec]
    workgroups: list[int]
    _by_step: dict[int, tuple[int, int]] = field(default_factory=dict, repr=False)
    _steps: list = field(default_factory=list, repr=False)
    _regions: list = field(default_factory=list, repr=False)
    _target: Target | None = field(default=None, repr=False)
    _aliases: list = field(default_factory=list, repr=False)  # per kernel: binding -> the binding it reads through

    def dispatch_info(self, step: DispatchStep) -> tuple[int, int]:
        """(kernel index, workgroup count) of a dispatch step given to compile_plan."""
        return self._by_step[id(step)]

    def kernel_index(self, step: DispatchStep) -> int:
        return self._by_step[id(step)][0]

    def workgroup_count(self, step: DispatchStep) -> int:
        return self._by_step[id(step)][1]

    def assembly(self) -> str:
        """The optimized kernels as target assembly text (for inspection and tests; generated again,
        never read from the cache)."""
        aliases = self._aliases or [{}] * len(self.kernels)
        return "\n".join(emit_assembly(_optimized_kernel(spec.name, region, self._target, alias), self._target)
                         for spec, region, alias in zip(self.kernels, self._regions, aliases))

    def optimized_modules(self) -> list:
        """Each kernel's optimized LLVM module (`kiln export --print llvm`; generated again, never read from
        the cache)."""
        aliases = self._aliases or [{}] * len(self.kernels)
        return [_optimized_kernel(spec.name, region, self._target, alias)
                for spec, region, alias in zip(self.kernels, self._regions, aliases)]


def structural_key(region: Graph) -> str:
    """Text that is equal for regions that compute the same thing (names aside)."""
    names: dict[int, int] = {}

    def name(atom) -> str:
        if isinstance(atom, Literal):
            return f"lit({atom.value.item()!r}:{atom.aval.dtype})"
        return f"%{names.setdefault(atom.id, len(names))}"

    parts = ["in(" + ",".join(f"{name(v)}:{v.aval.str_short()}" for v in region.invars) + ")"]
    for eqn in region.eqns:
        ins = ",".join(name(a) for a in eqn.invars)
        outs = ",".join(f"{name(v)}:{v.aval.str_short()}" for v in eqn.outvars)
        params = ",".join(f"{k}={eqn.params[k]!r}" for k in sorted(eqn.params))
        parts.append(f"{outs}={eqn.primitive.name}[{params}]({ins})")
    parts.append("out(" + ",".join(name(v) for v in region.outvars) + ")")
    return ";".join(parts)


def kernel_strategy(region: Graph) -> str:
    """The name of the kernel strategy of a dispatch region (kiln.compiler.strategies.choose: one of
    strategies.BY_NAME)."""
    return strategies.choose(region).name


def _emitter_for(region: Graph, target: Target, strategy=None):
    """(body emitter, parallel items, work) of the region's kernel for `target`: the plan of its strategy
    (`strategy` when the caller has chosen it, else strategies.choose's)."""
    plan = (strategy or strategies.choose(region)).plan(region, target)
    return plan.emit, plan.parallel_items, plan.work


def choose_workgroups(work: int, parallel_items: int) -> int:
    """Chunks of at least ~64K elements of work, at most 64 groups, never more than the items."""
    return max(1, min(_MAX_WORKGROUPS, work // _WORK_PER_GROUP, parallel_items))


def compile_plan(plans: Plan | list[Plan], target: Target | None = None, cache="default") -> CompiledKernels:
    """Compiles every DispatchStep of `plans` into one kernel image; identical regions share a kernel.

    cache: a kiln.compiler.cache.KernelCache, None (compile everything) or "default" (the cache
    the environment asks for: kernel_cache.default_cache()).
    """
    target = target or Target.host()
    plans = [plans] if isinstance(plans, Plan) else list(plans)
    cache = kernel_cache.default_cache() if cache == "default" else cache
    kernels: list[KernelSpec] = []
    workgroups: list[int] = []
    objects: list[bytes] = []
    regions: list[Graph] = []
    by_key: dict[str, int] = {}
    by_step: dict[int, tuple[int, int]] = {}
    kernel_aliases: list[dict[int, int]] = []
    steps = []
    for plan in plans:
        for step in plan.steps:
            if not isinstance(step, DispatchStep):
                continue
            steps.append(step)
            aliases = _aliases(step)
            key = structural_key(step.region) + _alias_key(aliases)
            index = by_key.get(key)
            if index is None:
                index = by_key[key] = len(kernels)
                region = step.region
                strategy = strategies.choose(region)  # the one choice of the region's kernel strategy
                name = f"kiln_{strategy.kind(region)}_{index}"
                bindings = [BindingSpec(byte_size(v.aval), False) for v in region.invars]
                bindings += [BindingSpec(byte_size(v.aval), True) for v in region.outvars]
                code_region = perturbed(region, name, strategy.name)  # tests only (perturb.py)
                with stage("kernel", name) as timed:
                    if code_region is None:
                        compiled, hit = _compile_kernel(name, region, key, bindings, target, cache, aliases,
                                                        strategy)
                    else:
                        compiled, hit = _compile_kernel(name, code_region, structural_key(code_region)
                                                        + _alias_key(aliases), bindings, target, cache, aliases)
                    timed.detail = f"{name} ({'cached' if hit else 'compiled'})"
                kernels.append(KernelSpec(name, 0, 0, bindings, 0))
                workgroups.append(compiled.workgroups)
                objects.append(compiled.obj)
                regions.append(region)
                kernel_aliases.append(aliases)
            by_step[id(step)] = (index, workgroups[index])
    with stage("link", f"{len(objects)} objects"):
        linked = link_objects(objects, target)
    for k, entries in zip(kernels, linked.object_entries):
        (k.entry_offset,) = entries.values()
    return CompiledKernels(linked.to_spec(), kernels, workgroups, by_step, steps, regions, target,
                           _aliases=kernel_aliases)


def _aliases(step: DispatchStep) -> dict[int, int]:
    """Binding k -> the binding it is read through: an output the schedule writes in place over its
    input k (`step.inplace`, input position -> output position: kiln.compiler.schedule)."""
    n_in = len(step.region.invars)
    return {i: n_in + j for i, j in sorted((getattr(step, "inplace", None) or {}).items())}


def _alias_key(aliases: dict[int, int]) -> str:
    return "" if not aliases else ";inplace(" + ",".join(f"{i}>{j}" for i, j in aliases.items()) + ")"


def _reading_through(emit_body, aliases: dict[int, int]):
    """emit_body with binding k read through the pointer of binding aliases[k] (its in-place output):
    the kernel then never touches binding k's pointer, so every binding stays noalias."""
    if not aliases:
        return emit_body

    def emit(b, pointers, workgroup_id, workgroup_count):
        return emit_body(b, [pointers[aliases.get(k, k)] for k in range(len(pointers))], workgroup_id,
                         workgroup_count)
    return emit


def _compile_kernel(name: str, region: Graph, region_key: str, bindings: list[BindingSpec], target: Target,
                    cache, aliases: dict[int, int] | None = None, strategy=None
                    ) -> tuple[kernel_cache.CachedKernel, bool]:
    """The kernel's object and workgroup count, read from the cache or compiled (then cached) by `strategy`
    (chosen by the caller, else here); and whether it came from the cache."""
    entry = None
    if cache is not None:
        entry = kernel_cache.kernel_key(region_key, [(b.byte_size, b.writable) for b in bindings], target)
        found = cache.get(entry)
        if found is not None:
            return found, True
    emit_body, items, work = _emitter_for(region, target, strategy)
    emit_body = _reading_through(emit_body, aliases or {})
    module = new_module(name, target)
    define_kernel(module, name, [b.byte_size for b in bindings], [b.writable for b in bindings], emit_body)
    kernel = kernel_cache.CachedKernel(emit_object(optimize(module, target), target), choose_workgroups(work, items))
    if cache is not None:
        cache.put(entry, kernel)
    return kernel, False


def _optimized_kernel(name: str, region: Graph, target: Target, aliases: dict[int, int] | None = None):
    """The kernel's optimized LLVM module, generated afresh."""
    emit_body, _, _ = _emitter_for(region, target)
    emit_body = _reading_through(emit_body, aliases or {})
    module = new_module(name, target)
    sizes = [byte_size(v.aval) for v in region.invars + region.outvars]
    writable = [False] * len(region.invars) + [True] * len(region.outvars)
    define_kernel(module, name, sizes, writable, emit_body)
    return optimize(module, target)
