"""Python-side checks of a ModuleSpec; the C runtime repeats them on load."""

from __future__ import annotations

import numpy

from kiln.vm.assembler import label_offsets
from kiln.vm.isa import Instr, Label, instr_words
from kiln.vm._generated.constants import BUFFER_ALIGNMENT as TRANSIENT_ALIGNMENT
from kiln.vm.module_spec import MAX_REGISTERS, MAX_WORKGROUPS, FunctionSpec, ModuleSpec, TensorType, dtype_of


class SpecError(ValueError):
    """A ModuleSpec that the runtime would reject."""


def _unique(kind: str, names: list[str]):
    seen = set()
    for n in names:
        if n in seen:
            raise SpecError(f"duplicate {kind} name {n!r}")
        seen.add(n)


def entry_points(spec: ModuleSpec) -> list[list[int]]:
    """Each image's entry points: as given, else the entry offsets of its kernels."""
    out = []
    for i, img in enumerate(spec.kernel_images):
        if img.entry_points is not None:
            out.append([int(e) for e in img.entry_points])
        else:
            out.append(sorted({int(k.entry_offset) for k in spec.kernels if k.image == i}))
    return out


def variant_entry_points(spec: ModuleSpec) -> list[list[int]]:
    """Each kernel variant's image's entry points: as given, else its kernels' entry offsets."""
    return [[int(e) for e in v.image.entry_points] if v.image.entry_points is not None
            else sorted({int(e) for e in v.entry_offsets}) for v in spec.kernel_variants]


def _validate_image(what: str, img) -> None:
    align = img.segment_align
    if align <= 0 or align & (align - 1) or img.text_size % align or \
            img.text_size > len(img.code):
        raise SpecError(f"{what}: text_size {img.text_size} / segment_align "
                        f"{align} do not fit {len(img.code)} code bytes")
    for off, addend in img.relocs:
        if not (0 <= off and off + 8 <= len(img.code)) or not 0 <= addend <= len(img.code):
            raise SpecError(f"{what}: relocation ({off}, {addend}) "
                            f"outside {len(img.code)} code bytes")


def _validate_variants(spec: ModuleSpec) -> None:
    for i, (v, points) in enumerate(zip(spec.kernel_variants, variant_entry_points(spec))):
        what = f"kernel variant {i} ({v.image.variant or 'unnamed'})"
        if not 0 <= v.base < len(spec.kernel_images):
            raise SpecError(f"{what}: base image {v.base} out of range ({len(spec.kernel_images)} images)")
        _validate_image(what, v.image)
        count = sum(1 for k in spec.kernels if k.image == v.base)
        if len(v.entry_offsets) != count:
            raise SpecError(f"{what}: {len(v.entry_offsets)} entry offsets, image {v.base} has {count} kernels")
        if any(not 0 <= e < v.image.text_size for e in points) or \
                any(a >= b for a, b in zip(points, points[1:])) or \
                any(e not in points for e in v.entry_offsets):
            raise SpecError(f"{what}: entry offsets {list(v.entry_offsets)} must be entry points "
                            f"inside its text ({v.image.text_size} bytes)")


def max_workgroups(spec: ModuleSpec) -> list[int]:
    """Each kernel's workgroup bound: as given, else the most its dispatches use (>= 1)."""
    used = [1] * len(spec.kernels)
    for f in spec.functions:
        for ins in f.code:
            if isinstance(ins, Instr) and ins.op == "dispatch" and \
                    0 <= ins.operands[0] < len(used):
                used[ins.operands[0]] = max(used[ins.operands[0]], ins.operands[1])
    return [used[i] if k.max_workgroups is None else int(k.max_workgroups)
            for i, k in enumerate(spec.kernels)]


def validate(spec: ModuleSpec) -> None:
    """Raise SpecError naming the first problem found in `spec`."""
    _unique("function", [f.name for f in spec.functions])
    _unique("global", [g.name for g in spec.globals])
    for g in spec.globals:
        if g.initial is not None:
            got = TensorType.of(numpy.asarray(g.initial))
            if got != g.type:
                raise SpecError(f"global {g.name!r}: initial value is {got}, type is {g.type}")
    for c in spec.constants:
        dtype_of(c.data)
    for i, img in enumerate(spec.kernel_images):
        _validate_image(f"kernel image {i}", img)
    for k in spec.kernels:
        if not 0 <= k.image < len(spec.kernel_images):
            raise SpecError(f"kernel {k.name!r}: image {k.image} out of range "
                            f"({len(spec.kernel_images)} images)")
        if k.entry_offset >= spec.kernel_images[k.image].text_size:
            raise SpecError(f"kernel {k.name!r}: entry offset {k.entry_offset} is outside "
                            f"the text of image {k.image}")
    entries = entry_points(spec)
    for i, (img, points) in enumerate(zip(spec.kernel_images, entries)):
        if any(not 0 <= e < img.text_size for e in points) or \
                any(a >= b for a, b in zip(points, points[1:])):
            raise SpecError(f"kernel image {i}: entry points {points} must be strictly "
                            f"increasing offsets inside its text ({img.text_size} bytes)")
    for k, bound in zip(spec.kernels, max_workgroups(spec)):
        if k.entry_offset not in entries[k.image]:
            raise SpecError(f"kernel {k.name!r}: entry offset {k.entry_offset} is not an "
                            f"entry point of image {k.image}")
        if not 1 <= bound <= MAX_WORKGROUPS:
            raise SpecError(f"kernel {k.name!r}: max_workgroups {bound} is outside "
                            f"[1, {MAX_WORKGROUPS}]")
    _validate_variants(spec)
    for f in spec.functions:
        _validate_function(spec, f)


