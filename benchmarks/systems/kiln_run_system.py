"""kiln exported to a .vmfb and timed by the standalone C tool, ``kiln-run --benchmark=N``.

This is the deployment path: no Python in the timed loop. The workload is
wrapped in a Program with one public function ``main`` (its argument types
taken from the inputs), exported, and run by kiln-run with the inputs as .npy
files. kiln-run reports, as JSON, the median, mean and minimum per call after
its warm-up calls and the page faults per call; the call count is chosen from a
short calibration run so the timed run lasts about ``settings.min_time``. Results for the numerical check come from a separate
run with ``--output``. Memory is the kiln-run process's peak RSS minus that
of a run that only loads the module (``--list``) and minus the inputs' bytes,
so it counts results and temporaries like the in-process systems do. The same ``--list`` run gives
the planned memory bound: the function's transient arena (``kiln_function_transient_size``).
"""
from __future__ import annotations

import inspect
import json
import math
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from . import Skip
from .kiln_system import kiln_ops



def export_module(workload, inputs, path: Path) -> float:
    """Writes the workload as a module with one function, main(arg0, arg1, ...); returns seconds taken."""
    from kiln import Program

    ops = kiln_ops()
    kernel = Program.kernel(lambda *args: workload.fn(ops, *args))

    def main(self, *args):
        return self._workload(*args)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(f"arg{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=Program.like(a))
               for i, a in enumerate(inputs)]
    main.__signature__ = inspect.Signature(params)
    start = time.perf_counter()
    cls = type("BenchmarkProgram", (Program,), {"_workload": kernel, "main": main},
               export_name=workload.name)
    Program.get_compiled_artifact(cls).save(path)
    return time.perf_counter() - start


def _run_with_rss(argv: list[str]) -> tuple[str, int]:
    """Runs kiln-run and returns (stdout, peak RSS bytes of that process)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, usage = os.wait4(pid, 0)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"kiln-run exited {code}: {stderr.strip() or stdout.strip()}")
    return stdout, usage.ru_maxrss * 1024


def transient_bytes(listing: str) -> int:
    """The planned transient arena of the module's function main, from `kiln-run --list` (its
    kiln_function_transient_size; kiln-run prints the line only when the arena is not empty)."""
    match = re.search(r"^  main\(.*\n    transient memory: (\d+) bytes$", listing, re.M)
    return int(match.group(1)) if match else 0


def _parse_statistics(stdout: str) -> dict:
    try:
        return json.loads(stdout)
    except ValueError:
        raise RuntimeError(f"kiln-run printed no benchmark statistics: {stdout.strip()[:200]}") from None


def benchmark(workload, inputs, settings):
    from kiln.vm._native import NativeArtifactNotFound, kiln_run_path

    try:
        tool = kiln_run_path()
    except NativeArtifactNotFound as e:
        raise Skip(f"kiln-run not found: {e}")
    help_text = subprocess.run([tool, "--help"], capture_output=True, text=True)
    if "--benchmark" not in help_text.stdout + help_text.stderr:
        raise Skip("this kiln-run has no --benchmark mode")

    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as tmp:
        tmp = Path(tmp)
        module = tmp / f"{workload.name}.vmfb"
        export_s = export_module(workload, inputs, module)
        base = [tool, f"--module={module}", "--function=main"]
        for i, a in enumerate(inputs):
            np.save(tmp / f"in{i}.npy", np.asarray(a))
            base.append(f"--input=@{tmp / f'in{i}.npy'}")

        listing, load_rss = _run_with_rss([tool, f"--module={module}", "--list"])
        # The results, for the numerical check: one --output per result (as many as numpy's).
        paths = [tmp / f"out{i}.npy" for i in range(len(workload.reference(inputs)))]
        _run_with_rss(base + [f"--output=@{p}" for p in paths])
        outputs = tuple(np.load(p) for p in paths)

        timed = base + [f"--warmup={settings.warmup}", "--benchmark_format=json"]
        mean = _parse_statistics(_run_with_rss(timed + ["--benchmark=1"])[0])["mean_s"]
        calls = settings.min_repeats
        if settings.min_time > 0 and mean > 0:
            calls = max(calls, min(settings.max_repeats, math.ceil(settings.min_time / mean)))
        stdout, bench_rss = _run_with_rss(timed + [f"--benchmark={calls}"])
        stats = _parse_statistics(stdout)
        input_bytes = sum(np.asarray(a).nbytes for a in inputs)
    result = {
        "first_call_s": export_s,
        "first_call_note": "export (trace+compile+write), not a call",
        "median_s": stats["median_s"],
        "min_s": stats["min_s"],
        "mean_s": stats["mean_s"],
        "repeats": calls,
        "page_faults_per_call": stats["page_faults_per_call"],
        "peak_rss_delta": max(0, bench_rss - load_rss - input_bytes),
        "transient_bytes": transient_bytes(listing),
        "version": "kiln-run (C runtime)",
    }
    return result, outputs
