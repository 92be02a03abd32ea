"""Timing and memory measurement used inside a worker process.

Timing: a first call (which includes any compilation) timed on its own, a
warm-up, then repeated calls until both a minimum count and a minimum total
time are reached; the median and the minimum are reported. The garbage
collector is off while timing, as in timeit.

Memory: the peak resident set size growth of the process from just before the
first call to the end of the timed calls (so it includes in-process
compilation, results and temporaries), read from the kernel's high-water mark
after resetting it through /proc/self/clear_refs (Linux); None where that is
not available.
"""
from __future__ import annotations

import gc
import re
import statistics
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """How long to measure: warm-up calls, then at least min_repeats calls and min_time seconds."""

    warmup: int = 2
    min_repeats: int = 5
    max_repeats: int = 1000
    min_time: float = 1.0

    @classmethod
    def quick(cls) -> "Settings":
        return cls(warmup=1, min_repeats=3, max_repeats=3, min_time=0.0)


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            match = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M)
    except OSError:
        return None
    return int(match.group(1)) if match else None


class PeakRss:
    """Peak RSS growth between start() and delta_bytes(); None when unsupported."""

    def __init__(self):
        self.base_kib = None

    def start(self) -> None:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
        except OSError:
            self.base_kib = None
            return
        self.base_kib = _status_kib("VmRSS")

    def delta_bytes(self) -> int | None:
        peak = _status_kib("VmHWM")
        if self.base_kib is None or peak is None:
            return None
        return max(0, peak - self.base_kib) * 1024


def _page_faults() -> int | None:
    try:
        import resource
    except ImportError:
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt + usage.ru_majflt


def time_calls(call, settings: Settings) -> dict:
    """Times call() (which must block until its results are on the host); returns a result dict
    with first_call_s, median_s, min_s, mean_s, repeats, page_faults_per_call (of the timed calls),
    peak_rss_delta and the last results."""
    rss = PeakRss()
    rss.start()
    start = time.perf_counter()
    results = call()
    first = time.perf_counter() - start
    for _ in range(settings.warmup):
        results = call()
    times: list[float] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    faults_before = _page_faults()
    try:
        begin = time.perf_counter()
        while len(times) < settings.min_repeats or (
            time.perf_counter() - begin < settings.min_time and len(times) < settings.max_repeats
        ):
            t0 = time.perf_counter()
            results = call()
            times.append(time.perf_counter() - t0)
    finally:
        if gc_was_enabled:
            gc.enable()
    faults_after = _page_faults()
    return {
        "first_call_s": first,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "mean_s": statistics.fmean(times),
        "repeats": len(times),
        "page_faults_per_call": None if faults_before is None else (faults_after - faults_before) / len(times),
        "peak_rss_delta": rss.delta_bytes(),
        "results": results,
    }
