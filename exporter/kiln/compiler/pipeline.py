"""From traced procedures to module bytes: inline, optimize, fuse, compile kernels, lower, serialize.

Each stage is timed (kiln.compiler.timing) for `kiln --verbose export`."""
from __future__ import annotations

import contextlib
import dataclasses
import gc
from dataclasses import dataclass, field

import numpy as np

from ..core.ir import Equation, Graph, Var, subgraphs_of, verify_graph
from ..vm_types import tensor_type
from .inline import inline_calls
from .procedure import ConstantPool, LoweringContext, lower_procedure
from .schedule import build_schedule
from .timing import stage


def _checks_enabled() -> bool:
    from ..config import config

    return config.jax_enable_checks


@dataclass
class ProcedureSource:
    """A traced public function (or jit function) and its reflection."""

    name: str
    graph: Graph
    arg_names: list[str]
    result_names: list[str]
    arg_tree: str
    result_tree: str
    exported: bool = True


@dataclass
class GlobalSource:
    name: str
    aval: object
    mutable: bool
    initial: np.ndarray | None


@dataclass
class CompileResult:
    """Every stage of one module's compilation, for printing and saving."""

    spec: object
    module_bytes: bytes
    optimized: dict[str, Graph] = field(default_factory=dict)
    plans: dict[str, object] = field(default_factory=dict)
    schedules: dict[str, object] = field(default_factory=dict)  # kiln.compiler.schedule.Schedule by function
    traced: dict[str, Graph] = field(default_factory=dict)  # each function's graph as traced
    graph_plans: dict[int, object] = field(default_factory=dict)  # id(graph) -> Plan, nested graphs included
    kernels: object = None  # compile.CompiledKernels of the module's (last) target

    def schedule_text(self) -> str:
        """Every function's schedule, printed (`kiln export --print schedule`)."""
        return "\n\n".join(s.format(name) for name, s in self.schedules.items())


def prepare_graph(graph: Graph) -> Graph:
    """Inlines kernel calls, computes complex values as float parts and optimizes a graph and, recursively,
    the graphs its control flow holds."""
    from .complex_lowering import lower_complex
    from .passes import optimize

    graph = optimize(lower_complex(inline_calls(graph)))
    eqns = []
    env: dict[int, object] = {}  # a cond result every branch hands back from one operand -> that operand
    for eqn in graph.eqns:
        invars = [env.get(a.id, a) if isinstance(a, Var) else a for a in eqn.invars]
        if any(True for _ in subgraphs_of(eqn)):
            params = {k: _prepare_param(v) for k, v in eqn.params.items()}
            eqn = Equation(eqn.primitive, invars, eqn.outvars, params, eqn.source_info)
            eqn = _forward_cond_operands(eqn, env)
        elif invars != list(eqn.invars):
            eqn = Equation(eqn.primitive, invars, eqn.outvars, eqn.params, eqn.source_info)
        eqns.append(eqn)
    outvars = [env.get(a.id, a) if isinstance(a, Var) else a for a in graph.outvars]
    return Graph(graph.invars, graph.constvars, graph.consts, eqns, outvars, graph.effects)


def _forward_cond_operands(eqn: Equation, env: dict) -> Equation:
    """A cond whose every branch returns the same operand at an output position: the enclosing graph
    reads the operand itself there (env), and the cond loses that output, so it keeps nothing of the
    operand (a loop carry the body hands to such a cond still rotates through planned buffers:
    schedule.loop_memory). The value is the same whichever branch runs."""
    from ..lax.control_flow import cond_p

    if eqn.primitive is not cond_p:
        return eqn
    branches = eqn.params["branches"]
    keep = []
    for j, out in enumerate(eqn.outvars):
        sources = set()
        for g in branches:
            o = g.outvars[j]
            k = next((k for k, v in enumerate(g.invars) if v is o), None)
            sources.add(k)
        k = sources.pop() if len(sources) == 1 else None
        if k is None:
            keep.append(j)
        else:
            env[out.id] = eqn.invars[1 + k]
    if len(keep) == len(eqn.outvars):
        return eqn
    new = tuple(Graph(g.invars, g.constvars, g.consts, g.eqns, [g.outvars[j] for j in keep], set(g.effects))
                for g in branches)
    return Equation(eqn.primitive, eqn.invars, [eqn.outvars[j] for j in keep], dict(eqn.params, branches=new),
                    eqn.source_info)


def _prepare_param(value):
    if isinstance(value, Graph):
        return prepare_graph(value)
    if isinstance(value, tuple) and any(isinstance(v, Graph) for v in value):
        return tuple(prepare_graph(v) if isinstance(v, Graph) else v for v in value)
    return value


def _all_graphs(graph: Graph):
    yield graph
    for eqn in graph.eqns:
        for sub in subgraphs_of(eqn):
            yield from _all_graphs(sub)


