"""Smoke test of the benchmark harness (benchmarks/): the quick mode on the tiniest sizes
produces its tables and every kiln result agrees with numpy. No timing is asserted."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import report
from benchmarks.run import failures
from benchmarks.workloads import ALL, check_outputs

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One quick run of every workload on numpy, kiln.jit and kiln-run (peers are left out:
    they live in an optional venv and would only slow the test), two workloads at a time (--jobs 2: the
    workers wait on each other's processes half as long)."""
    out = tmp_path_factory.mktemp("bench") / "quick.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--jobs", "2", "--systems", "numpy,kiln,kiln-run",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    return proc, json.loads(out.read_text()) if out.exists() else None


def test_quick_run_succeeds_and_prints_tables(quick_run):
    proc, data = quick_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data is not None
    lines = proc.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| workload"))
    for column in ("numpy", "kiln", "kiln-run", "kiln/numpy"):
        assert f" {column} " in header
    for w in ALL:
        assert any(line.startswith(f"| {w.name} ") for line in lines), f"no row for {w.name}"
    assert "WRONG" not in proc.stdout and "FAILURE" not in proc.stderr


def test_quick_run_results_match_numpy(quick_run):
    _, data = quick_run
    results = data["results"]
    expected = {(w.name, s.label, system) for w in ALL for s in w.quick_sizes
                for system in ("numpy", "kiln", "kiln-run")}
    assert {(r["workload"], r["size"], r["system"]) for r in results} == expected
    # in the workloads' order, each one's systems in turn, though two workloads ran at once (--jobs 2)
    assert [(r["workload"], r["system"]) for r in results] == [
        (w.name, system) for w in ALL for _ in w.quick_sizes for system in ("numpy", "kiln", "kiln-run")]
    tolerance = {w.name: w.tolerance for w in ALL}
    for r in results:
        where = f"{r['system']} {r['workload']} {r['size']}"
        assert r["status"] == "ok", f"{where}: {r.get('reason')}"
        assert r["check"] == "ok", f"{where}: {r['check']}"
        assert r["max_rel_error"] <= tolerance[r["workload"]], where
        assert r["repeats"] >= 3 and r["min_s"] > 0, where
    # The residual MLP training step (3 layers, width 16) among them: loss and gradients as numpy's backprop.
    assert {r["system"] for r in results if r["workload"] == "residual_mlp_train" and r["check"] == "ok"} == {
        "numpy", "kiln", "kiln-run"}


def test_check_outputs_catches_wrong_numbers():
    ref = (np.linspace(-1, 1, 10, dtype=np.float32),)
    assert check_outputs(ref, ref, 1e-6)[0]
    wrong = (ref[0] + np.float32(1e-3),)
    ok, err, message = check_outputs(wrong, ref, 1e-5)
    assert not ok and err == pytest.approx(1e-3, rel=1e-2) and "tolerance" in message
    assert not check_outputs((np.full(10, np.nan, np.float32),), ref, 1.0)[0]
    assert not check_outputs((ref[0][:5],), ref, 1.0)[0]
    assert not check_outputs(ref + ref, ref, 1.0)[0]


def test_wrong_results_are_loud():
    wrong = {"workload": "matmul", "size": "8x16x12", "system": "kiln", "status": "ok",
             "median_s": 1e-3, "min_s": 1e-3, "mean_s": 1e-3, "check": "result 0: relative error 0.5"}
    assert report.time_cell(wrong).startswith("WRONG")
    assert report.ratio_cell(wrong, {**wrong, "system": "numpy", "check": "ok"}) == "—"
    assert any("WRONG RESULT" in line for line in failures([wrong]))
    skipped_peer = {"workload": "matmul", "size": "8x16x12", "system": "jax", "status": "skipped", "reason": "x"}
    assert failures([skipped_peer]) == []
    kiln_error = {**skipped_peer, "system": "kiln", "status": "error"}
    assert failures([kiln_error])


def test_jobs_must_be_at_least_one(capsys):
    from benchmarks.run import parse_args

    assert parse_args(["--quick", "--jobs", "2"]).jobs == 2
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--jobs", "0"])
    assert exit_info.value.code == 2 and "--jobs must be at least 1" in capsys.readouterr().err


def test_missing_peers_are_skipped_with_a_reason(tmp_path):
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", "elementwise", "--systems", "numpy,jax,iree",
         "--peers-python", str(tmp_path / "no-such-python"), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(out.read_text())["results"]
    peers = [r for r in results if r["system"] in ("jax", "iree")]
    assert peers and all(r["status"] == "skipped" and "setup_peers.sh" in r["reason"] for r in peers)
    assert "skip" in proc.stdout


