"""Provenance (issue 12): a module records where it came from (Module.provenance, format 2.3): the
producer and its versions, the target, how it was exported, and per function a SHA-256 of its traced IR
and of the source files its operations came from. kiln dump and kiln-run --list show it."""
import hashlib
import importlib.util
import platform
from pathlib import Path

import llvmlite
import numpy as np

import kiln
import kiln.numpy as knp
from kiln import Program
from kiln.vm.reader import ModuleFile, dump_text
from kiln.vm.runtime import Instance, Module
from kiln.vm.writer import serialize

ROOT = Path(__file__).resolve().parent.parent


def _linear():
    spec = importlib.util.spec_from_file_location("linear_provenance", ROOT / "examples" / "linear.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Linear


def test_the_version_read_from_the_dist_info_is_importlib_metadatas(tmp_path, monkeypatch):
    """kiln._version reads the first kiln_compiler-*.dist-info on sys.path itself (no importlib.metadata
    import per export): the same answer as importlib.metadata, here and for a dist-info put first."""
    import sys
    from importlib import metadata

    assert kiln._version() == metadata.version("kiln-compiler")
    info = tmp_path / "kiln_compiler-9.8.7.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kiln-compiler\nVersion: 9.8.7\n\nVersion: 1\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(tmp_path)] + sys.path)
    assert kiln._version() == metadata.version("kiln-compiler") == "9.8.7"


def test_a_module_records_its_producer_target_and_sources():
    data = Program.get_compiled_artifact(_linear()).bytes
    p = ModuleFile(data).provenance
    assert p["producer"] == f"kiln {kiln.__version__}"
    assert p["python"].endswith(platform.python_version()) and p["llvmlite"] == llvmlite.__version__
    assert p["numpy"] == np.__version__ and p["llvm"].count(".") == 2
    assert p["target"].startswith(kiln.compiler.target.Target.host().triple + " cpu=")
    assert p["export"].startswith("Program ") and p["export"].endswith(".Linear")
    source = ROOT / "examples" / "linear.py"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    functions = [k.split(".")[1] for k in p if k.endswith(".ir_sha256")]
    assert functions and set(functions) == {f.name for f in ModuleFile(data).functions}
    assert any(k.startswith(f"function.{functions[0]}.source.") and k.endswith("linear.py") and v == f"sha256 {digest}"
               for k, v in p.items())
    text = dump_text(data)
    assert f"provenance: {len(p)} entries" in text and f"  producer: kiln {kiln.__version__}" in text
    assert read_back(data) == p  # the reader's spec keeps it, and writing it again gives the same bytes


def read_back(data):
    from kiln.vm.reader import read_module
    spec = read_module(data)
    assert serialize(spec) == data
    return spec.provenance


def test_the_ir_hash_follows_the_function():
    x = np.ones(4, np.float32)

    def module(scale):
        class Scaled(Program, export_name="scaled"):
            def run(self, x=Program.like(x)):
                return knp.tanh(x) * scale
        return ModuleFile(Program.get_compiled_artifact(Scaled).bytes).provenance["function.run.ir_sha256"]

    assert module(2.0) == module(2.0)
    assert module(2.0) != module(3.0)


def test_kiln_run_lists_the_producer(tmp_path):
    data = Program.get_compiled_artifact(_linear()).bytes
    Module.from_bytes(Instance(), data)  # the runtime checks every entry is valid text when loading
    from runtime_tools import run
    from kiln.vm._native import kiln_run_path
    path = tmp_path / "m.vmfb"
    path.write_bytes(data)
    listing = run(kiln_run_path(), f"--module={path}", "--list").stdout
    assert listing.splitlines()[1] == (f"producer: kiln {kiln.__version__} (python {ModuleFile(data).provenance['python']}, "
                                       f"llvm {ModuleFile(data).provenance['llvm']}, llvmlite {llvmlite.__version__})")
