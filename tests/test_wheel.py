"""The Python distribution (kiln-compiler): `python -m build` makes the sdist and, from it, the wheel
with scikit-build-core and CMake (pyproject.toml), as `make dist` does but without build isolation
(the build requirements come from .venv, so no network is needed). Then:

- the wheel's name and tag (py3-none-PLATFORM: a ctypes binding, no Python extension), its metadata
  and console scripts;
- its files: every Python module of the three source roots and nothing else of them, py.typed, and
  the runtime's install tree kiln/_runtime (the shared library, the static ones, kiln-run, the public
  headers, the CMake package, the .pc files) with no C test or example;
- the sdist: the sources CMake and the package need, no build output;
- installed with pip into a fresh virtual environment (--no-deps; its dependencies come from .venv's
  site-packages through a .pth file): `kiln --version`, the binding and kiln-run found in the
  package, kiln.jit running through the wheel's library, a module exported by the installed `kiln`
  and run by the installed `kiln-run`, and tests/packaging/consumer built with find_package(kiln)
  from kiln.runtime_cmake_dir() (and linked by pkg-config from kiln.runtime_pkgconfig_dir()), run
  on that module against numpy.

About 30 s on 2 cores, most of it the wheel's CMake build."""
import email.parser
import os
import re
import shutil
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from test_packaging import CONSUMER, VERSION, check_consumer, needed_libraries, sh

ROOT = Path(__file__).resolve().parent.parent
DIST = "kiln_compiler"
PLATFORM = re.sub(r"[-.]", "_", sysconfig.get_platform())
# pyproject.toml's wheel.packages: the source folder of each package root in the wheel
SOURCE_ROOTS = {"kiln": ROOT / "exporter" / "kiln", "kiln/vm": ROOT / "vm", "kiln/cli": ROOT / "cli"}
RUNTIME_FILES = {
    "bin/kiln-run",
    "lib/libkiln_runtime.so", "lib/libkiln_runtime_static.a", "lib/libkiln_io.a",
    "include/kiln/runtime.h", "include/kiln/constants.h", "include/kiln/kernel_abi.h", "include/kiln_io.h",
    "lib/cmake/kiln/kilnConfig.cmake", "lib/cmake/kiln/kilnConfigVersion.cmake",
    "lib/cmake/kiln/kilnTargets.cmake", "lib/cmake/kiln/kilnTargets-release.cmake",
    "lib/pkgconfig/kiln.pc", "lib/pkgconfig/kiln-static.pc", "lib/pkgconfig/kiln-io.pc",
}
# the program exported by the installed kiln: the shape tests/packaging/consumer's check expects
PROGRAM = '''
from pathlib import Path
import numpy as np
import kiln.numpy as knp
from kiln import Program


class Consumer(Program, export_name="consumer"):
    _w = np.load(Path(__file__).with_name("w.npy"))

    def predict(self, x=Program.like(np.zeros((5, 3), np.float32)),
                b=Program.like(np.zeros(4, np.float32))):
        y = knp.tanh(x @ self._w + b)
        return y, knp.sum(y, axis=0)
'''

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or any(shutil.which(t) is None for t in ("cmake", "cc", "pkg-config", "readelf")),
    reason="the wheel test builds on Linux with cmake, cc, pkg-config and readelf")


def clean_env(**extra):
    """The environment without the variables that point kiln at other artifacts or sources."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "KILN_RUN", "KILN_RUNTIME_LIB", "KILN_SANITIZE_BUILD")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """The sdist and the wheel built from it, and the wheel's CMake build folder."""
    out = tmp_path_factory.mktemp("dist")
    cmake_build = tmp_path_factory.mktemp("wheel-cmake-build")
    sh([sys.executable, "-m", "build", "--no-isolation", "--outdir", out, f"-Cbuild-dir={cmake_build}", ROOT],
       env=clean_env())
    sdists, wheels = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(out.iterdir())
    return sdists[0], wheels[0], cmake_build


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory):
    """A fresh virtual environment with the wheel installed; numpy, llvmlite, ... come from this
    interpreter's site-packages (a .pth line: the editable install's own .pth files there are not run)."""
    where = tmp_path_factory.mktemp("venv") / "venv"
    sh([sys.executable, "-m", "venv", "--without-pip", where])
    python = where / "bin" / "python"
    site = Path(sh([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "_kiln_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    sh([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index", dist[1]],
       env=clean_env())
    return where, site


def in_venv(venv, *args, cwd):
    where, _ = venv
    return sh([*args], cwd=cwd, env=clean_env(PATH=f"{where / 'bin'}{os.pathsep}{os.environ['PATH']}",
                                              VIRTUAL_ENV=str(where)))


def venv_python(venv, code, cwd):
    return in_venv(venv, venv[0] / "bin" / "python", "-c", code, cwd=cwd).stdout


def test_wheel_name_tag_and_metadata(dist):
    wheel = dist[1]
    assert wheel.name == f"{DIST}-{VERSION}-py3-none-{PLATFORM}.whl"
    with zipfile.ZipFile(wheel) as z:
        info = f"{DIST}-{VERSION}.dist-info"
        tags = email.parser.Parser().parsestr(z.read(f"{info}/WHEEL").decode())
        meta = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode())
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert tags.get_all("Tag") == [f"py3-none-{PLATFORM}"] and tags["Root-Is-Purelib"] == "false"
    assert meta["Name"] == "kiln-compiler" and meta["Version"] == VERSION
    assert "numpy>=1.26" in meta.get_all("Requires-Dist")
    assert "kiln = kiln.cli.main:main" in entry_points
    assert "kiln-run = kiln.vm._native:kiln_run_main" in entry_points


