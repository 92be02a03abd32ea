"""The linker's aarch64 relocations: every type it accepts, resolved to the right place (checked here by decoding
the patched instructions and data, and by running the image under qemu in tests/test_cross_aarch64.py), and a
clear error for the types, ranges and alignments it cannot resolve."""
import struct

import pytest

from cross_targets import RELOCATION_KERNEL_RESULTS, aarch64_target, patched, relocation_kernel_object, relocations
from kiln.compiler.link import AARCH64_SUPPORTED, LinkError, link_object

TARGET = aarch64_target()


@pytest.fixture(scope="module")
def obj():
    return relocation_kernel_object(TARGET)


def test_the_kernel_uses_every_supported_type(obj):
    """The test kernel exercises every type the linker accepts except ADR_PREL_PG_HI21_NC (LLVM emits the checked
    form; the _NC form is tested below by rewriting one)."""
    used = {r.type for r in relocations(obj)}
    assert used == set(AARCH64_SUPPORTED) - {276}


def _word(code: bytes, at: int) -> int:
    return struct.unpack_from("<I", code, at)[0]


def _adrp_page(code: bytes, at: int) -> int:
    insn = _word(code, at)
    assert insn & 0x9F000000 == 0x90000000, hex(insn)  # adrp
    imm = ((insn >> 5) & 0x7FFFF) << 2 | (insn >> 29) & 3
    imm -= (1 << 21) if imm & (1 << 20) else 0
    return (at & ~0xFFF) + (imm << 12)


def _lo12(code: bytes, at: int) -> tuple[int, int]:
    """(byte offset, access size) of an add-immediate or an unsigned-offset load."""
    insn = _word(code, at)
    imm12 = (insn >> 10) & 0xFFF
    if insn & 0x7F800000 == 0x11000000:  # add (immediate), 32 or 64 bit
        return imm12, 1
    assert insn & 0x3B000000 == 0x39000000, hex(insn)  # ldr/str (unsigned offset)
    size = insn >> 30
    if insn & 0x04000000 and insn & 0x00800000:  # SIMD&FP 128-bit (opc<1> set, size 0)
        size = 4
    return imm12 << size, 1 << size


def test_resolved_instructions_and_data_point_where_they_should(obj):
    """Decoding the linked image (independently of the linker's patcher): each adrp + lo12 pair addresses the
    value the kernel expects to load there, the GOT slot holds a loader relocation to @gotted, bl/b reach the
    callee's entry, and the PC-relative data words point at their functions."""
    linked = link_object(obj, TARGET)
    code = linked.code
    relocs = relocations(obj)
    # The kernel's text is its own object's .text: symbols' offsets within .text are image offsets (text first).
    text = [r for r in relocs if r.section == ".text"]
    loader = dict(linked.relocs)
    values = {278: RELOCATION_KERNEL_RESULTS[0], 284: RELOCATION_KERNEL_RESULTS[1],
              285: RELOCATION_KERNEL_RESULTS[2], 286: RELOCATION_KERNEL_RESULTS[3]}
    checked = set()
    for _, _, place, rtype, name, _, _ in text:
        if rtype in (282, 283):
            insn = _word(code, place)
            delta = (insn & 0x03FFFFFF) - ((1 << 26) if insn & (1 << 25) else 0)
            assert place + 4 * delta == linked.entries[name], (rtype, name)
            checked.add(rtype)
    pairs = []  # each lo12 relocation with the adrp of the same symbol and addend before it
    for k, lo in enumerate(text):
        if lo.type in (277, 278, 284, 285, 286, 299, 312):
            hi = next(r for r in reversed(text[:k]) if r.type in (275, 311) and (r.symbol, r.addend) == (lo.symbol, lo.addend))
            pairs.append((hi, lo))
    for hi, lo in pairs:
        address = _adrp_page(code, hi.offset)
        offset, size = _lo12(code, lo.offset)
        address += offset
        if lo.type in values:
            got = int.from_bytes(code[address:address + size], "little")
            assert got == values[lo.type], (lo.type, got)
        elif lo.type == 299:
            assert struct.unpack_from("<2q", code, address) == tuple(RELOCATION_KERNEL_RESULTS[4:6])
        elif lo.type == 312:  # the GOT slot: filled by the loader with image_base + address of @gotted
            assert struct.unpack_from("<q", code, loader[address])[0] == RELOCATION_KERNEL_RESULTS[6]
        checked.update((hi.type, lo.type))
    assert 277 in checked  # add :lo12: (the addresses of @rel64, @rel32 and @ptrs)
    # .data.rel.ro: @ptrs (two ABS64), @rel64 (PREL64), @rel32 (PREL32). @ptrs[0] is its first word and the
    # image's lowest loader relocation (the GOT comes after every section).
    data = min(loader)
    for section, _, offset, rtype, name, _, addend in relocs:
        if section != ".text":
            assert section.startswith(".data.rel.ro"), section
            place = data + offset
            if rtype == 257:
                if name:  # @ptrs[1] = @triple
                    assert loader[place] == linked.entries[name] + addend
                else:  # @ptrs[0] = @v64
                    assert struct.unpack_from("<q", code, loader[place])[0] == RELOCATION_KERNEL_RESULTS[3]
            else:
                fmt = "<q" if rtype == 260 else "<i"
                assert place + struct.unpack_from(fmt, code, place)[0] == linked.entries[name] + addend
            checked.add(rtype)
    assert checked == set(AARCH64_SUPPORTED) - {276}


