"""Running kiln modules compiled for other architectures: the runtime and kiln-run cross-built with the
Debian cross compilers, run under qemu-user, their results compared with this (x86-64) machine's.

Used by tests/test_cross_aarch64.py (the short part `make test` runs when the tools are present or can
be installed) and tests/cross_suite.py (the long suites of `make test-aarch64` and `make test-riscv64`); docs/targets.md says what
is compared and why some results may differ by a bounded number of ulps.
"""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import ml_dtypes
import numpy as np

from kiln_tools import ROOT
from references import ulps

INSTALL_SCRIPT = Path(ROOT) / "tests" / "install_cross_tools.sh"
RUNTIME_SOURCE = Path(ROOT) / "runtime-c"


@dataclass(frozen=True)
class Arch:
    name: str
    triple: str
    toolchain: str        # runtime-c/cmake/<file>
    qemu: str
    sysroot: str
    tools: tuple[str, ...]

    @property
    def build_dir(self) -> Path:
        return Path(ROOT) / "build" / f"cross-{self.name}"


ARCHES = {
    "aarch64": Arch("aarch64", "aarch64-unknown-linux-gnu", "aarch64-linux-gnu.cmake", "qemu-aarch64",
                    "/usr/aarch64-linux-gnu", ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objcopy", "qemu-aarch64")),
    "riscv64": Arch("riscv64", "riscv64-unknown-linux-gnu", "riscv64-linux-gnu.cmake", "qemu-riscv64",
                    "/usr/riscv64-linux-gnu", ("riscv64-linux-gnu-gcc", "riscv64-linux-gnu-objcopy", "qemu-riscv64")),
}


def tools_present(arch: Arch) -> bool:
    return all(shutil.which(t) for t in arch.tools)


def ensure_tools(arch: Arch) -> str | None:
    """Installs the cross tools when missing (tests/install_cross_tools.sh); None when they are there,
    else why they are not."""
    if tools_present(arch):
        return None
    try:
        proc = subprocess.run(["bash", str(INSTALL_SCRIPT), arch.name], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return f"installing the {arch.name} cross tools took more than 5 minutes"
    if proc.returncode == 0 and tools_present(arch):
        return None
    return (proc.stderr or proc.stdout).strip() or f"the {arch.name} cross tools are missing"


def build_runtime(arch: Arch, *, tests: bool = False, build_dir: Path | None = None) -> Path:
    """Cross-builds runtime-c for `arch` (incrementally): kiln-run only, or with its C tests and examples."""
    out = build_dir or arch.build_dir
    configure = ["cmake", "-S", str(RUNTIME_SOURCE), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release",
                 f"-DCMAKE_TOOLCHAIN_FILE={RUNTIME_SOURCE / 'cmake' / arch.toolchain}",
                 f"-DKILN_BUILD_TESTS={'ON' if tests else 'OFF'}"]
    build = ["cmake", "--build", str(out), "--parallel", str(os.cpu_count() or 2)]
    if not tests:
        build += ["--target", "kiln-run"]
    proc = subprocess.run(configure, capture_output=True, text=True)
    if proc.returncode != 0 and "does not match the source" in proc.stderr:
        shutil.rmtree(out)  # a build folder of another checkout (moved or copied): start it again
        proc = subprocess.run(configure, capture_output=True, text=True)
    for cmd in (configure, build):
        if cmd is build:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode})\n{proc.stdout}\n{proc.stderr}")
    return out


def qemu_command(arch: Arch, cpu: str | None = None) -> list[str]:
    return [arch.qemu, "-L", arch.sysroot] + (["-cpu", cpu] if cpu else [])


