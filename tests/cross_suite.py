"""The long cross-target suites, one test set parameterized by architecture (not collected by `make test`: the
file name does not start with test_). Under qemu-user, against this machine's results, for aarch64 and riscv64:
the runtime's C tests, the MLP training loop in C (runtime-c/examples/train.c) and the op sweep on several CPU
models. aarch64 (`-k aarch64`): the sweep on 3x larger inputs on NEON CPU models and SVE/SVE2 at five vector
lengths (128 to 2048 bits), and the SVE modules checked to be SVE code; tests/test_cross_aarch64.py is the short
part `make test` runs. riscv64 (`-k riscv64`): the sweep on a CPU without the vector extension (the runtime
loads the rv64gc build) and with it at several vector lengths (the rv64gcv build), the relocation kernel,
examples/linear.py exported with `kiln export --target riscv64-unknown-linux-gnu`, and the vector build refused
without V. docs/targets.md.

    make test-aarch64        # installs the cross tools, then runs this file's aarch64 tests and the short part
    make test-riscv64        # installs the cross tools, then runs this file's riscv64 tests
"""
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from cross_targets import (ARCHES, RELOCATION_KERNEL_RESULTS, Arch, aarch64_target, assert_same, assert_same_kind,
                           build_runtime, ensure_tools, export_module, program_of, qemu_command, result_counts,
                           run_function, run_relocation_kernel, run_under_qemu, sweep_functions)
from kiln.compiler.target import Target
from kiln.vm.reader import read_module
from kiln_tools import example, kiln_run_binary, run_kiln_cli
from runtime_tools import native_build_dir


@dataclass(frozen=True)
class Suite:
    arch: Arch
    train_target: object          # what the training loop's module is exported for (export_module's target)
    train_cpu: str | None         # the qemu CPU model it runs on (None: qemu's default)
    train_steps: int
    sweep_scale: int              # sweep_functions' scale
    sweep_targets: tuple          # (module tag, export_module's target) for the sweep
    sweep_runs: tuple             # (module tag, qemu CPU model or None, the variant `kiln-run --list` loads or None)


SVE_LENGTHS = (1, 2, 4, 8, 16)
RV_CPUS = [("rv64", "rv64gc"), *[(f"rv64,v=true,vlen={n}", "rv64gcv") for n in (128, 256, 512)]]
SUITES = {
    "aarch64": Suite(
        ARCHES["aarch64"], aarch64_target(), None, 40, 3,
        (("neon", aarch64_target()),
         ("neon-v8.2", aarch64_target("+v8.2a", "+dotprod", "+fullfp16", "+rcpc", "+lse", "+rdm", "+crc")),
         ("sve", aarch64_target("+sve")), ("sve2", aarch64_target("+sve", "+sve2"))),
        (("neon", None, None), ("neon", "cortex-a53", None), ("neon", "cortex-a72", None),
         ("neon-v8.2", "neoverse-n1", None), *[("sve", f"max,sve-max-vq={vq}", None) for vq in SVE_LENGTHS],
         *[("sve2", f"max,sve-max-vq={vq}", None) for vq in (1, 16)])),
    "riscv64": Suite(
        ARCHES["riscv64"], ARCHES["riscv64"].triple, RV_CPUS[1][0], 20, 1,
        (("riscv64", ARCHES["riscv64"].triple),),
        tuple(("riscv64", cpu, variant) for cpu, variant in RV_CPUS)),
}


def _on(name: str, *values):
    """A parameter of one architecture's suite: its id names the architecture (so `-k NAME` selects it)."""
    return pytest.param(name, *values, id="-".join([name, *(str(v) for v in values if v is not None)]))


def only(name: str):
    """For a test of one architecture's suite alone."""
    return pytest.mark.parametrize("suite", [_on(name)], indirect=True)


@pytest.fixture(scope="module", params=[_on(name) for name in SUITES])
def suite(request) -> Suite:
    return SUITES[request.param]