@contextlib.contextmanager
def collection_paused():
    """Python's cyclic garbage collector off for the block (and back on after, if it was on).

    Compiling allocates many objects while the program's graphs stay alive; each full collection
    walks all of them, so collections made compile time grow with the square of the program
    (192 residual layers: 4.7 s with, 2.8 s without). What a compile leaves behind is collected
    once after it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def compile_module(name: str, procedures: list[ProcedureSource], globals_: list[GlobalSource], target=None,
                   export: str = "") -> CompileResult:
    """The module of `procedures` and `globals_` for `target` (the host's by default; a sequence of
    Targets, best first, gives a module with a kernel variant for each: format 2.4, the last is the
    base image); `export` says how it was exported, for its provenance."""
    with collection_paused():
        return _compile_module(name, procedures, globals_, target, export)


def _compile_module(name: str, procedures: list[ProcedureSource], globals_: list[GlobalSource], target=None,
                    export: str = "") -> CompileResult:
    from kiln.vm.module_spec import GlobalSpec, ModuleSpec
    from kiln.vm.writer import serialize

    from .codegen.kernel import ELEMENT_ALIGNED_BINDINGS
    from .provenance import module_provenance
    from .compile import compile_plans
    from .flops import region_flops
    from .fusion import partition
    from .target import Target, resolve_targets

    targets = (target or Target.host(),) if target is None or isinstance(target, Target) else resolve_targets(target)
    target = targets[-1]
    optimized: dict[str, Graph] = {}
    plans: dict[int, object] = {}
    for proc in procedures:
        with stage("passes", proc.name) as timed:
            if _checks_enabled():  # kiln.enable_checks(): the traced graph too, not only the passes' result
                verify_graph(proc.graph)
            graph = prepare_graph(proc.graph)
            verify_graph(graph)
            timed.detail = f"{proc.name}: {len(proc.graph.eqns)} -> {len(graph.eqns)} equations"
        optimized[proc.name] = graph
        with stage("fusion", proc.name) as timed:
            for g in _all_graphs(graph):
                plans[id(g)] = partition(g)
            timed.detail = f"{proc.name}: {sum(len(plans[id(g)].dispatches) for g in _all_graphs(graph))} dispatches"
    with stage("schedule") as timed:  # before the kernels: an in-place output changes its kernel
        schedules = {proc.name: build_schedule(optimized[proc.name], lambda g: plans[id(g)]) for proc in procedures}
        timed.detail = f"{len(schedules)} functions, arenas {sum(s.arena_size for s in schedules.values())} bytes"
    builds = compile_plans(list(plans.values()), targets)  # every variant's kernels in one batch of workers
    kernels = builds[-1]
    for spec_, region in zip(kernels.kernels, kernels._regions):  # the work each kernel declares
        spec_.flops = region_flops(region)
    dispatch_info = kernels.dispatch_info
    if len(builds) > 1:
        def dispatch_info(step):  # kernels take any count up to their items: the fewest any build chose
            return kernels.kernel_index(step), min(b.workgroup_count(step) for b in builds)
    ctx = LoweringContext(plan_for=lambda g: plans[id(g)], dispatch_info=dispatch_info, constants=ConstantPool())
    functions = []
    for proc in procedures:
        with stage("lower", proc.name):
            functions.append(lower_procedure(ctx, name=proc.name, exported=proc.exported, graph=optimized[proc.name],
                                             arg_names=proc.arg_names, result_names=proc.result_names,
                                             arg_tree=proc.arg_tree, result_tree=proc.result_tree,
                                             schedule=schedules[proc.name]))
    spec = ModuleSpec(
        name=name,
        functions=functions,
        globals=[GlobalSpec(g.name, tensor_type(g.aval), g.mutable, g.initial) for g in globals_],
        constants=ctx.constants.constants,
        kernel_images=[dataclasses.replace(kernels.image, variant=target.variant)] if kernels.kernels else [],
        kernels=kernels.kernels,
        element_aligned_bindings=ELEMENT_ALIGNED_BINDINGS,
        provenance=module_provenance(procedures, target, export),
        kernel_variants=_variants(builds, targets, kernels) if kernels.kernels else [],
    )
    if len(targets) > 1:
        spec.provenance["variants"] = ", ".join(t.variant for t in targets)
    by_name = {proc.name: plans[id(optimized[proc.name])] for proc in procedures}
    with stage("serialize") as timed:
        module_bytes = serialize(spec)
        timed.detail = f"{len(module_bytes)} bytes"
    return CompileResult(spec, module_bytes, optimized, by_name, schedules,
                         {proc.name: proc.graph for proc in procedures}, plans, kernels)


def _variants(builds, targets, base) -> list:
    """The kernel variants of a module whose base image is `base` (the last build): every other
    build's image, best first, with its kernels' entry offsets."""
    from kiln.vm.module_spec import KernelVariantSpec

    out = []
    for build, t in zip(builds[:-1], targets[:-1]):
        if [k.name for k in build.kernels] != [k.name for k in base.kernels]:
            raise AssertionError(f"variant {t.variant} compiled other kernels than the base image")
        out.append(KernelVariantSpec(0, dataclasses.replace(build.image, variant=t.variant),
                                     [k.entry_offset for k in build.kernels]))
    return out


def build_module(name: str, procedures: list[ProcedureSource], globals_: list[GlobalSource], target=None,
                 export: str = "") -> bytes:
    return compile_module(name, procedures, globals_, target, export).module_bytes
