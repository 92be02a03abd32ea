"""kiln-run (and the embedding example) on modules written by kiln.vm.writer:
running, printing, .npy/.npz I/O against numpy, benchmark mode, and every
error path (one line on stderr naming the problem, non-zero exit). When the
Makefile provides $KILN_SANITIZE_BUILD these run the ASan+UBSan binaries, so
a leak or an invalid access on any path fails the test too."""
import os
import re
import signal
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

from kiln.vm.runtime import numpy_dtype
from kiln.vm.writer import serialize
from runtime_tools import ALL_DTYPES, identity_spec, native_build_dir, run
from vm_native import build_kernel, host_triple
from kiln.vm.isa import Instr, Label
from kiln.vm.module_spec import FunctionSpec, ModuleSpec, TensorType, ValueInfo
from vm_specs import I64, axpy_spec, fn


@pytest.fixture(scope="module")
def build():
    return native_build_dir()


@pytest.fixture(scope="module")
def kiln_run(build):
    return build / "kiln-run"


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    d = tmp_path_factory.mktemp("modules")
    kernel = build_kernel(tmp_path_factory.mktemp("kernel"))
    (d / "axpy.vmfb").write_bytes(serialize(axpy_spec(kernel, host_triple())))
    (d / "ident.vmfb").write_bytes(serialize(identity_spec()))
    (d / "spin.vmfb").write_bytes(serialize(spin_spec()))
    return d


def spin_spec() -> ModuleSpec:
    """`spin()` loops forever; `count(n)` loops n times (4n + 7 instructions)."""
    spin, loop, body, done = Label("spin"), Label("loop"), Label("body"), Label("done")
    return ModuleSpec("spin", functions=[
        fn("spin", [], [], [spin, Instr("br", spin)]),
        fn("count", [("n", I64)], [("n", I64)], [
            Instr("i.load", 0, 0), Instr("i.const", 1, 0), Instr("i.const", 2, 1), loop,
            Instr("i.lt", 3, 1, 0), Instr("br.if", 3, body, done), body,
            Instr("i.add", 1, 1, 2), Instr("br", loop), done, Instr("i.store", 0, 1, I64),
            Instr("ret", [0])]),
    ])


def parse_printed(stdout: str) -> list[tuple[str, str]]:
    """[(type, values text)] from kiln-run's printed results."""
    blocks = re.split(r"^result\[\d+\]: (\S+)\n", stdout, flags=re.M)[1:]
    return [(blocks[i], blocks[i + 1]) for i in range(0, len(blocks), 2)]


def numbers(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)", text)]


def test_list(kiln_run, modules):
    out = run(kiln_run, f"--module={modules / 'axpy.vmfb'}", "--list").stdout
    assert out == ("module axpy\n"
                   "functions (3):\n"
                   "  predict(x: 4xf32) -> (4xf32)\n"
                   "  step() -> (i64)\n"
                   "  triangle(n: i64) -> (i64)\n"
                   "globals (2):\n"
                   "  w: 4xf32 (immutable)\n"
                   "  counter: i64 (mutable)\n")
    out = run(kiln_run, f"--module={modules / 'ident.vmfb'}", "--list").stdout
    assert "  pair(a: 4xf32, b: i32) -> (i32, 4xf32)\n" in out
    assert "  frozen: f32 (immutable)\n" in out


def test_run_prints_results(kiln_run, modules):
    m = f"--module={modules / 'axpy.vmfb'}"
    out = run(kiln_run, m, "--function=predict", "--input=4xf32=10,20.5,-30,0.125").stdout
    assert out == "result[0]: 4xf32\n[ 12.     24.5   -24.      8.125]\n"  # as numpy prints it
    x = np.array([10, 20.5, -30, 0.125], np.float32)
    ((typ, text),) = parse_printed(out)
    assert typ == "4xf32"
    np.testing.assert_array_equal(numbers(text), x + [2, 4, 6, 8])
    # a single value broadcasts; scalars are 0-d
    out = run(kiln_run, m, "--function=predict", "--input=4xf32=1").stdout
    assert out.endswith("[3. 5. 7. 9.]\n")
    out = run(kiln_run, m, "--function=triangle", "--input=i64=100").stdout
    assert out == "result[0]: i64\n5050\n"
    # "--flag value" works like "--flag=value"; --workers=1 is single-threaded
    out = run(kiln_run, "--module", str(modules / "axpy.vmfb"), "--function", "triangle",
              "--input", "i64=4", "--workers=1").stdout
    assert out == "result[0]: i64\n10\n"


def test_several_results_and_2d_printing(kiln_run, modules):
    m = f"--module={modules / 'ident.vmfb'}"
    out = run(kiln_run, m, "--function=pair", "--input=4xf32=1,2,3,4", "--input=i32=-3").stdout
    assert out == "result[0]: i32\n-3\nresult[1]: 4xf32\n[1. 2. 3. 4.]\n"
    out = run(kiln_run, m, "--function=ident_i32", "--input=2x3xi32=1,-2,3,40,5,6").stdout
    assert out == "result[0]: 2x3xi32\n[[ 1 -2  3]\n [40  5  6]]\n"
    out = run(kiln_run, m, "--function=ident_bool", "--input=2x3xbool=1,0,true,false,1,1").stdout
    assert out == "result[0]: 2x3xbool\n[[ True False  True]\n [False  True  True]]\n"


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_npy_in_and_out_for_every_dtype(kiln_run, modules, tmp_path, dtype):
    rng = np.random.default_rng(7)
    if dtype == "bool":
        x = rng.random((2, 3)) < 0.5
    elif dtype == "bf16":
        x = (rng.standard_normal((2, 3)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    elif np.issubdtype(numpy_dtype(dtype), np.floating):
        x = rng.standard_normal((2, 3)).astype(numpy_dtype(dtype))
    else:
        info = np.iinfo(numpy_dtype(dtype))
        x = rng.integers(info.min, info.max, (2, 3), endpoint=True, dtype=numpy_dtype(dtype))
    np.save(tmp_path / "x.npy", x)
    run(kiln_run, f"--module={modules / 'ident.vmfb'}", f"--function=ident_{dtype}",
        f"--input=@{tmp_path / 'x.npy'}", f"--output=@{tmp_path / 'y.npy'}")
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, x)


def test_ml_dtypes_bfloat16_npy_input(kiln_run, modules, tmp_path):
    """np.save of an ml_dtypes.bfloat16 array writes descr '<V2'; kiln-run reads it as bfloat16."""
    import ml_dtypes

    x = np.array([[1.5, -2.25, 3.0], [0.0, -0.0, 1e30]], np.float32).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x)
    assert b"'descr': '<V2'" in (tmp_path / "x.npy").read_bytes()[:64]
    run(kiln_run, f"--module={modules / 'ident.vmfb'}", "--function=ident_bf16",
        f"--input=@{tmp_path / 'x.npy'}", f"--output=@{tmp_path / 'y.npy'}")
    y = np.load(tmp_path / "y.npy")
    assert y.dtype == np.uint16
    np.testing.assert_array_equal(y.view(ml_dtypes.bfloat16), x)


