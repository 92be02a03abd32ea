"""The linker: no imports, runtime relocations, determinism, other architectures."""
import numpy as np
import pytest
from llvmlite import ir

from conftest import Case, random_array
from kiln.compiler.codegen.pipeline import emit_object, new_module, optimize
from kiln.compiler.codegen.types import F32, I32, PTR
from kiln.compiler.compile import compile_plan
from kiln.compiler.inprocess import LoadedImage, aligned_copy, aligned_empty, dispatch
from kiln.compiler.link import LinkError, link_object
from kiln.compiler.target import Target
from kiln.lax import prims

RNG = np.random.default_rng(5)


def _mixed_plans():
    x = random_array(RNG, (40, 30), np.float32)
    w = random_array(RNG, (30, 20), np.float32)
    fn = lambda a, b: [prims.tanh.bind(prims.dot_general.bind(a, b, dimension_numbers=(((1,), (0,)), ((), ())))),
                       prims.reduce_max.bind(prims.exp.bind(a), axes=(1,))]
    return Case(fn, [x, w]).plan


def _entry(module, name):
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I32]), name=name)
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def test_undefined_symbol_is_an_error_naming_it():
    target = Target.host()
    module = new_module("m", target)
    expf = ir.Function(module, ir.FunctionType(F32, [F32]), name="expf")
    fn, b = _entry(module, "kernel")
    bindings = b.load(fn.args[0], typ=PTR)
    data = b.load(bindings, typ=PTR)
    b.store(b.call(expf, [b.load(data, typ=F32)]), data)
    b.ret(ir.Constant(I32, 0))
    obj = emit_object(optimize(module, target), target)
    with pytest.raises(LinkError, match="expf"):
        link_object(obj, target)


def test_absolute_pointers_become_runtime_relocations():
    """A table of function pointers in rodata is patched by the loader; the kernel calls through it."""
    target = Target.host()
    module = new_module("m", target)
    callees = []
    for k, value in enumerate((11, 22)):
        callee = ir.Function(module, ir.FunctionType(I32, []), name=f"value{k}")
        callee.linkage = "internal"
        ir.IRBuilder(callee.append_basic_block()).ret(ir.Constant(I32, value))
        callees.append(callee)
    table_type = ir.ArrayType(PTR, 2)
    table = ir.GlobalVariable(module, table_type, name="table")
    table.linkage = "internal"
    table.global_constant = True
    table.initializer = ir.Constant(table_type, callees)
    fn, b = _entry(module, "kernel")
    bindings = b.load(fn.args[0], typ=PTR)
    out = b.load(bindings, typ=PTR)
    index = b.zext(fn.args[1], ir.IntType(64))
    slot = b.gep(table, [ir.Constant(ir.IntType(64), 0), index], source_etype=table_type)
    callee = b.load(slot, typ=PTR)
    result = b.call(_IndirectCallee(callee), [])
    b.store(result, b.gep(out, [index], source_etype=I32))
    b.ret(ir.Constant(I32, 0))
    linked = link_object(emit_object(optimize(module, target), target), target)
    assert len(linked.relocs) >= 2
    assert all(linked.text_size <= off < len(linked.code) for off, _ in linked.relocs)
    image = LoadedImage(linked.code, linked.text_size, linked.relocs)
    out_buf = aligned_empty((2,), np.int32)
    dispatch(image.function(linked.entries["kernel"]), [out_buf], 2, parallel=False)
    assert out_buf.tolist() == [11, 22]
    image.close()


class _IndirectCallee(ir.values.Value):
    """A loaded function pointer that llvmlite's call() accepts as an i32() callee."""

    def __init__(self, pointer):
        self.pointer = pointer
        self.type = ir.PointerType()
        self.function_type = ir.FunctionType(I32, [])

    def get_reference(self):
        return self.pointer.get_reference()

    @property
    def args(self):
        return []


def test_export_is_deterministic():
    first = compile_plan(_mixed_plans())
    second = compile_plan(_mixed_plans())
    assert first.image.code == second.image.code
    assert first.image.relocs == second.image.relocs
    assert [k.entry_offset for k in first.kernels] == [k.entry_offset for k in second.kernels]


def test_image_layout():
    compiled = compile_plan(_mixed_plans())
    image = compiled.image
    assert image.text_size % image.segment_align == 0 and image.segment_align == 4096
    assert len(image.code) >= image.text_size
    assert all(0 <= k.entry_offset < image.text_size for k in compiled.kernels)


def test_aarch64_images_link():
    target = Target.named("aarch64-unknown-linux-gnu", "cortex-a76", "+neon,+fp-armv8")
    compiled = compile_plan(_mixed_plans(), target)
    assert compiled.image.segment_align == 65536
    assert compiled.image.text_size % 65536 == 0
    assert compiled.image.target_triple.startswith("aarch64")
    assert "fmla" in compiled.assembly()
