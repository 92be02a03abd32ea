"""Parse .vmfb bytes back into a ModuleSpec, and print a module for `kiln dump`."""

from __future__ import annotations


import numpy

from kiln.vm import checksum
from kiln.vm._generated import module_fb as fb
from kiln.vm.disassembler import DecodeError, Names, decode, disassemble, with_labels
from kiln.vm.module_spec import (DTYPES, BindingSpec, ConstantSpec, FunctionSpec,
                                 GlobalSpec, KernelImageSpec, KernelSpec, KernelVariantSpec, ModuleSpec,
                                 TensorType, ValueInfo)
from kiln.vm.writer import FORMAT_VERSION


class ModuleFormatError(ValueError):
    """Bytes that are not a readable kiln module."""


def _numpy_dtype(name: str) -> numpy.dtype:
    if name == "bf16":
        try:
            import ml_dtypes
        except ImportError as e:
            raise ModuleFormatError("reading bf16 data needs the ml_dtypes package") from e
        return numpy.dtype(ml_dtypes.bfloat16)
    return numpy.dtype({"f32": "<f4", "f64": "<f8", "i8": "i1", "i16": "<i2",
                        "i32": "<i4", "i64": "<i8", "u8": "u1", "u16": "<u2",
                        "u32": "<u4", "u64": "<u8", "bool": "?", "c64": "<c8", "c128": "<c16",
                        "f16": "<f2"}[name])


def _check_size(data: bytes | None, t: TensorType, what: str) -> None:
    if data is not None and len(data) != t.byte_size:
        raise ModuleFormatError(f"{what}: {len(data)} bytes of data for type {t} "
                                f"({t.byte_size} bytes)")


def _array(data: bytes, t: TensorType) -> numpy.ndarray:
    return numpy.frombuffer(data, _numpy_dtype(t.dtype)).reshape(t.shape).copy()


class ModuleFile:
    """A parsed module: the ModuleSpec plus what the file says about itself."""

    def __init__(self, data: bytes):
        """Checks in the C loader's order: the checksum trailer (when one is there),
        the file identifier, the version, then every table."""
        data = bytes(data)
        self.size = len(data)
        found = checksum.trailer(data)
        self.checksum = found
        verified = found is not None and found[0] == checksum.ALGORITHM_CRC32
        try:
            if verified:
                checksum.verify(data)
        except checksum.ChecksumError as e:
            raise ModuleFormatError(str(e)) from None
        payload = data[:-checksum.TRAILER_SIZE] if found is not None else data
        if len(payload) < 8 or not fb.has_identifier(payload):
            raise ModuleFormatError("not a kiln module (file identifier is not 'KILN')")
        try:
            root = fb.get_root_Module(payload)
            self.version = (root.version_major(), root.version_minor())
        except Exception as e:   # noqa: BLE001 - any failure here is a damaged header
            raise ModuleFormatError(f"corrupt module header: {e}") from e
        if self.version[0] != FORMAT_VERSION[0]:
            raise ModuleFormatError(
                f"module format version {self.version[0]}.{self.version[1]} is not "
                f"supported (this reader reads {FORMAT_VERSION[0]}.x)")
        try:
            if not verified:
                checksum.verify(data)   # raises: the trailer is missing or unknown
        except checksum.ChecksumError as e:
            raise ModuleFormatError(str(e)) from None
        try:
            self._parse(root)
        except ModuleFormatError:
            raise
        except Exception as e:   # noqa: BLE001 - damage must never escape as another error
            raise ModuleFormatError(f"corrupt module: {type(e).__name__}: {e}") from e

    def _parse(self, root):
        self.types = []
        for t in root.types():
            if not 0 <= t.dtype() < len(DTYPES):
                raise ModuleFormatError(f"unknown dtype code {t.dtype()}")
            self.types.append(TensorType(DTYPES[t.dtype()], tuple(t.shape())))
        ty = self._type
        def image(i):
            return KernelImageSpec(i.target_triple(), i.cpu_features(), i.code(),
                                   i.text_size(), i.segment_align(), i.relocs(),
                                   i.entry_points(), i.variant() or "")

        images = [image(i) for i in root.kernel_images()]
        variants = []
        for v in root.kernel_variants():
            if v.image() is None:
                raise ModuleFormatError(f"kernel variant {len(variants)} has no image")
            variants.append(KernelVariantSpec(v.base(), image(v.image()), list(v.entry_offsets())))
        kernels = [KernelSpec(k.name(), k.image(), k.entry_offset(),
                              [BindingSpec(x.byte_size(), x.writable()) for x in k.bindings()],
                              k.push_constant_count(), k.max_workgroups(), k.flops())
                   for k in root.kernels()]
        self.globals = [(g.name(), ty(g.type()), g.mutable(), None if g.zero_init() else g.data())
                        for g in root.globals()]
        self.constants = [(ty(c.type()), c.data()) for c in root.constants()]
        for name, t, _, data in self.globals:
            _check_size(data, t, f"global {name!r}")
        for i, (t, data) in enumerate(self.constants):
            _check_size(data, t, f"constant {i}")
        self.code_words = []
        functions = []
        for f in root.functions():
            words = f.code()
            self.code_words.append(words)
            functions.append(FunctionSpec(
                f.name(), f.exported(),
                [ValueInfo(v.name(), ty(v.type())) for v in f.args()],
                [ValueInfo(v.name(), ty(v.type())) for v in f.results()],
                f.arg_tree(), f.result_tree(), f.ref_register_count(),
                f.i64_register_count(), with_labels(decode(words, self.types)), f.transient_size()))
        self.name = root.name()
        self.functions = functions
        self.kernel_images = images
        self.kernel_variants = variants
        self.kernels = kernels
        self.element_aligned_bindings = root.element_aligned_bindings()
        self.provenance = {e.key(): e.value() for e in root.provenance()}

    @property
    def spec(self) -> ModuleSpec:
        """The ModuleSpec, with global and constant data as numpy arrays."""
        globals_ = [GlobalSpec(name, t, mutable, None if data is None else _array(data, t))
                    for name, t, mutable, data in self.globals]
        constants = [ConstantSpec(_array(data, t)) for t, data in self.constants]
        return ModuleSpec(self.name, self.functions, globals_, constants, self.kernel_images,
                          self.kernels, self.element_aligned_bindings, dict(self.provenance),
                          list(self.kernel_variants))

    def _type(self, index: int) -> TensorType:
        if not 0 <= index < len(self.types):
            raise ModuleFormatError(f"type index {index} out of range ({len(self.types)} types)")
        return self.types[index]

    def dump(self) -> str:
        """The text `kiln dump` prints (see dump_text)."""
        try:
            return _dump(self)
        except ModuleFormatError:
            raise
        except Exception as e:   # noqa: BLE001 - damage must never escape as another error
            raise ModuleFormatError(f"corrupt module: {type(e).__name__}: {e}") from e

    def names(self) -> Names:
        return Names(types=self.types, globals=[g[0] for g in self.globals],
                     kernels=[k.name for k in self.kernels],
                     functions=[f.name for f in self.functions],
                     constant_data={i: bytes(data) for i, (t, data) in enumerate(self.constants)
                                    if t.dtype == "u8" and len(t.shape) == 1})


