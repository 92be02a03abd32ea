"""From an llvmlite.ir module to optimized native code: O3 with loop and SLP vectorization."""
from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from ..target import Target


def new_module(name: str, target: Target) -> ir.Module:
    module = ir.Module(name=name)
    module.triple = target.triple
    module.data_layout = str(target.target_machine().target_data)
    return module


def optimize(module: ir.Module, target: Target):
    """Parses, verifies and runs LLVM's O3 pipeline for the target CPU; returns the binding module."""
    machine = target.target_machine()
    parsed = llvm.parse_assembly(_without_builtins(str(module)))
    parsed.triple = target.triple
    parsed.data_layout = str(machine.target_data)
    parsed.verify()
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    options.loop_vectorization = True
    options.slp_vectorization = True
    options.loop_unrolling = False
    options.loop_interleaving = True
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(parsed, builder)
    return parsed


def _without_builtins(text: str) -> str:
    """Marks every definition "no-builtins" so no pass turns loops into memset/memcpy calls."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("define "):
            lines[i] = line + ' "no-builtins"'
    return "\n".join(lines) + "\n"


def emit_object(parsed, target: Target) -> bytes:
    return target.target_machine().emit_object(parsed)


def emit_assembly(parsed, target: Target) -> str:
    return target.target_machine().emit_assembly(parsed)
