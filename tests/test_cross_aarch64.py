"""aarch64 verified by running: kiln-run cross-built for aarch64 runs modules compiled for aarch64 under
qemu-user, and their results are this machine's (bit for bit except a NaN's sign; reductions within
cross_targets.REDUCTION_ULPS; the native factorizations within cross_targets.LINALG_RTOL). The short part, for `make test`: it installs the cross tools when missing
(tests/install_cross_tools.sh, Debian packages) and is skipped only where they cannot be installed (not
root, no apt-get). `make test-aarch64` runs the long suite (tests/cross_suite.py's aarch64 tests): the C tests under qemu,
the MLP training loop in C, larger sweeps, SVE at five vector lengths. docs/targets.md, docs/testing.md."""
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from cross_targets import (ARCHES, INSTALL_SCRIPT, RELOCATION_KERNEL_RESULTS, aarch64_target, assert_same,
                           assert_same_kind, build_runtime, ensure_tools, export_module, finish_export, program_of,
                           qemu_command, result_counts, run_function, run_functions, run_relocation_kernel,
                           run_under_qemu, start_sweep_export, sweep_functions, tools_present)
from kiln.compiler.target import Target
from kiln.vm.reader import read_module
from kiln_tools import example, kiln_run_binary, run_kiln_cli

ARCH = ARCHES["aarch64"]
SVE_LENGTHS = (4,)  # qemu's sve-max-vq: 512-bit vectors (test_linear_example_matches_x86 runs 256; the long suite 1-16)


@pytest.fixture(scope="module")
def kiln_run_aarch64() -> Path:
    why = ensure_tools(ARCH)
    if why:
        pytest.skip(f"the aarch64 cross tools are missing and cannot be installed here: {why}")
    return build_runtime(ARCH) / "kiln-run"