def test_empty_arrays(kiln_run, modules, tmp_path):
    m = f"--module={modules / 'ident.vmfb'}"
    assert run(kiln_run, m, "--function=ident_empty", "--input=0x3xf32").stdout == \
        "result[0]: 0x3xf32\n[]\n"
    np.save(tmp_path / "e.npy", np.zeros((0, 3), np.float32))
    run(kiln_run, m, "--function=ident_empty", f"--input=@{tmp_path / 'e.npy'}",
        f"--output=@{tmp_path / 'o.npy'}")
    assert np.load(tmp_path / "o.npy").shape == (0, 3)


def test_npy_fortran_order_and_big_endian_inputs(kiln_run, modules, tmp_path):
    x = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.save(tmp_path / "f.npy", x)
    np.save(tmp_path / "b.npy", np.arange(6, dtype=">i4").reshape(2, 3))
    m = f"--module={modules / 'ident.vmfb'}"
    run(kiln_run, m, "--function=ident_f32", f"--input=@{tmp_path / 'f.npy'}",
        f"--output={tmp_path / 'fy.npy'}")
    np.testing.assert_array_equal(np.load(tmp_path / "fy.npy"), x)
    run(kiln_run, m, "--function=ident_i32", f"--input=@{tmp_path / 'b.npy'}",
        f"--output=@{tmp_path / 'by.npy'}")
    np.testing.assert_array_equal(np.load(tmp_path / "by.npy"), np.arange(6).reshape(2, 3))


def test_globals_npz_round_trip(kiln_run, modules, tmp_path):
    m = f"--module={modules / 'axpy.vmfb'}"
    out = tmp_path / "state.npz"
    assert run(kiln_run, m, "--function=step", f"--globals-out={out}").stdout.endswith("\n1\n")
    state = np.load(out)
    assert sorted(state.files) == ["counter", "w"]
    assert state["counter"].dtype == np.int64 and int(state["counter"]) == 1
    np.testing.assert_array_equal(state["w"], [1, 2, 3, 4])
    # state written by kiln-run feeds the next run; numpy.savez state too
    assert run(kiln_run, m, "--function=step", f"--globals-in={out}",
               f"--globals-out={out}").stdout.endswith("\n2\n")
    np.savez(tmp_path / "np.npz", counter=np.int64(41), w=np.array([0, 0, 0, 1], np.float32))
    printed = run(kiln_run, m, "--function=predict", "--input=4xf32=0",
                  f"--globals-in={tmp_path / 'np.npz'}").stdout
    assert printed.endswith("[0. 0. 0. 2.]\n")
    assert run(kiln_run, m, "--function=step",
               f"--globals-in={tmp_path / 'np.npz'}").stdout.endswith("\n42\n")
    # globals alone (no function): dump the initial state
    run(kiln_run, m, f"--globals-out={tmp_path / 'init.npz'}")
    assert int(np.load(tmp_path / "init.npz")["counter"]) == 0
    # a subset of globals only with --globals-partial (the others keep their values)
    np.savez(tmp_path / "part.npz", counter=np.int64(9))
    assert run(kiln_run, m, "--function=step", "--globals-partial",
               f"--globals-in={tmp_path / 'part.npz'}").stdout.endswith("\n10\n")
    # our .npz is a plain stored zip that zipfile accepts
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}


def test_every_dtype_through_globals(kiln_run, modules, tmp_path):
    m = f"--module={modules / 'ident.vmfb'}"
    run(kiln_run, m, f"--globals-out={tmp_path / 'a.npz'}")
    state = dict(np.load(tmp_path / "a.npz"))
    assert set(state) == {*(f"g_{d}" for d in ALL_DTYPES), "frozen"}
    state = {k: (v + 1 if v.dtype != np.bool_ else ~v) for k, v in state.items()}
    np.savez(tmp_path / "b.npz", **state)
    run(kiln_run, m, f"--globals-in={tmp_path / 'b.npz'}", f"--globals-out={tmp_path / 'c.npz'}")
    back = np.load(tmp_path / "c.npz")
    for k, v in state.items():
        np.testing.assert_array_equal(back[k], v, err_msg=k)


def test_version_names_the_runtime_and_the_module_format(kiln_run):
    import tomllib

    from kiln.vm._generated.constants import FORMAT_VERSION

    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml"), "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    proc = run(kiln_run, "--version")
    assert proc.stdout == f"kiln-run {version} (module format {FORMAT_VERSION[0]}.{FORMAT_VERSION[1]})\n"
    assert proc.stderr == ""