def test_export_time_script_reports_cold_and_warm_exports(tmp_path):
    """benchmarks/export_time.py at 1 and 2 layers: every stage reported, the warm export reads every
    kernel from the cache and gives the same module size (its times are printed, never checked)."""
    from benchmarks.export_time import STAGES

    out = tmp_path / "export.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.export_time", "--layers", "1,2", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())
    assert [(r["layers"], r["cache"]) for r in rows] == [(1, "cold"), (1, "warm"), (2, "cold"), (2, "warm")]
    for cold, warm in zip(rows[::2], rows[1::2]):
        assert cold["cached"] == 0 and warm["cached"] == warm["kernels"] == cold["kernels"] > 0
        assert cold["module_bytes"] == warm["module_bytes"] > 0
        assert set(cold["stages_s"]) == set(STAGES)
    assert sum(" layers  cold " in line or " layers  warm " in line for line in proc.stdout.splitlines()) == 4


def test_stream_measures_positive_finite_bandwidths():
    """benchmarks/stream.c, built with the system C compiler and run on small arrays (in cache, so the
    numbers are not this machine's bandwidth): every kernel's GB/s is a positive finite number, the
    program verified its arrays, and the reference is the better triad of 1 and all threads."""
    from benchmarks import stream

    m = stream.measure(elements=2**16, repetitions=2)
    for run in (m["single"], m["all"]):
        assert run["verified"] is True and run["n"] == 2**16 and run["repetitions"] == 2
        for kernel in stream.KERNELS:
            value = run[f"{kernel}_gb_per_s"]
            assert np.isfinite(value) and value > 0, (kernel, run)
    assert m["single"]["threads"] == 1
    assert m["reference_gb_per_s"] == max(m["single"]["triad_gb_per_s"], m["all"]["triad_gb_per_s"])
    with pytest.raises(RuntimeError, match="need N >= THREADS"):
        stream.run_stream(0, 1, 1)


def test_quick_run_reports_bandwidth_stream_ratio_and_planned_arena(quick_run):
    proc, data = quick_run
    assert data["stream"]["reference_gb_per_s"] > 0 and np.isfinite(data["stream"]["reference_gb_per_s"])
    lines = proc.stdout.splitlines()
    assert any(line.startswith("STREAM bandwidth (benchmarks/stream.c") for line in lines)
    header = next(line for line in lines if line.startswith("| workload") and "GB/s" in line)
    for column in ("moved", "kiln-run GB/s", "STREAM/kiln-run", "planned arena", "ΔRSS kiln-run",
                   "faults/call kiln-run"):
        assert f" {column} " in header
    runs = {(r["workload"], r["system"]): r for r in data["results"]}
    elementwise = runs[("elementwise", "kiln-run")]
    assert elementwise["bytes_moved"] == 2 * 4 * 1000 + 12
    gb = report.gb_per_s(elementwise)
    ratio = report.stream_ratio(elementwise, data["stream"])
    assert gb > 0 and ratio == pytest.approx(data["stream"]["reference_gb_per_s"] / gb)
    row = next(line for line in lines if line.startswith("| elementwise ") and "KiB" in line)
    assert f" {gb:.2f} " in row and f" {ratio:.2f}x " in row
    # The planned arena comes from kiln-run --list: the training step plans one, the elementwise chain none.
    assert runs[("residual_mlp_train", "kiln-run")]["transient_bytes"] > 0
    assert elementwise["transient_bytes"] == 0
    assert all("transient_bytes" in r for (_, system), r in runs.items() if system == "kiln-run")


def test_bytes_moved_counts_every_input_and_result_once():
    """A workload's bytes_moved (what its GB/s divides) equals its inputs' and numpy results' bytes."""
    memory_bound = [w for w in ALL if w.bytes_moved is not None]
    assert {w.name for w in memory_bound} >= {"elementwise", "sum_64mb", "sum_axis0", "sum_axis1", "softmax",
                                               "layernorm"}
    for w in memory_bound:
        for size in w.quick_sizes:
            inputs = w.inputs(size)
            moved = sum(a.nbytes for a in inputs) + sum(np.asarray(r).nbytes for r in w.reference(inputs))
            assert w.bytes_moved(size.params) == moved, (w.name, size.label)


def test_residual_mlp_reference_matches_central_differences():
    """The hand-written backprop of residual_mlp_train (numpy's reference) against central differences
    of the shared loss, in float64, for one entry of every parameter of every layer."""
    from benchmarks.workloads import BY_NAME, residual_mlp
    from benchmarks.workloads.base import NUMPY_OPS

    w = BY_NAME["residual_mlp_train"]
    inputs = tuple(a.astype(np.float64) for a in w.inputs(w.quick_sizes[0]))
    grads = w.view(inputs, w.reference(inputs))[1:]

    def loss(args):
        return residual_mlp.loss(np, NUMPY_OPS.gelu, residual_mlp.layer_params(args[:-2]), args[-2], args[-1])

    h = 1e-6
    for k in range(len(inputs) - 2):
        index = (1,) * inputs[k].ndim
        step = np.zeros_like(inputs[k])
        step[index] = h
        up, down = list(inputs), list(inputs)
        up[k], down[k] = inputs[k] + step, inputs[k] - step
        numeric = (loss(up) - loss(down)) / (2 * h)
        assert grads[k][index] == pytest.approx(numeric, rel=1e-4, abs=1e-6), k


