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
    (("riscv64-unknown-linux-gnu", "generic-rv64", "-c,-m"), "riscv64 kernels need the M extension (-m given): "
                                                             "a kernel image links no libgcc helper"),
])
def test_named_target_errors(args, message):
    with pytest.raises(TargetError, match=re.escape(message)):
        Target.named(*args)


def test_riscv64_targets_have_the_linux_baseline_and_link_64_bit_integer_arithmetic():
    """LLVM's generic-rv64 is RV64I alone, and without M its 64-bit products and quotients (an int64 division,
    the index arithmetic of a batched matmul) were calls to libgcc's __muldi3 and __udivdi3, which no kernel
    image links ("undefined symbol '__udivdi3'"): a named riscv64 target has riscv64 Linux's RV64GC (A and C
    may be removed, M, F and D not: test_named_target_errors)."""
    rv = Target.named("riscv64-unknown-linux-gnu", "generic-rv64")
    assert {"+m", "+a", "+f", "+d", "+c"} <= _features(rv) and "+v" not in _features(rv)
    assert "-c" in _features(Target.named("riscv64-unknown-linux-gnu", "generic-rv64", "-c"))
    assert Target.portable("riscv64-unknown-linux-gnu")[1].features == rv.features  # rv64gc: the same

    a = np.arange(2 * 5 * 7, dtype=np.int64).reshape(2, 5, 7)

    class Ints(Program, export_name="ints"):
        def run(self, a=Program.like(a), d=Program.like(a[0, 0])):
            return a @ a.transpose(0, 2, 1), a // (d + 1), a % (a + 3)

    reader = ModuleFile(Program.get_compiled_artifact(Ints, target=rv).bytes)
    assert [img.variant for img in reader.kernel_images] == ["generic-rv64"]


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
    (["--cpu", "znver4"], "--cpu and --features need --target TRIPLE"),
])
def test_cli_target_errors(tmp_path, args, message):
    proc = run_kiln_cli("export", "examples/linear.py:Linear", "-o", str(tmp_path / "m.vmfb"), *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "m.vmfb").exists()


# ---- portable modules: kernel variants (format 2.4) -------------------------------------------------

import os  # noqa: E402
import subprocess  # noqa: E402

import numpy as np  # noqa: E402

import kiln.numpy as knp  # noqa: E402
from kiln.vm.reader import ModuleFile, dump_text, read_module  # noqa: E402
from kiln.vm.writer import serialize  # noqa: E402

_X = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
_W = np.random.default_rng(1).standard_normal((48, 32)).astype(np.float32)


class Mix(Program, export_name="mix"):
    """One kernel of each strategy: a matmul with tanh, a row-fused softmax, reductions, power (whose
    integer test must not call libm's trunc), floor and sqrt."""
    _w = _W

    def run(self, x=Program.like(_X), p=Program.like(np.float32(0))):
        h = knp.tanh(x @ self._w)
        e = knp.exp(h - h.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True), knp.power(knp.abs(x) + 1.0, p), knp.sum(x * x),
                knp.floor(x * 3.7), knp.sqrt(knp.abs(x)))


def _mix_reference(x, p):
    h = np.tanh(x.astype(np.float64) @ _W)
    e = np.exp(h - h.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True), np.power(np.abs(x) + 1.0, p), np.sum(x.astype(np.float64) ** 2),
            np.floor(x * np.float32(3.7)), np.sqrt(np.abs(x)))


