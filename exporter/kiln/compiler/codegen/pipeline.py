"""From an llvmlite.ir module to optimized native code: O3 with loop and SLP vectorization."""
from __future__ import annotations

import llvmlite.binding as llvm
from llvmlite import ir

from ..target import Target


def new_module(name: str, target: Target) -> ir.Module:
    module = ir.Module(name=name)
    module.triple = target.triple
    module.data_layout = str(target.target_machine().target_data)
    setattr(module, TARGET_ATTR, target)
    return module


TARGET_ATTR = "_kiln_target"  # the Target a module's code is generated for (mathlib's target-dependent choices)


_PREFER_VECTOR_BITS = "_kiln_prefer_vector_bits"


def widest_vectors(emit_body, target: Target):
    """`emit_body` (a codegen.kernel.BodyEmitter) asking LLVM's vectorizers for the target's widest vectors.

    For kernels without reassociation (no `reassoc` flag: elementwise kernels), whose every lane computes the
    same IEEE operations in the same order at any width, so the bits do not depend on it. On AVX-512 targets
    LLVM's tuning prefers 256-bit vectors (x86-64-v4, znver4, skylake-avx512: "prefer-256-bit"); a
    transcendental chain is latency bound (tanh: ~30 dependent operations per element), so 512-bit vectors
    carry twice the elements through the same chain (1M-element tanh chain on a Zen 4: 0.68 -> 0.44 ms,
    one thread). Other targets are left as they are."""
    bits = target.vector_bytes * 8 if target.arch == "x86_64" and target.vector_bytes > 32 else None
    if bits is None:
        return emit_body

    def emit(b: ir.IRBuilder, *args):
        setattr(b.module, _PREFER_VECTOR_BITS, bits)
        return emit_body(b, *args)

    return emit


_LEGAL_VECTOR_BITS = "_kiln_legal_vector_bits"


def wide_loop_lanes(target: Target, itemsize: int) -> int | None:
    """Lanes of the target's widest vectors for elements of `itemsize` bytes, where LLVM's tuning prefers
    narrower ones (AVX-512 targets: "prefer-256-bit"), else None. A kernel that asks some of its loops for
    them (codegen.loops.for_range's vector_width: loops without reassociation, whose bits do not depend on
    the width) calls allow_wide_vectors on its module, so the backend keeps 512-bit registers legal while
    the loops LLVM vectorizes by its own choice (reductions) keep their width and so their bits."""
    if target.arch != "x86_64" or target.vector_bytes <= 32:
        return None
    return target.vector_bytes // itemsize


def allow_wide_vectors(module: ir.Module, target: Target) -> None:
    """Marks the module's functions "min-legal-vector-width" = the target's widest vectors (see
    wide_loop_lanes)."""
    setattr(module, _LEGAL_VECTOR_BITS, target.vector_bytes * 8)


def optimize(module: ir.Module, target: Target):
    """Parses, verifies and runs LLVM's O3 pipeline for the target CPU; returns the binding module."""
    machine = target.target_machine()
    bits = getattr(module, _PREFER_VECTOR_BITS, None)
    extra = f' "prefer-vector-width"="{bits}"' if bits else ""
    legal = getattr(module, _LEGAL_VECTOR_BITS, None)
    extra += f' "min-legal-vector-width"="{legal}"' if legal else ""
    parsed = llvm.parse_assembly(_without_builtins(str(module), extra))
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


def _without_builtins(text: str, extra: str = "") -> str:
    """Marks every definition "no-builtins" so no pass turns loops into memset/memcpy calls (and adds the
    attributes `extra`)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("define "):
            lines[i] = line + ' "no-builtins"' + extra
    return "\n".join(lines) + "\n"


def emit_object(parsed, target: Target) -> bytes:
    return target.target_machine().emit_object(parsed)


def emit_assembly(parsed, target: Target) -> str:
    return target.target_machine().emit_assembly(parsed)
