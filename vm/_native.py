"""Locating kiln's native artifacts: the C runtime library and kiln-run.

Search order for each artifact:

1. an environment variable: ``KILN_RUNTIME_LIB`` (the shared library) or
   ``KILN_RUN`` (the kiln-run executable);
2. ``_native/`` beside this file: in a source checkout, the development copies
   that ``make install`` puts there (and that a runtime under development may
   replace; the folder is gitignored and never goes into a wheel);
3. the runtime installed with the package: ``kiln/_runtime/``, an install
   prefix (``lib/libkiln_runtime.so``, ``bin/kiln-run``, ``include/``,
   ``lib/cmake/kiln/``, ``lib/pkgconfig/``) that the wheel's CMake install
   writes (pyproject.toml); an editable install keeps it in site-packages, which
   the editable finder adds to ``kiln.__path__``;
4. the repository's development build folder ``build/runtime-c/`` (what
   ``make runtime`` or :func:`build_runtime` produce), when this file lives in
   a source checkout.

:func:`runtime_prefix` is that installed prefix; :func:`runtime_include_dir`,
:func:`runtime_cmake_dir` and :func:`runtime_pkgconfig_dir` (also ``kiln.``
functions) are its headers, its CMake package and its pkg-config files, for C
projects built against the runtime that came with the package.

:func:`kiln_run_main` is the ``kiln-run`` console entry point: it replaces the
Python process with the native executable.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_NATIVE_DIR = _HERE / "_native"
_REPO_ROOT = _HERE.parent
_RUNTIME_SOURCE = _REPO_ROOT / "runtime-c"
DEV_BUILD_DIR = _REPO_ROOT / "build" / "runtime-c"

if sys.platform == "darwin":
    LIBRARY_NAME = "libkiln_runtime.dylib"
else:
    LIBRARY_NAME = "libkiln_runtime.so"
KILN_RUN_NAME = "kiln-run"


class NativeArtifactNotFound(FileNotFoundError):
    """The runtime library or kiln-run could not be found."""


# The installed runtime's folder inside the kiln package (pyproject.toml's wheel.install-dir).
_PREFIX_NAME = "_runtime"


def _prefix_candidates() -> list[Path]:
    """kiln/_runtime in each folder of the kiln package: the package's own folder, and for an
    editable install also the install tree in site-packages. (The package is already imported, as
    this module's parent; it is read from sys.modules, vm importing nothing above itself.)"""
    top = sys.modules.get((__spec__.name if __spec__ else __name__).split(".")[0])
    folders = list(getattr(top, "__path__", None) or [_HERE.parent])
    return [Path(entry) / _PREFIX_NAME for entry in folders]


def runtime_prefix() -> Path:
    """The install prefix of the C runtime that came with the package (kiln/_runtime)."""
    candidates = _prefix_candidates()
    for path in candidates:
        if (path / "lib").is_dir():
            return path
    searched = ", ".join(str(p) for p in candidates) or "(kiln has no package folder)"
    raise NativeArtifactNotFound(
        f"kiln's installed runtime was not found (searched {searched}); install kiln with pip "
        "(pip install kiln-compiler, or pip install -e . in a source checkout)")


def runtime_include_dir() -> str:
    """The installed runtime's include folder: ``kiln/runtime.h`` (the C API), ``kiln/constants.h``,
    ``kiln/kernel_abi.h`` and ``kiln_io.h``."""
    return str(runtime_prefix() / "include")


def runtime_cmake_dir() -> str:
    """The installed runtime's CMake package folder (kilnConfig.cmake): pass it as ``-Dkiln_DIR=`` to
    ``find_package(kiln)``, which defines ``kiln::runtime``, ``kiln::runtime_static``, ``kiln::io``."""
    return str(runtime_prefix() / "lib" / "cmake" / "kiln")


def runtime_pkgconfig_dir() -> str:
    """The installed runtime's pkg-config folder (kiln.pc, kiln-static.pc, kiln-io.pc), for
    ``PKG_CONFIG_PATH``."""
    return str(runtime_prefix() / "lib" / "pkgconfig")


def _candidates(env_var: str, name: str) -> list[Path]:
    found = []
    value = os.environ.get(env_var)
    if value:
        found.append(Path(value))
    found.append(_NATIVE_DIR / name)
    sub = "bin" if name == KILN_RUN_NAME else "lib"
    found.extend(prefix / sub / name for prefix in _prefix_candidates())
    if _RUNTIME_SOURCE.is_dir():
        found.append(DEV_BUILD_DIR / name)
    return found


def _find(env_var: str, name: str) -> str:
    candidates = _candidates(env_var, name)
    if os.environ.get(env_var):
        # An explicit setting must be right: do not fall back silently.
        explicit = candidates[0]
        if explicit.is_file():
            return str(explicit)
        raise NativeArtifactNotFound(
            f"{env_var}={os.environ[env_var]} does not name an existing file")
    for path in candidates:
        if path.is_file():
            return str(path)
    searched = ", ".join(str(p) for p in candidates)
    hint = ("build it with `make runtime` (or python -m kiln.vm._native build)"
            if _RUNTIME_SOURCE.is_dir() else "reinstall kiln")
    raise NativeArtifactNotFound(
        f"kiln's native {name} was not found (searched ${env_var}, {searched}); {hint}")


def runtime_library_path() -> str:
    """Path of libkiln_runtime (shared library)."""
    return _find("KILN_RUNTIME_LIB", LIBRARY_NAME)


def kiln_run_path() -> str:
    """Path of the native kiln-run executable."""
    return _find("KILN_RUN", KILN_RUN_NAME)


def build_runtime(build_dir: str | os.PathLike | None = None, *, sanitize: bool = False,
                  build_type: str = "Release", quiet: bool = True) -> Path:
    """Configures and builds runtime-c with CMake (incrementally), its C tests and examples
    included (``KILN_BUILD_TESTS=ON``); returns the build folder.

    Only available in a source checkout. The artifacts are found there by
    :func:`runtime_library_path` and :func:`kiln_run_path` when the folder is
    the default ``build/runtime-c``.
    """
    if not _RUNTIME_SOURCE.is_dir():
        raise NativeArtifactNotFound(f"no runtime sources at {_RUNTIME_SOURCE}: not a source checkout")
    cmake = shutil.which("cmake")
    if not cmake:
        raise NativeArtifactNotFound("cmake is required to build the kiln runtime")
    out = Path(build_dir) if build_dir else DEV_BUILD_DIR
    configure = [cmake, "-S", str(_RUNTIME_SOURCE), "-B", str(out), f"-DCMAKE_BUILD_TYPE={build_type}",
                 f"-DKILN_SANITIZE={'ON' if sanitize else 'OFF'}", "-DKILN_BUILD_TESTS=ON"]
    build = [cmake, "--build", str(out), "--parallel", str(os.cpu_count() or 2)]
    for cmd in (configure, build):
        proc = subprocess.run(cmd, capture_output=quiet, text=True)
        if proc.returncode != 0:
            detail = (proc.stdout or "") + (proc.stderr or "") if quiet else ""
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode})\n{detail}")
    return out


