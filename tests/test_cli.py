"""The kiln command: export (file and module forms), run, dump, and its error handling."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from kiln_tools import ROOT, run_kiln_cli

EXAMPLE = os.path.join(ROOT, "examples", "linear.py")


def test_export_run_and_dump(tmp_path, linear_example):
    out = tmp_path / "linear.vmfb"
    proc = run_kiln_cli("export", f"{EXAMPLE}:Linear", "-o", str(out))
    assert "wrote" in proc.stdout and out.stat().st_size > 0
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    np.save(tmp_path / "x.npy", x)
    run = run_kiln_cli("run", str(out), "--function", "predict", f"--input=@{tmp_path / 'x.npy'}",
                       f"--output=@{tmp_path / 'y.npy'}")
    assert run.returncode == 0
    p = linear_example.params
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.tanh(x @ p.w + p.b), rtol=1e-5)
    text = run_kiln_cli("run", str(out), "--function", "predict", "--input=4x3xf32=1").stdout
    assert "4x4xf32" in text
    dump = run_kiln_cli("dump", str(out)).stdout
    for expected in ("module 'linear'", "predict(x: 4x3xf32)", "_params.w: 3x4xf32 mutable", "dispatch kernel(",
                     "global.store global(_calls)", "x86_64"):
        assert expected in dump, expected


def test_verbose_export_prints_the_time_of_each_stage(tmp_path):
    stages = ("load", "trace", "passes", "fusion", "schedule", "kernels", "link", "lower", "serialize", "write")

    def stage_lines(proc):
        lines = proc.stdout.splitlines()
        assert lines[0].startswith("kernel builds: host (") and lines[1].startswith("wrote "), proc.stdout
        assert lines[2] == "export stages (wall clock):", proc.stdout
        found: dict[str, list[str]] = {}  # stage -> its lines (one per public function for some)
        for line in lines[3:]:
            if line.startswith("  ") and not line.startswith("    "):
                found.setdefault(line.split()[0], []).append(line)
        return found

    first = stage_lines(run_kiln_cli("--verbose", "export", f"{EXAMPLE}:Linear", "-o", str(tmp_path / "a.vmfb")))
    assert list(first) == list(stages)
    assert all(" ms " in line for lines in first.values() for line in lines)
    assert any("predict: " in line and "equations" in line for line in first["trace"])
    assert any("predict: " in line and "equations" in line for line in first["passes"])
    assert any("predict: " in line and "dispatches" in line for line in first["fusion"])
    assert len(first["trace"]) == len(first["passes"]) == len(first["fusion"]) == len(first["lower"]) > 1
    (kernels,) = first["kernels"]
    count = int(kernels.split("ms")[1].split()[0])
    assert count > 0
    second = run_kiln_cli("--verbose", "export", f"{EXAMPLE}:Linear", "-o", str(tmp_path / "b.vmfb"))
    assert f"{count} kernels, {count} from the cache" in stage_lines(second)["kernels"][0]
    assert second.stdout.count("(cached)") == count
    assert (tmp_path / "a.vmfb").read_bytes() == (tmp_path / "b.vmfb").read_bytes()
    quiet = run_kiln_cli("export", f"{EXAMPLE}:Linear", "-o", str(tmp_path / "c.vmfb"))
    assert quiet.stdout.splitlines() == [f"wrote {tmp_path / 'c.vmfb'} ({(tmp_path / 'c.vmfb').stat().st_size} bytes)"]


def _installed_kiln(*args, cwd):
    """Runs the installed `kiln` script (not `python -m`) in `cwd`, without PYTHONPATH."""
    script = os.path.join(os.path.dirname(sys.executable), "kiln")
    assert os.access(script, os.X_OK), f"{script} is not installed"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([script, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_export_by_module_path_from_the_current_directory(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "prog.py").write_text(
        "import numpy as np\nimport kiln.numpy as knp\nfrom kiln import Program\n"
        "class Doubler(Program):\n"
        "    def double(self, x=Program.like(np.zeros((3,), np.float32))):\n"
        "        return x * 2\n"
    )
    proc = _installed_kiln("export", "mypkg.prog:Doubler", "-o", "d.vmfb", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "d.vmfb").stat().st_size > 0
    text = _installed_kiln("run", "d.vmfb", "-f", "double", "--input=3xf32=1,2,3", cwd=tmp_path).stdout
    assert "3xf32" in text and "[2. 4. 6.]" in text


def _assert_one_line_error(proc, *fragments, exit_code=None):
    assert proc.returncode != 0 if exit_code is None else proc.returncode == exit_code, proc
    assert proc.stderr.startswith("kiln: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "Usage:" not in proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, (fragment, proc.stderr)


def test_tracing_errors_are_one_line_with_the_users_line_and_exit_nonzero(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import numpy as np\nfrom kiln import Program\n"
        "class Bad(Program):\n"
        "    def f(self, x=Program.like(np.zeros((2,), np.float32))):\n"
        "        if x.sum() > 0:\n"
        "            return x\n"
        "        return -x\n"
        "class BadShapes(Program):\n"
        "    def f(self, x=Program.like(np.zeros((2, 3), np.float32))):\n"
        "        return x @ x\n"
    )
    out = str(tmp_path / "o.vmfb")
    proc = run_kiln_cli("export", f"{bad}:Bad", "-o", out, check=False)
    # TracerBoolConversionError: JAX's name, a kiln ConcretizationError
    _assert_one_line_error(proc, "kiln: error: TracerBoolConversionError", f"{bad}:5 in f: if x.sum() > 0:",
                           exit_code=1)
    proc = run_kiln_cli("export", f"{bad}:BadShapes", "-o", out, check=False)
    _assert_one_line_error(proc, "ValueError: matmul: mismatch in core dimension", f"{bad}:10 in f: return x @ x")
    verbose = run_kiln_cli("--verbose", "export", f"{bad}:Bad", "-o", out, check=False)
    assert verbose.returncode != 0 and "Traceback" in verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1].startswith("kiln: error: TracerBoolConversionError")
    assert not os.path.exists(out)


def test_usage_errors_are_one_line_and_exit_nonzero(tmp_path):
    out = str(tmp_path / "o.vmfb")
    _assert_one_line_error(run_kiln_cli("export", f"{tmp_path}/nope.py:X", "-o", out, check=False),
                           "no such file", "nope.py", exit_code=2)
    _assert_one_line_error(run_kiln_cli("export", f"{EXAMPLE}:Nope", "-o", out, check=False),
                           "has no attribute 'Nope'", exit_code=2)
    _assert_one_line_error(run_kiln_cli("export", f"{EXAMPLE}:Params", "-o", out, check=False),
                           "linear.py:Params is not a kiln Program subclass", exit_code=2)
    _assert_one_line_error(run_kiln_cli("export", "no_such_package.mod:X", "-o", out, check=False),
                           "cannot import no_such_package.mod", exit_code=2)
    _assert_one_line_error(run_kiln_cli("export", EXAMPLE, "-o", out, check=False),
                           "expected FILE.py:ClassName or package.module:ClassName", exit_code=2)
    _assert_one_line_error(run_kiln_cli("export", f"{EXAMPLE}:Linear", check=False),
                           "Missing option '-o' / '--output'", exit_code=2)
    _assert_one_line_error(run_kiln_cli("run", str(tmp_path / "missing.vmfb"), "-f", "predict", check=False),
                           "missing.vmfb", "does not exist", exit_code=2)
    _assert_one_line_error(run_kiln_cli("dump", str(tmp_path / "missing.vmfb"), check=False),
                           "missing.vmfb", "does not exist", exit_code=2)
    _assert_one_line_error(run_kiln_cli("bogus", check=False), "No such command 'bogus'", exit_code=2)
    run_kiln_cli("export", f"{EXAMPLE}:Linear", "-o", out)
    _assert_one_line_error(run_kiln_cli("run", out, check=False), "nothing to do: give --function=NAME, --list",
                           exit_code=2)  # kiln-run's usage error
    _assert_one_line_error(run_kiln_cli("run", out, "--bogus", check=False), "No such option '--bogus'", exit_code=2)
    verbose = run_kiln_cli("--verbose", "run", out, "--bogus", check=False)
    assert verbose.returncode == 2 and "Traceback" in verbose.stderr and "No such option" in verbose.stderr


def test_bad_modules_are_one_line_errors(tmp_path):
    garbage = tmp_path / "garbage.vmfb"
    garbage.write_bytes(b"\x00" * 64)
    _assert_one_line_error(run_kiln_cli("dump", str(garbage), check=False), "not a kiln module")
    _assert_one_line_error(run_kiln_cli("run", str(garbage), "-f", "x", check=False),
                           "garbage.vmfb: not a kiln module")


def test_kiln_run_unknown_function_through_the_cli(tmp_path):
    out = tmp_path / "linear.vmfb"
    run_kiln_cli("export", f"{EXAMPLE}:Linear", "-o", str(out))
    proc = run_kiln_cli("run", str(out), "-f", "nope", check=False)
    _assert_one_line_error(proc, "module 'linear' has no function 'nope'")


SCAN_PROGRAM = """
import numpy as np
import kiln.numpy as knp
from kiln import Program, lax


