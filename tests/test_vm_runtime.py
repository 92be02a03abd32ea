"""Modules written by kiln.vm.writer, loaded and run by the C runtime (through
runtime-c/tests/kiln_vm_driver.c, built with ASan+UBSan)."""

import struct
import subprocess
import zlib

import numpy as np
import pytest

from kiln.vm.checksum import TRAILER_SIZE, reseal
from kiln.vm.disassembler import Names, disassemble
from kiln.vm.isa import Instr, Label, instr_words
from kiln.vm.module_spec import BindingSpec, ConstantSpec, GlobalSpec, KernelSpec, TensorType
from kiln.vm.reader import ModuleFile
from kiln.vm.writer import serialize
from vm_native import Driver, build_driver, build_kernel, host_triple
from vm_specs import F4, I64, axpy_spec, fn


@pytest.fixture(scope="session")
def driver(tmp_path_factory):
    build = tmp_path_factory.mktemp("vm_native")
    return Driver(build_driver(build), tmp_path_factory.mktemp("vm_modules"))


@pytest.fixture(scope="session")
def kernel(tmp_path_factory):
    return build_kernel(tmp_path_factory.mktemp("vm_kernel"))


@pytest.fixture
def spec(kernel):
    return axpy_spec(kernel, host_triple())


def values(line: str) -> list[float]:
    return [float(v) for v in line.split("=", 1)[1].split(",")]


# ---- running ----------------------------------------------------------------

def test_dispatch_runs_the_kernel(driver, spec):
    x = np.array([10, 20, 30, 40], np.float32)
    out = driver.run(serialize(spec), "--call=predict", "--arg=4xf32=10,20,30,40")
    np.testing.assert_allclose(values(out[0]), x + 2 * np.array([1, 2, 3, 4], np.float32))
    assert out[0].startswith("result 0 4xf32=")


def test_internal_call_and_mutable_global(driver, spec):
    out = driver.run(serialize(spec), "--call=step", "--call=step", "--get=counter",
                     "--set=counter=i64=10", "--call=step", "--get=counter", "--get=w")
    assert out == ["result 0 i64=1", "result 0 i64=2", "global i64=2", "result 0 i64=11",
                   "global i64=11", "global 4xf32=1,2,3,4"]


@pytest.mark.parametrize("n", [0, 1, 10, 1000])
def test_loop_with_branches(driver, spec, n):
    out = driver.run(serialize(spec), "--call=triangle", f"--arg=i64={n}")
    assert out == [f"result 0 i64={n * (n + 1) // 2}"]


def test_scalar_conversions(driver, spec):
    f32, f16, i8, b = (TensorType(d, ()) for d in ("f32", "f16", "i8", "bool"))
    spec.functions.append(fn("conv", [("x", f32)], [("h", f16), ("b", i8), ("t", b)], [
        Instr("i.load", 0, 0),
        Instr("i.store", 1, 0, f16),
        Instr("i.const", 1, 300),
        Instr("i.store", 2, 1, i8),
        Instr("i.store", 3, 1, b),
        Instr("ret", [1, 2, 3]),
    ]))
    out = driver.run(serialize(spec), "--call=conv", "--arg=f32=-3.7")
    assert out == ["result 0 f16=0xc200", "result 1 i8=44", "result 2 bool=1"]


def test_constant_used_in_place_and_mov(driver, spec):
    spec.functions.append(fn("two", [], [("c", I64)], [
        Instr("const", 0, 0), Instr("mov", 1, 0), Instr("ret", [1])]))
    assert driver.run(serialize(spec), "--call=two") == ["result 0 i64=2"]


# ---- rows: buffer.row and buffer.set_row (the loop kiln.lax.scan lowers to) --------