def test_adr_prel_pg_hi21_nc_resolves_as_the_checked_form(obj):
    first = next(r for r in relocations(obj) if r.type == 275)
    assert link_object(patched(obj, first.entry, rtype=276), TARGET).code == link_object(obj, TARGET).code


@pytest.mark.parametrize("rtype, name", [(263, "MOVW_UABS_G0"), (274, "ADR_PREL_LO21"), (280, "CONDBR19"),
                                         (258, "ABS32"), (560, "TLSDESC_ADR_PAGE21"), (9999, "unknown")])
def test_unsupported_types_are_refused_naming_them(obj, rtype, name):
    entry = next(r for r in relocations(obj) if r.type == 283)
    with pytest.raises(LinkError, match=rf"unsupported aarch64 relocation type {rtype} \(R_AARCH64_{name}\) "
                                        r"against 'triple': kernel images are linked from small-code-model PIC"):
        link_object(patched(obj, entry.entry, rtype=rtype), TARGET)


def test_branch_out_of_range_is_an_error(obj):
    entry = next(r for r in relocations(obj) if r.type == 283)
    with pytest.raises(LinkError, match=rf"R_AARCH64_CALL26 branch to 'triple' out of range \({(1 << 28) - entry.offset} bytes"):
        link_object(patched(obj, entry.entry, addend=1 << 28), TARGET)
    with pytest.raises(LinkError, match="R_AARCH64_CALL26 branch to 'triple' out of range"):
        link_object(patched(obj, entry.entry, addend=2), TARGET)  # not a multiple of 4


def test_misaligned_scaled_offset_is_an_error(obj):
    """An LDST64 offset that is not a multiple of 8 cannot be encoded: an error, not a silently rounded address."""
    entry = next(r for r in relocations(obj) if r.type == 286)
    with pytest.raises(LinkError, match=r"R_AARCH64_LDST64_ABS_LO12_NC against '': the address 0x[0-9a-f]+ is not "
                                        r"a multiple of the 8-byte access"):
        link_object(patched(obj, entry.entry, addend=entry.addend + 4), TARGET)


def test_prel32_out_of_range_is_an_error(obj):
    entry = next(r for r in relocations(obj) if r.type == 261)
    with pytest.raises(LinkError, match=r"relocation type 261 against 'tail' is out of range"):
        link_object(patched(obj, entry.entry, addend=1 << 32), TARGET)