def make(n):
    class Scan(Program, export_name="scan"):
        def run(self, xs=Program.like(np.zeros((n, 4), np.float32))):
            return lax.scan(lambda c, x: (c + x, c * x), knp.zeros((4,), np.float32), xs)
    return Scan


Scan10, Scan1000 = make(10), make(1000)
"""


def test_dump_shows_one_loop_for_a_long_scan(tmp_path):
    """A length-1000 lax.scan is one loop in the bytecode, not 1000 copies: `kiln dump`
    and `kiln-run --disassemble` show exactly one back-edge, and the module is as
    large as a length-10 one."""
    from kiln_tools import run_kiln_run
    source = tmp_path / "scans.py"
    source.write_text(SCAN_PROGRAM)
    sizes = {}
    for n in (10, 1000):
        out = tmp_path / f"scan{n}.vmfb"
        run_kiln_cli("export", f"{source}:Scan{n}", "-o", str(out))
        sizes[n] = out.stat().st_size
    assert sizes[10] == sizes[1000]
    dump = run_kiln_cli("dump", str(tmp_path / "scan1000.vmfb")).stdout
    assert dump.count("; loop back-edge") == 1
    assert dump.count("; loop header (back-edge from") == 1
    assert "i.const i1, 1000" in dump and "buffer.row" in dump and "buffer.set_row" in dump
    back = next(line for line in dump.splitlines() if line.endswith("; loop back-edge"))
    target = back.split("@L")[1].split()[0]
    assert f"    L{target}:   ; loop header (back-edge from {back.split()[0]})" in dump
    assert "checksum: crc32 0x" in dump and "(verified)" in dump
    native = run_kiln_run(f"--module={tmp_path / 'scan1000.vmfb'}", "--disassemble").stdout
    assert native.count("; loop back-edge") == 1
    code = lambda text: [line.strip() for line in text.splitlines()  # noqa: E731
                         if line.strip()[:1].isdigit() or line.strip().startswith("L")]
    assert code(native) == code(dump.split("result_tree:")[1])


def test_dump_of_a_damaged_module_is_one_error_line(tmp_path):
    out = tmp_path / "linear.vmfb"
    run_kiln_cli("export", f"{EXAMPLE}:Linear", "-o", str(out))
    data = bytearray(out.read_bytes())
    data[len(data) // 3] ^= 0x10
    out.write_bytes(bytes(data))
    proc = run_kiln_cli("dump", str(out), check=False)
    _assert_one_line_error(proc, "module checksum mismatch: stored 0x")
    assert proc.stdout == ""
    _assert_one_line_error(run_kiln_cli("run", str(out), "-f", "predict", check=False),
                           "module checksum mismatch: stored 0x")


def _pyproject_version() -> str:
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]["version"]


def test_version_from_the_package_metadata_and_python_dash_m_kiln(monkeypatch):
    import importlib.metadata

    import kiln
    from kiln.vm._generated.constants import FORMAT_VERSION

    assert kiln.__version__ == _pyproject_version()
    expected = f"kiln {_pyproject_version()} (module format {FORMAT_VERSION[0]}.{FORMAT_VERSION[1]})\n"
    assert run_kiln_cli("--version").stdout == expected
    proc = subprocess.run([sys.executable, "-m", "kiln", "--version"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout == expected and proc.stderr == ""
    proc = subprocess.run([sys.executable, "-m", "kiln", "dump", "missing.vmfb"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.startswith("kiln: error: ") and "missing.vmfb" in proc.stderr
    assert _installed_kiln("--version", cwd=ROOT).stdout == expected

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    monkeypatch.setattr(sys, "path", [])  # no kiln_compiler-*.dist-info for kiln._version to read either
    assert kiln._version() == "0+unknown"


def test_the_package_is_typed_and_licensed():
    import tomllib

    import kiln

    assert os.path.isfile(os.path.join(os.path.dirname(kiln.__file__), "py.typed"))
    # tests/test_wheel.py checks that the wheel holds py.typed and kiln/__main__.py
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        license_name = tomllib.load(f)["project"]["license"]["text"]
    assert license_name == "Apache-2.0"
    with open(os.path.join(ROOT, "LICENSE")) as f:
        text = f.read()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        assert f"## {_pyproject_version()}" in f.read()


def _kiln_run_help_options() -> set[str]:
    from runtime_tools import native_build_dir

    text = subprocess.run([str(native_build_dir() / "kiln-run"), "--help"], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9_-]*)", text))


def test_kiln_run_declares_every_kiln_run_option():
    from kiln.cli.main import KILN_RUN_OPTIONS

    declared = {option for option, *_ in KILN_RUN_OPTIONS}
    assert declared | {"--module", "--version"} == _kiln_run_help_options()
    text = run_kiln_cli("run", "--help").stdout
    for option in declared:
        assert option in text, option


@pytest.fixture
def native_kiln_run(monkeypatch):
    """`kiln run` runs the kiln-run of the tests' build (ASan+UBSan under the Makefile)."""
    from runtime_tools import native_build_dir

    monkeypatch.setenv("KILN_RUN", str(native_build_dir() / "kiln-run"))


