"""The module writer, reader, assembler and disassembler (pure Python)."""

import struct
import zlib

import numpy as np
import pytest

from kiln.vm import checksum
from kiln.vm._generated.constants import FORMAT_VERSION
from kiln.vm._generated import module_fb as fb
from kiln.vm.assembler import AssemblyError, assemble
from kiln.vm.disassembler import DecodeError, Names, decode, disassemble, with_labels
from kiln.vm.isa import OPS, Instr, Label, instr_words
from kiln.vm.module_spec import GlobalSpec, KernelSpec, TensorType
from kiln.vm.reader import ModuleFile, ModuleFormatError, dump_text, read_module
from kiln.vm.validate import SpecError
from kiln.vm.writer import serialize
from vm_specs import F4, I64, fn, sample_spec


def test_serialize_is_deterministic():
    a, b = serialize(sample_spec()), serialize(sample_spec())
    assert a == b
    assert a[4:8] == b"KILN"


_EXPORT_SCRIPT = """
import sys
import numpy as np
import kiln.numpy as knp
from kiln import Program
sys.path.insert(0, sys.argv[1])
from linear import Linear

state = {"zeta": np.ones(3, np.float32), "alpha": np.arange(3, dtype=np.int32), "mid": [np.float32(2), None]}

class Trees(Program):
    _state = state
    _alias = state["zeta"]

    def step(self, x=Program.like(np.zeros((2, 3), np.float32))):
        self._state = {"zeta": self._state["zeta"] + 1, "alpha": self._state["alpha"] * 2, "mid": self._state["mid"]}
        return {"b": self._k(x), "a": knp.sum(x, axis=0) + self._alias}

    @Program.kernel
    def _k(x):
        return knp.tanh(x) * 2

for cls in (Linear, Trees):
    sys.stdout.buffer.write(Program.get_compiled_artifact(cls).bytes)
"""


def test_export_is_deterministic_across_processes(tmp_path):
    """Two Python processes with different hash seeds export byte-identical modules."""
    import os
    import subprocess
    import sys

    from kiln_tools import ROOT

    script = tmp_path / "export.py"
    script.write_text(_EXPORT_SCRIPT)
    outputs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, str(script), os.path.join(ROOT, "examples")], env=env,
                              capture_output=True, timeout=300)
        assert proc.returncode == 0, proc.stderr.decode()
        outputs.append(proc.stdout)
    assert len(outputs[0]) > 1000 and outputs[0].count(b"KILNCSUM") == 2   # two sealed modules
    assert outputs[0] == outputs[1]


def test_read_then_write_gives_the_same_bytes():
    data = serialize(sample_spec())
    again = read_module(data)
    assert serialize(again) == data
    assert [f.name for f in again.functions] == ["predict", "step", "bump", "triangle"]
    np.testing.assert_array_equal(again.globals[0].initial, [1, 2, 3, 4])
    assert again.globals[1].initial is None
    assert again.constants[0].data.dtype == np.int64


def test_in_place_data_is_64_byte_aligned():
    data = serialize(sample_spec())
    root = fb.get_root_Module(data)
    tab = root.globals()[0]._tab
    off = tab.Offset(4 + 2 * 3)
    assert tab.Vector(off) % 64 == 0
    img = root.kernel_images()[0]._tab
    assert img.Vector(img.Offset(4 + 2 * 2)) % 64 == 0
    assert (len(data) - checksum.TRAILER_SIZE) % 64 == 0   # the flatbuffer, then the trailer


def test_types_are_interned():
    root = fb.get_root_Module(serialize(sample_spec()))
    shapes = [(t.dtype(), tuple(t.shape())) for t in root.types()]
    assert len(shapes) == len(set(shapes)) == 2


def test_version_is_written_first():
    root = fb.get_root_Module(serialize(sample_spec(), version=(2, 3)))
    assert (root.version_major(), root.version_minor()) == (2, 3)