def test_wheel_files(dist):
    with zipfile.ZipFile(dist[1]) as z:
        names = set(z.namelist())
    info = {n for n in names if n.startswith(f"{DIST}-{VERSION}.dist-info/")}
    runtime = {n.removeprefix("kiln/_runtime/") for n in names if n.startswith("kiln/_runtime/")}
    python = names - info - {f"kiln/_runtime/{n}" for n in runtime}
    assert runtime == RUNTIME_FILES  # no C test, no example, no symbolic-link copies of the library
    expected = {"kiln/py.typed"}
    for package, folder in SOURCE_ROOTS.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder)
            if "__pycache__" in rel.parts or "_native" in rel.parts[:-1]:
                continue
            if package == "kiln" and rel.parts[0] in ("vm", "cli"):
                continue
            expected.add(f"{package}/{rel.as_posix()}")
    assert python == expected, (sorted(python - expected), sorted(expected - python))
    assert {"kiln/__init__.py", "kiln/__main__.py", "kiln/vm/_native.py", "kiln/cli/main.py"} <= python
    assert f"{DIST}-{VERSION}.dist-info/licenses/LICENSE" in info


def test_wheel_build_compiles_no_test_or_example(dist):
    cache = (dist[2] / "CMakeCache.txt").read_text()
    assert "KILN_BUILD_TESTS:BOOL=OFF" in cache and "KILN_BUILD_EXAMPLES:BOOL=OFF" in cache
    assert "CMAKE_BUILD_TYPE:STRING=Release" in cache
    built = {p.name for p in dist[2].rglob("*") if p.is_file() and os.access(p, os.X_OK)}
    assert "kiln-run" in built
    assert not [n for n in built if n.startswith("test_") or n in ("kiln-embed-example", "kiln-train-example")]
    assert not [p for p in dist[2].rglob("*.o") if "tests" in p.parts or "examples" in p.parts]


def test_cmake_and_a_compiler_are_build_requirements(tmp_path):
    """cmake is asked for from the package index when the machine has none (scikit-build-core's
    get_requires_for_build_wheel, what pip installs into the isolated build environment); a missing
    C compiler stops the build with CMake's message naming it."""
    requires = ("from scikit_build_core.build import get_requires_for_build_wheel as g; "
                "print(' '.join(g()))")
    no_tools = tmp_path / "empty-path"
    no_tools.mkdir()
    assert "cmake>=3.16" in sh([sys.executable, "-c", requires], cwd=ROOT,
                               env=clean_env(PATH=str(no_tools))).stdout.split()
    assert not [r for r in sh([sys.executable, "-c", requires], cwd=ROOT, env=clean_env()).stdout.split()
                if r.startswith("cmake")]  # this machine's cmake is recent enough
    proc = sh([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp_path / "out",
               f"-Cbuild-dir={tmp_path / 'cmake'}", ROOT], env=clean_env(CC=str(tmp_path / "no-cc")), check=False)
    assert proc.returncode != 0 and not list((tmp_path / "out").glob("*.whl"))
    text = re.sub(r"\s+", " ", proc.stdout + proc.stderr)
    assert f"Could not find compiler set in environment variable CC: {tmp_path / 'no-cc'}" in text, text


def test_sdist_files(dist):
    with tarfile.open(dist[0]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for needed in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "runtime-c/CMakeLists.txt",
                   "runtime-c/cmake/KilnInstall.cmake", "runtime-c/include/kiln/runtime.h",
                   "runtime-c/tools/kiln-run.c", "exporter/kiln/__init__.py", "vm/_native.py", "cli/main.py"):
        assert needed in names, needed
    # no build output (committed .vmfb test inputs are sources)
    assert not [n for n in names if n.split("/")[0] in ("build", "dist", ".venv", ".git")
                or n.startswith("vm/_native/") or "__pycache__" in n or n.endswith((".pyc", ".so", ".a", ".o"))]