SMALL_RUN = {
    "date": "2026-01-02T03:04:05+00:00", "quick": False, "systems": ["numpy", "kiln", "kiln-run"],
    "ratios": "median",
    "machine": {"cpu": "Test CPU", "cores": 2, "load_average_start": 0.1, "load_average_end": 0.2},
    "stream": {"array_bytes": 2**27, "repetitions": 10, "reference": "triad, 2 threads",
               "reference_gb_per_s": 10.0,
               "single": {"threads": 1, "copy_gb_per_s": 9.0, "scale_gb_per_s": 8.0, "add_gb_per_s": 8.5,
                          "triad_gb_per_s": 8.25},
               "all": {"threads": 2, "copy_gb_per_s": 12.0, "scale_gb_per_s": 11.0, "add_gb_per_s": 10.5,
                       "triad_gb_per_s": 10.0}},
    "results": [
        {"workload": "elementwise", "size": "16M", "system": "numpy", "status": "ok", "check": "ok",
         "median_s": 0.02, "min_s": 0.019, "mean_s": 0.02, "first_call_s": 0.02, "peak_rss_delta": 2**26,
         "page_faults_per_call": 16384.0, "bytes_moved": 8_000_000},
        {"workload": "elementwise", "size": "16M", "system": "kiln", "status": "ok", "check": "ok",
         "median_s": 0.004, "min_s": 0.002, "mean_s": 0.004, "first_call_s": 1.5, "peak_rss_delta": 2**27,
         "page_faults_per_call": 0.0, "bytes_moved": 8_000_000},
        {"workload": "elementwise", "size": "16M", "system": "kiln-run", "status": "ok", "check": "ok",
         "median_s": 0.0012, "min_s": 0.001, "mean_s": 0.0012, "first_call_s": 2.0, "peak_rss_delta": 2**26,
         "page_faults_per_call": 0.5, "transient_bytes": 0, "bytes_moved": 8_000_000},
        {"workload": "matmul", "size": "256x256x256", "system": "numpy", "status": "ok", "check": "ok",
         "median_s": 0.001, "min_s": 0.001, "mean_s": 0.001, "first_call_s": 0.001, "peak_rss_delta": 0,
         "page_faults_per_call": 0.0},
        {"workload": "matmul", "size": "256x256x256", "system": "kiln", "status": "error", "reason": "Boom: no"},
        {"workload": "matmul", "size": "256x256x256", "system": "kiln-run", "status": "ok", "check": "ok",
         "median_s": 0.0005, "min_s": 0.0004, "mean_s": 0.0005, "first_call_s": 2.0, "peak_rss_delta": 0,
         "page_faults_per_call": 0.0, "transient_bytes": 3 * 2**20},
    ],
}


def rows_of(markdown: str, start: str) -> list[list[str]]:
    return [line.split("|")[1:-1] for line in markdown.splitlines() if line.startswith(start)]


def test_markdown_report_of_a_json_file(tmp_path):
    """python -m benchmarks.report --markdown FILE renders a --json file's tables (what the README's
    Results section is filled from), with GB/s = bytes_moved / min time and STREAM / that."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(SMALL_RUN))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.report", "--markdown", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("# kiln benchmarks, 2026-01-02T03:04:05+00:00, Test CPU, 2 cores\n")
    assert out == report.render(SMALL_RUN) + "\n"
    cells = [[c.strip() for c in row] for row in rows_of(out, "| elementwise ")]
    assert cells[0] == ["elementwise", "16M", "20.00 ms (19.00)", "4.00 ms (2.00)", "1.20 ms (1.00)", "0.20x"]
    # 8e6 bytes / 1 ms = 8 GB/s; STREAM's 10 GB/s / 8 = 1.25x; no arena; 64 MiB; 0.5 faults per call.
    assert cells[2] == ["elementwise", "16M", "7.6 MiB", "8.00", "1.25x", "0 B", "64.0 MiB", "0.5"]
    matmul = [c.strip() for c in next(line for line in out.splitlines()
                                      if line.startswith("| matmul ") and "MiB" in line and "—" in line
                                      and line.count("|") == 9).split("|")[1:-1]]
    assert matmul == ["matmul", "256x256x256", "—", "—", "—", "3.0 MiB", "0.0 MiB", "0.0"]
    assert [c.strip() for c in rows_of(out, "| matmul ")[0]] == ["matmul", "256x256x256", "1.00 ms (1.00)", "error",
                                                                "500.0 µs (400.0)", "—"]
    assert "Reference: triad, 2 threads, 10.00 GB/s." in out
    assert "- error: kiln matmul 256x256x256: Boom: no" in out


def test_markdown_report_errors(tmp_path):
    missing = subprocess.run([sys.executable, "-m", "benchmarks.report", "--markdown", str(tmp_path / "none.json")],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "none.json" in missing.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"layers": 1}]))
    wrong = subprocess.run([sys.executable, "-m", "benchmarks.report", "--markdown", str(other)],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "is not a `benchmarks.run --json` file" in wrong.stderr