def test_checksum_trailer_layout():
    data = serialize(sample_spec())
    magic, algorithm, stored = struct.unpack("<8sII", data[-16:])
    assert (magic, algorithm) == (b"KILNCSUM", 1)
    assert stored == zlib.crc32(data[:-4])     # everything before the checksum field
    assert checksum.crc32(b"123456789") == 0xCBF43926
    assert checksum.verify(data).tobytes() == data[:-16]
    assert checksum.reseal(data) == data


def test_kernel_bounds_are_written():
    spec = sample_spec()
    root = fb.get_root_Module(serialize(spec))
    assert root.kernel_images()[0].entry_points() == [0]
    assert root.kernels()[0].max_workgroups() == 3        # the most its dispatches use
    spec.kernels[0].max_workgroups = 64
    spec.kernel_images[0].entry_points = [0, 16]
    again = read_module(serialize(spec))
    assert again.kernels[0].max_workgroups == 64
    assert again.kernel_images[0].entry_points == [0, 16]


def every_op_code():
    t = TensorType("i32", ())
    code = []
    for op in OPS:
        operands = []
        for kind, _ in op.operands:
            operands.append({"type": t, "target": 0, "imm64": -(1 << 40), "list_r": (1, 2),
                             "list_i": (3,)}.get(kind, 1))
        code.append(Instr(op.name, *operands))
    return code


def test_assembler_disassembler_round_trip():
    code = every_op_code()
    words = assemble(code, lambda t: 0)
    assert len(words) == sum(instr_words(i) for i in code)
    decoded = decode(words, [TensorType("i32", ())])
    assert [i for _, i in decoded] == code
    assert assemble([i for _, i in decoded], lambda t: 0) == words


def test_labels_resolve_and_come_back():
    top, end = Label("top"), Label("end")
    code = [top, Instr("i.const", 0, 1), Instr("br.if", 0, end, top), end, Instr("ret", [])]
    words = assemble(code)
    assert words[6:8] == [8, 0]
    relabeled = with_labels(decode(words))
    assert assemble(relabeled) == words
    assert sum(isinstance(x, Label) for x in relabeled) == 2


def test_disassembly_names_operands():
    text = disassemble(assemble([Instr("global.load", 0, 1), Instr("dispatch", 0, 4, [0], [1]),
                                 Instr("call", 0, [0], []), Instr("ret", [0])]),
                       Names(globals=["a", "params.w"], kernels=["affine"], functions=["f"]))
    assert text.splitlines() == [
        "    0  global.load r0, global(params.w)",
        "    3  dispatch kernel(affine), 4, [r0], [i1]",
        "   10  call func(f), [r0], []",
        "   15  ret [r0]",
    ]


def test_decode_rejects_bad_code():
    with pytest.raises(DecodeError, match="unknown opcode 0"):
        decode([0])
    with pytest.raises(DecodeError, match="truncated"):
        decode([OPS[0].code, 1])


@pytest.mark.parametrize("args, message", [
    (("alloc", 0), "takes 2 operands"),
    (("alloc", -1, F4), "unsigned 32-bit"),
    (("i.const", 0, 1 << 63), "signed 64-bit"),
    (("ret", [0.5]), "list of register"),
    (("nope",), "unknown op"),
])
def test_instr_checks_operands(args, message):
    with pytest.raises((TypeError, ValueError), match=message):
        Instr(*args)


def test_assembler_rejects_missing_or_duplicate_labels():
    lbl = Label("x")
    with pytest.raises(AssemblyError, match="never placed"):
        assemble([Instr("br", lbl)])
    with pytest.raises(AssemblyError, match="placed twice"):
        assemble([lbl, lbl, Instr("br", lbl)])


