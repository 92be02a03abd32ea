"""Compilation targets: an LLVM triple, a CPU name and a feature string (kiln.Target).

`Target.host()` is this machine exactly; `Target.named(triple, cpu, features)` another one, checked
against LLVM (an unknown triple, CPU or feature is a TargetError) and recording its full effective
feature list: the CPU's implied features as well as the ones given, so the runtime refuses the
module on a CPU that lacks any of them (except the features schemas/cpu_features.toml marks
gates_load = false, which add no instruction kiln's kernels use: NON_GATING). `Target.portable(triple)` is the default export's variants:
x86-64-v4, v3 and v2 for x86_64, SVE and NEON for aarch64, best first (docs/targets.md).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass, replace

import llvmlite.binding as llvm

_SEGMENT_ALIGN = {"x86_64": 4096, "aarch64": 65536, "riscv64": 4096}


@functools.cache
def initialize_llvm() -> None:
    """Registers every target LLVM was built with (idempotent)."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


class TargetError(ValueError):
    """A target that LLVM or kiln cannot generate code for: an unknown triple, CPU or feature."""


@dataclass(frozen=True)
class Target:
    """What code is generated for: `features` is LLVM's "+avx2,+fma,..." form; `variant` names the
    build in a module with several (format 2.4: "x86-64-v3", "host")."""

    triple: str
    cpu: str = "generic"
    features: str = ""
    variant: str = ""

    @staticmethod
    def host() -> "Target":
        """This machine exactly: its triple, CPU and every feature LLVM detects on it."""
        return _host_target()

    @staticmethod
    def named(triple: str, cpu: str = "generic", features: str = "", variant: str = "") -> "Target":
        """Another machine, e.g. Target.named("aarch64-unknown-linux-gnu", "cortex-a76", "+sve").

        `features` adds (+name) or removes (-name) features of the CPU. The target records the full
        effective list (the CPU's own features, what the given ones imply, less the removed ones),
        so a module for cpu="neoverse-v1" needs SVE on the machine that loads it. Raises TargetError
        for a triple, CPU or feature LLVM does not know."""
        triple, cpu, features = str(triple).strip(), str(cpu or "generic").strip(), _normalize_features(features)
        if _arch_of(triple) == "riscv64":
            features = _riscv64_baseline(features)
        effective = _effective_features(triple, cpu, features)
        removed = [f for f in features.split(",") if f.startswith("-")]
        return Target(triple, cpu, ",".join(effective + removed), variant or (cpu if cpu != "generic" else ""))

    @staticmethod
    def portable(triple: str | None = None) -> tuple["Target", ...]:
        """The variants a default export carries for `triple`'s architecture (the host's by default),
        best first: x86-64-v4 (AVX-512), v3 (AVX2, FMA) and v2 for x86_64; SVE and NEON for aarch64;
        the generic CPU alone for any other architecture."""
        triple = triple or _host_triple()
        arch = _arch_of(triple)
        return tuple(Target.named(triple, cpu, features, variant)
                     for cpu, features, variant in _PORTABLE.get(arch, (("generic", "", arch),)))

    @staticmethod
    def parse(target: str, cpu: str | None = None, features: str | None = None):
        """A target as `kiln export --target` names it: "host" (this machine exactly), "portable"
        (Target.portable() of this machine's architecture) or an LLVM triple, with `cpu` and
        `features` (a triple alone gives Target.portable(triple)). Returns a Target or a tuple of
        variants."""
        target = (target or "").strip()
        if target == "host":
            if cpu or features:
                raise TargetError("--target host means this machine exactly: it takes no --cpu or --features "
                                  "(name the triple to choose a CPU)")
            return Target.host()
        if target == "portable":
            if cpu or features:
                raise TargetError("--target portable takes no --cpu or --features (name the triple to choose a CPU)")
            return Target.portable()
        if not target:
            raise TargetError("empty target: expected 'host', 'portable' or an LLVM triple such as "
                              "x86_64-unknown-linux-gnu")
        if cpu is None and features is None:
            return Target.portable(target)
        return Target.named(target, cpu or "generic", features or "")

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
    if _arch_of(triple) == "riscv64":
        # No linker relaxation: the assembler resolves branches within a section itself and emits no
        # R_RISCV_ALIGN, which kiln.compiler.link does not implement (it would have to delete bytes).
        features = ",".join(f for f in (features, "-relax") if f)
    return target.create_target_machine(cpu=cpu, features=features, opt=opt, reloc="pic", codemodel="small")


