"""Builds the C runtime (libkiln_runtime.so and kiln-run) with CMake into the kiln.vm package.

The folders exporter/, vm/ and cli/ are mapped onto the import names kiln,
kiln.vm and kiln.cli; nothing is installed under a generic top-level name.
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent.resolve()
ROOTS = {"kiln": "exporter/kiln", "kiln.vm": "vm", "kiln.cli": "cli"}


def find_packages():
    """Every package under the mapped roots, with its folder."""
    mapping = {}
    for name, folder in ROOTS.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / folder)
            if "_native" in rel.parts or "__pycache__" in rel.parts:
                continue
            pkg = ".".join([name, *rel.parts]) if rel.parts else name
            mapping[pkg] = str(init.parent.relative_to(ROOT))
    return mapping


class CMakeRuntime(Extension):
    """The C runtime, built by CMake rather than by setuptools' compiler."""

    def __init__(self):
        super().__init__("kiln.vm._native.libkiln_runtime", sources=[])


class BuildRuntime(build_ext):
    def get_ext_filename(self, fullname):
        parts = fullname.split(".")
        if parts[-1] == "libkiln_runtime":
            return os.path.join(*parts[:-1], "libkiln_runtime.so")
        return super().get_ext_filename(fullname)

    def copy_extensions_to_source(self):
        """In-place (editable) builds: kiln-run goes beside the library in the source tree too."""
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            if isinstance(ext, CMakeRuntime):
                Path(self._get_inplace_equivalent(build_py, ext)[0]).parent.mkdir(parents=True, exist_ok=True)
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            if isinstance(ext, CMakeRuntime):
                inplace_lib, built_lib = self._get_inplace_equivalent(build_py, ext)
                shutil.copy2(Path(built_lib).parent / "kiln-run", Path(inplace_lib).parent / "kiln-run")

    def build_extension(self, ext):
        if not isinstance(ext, CMakeRuntime):
            return super().build_extension(ext)
        build_dir = Path(self.build_temp).resolve() / "runtime-c"
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call(
            ["cmake", "-S", str(ROOT / "runtime-c"), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release"]
        )
        subprocess.check_call(["cmake", "--build", str(build_dir), "--parallel", jobs])
        lib_path = Path(self.get_ext_fullpath(ext.name))
        lib_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(_built(build_dir, "libkiln_runtime.so"), lib_path)
        shutil.copy2(_built(build_dir, "kiln-run"), lib_path.parent / "kiln-run")


def _built(build_dir: Path, name: str) -> Path:
    found = sorted(p for p in build_dir.rglob(name) if p.is_file())
    if not found:
        raise RuntimeError(f"the CMake build in {build_dir} produced no {name}")
    return found[0]


packages = find_packages()
setup(
    packages=sorted(packages),
    package_dir=packages,
    package_data={"kiln": ["py.typed"]},  # PEP 561: kiln ships its type annotations
    ext_modules=[CMakeRuntime()],
    cmdclass={"build_ext": BuildRuntime},
)