def test_npz_inputs_each_array_in_order_or_one_by_name(kiln_run, modules, tmp_path):
    m = f"--module={modules / 'ident.vmfb'}"
    a, b = np.array([1.5, -2, 3, 4], np.float32), np.int32(-7)
    np.savez(tmp_path / "ab.npz", first=a, second=b)  # the archive's order, not the names', decides
    assert run(kiln_run, m, "--function=pair", f"--input=@{tmp_path / 'ab.npz'}").stdout == \
        "result[0]: i32\n-7\nresult[1]: 4xf32\n[ 1.5 -2.   3.   4. ]\n"
    np.savez(tmp_path / "ba.npz", b=b, a=a)
    out = run(kiln_run, m, "--function=pair", f"--input=@{tmp_path / 'ba.npz'}:a",
              f"--input=@{tmp_path / 'ba.npz'}:b").stdout
    assert out == "result[0]: i32\n-7\nresult[1]: 4xf32\n[ 1.5 -2.   3.   4. ]\n"
    # an archive mixes with other inputs; an archive of one array is one argument
    np.savez(tmp_path / "one.npz", a)
    out = run(kiln_run, m, "--function=pair", f"--input=@{tmp_path / 'one.npz'}", "--input=i32=5").stdout
    assert out.startswith("result[0]: i32\n5\n")
    # every dtype: load_all's results (an .npz named by the module's result names) feed store_all
    rng = np.random.default_rng(3)
    values = {}
    for d in ALL_DTYPES:
        dt = np.uint16 if d == "bf16" else numpy_dtype(d)
        values[f"v_{d}"] = (rng.random((2, 3)) < 0.5 if d == "bool" else
                            rng.integers(0, 100, (2, 3)).astype(dt))
    np.savez(tmp_path / "all.npz", **values)
    run(kiln_run, m, "--function=store_all", f"--input=@{tmp_path / 'all.npz'}",
        f"--globals-out={tmp_path / 'g.npz'}")
    run(kiln_run, m, "--function=load_all", f"--globals-in={tmp_path / 'g.npz'}",
        f"--output=@{tmp_path / 'out.npz'}")
    out = np.load(tmp_path / "out.npz")
    assert out.files == [f"g_{d}" for d in ALL_DTYPES]
    for d in ALL_DTYPES:
        assert out[f"g_{d}"].dtype == values[f"v_{d}"].dtype
        np.testing.assert_array_equal(out[f"g_{d}"], values[f"v_{d}"], err_msg=d)


def test_npz_output_holds_every_result(kiln_run, modules, tmp_path):
    m = f"--module={modules / 'ident.vmfb'}"
    run(kiln_run, m, "--function=pair", "--input=4xf32=1,2,3,4", "--input=i32=9",
        f"--output=@{tmp_path / 'y.npz'}")
    with np.load(tmp_path / "y.npz") as y:
        assert y.files == ["b", "a"]  # the module's result names
        assert y["b"].dtype == np.int32 and int(y["b"]) == 9
        np.testing.assert_array_equal(y["a"], np.arange(1, 5, dtype=np.float32))
    with zipfile.ZipFile(tmp_path / "y.npz") as z:
        assert z.testzip() is None
    # results without a name are result0, result1, ...
    t = TensorType("f32", (2,))
    spec = ModuleSpec("unnamed", functions=[FunctionSpec(
        "two", True, [ValueInfo("x", t)], [ValueInfo("", t), ValueInfo("", t)], "[]", "[]", 2, 0,
        [Instr("ret", [0, 0])])])
    (tmp_path / "unnamed.vmfb").write_bytes(serialize(spec))
    proc = run(kiln_run, f"--module={tmp_path / 'unnamed.vmfb'}", "--function=two",
               "--input=2xf32=3,4", f"--output=@{tmp_path / 'two.npz'}")
    assert proc.stdout == ""
    with np.load(tmp_path / "two.npz") as y:
        assert y.files == ["result0", "result1"]
        np.testing.assert_array_equal(y["result1"], [3, 4])


