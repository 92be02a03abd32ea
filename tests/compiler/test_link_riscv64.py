"""The linker's riscv64 relocations: every type it accepts resolved to the right place (checked by decoding the
linked image, independently of the linker's encoder; tests/cross_suite.py's riscv64 tests run the image under qemu),
and a clear error for the types it does not accept."""
import struct

import pytest

from cross_targets import RELOCATION_KERNEL_RESULTS, patched, relocation_kernel_object, relocations
from kiln.compiler.link import RISCV_SUPPORTED, LinkError, link_object
from kiln.compiler.target import Target

TARGET = Target.portable("riscv64-unknown-linux-gnu")[1]  # rv64gc


@pytest.fixture(scope="module")
def obj():
    return relocation_kernel_object(TARGET)


def _insn(code, at):
    return struct.unpack_from("<I", code, at)[0]


def _sext(value, bits):
    return value - (1 << bits) if value & (1 << (bits - 1)) else value


def _u_imm(insn):  # auipc
    return _sext(insn >> 12, 20) << 12


def _i_imm(insn):
    return _sext(insn >> 20, 12)


def _s_imm(insn):
    return _sext((insn >> 25) << 5 | (insn >> 7) & 0x1F, 12)


def _b_imm(insn):
    return _sext((insn >> 31) << 12 | ((insn >> 7) & 1) << 11 | ((insn >> 25) & 0x3F) << 5 | ((insn >> 8) & 0xF) << 1, 13)


def _j_imm(insn):
    return _sext((insn >> 31) << 20 | ((insn >> 12) & 0xFF) << 12 | ((insn >> 20) & 1) << 11
                 | ((insn >> 21) & 0x3FF) << 1, 21)


def test_the_kernel_uses_these_types(obj):
    """The relocation kernel compiled for rv64gc: PC-relative data (auipc + lo12), the GOT, calls and tail calls
    (CALL_PLT), absolute pointers (64) and label differences (ADD/SUB 32 and 64). BRANCH, JAL, CALL,
    PCREL_LO12_S and 32_PCREL are checked below by rewriting one of these."""
    assert {r.type for r in relocations(obj)} == {2, 19, 20, 23, 24, 35, 36, 39, 40}


def test_resolved_instructions_and_data_point_where_they_should(obj):
    linked = link_object(obj, TARGET)
    code = linked.code
    relocs = relocations(obj)
    text = [r for r in relocs if r.section == ".text"]
    loader = dict(linked.relocs)
    # Each auipc + addi/l* pair: the address it forms, then what lies there.
    addresses = {}
    for section, _, place, rtype, name, value, addend in text:
        if rtype in (20, 23):
            addresses[place] = (place + _u_imm(_insn(code, place)), rtype, name)
    want = {"v8": RELOCATION_KERNEL_RESULTS[0], "v16": RELOCATION_KERNEL_RESULTS[1],
            "v32": RELOCATION_KERNEL_RESULTS[2], "v64": RELOCATION_KERNEL_RESULTS[3]}
    sizes = {"v8": 1, "v16": 2, "v32": 4, "v64": 8}
    seen = set()
    for section, _, place, rtype, name, value, addend in text:
        if rtype == 24:
            base, hi_type, target = addresses[value]  # the label names its auipc
            address = base + _i_imm(_insn(code, place))
            if target in want:
                assert int.from_bytes(code[address:address + sizes[target]], "little") == want[target], target
            elif target == "v128":
                assert struct.unpack_from("<2q", code, address) == tuple(RELOCATION_KERNEL_RESULTS[4:6])
            elif target == "gotted":  # the GOT slot, which the loader fills with the address of @gotted
                assert hi_type == 20 and struct.unpack_from("<q", code, loader[address])[0] == 99
            else:  # @ptrs, @rel64, @rel32: the first, third and fourth words of .data.rel.ro
                assert address == min(loader) + {"ptrs": 0, "rel64": 16, "rel32": 24}[target], target
            seen.add(target)
        elif rtype == 19:  # auipc ra + jalr ra
            assert place + _u_imm(_insn(code, place)) + _i_imm(_insn(code, place + 4)) == linked.entries[name]
            seen.add(f"call {name}")
    assert seen >= {"v8", "v16", "v32", "v64", "v128", "gotted", "ptrs", "rel64", "rel32", "call triple", "call tail"}
    # .data.rel.ro: @ptrs (two 64), @rel64 (ADD64 - SUB64: triple - rel64) and @rel32 (ADD32 - SUB32).
    data = min(loader)
    for section, _, offset, rtype, name, value, addend in relocs:
        if section != ".text" and rtype == 2:
            assert data + offset in loader
    rel64 = data + 16
    assert rel64 + struct.unpack_from("<q", code, rel64)[0] == linked.entries["triple"]
    rel32 = data + 24
    assert rel32 + struct.unpack_from("<i", code, rel32)[0] == linked.entries["tail"]