def _validate_function(spec: ModuleSpec, f: FunctionSpec) -> None:
    def fail(msg: str):
        raise SpecError(f"function {f.name!r}: {msg}")

    if max(f.ref_registers, f.i64_registers) > MAX_REGISTERS:
        fail(f"{f.ref_registers} ref and {f.i64_registers} i64 registers, at most "
             f"{MAX_REGISTERS} of each are allowed")
    if len(f.args) > f.ref_registers:
        fail(f"{len(f.args)} arguments but only {f.ref_registers} ref registers")
    if f.transient_size < 0 or f.transient_size % TRANSIENT_ALIGNMENT:
        fail(f"transient_size {f.transient_size} is not a non-negative multiple of {TRANSIENT_ALIGNMENT}")
    labels = label_offsets(f.code)
    instrs = [x for x in f.code if isinstance(x, Instr)]
    if not instrs or not instrs[-1].opdef.terminator:
        fail("code must end in a terminator (ret, br or br.if)")
    if isinstance(f.code[-1], Label):
        fail("a label after the last instruction is not a valid branch target")
    limits = {"r": f.ref_registers, "i": f.i64_registers, "const": len(spec.constants),
              "global": len(spec.globals), "kernel": len(spec.kernels),
              "func": len(spec.functions)}
    starts = set(labels.values())
    pc = 0
    for ins in instrs:
        starts.add(pc)
        pc += instr_words(ins)
    for ins in instrs:
        for (kind, name), v in zip(ins.opdef.operands, ins.operands):
            base = {"list_r": "r", "list_i": "i"}.get(kind, kind)
            for x in (v if kind in ("list_r", "list_i") else (v,)):
                if base in limits and x >= limits[base]:
                    fail(f"{ins.op} {name}: {base} {x} out of range (limit {limits[base]})")
            if kind == "target" and isinstance(v, int) and v not in starts:
                fail(f"{ins.op} {name}: target {v} is not an instruction start")
        ops = ins.operands
        if ins.op == "dispatch":
            k = spec.kernels[ops[0]]
            if ops[1] < 1:
                fail(f"dispatch {k.name!r}: workgroup count must be at least 1")
            bound = k.max_workgroups if k.max_workgroups is not None else MAX_WORKGROUPS
            if ops[1] > bound:
                fail(f"dispatch {k.name!r}: {ops[1]} workgroups, the kernel allows at "
                     f"most {bound}")
            if len(ops[2]) != len(k.bindings) or len(ops[3]) != k.push_constant_count:
                fail(f"dispatch {k.name!r}: {len(ops[2])} bindings and {len(ops[3])} push "
                     f"constants, kernel takes {len(k.bindings)} and "
                     f"{k.push_constant_count}")
        elif ins.op == "call":
            g = spec.functions[ops[0]]
            if len(ops[1]) != len(g.args) or len(ops[2]) != len(g.results):
                fail(f"call {g.name!r}: {len(ops[1])} args / {len(ops[2])} results, "
                     f"callee takes {len(g.args)} / {len(g.results)}")
        elif ins.op == "ret" and len(ops[0]) != len(f.results):
            fail(f"ret of {len(ops[0])} values, function has {len(f.results)} results")
        elif ins.op == "alloc.result":
            if ops[2] >= len(f.results) or ops[1] != f.results[ops[2]].type:
                fail(f"alloc.result {ops[2]} of type {ops[1]} is not one of the function's "
                     f"{len(f.results)} results with that type")
        elif ins.op == "alloc.transient":
            size = ops[1].byte_size if isinstance(ops[1], TensorType) else None
            if ops[2] < 0 or ops[2] % TRANSIENT_ALIGNMENT:
                fail(f"alloc.transient: offset {ops[2]} is not a non-negative multiple of {TRANSIENT_ALIGNMENT}")
            if size is not None and ops[2] + size > f.transient_size:
                fail(f"alloc.transient: {size} bytes at offset {ops[2]} lie outside the function's "
                     f"{f.transient_size}-byte transient arena")
        elif ins.op == "i.store" and isinstance(ops[2], TensorType) and ops[2].shape:
            fail(f"i.store: type {ops[2]} is not 0-d")
