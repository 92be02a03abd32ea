"""Links ELF64 relocatable objects into a kernel image: [text | padding | rodata].

Every PC-relative relocation is resolved here; absolute 64-bit ones become
(offset, addend) pairs the loader applies as image_base + addend. GOT-relative
references get a small GOT in rodata. Any undefined symbol is an error: a
kernel image imports nothing.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 2, 3, 4, 8, 9
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
STB_GLOBAL, STT_FUNC = 1, 2
EM_X86_64, EM_AARCH64, EM_RISCV = 62, 183, 243
_MACHINES = {EM_X86_64: "x86_64", EM_AARCH64: "aarch64", EM_RISCV: "riscv64"}
_DROPPED_SECTIONS = (".eh_frame", ".note", ".comment", ".llvm_addrsig", ".debug")


class LinkError(Exception):
    """An object that cannot become a kernel image (undefined symbol, unsupported relocation, ...)."""


@dataclass
class LinkedImage:
    """The image bytes and layout, and the text offset of every exported function (per object)."""

    target_triple: str
    cpu_features: str
    code: bytes
    text_size: int
    segment_align: int
    relocs: list[tuple[int, int]]
    entries: dict[str, int] = field(default_factory=dict)
    object_entries: list[dict[str, int]] = field(default_factory=list)

    def to_spec(self):
        """As kiln.vm.module_spec.KernelImageSpec."""
        from .specs import KernelImageSpec

        return KernelImageSpec(self.target_triple, self.cpu_features, self.code, self.text_size, self.segment_align, list(self.relocs))


@dataclass
class _Section:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int


@dataclass
class _Symbol:
    name: str
    info: int
    shndx: int
    value: int


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a if a > 1 else n


class _Elf:
    def __init__(self, data: bytes):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise LinkError("not a little-endian ELF64 object")
        header = struct.unpack_from("<16sHHIQQQIHHHHHH", data, 0)
        self.machine = header[2]
        shoff, shentsize, shnum, shstrndx = header[6], header[11], header[12], header[13]
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names = raw[shstrndx]
        self.data = data
        self.sections = [
            _Section(i, self._cstr(names[4] + r[0]), r[1], r[2], r[4], r[5], r[6], r[7], max(r[8], 1), r[9])
            for i, r in enumerate(raw)
        ]
        self.symbols: list[_Symbol] = []
        for s in self.sections:
            if s.type == SHT_SYMTAB:
                strtab = self.sections[s.link]
                for k in range(s.size // 24):
                    st_name, st_info, _, st_shndx, st_value, _ = struct.unpack_from("<IBBHQQ", data, s.offset + 24 * k)
                    self.symbols.append(_Symbol(self._cstr(strtab.offset + st_name), st_info, st_shndx, st_value))

    def _cstr(self, at: int) -> str:
        end = self.data.index(b"\0", at)
        return self.data[at:end].decode()

    def relocations(self, section: _Section):
        for k in range(section.size // 24):
            offset, info, addend = struct.unpack_from("<QQq", self.data, section.offset + 24 * k)
            yield offset, info & 0xFFFFFFFF, info >> 32, addend


def _kept(section: _Section) -> bool:
    return bool(section.flags & SHF_ALLOC) and not section.name.startswith(_DROPPED_SECTIONS)


def link_object(obj: bytes, target) -> LinkedImage:
    """Links `obj` (from llvmlite's emit_object for `target`) into a kernel image."""
    return link_objects([obj], target)


def link_objects(objects: list[bytes], target) -> LinkedImage:
    """Links several objects into one image: every object's text, in order, then every object's
    rodata. `object_entries[k]` holds the exported functions of `objects[k]` (names may repeat
    across objects); `entries` merges them for a single object."""
    elves = [_Elf(obj) for obj in objects]
    arch = target.arch
    for elf in elves:
        if _MACHINES.get(elf.machine) != arch:
            raise LinkError(f"object machine {elf.machine} does not match target {target.triple}")
    segment_align = target.segment_align
    kept = [[s for s in elf.sections if _kept(s)] for elf in elves]
    for s in (s for sections in kept for s in sections):
        if s.flags & SHF_WRITE and s.size and not s.name.startswith(".data.rel.ro"):
            raise LinkError(f"section {s.name} is writable data; kernels may not have mutable global state")
    base: list[dict[int, int]] = [{} for _ in elves]
    cursor = 0
    for k, sections in enumerate(kept):
        for s in sections:
            if s.flags & SHF_EXECINSTR:
                cursor = _align(cursor, s.align)
                base[k][s.index] = cursor
                cursor += s.size
    text_size = _align(max(cursor, 1), segment_align)
    cursor = text_size
    for k, sections in enumerate(kept):
        for s in sections:
            if not s.flags & SHF_EXECINSTR:
                cursor = _align(cursor, s.align)
                base[k][s.index] = cursor
                cursor += s.size
    got_start = _align(cursor, 8)
    image = bytearray(b"\xcc" * text_size if arch == "x86_64" else bytes(text_size))
    image.extend(bytes(got_start - text_size))
    for k, (elf, sections) in enumerate(zip(elves, kept)):
        for s in sections:
            if s.type != SHT_NOBITS:
                image[base[k][s.index]: base[k][s.index] + s.size] = elf.data[s.offset: s.offset + s.size]

    got: dict[int, int] = {}
    runtime_relocs: list[tuple[int, int]] = []

    def got_entry(address: int) -> int:
        if address not in got:
            got[address] = got_start + 8 * len(got)
            runtime_relocs.append((got[address], address))
        return got[address]

    if arch not in _RELOCATORS:
        raise LinkError(f"cannot link kernel images for {target.triple}: the linker knows {', '.join(_RELOCATORS)}")
    patcher = _RELOCATORS[arch]()
    deferred = _DEFERRED.get(arch, ())
    for elf, where in zip(elves, base):
        def symbol_address(sym_index: int) -> int:
            sym = elf.symbols[sym_index]
            if sym.shndx == SHN_UNDEF:
                raise LinkError(
                    f"undefined symbol {sym.name!r}: a kernel image imports nothing "
                    "(a libm or libc call was emitted; generate the function in IR instead)"
                )
            if sym.shndx in (SHN_ABS, SHN_COMMON) or sym.shndx not in where:
                raise LinkError(f"symbol {sym.name!r} is not in a loadable section")
            return where[sym.shndx] + sym.value

        for rs in elf.sections:
            if rs.type == SHT_REL:
                raise LinkError("REL relocations are not supported (expected RELA)")
            if rs.type != SHT_RELA or rs.info not in where:
                continue
            entries = list(elf.relocations(rs))
            # Relocations that read what another one resolved (riscv64's %pcrel_lo reads its auipc's) come last.
            for offset, rtype, sym_index, addend in sorted(entries, key=lambda r: r[1] in deferred):
                place = where[rs.info] + offset
                patcher(image, rtype, place, symbol_address(sym_index), addend, got_entry, runtime_relocs, elf.symbols[sym_index].name)
    if got:
        image.extend(bytes(8 * len(got)))
    object_entries = [
        {sym.name: where[sym.shndx] + sym.value
         for sym in elf.symbols
         if sym.info >> 4 == STB_GLOBAL and sym.info & 0xF == STT_FUNC and sym.shndx in where}
        for elf, where in zip(elves, base)
    ]
    entries = {name: offset for found in object_entries for name, offset in found.items()}
    return LinkedImage(target.triple, target.features, bytes(image), text_size, segment_align, sorted(runtime_relocs),
                       entries, object_entries)


def _put(image: bytearray, fmt: str, place: int, value: int, name: str, rtype: int) -> None:
    try:
        struct.pack_into(fmt, image, place, value)
    except struct.error:
        raise LinkError(f"relocation type {rtype} against {name!r} is out of range ({value})") from None


def _relocate_x86_64(image, rtype, place, s, a, got_entry, runtime_relocs, name):
    if rtype in (2, 4):  # PC32, PLT32
        _put(image, "<i", place, s + a - place, name, rtype)
    elif rtype == 24:  # PC64
        _put(image, "<q", place, s + a - place, name, rtype)
    elif rtype in (9, 41, 42):  # GOTPCREL, GOTPCRELX, REX_GOTPCRELX
        _put(image, "<i", place, got_entry(s) + a - place, name, rtype)
    elif rtype == 1:  # 64
        runtime_relocs.append((place, s + a))
    else:
        raise LinkError(f"unsupported x86_64 relocation type {rtype} against {name!r}")


def _page(x: int) -> int:
    return x & ~0xFFF


def _patch_insn(image, place, mask, bits):
    insn = struct.unpack_from("<I", image, place)[0]
    struct.pack_into("<I", image, place, (insn & ~mask) | (bits & mask))


# R_AARCH64_* (ELF for the Arm 64-bit Architecture): the types _relocate_aarch64 resolves, and the names of
# others a compiler can emit, for the error message.
AARCH64_RELOCATION_NAMES = {
    257: "ABS64", 258: "ABS32", 259: "ABS16", 260: "PREL64", 261: "PREL32", 262: "PREL16",
    263: "MOVW_UABS_G0", 264: "MOVW_UABS_G0_NC", 265: "MOVW_UABS_G1", 266: "MOVW_UABS_G1_NC",
    267: "MOVW_UABS_G2", 268: "MOVW_UABS_G2_NC", 269: "MOVW_UABS_G3", 273: "LD_PREL_LO19", 274: "ADR_PREL_LO21",
    275: "ADR_PREL_PG_HI21", 276: "ADR_PREL_PG_HI21_NC", 277: "ADD_ABS_LO12_NC", 278: "LDST8_ABS_LO12_NC",
    279: "TSTBR14", 280: "CONDBR19", 282: "JUMP26", 283: "CALL26", 284: "LDST16_ABS_LO12_NC",
    285: "LDST32_ABS_LO12_NC", 286: "LDST64_ABS_LO12_NC", 299: "LDST128_ABS_LO12_NC", 309: "GOT_LD_PREL19",
    311: "ADR_GOT_PAGE", 312: "LD64_GOT_LO12_NC", 313: "LD64_GOTPAGE_LO15", 1027: "GLOB_DAT", 1028: "JUMP_SLOT",
    1029: "RELATIVE", 1031: "TLS_TPREL64", 1032: "TLSDESC", 560: "TLSDESC_ADR_PAGE21", 561: "TLSDESC_LD64_LO12",
    562: "TLSDESC_ADD_LO12", 569: "TLSDESC_CALL",
}
AARCH64_SUPPORTED = (257, 260, 261, 275, 276, 277, 278, 282, 283, 284, 285, 286, 299, 311, 312)
_LDST_SHIFT = {278: 0, 284: 1, 285: 2, 286: 3, 299: 4, 312: 3}


def _aarch64_name(rtype: int) -> str:
    return f"R_AARCH64_{AARCH64_RELOCATION_NAMES.get(rtype, 'unknown')}"


def _relocate_aarch64(image, rtype, place, s, a, got_entry, runtime_relocs, name):
    if rtype == 257:  # ABS64: the loader writes image_base + S + A
        runtime_relocs.append((place, s + a))
    elif rtype == 261:  # PREL32
        _put(image, "<i", place, s + a - place, name, rtype)
    elif rtype == 260:  # PREL64
        _put(image, "<q", place, s + a - place, name, rtype)
    elif rtype in (282, 283):  # JUMP26, CALL26
        delta = s + a - place
        if delta % 4 or not -(1 << 27) <= delta < (1 << 27):
            raise LinkError(f"{_aarch64_name(rtype)} branch to {name!r} out of range ({delta} bytes; "
                            "a b/bl reaches +-128 MiB at a multiple of 4)")
        _patch_insn(image, place, 0x03FFFFFF, delta >> 2)
    elif rtype in (275, 276, 311):  # ADR_PREL_PG_HI21, its _NC form (no overflow check), ADR_GOT_PAGE
        target = got_entry(s) + a if rtype == 311 else s + a
        delta = (_page(target) - _page(place)) >> 12
        if rtype != 276 and not -(1 << 20) <= delta < (1 << 20):
            raise LinkError(f"{_aarch64_name(rtype)}: page offset to {name!r} out of range")
        immlo, immhi = delta & 3, (delta >> 2) & 0x7FFFF
        _patch_insn(image, place, (3 << 29) | (0x7FFFF << 5), (immlo << 29) | (immhi << 5))
    elif rtype == 277:  # ADD_ABS_LO12_NC
        _patch_insn(image, place, 0xFFF << 10, ((s + a) & 0xFFF) << 10)
    elif rtype in _LDST_SHIFT:  # LDST{8,16,32,64,128}_ABS_LO12_NC, LD64_GOT_LO12_NC: the offset scaled by the access
        shift = _LDST_SHIFT[rtype]
        target = got_entry(s) + a if rtype == 312 else s + a
        if target & ((1 << shift) - 1):
            raise LinkError(f"{_aarch64_name(rtype)} against {name!r}: the address {target:#x} is not a multiple "
                            f"of the {1 << shift}-byte access (the scaled offset cannot encode it)")
        _patch_insn(image, place, 0xFFF << 10, ((target & 0xFFF) >> shift) << 10)
    else:
        raise LinkError(f"unsupported aarch64 relocation type {rtype} ({_aarch64_name(rtype)}) against {name!r}: "
                        "kernel images are linked from small-code-model PIC objects, which the linker resolves "
                        f"with {', '.join(_aarch64_name(t) for t in AARCH64_SUPPORTED)}")


# R_RISCV_* (the RISC-V ELF psABI): the types the riscv64 relocator resolves, and names of others for the message.
RISCV_RELOCATION_NAMES = {
    1: "32", 2: "64", 3: "RELATIVE", 5: "JUMP_SLOT", 16: "BRANCH", 17: "JAL", 18: "CALL", 19: "CALL_PLT",
    20: "GOT_HI20", 21: "TLS_GOT_HI20", 22: "TLS_GD_HI20", 23: "PCREL_HI20", 24: "PCREL_LO12_I",
    25: "PCREL_LO12_S", 26: "HI20", 27: "LO12_I", 28: "LO12_S", 29: "TPREL_HI20", 30: "TPREL_LO12_I",
    31: "TPREL_LO12_S", 32: "TPREL_ADD", 33: "ADD8", 34: "ADD16", 35: "ADD32", 36: "ADD64", 37: "SUB8",
    38: "SUB16", 39: "SUB32", 40: "SUB64", 43: "ALIGN", 44: "RVC_BRANCH", 45: "RVC_JUMP", 51: "RELAX",
    52: "SUB6", 53: "SET6", 54: "SET8", 55: "SET16", 56: "SET32", 57: "32_PCREL",
}
RISCV_SUPPORTED = (2, 16, 17, 18, 19, 20, 23, 24, 25, 35, 36, 39, 40, 51, 57)


def _riscv_name(rtype: int) -> str:
    return f"R_RISCV_{RISCV_RELOCATION_NAMES.get(rtype, 'unknown')}"


def _hi20(value: int) -> int:
    return ((value + 0x800) >> 12) & 0xFFFFF


def _lo12(value: int) -> int:
    return value - (((value + 0x800) >> 12) << 12)  # in [-2048, 2047]


def _fits(value: int, bits: int) -> bool:
    return -(1 << (bits - 1)) <= value < (1 << (bits - 1))


def _relocate_riscv64():
    """The riscv64 relocator of one link: it remembers what each auipc (PCREL_HI20, GOT_HI20) resolved to, for
    the %pcrel_lo relocations that name the auipc's label (run after them: _DEFERRED)."""
    auipc: dict[int, int] = {}  # image offset of an auipc -> the PC-relative offset it resolved

    def relocate(image, rtype, place, s, a, got_entry, runtime_relocs, name):
        def pcrel(value, bits, what):
            if not _fits(value, bits) or value % 2:
                raise LinkError(f"{_riscv_name(rtype)} {what} to {name!r} out of range ({value} bytes; it reaches "
                                f"+-{1 << (bits - 1)} bytes at a multiple of 2)")
            return value

        if rtype == 2:  # 64: the loader writes image_base + S + A
            runtime_relocs.append((place, s + a))
        elif rtype == 57:  # 32_PCREL
            _put(image, "<i", place, s + a - place, name, rtype)
        elif rtype in (35, 36, 39, 40):  # ADD32, ADD64, SUB32, SUB64: label differences (jump tables)
            fmt, mask = ("<I", 0xFFFFFFFF) if rtype in (35, 39) else ("<Q", (1 << 64) - 1)
            old = struct.unpack_from(fmt, image, place)[0]
            struct.pack_into(fmt, image, place, (old + (s + a if rtype in (35, 36) else -(s + a))) & mask)
        elif rtype in (23, 20):  # PCREL_HI20, GOT_HI20: auipc
            delta = (got_entry(s) if rtype == 20 else s) + a - place
            if not _fits(delta, 32):
                raise LinkError(f"{_riscv_name(rtype)}: {name!r} is out of auipc's +-2 GiB range")
            auipc[place] = delta
            _patch_insn(image, place, 0xFFFFF000, _hi20(delta) << 12)
        elif rtype in (24, 25):  # PCREL_LO12_I, PCREL_LO12_S: the low part of the auipc at S (a label)
            if s not in auipc:
                raise LinkError(f"{_riscv_name(rtype)} names no auipc relocated by PCREL_HI20 or GOT_HI20 "
                                f"(label {name!r} at {s:#x})")
            lo = _lo12(auipc[s]) & 0xFFF
            if rtype == 24:
                _patch_insn(image, place, 0xFFF00000, lo << 20)
            else:
                _patch_insn(image, place, 0xFE000F80, (lo >> 5) << 25 | (lo & 0x1F) << 7)
        elif rtype in (18, 19):  # CALL, CALL_PLT: auipc ra + jalr ra
            delta = s + a - place
            if not _fits(delta, 32):
                raise LinkError(f"{_riscv_name(rtype)} to {name!r} out of range")
            _patch_insn(image, place, 0xFFFFF000, _hi20(delta) << 12)
            _patch_insn(image, place + 4, 0xFFF00000, (_lo12(delta) & 0xFFF) << 20)
        elif rtype == 16:  # BRANCH: B-type, +-4 KiB
            v = pcrel(s + a - place, 13, "branch")
            bits = ((v >> 12) & 1) << 31 | ((v >> 5) & 0x3F) << 25 | ((v >> 1) & 0xF) << 8 | ((v >> 11) & 1) << 7
            _patch_insn(image, place, 0xFE000F80, bits)
        elif rtype == 17:  # JAL: J-type, +-1 MiB
            v = pcrel(s + a - place, 21, "jump")
            bits = ((v >> 20) & 1) << 31 | ((v >> 1) & 0x3FF) << 21 | ((v >> 11) & 1) << 20 | ((v >> 12) & 0xFF) << 12
            _patch_insn(image, place, 0xFFFFF000, bits)
        elif rtype == 51:  # RELAX: permission to shorten the sequence before it; keeping it as it is is correct
            pass
        else:
            raise LinkError(f"unsupported riscv64 relocation type {rtype} ({_riscv_name(rtype)}) against {name!r}: "
                            "kernel images are linked from PIC objects compiled without linker relaxation (-relax), "
                            f"which the linker resolves with {', '.join(_riscv_name(t) for t in RISCV_SUPPORTED)}")

    return relocate


_RELOCATORS = {"x86_64": lambda: _relocate_x86_64, "aarch64": lambda: _relocate_aarch64, "riscv64": _relocate_riscv64}
_DEFERRED = {"riscv64": (24, 25)}