@pytest.mark.parametrize("mutate, message", [
    (lambda s: s.functions[0].code.insert(0, Instr("mov", 9, 0)), "r 9 out of range"),
    (lambda s: s.functions[0].code.insert(0, Instr("const", 0, 5)), "const 5 out of range"),
    (lambda s: s.functions[0].code.pop(), "terminator"),
    (lambda s: s.functions[1].code.insert(0, Instr("call", 2, [], [0])), "callee takes"),
    (lambda s: s.functions[0].code.insert(0, Instr("ret", [])), "ret of 0 values"),
    (lambda s: s.functions[0].code.insert(0, Instr("dispatch", 0, 0, [0, 1, 2], [0, 1])),
     "at least 1"),
    (lambda s: s.functions[0].code.insert(0, Instr("br", 1)), "not an instruction start"),
    (lambda s: s.globals.append(GlobalSpec("w", F4, True, None)), "duplicate global"),
    (lambda s: s.globals.append(GlobalSpec("z", F4, True, np.zeros(3, np.float32))),
     "initial value"),
    (lambda s: setattr(s.kernels[0], "max_workgroups", 2), "3 workgroups, the kernel allows at most 2"),
    (lambda s: setattr(s.kernels[0], "max_workgroups", (1 << 24) + 1), "outside \\[1, 16777216\\]"),
    (lambda s: setattr(s.kernel_images[0], "entry_points", [16]), "not an entry point of image 0"),
    (lambda s: setattr(s.kernel_images[0], "entry_points", [0, 0]), "strictly increasing"),
    (lambda s: setattr(s.functions[0], "ref_registers", (1 << 20) + 1), "at most 1048576"),
])
def test_validation_catches_bad_specs(mutate, message):
    spec = sample_spec()
    mutate(spec)
    with pytest.raises(SpecError, match=message):
        serialize(spec)


def test_dump_text():
    data = serialize(sample_spec())
    text = dump_text(data)
    assert f"module 'axpy' (format {FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}" in text
    assert "kernel images: 1, bindings aligned to 64 bytes" in text  # a hand-made spec: not marked
    assert f"checksum: crc32 0x{zlib.crc32(data[:-4]):08x} (verified)" in text
    assert "entry points [0x0]" in text and "at most 3 workgroups" in text
    assert "export func#0 predict(x: 4xf32) -> (y: 4xf32)" in text
    assert "internal func#2 bump(c: i64) -> (next: i64)" in text
    assert "global#0 w: 4xf32 immutable, 16 bytes of initial data" in text
    assert "global#1 counter: i64 mutable, zeros" in text
    assert "kernel#0 axpy: image#0 (x86_64-unknown-linux-gnu)" in text
    assert "dispatch kernel(axpy), 3, [r0, r1, r2], [i0, i1]" in text
    assert "call func(bump), [r0], [r1]" in text


def test_reader_rejects_bad_files():
    data = serialize(sample_spec())
    with pytest.raises(ModuleFormatError, match="not a kiln module"):
        read_module(b"XXXXXXXXXXXX")
    with pytest.raises(ModuleFormatError, match="version 7.0 is not supported"):
        read_module(serialize(sample_spec(), version=(7, 0)))
    old = serialize(sample_spec(), version=(1, 0))[:-16]      # 1.x files had no trailer
    with pytest.raises(ModuleFormatError, match=r"version 1.0 is not supported \(this reader reads 2.x\)"):
        read_module(old)
    with pytest.raises(ModuleFormatError, match="checksum trailer is missing"):
        read_module(data[:-16])
    unknown = data[:-8] + struct.pack("<I", 9)
    unknown += struct.pack("<I", zlib.crc32(unknown))
    with pytest.raises(ModuleFormatError, match="unknown algorithm 9"):
        read_module(unknown)
    for n in range(0, len(data), 37):
        try:
            read_module(data[:n])
        except ModuleFormatError:
            pass


def test_scalar_function_round_trip():
    spec = sample_spec()
    spec.functions.append(fn("noop", [], [], [Instr("ret", [])], ref=0, i64=0))
    data = serialize(spec)
    assert serialize(read_module(data)) == data
    assert I64.byte_size == 8


