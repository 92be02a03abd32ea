"""Runs the benchmarks and prints the comparison tables.

    python -m benchmarks.run [--quick [--jobs N]] [--only NAME[,NAME...]] [--systems S,...] [--json out.json]
    python benchmarks/run.py ...          (the same)

For each workload and size, the inputs are made once (seeded) and every
system runs them in its own worker process (benchmarks.worker): numpy,
kiln.jit and kiln-run with this Python; JAX and IREE with the peers' venv
(benchmarks/.venv-peers, made by benchmarks/setup_peers.sh; skipped with a
reason when absent). Every system's results are checked against numpy's; a
wrong result is marked WRONG in the table, listed in a banner, and makes the
exit status 1, as does a kiln or kiln-run error. Peers that cannot run a
workload are skipped and noted, never fatal. Before the workloads, the
machine's memory bandwidth is measured once (benchmarks.stream) for the
report's STREAM ratios of kiln-run on the memory-bound workloads.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

import numpy as np  # noqa: E402

from benchmarks import report, stream  # noqa: E402
from benchmarks.workloads import ALL, BY_NAME, check_outputs  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PEERS_PYTHON = REPO / "benchmarks" / ".venv-peers" / "bin" / "python"
PEER_SYSTEMS = ("jax", "iree")
KILN_SYSTEMS = ("kiln", "kiln-run")
WORKER_TIMEOUT_S = 900


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="the tiniest sizes and three timed calls: a smoke test, not a measurement")
    parser.add_argument("--only", action="append", default=[],
                        help=f"workload names, comma-separated or repeated ({', '.join(BY_NAME)})")
    parser.add_argument("--size", action="append", default=[], help="only these size labels")
    parser.add_argument("--systems", default=",".join(report.SYSTEMS),
                        help=f"comma-separated subset of {','.join(report.SYSTEMS)}")
    parser.add_argument("--ratios", choices=("median", "min"), default="median",
                        help="which time the kiln/X ratios compare (min is steadier on a busy machine)")
    parser.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    parser.add_argument("--peers-python", default=str(PEERS_PYTHON),
                        help="Python of the venv with jax and iree (default: benchmarks/.venv-peers)")
    parser.add_argument("--verbose", action="store_true", help="print workers' tracebacks")
    parser.add_argument("--no-stream", action="store_true",
                        help="do not measure the STREAM bandwidth (no GB/s ratios to STREAM)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="workloads run at once (each one's systems in turn); above 1 the workers disturb "
                             "each other's times, so only for --quick smoke runs (the tests use 2)")
    args = parser.parse_args(argv)
    names = [n for item in args.only for n in item.split(",") if n]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    systems = [s for s in args.systems.split(",") if s]
    bad = [s for s in systems if s not in report.SYSTEMS]
    if bad:
        parser.error(f"unknown system(s) {', '.join(bad)}; known: {', '.join(report.SYSTEMS)}")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    args.workloads = [BY_NAME[n] for n in names] if names else list(ALL)
    args.system_list = [s for s in report.SYSTEMS if s in systems]
    return args


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "platform": platform.platform(), "load_average_start": load_average()}


def load_average() -> float | None:
    """The 1-minute load average: other work on the machine inflates and scatters the times."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def run_worker(system: str, python: str, workload, size, inputs_path: Path, tmp: Path, quick: bool) -> dict:
    """Runs one worker process and returns its result dict (status ok/skipped/error)."""
    stem = f"{workload.name}-{size.label}-{system}"
    result_path, outputs_path = tmp / f"{stem}.json", tmp / f"{stem}.npz"
    cmd = [python, "-m", "benchmarks.worker", "--system", system, "--workload", workload.name,
           "--size", size.label, "--inputs", str(inputs_path), "--result", str(result_path),
           "--outputs", str(outputs_path)] + (["--quick"] if quick else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    if system in PEER_SYSTEMS:
        env.setdefault("JAX_PLATFORMS", "cpu")
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"status": "error", "reason": f"worker timed out after {WORKER_TIMEOUT_S} s"}
    if not result_path.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"status": "error", "reason": f"worker exited {proc.returncode}: {tail[0][:300]}"}
    result = json.loads(result_path.read_text())
    if result["status"] == "ok":
        with np.load(outputs_path) as data:
            result["outputs"] = tuple(data[f"out{i}"] for i in range(len(data.files)))
    return result


def check(workload, inputs, expected, result: dict) -> None:
    """Sets result['check'] ('ok' or what is wrong) and result['max_rel_error']."""
    outputs = result.pop("outputs")
    try:
        got = workload.view(inputs, outputs)
    except Exception as e:  # e.g. a wrong number of results
        result["check"], result["max_rel_error"] = f"cannot compare: {type(e).__name__}: {e}", None
        return
    ok, err, message = check_outputs(got, expected, workload.tolerance)
    result["check"], result["max_rel_error"] = ("ok" if ok else message), err


