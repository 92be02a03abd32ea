"""Lowering a partitioned procedure to VM bytecode: registers, allocations, dispatches, globals."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..core.ir import Graph, Literal, Var
from ..vm_types import tensor_type

from kiln.vm.isa import Instr
from kiln.vm.module_spec import ConstantSpec, FunctionSpec, ValueInfo


@dataclass
class ConstantPool:
    """Module constants, deduplicated by dtype, shape and bytes."""

    constants: list[ConstantSpec] = field(default_factory=list)
    _index: dict[tuple, int] = field(default_factory=dict)

    def add(self, array: np.ndarray) -> int:
        arr = np.ascontiguousarray(array)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        index = self._index.get(key)
        if index is None:
            index = self._index[key] = len(self.constants)
            self.constants.append(ConstantSpec(arr))
        return index


class _Registers:
    """Ref registers with reuse after a value's last use, so dead buffers are released early."""

    def __init__(self, reserved: int):
        self.count = reserved
        self.free: list[int] = []

    def take(self) -> int:
        if self.free:
            return self.free.pop()
        self.count += 1
        return self.count - 1

    def give_back(self, reg: int) -> None:
        self.free.append(reg)
        self.free.sort(reverse=True)


def lower_procedure(
    *,
    name: str,
    exported: bool,
    graph: Graph,
    steps: list,
    arg_names: list[str],
    result_names: list[str],
    arg_tree: str,
    result_tree: str,
    constants: ConstantPool,
    host_lowering: Callable,
    dispatch_lowering: Callable,
) -> FunctionSpec:
    """Bytecode for one procedure.

    `steps` are the partition's steps in order; host_lowering(step, emit) and
    dispatch_lowering(step, emit) append instructions through `emit`, an
    object with `use(atom) -> reg`, `define(var) -> reg` and `code`.
    """
    emitter = _Emitter(graph, steps, constants)
    for step in steps:
        if getattr(step, "region", None) is not None:
            dispatch_lowering(step, emitter)
        else:
            host_lowering(step, emitter)
        emitter.after_step()
    results = [emitter.use(a) for a in graph.outvars]
    emitter.code.append(Instr("ret", results))
    return FunctionSpec(
        name=name,
        exported=exported,
        args=[ValueInfo(n, tensor_type(v.aval)) for n, v in zip(arg_names, graph.invars)],
        results=[ValueInfo(n, tensor_type(a.aval)) for n, a in zip(result_names, graph.outvars)],
        arg_tree=arg_tree,
        result_tree=result_tree,
        ref_registers=max(emitter.registers.count, 1),
        i64_registers=0,
        code=emitter.code,
    )


class _Emitter:
    """Tracks which register holds each value and frees registers after last use."""

    def __init__(self, graph: Graph, steps: list, constants: ConstantPool):
        self.code: list = []
        self.constants = constants
        self.registers = _Registers(len(graph.invars))
        self.reg_of: dict[int, int] = {v.id: i for i, v in enumerate(graph.invars)}
        self.const_value = {v.id: c for v, c in zip(graph.constvars, graph.consts)}
        self.step_index = 0
        self.last_use = _last_uses(graph, steps)
        self._dying: list[int] = []

    def use(self, atom) -> int:
        """The register holding atom, materializing constants on first use."""
        if isinstance(atom, Literal):
            reg = self.registers.take()
            self.code.append(Instr("const", reg, self.constants.add(np.asarray(atom.value, atom.aval.dtype))))
            self._dying.append(reg)
            return reg
        reg = self.reg_of.get(atom.id)
        if reg is None:
            value = self.const_value.get(atom.id)
            if value is None:
                raise AssertionError(f"value %{atom.id} is used before any step defines it")
            reg = self.reg_of[atom.id] = self.registers.take()
            self.code.append(Instr("const", reg, self.constants.add(np.asarray(value))))
        return reg

    def define(self, var: Var) -> int:
        reg = self.reg_of[var.id] = self.registers.take()
        return reg

    def after_step(self) -> None:
        for var_id, last in self.last_use.items():
            if last == self.step_index and var_id in self.reg_of:
                self.registers.give_back(self.reg_of.pop(var_id))
        for reg in self._dying:
            self.registers.give_back(reg)
        self._dying = []
        self.step_index += 1


def _step_inputs(step) -> list:
    if getattr(step, "region", None) is not None:
        return list(step.inputs)
    return list(step.eqn.invars)


def _last_uses(graph: Graph, steps: list) -> dict[int, int]:
    """Step index of each value's last use; values the graph returns are never freed."""
    last: dict[int, int] = {}
    for i, step in enumerate(steps):
        for a in _step_inputs(step):
            if isinstance(a, Var):
                last[a.id] = i
    for a in graph.outvars:
        if isinstance(a, Var):
            last.pop(a.id, None)
            last[a.id] = len(steps) + 1
    return last

