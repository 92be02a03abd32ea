"""The C runtime as a dependency: `cmake --install` of runtime-c into a temporary
prefix, then applications outside the tree built against it with CMake
(find_package(kiln), tests/packaging/consumer/CMakeLists.txt) and with pkg-config
and the C compiler (the commands runtime-c/README.md gives, run as written), each
running a module exported here, checked against numpy. The two C examples
(runtime-c/examples/embed.c and train.c) are built from the install both ways and
run too.

The install comes from the development build (build/runtime-c, built or refreshed
by kiln.vm._native.build_runtime), so the runtime is compiled once per session."""
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import numpy as np
import pytest

import kiln.numpy as knp
from kiln import Program
from kiln.vm import _native
from kiln_tools import example

ROOT = Path(__file__).resolve().parent.parent
CONSUMER = ROOT / "tests" / "packaging" / "consumer"
README = ROOT / "runtime-c" / "README.md"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
MAJOR, MINOR, _ = (int(p) for p in VERSION.split("."))
SOVERSION = f"{MAJOR}" if MAJOR else f"0.{MINOR}"
TRAIN_STEPS = 5

# runtime-c/README.md's commands, run verbatim with the installed prefix's
# lib/pkgconfig on PKG_CONFIG_PATH (app.c is tests/packaging/consumer/app.c).
PKG_CONFIG_BUILDS = {
    "app": "cc app.c $(pkg-config --cflags --libs kiln) "
           "-Wl,-rpath,$(pkg-config --variable=libdir kiln) -o app",
    "app-static": "cc app.c $(pkg-config --cflags --libs kiln-static) -o app-static",
    "embed": "cc runtime-c/examples/embed.c $(pkg-config --cflags --libs kiln-io) -o embed",
    "train": "cc runtime-c/examples/train.c $(pkg-config --cflags --libs kiln-io) -o train",
}
# The lines of runtime-c/README.md's CMake example that the consumer project uses.
CMAKE_LINES = ("target_link_libraries(app PRIVATE kiln::runtime)",
               "target_link_libraries(embed PRIVATE kiln::io)",
               "target_link_libraries(train PRIVATE kiln::io)")


def _missing_tools():
    return [tool for tool in ("cmake", "cc", "pkg-config", "readelf") if shutil.which(tool) is None]


pytestmark = pytest.mark.skipif(
    bool(_missing_tools()),
    reason=f"building outside applications needs {', '.join(_missing_tools())}, which is absent")