def read_module(data: bytes) -> ModuleSpec:
    """The ModuleSpec that `data` holds (serializing it again gives the same bytes)."""
    return ModuleFile(data).spec


def _sig(values: list[ValueInfo]) -> str:
    return ", ".join(f"{v.name}: {v.type}" for v in values)


def dump_text(data: bytes) -> str:
    """Human-readable text of a module: signatures, globals, kernels, disassembly."""
    return ModuleFile(data).dump()


def _dump(m: ModuleFile) -> str:
    names = m.names()
    out = [f"module {m.name!r} (format {m.version[0]}.{m.version[1]}, {m.size} bytes)"]
    out.append(f"checksum: crc32 0x{m.checksum[1]:08x} (verified)")
    if m.provenance:
        out.append(f"provenance: {len(m.provenance)} entries")
        out.extend(f"  {key}: {value}" for key, value in m.provenance.items())
    out.append(f"types: {len(m.types)}")
    for i, t in enumerate(m.types):
        out.append(f"  type#{i} {t}")
    out.append(f"globals: {len(m.globals)}")
    for i, (name, t, mutable, init) in enumerate(m.globals):
        init = "zeros" if init is None else f"{t.byte_size} bytes of initial data"
        out.append(f"  global#{i} {name}: {t} {'mutable' if mutable else 'immutable'}, {init}")
    out.append(f"constants: {len(m.constants)}")
    for i, (t, data) in enumerate(m.constants):
        out.append(f"  const#{i}: {t} ({len(data)} bytes)")
    out.append(f"kernel images: {len(m.kernel_images)}, bindings aligned to "
               f"{'their elements' if m.element_aligned_bindings else '64 bytes'}")
    def describe(label, img):
        from kiln.vm._generated.cpu_features import NON_GATING

        variant = f" variant {img.variant}" if img.variant else ""
        arch = img.target_triple.split("-", 1)[0]
        arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
        # recorded, but not required of the host that loads the image (schemas/cpu_features.toml)
        free = [f for f in (img.cpu_features or "").split(",")
                if f.startswith("+") and f[1:] in NON_GATING.get(arch, ())]
        free = f" [not gating: {','.join(free)}]" if free else ""
        out.append(f"  {label}{variant} {img.target_triple} features={img.cpu_features or '-'}{free}: "
                   f"{len(img.code)} bytes (text {img.text_size}, align "
                   f"{img.segment_align}), {len(img.relocs)} relocations, entry points "
                   f"[{', '.join(f'0x{e:x}' for e in img.entry_points)}]")

    for i, img in enumerate(m.kernel_images):
        describe(f"image#{i}", img)
    if m.kernel_variants:
        out.append(f"kernel variants: {len(m.kernel_variants)} (the runtime loads the first the host "
                   f"supports, else the base image)")
    for i, v in enumerate(m.kernel_variants):
        describe(f"variant#{i} of image#{v.base}:", v.image)
    out.append(f"kernels: {len(m.kernels)}")
    for i, k in enumerate(m.kernels):
        binds = ", ".join(f"{b.byte_size}B {'rw' if b.writable else 'ro'}" for b in k.bindings)
        target = (m.kernel_images[k.image].target_triple
                  if k.image < len(m.kernel_images) else "?")
        out.append(f"  kernel#{i} {k.name}: image#{k.image} ({target}) entry "
                   f"0x{k.entry_offset:x}, bindings [{binds}], "
                   f"{k.push_constant_count} push constants, at most "
                   f"{k.max_workgroups} workgroups, "
                   f"{f'{k.flops} flops' if k.flops else 'flops not declared'}")
    out.append(f"functions: {len(m.functions)}")
    for i, (f, words) in enumerate(zip(m.functions, m.code_words)):
        kind = "export" if f.exported else "internal"
        out.append(f"  {kind} func#{i} {f.name}({_sig(f.args)}) -> ({_sig(f.results)})")
        out.append(f"    registers: {f.ref_registers} ref, {f.i64_registers} i64")
        out.append(f"    transient memory: {f.transient_size} bytes (planned arena)")
        out.append(f"    arg_tree: {f.arg_tree}")
        out.append(f"    result_tree: {f.result_tree}")
        out.append(disassemble(words, names, indent="    "))
    return "\n".join(out) + "\n"