def scan_fn(n: int, c: int):
    """scan(xs, zs) -> (ys, copy): for i in 0..n-1, ys[i] = xs[i] + 2 * zs[i] by the
    test kernel on row views, and copy[i] = xs[i] by set_row straight from a row.

    Dispatches kernel 1 of the spec: add it with row_kernel(spec, c)."""
    rows, row = TensorType("f32", (n, c)), TensorType("f32", (c,))
    head, body, done = Label("head"), Label("body"), Label("done")
    return fn("scan", [("xs", rows), ("zs", rows)], [("ys", rows), ("copy", rows)], [
        Instr("alloc", 2, rows),
        Instr("alloc", 6, rows),
        Instr("i.const", 0, 0),
        Instr("i.const", 1, n),
        Instr("i.const", 2, 1),
        Instr("i.const", 4, c),
        Instr("i.const", 5, 2),
        head,
        Instr("i.lt", 3, 0, 1),
        Instr("br.if", 3, body, done),
        body,
        Instr("buffer.row", 3, 0, 0),
        Instr("buffer.row", 4, 1, 0),
        Instr("alloc", 5, row),
        Instr("dispatch", 1, 1, [3, 4, 5], [4, 5]),
        Instr("buffer.set_row", 2, 0, 5),
        Instr("buffer.set_row", 6, 0, 3),
        Instr("i.add", 0, 0, 2),
        Instr("br", head),
        done,
        Instr("ret", [2, 6]),
    ])


def row_kernel(spec, c: int) -> None:
    """Adds kernel 1: the test kernel's entry point with bindings of c floats (a
    written binding is exactly the size of its buffer)."""
    spec.kernels.append(KernelSpec("axpy_row", 0, 0, [BindingSpec(4 * c, False),
                                                      BindingSpec(4 * c, False),
                                                      BindingSpec(4 * c, True)], 2))


def arg(a: np.ndarray) -> str:
    dims = "".join(f"{d}x" for d in a.shape)
    return f"--arg={dims}f32=" + ",".join(repr(float(v)) for v in a.ravel())


def result(line: str, shape) -> np.ndarray:
    text = line.split("=", 1)[1]
    return np.array([float(v) for v in text.split(",")] if text else [],
                    np.float32).reshape(shape)


# 4 floats a row: rows 1..3 of every 4 start off a 64-byte boundary and are copied;
# 16 floats: every row is a view; 6 floats: both; one row; no rows at all.
@pytest.mark.parametrize("n, c", [(5, 4), (3, 16), (9, 6), (1, 4), (0, 4)])
def test_scan_loop_of_rows_matches_numpy(driver, spec, n, c):
    spec.functions.append(scan_fn(n, c))
    row_kernel(spec, c)
    rng = np.random.default_rng(n * 100 + c)
    xs = rng.standard_normal((n, c)).astype(np.float32)
    zs = rng.standard_normal((n, c)).astype(np.float32)
    out = driver.run(serialize(spec), "--call=scan", arg(xs), arg(zs))
    assert [line.split("=")[0] for line in out] == [f"result 0 {n}x{c}xf32",
                                                   f"result 1 {n}x{c}xf32"]
    np.testing.assert_array_equal(result(out[0], (n, c)), xs + np.float32(2) * zs)
    np.testing.assert_array_equal(result(out[1], (n, c)), xs)


def test_scan_through_the_python_binding(spec):
    from kiln.vm.runtime import Context, Instance, Module
    from runtime_tools import ensure_runtime_library
    ensure_runtime_library()
    spec.functions.append(scan_fn(7, 6))
    row_kernel(spec, 6)
    xs = np.arange(42, dtype=np.float32).reshape(7, 6)
    zs = np.linspace(-1, 1, 42, dtype=np.float32).reshape(7, 6)
    with Instance(worker_count=2) as inst, Module.from_bytes(inst, serialize(spec)) as m, \
            Context(m) as ctx:
        ys, copy = ctx.invoke("scan", [xs, zs])
    np.testing.assert_array_equal(ys, xs + np.float32(2) * zs)
    np.testing.assert_array_equal(copy, xs)


def test_rows_of_rows_constants_and_globals(driver, spec):
    """Rows of a rank-3 argument (a row of a row), of a constant used in place and of
    a global's value; returned rows outlive the frame that made them."""
    spec.constants.append(ConstantSpec(np.arange(12, dtype=np.float32).reshape(3, 4)))
    spec.functions.append(fn("rows", [("x", TensorType("f32", (2, 4, 16)))], [
        ("a", TensorType("f32", (4, 16))), ("b", TensorType("f32", (16,))), ("c", F4),
        ("d", TensorType("f32", ()))], [
        Instr("i.const", 0, 1),
        Instr("i.const", 1, 2),
        Instr("buffer.row", 1, 0, 0),
        Instr("buffer.row", 2, 1, 1),
        Instr("const", 3, 1),
        Instr("buffer.row", 3, 3, 1),
        Instr("global.load", 4, 0),
        Instr("buffer.row", 4, 4, 1),
        Instr("ret", [1, 2, 3, 4]),
    ]))
    x = np.arange(128, dtype=np.float32).reshape(2, 4, 16) / 4
    out = driver.run(serialize(spec), "--call=rows", arg(x))
    np.testing.assert_array_equal(result(out[0], (4, 16)), x[1])
    np.testing.assert_array_equal(result(out[1], (16,)), x[1, 2])
    np.testing.assert_array_equal(result(out[2], (4,)), np.arange(12).reshape(3, 4)[2])
    assert out[3] == "result 3 f32=3"   # w[2], w = [1, 2, 3, 4]


