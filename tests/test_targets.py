"""Targets: the CPU feature names the runtime checks (schemas/cpu_features.toml), kiln.Target, and
choosing a target for an export."""
import ctypes
import re
import platform

import llvmlite.binding as llvm
import pytest

from kiln.vm import _native
from kiln.vm._generated.cpu_features import FEATURES

HOST_ARCH = {"AMD64": "x86_64", "arm64": "aarch64"}.get(platform.machine(), platform.machine())


def _runtime():
    lib = ctypes.CDLL(_native.runtime_library_path())
    lib.kiln_host_cpu_feature.restype = ctypes.c_int
    lib.kiln_host_cpu_feature.argtypes = [ctypes.c_char_p]
    return lib


@pytest.mark.skipif(HOST_ARCH not in FEATURES, reason="the runtime detects features on x86_64 and aarch64 only")
def test_runtime_sees_every_host_feature_as_llvm_does():
    """Every name LLVM reports for this host (what Target.host() records) is one the runtime knows,
    and the runtime's answer for it is LLVM's."""
    lib = _runtime()
    host = llvm.get_host_cpu_features()
    assert host, "LLVM reports no host features"
    unknown = sorted(name for name in host if name not in FEATURES[HOST_ARCH])
    assert not unknown, f"names LLVM reports that schemas/cpu_features.toml lacks: {unknown}"
    differ = {name: (bool(value), lib.kiln_host_cpu_feature(name.encode()))
              for name, value in host.items() if lib.kiln_host_cpu_feature(name.encode()) != int(bool(value))}
    assert not differ, f"(LLVM, runtime) disagree on: {differ}"


def test_runtime_refuses_names_it_cannot_check():
    lib = _runtime()
    assert lib.kiln_host_cpu_feature(b"no-such-feature") == -1
    assert lib.kiln_host_cpu_feature(None) == -1
    other = {"x86_64": "sve", "aarch64": "avx2"}.get(HOST_ARCH)
    if other:
        assert lib.kiln_host_cpu_feature(other.encode()) == -1


def test_aarch64_names_of_llvms_host_detection_are_known():
    """LLVM's AArch64 Linux host detection reports these names (llvm/lib/TargetParser/Host.cpp)."""
    reported = ["neon", "fp-armv8", "crc", "lse", "sha3", "sm4", "sve", "sve2", "sve-aes", "sve-sha3",
                "sve-sm4", "aes", "sha2"]
    assert not [n for n in reported if n not in FEATURES["aarch64"]]


# ---- kiln.Target ----------------------------------------------------------------------------------

from kiln import Program, Target, TargetError  # noqa: E402
from kiln_tools import run_kiln_cli, run_kiln_run  # noqa: E402


def _features(target):
    return set(target.features.split(","))


def test_named_cpu_records_its_implied_features():
    v1 = Target.named("aarch64-unknown-linux-gnu", "neoverse-v1")
    assert {"+sve", "+neon", "+fullfp16", "+bf16", "+i8mm", "+dotprod"} <= _features(v1)
    assert "+sve2" not in _features(v1)
    a53 = Target.named("aarch64-unknown-linux-gnu", "cortex-a53")
    assert {"+neon", "+crc"} <= _features(a53) and "+sve" not in _features(a53)
    v3 = Target.named("x86_64-unknown-linux-gnu", "x86-64-v3")
    assert {"+avx2", "+fma", "+bmi2", "+sse4.2"} <= _features(v3) and "+avx512f" not in _features(v3)
    # given features add what they imply; removed ones stay removed (and are recorded as such)
    plus = Target.named("x86_64-unknown-linux-gnu", "x86-64", "+avx2")
    assert {"+avx2", "+avx", "+sse4.2"} <= _features(plus) and "+fma" not in _features(plus)
    minus = Target.named("x86_64-unknown-linux-gnu", "skylake-avx512", "-avx512f")
    assert "+avx512f" not in _features(minus) and "-avx512f" in _features(minus) and "+avx2" in _features(minus)
    # every recorded name is one the runtime can check
    for t in (v1, a53, v3, plus):
        assert {f[1:] for f in _features(t)} <= set(FEATURES[t.arch])


@pytest.mark.parametrize("args, message", [
    (("foo-bar",), "unknown target triple 'foo-bar'"),
    (("x86_64-unknown-linux-gnu", "nocpu"), "unknown CPU 'nocpu' for x86_64-unknown-linux-gnu"),
    (("x86_64-unknown-linux-gnu", "generic", "+nofeature"), "unknown CPU feature '+nofeature'"),
    (("x86_64-unknown-linux-gnu", "generic", "avx2"), "comma-separated list of +name or -name"),
])
def test_named_target_errors(args, message):
    with pytest.raises(TargetError, match=re.escape(message)):
        Target.named(*args)


def test_portable_variants_and_parse():
    x86 = Target.portable("x86_64-unknown-linux-gnu")
    assert [t.variant for t in x86] == ["x86-64-v4", "x86-64-v3", "x86-64-v2"]
    assert "+avx512f" in _features(x86[0]) and "+fma" in _features(x86[1]) and "+avx" not in _features(x86[2])
    arm = Target.portable("aarch64-unknown-linux-gnu")
    assert [t.variant for t in arm] == ["aarch64-sve", "aarch64-neon"] and "+sve" in _features(arm[0])
    assert Target.parse("host") == Target.host() and Target.host().variant == "host"
    assert Target.parse("aarch64-unknown-linux-gnu") == arm
    assert Target.parse("aarch64-unknown-linux-gnu", "cortex-a76").cpu == "cortex-a76"
    with pytest.raises(TargetError, match="--target host means this machine exactly"):
        Target.parse("host", "znver4")


def test_kernel_cache_key_includes_the_target():
    from kiln.compiler.cache import kernel_key

    keys = {kernel_key("region", [(4, False)], t) for t in Target.portable("x86_64-unknown-linux-gnu")}
    assert len(keys) == 3


@pytest.mark.parametrize("args, message", [
    (["--target", "foo-bar"], "unknown target triple 'foo-bar'"),
    (["--target", "x86_64-unknown-linux-gnu", "--cpu", "nocpu"], "unknown CPU 'nocpu'"),
    (["--target", "x86_64-unknown-linux-gnu", "--features", "+nofeature"], "unknown CPU feature '+nofeature'"),
    (["--cpu", "znver4"], "--cpu and --features need --target TRIPLE"),
])
def test_cli_target_errors(tmp_path, args, message):
    proc = run_kiln_cli("export", "examples/linear.py:Linear", "-o", str(tmp_path / "m.vmfb"), *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "m.vmfb").exists()
