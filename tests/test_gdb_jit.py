"""GDB's JIT interface (runtime-c/src/gdb_jit.c, issue 12): with KILN_GDB_JIT=1 the runtime registers
each loaded kernel image with GDB, so a breakpoint on a kernel's name resolves and a backtrace names
the kernel; off by default. gdb comes from Debian (`make debugger`, tests/install_debian_package.sh); without
it, or where the process may not be traced, the gdb test skips naming why."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kiln.vm.reader import read_module
from runtime_tools import native_build_dir, run


@pytest.fixture(scope="module")
def build():
    return native_build_dir()


@pytest.fixture(scope="module")
def softmax_module(tmp_path_factory):
    import kiln.numpy as knp
    from kiln import Program

    x = np.ones((64, 256), np.float32)

    class Softmax(Program, export_name="gdbjit"):
        def run(self, x=Program.like(x)):
            e = knp.exp(x - knp.max(x, axis=1, keepdims=True))
            return e / knp.sum(e, axis=1, keepdims=True)

    path = tmp_path_factory.mktemp("gdbjit") / "softmax.vmfb"
    Program.get_compiled_artifact(Softmax).save(path)
    return path


def test_registration_of_an_exported_module(build, softmax_module):
    """runtime-c/tests/test_gdb_jit.c on a module with kernels (under ASan+UBSan in `make pytest`): one
    entry per kernel image while the module lives, each kernel a symbol at its code, none after."""
    exe = build / "tests" / "test_gdb_jit"
    out = run(exe, str(softmax_module)).stdout
    assert "1 modules with kernels registered and unregistered" in out


def test_python_instance_options_match_the_header():
    """kiln.vm's ctypes copy of kiln_instance_options_t has the header's fields in its order (the runtime
    writes every field in kiln_instance_options_initialize: a shorter copy would be overrun)."""
    from kiln.vm._clib import _InstanceOptions

    header = (Path(__file__).resolve().parent.parent / "runtime-c" / "include" / "kiln" / "runtime.h").read_text()
    body = re.search(r"typedef struct kiln_instance_options \{(.*?)\} kiln_instance_options_t;", header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = re.findall(r"\b(\w+);", body)
    assert fields == [name for name, _ in _InstanceOptions._fields_] == ["worker_count", "perf_map", "gdb_jit"]


def _gdb(build, module, kernel, env, program=None):
    gdb = shutil.which("gdb")
    if gdb is None:
        pytest.skip("gdb is not installed (make debugger, or apt-get install gdb)")
    program = program or [str(build / "kiln-run"), f"--module={module}", "--function=run", "--input=64x256xf32=1"]
    cmd = [gdb, "-nx", "-batch", "-ex", "set breakpoint pending on", "-ex", f"break {kernel}", "-ex", "run",
           "-ex", "bt", "-ex", "info symbol $pc", "--args", *program]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    out = proc.stdout + proc.stderr
    if "ptrace: Operation not permitted" in out or "Could not trace the inferior" in out:
        pytest.skip("gdb may not trace processes here (ptrace is not permitted: kernel.yama.ptrace_scope "
                    "or a container without CAP_SYS_PTRACE)")
    return out


def test_gdb_names_the_kernel_in_a_backtrace(build, softmax_module):
    (kernel,) = [k.name for k in read_module(softmax_module.read_bytes()).kernels]
    # LeakSanitizer cannot run under ptrace (an ASan kiln-run would exit 1); leaks are ctest's to find
    options = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
    env = dict(os.environ, KILN_GDB_JIT="1", ASAN_OPTIONS=options)
    out = _gdb(build, softmax_module, kernel, env)
    assert "hit Breakpoint 1" in out, out
    frame0 = next(line for line in out.splitlines() if line.startswith("#0 "))
    assert f" in {kernel} (" in frame0, out
    assert f"{kernel} in section .text" in out, out  # info symbol: the JIT symfile's .text

    # off by default: the breakpoint never resolves and the run completes
    env.pop("KILN_GDB_JIT")
    out = _gdb(build, softmax_module, kernel, env)
    assert "hit Breakpoint" not in out and "exited normally" in out, out


def test_python_binding_option(build, softmax_module, tmp_path):
    """Instance(gdb_jit=True) registers the kernels from Python too (no environment variable), with the
    binding's runtime library stripped of its symbol table (as installed packages are): GDB finds the
    interface's two symbols among the library's exports."""
    from kiln.vm import _native

    (kernel,) = [k.name for k in read_module(softmax_module.read_bytes()).kernels]
    library = tmp_path / "libkiln_runtime.so"
    shutil.copy(_native.runtime_library_path(), library)
    strip = shutil.which("strip")
    if strip:
        subprocess.run([strip, "--strip-unneeded", str(library)], check=True)
    script = ("import numpy as np\n"
              "from kiln.vm.runtime import Context, Instance, Module\n"
              f"m = Module.from_bytes(Instance(gdb_jit=True), open({str(softmax_module)!r}, 'rb').read())\n"
              "Context(m).invoke('run', [np.ones((64, 256), np.float32)])\n")
    env = {k: v for k, v in os.environ.items() if k != "KILN_GDB_JIT"}
    env["KILN_RUNTIME_LIB"] = str(library)
    out = _gdb(build, softmax_module, kernel, env, program=[sys.executable, "-c", script])
    assert "hit Breakpoint 1" in out, out
    assert f"{kernel} in section .text" in out, out