def _kiln_run(module, *args, variant=None, check=True, hide=None):
    env = dict(os.environ)
    env.pop("KILN_CPU_VARIANT", None)
    env.pop("KILN_HIDE_CPU_FEATURES", None)
    if variant is not None:
        env["KILN_CPU_VARIANT"] = variant
    if hide is not None:
        env["KILN_HIDE_CPU_FEATURES"] = hide
    from kiln.vm._native import kiln_run_path

    sanitized = os.path.join(os.environ.get("KILN_SANITIZE_BUILD", ""), "kiln-run")  # make test: ASan+UBSan
    exe = sanitized if os.environ.get("KILN_SANITIZE_BUILD") and os.path.isfile(sanitized) else kiln_run_path()
    proc = subprocess.run([exe, f"--module={module}", *args], capture_output=True, text=True, timeout=120, env=env)
    assert "Sanitizer" not in proc.stderr, proc.stderr
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _run_mix(module, tmp_path, variant=None, hide=None):
    np.save(tmp_path / "x.npy", _X)
    np.save(tmp_path / "p.npy", np.float32(2.5))
    outs = [tmp_path / f"{variant}-{i}.npy" for i in range(5)]
    _kiln_run(module, "--function=run", f"--input=@{tmp_path / 'x.npy'}", f"--input=@{tmp_path / 'p.npy'}",
              *[f"--output=@{o}" for o in outs], variant=variant, hide=hide)
    return [np.load(o) for o in outs]


def _host_runs(features: str) -> bool:
    lib = _runtime()
    return all(lib.kiln_host_cpu_feature(f[1:].encode()) == 1 for f in features.split(",") if f.startswith("+"))


@pytest.fixture(scope="module")
def portable_mix(tmp_path_factory):
    path = tmp_path_factory.mktemp("portable") / "mix.vmfb"
    Program.get_compiled_artifact(Mix, target="portable").save(path)
    return path


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="the x86-64 levels run on an x86-64 host")
def test_portable_module_runs_every_variant_the_host_supports(portable_mix, tmp_path):
    """A default (portable) export carries x86-64-v4, v3 and v2 builds; each one the host can run,
    forced with KILN_CPU_VARIANT, computes numpy's results; v3 gives v4's bits, v2 (no FMA: llvm.fmuladd
    rounds the product apart, docs/targets.md) the same up to a few ulps."""
    reader = ModuleFile(portable_mix.read_bytes())
    variants = [v.image for v in reader.kernel_variants] + reader.kernel_images
    assert [img.variant for img in variants] == ["x86-64-v4", "x86-64-v3", "x86-64-v2"]
    assert len({len(reader.kernels)}) == 1 and all(len(v.entry_offsets) == len(reader.kernels)
                                                  for v in reader.kernel_variants)
    runnable = [img.variant for img in variants if _host_runs(img.cpu_features)]
    assert "x86-64-v2" in runnable
    # unforced, the runtime loads the best build the host runs, and says so
    listing = _kiln_run(portable_mix, "--list").stdout
    assert f"kernel image 0: variant {runnable[0]} " in listing
    results = {v: _run_mix(portable_mix, tmp_path, v) for v in runnable}
    want = _mix_reference(_X, np.float32(2.5))
    for v, got in results.items():
        assert f"variant {v} " in _kiln_run(portable_mix, "--list", variant=v).stdout
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6, err_msg=v)
    best = results[runnable[0]]
    if "x86-64-v3" in runnable:
        for a, b in zip(results["x86-64-v3"], best):
            assert a.tobytes() == b.tobytes()
    for a, b in zip(results["x86-64-v2"], best):
        ulps = np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32)) if a.dtype == np.float32 else 0
        assert np.max(ulps) <= 64


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="the x86-64 levels run on an x86-64 host")
def test_dump_shows_the_variants(portable_mix):
    text = dump_text(portable_mix.read_bytes())
    assert "kernel variants: 2" in text
    assert re.search(r"variant#0 of image#0: variant x86-64-v4 x86_64\S* features=\S*\+avx512f", text)
    assert re.search(r"variant#1 of image#0: variant x86-64-v3 x86_64\S* features=\S*\+avx2", text)
    assert re.search(r"image#0 variant x86-64-v2 x86_64\S* features=", text)


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="the x86-64 levels run on an x86-64 host")
def test_forcing_a_variant_that_is_missing_or_cannot_run(portable_mix, tmp_path):
    proc = _kiln_run(portable_mix, "--list", variant="x86-64-v5", check=False)
    assert proc.returncode != 0
    assert ("KILN_CPU_VARIANT=x86-64-v5 names no variant of kernel image 0 (it has 'x86-64-v4', "
            "'x86-64-v3', 'x86-64-v2')") in proc.stderr
    # a build needing a feature the runtime cannot check is passed over, and refused when forced
    spec = read_module(portable_mix.read_bytes())
    spec.kernel_variants[0].image.cpu_features += ",+no-such-feature"
    damaged = tmp_path / "unknown.vmfb"
    damaged.write_bytes(serialize(spec))
    listing = _kiln_run(damaged, "--list").stdout
    assert "variant x86-64-v4 " not in listing and "kernel image 0: variant x86-64-" in listing
    proc = _kiln_run(damaged, "--list", variant="x86-64-v4", check=False)
    assert proc.returncode != 0 and "kernel image 0 variant 'x86-64-v4'" in proc.stderr
    assert "unknown CPU feature '+no-such-feature'" in proc.stderr


