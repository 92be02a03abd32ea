"""Compilation targets: an LLVM triple, a CPU name and a feature string."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import llvmlite.binding as llvm

_SEGMENT_ALIGN = {"x86_64": 4096, "aarch64": 65536}


@functools.cache
def initialize_llvm() -> None:
    """Registers every target LLVM was built with (idempotent)."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


@dataclass(frozen=True)
class Target:
    """What code is generated for: `features` is LLVM's "+avx2,+fma,..." form."""

    triple: str
    cpu: str = "generic"
    features: str = ""

    @staticmethod
    def host() -> "Target":
        initialize_llvm()
        raw = llvm.get_host_cpu_features().flatten()
        enabled = sorted(f for f in raw.split(",") if f.startswith("+"))
        return Target(llvm.get_process_triple(), llvm.get_host_cpu_name(), ",".join(enabled))

    @staticmethod
    def named(triple: str, cpu: str = "generic", features: str = "") -> "Target":
        """Another machine, e.g. Target.named("aarch64-unknown-linux-gnu", "cortex-a76", "+neon")."""
        return Target(triple, cpu, features)

    @property
    def arch(self) -> str:
        arch = self.triple.split("-", 1)[0]
        return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)

    @property
    def segment_align(self) -> int:
        return _SEGMENT_ALIGN.get(self.arch, 65536)

    def has_feature(self, name: str) -> bool:
        return f"+{name}" in self.features.split(",")

    @property
    def vector_bytes(self) -> int:
        """Width of the widest vector registers code for this target uses."""
        if self.arch == "x86_64":
            if self.has_feature("avx512f"):
                return 64
            if self.has_feature("avx"):
                return 32
            return 16
        return 16

    @property
    def vector_registers(self) -> int:
        if self.arch == "x86_64":
            return 32 if self.has_feature("avx512f") else 16
        return 32

    def target_machine(self, *, opt: int = 3):
        """An llvmlite TargetMachine: PIC, small code model (one per target and level, reused)."""
        return _target_machine(self.triple, self.cpu, self.features, opt)


@functools.cache
def _target_machine(triple: str, cpu: str, features: str, opt: int):
    initialize_llvm()
    target = llvm.Target.from_triple(triple)
    return target.create_target_machine(cpu=cpu, features=features, opt=opt, reloc="pic", codemodel="small")
