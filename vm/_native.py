"""Locating kiln's native artifacts: the C runtime library and kiln-run.

Search order for each artifact:

1. an environment variable: ``KILN_RUNTIME_LIB`` (the shared library) or
   ``KILN_RUN`` (the kiln-run executable);
2. ``_native/`` beside this file, where ``pip install`` puts them (for an
   in-tree development build that folder is gitignored);
3. the repository's development build folder ``build/runtime-c/`` (what
   ``make runtime`` or :func:`build_runtime` produce), when this file lives in
   a source checkout.

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


def _candidates(env_var: str, name: str) -> list[Path]:
    found = []
    value = os.environ.get(env_var)
    if value:
        found.append(Path(value))
    found.append(_NATIVE_DIR / name)
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
        for fn in (runtime_library_path, kiln_run_path):
            try:
                print(fn())
            except NativeArtifactNotFound as e:
                print(e)
        return 0
    sys.stderr.write("usage: python -m kiln.vm._native build|where\n")
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