def test_non_gating_features_are_marked_and_recorded():
    """schemas/cpu_features.toml's gates_load = false features (NON_GATING) are known names, still recorded
    by a named CPU (the full effective list), and marked by kiln dump."""
    from kiln.vm._generated.cpu_features import NON_GATING

    assert {"ssbs", "dit", "sb", "ccdp"} <= NON_GATING["aarch64"] and {"sgx", "rtm", "xsave"} <= NON_GATING["x86_64"]
    assert not {"sve", "neon", "fullfp16", "lse", "rcpc", "fcma", "flagm"} & NON_GATING["aarch64"]
    assert not {"avx2", "fma", "movbe", "popcnt", "cx16", "sahf", "prfchw", "avx512f"} & NON_GATING["x86_64"]
    for arch, names in NON_GATING.items():
        assert names <= set(FEATURES[arch]), arch
    assert {"+ssbs", "+ccpp"} <= _features(Target.named("aarch64-unknown-linux-gnu", "cortex-a76"))
    assert "+dit" in _features(Target.named("aarch64-unknown-linux-gnu", "neoverse-v1"))


def test_non_gating_features_change_no_kernel_code(tmp_path):
    """What makes a feature non-gating: the op sweep of tests/cross_targets.py (every kernel strategy and the
    math library) compiles to the same code bytes with every non-gating feature added and with every one
    removed, for a CPU of each architecture that implies most of them (neoverse-n2, sapphirerapids)."""
    from cross_targets import program_of, sweep_functions
    from kiln.vm._generated.cpu_features import NON_GATING

    functions = sweep_functions()
    program = program_of({name: (fn, args) for name, (fn, args, _) in functions.items()}, "sweep")
    for triple, cpu in (("aarch64-unknown-linux-gnu", "neoverse-n2"), ("x86_64-unknown-linux-gnu", "sapphirerapids")):
        names = sorted(NON_GATING[triple.split("-")[0]])
        plus = Target.named(triple, cpu, ",".join("+" + n for n in names), variant="plus")
        minus = Target.named(triple, cpu, ",".join("-" + n for n in names), variant="minus")
        assert {"+" + n for n in names} <= _features(plus) and not {"+" + n for n in names} & _features(minus)
        assert {"+sve2", "+bf16"} <= _features(minus) or {"+avx512fp16", "+amx-tile"} <= _features(minus)
        images = [read_module(bytes(Program.get_compiled_artifact(program, target=t).bytes)).kernel_images[0]
                  for t in (plus, minus)]
        assert len(images[0].code) > 10000 and images[0].code == images[1].code, cpu


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="hides x86-64 features of this host")
def test_missing_non_gating_feature_still_loads(portable_mix, tmp_path, monkeypatch):
    """A host lacking a non-gating feature an image records still loads it; a gating one is refused by name.
    KILN_HIDE_CPU_FEATURES (a testing aid) makes the runtime answer as if the host lacked the names."""
    lib = _runtime()
    if not _host_runs(read_module(portable_mix.read_bytes()).kernel_variants[0].image.cpu_features):
        pytest.skip("this host cannot run the x86-64-v4 build")
    monkeypatch.setenv("KILN_HIDE_CPU_FEATURES", "+xsave,avx2")
    assert lib.kiln_host_cpu_feature(b"xsave") == 0 and lib.kiln_host_cpu_feature(b"avx2") == 0
    assert lib.kiln_host_cpu_feature(b"sse2") == 1 and lib.kiln_host_cpu_feature(b"no-such-feature") == -1
    monkeypatch.delenv("KILN_HIDE_CPU_FEATURES")
    assert lib.kiln_host_cpu_feature(b"xsave") == 1
    assert "+xsave" in read_module(portable_mix.read_bytes()).kernel_variants[0].image.cpu_features
    # non-gating features hidden: the best build is still chosen, forced it loads, and computes numpy's results
    hidden = "xsave,xsaveopt,xsavec,xsaves,fsgsbase,rdrnd,rdseed,clflushopt,clwb,invpcid,pku,ermsb"
    assert "kernel image 0: variant x86-64-v4 " in _kiln_run(portable_mix, "--list", hide=hidden).stdout
    assert "kernel image 0: variant x86-64-v4 " in _kiln_run(portable_mix, "--list", hide=hidden,
                                                            variant="x86-64-v4").stdout
    for g, w in zip(_run_mix(portable_mix, tmp_path, hide=hidden), _mix_reference(_X, np.float32(2.5))):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    # a gating feature hidden: the next build is chosen, and forcing the build is refused naming it
    assert "kernel image 0: variant x86-64-v3 " in _kiln_run(portable_mix, "--list", hide="avx512bw").stdout
    proc = _kiln_run(portable_mix, "--list", hide="xsave,avx512bw", variant="x86-64-v4", check=False)
    assert proc.returncode != 0
    assert "requires CPU feature '+avx512bw' which this host CPU lacks" in proc.stderr, proc.stderr
    assert "kernel image 0: variant x86-64-v2 " in _kiln_run(portable_mix, "--list", hide="avx2,xsave").stdout


