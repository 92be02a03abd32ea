"""Targets: the CPU feature names the runtime checks (schemas/cpu_features.toml), kiln.Target, and
choosing a target for an export."""
import ctypes
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