def test_disassembly_shows_row_ops(driver, spec):
    spec.functions.append(scan_fn(2, 4))
    row_kernel(spec, 4)
    out = driver.load(serialize(spec))
    assert "buffer.row r3, r0, i0" in out
    assert "buffer.set_row r2, i0, r5" in out


X54 = TensorType("f32", (5, 4))


@pytest.mark.parametrize("code, message", [
    # buffer.row: index out of range either side
    ([Instr("i.const", 0, 5), Instr("buffer.row", 1, 0, 0)],
     "buffer.row: index i0 = 5 is out of range for src r0 of type 5x4xf32: "
     "expected 0 <= index < 5"),
    ([Instr("i.const", 2, -1), Instr("buffer.row", 1, 0, 2)],
     "buffer.row: index i2 = -1 is out of range for src r0 of type 5x4xf32"),
    # buffer.row: a 0-d src (a row of a row of a 2-d buffer)
    ([Instr("i.const", 0, 0), Instr("buffer.row", 1, 0, 0), Instr("buffer.row", 1, 1, 0),
      Instr("buffer.row", 2, 1, 0)],
     "buffer.row: src r1 is a 0-d buffer (f32), expected rank >= 1"),
    ([Instr("i.const", 0, 0), Instr("buffer.row", 1, 4, 0)],
     "register r4 read before assignment in function 'bad'"),
    ([Instr("buffer.row", 1, 0, 3)], "register i3 read before assignment in function 'bad'"),
    # buffer.set_row: index, rank, shape and dtype of src
    ([Instr("alloc", 1, X54), Instr("alloc", 2, F4), Instr("i.const", 0, 7),
      Instr("buffer.set_row", 1, 0, 2)],
     "buffer.set_row: index i0 = 7 is out of range for dst r1 of type 5x4xf32: "
     "expected 0 <= index < 5"),
    ([Instr("alloc", 1, X54), Instr("alloc", 2, F4), Instr("i.const", 0, -3),
      Instr("buffer.set_row", 1, 0, 2)],
     "buffer.set_row: index i0 = -3 is out of range"),
    ([Instr("i.const", 0, 0), Instr("i.store", 1, 0, I64), Instr("buffer.set_row", 1, 0, 1)],
     "buffer.set_row: dst r1 is a 0-d buffer (i64), expected rank >= 1"),
    ([Instr("alloc", 1, X54), Instr("alloc", 2, TensorType("f32", (3,))),
      Instr("i.const", 0, 0), Instr("buffer.set_row", 1, 0, 2)],
     "buffer.set_row: src r2 is 3xf32, expected 4xf32 (a row of dst r1, 5x4xf32)"),
    ([Instr("alloc", 1, X54), Instr("alloc", 2, TensorType("f64", (4,))),
      Instr("i.const", 0, 0), Instr("buffer.set_row", 1, 0, 2)],
     "buffer.set_row: src r2 is 4xf64, expected 4xf32 (a row of dst r1, 5x4xf32)"),
    ([Instr("alloc", 1, X54), Instr("i.const", 0, 0), Instr("buffer.set_row", 1, 0, 0)],
     "buffer.set_row: src r0 is 5x4xf32, expected 4xf32"),
    # buffer.set_row: read-only dst (an argument, a row view, a constant, a global)
    ([Instr("alloc", 2, F4), Instr("i.const", 0, 1), Instr("buffer.set_row", 0, 0, 2)],
     "buffer.set_row: dst r0 holds a read-only buffer (a constant, a global's value, an "
     "argument or a row view), expected one this invocation allocated"),
    ([Instr("alloc", 1, X54), Instr("i.const", 0, 1), Instr("buffer.row", 2, 1, 0),
      Instr("i.store", 3, 0, TensorType("f32", ())), Instr("buffer.set_row", 2, 0, 3)],
     "buffer.set_row: dst r2 holds a read-only buffer (a constant, a global's value"),
    ([Instr("global.load", 1, 0), Instr("i.const", 0, 1),
      Instr("i.store", 3, 0, TensorType("f32", ())), Instr("buffer.set_row", 1, 0, 3)],
     "buffer.set_row: dst r1 holds a read-only buffer"),
    # frozen: a buffer that buffer.row took a row of, through the same or another register
    ([Instr("alloc", 1, X54), Instr("i.const", 0, 1), Instr("buffer.row", 2, 1, 0),
      Instr("buffer.set_row", 1, 0, 2)],
     "buffer.set_row: dst r1 holds a read-only buffer (frozen: it was stored into a global "
     "or buffer.row took a row of it)"),
    ([Instr("alloc", 1, X54), Instr("mov", 3, 1), Instr("i.const", 0, 1),
      Instr("buffer.row", 2, 1, 0), Instr("buffer.set_row", 3, 0, 2)],
     "buffer.set_row: dst r3 holds a read-only buffer (frozen"),
    ([Instr("alloc", 1, TensorType("f32", (1, 4))), Instr("mov", 3, 1), Instr("i.const", 0, 0),
      Instr("buffer.row", 3, 3, 0), Instr("i.const", 1, 4), Instr("i.const", 2, 2),
      Instr("buffer.row", 4, 0, 0), Instr("dispatch", 0, 1, [4, 4, 1], [1, 2])],
     "binding 2 (r1) is written by the kernel but holds a read-only buffer (frozen"),
    # frozen: stored into a global, then written through an alias
    ([Instr("alloc", 1, F4), Instr("mov", 3, 1), Instr("global.store", 0, 1),
      Instr("i.const", 0, 4), Instr("i.const", 1, 2),
      Instr("dispatch", 0, 1, [3, 3, 3], [0, 1])],
     "binding 2 (r3) is written by the kernel but holds a read-only buffer (frozen: it was "
     "stored into a global"),
])
def test_row_errors_name_the_problem(driver, spec, code, message):
    spec.functions.append(fn("bad", [("xs", X54)], [], code + [Instr("ret", [])]))
    failing = code[-1]
    word = sum(instr_words(i) for i in code[:-1])
    line = driver.error("run", serialize(spec), "--call=bad", arg(np.zeros((5, 4), np.float32)))
    assert line.startswith("error FAILED_PRECONDITION: ")
    assert f"in function 'bad' at word {word} ({failing.op}): " in line
    assert message in line