def test_dump_marks_non_gating_features(portable_mix):
    text = dump_text(portable_mix.read_bytes())
    line = next(l for l in text.splitlines() if "variant x86-64-v4" in l)
    marked = re.search(r" \[not gating: (\S+)\]: ", line)
    assert marked and "+xsave" in marked.group(1).split(",") and "+avx512f" not in marked.group(1).split(","), line


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="the x86-64 levels run on an x86-64 host")
def test_a_module_without_variants_still_loads(portable_mix, tmp_path):
    """A format 2.3 module (one image, no variant names) loads as before; forcing a variant refuses it."""
    spec = read_module(portable_mix.read_bytes())
    spec.kernel_variants = []
    spec.kernel_images[0].variant = ""
    old = tmp_path / "old.vmfb"
    old.write_bytes(serialize(spec, version=(2, 3)))
    listing = _kiln_run(old, "--list").stdout
    assert "kernel image 0: variant" not in listing
    got = _run_mix(old, tmp_path)
    for g, w in zip(got, _mix_reference(_X, np.float32(2.5))):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    proc = _kiln_run(old, "--list", variant="x86-64-v2", check=False)
    assert proc.returncode != 0 and "names no variant of kernel image 0 (it has '')" in proc.stderr


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="runs the baseline x86-64 build")
def test_baseline_x86_64_needs_no_libm(tmp_path):
    """Without SSE4.1 LLVM lowers its rounding intrinsics to libm calls (trunc, floor), which a kernel
    image cannot import (the link fails naming the symbol): the op sweep of tests/cross_targets.py (every
    kernel strategy and the math library) links for the x86-64 baseline CPU and runs, equal to this
    host's build bit for bit except where reductions and matmuls sum in another order or without FMA, and
    where float32 exp, log and tanh round their multiply-adds twice (no FMA: within 4 ulp of this host's),
    and the native factorizations within cross_targets.LINALG_RTOL (vectors of another width)."""
    from cross_targets import (MATH_ULPS_WITHOUT_FMA, assert_same_kind, differences, export_module, program_of,
                               result_counts, run_function, sweep_functions)
    from references import ulps
    from kiln_tools import kiln_run_binary

    target = Target.named("x86_64-unknown-linux-gnu", "x86-64")
    assert "+sse4.1" not in _features(target) and "+fma" not in _features(target)
    functions = sweep_functions()
    program = program_of({name: (fn, args) for name, (fn, args, _) in functions.items()}, "sweep")
    base, host = tmp_path / "baseline.vmfb", tmp_path / "host.vmfb"
    base.write_bytes(export_module(program, target))
    host.write_bytes(export_module(program, "host"))
    counts = result_counts(host)
    for name, (fn, args, kind) in functions.items():
        want = run_function([kiln_run_binary()], host, name, args, tmp_path, counts[name], "host")
        got = run_function([kiln_run_binary()], base, name, args, tmp_path, counts[name], "base")
        for k, (g, w) in enumerate(zip(got, want)):
            count, _ = differences(g, w)
            if count and kind == "reduction" and g.dtype.kind == "f":
                # another summation order or no FMA: within a norm-wise bound of the result's scale
                eps = np.finfo(g.dtype).eps
                scale = np.max(np.abs(w[np.isfinite(w)]), initial=1.0)
                assert np.nanmax(np.abs(g.astype(np.float64) - w)) <= 64 * eps * scale, (name, k)
            elif count and kind == "math" and g.dtype == np.float32:
                assert np.array_equal(np.isnan(g), np.isnan(w)), (name, k)
                finite = np.isfinite(w)
                assert np.array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)]), (name, k)
                assert ulps(g[finite], w[finite]).max() <= MATH_ULPS_WITHOUT_FMA, (name, k)
            elif kind == "linalg":
                assert_same_kind([g], [w], kind, what=f"{name} result {k}")
            else:
                assert count == 0, (name, kind, k, g.ravel()[:8], w.ravel()[:8])


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="the x86-64 levels run on an x86-64 host")
def test_binding_names_the_loaded_variant(portable_mix, monkeypatch):
    """kiln.vm.runtime.Module.kernel_variants says which build was loaded; KILN_CPU_VARIANT, read when a
    module loads, forces one in this process too, and the call gives that build's results."""
    from kiln.vm.runtime import Context, Instance, KilnRuntimeError, Module

    data = portable_mix.read_bytes()
    builds = [v.image for v in ModuleFile(data).kernel_variants] + ModuleFile(data).kernel_images
    best = next(img.variant for img in builds if _host_runs(img.cpu_features))
    monkeypatch.delenv("KILN_CPU_VARIANT", raising=False)
    instance = Instance()
    assert Module.from_bytes(instance, data).kernel_variants == [best]
    monkeypatch.setenv("KILN_CPU_VARIANT", "x86-64-v2")
    module = Module.from_bytes(instance, data)
    assert module.kernel_variants == ["x86-64-v2"]
    got = Context(module).invoke("run", [_X, np.float32(2.5)])
    for g, w in zip(got, _mix_reference(_X, np.float32(2.5))):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-6)
    monkeypatch.setenv("KILN_CPU_VARIANT", "nope")
    with pytest.raises(KilnRuntimeError, match="KILN_CPU_VARIANT=nope names no variant of kernel image 0"):
        Module.from_bytes(instance, data)