def test_kiln_run_passes_every_option_through(tmp_path, linear_example, native_kiln_run):
    import json

    m = str(tmp_path / "linear.vmfb")
    run_kiln_cli("export", f"{EXAMPLE}:Linear", "-o", m)
    p = linear_example.params
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    want = np.tanh(x @ p.w + p.b)
    np.savez(tmp_path / "x.npz", x=x)
    np.savez(tmp_path / "want.npz", y=want)

    listed = run_kiln_cli("run", m, "--list").stdout
    assert "\n  predict(x: 4x3xf32) -> (4x4xf32)" in listed and "globals (" in listed
    assert "func#" in run_kiln_cli("run", m, "--disassemble").stdout
    run_kiln_cli("run", m, "-f", "predict", f"--input=@{tmp_path / 'x.npz'}", f"--output=@{tmp_path / 'y.npz'}",
                 "--workers=1")
    with np.load(tmp_path / "y.npz") as y:
        assert y.files == ["result0"]  # the exporter's result names
        np.testing.assert_allclose(y["result0"], want, rtol=1e-5)
    out = run_kiln_cli("run", m, "-f", "predict", "-i", f"@{tmp_path / 'x.npz'}:x",
                       f"--expected_output=@{tmp_path / 'want.npz'}", "--expected_f32_threshold=1e-5").stdout
    assert out == "1 result matched the expected output\n"
    proc = run_kiln_cli("run", m, "-f", "predict", f"--input=@{tmp_path / 'x.npz'}", "--expected_output=4x4xf32=0",
                        check=False)
    _assert_one_line_error(proc, "kiln: error: function 'predict' result 0 'result0' does not match "
                                 "(--expected_output 1): element [0, ", "the first that differs", exit_code=1)
    stats = json.loads(run_kiln_cli("run", m, "-f", "predict", f"--input=@{tmp_path / 'x.npz'}", "--benchmark=3",
                                    "--warmup=2", "--benchmark_format=json", "--timeout=60").stdout)
    assert stats["calls"] == 3 and stats["warmup"] == 2
    proc = run_kiln_cli("run", m, "-f", "predict", f"--input=@{tmp_path / 'x.npz'}", "--max-steps=1", check=False)
    _assert_one_line_error(proc, "limit of 1 bytecode instructions", exit_code=1)
    # globals out, changed, back in (all of them, or a subset with --globals-partial)
    run_kiln_cli("run", m, f"--globals-out={tmp_path / 'state.npz'}")
    state = dict(np.load(tmp_path / "state.npz"))
    w_name = next(k for k in state if k.endswith(".w"))
    state[w_name] = np.zeros_like(state[w_name])
    np.savez(tmp_path / "zero_w.npz", **state)
    np.savez(tmp_path / "only_w.npz", **{w_name: state[w_name]})
    b = np.broadcast_to(np.tanh(p.b), (4, 4))
    for extra in ([f"--globals-in={tmp_path / 'zero_w.npz'}"],
                  [f"--globals-in={tmp_path / 'only_w.npz'}", "--globals-partial"]):
        run_kiln_cli("run", m, "-f", "predict", "--input=4x3xf32=1", *extra,
                     f"--globals-out={tmp_path / 'after.npz'}", f"--output=@{tmp_path / 'b.npy'}")
        np.testing.assert_allclose(np.load(tmp_path / "b.npy"), b, rtol=1e-6)
        np.testing.assert_array_equal(np.load(tmp_path / "after.npz")[w_name], 0)
    # kiln-run's usage errors are kiln's one-line errors, with kiln-run's exit status
    for args, fragment in [(["--benchmark=0"], "--benchmark expects an integer"),
                           (["--warmup=2"], "--warmup and --benchmark_format need --benchmark=N"),
                           (["--timeout=soon"], "--timeout expects a number of seconds"),
                           (["--expected_f64_threshold=1"], "--expected_f64_threshold need --expected_output=VALUE"),
                           (["--output=@a.npz", "--output=@b.npz"], "must be the only --output")]:
        proc = run_kiln_cli("run", m, "-f", "predict", "--input=4x3xf32=1", *args, check=False)
        _assert_one_line_error(proc, fragment, exit_code=2)
    proc = run_kiln_cli("run", m, "--list", "--globals-partial", check=False)
    _assert_one_line_error(proc, "--globals-partial needs --globals-in", exit_code=2)


def test_export_shows_progress_on_a_terminal_only(tmp_path):
    """On a terminal, kiln export rewrites one progress line per stage (trace, passes, fusion, each
    kernel, link, lower, write) and names the kernel builds before 'wrote ...'; piped, it prints only the
    result line."""
    import pty

    out = tmp_path / "m.vmfb"
    args = [sys.executable, "-m", "kiln.cli.main", "export", "examples/linear.py:Linear", "-o", str(out)]
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, cwd=ROOT, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=300) == 0
    text = b"".join(chunks).decode()
    for name in ("trace", "passes", "fusion", "lower", "write"):
        assert f"kiln export: {name}" in text, text
    assert "\r\x1b[K" in text and text.rstrip().endswith(f"wrote {out} ({out.stat().st_size} bytes)")
    assert "kernel builds: host (" in text, text  # tests/conftest.py sets KILN_TARGET=host
    piped = run_kiln_cli("export", "examples/linear.py:Linear", "-o", str(out))
    assert piped.stderr == "" and piped.stdout == f"wrote {out} ({out.stat().st_size} bytes)\n"