def test_install_script_checks_and_refuses_unknown_architectures():
    """tests/install_cross_tools.sh --check says whether the tools are there without installing anything, and an
    unknown argument is an error naming the ones it knows."""
    proc = subprocess.run(["bash", str(INSTALL_SCRIPT), "--check", "aarch64"], capture_output=True, text=True)
    assert proc.returncode == (0 if tools_present(ARCH) else 1), proc.stderr
    if proc.returncode:
        assert proc.stderr.startswith("missing cross tools: ")
    proc = subprocess.run(["bash", str(INSTALL_SCRIPT), "sparc64"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "unknown argument 'sparc64' (expected --check, aarch64 or riscv64)" in proc.stderr


def test_every_relocation_type_runs(kiln_run_aarch64, tmp_path):
    """The kernel using every aarch64 relocation the linker resolves, loaded by the aarch64 runtime (which
    applies the ABS64 ones) and run: each of its results came through one relocation."""
    assert run_relocation_kernel(ARCH, kiln_run_aarch64, aarch64_target(), tmp_path) == RELOCATION_KERNEL_RESULTS


def test_linear_example_matches_x86(kiln_run_aarch64, tmp_path):
    """`kiln export --target aarch64-unknown-linux-gnu` of examples/linear.py (its SVE and NEON builds) runs on a
    CPU without SVE and on one with it, with x86's results."""
    Linear = example("linear").Linear
    x = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    modules = {"x86": tmp_path / "linear.x86.vmfb", "aarch64": tmp_path / "linear.aarch64.vmfb"}
    modules["x86"].write_bytes(export_module(Linear, Target.host()))
    run_kiln_cli("export", "examples/linear.py:Linear", "-o", str(modules["aarch64"]), "--target", ARCH.triple)
    for cpu, variant in (("cortex-a53", "aarch64-neon"), ("max,sve-max-vq=2", "aarch64-sve")):
        listing = run_under_qemu(ARCH, kiln_run_aarch64, f"--module={modules['aarch64']}", "--list", cpu=cpu).stdout
        assert "predict_batch_mean" in listing and f"kernel image 0: variant {variant}" in listing, listing
        for function, outputs in (("predict", 1), ("predict_batch_mean", 2)):
            want = run_function([kiln_run_binary()], modules["x86"], function, [x], tmp_path, outputs, "x86")
            got = run_function(qemu_command(ARCH, cpu) + [str(kiln_run_aarch64)], modules["aarch64"], function, [x],
                               tmp_path, outputs, "aarch64")
            assert_same(got, want, what=f"{function} on {cpu}")


def test_named_cpu_modules_load_without_non_gating_features(kiln_run_aarch64, tmp_path):
    """A module for --cpu cortex-a76 records +ssbs, one for neoverse-v1 +dit and +ssbs (the full effective
    list), which qemu 7.2's cortex-a76 and max models do not report (AT_HWCAP bits 28, 24): those features
    do not gate loading (schemas/cpu_features.toml), so each loads there and computes x86's results. Hiding
    a gating feature it records (KILN_HIDE_CPU_FEATURES) refuses it by name."""
    Linear = example("linear").Linear
    x = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    native = tmp_path / "linear.x86.vmfb"
    native.write_bytes(export_module(Linear, Target.host()))
    want = run_function([kiln_run_binary()], native, "predict", [x], tmp_path, 1, "x86")
    for cpu, qemu_cpu, non_gating, gating in (("cortex-a76", "cortex-a76", "+ssbs", "dotprod"),
                                              ("neoverse-v1", "max", "+dit", "sve")):
        path = tmp_path / f"linear.{cpu}.vmfb"
        path.write_bytes(export_module(Linear, Target.named(ARCH.triple, cpu)))
        assert non_gating in read_module(path.read_bytes()).kernel_images[0].cpu_features.split(",")
        listing = run_under_qemu(ARCH, kiln_run_aarch64, f"--module={path}", "--list", cpu=qemu_cpu).stdout
        assert f"kernel image 0: variant {cpu}" in listing, listing
        got = run_function(qemu_command(ARCH, qemu_cpu) + [str(kiln_run_aarch64)], path, "predict", [x], tmp_path,
                           1, cpu)
        assert_same(got, want, what=f"{cpu} on qemu {qemu_cpu}")
        proc = subprocess.run(qemu_command(ARCH, qemu_cpu) + [str(kiln_run_aarch64), f"--module={path}", "--list"],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "KILN_HIDE_CPU_FEATURES": f"ssbs,dit,{gating}"})
        assert proc.returncode != 0
        assert f"requires CPU feature '+{gating}' which this host CPU lacks" in proc.stderr, proc.stderr


def test_streamed_row_outputs_match_x86(kiln_run_aarch64, tmp_path, monkeypatch):
    """A row-fused softmax whose outputs (1 MiB of float32 and of float16, rows of 1024) the runtime is told
    are larger than its last-level cache (KILN_LAST_LEVEL_CACHE=64K) writes them with stnp pairs on aarch64
    (codegen/row_fused: non-temporal stores) and gives x86's bits, streamed there too."""
    import kiln.nn as nn

    x = (np.random.default_rng(7).standard_normal((260, 1024)) * 3).astype(np.float32)
    x[3, 5], x[4, :] = np.nan, -np.inf

    def fn(a):
        s = nn.softmax(a, axis=-1)
        return [s, s.astype(np.float16)]

    program = program_of({"softmax": (fn, [x])}, "stream")
    target = aarch64_target(cpu="cortex-a53")
    modules = {"x86": tmp_path / "stream.x86.vmfb", "aarch64": tmp_path / "stream.aarch64.vmfb"}
    modules["x86"].write_bytes(export_module(program, Target.host()))
    modules["aarch64"].write_bytes(export_module(program, target))
    image = read_module(modules["aarch64"].read_bytes()).kernel_images[0]
    words = np.frombuffer(image.code[:image.text_size - image.text_size % 4], "<u4")
    assert np.any((words >> 22) == 0b1010110000), "no stnp of q registers in the aarch64 kernel"
    monkeypatch.setenv("KILN_LAST_LEVEL_CACHE", "64K")
    want = run_function([kiln_run_binary()], modules["x86"], "softmax", [x], tmp_path, 2, "x86")
    got = run_function(qemu_command(ARCH, "cortex-a53") + [str(kiln_run_aarch64)], modules["aarch64"], "softmax",
                       [x], tmp_path, 2, "aarch64")
    assert_same(got, want, what="streamed softmax")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The op sweep's functions, its module for x86 (this host) and the default (portable) aarch64 module, with
    an SVE and a NEON build of every kernel (format 2.4 variants), and the x86 results."""
    work = tmp_path_factory.mktemp("sweep")
    functions = sweep_functions()
    program = program_of({name: (fn, args) for name, (fn, args, _) in functions.items()}, "sweep")
    modules = {"x86": work / "sweep.x86.vmfb", "aarch64": work / "sweep.aarch64.vmfb"}
    # the aarch64 module (a triple alone: its portable SVE and NEON builds) compiles in another process meanwhile
    other = start_sweep_export(modules["aarch64"], ARCH.triple)
    try:
        modules["x86"].write_bytes(export_module(program, Target.host()))
        counts = result_counts(modules["x86"])
        want = run_functions([kiln_run_binary()], modules["x86"], functions, counts, work, "x86")
    except BaseException:
        other.kill()
        other.wait()
        raise
    finish_export(other)
    return functions, modules, counts, want, work


@pytest.mark.parametrize("cpu, variant", [("cortex-a53", "aarch64-neon"),
                                          *[(f"max,sve-max-vq={vq}", "aarch64-sve") for vq in SVE_LENGTHS]])
def test_op_sweep_matches_x86(kiln_run_aarch64, sweep, cpu, variant):
    """Every kernel strategy (elementwise, reductions, split reductions, row-fused, matmul, conv, pooling,
    structural, control flow): bit-identical to x86 except reductions that reassociate by vector width. The
    runtime loads the SVE build where the CPU has SVE, else the NEON one."""
    functions, modules, counts, want, work = sweep
    listing = run_under_qemu(ARCH, kiln_run_aarch64, f"--module={modules['aarch64']}", "--list", cpu=cpu).stdout
    assert f"kernel image 0: variant {variant}" in listing, listing
    command = qemu_command(ARCH, cpu) + [str(kiln_run_aarch64)]
    tag = cpu.replace(",", "_").replace("=", "")
    results = run_functions(command, modules["aarch64"], functions, counts, work, tag)  # a qemu per core at once
    for name, (fn, args, kind) in functions.items():
        assert_same_kind(results[name], want[name], kind, what=f"{name} ({tag})")


def test_sve_build_is_refused_without_sve(kiln_run_aarch64, sweep, monkeypatch):
    """Forced onto a CPU without SVE (KILN_CPU_VARIANT), the SVE build does not load: the runtime reads the
    hwcaps and names a missing feature."""
    _, modules, _, _, _ = sweep
    monkeypatch.setenv("KILN_CPU_VARIANT", "aarch64-sve")
    proc = run_under_qemu(ARCH, kiln_run_aarch64, f"--module={modules['aarch64']}", "--list", cpu="cortex-a72",
                          check=False)
    assert proc.returncode != 0
    # SVE implies FP16 arithmetic (LLVM's feature model), which cortex-a72 lacks too: the first missing one is named
    assert re.search(r"kernel image 0 variant 'aarch64-sve' \(target 'aarch64-unknown-linux-gnu', features '[^']*\+sve\b",
                     proc.stderr), proc.stderr
    assert re.search(r"requires CPU feature '\+(sve|fullfp16)' which this host CPU lacks", proc.stderr), proc.stderr
