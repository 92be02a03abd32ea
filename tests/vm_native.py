"""Builds what the VM tests run natively: the C runtime with the test driver
(runtime-c/tests/kiln_vm_driver.c) under ASan+UBSan, and the test kernel."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "runtime-c"
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer"]


def project_version() -> str:
    """pyproject.toml's [project] version, which CMake passes to the runtime (cmake/KilnVersion.cmake)."""
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["version"]


def build_driver(out_dir: Path) -> Path:
    """The driver binary: $KILN_VM_DRIVER, the sanitizer build's, or compiled here."""
    if os.environ.get("KILN_VM_DRIVER"):
        return Path(os.environ["KILN_VM_DRIVER"])
    build = os.environ.get("KILN_SANITIZE_BUILD")
    if build and (Path(build) / "tests" / "kiln_vm_driver").exists():
        return Path(build) / "tests" / "kiln_vm_driver"
    cc = os.environ.get("CC", "cc")
    exe = out_dir / "kiln_vm_driver"
    sources = sorted(str(p) for p in (RUNTIME / "src").glob("*.c"))
    cmd = [cc, "-std=c11", "-D_GNU_SOURCE", f'-DKILN_RUNTIME_VERSION_STRING="{project_version()}"',
           "-g", "-O1", "-Wall", "-Wextra", "-Werror",
           *SANITIZE, f"-I{RUNTIME / 'include'}", f"-I{RUNTIME / 'src'}",
           f"-I{RUNTIME / 'src' / 'generated'}", *sources,
           str(RUNTIME / "tests" / "kiln_vm_driver.c"), "-lpthread", "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return exe


def build_kernel(out_dir: Path) -> bytes:
    """Text bytes of runtime-c/tests/vm_test_kernel.c (entry point at offset 0)."""
    cc = os.environ.get("CC", "cc")
    obj, binary = out_dir / "vm_test_kernel.o", out_dir / "vm_test_kernel.bin"
    subprocess.run([cc, "-std=c11", "-O2", "-fPIC", "-ffreestanding", "-fno-builtin",
                    "-fno-tree-vectorize", "-fno-jump-tables", "-fno-stack-protector",
                    "-fno-asynchronous-unwind-tables", "-fno-unwind-tables",
                    f"-I{RUNTIME / 'include'}", "-c", str(RUNTIME / "tests" / "vm_test_kernel.c"),
                    "-o", str(obj)], check=True)
    objcopy = shutil.which("objcopy") or "objcopy"
    subprocess.run([objcopy, "-O", "binary", "--only-section=.text", str(obj), str(binary)],
                   check=True)
    return binary.read_bytes()


def host_triple() -> str:
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(),
                                                          platform.machine())
    return f"{machine}-unknown-linux-gnu"


class Driver:
    """Runs the driver on module bytes written to a temporary file."""

    def __init__(self, exe: Path, tmp: Path):
        self.exe = exe
        self.tmp = tmp
        self.count = 0

    def _file(self, data: bytes) -> Path:
        self.count += 1
        path = self.tmp / f"m{self.count}.vmfb"
        path.write_bytes(data)
        return path

    def raw(self, command: str, data: bytes, *steps: str) -> subprocess.CompletedProcess:
        # A leak report must not exit 1, the driver's status for an expected error.
        env = dict(os.environ, LSAN_OPTIONS=os.environ.get("LSAN_OPTIONS", "exitcode=23"))
        proc = subprocess.run([str(self.exe), command, str(self._file(data)), *steps],
                              capture_output=True, text=True, timeout=120, env=env)
        if proc.returncode not in (0, 1):
            raise AssertionError(f"driver crashed ({proc.returncode}):\n{proc.stdout}\n"
                                 f"{proc.stderr}")
        return proc

    def load(self, data: bytes) -> str:
        proc = self.raw("load", data)
        assert proc.returncode == 0, proc.stdout
        return proc.stdout

    def error(self, command: str, data: bytes, *steps: str) -> str:
        """The 'error CODE: message' line of a run expected to fail cleanly."""
        proc = self.raw(command, data, *steps)
        assert proc.returncode == 1, f"expected an error, got:\n{proc.stdout}"
        return proc.stdout.strip().splitlines()[-1]

    def run(self, data: bytes, *steps: str) -> list[str]:
        proc = self.raw("run", data, *steps)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout.strip().splitlines()