# (cpu, features, variant name) of each architecture's portable variants, best first.
_PORTABLE = {
    "x86_64": (("x86-64-v4", "", "x86-64-v4"), ("x86-64-v3", "", "x86-64-v3"), ("x86-64-v2", "", "x86-64-v2")),
    "aarch64": (("generic", "+sve", "aarch64-sve"), ("generic", "", "aarch64-neon")),
    "riscv64": (("generic-rv64", "+m,+a,+f,+d,+c,+v", "rv64gcv"), ("generic-rv64", "+m,+a,+f,+d,+c", "rv64gc")),
}

# riscv64 Linux's baseline, RV64GC: every riscv64 Linux distribution requires it, so a named riscv64 target
# has it whatever its CPU (LLVM's generic-rv64 is RV64I alone). A kernel image links no libgcc helper: without
# M, LLVM calls __muldi3 and __udivdi3 for 64-bit products and quotients (index arithmetic has them), without
# F and D the soft-float ones; those three cannot be removed. A and C can.
_RISCV64_BASELINE = ("m", "a", "f", "d", "c")
_RISCV64_REQUIRED = ("m", "f", "d")


def _riscv64_baseline(features: str) -> str:
    items = features.split(",") if features else []
    removed = {f[1:] for f in items if f.startswith("-")}
    refused = [name for name in _RISCV64_REQUIRED if name in removed]
    if refused:
        raise TargetError(f"riscv64 kernels need the {', '.join(n.upper() for n in refused)} extension"
                          f"{'s' if len(refused) > 1 else ''} (-{', -'.join(refused)} given): a kernel image "
                          f"links no libgcc helper (without M, 64-bit products and quotients are calls to "
                          f"__muldi3 and __udivdi3; without F and D, float arithmetic is soft-float calls), and "
                          f"riscv64 Linux requires RV64GC")
    return ",".join([f"+{name}" for name in _RISCV64_BASELINE if name not in removed and f"+{name}" not in items]
                    + items)


TARGET_ENV = "KILN_TARGET"
"""The environment variable that sets the default export target: "host", "portable" (the default)
or an LLVM triple (tests/conftest.py sets "host", so only the portability tests compile variants)."""


def default_export_target():
    """What an export compiles for when no target is given: $KILN_TARGET, else Target.portable()."""
    value = os.environ.get(TARGET_ENV, "").strip()
    try:
        return Target.parse(value or "portable")
    except TargetError as e:
        raise TargetError(f"{TARGET_ENV}={value!r}: {e}") from None


def resolve_targets(target) -> tuple[Target, ...]:
    """The variants (best first) that `target` means: None (the default export target), a Target,
    "host", "portable", a triple, or a sequence of Targets."""
    if target is None:
        target = default_export_target()
    if isinstance(target, str):
        target = Target.parse(target)
    if isinstance(target, Target):
        return (target,)
    targets = tuple(target)
    if not targets or not all(isinstance(t, Target) for t in targets):
        raise TargetError(f"expected a kiln.Target, a sequence of them, 'host', 'portable' or a triple; got {target!r}")
    names = [t.variant for t in targets]
    if len(targets) > 1 and (len(set(names)) != len(names) or not all(names)):
        raise TargetError(f"the variants of a module need distinct, non-empty names; got {names}")
    if len({t.arch for t in targets}) > 1:
        raise TargetError(f"the variants of a module must share one architecture; got {[t.triple for t in targets]}")
    return targets


@functools.cache
def _host_target() -> Target:
    """The host's triple and CPU, the features LLVM detects, and "-name" for each feature the CPU's
    name implies that the host lacks (a virtual machine may hide some), so code for it uses none."""
    initialize_llvm()
    triple, cpu = llvm.get_process_triple(), llvm.get_host_cpu_name()
    detected = llvm.get_host_cpu_features()
    enabled = sorted("+" + name for name, on in detected.items() if on)
    try:
        implied = _effective_features(triple, cpu, "")
    except TargetError:  # a CPU name this LLVM reports but does not know: its features alone
        implied = []
    missing = sorted("-" + f[1:] for f in implied if detected.get(f[1:], True) is False)
    return Target(triple, cpu, ",".join(enabled + missing), "host")


def _host_triple() -> str:
    initialize_llvm()
    return llvm.get_process_triple()


def _arch_of(triple: str) -> str:
    arch = triple.split("-", 1)[0]
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def _normalize_features(features) -> str:
    if isinstance(features, (list, tuple)):
        features = ",".join(features)
    items = [f.strip() for f in str(features or "").split(",") if f.strip()]
    bad = [f for f in items if f[0] not in "+-" or not re.fullmatch(r"[+-][A-Za-z0-9_.\-]+", f)]
    if bad:
        raise TargetError(f"CPU features must be a comma-separated list of +name or -name (LLVM's names, "
                          f"e.g. +avx2,+fma); got {bad[0]!r}")
    return ",".join(items)


_STDERR_LOCK = threading.Lock()


