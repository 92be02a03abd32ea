"""The long aarch64 suite, run by `make test-aarch64` (not collected by `make test`: the file name does not
start with test_). Under qemu-user, against this machine's results: the runtime's C tests, the MLP training
loop in C (runtime-c/examples/train.c), the op sweep on larger inputs on several CPU models, and SVE at five
vector lengths (128 to 2048 bits). tests/test_cross_aarch64.py is the short part `make test` runs.

    make test-aarch64        # installs the cross tools, then runs this file and the short part
"""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cross_targets import (ARCHES, REDUCTION_ULPS, aarch64_target, assert_same, build_runtime, ensure_tools,
                           export_module, program_of, qemu_command, result_counts, run_function, sweep_functions)
from kiln.compiler.target import Target
from kiln.vm.reader import read_module
from kiln_tools import ROOT, kiln_run_binary
from runtime_tools import native_build_dir

ARCH = ARCHES["aarch64"]
SVE_LENGTHS = (1, 2, 4, 8, 16)


@pytest.fixture(scope="module")
def tests_build() -> Path:
    """runtime-c cross-built for aarch64 with its C tests and examples."""
    why = ensure_tools(ARCH)
    assert why is None, why  # make test-aarch64 installs them first: missing tools are a failure here
    return build_runtime(ARCH, tests=True, build_dir=ARCH.build_dir.with_name("cross-aarch64-tests"))


def test_c_tests_under_qemu(tests_build):
    """Every C test (ctest runs them through the toolchain file's CMAKE_CROSSCOMPILING_EMULATOR, qemu)."""
    proc = subprocess.run(["ctest", "--test-dir", str(tests_build), "--output-on-failure", "-j", "2"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"100% tests passed, 0 tests failed out of \d+", proc.stdout), proc.stdout


def test_mlp_training_loop_in_c_matches_x86(tests_build, tmp_path):
    """examples/mlp_train.py exported for aarch64 and trained by kiln-train-example under qemu: every printed
    loss, the accuracy and the checkpointed state (parameters and Adam's moments) equal the x86 run's."""
    sys.path.insert(0, str(Path(ROOT) / "examples"))
    try:
        import mlp_train as M
    finally:
        sys.path.pop(0)
    np.save(tmp_path / "x.npy", M.example_x)
    np.save(tmp_path / "y.npy", M.example_y)
    runs = {}
    for tag, target, command in (
            ("x86", Target.host(), [str(native_build_dir() / "kiln-train-example")]),
            ("aarch64", aarch64_target(), qemu_command(ARCH) + [str(tests_build / "kiln-train-example")])):
        module = tmp_path / f"mlp_train.{tag}.vmfb"
        module.write_bytes(export_module(M.MLPTrain, target))
        proc = subprocess.run([*command, str(module), str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "40",
                               str(tmp_path / f"checkpoint.{tag}.npz")], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "restored predictions identical: yes" in proc.stdout
        assert re.search(r"^resumed step identical: yes", proc.stdout, flags=re.M)
        runs[tag] = proc.stdout
    losses = {tag: re.findall(r"^step \d+ loss (\S+)$", out, flags=re.M) for tag, out in runs.items()}
    assert len(losses["x86"]) == 40 and losses["aarch64"] == losses["x86"]
    accuracy = {tag: re.search(r"^accuracy .*$", out, flags=re.M).group(0) for tag, out in runs.items()}
    assert accuracy["aarch64"] == accuracy["x86"]
    want = np.load(tmp_path / "checkpoint.x86.npz")
    got = np.load(tmp_path / "checkpoint.aarch64.npz")
    assert sorted(got.files) == sorted(want.files)
    for name in want.files:
        assert_same([got[name]], [want[name]], what=name)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    work = tmp_path_factory.mktemp("sweep_long")
    functions = sweep_functions(scale=3)
    program = program_of({name: (fn, args) for name, (fn, args, _) in functions.items()}, "sweep_long")
    modules = {}
    for tag, target in (("x86", Target.host()), ("neon", aarch64_target()),
                        ("neon-v8.2", aarch64_target("+v8.2a", "+dotprod", "+fullfp16", "+rcpc", "+lse", "+rdm", "+crc")),
                        ("sve", aarch64_target("+sve")), ("sve2", aarch64_target("+sve", "+sve2"))):
        modules[tag] = work / f"sweep.{tag}.vmfb"
        modules[tag].write_bytes(export_module(program, target))
    counts = result_counts(modules["x86"])
    want = {name: run_function([kiln_run_binary()], modules["x86"], name, args, work, counts[name], "x86")
            for name, (fn, args, _) in functions.items()}
    return functions, modules, counts, want, work


def _text_disassembly(module: Path, work: Path) -> str:
    """aarch64-linux-gnu-objdump's disassembly of a module's first kernel image's text."""
    image = read_module(module.read_bytes()).kernel_images[0]
    raw = work / (module.name + ".text.bin")
    raw.write_bytes(image.code[:image.text_size])
    return subprocess.run(["aarch64-linux-gnu-objdump", "-D", "-b", "binary", "-m", "aarch64", str(raw)],
                          capture_output=True, text=True, check=True).stdout


def test_sve_modules_use_scalable_vectors(sweep):
    """The SVE variants really are SVE code (predicated, vector-length agnostic), the NEON one is not."""
    _, modules, _, _, work = sweep
    for tag in ("sve", "sve2"):
        text = _text_disassembly(modules[tag], work)
        assert re.search(r"\bwhilelo\b|\bptrue\b", text) and re.search(r"\bz\d+\.[sd]\b", text), tag
    assert not re.search(r"\bz\d+\.[sd]\b", _text_disassembly(modules["neon"], work))


VARIANTS = [("neon", None), ("neon", "cortex-a53"), ("neon", "cortex-a72"), ("neon-v8.2", "neoverse-n1"),
            *[("sve", f"max,sve-max-vq={vq}") for vq in SVE_LENGTHS],
            *[("sve2", f"max,sve-max-vq={vq}") for vq in (1, 16)]]


@pytest.mark.parametrize("variant, cpu", VARIANTS)
def test_op_sweep_matches_x86(tests_build, sweep, variant, cpu):
    functions, modules, counts, want, work = sweep
    command = qemu_command(ARCH, cpu) + [str(tests_build / "kiln-run")]
    tag = f"{variant}-{cpu or 'default'}".replace(",", "_").replace("=", "")
    for name, (fn, args, kind) in functions.items():
        got = run_function(command, modules[variant], name, args, work, counts[name], tag)
        assert_same(got, want[name], max_ulps=REDUCTION_ULPS if kind == "reduction" else 0, what=f"{name} ({tag})")