def test_expected_output_compares_like_iree_run_module(kiln_run, modules, tmp_path):
    m = (f"--module={modules / 'ident.vmfb'}", "--function=pair", "--input=4xf32=1,2,3,4", "--input=i32=9")
    proc = run(kiln_run, *m, "--expected_output=i32=9", "--expected_output=4xf32=1,2,3,4.00009")
    assert proc.stdout == "2 results matched the expected outputs\n" and proc.stderr == ""
    proc = run(kiln_run, *m, "--expected_output=(ignored)", "--expected_output=4xf32=[1, 2, 3, 4]")
    assert proc.stdout == "1 result matched the expected output (1 ignored)\n"
    # beyond the default f32 threshold (1e-4), and within a given one ("0.01f" as IREE writes it)
    proc = run(kiln_run, *m, "--expected_output=i32=9", "--expected_output=4xf32=1,2,3.001,4", check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == ("kiln-run: error: function 'pair' result 1 'a' does not match (--expected_output 2): "
                           "element [2] (the first that differs): got 3.0, expected 3.001 "
                           "(difference 0.001 > the f32 threshold 0.0001)\n")
    run(kiln_run, *m, "--expected_output=i32=9", "--expected_output=4xf32=1,2,3.001,4",
        "--expected_f32_threshold=0.01f")
    # every result that differs gets its line
    proc = run(kiln_run, *m, "--expected_output=i32=8", "--expected_output=4xf32=1,2,3,5", check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "kiln-run: error: function 'pair' result 0 'b' does not match (--expected_output 1): "
        "element [] (the first that differs): got 9, expected 8",
        "kiln-run: error: function 'pair' result 1 'a' does not match (--expected_output 2): "
        "element [3] (the first that differs): got 4.0, expected 5.0 (difference 1 > the f32 threshold 0.0001)"]
    # expected values from .npy and .npz files (each array, or one by name), checked with --output written too
    np.savez(tmp_path / "want.npz", b=np.int32(9), a=np.array([1, 2, 3, 4], np.float32))
    np.save(tmp_path / "a.npy", np.array([1, 2, 3, 4], np.float32))
    run(kiln_run, *m, f"--expected_output=@{tmp_path / 'want.npz'}")
    run(kiln_run, *m, f"--expected_output=@{tmp_path / 'want.npz'}:b", f"--expected_output=@{tmp_path / 'a.npy'}",
        f"--output=@{tmp_path / 'got.npz'}")
    assert np.load(tmp_path / "got.npz").files == ["b", "a"]
    # NaN matches NaN; f64 and f16 have their own thresholds; bf16 expected from its raw bits (.npy)
    i = (f"--module={modules / 'ident.vmfb'}",)
    run(kiln_run, *i, "--function=ident_f64", "--input=2x3xf64=nan,1,2,3,4,inf",
        "--expected_output=2x3xf64=nan,1,2,3,4.00001,inf")
    proc = run(kiln_run, *i, "--function=ident_f64", "--input=2x3xf64=nan,1,2,3,4,inf",
               "--expected_output=2x3xf64=nan,1,2,3,4.001,inf", check=False)
    assert proc.returncode == 1 and "element [1, 1] (the first that differs)" in proc.stderr
    run(kiln_run, *i, "--function=ident_f64", "--input=2x3xf64=nan,1,2,3,4,inf",
        "--expected_output=2x3xf64=nan,1,2,3,4.001,inf", "--expected_f64_threshold=0.01")
    run(kiln_run, *i, "--function=ident_f16", "--input=2x3xf16=1", "--expected_output=2x3xf16=1.0009765625")
    proc = run(kiln_run, *i, "--function=ident_f16", "--input=2x3xf16=1",
               "--expected_output=2x3xf16=1.001953125", check=False)
    assert proc.returncode == 1 and "the f16 threshold 0.001" in proc.stderr
    run(kiln_run, *i, "--function=ident_f16", "--input=2x3xf16=1", "--expected_output=2x3xf16=1.001953125",
        "--expected_f16_threshold=0.002")
    np.save(tmp_path / "bf.npy", np.full((2, 3), 0x3F80, np.uint16))  # bfloat16 1.0
    run(kiln_run, *i, "--function=ident_bf16", "--input=2x3xbf16=1", f"--expected_output=@{tmp_path / 'bf.npy'}")
    # integers exactly, whatever the thresholds
    proc = run(kiln_run, *i, "--function=ident_i64", "--input=2x3xi64=5", "--expected_output=2x3xi64=5,5,5,5,5,6",
               "--expected_f32_threshold=10", "--expected_f64_threshold=10", check=False)
    assert proc.returncode == 1 and "element [1, 2] (the first that differs): got 5, expected 6" in proc.stderr
    # with --benchmark the last call's results are compared
    proc = run(kiln_run, *m, "--benchmark=3", "--expected_output=i32=9", "--expected_output=4xf32=1,2,3,4")
    assert proc.stdout.startswith("benchmark: pair: 3 calls")
    assert proc.stdout.endswith("\n2 results matched the expected outputs\n")


_TIME = r"[\d.]+ (us|ms|s)"


def test_benchmark(kiln_run, modules):
    out = run(kiln_run, f"--module={modules / 'axpy.vmfb'}", "--function=predict",
              "--input=4xf32=1", "--benchmark=50").stdout
    assert re.fullmatch(rf"benchmark: predict: 50 calls after 1 warm-up, median {_TIME}, mean {_TIME}, "
                        rf"min {_TIME}, max {_TIME}, stddev {_TIME} per call; [\d.]+ page faults per call\n",
                        out), out


def test_benchmark_json_statistics_are_consistent(kiln_run, modules):
    import json

    out = run(kiln_run, f"--module={modules / 'axpy.vmfb'}", "--function=predict", "--input=4xf32=1",
              "--benchmark=9", "--warmup=3", "--benchmark_format=json").stdout
    stats = json.loads(out)
    assert stats["function"] == "predict" and stats["calls"] == 9 and stats["warmup"] == 3
    assert 0 < stats["min_s"] <= stats["median_s"] <= stats["max_s"]
    assert stats["min_s"] <= stats["mean_s"] <= stats["max_s"] and stats["stddev_s"] >= 0
    assert stats["page_faults_per_call"] >= 0
    single = json.loads(run(kiln_run, f"--module={modules / 'axpy.vmfb'}", "--function=predict",
                            "--input=4xf32=1", "--benchmark=1", "--warmup=0",
                            "--benchmark_format=json").stdout)
    assert single["stddev_s"] == 0 and single["min_s"] == single["median_s"] == single["max_s"]


def test_help(kiln_run):
    out = run(kiln_run, "--help").stdout
    assert "--module=PATH" in out and "--globals-in" in out and "--benchmark" in out
    assert "--disassemble" in out


def test_disassemble_prints_the_runtime_decoders_text(kiln_run, modules):
    """kiln-run --disassemble: every function (internal ones too) through the C
    decoder the verifier and interpreter use, with labels and back-edges."""
    out = run(kiln_run, f"--module={modules / 'axpy.vmfb'}", "--disassemble").stdout
    assert out.startswith("module axpy\nexport func#0 predict(x: 4xf32) -> (4xf32)\n"
                          "  registers: 8 ref, 8 i64; transient memory: 0 bytes\n"
                          "      0  global.load r1, global(w)\n")
    assert "internal func#2 bump(c: i64) -> (i64)\n" in out
    assert ("export func#3 triangle(n: i64) -> (i64)\n"
            "  registers: 8 ref, 8 i64; transient memory: 0 bytes\n"
            "      0  i.load i0, r0\n"
            "      3  i.const i1, 0\n"
            "      7  i.const i2, 1\n"
            "     11  i.const i4, 0\n"
            "  L15:   ; loop header (back-edge from 31)\n"
            "     15  i.lt i3, i4, i0\n"
            "     19  br.if i3, @L23, @L33\n"
            "  L23:\n"
            "     23  i.add i1, i1, i0\n"
            "     27  i.sub i0, i0, i2\n"
            "     31  br @L15   ; loop back-edge\n"
            "  L33:\n"
            "     33  i.store r1, i1, i64\n"
            "     37  ret [r1]\n") in out
    both = run(kiln_run, f"--module={modules / 'axpy.vmfb'}", "--list", "--disassemble").stdout
    assert both.startswith("module axpy\nfunctions (3):") and "br @L15   ; loop back-edge" in both


def test_names_from_a_module_are_printed_escaped(kiln_run, tmp_path):
    """Control characters in a module's names (valid UTF-8, so the loader takes
    them) never reach the terminal raw; other UTF-8 is printed as it is."""
    spec = identity_spec()
    spec.name = "id\x1b[31m"
    spec.globals[0].name = "g\u00e9\x07"
    spec.functions[0].args[0].name = "x\ny"
    path = tmp_path / "names.vmfb"
    path.write_bytes(serialize(spec))
    out = run(kiln_run, f"--module={path}", "--list").stdout
    assert "\x1b" not in out and "\x07" not in out
    assert out.startswith("module id\\x1b[31m\n")
    assert "  ident_f32(x\\x0ay: 2x3xf32) -> (2x3xf32)\n" in out
    assert "  g\u00e9\\x07: 2x3xf32 (mutable)\n" in out
    err = run(kiln_run, f"--module={path}", "--function=nope", check=False).stderr
    assert err.count("\n") == 1 and "\x1b" not in err and "module 'id\\x1b[31m'" in err


ERRORS = [
    (["--function=nope"], ["no function 'nope'", "predict, step, triangle"]),
    (["--function=predict"], ["'predict' expects 1 input, got 0", "predict(x: 4xf32)"]),
    (["--function=predict", "--input=4xf32=1", "--input=f32=1"], ["expects 1 input, got 2"]),
    (["--function=predict", "--input=3xf32=1"],
     ["'predict' argument 0 'x'", "expected 4xf32, got 3xf32"]),
    (["--function=predict", "--input=4xf64=1"], ["argument 0 'x'", "expected 4xf32, got 4xf64"]),
    (["--function=predict", "--input=4xf32=1,2"],
     ["argument 0 'x'", "expected 4 (or 1 to broadcast), got 2"]),
    (["--function=predict", "--input=4xf32=1,x,3,4"], ["value 1 'x' is not a number"]),
    (["--function=predict", "--input=4xq32=1"], ["unknown dtype 'q32'"]),
    (["--function=predict", "--input=@missing.npy"], ["missing.npy", "No such file"]),
    (["--function=predict", "--input=@x3.npy"], ["argument 0 'x'", "expected 4xf32, got 3xf32"]),
    (["--function=predict", "--input=@broken.npy"], ["broken.npy", "not a valid .npy"]),
    (["--function=predict", "--input=1000000000x1000000000xf32=1"],
     ["expected 4xf32, got 1000000000x1000000000xf32"]),
    (["--function=step", "--output=@a.npy", "--output=@b.npy"],
     ["'step' has 1 result, got 2 --output"]),
    (["--function=step", "--globals-in=bad_name.npz"], ["no global 'nope'"]),
    (["--function=step", "--globals-in=bad_type.npz"], ["global 'counter'", "expected i64, got i32"]),
    (["--function=step", "--globals-in=compressed.npz"], ["'counter.npy' is compressed"]),
    (["--function=step", "--globals-in=missing.npz"], ["missing.npz"]),
    (["--function=step", "--globals-in=part.npz"],
     ["--globals-in", "part.npz' lacks 1 of the 2 globals of module 'axpy': 'w'",
      "--globals-partial"]),
    (["--function=step", "--globals-partial"], ["--globals-partial needs --globals-in"]),
    (["--function=step", "--output=@no/such/dir/y.npy"], ["--output 1", "no/such/dir/y.npy"]),
    (["--bogus"], ["unknown argument '--bogus'"]),
    (["--workers=x", "--list"], ["--workers expects an integer", "got 'x'"]),
    (["--benchmark=0", "--function=step"], ["--benchmark expects an integer"]),
    (["--function=step", "--warmup=2"], ["--warmup and --benchmark_format need --benchmark=N"]),
    (["--function=step", "--benchmark=2", "--warmup=-1"], ["--warmup expects an integer"]),
    (["--function=step", "--benchmark=2", "--benchmark_format=xml"],
     ["--benchmark_format expects text or json, got 'xml'"]),
    (["--input=f32=1", "--list"], ["need --function"]),
    (["stray"], ["unknown argument 'stray'"]),
    (["--function"], ["--function needs a value"]),
    (["--function=step", "--timeout=0"], ["--timeout expects a number of seconds", "'0'"]),
    (["--function=step", "--timeout=soon"], ["--timeout expects a number of seconds"]),
    (["--function=step", "--timeout=nan"], ["--timeout expects a number of seconds"]),
    (["--function=step", "--max-steps=0"], ["--max-steps expects an integer"]),
    (["--timeout=1", "--list"], ["--trace and --print_statistics need --function=NAME"]),
    (["--function=predict", "--input=@two.npz"],
     ["'predict' expects 1 input, got 2 values from 1 --input", "predict(x: 4xf32)"]),
    (["--function=predict", "--input=@two.npz:c"],
     ["--input 1", "two.npz' has no array 'c' (arrays: 'a', 'b')"]),
    (["--function=predict", "--input=@fake.npz:a"],
     ["--input 1", "fake.npz' is not a .npz archive, so it has no array 'a'"]),
    (["--function=predict", "--input=@x3.npy:a"], ["--input 1", "cannot open 'x3.npy:a'"]),  # names follow .npz:
    (["--function=predict", "--input=@two.npz:b"],
     ["'predict' argument 0 'x': expected 4xf32, got 3xf32 (--input 1, array 'b')"]),
    (["--function=predict", "--input=@missing.npz"], ["--input 1", "missing.npz"]),
    (["--function=predict", "--input=@"], ["--input 1", "'@' must be followed by a .npy file path"]),
    (["--function=predict", "--input=4xf32=1", "--output=@a.npz", "--output=@b.npy"],
     ["--output=@a.npz: a .npz output holds every result, so it must be the only --output"]),
    (["--function=predict", "--input=4xf32=1", "--output=@no/such/dir/y.npz"], ["--output 1", "no/such/dir/y.npz"]),
    (["--function=predict", "--input=4xf32=1", "--expected_output=4xf32=1", "--expected_output=f32=1"],
     ["'predict' has 1 result, got 2 --expected_output (give one per result; signature: predict(x: 4xf32)"]),
    (["--function=predict", "--input=4xf32=1", "--expected_output=@two.npz"],
     ["'predict' has 1 result, got 2 values from 1 --expected_output"]),
    (["--function=predict", "--input=4xf32=1", "--expected_output=3xf32=1"],
     ["'predict' result 0 'y': expected 4xf32, got 3xf32 (--expected_output 1)"]),
    (["--function=predict", "--input=4xf32=1", "--expected_output=@x3.npy"],
     ["'predict' result 0 'y': expected 4xf32, got 3xf32 (--expected_output 1)"]),
    (["--function=predict", "--input=4xf32=1", "--expected_output=4xf32=1,2"],
     ["'predict' result 0 'y' (--expected_output 1)", "expected 4 (or 1 to broadcast), got 2"]),
    (["--function=predict", "--input=4xf32=1", "--expected_output=@missing.npy"],
     ["--expected_output 1", "missing.npy"]),
    (["--function=predict", "--input=4xf32=1", "--expected_output=4xf32=3,6,7,9"],
     ["'predict' result 0 'y' does not match (--expected_output 1): element [1] (the first that differs): "
      "got 5.0, expected 6.0 (difference 1 > the f32 threshold 0.0001)"]),
    (["--function=predict", "--input=4xf32=1", "--expected_f32_threshold=0.1"],
     ["--expected_f16_threshold, --expected_f32_threshold and --expected_f64_threshold need "
      "--expected_output=VALUE"]),
    (["--function=predict", "--expected_output=4xf32=1", "--expected_f32_threshold=-1"],
     ["--expected_f32_threshold expects a non-negative number, got '-1'"]),
    (["--function=predict", "--expected_output=4xf32=1", "--expected_f16_threshold=x"],
     ["--expected_f16_threshold expects a non-negative number, got 'x'"]),
    (["--function=predict", "--expected_output=4xf32=1", "--expected_f64_threshold=inf"],
     ["--expected_f64_threshold expects a non-negative number, got 'inf'"]),
    (["--expected_output=f32=1", "--list"], ["--expected_output", "need --function"]),
]


@pytest.mark.parametrize("args, fragments", ERRORS, ids=[" ".join(a) for a, _ in ERRORS])
def test_errors_are_one_line(kiln_run, modules, tmp_path, args, fragments):
    np.savez(tmp_path / "bad_name.npz", nope=np.int64(1))
    np.savez(tmp_path / "bad_type.npz", counter=np.int32(1))
    np.savez(tmp_path / "part.npz", counter=np.int64(1))
    np.savez_compressed(tmp_path / "compressed.npz", counter=np.int64(1))
    np.save(tmp_path / "x3.npy", np.zeros(3, np.float32))
    np.savez(tmp_path / "two.npz", a=np.zeros(4, np.float32), b=np.zeros(3, np.float32))
    (tmp_path / "fake.npz").write_bytes((tmp_path / "x3.npy").read_bytes())
    (tmp_path / "broken.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': '<f4',")
    proc = run(kiln_run, f"--module={modules / 'axpy.vmfb'}", *args, check=False, cwd=tmp_path)
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln-run: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert proc.stdout == ""


@pytest.mark.parametrize("setup, fragment", [
    (lambda d, m: None, "missing.vmfb"),
    (lambda d, m: (d / "missing.vmfb").write_bytes(b"garbage!" * 4), "not a kiln module"),
    (lambda d, m: (d / "missing.vmfb").write_bytes((m / "axpy.vmfb").read_bytes()[:300]), ""),
])
def test_bad_module_files(kiln_run, modules, tmp_path, setup, fragment):
    setup(tmp_path, modules)
    proc = run(kiln_run, f"--module={tmp_path / 'missing.vmfb'}", "--list", check=False)
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln-run: error: ") and fragment in lines[0]


def test_timeout_and_step_limit_stop_an_endless_loop(kiln_run, modules):
    m = f"--module={modules / 'spin.vmfb'}"
    proc = run(kiln_run, m, "--function=spin", "--timeout=0.2", check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("kiln-run: error: in function 'spin' at word 0 (br): call "
                                  "ran past its timeout of 0.200 s before a backward branch")
    assert proc.stderr.count("\n") == 1
    proc = run(kiln_run, m, "--function=spin", "--max-steps=1000", check=False)
    assert proc.returncode == 1
    assert "call ran past its limit of 1000 bytecode instructions" in proc.stderr
    # The budget is exact: count(n) takes 4n + 7 instructions.
    out = run(kiln_run, m, "--function=count", "--input=i64=50", "--max-steps=207").stdout
    assert out == "result[0]: i64\n50\n"
    proc = run(kiln_run, m, "--function=count", "--input=i64=50", "--max-steps=206",
               check=False)
    assert proc.returncode == 1 and "limit of 206 bytecode instructions" in proc.stderr
    # Each call of a benchmark gets the whole timeout.
    out = run(kiln_run, m, "--function=count", "--input=i64=1000", "--benchmark=5",
              "--timeout=30").stdout
    assert out.startswith("benchmark: count: 5 calls")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_cancels_the_running_call(kiln_run, modules, sig):
    proc = subprocess.Popen([str(kiln_run), f"--module={modules / 'spin.vmfb'}",
                             "--function=spin"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert proc.poll() is None  # it really loops
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig
    assert err.startswith("kiln-run: error: in function 'spin' at word 0 (br): call "
                          "cancelled before a backward branch")
    assert err.count("\n") == 1 and out == ""


def test_usage_errors(kiln_run):
    proc = run(kiln_run, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("kiln-run: error: no module")
    proc = run(kiln_run, "--module=x.vmfb", check=False)
    assert proc.returncode == 2 and "nothing to do" in proc.stderr


def test_console_entry_execs_native(kiln_run, modules):
    env = dict(os.environ, KILN_RUN=str(kiln_run))
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from kiln.vm._native import kiln_run_main; "
         "sys.argv[0] = 'kiln-run'; kiln_run_main()", f"--module={modules / 'axpy.vmfb'}",
         "--function=triangle", "--input=i64=3"],
        capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "result[0]: i64\n6\n"
    env["KILN_RUN"] = "/nonexistent/kiln-run"
    proc = subprocess.run([sys.executable, "-c", "from kiln.vm._native import kiln_run_main; "
                           "kiln_run_main()"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1 and proc.stderr.startswith("kiln-run: error: KILN_RUN=")


def test_embedding_example(build, modules):
    exe = build / "kiln-embed-example"
    out = run(exe, str(modules / "axpy.vmfb"), "predict").stdout
    assert out == "result 0 y: f32[4]\n[3. 5. 7. 9.]\n"  # ones + 2 * w
    out = run(exe, str(modules / "axpy.vmfb"), "predict", "4xf32=1,2,3,4").stdout
    assert out.endswith("[ 3.  6.  9. 12.]\n")
    out = run(exe, str(modules / "ident.vmfb"), "pair").stdout
    assert out == "result 0 b: i32[]\n1\nresult 1 a: f32[4]\n[1. 1. 1. 1.]\n"
    proc = run(exe, str(modules / "axpy.vmfb"), "nope", check=False)
    assert proc.returncode == 1 and "no exported function 'nope'" in proc.stderr
    proc = run(exe, str(modules / "axpy.vmfb"), "predict", "3xf32=1", check=False)
    assert proc.returncode == 1 and "expects 4xf32, got 3xf32" in proc.stderr
    proc = run(exe, check=False)
    assert proc.returncode == 2 and "usage" in proc.stderr


@pytest.fixture(scope="module")
def compiled_module(tmp_path_factory):
    """A Program compiled by kiln's own compiler: native kernels with
    relocations, dispatched over several workgroups."""
    import kiln.numpy as knp
    from kiln import Program

    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 32)).astype(np.float32) / 8
    b = rng.standard_normal((32,)).astype(np.float32)

    class Dense(Program, export_name="dense"):
        _w = w
        _b = b

        def predict(self, x=Program.like(np.zeros((256, 64), np.float32))):
            return self._layer(x, self._w, self._b)

        def set_bias(self, b=Program.like(b)):
            self._b = b

        @Program.kernel
        def _layer(x, w, b):
            return knp.tanh(x @ w + b)

    path = tmp_path_factory.mktemp("compiled") / "dense.vmfb"
    Program.get_compiled_artifact(Dense()).save(str(path))
    return path, w, b


def test_compiled_kernels_across_worker_counts(kiln_run, compiled_module, tmp_path, build):
    path, w, b = compiled_module
    x = np.random.default_rng(4).standard_normal((256, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    expected = np.tanh(x @ w + b)
    outputs = []
    for workers in (1, 2, 5):
        out = tmp_path / f"y{workers}.npy"
        run(kiln_run, f"--module={path}", "--function=predict", f"--input=@{tmp_path / 'x.npy'}",
            f"--output=@{out}", f"--workers={workers}")
        outputs.append(np.load(out))
        np.testing.assert_allclose(outputs[-1], expected, rtol=1e-5, atol=1e-5)
    for y in outputs[1:]:
        np.testing.assert_array_equal(y, outputs[0])  # the split never changes results
    # state through .npz: a new bias from numpy changes the results accordingly
    np.savez(tmp_path / "state.npz", _b=np.zeros(32, np.float32))
    run(kiln_run, f"--module={path}", "--function=predict", f"--input=@{tmp_path / 'x.npy'}",
        f"--output=@{tmp_path / 'z.npy'}", f"--globals-in={tmp_path / 'state.npz'}",
        "--globals-partial")
    np.testing.assert_allclose(np.load(tmp_path / "z.npy"), np.tanh(x @ w), rtol=1e-5, atol=1e-5)
    # the embedding example runs it too (ones as input)
    printed = run(build / "kiln-embed-example", str(path), "predict").stdout
    assert printed.startswith("result 0")
    # and the binding
    from kiln.vm.runtime import Context, Instance, Module

    module = Module.from_file(Instance(worker_count=3), path)
    (y,) = Context(module).invoke("predict", [x])
    np.testing.assert_array_equal(y, outputs[0])


PRINT_CASES = [
    np.arange(30, dtype=np.float32),
    np.arange(100, dtype=np.int32).reshape(4, 25),
    np.linspace(-1, 1, 40).astype(np.float32),
    np.arange(2000, dtype=np.int32),
    np.arange(3000, dtype=np.float32).reshape(30, 100),
    np.arange(2400, dtype=np.int64).reshape(4, 20, 30),
    (np.arange(24) % 3 == 0).reshape(2, 3, 4),
    np.arange(1200, dtype=np.float64).reshape(10, 10, 12) / 7,
    np.array([0.1, 65504], np.float16),
    np.array([np.nan, 1.5, -np.inf], np.float32),
    np.array([np.nan, 1e-6, 3]),
    np.zeros((2, 3), np.float32),
    np.array([1e100, 1.0, -1e-5]),
    np.array([-0.0, 0.5], np.float32),
    np.array([3.14159265358979, -2.5e-3, 100.0]),
    np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32),
    np.random.default_rng(1).standard_normal((3, 40)),
    np.array([0.1 + 0.2, 1 / 3]),
    np.array([123456789.0, 1.0], np.float32),
    np.array([255, 0], np.uint8),
    np.array([-128, 127], np.int8),
]


@pytest.mark.parametrize("case", range(len(PRINT_CASES)))
def test_printing_matches_numpy(kiln_run, tmp_path, case):
    """kiln-run prints arrays exactly as numpy's str() does (line wrapping,
    summarization, positional vs scientific notation, alignment)."""
    from kiln.vm.isa import Instr
    from kiln.vm.module_spec import (FunctionSpec, ModuleSpec, TensorType, ValueInfo,
                                     dtype_of)

    a = PRINT_CASES[case]
    t = TensorType(dtype_of(a), a.shape)
    spec = ModuleSpec("p", functions=[FunctionSpec("f", True, [ValueInfo("x", t)],
                                                   [ValueInfo("y", t)], "[]", "[]", 1, 0,
                                                   [Instr("ret", [0])])])
    (tmp_path / "p.vmfb").write_bytes(serialize(spec))
    np.save(tmp_path / "a.npy", a)
    out = run(kiln_run, f"--module={tmp_path / 'p.vmfb'}", "--function=f",
              f"--input=@{tmp_path / 'a.npy'}").stdout
    header, values = out.split("\n", 1)
    assert header == f"result[0]: {t}"
    assert values == str(a) + "\n"


def test_trace_and_kernel_statistics(kiln_run, tmp_path):
    """--trace writes Chrome trace-event JSON with every call and dispatch of the timed calls (not the
    warm-up); --print_statistics tables each kernel with its share and bandwidth."""
    import json

    import kiln.numpy as knp
    from kiln import Program

    x = np.ones((8, 16), np.float32)

    class Softmax(Program, export_name="traced"):
        def run(self, x=Program.like(x)):
            e = knp.exp(x - knp.max(x, axis=1, keepdims=True))
            return e / knp.sum(e, axis=1, keepdims=True)

    path = tmp_path / "m.vmfb"
    Program.get_compiled_artifact(Softmax).save(path)
    trace = tmp_path / "trace.json"
    out = run(kiln_run, f"--module={path}", "--function=run", "--input=8x16xf32=1", "--benchmark=3",
              f"--trace={trace}", "--print_statistics").stdout
    events = json.loads(trace.read_text())["traceEvents"]
    calls = [e for e in events if e.get("cat") == "call"]
    dispatches = [e for e in events if e.get("cat") == "dispatch"]
    assert len(calls) == 3 and all(e["name"] == "run" and e["ph"] == "X" and e["dur"] > 0 for e in calls)
    assert dispatches and len(dispatches) % 3 == 0
    assert all(e["args"]["module"] == "traced" and e["args"]["bytes"] > 0 and e["args"]["workgroups"] >= 1
               for e in dispatches)
    for d in dispatches:  # each dispatch lies inside a call on its thread
        assert any(c["tid"] == d["tid"] and c["ts"] <= d["ts"] and d["ts"] + d["dur"] <= c["ts"] + c["dur"] + 1e-3
                   for c in calls)
    assert re.search(r"statistics: run: 3 calls, total [\d.]+ (us|ms|s); kernels [\d.]+% of it", out), out
    kernels = {e["name"] for e in dispatches}
    for name in kernels:
        row = re.search(rf"\n  {name} +(\d+) +[\d.]+ ms +[\d.]+ us +[\d.]+% +[\d.]+ +([\d.]+|-)\n", out)
        assert row and int(row.group(1)) == sum(e["name"] == name for e in dispatches)
    assert "memory high-water mark:" in out
    # without --benchmark: the one call is traced
    run(kiln_run, f"--module={path}", "--function=run", "--input=8x16xf32=1", f"--output=@{tmp_path / 'y.npy'}",
        f"--trace={trace}")
    assert len([e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "call"]) == 1
    proc = run(kiln_run, f"--module={path}", "--function=run", "--input=8x16xf32=1",
               f"--trace={tmp_path / 'no' / 'such' / 't.json'}", check=False)
    assert proc.returncode == 1 and "--trace: cannot write trace file" in proc.stderr
    proc = run(kiln_run, f"--module={path}", "--list", "--trace=t.json", check=False)
    assert proc.returncode == 2 and "--trace and --print_statistics need --function=NAME" in proc.stderr


def test_benchmark_results_are_the_last_calls(kiln_run, tmp_path):
    """Benchmark calls write into result buffers made once (kiln_context_invoke_host destinations);
    --output then holds the last call's results, the same as one plain call's, and a function that
    updates globals still advances once per call."""
    import kiln.numpy as knp
    from kiln import Program

    x = np.arange(24, dtype=np.float32).reshape(4, 6)

    class Two(Program, export_name="two_results"):
        _count = Program.export_global(np.int32(0))

        def run(self, x=Program.like(x)):
            self._count = self._count + 1
            return knp.flip(x, axis=1) * 2.0, knp.sum(x, axis=0), self._count

    path = tmp_path / "m.vmfb"
    Program.get_compiled_artifact(Two).save(path)
    np.save(tmp_path / "x.npy", x)
    common = [f"--module={path}", "--function=run", f"--input=@{tmp_path / 'x.npy'}"]
    outs = [f"--output=@{tmp_path / f'b{i}.npy'}" for i in range(3)]
    run(kiln_run, *common, "--benchmark=4", "--warmup=2", *outs)
    np.testing.assert_array_equal(np.load(tmp_path / "b0.npy"), x[:, ::-1] * 2)
    np.testing.assert_array_equal(np.load(tmp_path / "b1.npy"), x.sum(axis=0))
    assert int(np.load(tmp_path / "b2.npy")) == 6  # 2 warm-up + 4 timed calls


def test_perf_map_names_the_kernels(kiln_run, tmp_path):
    """--perf-map (Instance(perf_map=True)) appends "START SIZE kiln:<module>:<kernel>" lines to perf's
    /tmp/perf-<pid>.map, one per kernel, at the addresses the kernels run from."""
    import os
    import subprocess

    import kiln.numpy as knp
    from kiln import Program
    from kiln.vm.reader import ModuleFile
    from kiln.vm.runtime import Instance, Module

    x = np.ones((4, 8), np.float32)

    class Mapped(Program, export_name="mapped"):
        def run(self, x=Program.like(x)):
            return knp.tanh(x) @ x.T, knp.sum(x, axis=0)

    data = Program.get_compiled_artifact(Mapped).bytes
    kernels = {k.name for k in ModuleFile(data).kernels}
    path = tmp_path / "m.vmfb"
    path.write_bytes(data)
    proc = subprocess.Popen([str(kiln_run), f"--module={path}", "--function=run", "--input=4x8xf32=1", "--perf-map"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.communicate()
    assert proc.returncode == 0
    map_file = f"/tmp/perf-{proc.pid}.map"
    try:
        lines = open(map_file).read().splitlines()
    finally:
        os.remove(map_file)
    assert {line.split()[2] for line in lines} == {f"kiln:mapped:{k}" for k in kernels}
    for line in lines:
        start, size, _ = line.split()
        assert int(start, 16) > 0 and 0 < int(size, 16) <= 1 << 24

    own_map = f"/tmp/perf-{os.getpid()}.map"
    before = open(own_map).read() if os.path.exists(own_map) else None
    try:
        Module.from_bytes(Instance(perf_map=True), data)
        added = open(own_map).read()[len(before or ""):].splitlines()
        assert {line.split()[2] for line in added} == {f"kiln:mapped:{k}" for k in kernels}
        Module.from_bytes(Instance(), data)  # off by default
        assert len(open(own_map).read().splitlines()) == len((before or "").splitlines()) + len(kernels)
    finally:
        if before is None:
            os.remove(own_map)
        else:
            open(own_map, "w").write(before)