@pytest.mark.skipif(HOST_ARCH != "x86_64", reason="the x86-64 levels run on an x86-64 host")
def test_damaged_variant_tables_are_refused(portable_mix, tmp_path):
    """The writer's checks and, past them (check=False), the loader's: a variant's base image out of
    range, or entry offsets that are not one per kernel of its base image, are DATA_LOSS naming it."""
    import copy

    from kiln.vm.validate import SpecError

    spec = read_module(portable_mix.read_bytes())
    cases = []
    bad_base = copy.deepcopy(spec)
    bad_base.kernel_variants[1].base = 3
    cases.append((bad_base, "kernel variant 1 (x86-64-v3): base image 3 out of range",
                  "kernel variant 1: base image 3 out of range (1 images)"))
    short = copy.deepcopy(spec)
    short.kernel_variants[0].entry_offsets = short.kernel_variants[0].entry_offsets[:-1]
    n = len(spec.kernels)
    cases.append((short, f"kernel variant 0 (x86-64-v4): {n - 1} entry offsets, image 0 has {n} kernels",
                  f"kernel variant 0: {n - 1} entry offsets, image 0 has {n} kernels"))
    for damaged, python_message, c_message in cases:
        with pytest.raises(SpecError, match=re.escape(python_message)):
            serialize(damaged)
        path = tmp_path / "damaged.vmfb"
        path.write_bytes(serialize(damaged, check=False))
        proc = _kiln_run(path, "--list", check=False)
        assert proc.returncode != 0 and c_message in proc.stderr, proc.stderr


