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
    they live in an optional venv and would only slow the test)."""
    out = tmp_path_factory.mktemp("bench") / "quick.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--systems", "numpy,kiln,kiln-run", "--json", str(out)],
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
    tolerance = {w.name: w.tolerance for w in ALL}
    for r in results:
        where = f"{r['system']} {r['workload']} {r['size']}"
        assert r["status"] == "ok", f"{where}: {r.get('reason')}"
        assert r["check"] == "ok", f"{where}: {r['check']}"
        assert r["max_rel_error"] <= tolerance[r["workload"]], where
        assert r["repeats"] >= 3 and r["min_s"] > 0, where


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
