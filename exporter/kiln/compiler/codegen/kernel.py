"""The kernel ABI wrapper: `int32_t name(const kiln_dispatch_args_t*, uint32_t workgroup_id)`."""
from __future__ import annotations

from typing import Callable

from llvmlite import ir

from .types import I32, I64, PTR

VOID = ir.VoidType()
DISPATCH_ARGS = ir.LiteralStructType([PTR, PTR, I32, I32])

BodyEmitter = Callable[[ir.IRBuilder, list[ir.Value], ir.Value, ir.Value], None]

ELEMENT_ALIGNED_BINDINGS = True
"""Kernels assume each binding pointer aligned only to its elements (the parameters carry no `align`;
loads and stores have their type's natural alignment). compile_module records it in the module
(Module.element_aligned_bindings, kernel_abi.h), so the runtime binds caller memory in place."""


def define_kernel(module: ir.Module, name: str, binding_sizes: list[int], writable: list[bool], emit_body: BodyEmitter) -> ir.Function:
    """Defines the exported entry `name` and an internal body over noalias binding pointers.

    emit_body(builder, binding_pointers, workgroup_id_i64, workgroup_count_i64)
    emits the body, leaving the builder in a block that falls through to return. The builder's
    `last_level_cache_kib` is the dispatch's kiln_dispatch_args_t.last_level_cache_kib (an i32: the CPU's
    last-level cache in KiB, 0 where unknown), for a body that chooses how it moves data by it (never what
    it computes); a body that does not read it compiles to the same code as without it.
    """
    count = len(binding_sizes)
    body = ir.Function(module, ir.FunctionType(VOID, [PTR] * count + [I64, I64, I32]), name=f"{name}.body")
    body.linkage = "internal"
    body.attributes.add("nounwind")
    for arg, size in zip(body.args[:count], binding_sizes):
        arg.add_attribute("noalias")
        if size > 0:
            arg.attributes.dereferenceable = size
    builder = ir.IRBuilder(body.append_basic_block("entry"))
    builder.last_level_cache_kib = body.args[count + 2]
    emit_body(builder, list(body.args[:count]), body.args[count], body.args[count + 1])
    builder.ret_void()

    entry = ir.Function(module, ir.FunctionType(I32, [PTR, I32]), name=name)
    entry.attributes.add("nounwind")
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    args, workgroup_id = entry.args
    bindings = b.load(b.gep(args, [ir.Constant(I32, 0), ir.Constant(I32, 0)], source_etype=DISPATCH_ARGS), typ=PTR)
    workgroup_count = b.load(b.gep(args, [ir.Constant(I32, 0), ir.Constant(I32, 2)], source_etype=DISPATCH_ARGS), typ=I32)
    cache_kib = b.load(b.gep(args, [ir.Constant(I32, 0), ir.Constant(I32, 3)], source_etype=DISPATCH_ARGS), typ=I32)
    pointers = [b.load(b.gep(bindings, [ir.Constant(I64, i)], source_etype=PTR), typ=PTR) for i in range(count)]
    b.call(body, pointers + [b.zext(workgroup_id, I64), b.zext(workgroup_count, I64), cache_kib])
    b.ret(ir.Constant(I32, 0))
    return entry