def test_variants_add_only_their_kernel_code(portable_mix):
    """The builds share bytecode, constants and globals: the portable module is the base-only module plus
    each variant's image (code, relocations, entry points, target and features text) and little more."""
    data = portable_mix.read_bytes()
    spec = read_module(data)
    variants = spec.kernel_variants
    assert variants
    spec.kernel_variants = []
    base_only = serialize(spec)
    images = sum(len(v.image.code) + 16 * len(v.image.relocs) + 8 * (len(v.entry_offsets) * 2)
                 + len(v.image.cpu_features) + len(v.image.target_triple) + len(v.image.variant)
                 for v in variants)
    assert images <= len(data) - len(base_only) <= images + 256 * len(variants)


def test_default_export_target_from_the_environment(monkeypatch):
    from kiln.compiler.target import default_export_target

    monkeypatch.setenv("KILN_TARGET", "portable")
    assert default_export_target() == Target.portable()
    monkeypatch.setenv("KILN_TARGET", "host")
    assert default_export_target() == Target.host()
    monkeypatch.setenv("KILN_TARGET", "foo-bar")
    with pytest.raises(TargetError, match=re.escape("KILN_TARGET='foo-bar': unknown target triple 'foo-bar'")):
        Program.get_compiled_artifact(Mix)


