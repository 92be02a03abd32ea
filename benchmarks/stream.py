"""This machine's memory bandwidth, measured once per benchmark run: the reference for kiln-run's
achieved GB/s on memory-bound workloads (issue 10: within 1.3x of STREAM).

benchmarks/stream.c (a STREAM-like copy/scale/add/triad over three arrays of doubles, independent
of kiln) is compiled with the system C compiler (``cc``, or ``$CC``) into build/benchmarks/ and run
with one thread and with one thread per core; the best of several repetitions of each kernel is
reported in GB/s (10^9 bytes/s, STREAM's counting: bytes read plus bytes written).

    python -m benchmarks.stream            # prints the measurement as JSON
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = Path(__file__).resolve().parent / "stream.c"
BUILD = REPO / "build" / "benchmarks"
KERNELS = ("copy", "scale", "add", "triad")
REFERENCE = "triad"  # the kernel the workloads' ratios use (the better of one thread and all threads)


def last_level_cache_bytes() -> int | None:
    """The largest CPU cache's size (Linux sysfs), None where unknown."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip()
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        try:
            sizes.append(int(text.rstrip("KMG")) * scale)
        except ValueError:
            continue
    return max(sizes) if sizes else None


def default_elements() -> int:
    """Doubles per array: each array at least 4x the last-level cache (STREAM's rule) and 64 MiB."""
    llc = last_level_cache_bytes() or 0
    return max(4 * llc, 64 * 2**20) // 8


def compile_stream() -> Path:
    """Compiles stream.c into build/benchmarks/ (again when the source is newer); returns the program."""
    exe = BUILD / "stream"
    if exe.exists() and exe.stat().st_mtime >= SOURCE.stat().st_mtime:
        return exe
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("no C compiler (cc, gcc or clang; or set CC) to build benchmarks/stream.c")
    BUILD.mkdir(parents=True, exist_ok=True)
    tmp = BUILD / f".stream.{os.getpid()}"
    proc = subprocess.run([cc, "-O2", "-pthread", "-o", str(tmp), str(SOURCE), "-lm"],
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{cc} could not build {SOURCE}: {proc.stderr.strip()[:500]}")
    os.replace(tmp, exe)  # atomic: a concurrent run sees the old program or the new one
    return exe


def run_stream(elements: int, repetitions: int, threads: int) -> dict:
    """One run of the program: {'copy_gb_per_s': ..., 'triad_gb_per_s': ..., 'threads': ..., ...}."""
    exe = compile_stream()
    proc = subprocess.run([str(exe), str(elements), str(repetitions), str(threads)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise RuntimeError(f"stream exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:300]}")
    result = json.loads(proc.stdout)
    bad = [k for k in KERNELS if not (math.isfinite(result[f"{k}_gb_per_s"]) and result[f"{k}_gb_per_s"] > 0)]
    if bad or not result["verified"]:
        raise RuntimeError(f"stream gave an invalid measurement: {proc.stdout.strip()}")
    return result


def measure(elements: int | None = None, repetitions: int = 10) -> dict:
    """Single-thread and all-thread bandwidth: {'elements', 'array_bytes', 'single': {...}, 'all': {...},
    'reference', 'reference_gb_per_s'}: the reference is the triad's best over one thread and all
    threads (on a busy machine the all-thread run can be the slower one)."""
    elements = elements or default_elements()
    cores = os.cpu_count() or 1
    single = run_stream(elements, repetitions, 1)
    every = run_stream(elements, repetitions, cores) if cores > 1 else single
    best = max((single, every), key=lambda r: r[f"{REFERENCE}_gb_per_s"])
    return {"elements": elements, "array_bytes": elements * 8, "repetitions": repetitions,
            "last_level_cache_bytes": last_level_cache_bytes(), "single": single, "all": every,
            "reference": f"{REFERENCE}, {best['threads']} thread{'s' if best['threads'] > 1 else ''}",
            "reference_gb_per_s": best[f"{REFERENCE}_gb_per_s"]}


def quick_measure() -> dict:
    """A tiny run (arrays of 1 MiB, in cache: not a measurement), for --quick."""
    return measure(elements=2**17, repetitions=3)


def main() -> int:
    print(json.dumps(measure(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
