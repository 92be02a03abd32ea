"""The riscv64 suite, run by `make test-riscv64` (not collected by `make test`: the file name does not start
with test_). Under qemu-riscv64, against this machine's results: the runtime's C tests, the relocation kernel, the MLP
training loop in C, examples/linear.py exported with `kiln export --target riscv64-unknown-linux-gnu` and the op sweep, each on
a CPU without the vector extension (the runtime loads the rv64gc build) and with it at several vector lengths
(the rv64gcv build). docs/targets.md.

    make test-riscv64        # installs the cross tools, then runs this file
"""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cross_targets import (ARCHES, REDUCTION_ULPS, RELOCATION_KERNEL_RESULTS, assert_same, build_runtime, ensure_tools,
                           export_module, program_of, qemu_command, relocation_kernel_object, relocation_module,
                           result_counts, run_function, run_under_qemu, sweep_functions)
from kiln.compiler.link import link_object
from kiln.compiler.target import Target
from kiln_tools import ROOT, kiln_run_binary, run_kiln_cli
from runtime_tools import native_build_dir

ARCH = ARCHES["riscv64"]
CPUS = [("rv64", "rv64gc"), *[(f"rv64,v=true,vlen={n}", "rv64gcv") for n in (128, 256, 512)]]


@pytest.fixture(scope="module")
def tests_build() -> Path:
    why = ensure_tools(ARCH)
    assert why is None, why  # make test-riscv64 installs them first: missing tools are a failure here
    return build_runtime(ARCH, tests=True, build_dir=ARCH.build_dir.with_name("cross-riscv64-tests"))


def test_c_tests_under_qemu(tests_build):
    proc = subprocess.run(["ctest", "--test-dir", str(tests_build), "--output-on-failure", "-j", "2"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"100% tests passed, 0 tests failed out of \d+", proc.stdout), proc.stdout


def test_every_relocation_type_runs(tests_build, tmp_path):
    target = Target.portable(ARCH.triple)[1]
    path = tmp_path / "relocations.vmfb"
    path.write_bytes(relocation_module(link_object(relocation_kernel_object(target), target)))
    out = tmp_path / "out.npy"
    run_under_qemu(ARCH, tests_build / "kiln-run", f"--module={path}", "--function=run", f"--output=@{out}")
    assert np.load(out).tolist() == RELOCATION_KERNEL_RESULTS


def test_linear_example_matches_x86(tests_build, tmp_path):
    sys.path.insert(0, str(Path(ROOT) / "examples"))
    try:
        from linear import Linear
    finally:
        sys.path.pop(0)
    x = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    x86, rv = tmp_path / "linear.x86.vmfb", tmp_path / "linear.riscv64.vmfb"
    x86.write_bytes(export_module(Linear, Target.host()))
    run_kiln_cli("export", "examples/linear.py:Linear", "-o", str(rv), "--target", ARCH.triple)
    for cpu, variant in CPUS[:2]:
        listing = run_under_qemu(ARCH, tests_build / "kiln-run", f"--module={rv}", "--list", cpu=cpu).stdout
        assert f"kernel image 0: variant {variant}" in listing, listing
        for function, outputs in (("predict", 1), ("predict_batch_mean", 2)):
            want = run_function([kiln_run_binary()], x86, function, [x], tmp_path, outputs, "x86")
            got = run_function(qemu_command(ARCH, cpu) + [str(tests_build / "kiln-run")], rv, function, [x], tmp_path,
                               outputs, "riscv64")
            assert_same(got, want, what=f"{function} on {cpu}")


def test_mlp_training_loop_in_c_matches_x86(tests_build, tmp_path):
    """examples/mlp_train.py exported for riscv64 (rv64gcv loaded) and trained 20 steps by kiln-train-example
    under qemu: every loss, the accuracy and the checkpoint equal the x86 run's."""
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
            ("riscv64", ARCH.triple, qemu_command(ARCH, CPUS[1][0]) + [str(tests_build / "kiln-train-example")])):
        module = tmp_path / f"mlp_train.{tag}.vmfb"
        module.write_bytes(export_module(M.MLPTrain, target))
        proc = subprocess.run([*command, str(module), str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "20",
                               str(tmp_path / f"checkpoint.{tag}.npz")], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert re.search(r"^resumed step identical: yes", proc.stdout, flags=re.M)
        runs[tag] = proc.stdout
    losses = {tag: re.findall(r"^step \d+ loss (\S+)$", out, flags=re.M) for tag, out in runs.items()}
    assert len(losses["x86"]) == 20 and losses["riscv64"] == losses["x86"]
    want, got = np.load(tmp_path / "checkpoint.x86.npz"), np.load(tmp_path / "checkpoint.riscv64.npz")
    assert sorted(got.files) == sorted(want.files)
    for name in want.files:
        assert_same([got[name]], [want[name]], what=name)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    work = tmp_path_factory.mktemp("sweep_riscv64")
    functions = sweep_functions()
    program = program_of({name: (fn, args) for name, (fn, args, _) in functions.items()}, "sweep_rv")
    modules = {"x86": work / "sweep.x86.vmfb", "riscv64": work / "sweep.riscv64.vmfb"}
    modules["x86"].write_bytes(export_module(program, Target.host()))
    modules["riscv64"].write_bytes(export_module(program, ARCH.triple))
    counts = result_counts(modules["x86"])
    want = {name: run_function([kiln_run_binary()], modules["x86"], name, args, work, counts[name], "x86")
            for name, (fn, args, _) in functions.items()}
    return functions, modules, counts, want, work


@pytest.mark.parametrize("cpu, variant", CPUS)
def test_op_sweep_matches_x86(tests_build, sweep, cpu, variant):
    functions, modules, counts, want, work = sweep
    kiln_run = tests_build / "kiln-run"
    listing = run_under_qemu(ARCH, kiln_run, f"--module={modules['riscv64']}", "--list", cpu=cpu).stdout
    assert f"kernel image 0: variant {variant}" in listing, listing
    tag = cpu.replace(",", "_").replace("=", "")
    for name, (fn, args, kind) in functions.items():
        got = run_function(qemu_command(ARCH, cpu) + [str(kiln_run)], modules["riscv64"], name, args, work,
                           counts[name], tag)
        assert_same(got, want[name], max_ulps=REDUCTION_ULPS if kind == "reduction" else 0, what=f"{name} ({tag})")


def test_vector_build_is_refused_without_v(tests_build, sweep, monkeypatch):
    _, modules, _, _, _ = sweep
    monkeypatch.setenv("KILN_CPU_VARIANT", "rv64gcv")
    proc = run_under_qemu(ARCH, tests_build / "kiln-run", f"--module={modules['riscv64']}", "--list", cpu="rv64",
                          check=False)
    assert proc.returncode != 0
    assert "kernel image 0 variant 'rv64gcv'" in proc.stderr
    assert "requires CPU feature '+v' which this host CPU lacks (target riscv64-unknown-linux-gnu)" in proc.stderr