def test_installed_kiln(venv, tmp_path):
    where, site = venv
    from kiln.vm._generated.constants import FORMAT_VERSION

    out = in_venv(venv, "kiln", "--version", cwd=tmp_path).stdout
    assert out == f"kiln {VERSION} (module format {FORMAT_VERSION[0]}.{FORMAT_VERSION[1]})\n"
    assert VERSION in in_venv(venv, "kiln-run", "--version", cwd=tmp_path).stdout
    paths = venv_python(venv, "import kiln, kiln.vm._native as n; print(kiln.__file__); "
                              "print(n.runtime_library_path()); print(n.kiln_run_path()); "
                              "print(kiln.runtime_include_dir()); print(kiln.runtime_cmake_dir()); "
                              "print(kiln.runtime_pkgconfig_dir())", cwd=tmp_path).split("\n")[:6]
    prefix = site / "kiln" / "_runtime"
    assert paths == [str(site / "kiln" / "__init__.py"), str(prefix / "lib" / "libkiln_runtime.so"),
                     str(prefix / "bin" / "kiln-run"), str(prefix / "include"),
                     str(prefix / "lib" / "cmake" / "kiln"), str(prefix / "lib" / "pkgconfig")]
    # the ctypes binding runs a compiled function with the wheel's library
    out = venv_python(venv, "import numpy as np, kiln; "
                            "print(kiln.jit(lambda x: x * 2 + 1)(np.arange(4, dtype=np.float32)).tolist())",
                      cwd=tmp_path)
    assert out == "[1.0, 3.0, 5.0, 7.0]\n"


@pytest.fixture(scope="module")
def exported(venv, tmp_path_factory):
    """PROGRAM exported by the installed kiln, its inputs and numpy's results."""
    d = tmp_path_factory.mktemp("exported")
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    np.save(d / "w.npy", w)
    (d / "program.py").write_text(PROGRAM)
    for name, value in (("x", x), ("b", b)):
        value.tofile(d / f"{name}.bin")
        np.save(d / f"{name}.npy", value)
    in_venv(venv, "kiln", "export", "program.py:Consumer", "-o", "consumer.vmfb", cwd=d)
    y = np.tanh(x @ w + b)
    return d, (y, y.sum(axis=0))


def test_installed_kiln_run(venv, exported, tmp_path):
    d, expected = exported
    in_venv(venv, "kiln-run", f"--module={d / 'consumer.vmfb'}", "--function=predict", f"--input=@{d / 'x.npy'}",
            f"--input=@{d / 'b.npy'}", f"--output=@{tmp_path / 'y0.npy'}", f"--output=@{tmp_path / 'y1.npy'}",
            cwd=tmp_path)
    for i, want in enumerate(expected):
        np.testing.assert_allclose(np.load(tmp_path / f"y{i}.npy"), want, rtol=2e-6, atol=2e-6)


def test_c_app_against_the_installed_runtime(venv, exported, tmp_path):
    cmake_dir, pkgconfig_dir, lib_dir = venv_python(
        venv, "import kiln, kiln.vm._native as n, os; print(kiln.runtime_cmake_dir()); "
              "print(kiln.runtime_pkgconfig_dir()); print(os.path.dirname(n.runtime_library_path()))",
        cwd=tmp_path).split()
    build = tmp_path / "cmake"
    sh(["cmake", "-S", CONSUMER, "-B", build, f"-Dkiln_DIR={cmake_dir}", f"-DKILN_REQUIRED_VERSION={VERSION}"])
    sh(["cmake", "--build", build])
    shared, static = build / "kiln-consumer", build / "kiln-consumer-static"
    # one unversioned library in a wheel (it cannot hold the links), found through the build's rpath
    assert "libkiln_runtime.so" in needed_libraries(shared)
    assert lib_dir in sh(["readelf", "-d", shared]).stdout
    assert not any(n.startswith("libkiln_runtime") for n in needed_libraries(static))
    check_consumer(shared, exported, tmp_path)
    check_consumer(static, exported, tmp_path)
    # pkg-config, as runtime-c/README.md has it, from the package's .pc files
    shutil.copy(CONSUMER / "app.c", tmp_path / "app.c")
    env = {**os.environ, "PKG_CONFIG_PATH": pkgconfig_dir}
    assert sh(["pkg-config", "--modversion", "kiln"], env=env).stdout.strip() == VERSION
    sh("cc app.c $(pkg-config --cflags --libs kiln) -Wl,-rpath,$(pkg-config --variable=libdir kiln) -o app",
       cwd=tmp_path, env=env, shell=True)
    check_consumer(tmp_path / "app", exported, tmp_path)