def sh(cmd, cwd=None, env=None, check=True, shell=False):
    proc = subprocess.run(cmd if shell else [str(c) for c in cmd], cwd=cwd, env=env, shell=shell,
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def needed_libraries(exe: Path) -> list[str]:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", sh(["readelf", "-d", exe]).stdout)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """runtime-c installed into a temporary prefix from the development build."""
    build = _native.build_runtime()
    out = tmp_path_factory.mktemp("prefix")
    sh(["cmake", "--install", build, "--prefix", out])
    return out


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    """An exported Program (a global, two arguments, two results), its inputs and
    numpy's results."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((3, 4)).astype(np.float32)

    class Consumer(Program, export_name="consumer"):
        _w = w

        def predict(self, x=Program.like(np.zeros((5, 3), np.float32)),
                    b=Program.like(np.zeros(4, np.float32))):
            y = knp.tanh(x @ self._w + b)
            return y, knp.sum(y, axis=0)

    d = tmp_path_factory.mktemp("module")
    Program.get_compiled_artifact(Consumer()).save(str(d / "consumer.vmfb"))
    x = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    for name, value in (("x", x), ("b", b)):
        value.tofile(d / f"{name}.bin")
        np.save(d / f"{name}.npy", value)
    y = np.tanh(x @ w + b)
    return d, (y, y.sum(axis=0))


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """examples/mlp_train.py's exported training step, its data set and numpy's losses."""
    M, R = example("mlp_train"), example("mlp_train_reference")
    d = tmp_path_factory.mktemp("mlp")
    Program.get_compiled_artifact(M.MLPTrain()).save(str(d / "mlp_train.vmfb"))
    np.save(d / "x.npy", M.example_x)
    np.save(d / "y.npy", M.example_y)
    _, losses, _ = R.train(M.params, M.example_x, M.example_y, TRAIN_STEPS)
    return d, losses


@pytest.fixture(scope="module")
def cmake_consumer(prefix, tmp_path_factory):
    """tests/packaging/consumer built with find_package(kiln), the examples included."""
    build = tmp_path_factory.mktemp("cmake-consumer")
    sh(["cmake", "-S", CONSUMER, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
        f"-DKILN_REQUIRED_VERSION={VERSION}", f"-DKILN_EXAMPLES_DIR={ROOT / 'runtime-c' / 'examples'}"])
    sh(["cmake", "--build", build])
    return build


@pytest.fixture(scope="module")
def pkg_config_consumer(prefix, tmp_path_factory):
    """The README's pkg-config commands run in a folder holding app.c and runtime-c/,
    against a copy of the install moved elsewhere (the .pc files are relocatable)."""
    moved = tmp_path_factory.mktemp("moved") / "kiln"
    shutil.copytree(prefix, moved, symlinks=True)
    work = tmp_path_factory.mktemp("pkg-config-consumer")
    shutil.copy(CONSUMER / "app.c", work / "app.c")
    (work / "runtime-c").symlink_to(ROOT / "runtime-c")
    env = {**os.environ, "PKG_CONFIG_PATH": str(moved / "lib" / "pkgconfig")}
    for cmd in PKG_CONFIG_BUILDS.values():
        sh(cmd, cwd=work, env=env, shell=True)
    return work, moved


def check_consumer(exe: Path, module, tmp_path):
    d, expected = module
    out = sh([exe, d / "consumer.vmfb", "predict", tmp_path / "r", d / "x.bin", d / "b.bin"]).stdout
    assert out == "result 0: f32[5,4]\nresult 1: f32[4]\n"
    for i, want in enumerate(expected):
        got = np.fromfile(tmp_path / f"r{i}.bin", np.float32).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    # the runtime's errors reach the application
    proc = sh([exe, d / "consumer.vmfb", "nope", tmp_path / "r"], check=False)
    assert proc.returncode == 1 and "no exported function 'nope'" in proc.stderr, proc.stderr
    proc = sh([exe, d / "consumer.vmfb", "predict", tmp_path / "r", d / "b.bin", d / "b.bin"],
              check=False)
    assert proc.returncode == 1 and proc.stderr.startswith("consumer: error: "), proc.stderr


def check_embed(exe: Path, module):
    d, expected = module
    out = sh([exe, d / "consumer.vmfb", "predict", f"@{d / 'x.npy'}", f"@{d / 'b.npy'}"]).stdout
    blocks = re.split(r"^result \d+ [^\n]*\n", out, flags=re.M)
    assert blocks[0] == "" and len(blocks) == 3, out
    assert re.findall(r"^result (\d+)\b.*: (\S+\[.*\])$", out, flags=re.M) == \
        [("0", "f32[5, 4]"), ("1", "f32[4]")], out
    for block, want in zip(blocks[1:], expected):
        got = np.array(re.findall(r"[-+]?\d+\.?\d*(?:e[-+]?\d+)?", block), np.float64)
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-6, atol=1e-7)


def check_train(exe: Path, mlp, tmp_path):
    d, ref_losses = mlp
    out = sh([exe, d / "mlp_train.vmfb", d / "x.npy", d / "y.npy", str(TRAIN_STEPS),
              tmp_path / "checkpoint.npz"]).stdout
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", out, flags=re.M)]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert "restored predictions identical: yes" in out
    assert re.search(r"^resumed step identical: yes", out, flags=re.M)
    assert int(np.load(tmp_path / "checkpoint.npz")["_step"]) == TRAIN_STEPS


def test_install_layout(prefix):
    lib = prefix / "lib"
    assert os.readlink(lib / "libkiln_runtime.so") == f"libkiln_runtime.so.{SOVERSION}"
    assert os.readlink(lib / f"libkiln_runtime.so.{SOVERSION}") == f"libkiln_runtime.so.{VERSION}"
    soname = re.findall(r"\(SONAME\)\s+Library soname: \[([^]]+)\]",
                        sh(["readelf", "-d", lib / f"libkiln_runtime.so.{VERSION}"]).stdout)
    assert soname == [f"libkiln_runtime.so.{SOVERSION}"]
    for path in ("lib/libkiln_runtime_static.a", "lib/libkiln_io.a", "bin/kiln-run",
                 "include/kiln/runtime.h", "include/kiln/constants.h", "include/kiln/kernel_abi.h",
                 "include/kiln_io.h", "lib/cmake/kiln/kilnConfig.cmake",
                 "lib/cmake/kiln/kilnConfigVersion.cmake", "lib/cmake/kiln/kilnTargets.cmake",
                 "lib/pkgconfig/kiln.pc", "lib/pkgconfig/kiln-static.pc", "lib/pkgconfig/kiln-io.pc"):
        assert (prefix / path).is_file(), path
    env = {**os.environ, "PKG_CONFIG_PATH": str(lib / "pkgconfig")}
    for pc in ("kiln", "kiln-static", "kiln-io"):
        assert sh(["pkg-config", "--modversion", pc], env=env).stdout.strip() == VERSION
        assert str(prefix) not in (lib / "pkgconfig" / f"{pc}.pc").read_text()  # relocatable
    libs = sh(["pkg-config", "--libs", "kiln-io"], env=env).stdout.split()
    assert libs[-3:] == ["-lkiln_io", "-lkiln_runtime_static", "-pthread"]