def run(args) -> tuple[list[dict], dict]:
    peers_python = args.peers_python if Path(args.peers_python).exists() else None
    machine = machine_info()
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": machine, "quick": args.quick, "systems": args.system_list, "ratios": args.ratios}
    if "kiln-run" in args.system_list and not args.no_stream:
        print("  STREAM bandwidth ...", end="", file=sys.stderr, flush=True)
        try:
            meta["stream"] = stream.quick_measure() if args.quick else stream.measure()
            print(f" {meta['stream']['reference_gb_per_s']:.2f} GB/s ({meta['stream']['reference']})",
                  file=sys.stderr, flush=True)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:  # no C compiler: no ratios, not fatal
            meta["stream"] = {"error": str(e)}
            print(f" not measured: {e}", file=sys.stderr, flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="kiln-benchmarks-") as tmp:
        tmp = Path(tmp)
        cases = [(workload, size) for workload in args.workloads
                 for size in (workload.quick_sizes if args.quick else workload.sizes)
                 if not args.size or size.label in args.size]
        live = args.jobs == 1  # progress as each worker ends; with --jobs, each case's lines when it is done

        def run_case(case):
            workload, size = case
            out, lines = [], []
            inputs = workload.inputs(size)
            inputs_path = tmp / f"{workload.name}-{size.label}-inputs.npz"
            np.savez(inputs_path, **{f"arg{i}": a for i, a in enumerate(inputs)})
            expected = workload.view(inputs, workload.reference(inputs))
            for system in args.system_list:  # in turn: kiln-run's export finds kiln.jit's kernels in the cache
                if live:
                    print(f"  {workload.name} {size.label} {system} ...", end="", file=sys.stderr, flush=True)
                if system in PEER_SYSTEMS and peers_python is None:
                    result = {"status": "skipped",
                              "reason": f"no peers venv at {args.peers_python}; run benchmarks/setup_peers.sh"}
                else:
                    python = peers_python if system in PEER_SYSTEMS else sys.executable
                    result = run_worker(system, python, workload, size, inputs_path, tmp, args.quick)
                if result["status"] == "ok":
                    check(workload, inputs, expected, result)
                result.update(workload=workload.name, size=size.label, system=system)
                if workload.bytes_moved is not None:
                    result["bytes_moved"] = int(workload.bytes_moved(size.params))
                progress = _progress(result)
                if args.verbose and result.get("traceback"):
                    progress += "\n" + result["traceback"].rstrip("\n")
                if live:
                    print(" " + progress, file=sys.stderr, flush=True)
                lines.append(f"  {workload.name} {size.label} {system} ... {progress}")
                out.append(result)
            return out, lines

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # threads waiting on worker processes
            for out, lines in (map(run_case, cases) if live else pool.map(run_case, cases)):  # in order
                if not live:
                    print("\n".join(lines), file=sys.stderr, flush=True)
                results.extend(out)
    machine["load_average_end"] = load_average()
    return results, meta


def _progress(r: dict) -> str:
    if r["status"] != "ok":
        return f"{r['status']}: {r.get('reason')}"
    t = r["median_s"] if r.get("median_s") is not None else r["mean_s"]
    return f"{report.format_seconds(t)}  check: {r['check']}"


def failures(results: list[dict]) -> list[str]:
    """What makes the run fail: wrong numbers from any system, errors from kiln."""
    bad = []
    for r in results:
        if r["status"] == "ok" and r["check"] != "ok":
            bad.append(f"{r['system']} {r['workload']} {r['size']}: WRONG RESULT: {r['check']}")
        elif r["status"] == "error" and r["system"] in KILN_SYSTEMS:
            bad.append(f"{r['system']} {r['workload']} {r['size']}: ERROR: {r.get('reason')}")
    return bad


def main(argv=None) -> int:
    args = parse_args(argv)
    results, meta = run(args)
    clean = [{k: v for k, v in r.items() if k != "traceback"} for r in results]
    print()
    print(report.render({**meta, "results": clean}))
    if args.json:
        Path(args.json).write_text(json.dumps({**meta, "results": clean}, indent=1))
    bad = failures(results)
    if bad:
        bar = "!" * 78
        print(f"\n{bar}\n!!! {len(bad)} FAILURE(S): kiln's numbers are wrong or kiln failed\n{bar}", file=sys.stderr)
        for line in bad:
            print(f"!!! {line}", file=sys.stderr)
        print(bar, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