def test_rewritten_types_encode_the_same_target(obj):
    """BRANCH, JAL, CALL, PCREL_LO12_S and 32_PCREL, by giving an existing relocation that type and decoding."""
    relocs = relocations(obj)
    linked = link_object(obj, TARGET)
    call = next(r for r in relocs if r.type == 19 and r.symbol == "triple")
    same = link_object(patched(obj, call.entry, rtype=18), TARGET)  # CALL resolves as CALL_PLT
    assert same.code == linked.code
    place = call.offset
    jal = link_object(patched(obj, call.entry, rtype=17), TARGET).code
    assert place + _j_imm(_insn(jal, place)) == linked.entries["triple"]
    branch = link_object(patched(obj, call.entry, rtype=16), TARGET).code
    assert place + _b_imm(_insn(branch, place)) == linked.entries["triple"]
    lo = next(r for r in relocs if r.type == 24)
    store_form = link_object(patched(obj, lo.entry, rtype=25), TARGET).code
    assert _s_imm(_insn(store_form, lo.offset)) == _i_imm(_insn(linked.code, lo.offset))
    add32 = next(r for r in relocs if r.type == 35)  # @rel32's word: tail - rel32, as ADD32 + SUB32
    sub32 = next(r for r in relocs if r.type == 39)
    pcrel = link_object(patched(patched(obj, add32.entry, rtype=57), sub32.entry, rtype=51), TARGET)  # SUB -> RELAX
    data = min(dict(pcrel.relocs))
    assert data + 24 + struct.unpack_from("<i", pcrel.code, data + 24)[0] == pcrel.entries["tail"]
    assert {16, 17, 18, 25, 51, 57} | {2, 19, 20, 23, 24, 35, 36, 39, 40} == set(RISCV_SUPPORTED)


@pytest.mark.parametrize("rtype, name", [(26, "HI20"), (43, "ALIGN"), (44, "RVC_BRANCH"), (1, "32"),
                                         (29, "TPREL_HI20"), (9999, "unknown")])
def test_unsupported_types_are_refused_naming_them(obj, rtype, name):
    entry = next(r for r in relocations(obj) if r.type == 19)
    with pytest.raises(LinkError, match=rf"unsupported riscv64 relocation type {rtype} \(R_RISCV_{name}\) against "
                                        r"'triple': kernel images are linked from PIC objects compiled without "
                                        r"linker relaxation"):
        link_object(patched(obj, entry.entry, rtype=rtype), TARGET)


def test_range_errors(obj):
    relocs = relocations(obj)
    call = next(r for r in relocs if r.type == 19 and r.symbol == "triple")
    with pytest.raises(LinkError, match=r"R_RISCV_BRANCH branch to 'triple' out of range \(\d+ bytes; it reaches "
                                        r"\+-4096 bytes"):
        link_object(patched(obj, call.entry, rtype=16, addend=1 << 13), TARGET)
    with pytest.raises(LinkError, match=r"R_RISCV_JAL jump to 'triple' out of range"):
        link_object(patched(obj, call.entry, rtype=17, addend=1 << 21), TARGET)
    with pytest.raises(LinkError, match=r"R_RISCV_CALL_PLT to 'triple' out of range"):
        link_object(patched(obj, call.entry, addend=1 << 32), TARGET)


def test_lo12_naming_no_auipc_is_an_error(obj):
    """A %pcrel_lo whose label is not at a relocated auipc (its HI20 relocation rewritten away)."""
    relocs = relocations(obj)
    hi = next(r for r in relocs if r.type == 23)
    with pytest.raises(LinkError, match=r"R_RISCV_PCREL_LO12_I names no auipc relocated by PCREL_HI20 or GOT_HI20 "
                                        r"\(label '\.Lpcrel_hi\d+' at 0x[0-9a-f]+\)"):
        link_object(patched(obj, hi.entry, rtype=51), TARGET)