def test_installed_kiln_run(prefix, module, tmp_path):
    d, expected = module
    sh([prefix / "bin" / "kiln-run", f"--module={d / 'consumer.vmfb'}", "--function=predict",
        f"--input=@{d / 'x.npy'}", f"--input=@{d / 'b.npy'}", f"--output=@{tmp_path / 'y0.npy'}",
        f"--output=@{tmp_path / 'y1.npy'}"])
    for i, want in enumerate(expected):
        np.testing.assert_allclose(np.load(tmp_path / f"y{i}.npy"), want, rtol=2e-6, atol=2e-6)


def test_cmake_consumer(cmake_consumer, module, tmp_path):
    shared, static = cmake_consumer / "kiln-consumer", cmake_consumer / "kiln-consumer-static"
    assert f"libkiln_runtime.so.{SOVERSION}" in needed_libraries(shared)
    assert not any(n.startswith("libkiln_runtime") for n in needed_libraries(static))
    check_consumer(shared, module, tmp_path)
    check_consumer(static, module, tmp_path)


def test_cmake_examples(cmake_consumer, module, mlp, tmp_path):
    check_embed(cmake_consumer / "embed", module)
    check_train(cmake_consumer / "train", mlp, tmp_path)


def test_cmake_version_file(prefix, tmp_path):
    """find_package(kiln X.Y) accepts this version and refuses an incompatible one
    (another minor release before 1.0, another major from 1.0 on)."""
    other = f"{MAJOR}.{MINOR + 1}" if MAJOR == 0 else f"{MAJOR + 1}.0"
    proc = sh(["cmake", "-S", CONSUMER, "-B", tmp_path / "b", f"-DCMAKE_PREFIX_PATH={prefix}",
               f"-DKILN_REQUIRED_VERSION={other}"], check=False)
    assert proc.returncode != 0
    text = re.sub(r"\s+", " ", proc.stderr)
    assert f'compatible with requested version "{other}"' in text, proc.stderr
    assert f"version: {VERSION}" in text, proc.stderr


def test_pkg_config_consumer(pkg_config_consumer, module, tmp_path):
    work, moved = pkg_config_consumer
    assert f"libkiln_runtime.so.{SOVERSION}" in needed_libraries(work / "app")
    assert not any(n.startswith("libkiln_runtime") for n in needed_libraries(work / "app-static"))
    check_consumer(work / "app", module, tmp_path)
    check_consumer(work / "app-static", module, tmp_path)
    # app finds the moved copy's library through the rpath the README's command gives it
    assert f"{moved}/lib/pkgconfig/../../lib" in sh(["readelf", "-d", work / "app"]).stdout


def test_pkg_config_examples(pkg_config_consumer, module, mlp, tmp_path):
    work, _ = pkg_config_consumer
    check_embed(work / "embed", module)
    check_train(work / "train", mlp, tmp_path)


def test_readme_commands_are_the_tested_ones():
    text = README.read_text()
    for cmd in PKG_CONFIG_BUILDS.values():
        assert cmd in text, cmd
    for line in CMAKE_LINES:
        assert line in text, line
    consumer = (CONSUMER / "CMakeLists.txt").read_text()
    assert "target_link_libraries(kiln-consumer PRIVATE kiln::runtime)" in consumer
    for line in CMAKE_LINES[1:]:
        assert line in consumer, line


def test_default_build_has_no_tests_or_examples(tmp_path):
    """A plain configure (what `cmake --install` users run) compiles the libraries and
    kiln-run only; KILN_BUILD_TESTS=ON adds the C tests and the examples."""
    def compiled(*options):
        build = tmp_path / f"b{len(options)}"
        sh(["cmake", "-S", ROOT / "runtime-c", "-B", build, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
            *options])
        entries = json.loads((build / "compile_commands.json").read_text())
        return {str(Path(e["file"]).resolve().relative_to(ROOT / "runtime-c")) for e in entries}

    plain = compiled()
    assert "tools/kiln-run.c" in plain and "src/module.c" in plain and "tools/io/npz.c" in plain
    assert not any(f.startswith(("tests/", "examples/")) for f in plain), sorted(plain)
    full = compiled("-DKILN_BUILD_TESTS=ON")
    assert {"examples/embed.c", "examples/train.c", "tests/test_io.c"} <= full
    assert full > plain