def copy_installed_to_native_dir() -> list[Path]:
    """Copies the installed runtime's library and kiln-run into ``_native/`` beside this file (what
    ``make install`` does after ``pip install -e``), each through a temporary name and a rename, so
    a process loading the library meanwhile sees the old file or the new one, never half of one.
    Only in a source checkout: an installed package finds its runtime in kiln/_runtime."""
    if not _RUNTIME_SOURCE.is_dir():
        raise NativeArtifactNotFound(f"no runtime sources at {_RUNTIME_SOURCE}: not a source checkout")
    prefix = runtime_prefix()
    _NATIVE_DIR.mkdir(exist_ok=True)
    copied = []
    for source in (prefix / "lib" / LIBRARY_NAME, prefix / "bin" / KILN_RUN_NAME):
        if not source.is_file():
            raise NativeArtifactNotFound(f"the installed runtime has no {source}")
        tmp = _NATIVE_DIR / f".{source.name}.tmp.{os.getpid()}"
        shutil.copy2(source, tmp)
        os.replace(tmp, _NATIVE_DIR / source.name)
        copied.append(_NATIVE_DIR / source.name)
    return copied


def kiln_run_main() -> None:
    """Console entry point ``kiln-run``: runs the native executable with the same arguments."""
    try:
        path = kiln_run_path()
    except NativeArtifactNotFound as e:
        sys.stderr.write(f"kiln-run: error: {e}\n")
        sys.exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [path, *sys.argv[1:]])


def _main(argv: list[str]) -> int:
    if argv == ["build"]:
        out = build_runtime(quiet=False)
        print(f"built {out / LIBRARY_NAME} and {out / KILN_RUN_NAME}")
        return 0
    if argv == ["where"]:
        for fn in (runtime_library_path, kiln_run_path, runtime_include_dir, runtime_cmake_dir,
                   runtime_pkgconfig_dir):
            try:
                print(fn())
            except NativeArtifactNotFound as e:
                print(e)
        return 0
    if argv == ["copy-installed"]:
        for path in copy_installed_to_native_dir():
            print(f"copied {path}")
        return 0
    sys.stderr.write("usage: python -m kiln.vm._native build|where|copy-installed\n")
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
