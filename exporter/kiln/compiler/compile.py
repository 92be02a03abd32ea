"""The compiler's entry point: dispatch steps of one or more plans -> one linked kernel image.

Each distinct kernel is an LLVM module of its own, optimized and emitted to an object that the
persistent cache (`kiln.compiler.cache`) keeps; the objects are linked into one image.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.ir import Graph, Literal
from . import cache as kernel_cache
from . import parallel_compile, strategies
from .codegen.kernel import define_kernel
from .codegen.pipeline import emit_assembly, emit_object, new_module, optimize
from .codegen.types import byte_size
from .fusion import DispatchStep, Plan
from .link import link_objects
from .perturb import perturbed
from .specs import BindingSpec, KernelImageSpec, KernelSpec
from .target import Target
from .timing import record_stage, stage

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

    def assembly(self, kernels=None) -> str:
        """The optimized kernels as target assembly text (for inspection and tests; generated again,
        never read from the cache): every kernel, or those whose indices `kernels` lists. Several kernels are
        generated in forked workers, as compiles are (kiln.compiler.parallel_compile)."""
        aliases = self._aliases or [{}] * len(self.kernels)
        chosen = list(range(len(self.kernels)) if kernels is None else kernels)

        def one(k):
            i = chosen[k]
            return emit_assembly(_optimized_kernel(self.kernels[i].name, self._regions[i], self._target, aliases[i]),
                                 self._target)

        workers = parallel_compile.worker_count(len(chosen))
        texts = parallel_compile.run_forked(len(chosen), workers, one) if workers > 1 else [None] * len(chosen)
        return "\n".join(text if text is not None else one(k) for k, text in enumerate(texts))

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
    return compile_plans(plans, [target or Target.host()], cache)[0]


def compile_plans(plans: Plan | list[Plan], targets, cache="default") -> list[CompiledKernels]:
    """compile_plan for each of `targets` (a module's variants) at once: the kernels are found once, and
    every one the cache lacks for any target is compiled in one batch (kiln.compiler.parallel_compile's
    workers, the longest first), so one target's slow kernels overlap another's."""
    targets = list(targets)
    plans = [plans] if isinstance(plans, Plan) else list(plans)
    cache = kernel_cache.default_cache() if cache == "default" else cache
    builds: list[_Build] = []  # one per kernel: what the image's kernel index k is compiled from
    regions: list[Graph] = []
    by_key: dict[str, int] = {}
    step_kernel: dict[int, int] = {}
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
                index = by_key[key] = len(builds)
                region = step.region
                strategy = strategies.choose(region)  # the one choice of the region's kernel strategy
                name = f"kiln_{strategy.kind(region)}_{index}"
                bindings = [BindingSpec(byte_size(v.aval), False) for v in region.invars]
                bindings += [BindingSpec(byte_size(v.aval), True) for v in region.outvars]
                code_region = perturbed(region, name, strategy.name)  # tests only (perturb.py)
                builds.append(_Build(index, name, region, key, bindings, aliases, strategy) if code_region is None else
                              _Build(index, name, code_region, structural_key(code_region) + _alias_key(aliases),
                                     bindings, aliases, None))
                regions.append(region)
            step_kernel[id(step)] = index
    compiled: list[list[kernel_cache.CachedKernel | None]] = []
    missing: list[tuple[_Build, Target]] = []  # the kernels the cache does not hold, for any target
    missing_in: list[int] = []  # the position in targets of each
    for t, target in enumerate(targets):
        found_here = []
        for build in builds:
            with stage("kernel", f"{build.name} (cached)") as timed:
                found = _cached(build, target, cache)
                if found is None:
                    timed.name = None  # timed with its compile below
                    missing.append((build, target))
                    missing_in.append(t)
            found_here.append(found)
        compiled.append(found_here)
    for (build, target), t, kernel in zip(missing, missing_in, _compile_all(missing)):
        compiled[t][build.index] = kernel
        if cache is not None:
            cache.put(_cache_entry(build, target), kernel)
    out = []
    for target, objects in zip(targets, compiled):
        workgroups = [k.workgroups for k in objects]
        with stage("link", f"{len(objects)} objects"):
            linked = link_objects([k.obj for k in objects], target)
        kernels = [KernelSpec(b.name, 0, 0, b.bindings, 0) for b in builds]
        for k, entries in zip(kernels, linked.object_entries):
            (k.entry_offset,) = entries.values()
        by_step = {step: (index, workgroups[index]) for step, index in step_kernel.items()}
        out.append(CompiledKernels(linked.to_spec(), kernels, workgroups, by_step, steps, regions, target,
                                   _aliases=[b.aliases for b in builds]))
    return out


@dataclass
class _Build:
    """A kernel to compile: its index in the image, name, the region its code comes from, that region's
    key, bindings, in-place aliases and strategy (None: chosen when compiled)."""

    index: int
    name: str
    region: Graph
    region_key: str
    bindings: list[BindingSpec]
    aliases: dict[int, int]
    strategy: object


def _cache_entry(build: _Build, target: Target) -> str:
    return kernel_cache.kernel_key(build.region_key, [(b.byte_size, b.writable) for b in build.bindings], target)


def _cached(build: _Build, target: Target, cache) -> kernel_cache.CachedKernel | None:
    return None if cache is None else cache.get(_cache_entry(build, target))


def _compile_all(work: list[tuple[_Build, Target]]) -> list[kernel_cache.CachedKernel]:
    """Each (build, target)'s kernel, compiled in forked workers when there are enough of them
    (kiln.compiler.parallel_compile; the likely longest first, _compile_cost), else in-process; each
    recorded as a `kernel` stage, in the order of `work`."""
    import time

    def timed_compile(i):
        start = time.perf_counter()
        kernel = _compile_kernel(*work[i])
        return kernel, time.perf_counter() - start

    workers = parallel_compile.worker_count(len(work))
    if workers > 1:
        order = sorted(range(len(work)), key=lambda i: -_compile_cost(work[i][0]))
        done = parallel_compile.run_forked(len(work), workers, timed_compile, order)
    else:
        done = [None] * len(work)
    kernels = []
    for (build, target), result in zip(work, done):
        if result is None:  # compiled here: in-process, or again after a child's failure (its error surfaces)
            with stage("kernel", f"{build.name} (compiled)"):
                kernels.append(_compile_kernel(build, target))
        else:
            kernel, seconds = result
            record_stage("kernel", seconds, f"{build.name} (compiled)")
            kernels.append(kernel)
    return kernels


_COST = {"matmul": (120, 0), "conv": (150, 0), "linalg": (150, 0), "svd": (300, 0), "eigh": (200, 0),
         "multi_reduction": (10, 11), "split_reduction": (30, 2), "horizontal": (10, 1.2), "row_fused": (15, 0.8),
         "reduction": (10, 2), "pooling": (30, 1)}
"""Rough compile milliseconds of a kernel, (base, per equation of its region) by strategy (else (10,
0.3)): only the order in which workers take kernels (longest first, so no long one is left for the
end while the other workers idle)."""


def _compile_cost(build: _Build) -> float:
    base, per_equation = _COST.get(build.strategy.name if build.strategy is not None else "", (10, 0.3))
    return base + per_equation * len(build.region.eqns)


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


def _compile_kernel(build: _Build, target: Target) -> kernel_cache.CachedKernel:
    """The kernel's object and workgroup count, generated by its strategy (chosen here when the build has
    none) and compiled by LLVM."""
    emit_body, items, work = _emitter_for(build.region, target, build.strategy)
    emit_body = _reading_through(emit_body, build.aliases)
    module = new_module(build.name, target)
    define_kernel(module, build.name, [b.byte_size for b in build.bindings], [b.writable for b in build.bindings],
                  emit_body)
    return kernel_cache.CachedKernel(emit_object(optimize(module, target), target), choose_workgroups(work, items))


def _optimized_kernel(name: str, region: Graph, target: Target, aliases: dict[int, int] | None = None):
    """The kernel's optimized LLVM module, generated afresh."""
    emit_body, _, _ = _emitter_for(region, target)
    emit_body = _reading_through(emit_body, aliases or {})
    module = new_module(name, target)
    sizes = [byte_size(v.aval) for v in region.invars + region.outvars]
    writable = [False] * len(region.invars) + [True] * len(region.outvars)
    define_kernel(module, name, sizes, writable, emit_body)
    return optimize(module, target)
