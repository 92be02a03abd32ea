"""From traced procedures to module bytes: inline, optimize, fuse, compile kernels, lower, serialize."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kiln.vm.isa import Instr

from ..core.errors import CompileError
from ..core.ir import Graph, verify_graph
from ..program.prims import global_load, global_store
from ..vm_types import tensor_type
from .inline import inline_kernel_calls
from .procedure import ConstantPool, lower_procedure


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


def compile_module(name: str, procedures: list[ProcedureSource], globals_: list[GlobalSource], target=None) -> CompileResult:
    from kiln.vm.module_spec import GlobalSpec, ModuleSpec
    from kiln.vm.writer import serialize

    from .compile import compile_plan
    from .fusion import partition
    from .passes import optimize
    from .target import Target

    target = target or Target.host()
    optimized, plans = {}, {}
    for proc in procedures:
        graph = optimize(inline_kernel_calls(proc.graph))
        verify_graph(graph)
        optimized[proc.name] = graph
        plans[proc.name] = partition(graph)
    kernels = compile_plan(list(plans.values()), target)

    constants = ConstantPool()

    def host_lowering(step, emit):
        eqn = step.eqn
        if eqn.primitive is global_load:
            emit.code.append(Instr("global.load", emit.define(eqn.outvars[0]), eqn.params["slot"]))
        elif eqn.primitive is global_store:
            emit.code.append(Instr("global.store", eqn.params["slot"], emit.use(eqn.invars[0])))
        else:
            where = f" (at {eqn.source_info})" if eqn.source_info else ""
            raise CompileError(f"primitive {eqn.primitive.name} cannot run outside a kernel{where}")

    def dispatch_lowering(step, emit):
        kernel_index, workgroups = kernels.dispatch_info(step)
        bindings = [emit.use(v) for v in step.inputs]
        for v in step.outputs:
            reg = emit.define(v)
            emit.code.append(Instr("alloc", reg, tensor_type(v.aval)))
            bindings.append(reg)
        emit.code.append(Instr("dispatch", kernel_index, workgroups, bindings, []))

    functions = [
        lower_procedure(
            name=proc.name,
            exported=proc.exported,
            graph=optimized[proc.name],
            steps=plans[proc.name].steps,
            arg_names=proc.arg_names,
            result_names=proc.result_names,
            arg_tree=proc.arg_tree,
            result_tree=proc.result_tree,
            constants=constants,
            host_lowering=host_lowering,
            dispatch_lowering=dispatch_lowering,
        )
        for proc in procedures
    ]
    spec = ModuleSpec(
        name=name,
        functions=functions,
        globals=[GlobalSpec(g.name, tensor_type(g.aval), g.mutable, g.initial) for g in globals_],
        constants=constants.constants,
        kernel_images=[kernels.image] if kernels.kernels else [],
        kernels=kernels.kernels,
    )
    return CompileResult(spec, serialize(spec), optimized, plans)


def build_module(name: str, procedures: list[ProcedureSource], globals_: list[GlobalSource], target=None) -> bytes:
    return compile_module(name, procedures, globals_, target).module_bytes