# ---- errors at call time ---------------------------------------------------------

def test_argument_type_is_checked(driver, spec):
    line = driver.error("run", serialize(spec), "--call=predict", "--arg=5xf32=1,2,3,4,5")
    assert line == "error INVALID_ARGUMENT: predict: argument 0 'x' expects 4xf32, got 5xf32"
    line = driver.error("run", serialize(spec), "--call=predict", "--arg=4xi32=1,2,3,4")
    assert "expects 4xf32, got 4xi32" in line


def test_argument_count_and_names_are_checked(driver, spec):
    line = driver.error("run", serialize(spec), "--call=predict")
    assert line == "error INVALID_ARGUMENT: predict: expects 1 arguments, got 0"
    line = driver.error("run", serialize(spec), "--call=bump", "--arg=i64=1")
    assert "NOT_FOUND" in line and "no exported function 'bump'" in line
    line = driver.error("run", serialize(spec), "--get=nope")
    assert line == "error NOT_FOUND: get_global: module 'axpy' has no global 'nope'"
    line = driver.error("run", serialize(spec), "--set=counter=i32=1")
    assert line == "error INVALID_ARGUMENT: set_global 'counter': expects i64, got i32"


@pytest.mark.parametrize("code, message", [
    ([Instr("mov", 1, 5), Instr("ret", [1])],
     "register r5 read before assignment in function 'bad'"),
    ([Instr("i.store", 1, 3, I64), Instr("ret", [1])],
     "register i3 read before assignment in function 'bad'"),
    ([Instr("i.const", 0, 1), Instr("i.store", 1, 0, TensorType("i32", ())),
      Instr("global.store", 1, 1), Instr("ret", [1])],
     "global.store: global 1 'counter' expects i64, got i32"),
    ([Instr("i.const", 0, 1), Instr("i.store", 1, 0, TensorType("i32", ())), Instr("ret", [1])],
     "'bad' result 0 'out' expects i64, got i32"),
    ([Instr("call", 4, [], [1]), Instr("ret", [1])], "call depth limit (64) exceeded"),
    ([Instr("alloc", 1, TensorType("f32", (2,))), Instr("i.const", 0, 2),
      Instr("dispatch", 0, 1, [1, 1, 1], [0, 0]), Instr("ret", [1])],
     "dispatch of kernel 'axpy': binding 0 (r1) is 8 bytes, the kernel needs at least 16"),
    ([Instr("global.load", 1, 0), Instr("i.const", 0, 2),
      Instr("dispatch", 0, 1, [1, 1, 1], [0, 0]), Instr("ret", [1])],
     "binding 2 (r1) is written by the kernel but holds a read-only buffer"),
    ([Instr("alloc", 1, F4), Instr("global.store", 0, 1), Instr("i.const", 0, 2),
      Instr("dispatch", 0, 1, [1, 1, 1], [0, 0]), Instr("ret", [1])],
     "binding 2 (r1) is written by the kernel but holds a read-only buffer"),
    ([Instr("alloc", 1, F4), Instr("i.const", 0, -1),
      Instr("dispatch", 0, 2, [1, 1, 1], [0, 0]), Instr("ret", [1])], "'axpy'"),
])
def test_runtime_errors_name_the_problem(driver, spec, code, message):
    out_type = F4 if any(i.op == "dispatch" for i in code) else I64
    spec.functions.append(fn("bad", [], [("out", out_type)], code))
    line = driver.error("run", serialize(spec), "--call=bad")
    assert message in line
    assert "in function 'bad' at word" in line