def _llvm_warnings(fn) -> str:
    """What LLVM writes to stderr while `fn` runs (its unknown CPU/feature warnings). One thread at a
    time: two threads swapping file descriptor 2 could leave it pointing at a deleted file."""
    sys.stderr.flush()
    with _STDERR_LOCK, tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode(errors="replace")


@functools.cache
def _recognized(triple: str) -> tuple[str, ...]:
    """The runtime's feature names for `triple`'s architecture that this LLVM knows."""
    from kiln.vm._generated.cpu_features import FEATURES

    names = FEATURES.get(_arch_of(triple), ())
    if not names:
        return ()
    target = llvm.Target.from_triple(triple)
    text = _llvm_warnings(lambda: target.create_target_machine(
        cpu="generic", features=",".join("+" + n for n in names)))
    unknown = set(re.findall(r"'\+([^']+)' is not a recognized feature", text))
    return tuple(n for n in names if n not in unknown)


@functools.cache
def _effective_features(triple: str, cpu: str, features: str) -> list[str]:
    """Checks the target with LLVM and returns its effective features ("+name", sorted) among the
    names the runtime can check (_probe_features). The answer for a valid target is kept in the kernel
    cache's folder (`targets/`, keyed by the compiler's version, the target and the runtime's feature
    names), so another process reads it instead of running LLVM's pipeline over the probe (~60 ms per
    target: a default export has three)."""
    from kiln.vm._generated.cpu_features import FEATURES

    from . import cache

    key = hashlib.sha256(json.dumps([cache.compiler_version(), triple, cpu, features,
                                     list(FEATURES.get(_arch_of(triple), ()))]).encode()).hexdigest()
    stored = cache.read_record("targets", key)
    if (isinstance(stored, dict) and stored.get("target") == [triple, cpu, features]
            and isinstance(stored.get("features"), list) and all(isinstance(f, str) for f in stored["features"])):
        return list(stored["features"])
    found = _probe_features(triple, cpu, features)
    cache.write_record("targets", key, {"target": [triple, cpu, features], "features": found})
    return found


def _probe_features(triple: str, cpu: str, features: str) -> list[str]:
    """Checks the target with LLVM (TargetError for an unknown triple, CPU or feature) and returns its
    effective features among the names the runtime can check: the ones a function compiled for (cpu,
    features) has, found by asking LLVM's inliner which callees needing one feature each it may inline
    there (a callee whose features are not a subset of its caller's is never inlined)."""
    initialize_llvm()
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as e:
        raise TargetError(f"unknown target triple {triple!r}: {str(e).strip()} (LLVM {_llvm_version()} "
                          f"knows e.g. x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu)") from None
    made = []
    text = _llvm_warnings(lambda: made.append(target.create_target_machine(
        cpu=cpu, features=features, opt=2, reloc="pic", codemodel="small")))
    m = re.search(r"'([^']*)' is not a recognized processor", text)
    if m:
        raise TargetError(f"unknown CPU {cpu!r} for {triple}: LLVM {_llvm_version()} does not know it "
                          f"(CPU names are LLVM's, e.g. x86-64-v3, skylake-avx512, znver4, "
                          f"neoverse-v1, cortex-a76)")
    m = re.search(r"'([+-][^']*)' is not a recognized feature", text)
    if m:
        raise TargetError(f"unknown CPU feature {m.group(1)!r} for {triple}: LLVM {_llvm_version()} does not "
                          f"know it (feature names are LLVM's, e.g. +avx2, +fma, +avx512f, +sve)")
    names = _recognized(triple)
    if not names:
        return sorted(f for f in features.split(",") if f.startswith("+"))
    lines = [f'target triple = "{triple}"', "@kiln_probe = global i32 0"]
    for i, _ in enumerate(names):
        lines.append(f"define internal void @needs{i}() #{i + 1} {{\n  store volatile i32 {i}, ptr @kiln_probe\n"
                     f"  ret void\n}}")
        lines.append(f"define void @has{i}() {{\n  call void @needs{i}()\n  ret void\n}}")
    for i, name in enumerate(names):  # a function's features replace the machine's: repeat them
        lines.append(f'attributes #{i + 1} = {{ "target-features"="{features + "," if features else ""}+{name}" }}')
    module = llvm.parse_assembly("\n".join(lines))
    builder = llvm.create_pass_builder(made[0], llvm.create_pipeline_tuning_options(speed_level=2))
    builder.getModulePassManager().run(module, builder)
    kept = set()
    for function in module.functions:
        if function.name.startswith("has") and "@needs" not in str(function):
            kept.add(int(function.name[3:]))
    return sorted("+" + names[i] for i in kept)


def _llvm_version() -> str:
    return ".".join(map(str, llvm.llvm_version_info))
