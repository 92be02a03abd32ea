"""Serialize a ModuleSpec into .vmfb bytes (deterministic: same spec, same bytes).

The file is the module flatbuffer followed by a checksum trailer (kiln.vm.checksum)."""

from __future__ import annotations

import numpy
import flatbuffers

from kiln.vm._generated import constants
from kiln.vm._generated import module_fb as fb
from kiln.vm.assembler import assemble
from kiln.vm.checksum import seal
from kiln.vm.module_spec import DTYPES, ModuleSpec, TensorType
from kiln.vm.validate import entry_points, max_workgroups, validate, variant_entry_points

FORMAT_VERSION = constants.FORMAT_VERSION
"""(major, minor) written into every module: KILN_MODULE_VERSION_* in C, both generated from
schemas/runtime_constants.toml."""


class _Types:
    """Interns TensorTypes into the module's type table in first-use order."""

    def __init__(self):
        self.index: dict[TensorType, int] = {}

    def __call__(self, t: TensorType) -> int:
        if t not in self.index:
            self.index[t] = len(self.index)
        return self.index[t]


def _data_bytes(array: numpy.ndarray) -> bytes:
    return numpy.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"),
                                                 copy=False).tobytes()


def serialize(spec: ModuleSpec, *, check: bool = True,
              version: tuple[int, int] = FORMAT_VERSION) -> bytes:
    """The module file's bytes; `check=False` skips the Python-side validation."""
    if check:
        validate(spec)
    types = _Types()
    codes = []
    for f in spec.functions:
        for v in f.args + f.results:
            types(v.type)
        codes.append(assemble(f.code, types))
    global_types = [types(g.type) for g in spec.globals]
    const_types = [types(TensorType.of(c.data)) for c in spec.constants]

    size = sum(len(img.code) for img in spec.kernel_images) + \
        sum(len(v.image.code) for v in spec.kernel_variants) + \
        sum(c.data.nbytes for c in spec.constants) + \
        sum(g.type.byte_size for g in spec.globals if g.initial is not None)
    b = flatbuffers.Builder(size + 4096)

    def image_table(img, points):
        return fb.build_KernelImage(
            b, target_triple=img.target_triple, cpu_features=img.cpu_features,
            code=bytes(img.code), text_size=img.text_size, segment_align=img.segment_align,
            relocs=[(int(o), int(a)) for o, a in img.relocs], entry_points=points,
            variant=img.variant or None)

    images = [image_table(img, points) for img, points in zip(spec.kernel_images, entry_points(spec))]
    variants = [fb.build_KernelVariant(b, base=v.base, image=image_table(v.image, points),
                                       entry_offsets=[int(e) for e in v.entry_offsets])
                for v, points in zip(spec.kernel_variants, variant_entry_points(spec))]
    constants = [fb.build_Constant(b, type=t, data=_data_bytes(c.data))
                 for c, t in zip(spec.constants, const_types)]
    globals_ = []
    for g, t in zip(spec.globals, global_types):
        data = None if g.initial is None else _data_bytes(numpy.asarray(g.initial))
        globals_.append(fb.build_Global(b, name=g.name, type=t, mutable=g.mutable,
                                        data=data, zero_init=g.initial is None))
    kernels = []
    for k, bound in zip(spec.kernels, max_workgroups(spec)):
        bindings = [fb.build_Binding(b, byte_size=x.byte_size, writable=x.writable)
                    for x in k.bindings]
        kernels.append(fb.build_Kernel(b, name=k.name, image=k.image,
                                       entry_offset=k.entry_offset, bindings=bindings,
                                       push_constant_count=k.push_constant_count,
                                       max_workgroups=bound, flops=int(k.flops)))
    functions = []
    for f, code in zip(spec.functions, codes):
        args = [fb.build_Value(b, name=v.name, type=types(v.type)) for v in f.args]
        results = [fb.build_Value(b, name=v.name, type=types(v.type)) for v in f.results]
        functions.append(fb.build_Function(
            b, name=f.name, exported=f.exported, args=args, results=results,
            arg_tree=f.arg_tree, result_tree=f.result_tree,
            ref_register_count=f.ref_registers, i64_register_count=f.i64_registers,
            code=code, transient_size=f.transient_size))
    type_tables = [fb.build_TensorType(b, dtype=DTYPES.index(t.dtype), shape=list(t.shape))
                   for t in types.index]
    root = fb.build_Module(b, version_major=version[0], version_minor=version[1],
                           name=spec.name, types=type_tables, functions=functions,
                           globals=globals_, constants=constants, kernel_images=images,
                           kernels=kernels, element_aligned_bindings=spec.element_aligned_bindings,
                           provenance=[fb.build_Metadata(b, key=k, value=v) for k, v in spec.provenance.items()],
                           kernel_variants=variants or None)
    b.Finish(root, file_identifier=fb.FILE_IDENTIFIER)
    return seal(b.Output())