def test_targets_checked_in_threads_at_once(monkeypatch):
    """Checking a target reads LLVM's warnings from file descriptor 2: threads doing it at once each get
    their own answer, and stderr is file descriptor 2 again afterwards."""
    import threading

    from kiln.compiler import target as target_module

    monkeypatch.setenv("KILN_CACHE", "0")  # every target probed here, none read from the cache folder
    before = os.fstat(2)
    errors, cpus = [], ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "znver3", "skylake", "nocpu-a", "nocpu-b"]
    target_module._effective_features.cache_clear()

    def check(cpu):
        try:
            Target.named("x86_64-unknown-linux-gnu", cpu)
            errors.append((cpu, None))
        except TargetError as e:
            errors.append((cpu, str(e)))

    threads = [threading.Thread(target=check, args=(cpu,)) for cpu in cpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    answers = dict(errors)
    assert all(answers[c] is None for c in cpus[:6])
    assert all(f"unknown CPU '{c}'" in answers[c] for c in cpus[6:])
    after = os.fstat(2)
    assert (before.st_dev, before.st_ino) == (after.st_dev, after.st_ino)


def test_effective_features_are_kept_in_the_cache_folder(tmp_path, monkeypatch):
    """A valid target's features are stored once (targets/ in the cache folder) and read back by the next
    process without probing LLVM; a damaged record is probed again; an invalid target is never stored;
    KILN_CACHE=0 reads and writes nothing."""
    from kiln.compiler import target as target_module

    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    probed = []
    real = target_module._probe_features

    def probe(*args):
        probed.append(args[1])
        return real(*args)

    def as_a_new_process():  # only the folder remembers
        target_module._effective_features.cache_clear()

    monkeypatch.setattr(target_module, "_probe_features", probe)
    as_a_new_process()
    try:
        fresh = Target.named("x86_64-unknown-linux-gnu", "x86-64-v3")
        records = sorted((tmp_path / "targets").iterdir())
        assert probed == ["x86-64-v3"] and len(records) == 1
        as_a_new_process()
        assert Target.named("x86_64-unknown-linux-gnu", "x86-64-v3") == fresh and probed == ["x86-64-v3"]
        records[0].write_text('{"target": ["x86_64-unknown-linux-gnu", "x86-64-v3", ""], "features": 7}')
        as_a_new_process()
        assert Target.named("x86_64-unknown-linux-gnu", "x86-64-v3") == fresh and len(probed) == 2
        as_a_new_process()
        assert Target.named("x86_64-unknown-linux-gnu", "x86-64-v3") == fresh and len(probed) == 2  # rewritten
        with pytest.raises(TargetError, match="unknown CPU 'nocpu'"):
            Target.named("x86_64-unknown-linux-gnu", "nocpu")
        assert sorted((tmp_path / "targets").iterdir()) == records
        monkeypatch.setenv("KILN_CACHE", "0")
        as_a_new_process()
        assert Target.named("x86_64-unknown-linux-gnu", "x86-64-v3") == fresh and len(probed) == 4
    finally:
        as_a_new_process()


@pytest.mark.parametrize("entry, message", [
    ('{ name = "x", hwcap = [1], gates_load = 0 }', "x: gates_load must be true or false"),
    ('{ name = "x", always = true, gates_load = false }', "an 'always' feature needs none"),
])
def test_gates_load_is_validated(entry, message):
    from kiln.vm.cpu_features_gen import CpuFeatureError, gen_c, gen_py, load

    with pytest.raises(CpuFeatureError, match=re.escape(message)):
        load(f"aarch64 = [\n  {entry},\n]\n")
    tables = load('aarch64 = [\n  { name = "x", hwcap = [1], gates_load = false },\n  { name = "y", hwcap = [2] },\n]\n')
    assert '{"x", 0x2ull, 0x0ull, 0, 0}' in gen_c(tables) and '{"y", 0x4ull, 0x0ull, 0, 1}' in gen_c(tables)
    assert "'aarch64': frozenset({'x'})" in gen_py(tables)


def test_export_says_which_kernel_builds_it_wrote(tmp_path):
    """`kiln --verbose export` (and kiln export on a terminal: tests/test_cli.py) names the kernel builds it
    wrote, best first, as the module records them (piped without --verbose it prints only 'wrote ...':
    tests/test_cli.py)."""
    out = tmp_path / "m.vmfb"
    proc = run_kiln_cli("--verbose", "export", "examples/linear.py:Linear", "-o", str(out),
                        "--target", "x86_64-unknown-linux-gnu")
    lines = proc.stdout.splitlines()
    assert lines[0] == "kernel builds: x86-64-v4, x86-64-v3, x86-64-v2 (x86_64-unknown-linux-gnu)", proc.stdout
    assert lines[1] == f"wrote {out} ({out.stat().st_size} bytes)"
    spec = read_module(out.read_bytes())
    assert [v.image.variant for v in spec.kernel_variants] + [spec.kernel_images[0].variant] == \
        ["x86-64-v4", "x86-64-v3", "x86-64-v2"]
    proc = run_kiln_cli("--verbose", "export", "examples/linear.py:Linear", "-o", str(out),
                        "--target", "aarch64-unknown-linux-gnu", "--cpu", "cortex-a76")
    assert proc.stdout.splitlines()[0] == "kernel builds: cortex-a76 (aarch64-unknown-linux-gnu)", proc.stdout