@pytest.fixture(scope="module")
def tests_build(suite) -> Path:
    """runtime-c cross-built for the suite's architecture with its C tests and examples."""
    why = ensure_tools(suite.arch)
    assert why is None, why  # make test-<arch> installs them first: missing tools are a failure here
    return build_runtime(suite.arch, tests=True, build_dir=suite.arch.build_dir.with_name(f"cross-{suite.arch.name}-tests"))


def test_c_tests_under_qemu(tests_build):
    """Every C test (ctest runs them through the toolchain file's CMAKE_CROSSCOMPILING_EMULATOR, qemu)."""
    proc = subprocess.run(["ctest", "--test-dir", str(tests_build), "--output-on-failure", "-j", "2"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"100% tests passed, 0 tests failed out of \d+", proc.stdout), proc.stdout


def test_mlp_training_loop_in_c_matches_x86(suite, tests_build, tmp_path):
    """examples/mlp_train.py exported for the architecture and trained by kiln-train-example under qemu: every
    printed loss, the accuracy and the checkpointed state (parameters and Adam's moments) equal the x86 run's."""
    M = example("mlp_train")
    np.save(tmp_path / "x.npy", M.example_x)
    np.save(tmp_path / "y.npy", M.example_y)
    name, steps = suite.arch.name, suite.train_steps
    runs = {}
    for tag, target, command in (
            ("x86", Target.host(), [str(native_build_dir() / "kiln-train-example")]),
            (name, suite.train_target, qemu_command(suite.arch, suite.train_cpu) + [str(tests_build / "kiln-train-example")])):
        module = tmp_path / f"mlp_train.{tag}.vmfb"
        module.write_bytes(export_module(M.MLPTrain, target))
        proc = subprocess.run([*command, str(module), str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), str(steps),
                               str(tmp_path / f"checkpoint.{tag}.npz")], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "restored predictions identical: yes" in proc.stdout
        assert re.search(r"^resumed step identical: yes", proc.stdout, flags=re.M)
        runs[tag] = proc.stdout
    losses = {tag: re.findall(r"^step \d+ loss (\S+)$", out, flags=re.M) for tag, out in runs.items()}
    assert len(losses["x86"]) == steps and losses[name] == losses["x86"]
    accuracy = {tag: re.search(r"^accuracy .*$", out, flags=re.M).group(0) for tag, out in runs.items()}
    assert accuracy[name] == accuracy["x86"]
    want, got = np.load(tmp_path / "checkpoint.x86.npz"), np.load(tmp_path / f"checkpoint.{name}.npz")
    assert sorted(got.files) == sorted(want.files)
    for key in want.files:
        assert_same([got[key]], [want[key]], what=key)


@pytest.fixture(scope="module")
def sweep(suite, tmp_path_factory):
    """The op sweep exported for x86 and the suite's targets, and x86's results."""
    work = tmp_path_factory.mktemp(f"sweep_{suite.arch.name}")
    functions = sweep_functions(scale=suite.sweep_scale)
    program = program_of({name: (fn, args) for name, (fn, args, _) in functions.items()}, f"sweep_{suite.arch.name}")
    modules = {}
    for tag, target in (("x86", Target.host()), *suite.sweep_targets):
        modules[tag] = work / f"sweep.{tag}.vmfb"
        modules[tag].write_bytes(export_module(program, target))
    counts = result_counts(modules["x86"])
    want = {name: run_function([kiln_run_binary()], modules["x86"], name, args, work, counts[name], "x86")
            for name, (fn, args, _) in functions.items()}
    return functions, modules, counts, want, work


@pytest.mark.parametrize("suite, module, cpu, variant", [
    _on(name, module, cpu, variant) for name, s in SUITES.items() for module, cpu, variant in s.sweep_runs],
    indirect=["suite"], scope="module")  # module: grouped with the other tests of its suite's fixtures
def test_op_sweep_matches_x86(suite, tests_build, sweep, module, cpu, variant):
    """Every sweep function's results on the CPU model equal x86's (by kind: cross_targets.assert_same_kind); where
    a module holds several builds, the one the runtime loads there is `variant`."""
    functions, modules, counts, want, work = sweep
    kiln_run = tests_build / "kiln-run"
    if variant is not None:
        listing = run_under_qemu(suite.arch, kiln_run, f"--module={modules[module]}", "--list", cpu=cpu).stdout
        assert f"kernel image 0: variant {variant}" in listing, listing
    tag = f"{module}-{cpu or 'default'}".replace(",", "_").replace("=", "")
    for name, (fn, args, kind) in functions.items():
        got = run_function(qemu_command(suite.arch, cpu) + [str(kiln_run)], modules[module], name, args, work,
                           counts[name], tag)
        assert_same_kind(got, want[name], kind, what=f"{name} ({tag})")


def _text_disassembly(module: Path, work: Path) -> str:
    """aarch64-linux-gnu-objdump's disassembly of a module's first kernel image's text."""
    image = read_module(module.read_bytes()).kernel_images[0]
    raw = work / (module.name + ".text.bin")
    raw.write_bytes(image.code[:image.text_size])
    return subprocess.run(["aarch64-linux-gnu-objdump", "-D", "-b", "binary", "-m", "aarch64", str(raw)],
                          capture_output=True, text=True, check=True).stdout


@only("aarch64")
def test_sve_modules_use_scalable_vectors(suite, sweep):
    """The SVE variants really are SVE code (predicated, vector-length agnostic), the NEON one is not."""
    _, modules, _, _, work = sweep
    for tag in ("sve", "sve2"):
        text = _text_disassembly(modules[tag], work)
        assert re.search(r"\bwhilelo\b|\bptrue\b", text) and re.search(r"\bz\d+\.[sd]\b", text), tag
    assert not re.search(r"\bz\d+\.[sd]\b", _text_disassembly(modules["neon"], work))


@only("riscv64")
def test_every_relocation_type_runs(suite, tests_build, tmp_path):
    target = Target.portable(suite.arch.triple)[1]  # rv64gc
    assert run_relocation_kernel(suite.arch, tests_build / "kiln-run", target, tmp_path) == RELOCATION_KERNEL_RESULTS


@only("riscv64")
def test_linear_example_matches_x86(suite, tests_build, tmp_path):
    Linear = example("linear").Linear
    x = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    x86, rv = tmp_path / "linear.x86.vmfb", tmp_path / "linear.riscv64.vmfb"
    x86.write_bytes(export_module(Linear, Target.host()))
    run_kiln_cli("export", "examples/linear.py:Linear", "-o", str(rv), "--target", suite.arch.triple)
    for cpu, variant in RV_CPUS[:2]:
        listing = run_under_qemu(suite.arch, tests_build / "kiln-run", f"--module={rv}", "--list", cpu=cpu).stdout
        assert f"kernel image 0: variant {variant}" in listing, listing
        for function, outputs in (("predict", 1), ("predict_batch_mean", 2)):
            want = run_function([kiln_run_binary()], x86, function, [x], tmp_path, outputs, "x86")
            got = run_function(qemu_command(suite.arch, cpu) + [str(tests_build / "kiln-run")], rv, function, [x],
                               tmp_path, outputs, "riscv64")
            assert_same(got, want, what=f"{function} on {cpu}")


@only("riscv64")
def test_vector_build_is_refused_without_v(suite, tests_build, sweep, monkeypatch):
    _, modules, _, _, _ = sweep
    monkeypatch.setenv("KILN_CPU_VARIANT", "rv64gcv")
    proc = run_under_qemu(suite.arch, tests_build / "kiln-run", f"--module={modules['riscv64']}", "--list", cpu="rv64",
                          check=False)
    assert proc.returncode != 0
    assert "kernel image 0 variant 'rv64gcv'" in proc.stderr
    assert "requires CPU feature '+v' which this host CPU lacks (target riscv64-unknown-linux-gnu)" in proc.stderr
