"""aarch64 verified by running: kiln-run cross-built for aarch64 runs modules compiled for aarch64 under
qemu-user, and their results are this machine's (bit for bit except a NaN's sign; reductions within
cross_targets.REDUCTION_ULPS). The short part, for `make test`: it installs the cross tools when missing
(tests/install_cross_tools.sh, Debian packages) and is skipped only where they cannot be installed (not
root, no apt-get). `make test-aarch64` runs the long suite (tests/cross_suite.py): the C tests under qemu,
the MLP training loop in C, larger sweeps, SVE at five vector lengths. docs/targets.md, docs/testing.md."""
import sys
from pathlib import Path

import numpy as np
import pytest

from cross_targets import (ARCHES, REDUCTION_ULPS, RELOCATION_KERNEL_RESULTS, aarch64_target, assert_same,
                           build_runtime, ensure_tools, export_module, program_of, result_counts, qemu_command,
                           relocation_kernel_object, relocation_module, run_function, run_under_qemu,
                           sweep_functions)
from kiln.compiler.link import link_object
from kiln.compiler.target import Target
from kiln_tools import ROOT, kiln_run_binary

ARCH = ARCHES["aarch64"]
SVE_LENGTHS = (1, 4)  # qemu's sve-max-vq: 128 and 512-bit vectors (the long suite runs 1, 2, 4, 8, 16)


@pytest.fixture(scope="module")
def kiln_run_aarch64() -> Path:
    why = ensure_tools(ARCH)
    if why:
        pytest.skip(f"the aarch64 cross tools are missing and cannot be installed here: {why}")
    return build_runtime(ARCH) / "kiln-run"


def test_every_relocation_type_runs(kiln_run_aarch64, tmp_path):
    """The kernel using every aarch64 relocation the linker resolves, loaded by the aarch64 runtime (which
    applies the ABS64 ones) and run: each of its results came through one relocation."""
    target = aarch64_target()
    path = tmp_path / "relocations.vmfb"
    path.write_bytes(relocation_module(link_object(relocation_kernel_object(target), target)))
    out = tmp_path / "out.npy"
    run_under_qemu(ARCH, kiln_run_aarch64, f"--module={path}", "--function=run", f"--output=@{out}")
    assert np.load(out).tolist() == RELOCATION_KERNEL_RESULTS


def test_linear_example_matches_x86(kiln_run_aarch64, tmp_path):
    sys.path.insert(0, str(Path(ROOT) / "examples"))
    try:
        from linear import Linear
    finally:
        sys.path.pop(0)
    x = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    modules = {}
    for tag, target in (("x86", Target.host()), ("aarch64", aarch64_target())):
        modules[tag] = tmp_path / f"linear.{tag}.vmfb"
        modules[tag].write_bytes(export_module(Linear, target))
    listing = run_under_qemu(ARCH, kiln_run_aarch64, f"--module={modules['aarch64']}", "--list").stdout
    assert "predict" in listing
    for function, outputs in (("predict", 1), ("predict_batch_mean", 2)):
        want = run_function([kiln_run_binary()], modules["x86"], function, [x], tmp_path, outputs, "x86")
        got = run_function(qemu_command(ARCH) + [str(kiln_run_aarch64)], modules["aarch64"], function, [x],
                           tmp_path, outputs, "aarch64")
        assert_same(got, want, what=function)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The op sweep's functions, its modules for x86 (this host), aarch64 NEON and aarch64 SVE, and the x86
    results."""
    work = tmp_path_factory.mktemp("sweep")
    functions = sweep_functions()
    program = program_of({name: (fn, args) for name, (fn, args, _) in functions.items()}, "sweep")
    modules = {}
    for tag, target in (("x86", Target.host()), ("neon", aarch64_target()), ("sve", aarch64_target("+sve"))):
        modules[tag] = work / f"sweep.{tag}.vmfb"
        modules[tag].write_bytes(export_module(program, target))
    counts = result_counts(modules["x86"])
    want = {name: run_function([kiln_run_binary()], modules["x86"], name, args, work, counts[name], "x86")
            for name, (fn, args, _) in functions.items()}
    return functions, modules, counts, want, work


@pytest.mark.parametrize("variant, cpu", [("neon", None), ("neon", "cortex-a53"),
                                          *[("sve", f"max,sve-max-vq={vq}") for vq in SVE_LENGTHS]])
def test_op_sweep_matches_x86(kiln_run_aarch64, sweep, variant, cpu):
    """Every kernel strategy (elementwise, reductions, split reductions, row-fused, matmul, conv, pooling,
    structural, control flow): bit-identical to x86 except reductions that reassociate by vector width."""
    functions, modules, counts, want, work = sweep
    command = qemu_command(ARCH, cpu) + [str(kiln_run_aarch64)]
    tag = f"{variant}-{cpu or 'default'}".replace(",", "_").replace("=", "")
    for name, (fn, args, kind) in functions.items():
        got = run_function(command, modules[variant], name, args, work, counts[name], tag)
        assert_same(got, want[name], max_ulps=REDUCTION_ULPS if kind == "reduction" else 0, what=f"{name} ({tag})")


def test_sve_module_is_refused_without_sve(kiln_run_aarch64, sweep):
    """A module whose kernels need SVE does not load on a CPU without it (the runtime reads the hwcaps)."""
    _, modules, _, _, _ = sweep
    proc = run_under_qemu(ARCH, kiln_run_aarch64, f"--module={modules['sve']}", "--list", cpu="cortex-a72",
                          check=False)
    assert proc.returncode != 0
    assert "requires CPU feature '+sve' which this host CPU lacks (target aarch64-unknown-linux-gnu)" in proc.stderr