# ---- loading ---------------------------------------------------------------------

def test_load_lists_reflection_and_disassembly(driver, spec):
    out = driver.load(serialize(spec))
    assert "function predict\n  arg x: 4xf32\n  result y: 4xf32\n" in out
    assert "  global w: 4xf32\n  global counter: i64 mutable\n" in out
    assert "dispatch kernel(axpy), 3, [r0, r1, r2], [i0, i1]" in out
    assert "call func(bump), [r0], [r1]" in out
    assert out.endswith("ok\n")


def test_unknown_major_version_is_rejected_before_verification(driver, spec):
    data = bytearray(serialize(spec, version=(7, 0)))
    data[len(data) // 2:] = b"\xff" * (len(data) - len(data) // 2)
    line = driver.error("load", bytes(data))
    assert line.startswith("error UNIMPLEMENTED: ")
    assert line.endswith("module format version 7.0 is not supported (this runtime reads 2.x)")
    # A 7.0 file whose trailer is intact (a future runtime's valid module) too.
    line = driver.error("load", serialize(spec, version=(7, 0)))
    assert line.endswith("module format version 7.0 is not supported (this runtime reads 2.x)")


def test_old_major_version_is_rejected(driver, spec):
    old = serialize(spec, version=(1, 0))[:-TRAILER_SIZE]   # 1.x files had no trailer
    line = driver.error("load", old)
    assert line.startswith("error UNIMPLEMENTED: ")
    assert line.endswith("module format version 1.0 is not supported (this runtime reads 2.x)")


def test_newer_minor_version_loads_or_is_refused_by_its_version(driver, spec):
    """A newer minor version loads when all it adds is what this runtime ignores; when it holds something
    this runtime does not know (an opcode of a later format), the refusal names the versions, not damage."""
    from kiln.vm.writer import FORMAT_VERSION

    newer = (FORMAT_VERSION[0], FORMAT_VERSION[1] + 1)
    driver.load(serialize(spec, version=newer))
    spec.functions.append(fn("bad", [], [], [Instr("i.const", 0, MARK), Instr("ret", [])], exported=False))
    lines = {}
    for version in (newer, FORMAT_VERSION):
        data = reseal(patch_words(serialize(spec, check=False, version=version), [11, 0, MARK, 0], [99, 0, MARK, 0]))
        lines[version] = driver.error("load", data)
    assert lines[newer].startswith("error UNIMPLEMENTED: ") and (
        "module format version %d.%d is newer than this runtime reads (%d.%d), and it uses what this runtime does "
        "not know (function 'bad': word 0: unknown opcode 99" % (*newer, *FORMAT_VERSION)) in lines[newer], lines[newer]
    assert lines[newer].endswith("): load it with a newer kiln runtime"), lines[newer]
    # the runtime's own version: an unknown opcode is damage
    assert lines[FORMAT_VERSION].startswith("error DATA_LOSS: ") and "word 0: unknown opcode 99" in lines[FORMAT_VERSION]


def test_checksum_is_checked_before_anything_else(driver, spec):
    data = serialize(spec)
    for at in (0, 5, 12, len(data) // 2, len(data) - TRAILER_SIZE - 1, len(data) - 2):
        damaged = bytearray(data)
        damaged[at] ^= 0x40
        stored = struct.unpack("<I", damaged[-4:])[0]
        computed = zlib.crc32(damaged[:-4])
        line = driver.error("load", bytes(damaged))
        assert line.startswith("error DATA_LOSS: ") and line.endswith(
            f"module checksum mismatch: stored 0x{stored:08x}, computed 0x{computed:08x} "
            "(the file is damaged)"), (at, line)
    line = driver.error("load", data[:-1])
    assert line.endswith("module checksum trailer is missing: the last 16 bytes do not start "
                         "with 'KILNCSUM' (the file is truncated or damaged)")
    unknown = data[:-8] + struct.pack("<I", 2)
    unknown += struct.pack("<I", zlib.crc32(unknown))
    assert driver.error("load", unknown).endswith(
        "module checksum trailer names unknown algorithm 2 (format 2.x uses 1, CRC-32: the "
        "file is damaged)")


@pytest.mark.parametrize("data, message", [
    (b"", "empty file"),
    (b"\x08\0\0\0NOPE\0\0\0\0", "file identifier is 'NOPE', expected 'KILN'"),
    (b"\x08\0\0\0KI", "too short"),
    (b"\x08\0\0\0KILN", "root offset outside the file"),
    (b"\xf0\0\0\0KILN\0\0\0\0", "corrupt module header"),
])
def test_not_a_module(driver, data, message):
    line = driver.error("load", data)
    assert message in line and "DATA_LOSS" in line


def test_missing_file(driver):
    proc = subprocess.run([str(driver.exe), "load", "/nonexistent/m.vmfb"],
                                        capture_output=True, text=True)
    assert proc.returncode == 1
    assert "error NOT_FOUND: cannot open module '/nonexistent/m.vmfb'" in proc.stdout


def test_foreign_target_is_rejected(driver, spec):
    spec.kernel_images[0].target_triple = "riscv64-unknown-linux-gnu"
    line = driver.error("load", serialize(spec))
    assert line.startswith("error UNIMPLEMENTED: ")
    assert "kernel image 0 (target 'riscv64-unknown-linux-gnu', features '') cannot run" in line


# ---- the verifier ----------------------------------------------------------------

def bad(spec, code, ref=8, i64=8, args=()):
    spec.functions.append(fn("bad", list(args), [], code, ref=ref, i64=i64, exported=False))
    return serialize(spec, check=False)


@pytest.mark.parametrize("code, message", [
    ([Instr("mov", 8, 0), Instr("ret", [])], "mov operand 'dst' names ref register r8, but only 8"),
    ([Instr("i.add", 0, 0, 9), Instr("ret", [])], "i.add operand 'b' names int register i9"),
    ([Instr("alloc", 0, 99), Instr("ret", [])], "alloc operand 't' names type 99"),
    ([Instr("const", 0, 1), Instr("ret", [])], "const operand 'c' names constant 1, but only 1"),
    ([Instr("global.load", 0, 2), Instr("ret", [])], "names global 2, but only 2"),
    ([Instr("dispatch", 3, 1, [], []), Instr("ret", [])], "names kernel 3, but only 1"),
    ([Instr("call", 40, [], []), Instr("ret", [])], "names function 40, but only 5"),
    ([Instr("ret", [0, 1, 2, 3, 4, 5, 6, 7, 8])], "names ref register r8"),
    ([Instr("br", 100)], "br target 100 is not the start of an instruction"),
    ([Instr("i.const", 0, 5), Instr("br.if", 0, 1, 0)], "br.if target 1 is not the start"),
    ([Instr("i.const", 0, 5)], "does not end in a terminator"),
    ([], "empty code"),
    ([Instr("call", 2, [], []), Instr("ret", [])],
     "call of 'bump' passes 0 arguments and takes 0 results, the callee has 1 and 1"),
    ([Instr("ret", [0])], "ret of 1 values, the function has 0 results"),
    ([Instr("dispatch", 0, 1, [0], []), Instr("ret", [])],
     "passes 1 bindings and 0 push constants, the kernel takes 3 and 2"),
    ([Instr("dispatch", 0, 0, [0, 0, 0], [0, 0]), Instr("ret", [])], "with 0 workgroups"),
    ([Instr("i.store", 0, 0, F4), Instr("ret", [])], "i.store type 0 has rank 1"),
    ([Instr("buffer.row", 0, 8, 0), Instr("ret", [])],
     "word 0: buffer.row operand 'src' names ref register r8, but only 8 exist"),
    ([Instr("buffer.row", 0, 1, 8), Instr("ret", [])],
     "buffer.row operand 'index' names int register i8, but only 8 exist"),
    ([Instr("buffer.set_row", 9, 0, 0), Instr("ret", [])],
     "buffer.set_row operand 'dst' names ref register r9"),
    ([Instr("buffer.set_row", 0, 12, 0), Instr("ret", [])],
     "buffer.set_row operand 'index' names int register i12"),
    ([Instr("buffer.set_row", 0, 0, 8), Instr("ret", [])],
     "buffer.set_row operand 'src' names ref register r8"),
])
def test_verifier_rejects(driver, spec, code, message):
    line = driver.error("load", bad(spec, code))
    assert line.startswith("error DATA_LOSS: ") and "function 'bad': " in line
    assert message in line


def patch_words(data: bytes, old: list[int], new: list[int]) -> bytes:
    raw_old = struct.pack(f"<{len(old)}I", *old)
    assert data.count(raw_old) == 1
    return data.replace(raw_old, struct.pack(f"<{len(new)}I", *new))


MARK = 0x5EED1234


def test_verifier_rejects_unknown_opcode(driver, spec):
    data = bad(spec, [Instr("i.const", 0, MARK), Instr("ret", [])])
    data = reseal(patch_words(data, [11, 0, MARK, 0], [99, 0, MARK, 0]))
    assert "word 0: unknown opcode 99" in driver.error("load", data)


def test_verifier_rejects_a_list_past_the_end(driver, spec):
    data = bad(spec, [Instr("i.const", 0, MARK), Instr("ret", [])])
    data = reseal(patch_words(data, [11, 0, MARK, 0, 7, 0], [11, 0, MARK, 0, 7, 1000]))
    assert "ret operand 'values' runs past the end of the code" in driver.error("load", data)


def test_verifier_bounds_workgroup_counts(driver, spec):
    """The audit's hang: a damaged `dispatch ..., 1` asking for 4278190081 workgroups."""
    spec.kernels[0].max_workgroups = 3
    line = driver.error("load", bad(spec, [Instr("dispatch", 0, 4278190081, [0, 0, 0], [0, 0]),
                                           Instr("ret", [])]))
    assert line.endswith("function 'bad': word 0: dispatch of kernel 'axpy' with 4278190081 "
                         "workgroups, the kernel allows at most 3")


def test_verifier_bounds_register_counts(driver, spec):
    line = driver.error("load", bad(spec, [Instr("ret", [])], ref=(1 << 20) + 1))
    assert "function 'bad': 1048577 ref and 8 i64 registers, at most 1048576 of each" in line


def test_names_must_be_utf8(driver, spec):
    spec.globals.append(GlobalSpec("zq_name", I64, True, None))
    data = bytearray(serialize(spec))
    at = data.index(b"zq_name")
    data[at + 2] = 0xFF
    line = driver.error("load", reseal(bytes(data)))
    assert line.endswith("global 2: name is not valid UTF-8 (byte 0xff at offset 2)")


def test_verifier_rejects_more_args_than_registers(driver, spec):
    line = driver.error("load", bad(spec, [Instr("ret", [])], ref=0, args=[("x", F4)]))
    assert "1 arguments but only 0 ref registers" in line


@pytest.mark.parametrize("mutate, message", [
    (lambda s: setattr(s.globals[0], "initial", np.zeros(3, np.float32)),
     "global 0 'w': initial data is 12 bytes, its type needs 16"),
    (lambda s: s.kernels.append(KernelSpec("k2", 5, 0, [], 0)),
     "kernel 1 'k2': image index 5 out of range (1 images)"),
    (lambda s: s.kernels.append(KernelSpec("k3", 0, 1 << 20, [], 0)),
     "kernel image 0: entry point 1 (0x100000) is outside its text (128 bytes)"),
    (lambda s: s.kernels.append(KernelSpec("k4", 0, 16, [], 0)) or
     setattr(s.kernel_images[0], "entry_points", [0]),
     "kernel 1 'k4': entry offset 0x10 is not one of the 1 entry points of image 0"),
    (lambda s: setattr(s.kernel_images[0], "entry_points", [0, 32, 16]),
     "kernel image 0: entry points are not strictly increasing (entry point 2 is 0x10, "
     "the one before it 0x20)"),
    (lambda s: setattr(s.kernels[0], "max_workgroups", 0),
     "kernel 0 'axpy': max_workgroups 0 is outside [1, 16777216]"),
    (lambda s: setattr(s.kernels[0], "max_workgroups", (1 << 24) + 1),
     "kernel 0 'axpy': max_workgroups 16777217 is outside [1, 16777216]"),
    (lambda s: setattr(s.kernel_images[0], "segment_align", 48), "not a power of two"),
    (lambda s: setattr(s.kernel_images[0], "relocs", [(1 << 30, 0)]), "relocation 0"),
    # Lookups by name must have one answer (the fuzzer's duplicate_names.vmfb).
    (lambda s: setattr(s.globals[1], "name", "w"),
     "global 0 and global 1 are both named 'w' (names must be unique)"),
    (lambda s: setattr(s.functions[3], "name", "predict"),
     "function 0 and function 3 are both named 'predict' (names must be unique)"),
    (lambda s: setattr(s.functions[2], "name", "step"),
     "function 1 and function 2 are both named 'step'"),
])
def test_loader_rejects_bad_tables(driver, spec, mutate, message):
    mutate(spec)
    line = driver.error("load", serialize(spec, check=False))
    assert "DATA_LOSS" in line and message in line


def test_c_and_python_disassembly_agree(driver, spec):
    """kiln_module_disassemble and kiln.vm.disassembler print the same text."""
    spec.functions.append(scan_fn(3, 4))
    row_kernel(spec, 4)
    data = serialize(spec)
    out = driver.load(data)
    m = ModuleFile(data)
    names = Names(types=m.types, globals=[g[0] for g in m.globals],
                  kernels=[k.name for k in m.kernels], functions=[f.name for f in m.functions])
    for f, words in zip(m.functions, m.code_words):
        text = disassemble(words, names)
        assert f"code {f.name}\n{text}\n" in out
    assert "; loop back-edge" in out and "; loop header (back-edge from" in out


def test_unused_global_types_survive(driver, spec):
    spec.globals.append(GlobalSpec("big", TensorType("f64", (3, 2)), True,
                                   np.arange(6, dtype=np.float64).reshape(3, 2)))
    out = driver.run(serialize(spec), "--get=big")
    assert out == ["global 3x2xf64=0,1,2,3,4,5"]


def test_binding_spec_and_label_types(spec):
    assert isinstance(spec.kernels[0].bindings[0], BindingSpec)
    assert any(isinstance(x, Label) for x in spec.functions[3].code)


# ---- corruption -----------------------------------------------------------------

@pytest.mark.parametrize("with_rows", [False, True])
def test_corrupt_modules_fail_cleanly(driver, spec, with_rows):
    """Every truncation and thousands of byte-flipped copies: load or error, never crash."""
    if with_rows:
        spec.functions.append(scan_fn(3, 4))
        row_kernel(spec, 4)
    proc = driver.raw("fuzz", serialize(spec))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["truncate", "flip", "scramble"]


# ---- damage, then calls: a module exported by kiln's own compiler -----------------------

def test_damaged_exported_module_fails_cleanly_when_called(driver, linear_example):
    """examples/linear.py exported by kiln; every truncation and every byte flipped
    (three masks) fails to load with the checksum error (or would have to give the
    undamaged results); the same flips and random scrambles with the checksum
    recomputed, outside kernel code, load or fail cleanly, and every exported
    function of each copy that loads is called with zero arguments: a clean error
    or a result, never a crash, a hang or a sanitizer report."""
    from kiln import Program
    data = Program.get_compiled_artifact(linear_example.Linear()).bytes
    proc = driver.raw("fuzz-invoke", data)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    stats = {}
    for line in proc.stdout.splitlines():
        what, counts = line.split(": ")
        stats[what] = dict((v, int(k)) for k, v in (c.split(" ", 1) for c in counts.split(", ")))
    assert stats["truncate"] == dict(stats["truncate"], loads=len(data), loaded=0)
    assert stats["flip"] == dict(stats["flip"], loads=3 * len(data), loaded=0)
    sealed = stats["sealed flip"]
    assert sealed["loaded"] > 100 and sealed["calls"] > 100 and sealed["call errors"] > 0