def test_dump_needs_no_numpy_dtype_for_data():
    from kiln.vm._generated import module_fb as gen
    import flatbuffers
    b = flatbuffers.Builder(256)
    t = gen.build_TensorType(b, dtype=gen.DType.BF16, shape=[2])
    c = gen.build_Constant(b, type=0, data=b"\x80\x3f\x00\x40")
    root = gen.build_Module(b, version_major=2, name="bf", types=[t], constants=[c])
    b.Finish(root, file_identifier=gen.FILE_IDENTIFIER)
    text = dump_text(checksum.seal(b.Output()))
    assert "const#0: 2xbf16 (4 bytes)" in text


def test_reader_rejects_huge_vector_lengths_quickly():
    data = bytearray(serialize(sample_spec()))
    root = fb.get_root_Module(bytes(data))
    tab = root._tab
    vec = tab.Vector(tab.Offset(4 + 2 * 4)) - 4   # functions vector length word
    data[vec:vec + 4] = (0xFFFFFFF0).to_bytes(4, "little")
    with pytest.raises(ModuleFormatError, match="checksum mismatch"):
        read_module(bytes(data))
    with pytest.raises(ModuleFormatError, match="corrupt module"):
        read_module(checksum.reseal(bytes(data)))


def test_disassembly_marks_labels_and_loop_back_edges():
    words = assemble(sample_spec().functions[3].code, lambda t: 1)   # triangle: one loop
    assert disassemble(words).splitlines() == [
        "    0  i.load i0, r0",
        "    3  i.const i1, 0",
        "    7  i.const i2, 1",
        "   11  i.const i4, 0",
        "L15:   ; loop header (back-edge from 31)",
        "   15  i.lt i3, i4, i0",
        "   19  br.if i3, @L23, @L33",
        "L23:",
        "   23  i.add i1, i1, i0",
        "   27  i.sub i0, i0, i2",
        "   31  br @L15   ; loop back-edge",
        "L33:",
        "   33  i.store r1, i1, type#1",
        "   37  ret [r1]",
    ]
    top = Label("top")
    self_loop = disassemble(assemble([top, Instr("br", top)]))
    assert self_loop.splitlines() == ["L0:   ; loop header (back-edge from 0)",
                                      "    0  br @L0   ; loop back-edge"]


# ---- damage: a module exported by kiln's own compiler -------------------------------

@pytest.fixture(scope="module")
def linear_bytes(linear_example):
    from kiln import Program
    return Program.get_compiled_artifact(linear_example.Linear()).bytes


def test_reader_rejects_every_flipped_byte_and_truncation(linear_bytes):
    """Damage anywhere, kernel code included, is a ModuleFormatError naming the checksum."""
    data = linear_bytes
    read_module(data)
    for i in range(len(data)):
        for mask in (0xFF, 0x01):
            damaged = bytearray(data)
            damaged[i] ^= mask
            with pytest.raises(ModuleFormatError, match="checksum"):
                read_module(bytes(damaged))
    for n in range(len(data)):
        with pytest.raises(ModuleFormatError):
            read_module(data[:n])


def test_reader_survives_every_resealed_flip(linear_bytes):
    """The same flips with the checksum recomputed reach the parser: it reads the
    module or raises ModuleFormatError (never TypeError, IndexError, ...), for
    the reader and for `kiln dump`'s text. (Kernel code bytes are skipped: the
    reader only copies them.)"""
    data = linear_bytes
    code = set()
    for img in fb.get_root_Module(data[:-checksum.TRAILER_SIZE]).kernel_images():
        start = img._tab.Vector(img._tab.Offset(8))
        code.update(range(start, start + len(img.code())))
    errors = 0
    for i in range(len(data) - checksum.TRAILER_SIZE):
        if i in code:
            continue
        damaged = bytearray(data)
        damaged[i] ^= 0xFF
        damaged = checksum.reseal(bytes(damaged))
        try:
            m = ModuleFile(damaged)
            m.spec        # what read_module returns
            m.dump()      # what dump_text returns
        except ModuleFormatError:
            errors += 1
    assert 0 < errors < len(data)