def run_under_qemu(arch: Arch, exe: Path, *args: str, cpu: str | None = None, check: bool = True,
                   timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([*qemu_command(arch, cpu), str(exe), *args], capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{arch.qemu} {exe.name} {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


# ----------------------------------------------------------------------------- exporting for a target

def export_module(program_cls, target) -> bytes:
    """The module of a Program class compiled for `target`: a kiln.Target, a sequence of them (variants, best
    first), a triple (its portable variants) or "host" (Program.get_compiled_artifact's `target`)."""
    from kiln import Program

    return bytes(Program.get_compiled_artifact(program_cls, target=target).bytes)


def start_sweep_export(path: Path, target: str, scale: int = 1) -> subprocess.Popen:
    """Starts exporting the op sweep (sweep_functions(scale), as program_of(..., "sweep")) for `target` (a triple
    or "host") to `path` in another process, so that the test compiles its other module meanwhile: the kernels'
    LLVM work holds one core. finish_export waits for it."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from cross_targets import export_module, program_of, sweep_functions; "
            "f = sweep_functions(int(sys.argv[4])); "
            "p = program_of({n: (fn, a) for n, (fn, a, _) in f.items()}, 'sweep'); "
            "open(sys.argv[2], 'wb').write(export_module(p, sys.argv[3]))")
    return subprocess.Popen([sys.executable, "-c", code, str(Path(ROOT) / "tests"), str(path), target, str(scale)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def finish_export(proc: subprocess.Popen, timeout: float = 900) -> None:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"exporting the sweep in another process failed ({proc.returncode}):\n{out}\n{err}")


def aarch64_target(*features: str, cpu: str = "generic"):
    from kiln.compiler.target import Target

    return Target.named(ARCHES["aarch64"].triple, cpu, ",".join(("+neon", "+fp-armv8") + features))


def program_of(functions: dict, export_name: str):
    """A Program class with one public method per entry of `functions` (name -> (fn, args)), each taking
    parameters shaped like its args."""
    from kiln import Program

    body = {}
    for name, (fn, args) in functions.items():
        names = [f"a{i}" for i in range(len(args))]
        namespace = {"Program": Program, "fn": fn, "args": args}
        params = ", ".join(f"{n}=Program.like(args[{i}])" for i, n in enumerate(names))
        exec(f"def {name}(self, {params}):\n    return fn({', '.join(names)})", namespace)
        body[name] = namespace[name]
    return type(f"Cross_{export_name}", (Program,), body, export_name=export_name)


def result_counts(module: Path) -> dict[str, int]:
    """function name -> its number of results, read from a module file."""
    from kiln.vm.reader import read_module

    return {f.name: len(f.results) for f in read_module(Path(module).read_bytes()).functions}


def run_function(kiln_run: list[str], module: Path, function: str, args, work: Path, n_outputs: int,
                 tag: str, timeout: float = 300) -> list[np.ndarray]:
    """Runs `function` of `module` with kiln-run (`kiln_run`: the command, qemu included) on .npy inputs;
    returns its outputs."""
    inputs = []
    for i, a in enumerate(args):
        path = work / f"{function}.in{i}.npy"
        np.save(path, np.asarray(a))
        inputs.append(f"--input=@{path}")
    outputs = [work / f"{function}.{tag}.out{k}.npy" for k in range(n_outputs)]
    proc = subprocess.run([*kiln_run, f"--module={module}", f"--function={function}", *inputs,
                           *[f"--output=@{o}" for o in outputs]], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(kiln_run)} --function={function} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return [np.load(o) for o in outputs]


def run_functions(kiln_run: list[str], module: Path, functions: dict, counts: dict[str, int], work: Path, tag: str,
                  jobs: int | None = None) -> dict[str, list[np.ndarray]]:
    """run_function for each of `functions` ({name: (fn, args, ...)}), `jobs` kiln-run processes at a time (one
    per core by default: each qemu-user process is single-threaded). Returns {name: outputs}."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        futures = {name: pool.submit(run_function, kiln_run, module, name, spec[1], work, counts[name], tag)
                   for name, spec in functions.items()}
        return {name: f.result() for name, f in futures.items()}


# ----------------------------------------------------------------------------- comparing results

def differences(got: np.ndarray, want: np.ndarray) -> tuple[int, int]:
    """(elements whose bits differ other than by a NaN's sign or payload, the largest ulp distance among
    them; -1 when one is NaN or infinite and the other is not). Non-float arrays: (count, 0)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if got.dtype.kind == "c":
        parts = [differences(np.ascontiguousarray(got.real), np.ascontiguousarray(want.real)),
                 differences(np.ascontiguousarray(got.imag), np.ascontiguousarray(want.imag))]
        return sum(p[0] for p in parts), min(p[1] for p in parts) if any(p[1] < 0 for p in parts) \
            else max(p[1] for p in parts)
    if got.dtype.kind != "f" and got.dtype != ml_dtypes.bfloat16:
        return int(np.count_nonzero(got != want)), 0
    itype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    g = got.view(itype).ravel()
    w = want.view(itype).ravel()
    g64, w64 = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    both_nan = np.isnan(g64) & np.isnan(w64)
    differ = (g != w) & ~both_nan
    count = int(np.count_nonzero(differ))
    if not count:
        return 0, 0
    gd, wd = g64[differ], w64[differ]
    if not (np.isfinite(gd).all() and np.isfinite(wd).all()):
        return count, -1
    if got.dtype == ml_dtypes.bfloat16 or got.dtype.itemsize == 2:
        gd_, wd_ = got.ravel()[differ].astype(np.float32), want.ravel()[differ].astype(np.float32)
        return count, int((ulps(gd_, wd_) >> 16).max()) if got.dtype == ml_dtypes.bfloat16 \
            else int(ulps(got.ravel()[differ], want.ravel()[differ]).max())
    return count, int(ulps(got.ravel()[differ], want.ravel()[differ]).max())


def assert_same(got: list[np.ndarray], want: list[np.ndarray], *, max_ulps: int = 0, what: str = "") -> None:
    """Bit-identical except for a NaN's sign (and payload); with max_ulps > 0, finite floats may differ by
    at most that many ulps (reductions: docs/targets.md)."""
    assert len(got) == len(want), (what, len(got), len(want))
    for k, (g, w) in enumerate(zip(got, want)):
        count, worst = differences(g, w)
        if count and (worst < 0 or worst > max_ulps or g.dtype.kind not in "fc" and g.dtype != ml_dtypes.bfloat16):
            assert False, (f"{what} result {k} ({g.dtype}{list(g.shape)}): {count} elements differ "
                           f"(worst {worst} ulps, allowed {max_ulps}):\n got  {g.ravel()[:8]}\n want {w.ravel()[:8]}")


# ----------------------------------------------------------------------------- the op sweep

def sweep_functions(scale: int = 1) -> dict:
    """name -> (fn, args, kind): a function of every kernel strategy (elementwise, reductions, split
    reductions, row-fused, matmul, conv, pooling, structural, control flow) on small inputs; `kind` is
    "exact" (bit-identical across targets), "math" (float32 exp, log, tanh or gelu: bit-identical across targets
    with FMA, within MATH_ULPS_WITHOUT_FMA on x86-64 without it), "reduction" (within REDUCTION_ULPS) or
    "linalg" (the native factorizations, whose dot products and updates run in vectors of the target's width:
    within LINALG_RTOL of the largest |x86 result|; only quantities that do not depend on a sign choice).
    `scale` grows the inputs (the long suite)."""
    import kiln.lax as lax
    import kiln.nn as nn
    import kiln.numpy as knp

    rng = np.random.default_rng(11)
    n = 37 * scale

    def normal(*shape, dtype=np.float32):
        return rng.standard_normal(shape).astype(dtype)

    x = normal(n, 29)
    x64 = normal(n, 29, dtype=np.float64)
    pos = np.abs(normal(n, 29)) + np.float32(0.01)
    ints = rng.integers(-1000, 1000, size=(n, 29)).astype(np.int32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-38, 3.4e38, 88.7, -103.0, 0.5, 1.0],
                       np.float32)
    half = normal(n, 16, dtype=np.float16)
    bf = normal(n, 16).astype(ml_dtypes.bfloat16)
    image = normal(2, 9 * scale, 11, 3)
    kernel = normal(3, 3, 3, 5)
    long = normal(1 << 18)  # a split reduction: at least 2^18 elements, few outputs

    def scan_cumulative(v):
        def body(carry, row):
            carry = carry * 0.5 + row
            return carry, knp.tanh(carry)
        return lax.scan(body, knp.zeros_like(v[0]), v)

    def while_newton(v):
        def cond(state):
            k, _ = state
            return k < 20
        def body(state):
            k, y = state
            return k + 1, 0.5 * (y + v / y)
        return lax.while_loop(cond, body, (0, knp.ones_like(v)))[1]

    a = normal(24, 24) + np.float32(6) * np.eye(24, dtype=np.float32)  # well conditioned
    spd = (a @ a.T / np.float32(24) + np.eye(24, dtype=np.float32)).astype(np.float32)
    rhs = normal(24, 3)

    def factorizations(m, s, b):
        w, v = knp.linalg.eigh(s)
        sign, logdet = knp.linalg.slogdet(m)
        return [knp.linalg.cholesky(s), knp.linalg.solve(m, b), sign * logdet, w, (v * w) @ v.T,
                knp.linalg.svd(m, compute_uv=False), knp.abs(knp.linalg.qr(m)[1]), knp.linalg.pinv(m) @ m]

    def branch(v):
        return lax.cond(knp.sum(v) > 0, lambda a: knp.exp(-a * a), lambda a: knp.cos(a) * 2, v)

    return {
        # elementwise: arithmetic, the math library, special values, integers, narrow floats, casts
        "ew_arith": (lambda a, b: [a * b + a / (b + 3.0), knp.maximum(a, b) - knp.floor(a * 7.3)], [x, x[::-1].copy()],
                     "exact"),
        "ew_math_f32": (lambda a, p: [knp.exp(a), knp.log(p), knp.tanh(a), knp.sin(a * 3), knp.sqrt(p),
                                      knp.power(p, a), knp.arctan2(a, p), knp.log1p(p), knp.expm1(a), knp.erf(a),
                                      nn.gelu(a * 4)],
                        [x, pos], "math"),
        "ew_math_f64": (lambda a: [knp.exp(a), knp.tanh(a), knp.cos(a), knp.log(knp.abs(a) + 1e-3)], [x64], "exact"),
        "ew_special": (lambda s: [knp.exp(s), knp.log(s), knp.sqrt(s), knp.tanh(s), s * s, knp.sign(s),
                                  knp.floor(s), s.astype(np.int32), knp.isnan(s), nn.gelu(s)], [special], "math"),
        "ew_int": (lambda i: [i * 3 - (i >> 2), i // 7, i % 5, knp.abs(i), (i & 0x3F) ^ 0x15,
                              i.astype(np.float32) * 0.25, knp.clip(i, -100, 100).astype(np.int8)], [ints], "exact"),
        # int64 products, quotients and remainders, an integer batched matmul (riscv64 without M called libgcc's
        # __muldi3/__udivdi3 for these, which no kernel image links: test_targets.py)
        "ew_int64": (lambda i, j: [i * j - (i >> 3), i // (j % 97 + 98), i % (j + 2001), knp.matmul(i[:12].reshape(3, 4, 29),
                                   j[:12].reshape(3, 29, 4) % 50)],
                     [ints.astype(np.int64) * 3_000_000, ints[::-1].astype(np.int64)], "exact"),
        "ew_narrow": (lambda h, b: [h * h + 1, knp.exp(h.astype(np.float32)).astype(np.float16), b * b - b,
                                    knp.tanh(b)], [half, bf], "exact"),
        "ew_select": (lambda a, b: knp.where(a > b, a * 2, knp.minimum(a, -b)), [x, x.T.copy().T], "exact"),
        # reductions: whole, per row, per column, arg, integer, a split reduction of 2^18 elements
        "red_sum": (lambda a: [knp.sum(a), knp.sum(a, axis=1), knp.sum(a, axis=0), knp.mean(a, axis=0)], [x],
                    "reduction"),
        "red_max": (lambda a, i: [knp.max(a, axis=1), knp.min(a), knp.argmax(a, axis=0), knp.sum(i, axis=1),
                                  knp.prod(a[:4, :6], axis=1)], [x, ints], "reduction"),
        "red_f64": (lambda a: [knp.sum(a), knp.var(a, axis=0)], [x64], "reduction"),
        "red_split": (lambda v: [knp.sum(v), knp.max(v), knp.sum(v * v)], [long], "reduction"),
        # row-fused reductions
        "row_softmax": (lambda a: [nn.softmax(a), nn.log_softmax(a)], [x], "reduction"),
        "row_layernorm": (lambda a: (a - knp.mean(a, axis=-1, keepdims=True))
                          / knp.sqrt(knp.var(a, axis=-1, keepdims=True) + 1e-5), [x], "reduction"),
        # matmul
        "matmul": (lambda a, b: [a @ b, knp.tanh(a @ b + 1.0)], [normal(n, 64), normal(64, 33)], "reduction"),
        "matmul_f64": (lambda a, b: a @ b, [normal(17, 40, dtype=np.float64), normal(40, 9, dtype=np.float64)],
                       "reduction"),
        "matmul_batched": (lambda a, b: knp.matmul(a, b), [normal(3, 8, 20), normal(3, 20, 6)], "reduction"),
        # A's rows 4 KiB apart: each tile's rows copied (matmul._copies_a), a k tail of the row
        "matmul_rows_4k": (lambda a, b: a[:, :300] @ b, [normal(14, 1024), normal(300, 21)], "reduction"),
        # conv and pooling
        "conv": (lambda im, k: [nn.conv(im, k), nn.conv(im, k, strides=(2, 2), padding="VALID")], [image, kernel],
                 "reduction"),
        "pool": (lambda im: [nn.max_pool(im, (2, 2), (2, 2)), nn.avg_pool(im, (3, 3), (1, 1), "SAME")], [image],
                 "reduction"),
        # structural
        "structural": (lambda a, i: [a.T, knp.concatenate([a, -a], axis=1), a[::2, 3:17], knp.reshape(a, (-1,)),
                                     knp.pad(a, ((1, 2), (0, 3))), knp.take(a, knp.abs(i[:, 0]) % n, axis=0),
                                     knp.flip(a, 0), knp.broadcast_to(a[:1], a.shape)], [x, ints], "exact"),
        "sort": (lambda a: [knp.sort(a, axis=1), knp.cumsum(a[:, :8], axis=1)], [x], "reduction"),
        # control flow
        "scan": (scan_cumulative, [x], "math"),
        "while_loop": (while_newton, [pos], "exact"),
        # the native linear algebra kernels (strategies linalg, eigh, svd)
        "linalg": (factorizations, [a, spd, rhs], "linalg"),
        "cond": (branch, [x], "math"),
    }


REDUCTION_ULPS = 16  # the most a reduction may differ from x86 (measured at most 7: docs/targets.md)
# float32 exp, log and tanh evaluate their polynomials with llvm.fmuladd: one rounding per multiply-add where the
# target has FMA (every target but x86-64 without it: x86-64-v2 and older), two there. Each result is within the
# functions' 2-ulp bound (docs/accuracy.md), so two builds differ by at most 4 ulp (measured 2).
MATH_ULPS_WITHOUT_FMA = 4
LINALG_RTOL = 1e-4  # float32 factorizations of well-conditioned 24x24 matrices (measured about 1e-6)


def assert_same_kind(got: list[np.ndarray], want: list[np.ndarray], kind: str, what: str = "") -> None:
    """A sweep function's results on another target against x86's, by the function's kind (sweep_functions):
    bit-identical ("exact", and "math" on targets with FMA), within REDUCTION_ULPS ("reduction"), or within
    LINALG_RTOL of the largest |x86 result| ("linalg")."""
    if kind != "linalg":
        assert_same(got, want, max_ulps=REDUCTION_ULPS if kind == "reduction" else 0, what=what)
        return
    assert len(got) == len(want), (what, len(got), len(want))
    for k, (g, w) in enumerate(zip(got, want)):
        scale = float(np.max(np.abs(w))) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=0, atol=LINALG_RTOL * max(scale, 1.0), err_msg=f"{what} result {k}")


# ----------------------------------------------------------------------------- a kernel of every aarch64 relocation

# Thirteen i64 results, each reached through one relocation kind (the comment says which). Volatile loads keep
# LLVM from folding the constants; @gotted has default visibility, so PIC code reaches it through the GOT; the
# pointers in @ptrs, @rel64 and @rel32 go to .data.rel.ro (absolute and PC-relative data relocations).
RELOCATION_KERNEL_IR = r'''
@v8 = internal constant i8 7, align 1
@v16 = internal constant i16 300, align 2
@v32 = internal constant i32 70000, align 4
@v64 = internal constant i64 5000000000, align 8
@v128 = internal constant <2 x i64> <i64 11, i64 12>, align 16
@gotted = constant i64 99, align 8
@ptrs = internal constant [2 x ptr] [ptr @v64, ptr @triple], align 8
@rel64 = internal constant i64 sub (i64 ptrtoint (ptr @triple to i64), i64 ptrtoint (ptr @rel64 to i64)), align 8
@rel32 = internal constant i32 trunc (i64 sub (i64 ptrtoint (ptr @tail to i64), i64 ptrtoint (ptr @rel32 to i64)) to i32), align 4

define i64 @triple(i64 %x) noinline {
  %y = mul i64 %x, 3
  %z = add i64 %y, 1
  ret i64 %z
}
define i64 @tail(i64 %x) noinline {
  %a = add i64 %x, 1000
  %r = tail call i64 @triple(i64 %a)
  ret i64 %r
}
define i32 @kernel(ptr %args, i32 %wg) {
  %bindings = load ptr, ptr %args
  %out = load ptr, ptr %bindings
  %a8 = load volatile i8, ptr @v8
  %r0 = zext i8 %a8 to i64
  store i64 %r0, ptr %out
  %a16 = load volatile i16, ptr @v16
  %r1 = zext i16 %a16 to i64
  %p1 = getelementptr i64, ptr %out, i64 1
  store i64 %r1, ptr %p1
  %a32 = load volatile i32, ptr @v32
  %r2 = zext i32 %a32 to i64
  %p2 = getelementptr i64, ptr %out, i64 2
  store i64 %r2, ptr %p2
  %r3 = load volatile i64, ptr @v64
  %p3 = getelementptr i64, ptr %out, i64 3
  store i64 %r3, ptr %p3
  %v = load volatile <2 x i64>, ptr @v128
  %p4 = getelementptr i64, ptr %out, i64 4
  store <2 x i64> %v, ptr %p4, align 8
  %r6 = load volatile i64, ptr @gotted
  %p6 = getelementptr i64, ptr %out, i64 6
  store i64 %r6, ptr %p6
  %r7 = call i64 @triple(i64 %r0)
  %p7 = getelementptr i64, ptr %out, i64 7
  store i64 %r7, ptr %p7
  %q8 = load volatile ptr, ptr @ptrs
  %r8 = load i64, ptr %q8
  %p8 = getelementptr i64, ptr %out, i64 8
  store i64 %r8, ptr %p8
  %slot = getelementptr [2 x ptr], ptr @ptrs, i64 0, i64 1
  %f = load volatile ptr, ptr %slot
  %r9 = call i64 %f(i64 5)
  %p9 = getelementptr i64, ptr %out, i64 9
  store i64 %r9, ptr %p9
  %d64 = load volatile i64, ptr @rel64
  %base64 = ptrtoint ptr @rel64 to i64
  %t64 = add i64 %base64, %d64
  %q10 = inttoptr i64 %t64 to ptr
  %r10 = call i64 %q10(i64 6)
  %p10 = getelementptr i64, ptr %out, i64 10
  store i64 %r10, ptr %p10
  %d32 = load volatile i32, ptr @rel32
  %d32x = sext i32 %d32 to i64
  %base32 = ptrtoint ptr @rel32 to i64
  %t32 = add i64 %base32, %d32x
  %q11 = inttoptr i64 %t32 to ptr
  %r11 = call i64 %q11(i64 7)
  %p11 = getelementptr i64, ptr %out, i64 11
  store i64 %r11, ptr %p11
  %r12 = call i64 @tail(i64 2)
  %p12 = getelementptr i64, ptr %out, i64 12
  store i64 %r12, ptr %p12
  ret i32 0
}
'''

# out[k]: LDST8, LDST16, LDST32, LDST64, LDST128 (two words), GOT page + LD64_GOT_LO12, CALL26 triple(7), ABS64
# data pointer, ABS64 function pointer triple(5), PREL64 triple(6), PREL32 tail(7) = triple(1007), CALL26 to
# tail(2) which JUMP26s to triple(1002). ADRP (ADR_PREL_PG_HI21) + ADD_ABS_LO12_NC form the addresses.
RELOCATION_KERNEL_RESULTS = [7, 300, 70000, 5000000000, 11, 12, 99, 22, 5000000000, 16, 19, 3022, 3007]


def relocation_kernel_object(target) -> bytes:
    """RELOCATION_KERNEL_IR compiled for `target` (an aarch64 or riscv64 Target) into an ELF object."""
    import llvmlite.binding as llvm

    from kiln.compiler.target import initialize_llvm

    initialize_llvm()
    module = llvm.parse_assembly(RELOCATION_KERNEL_IR)
    module.triple = target.triple
    return target.target_machine().emit_object(module)


class Relocation(NamedTuple):
    """One RELA entry of an object: where it stands in the file (so that a test can rewrite it) and what it says."""
    section: str        # the section it patches
    entry: int          # the file offset of the entry itself
    offset: int         # the place it patches, within that section
    type: int
    symbol: str
    value: int          # the symbol's value
    addend: int


def relocations(obj: bytes) -> list[Relocation]:
    """Every RELA entry of an ELF object, except those patching .eh_frame."""
    from kiln.compiler.link import SHT_RELA, _Elf

    elf = _Elf(obj)
    found = []
    for s in elf.sections:
        if s.type == SHT_RELA and not elf.sections[s.info].name.startswith(".eh_frame"):
            for k, (offset, rtype, sym, addend) in enumerate(elf.relocations(s)):
                found.append(Relocation(elf.sections[s.info].name, s.offset + 24 * k, offset, rtype,
                                        elf.symbols[sym].name, elf.symbols[sym].value, addend))
    return found


def patched(obj: bytes, entry: int, *, rtype: int | None = None, addend: int | None = None) -> bytes:
    """obj with the RELA entry at file offset `entry` given another type and/or addend."""
    data = bytearray(obj)
    offset, info, old_addend = struct.unpack_from("<QQq", data, entry)
    if rtype is not None:
        info = (info >> 32) << 32 | rtype
    struct.pack_into("<QQq", data, entry, offset, info, old_addend if addend is None else addend)
    return bytes(data)


def run_relocation_kernel(arch: Arch, kiln_run: Path, target, work: Path) -> list[int]:
    """The relocation kernel compiled and linked for `target`, run once under qemu by `kiln_run` (a kiln-run
    built for arch, which applies the loader relocations): its results (RELOCATION_KERNEL_RESULTS when every
    relocation was resolved right)."""
    from kiln.compiler.link import link_object

    path = work / "relocations.vmfb"
    path.write_bytes(relocation_module(link_object(relocation_kernel_object(target), target)))
    out = work / "out.npy"
    run_under_qemu(arch, kiln_run, f"--module={path}", "--function=run", f"--output=@{out}")
    return np.load(out).tolist()


def relocation_module(linked) -> bytes:
    """A module whose function `run() -> i64[13]` dispatches the linked relocation kernel once."""
    from kiln.vm.isa import Instr
    from kiln.vm.module_spec import BindingSpec, FunctionSpec, KernelSpec, ModuleSpec, TensorType, ValueInfo
    from kiln.vm.writer import serialize

    out = TensorType("i64", (len(RELOCATION_KERNEL_RESULTS),))
    run = FunctionSpec("run", True, [], [ValueInfo("out", out)], "[]", "[]", 1, 0,
                       [Instr("alloc", 0, out), Instr("dispatch", 0, 1, [0], []), Instr("ret", [0])])
    return serialize(ModuleSpec("relocations", functions=[run], kernel_images=[linked.to_spec()],
                                kernels=[KernelSpec("kernel", 0, linked.entries["kernel"],
                                                    [BindingSpec(8 * len(RELOCATION_KERNEL_RESULTS), True)], 0)]))
