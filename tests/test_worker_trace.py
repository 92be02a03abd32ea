"""`kiln-run --trace`: each dispatch's workgroups as slices on the threads that ran them (issue 12)."""
import json

import numpy as np
import pytest

from runtime_tools import native_build_dir, run


@pytest.fixture(scope="module")
def kiln_run():
    return native_build_dir() / "kiln-run"


def test_dispatch_slices_per_worker(kiln_run, tmp_path):
    """Every dispatch is followed by one slice per thread that ran its workgroups: on that thread's
    track (named "kiln worker N" for the pool's threads), inside the dispatch's time span, together
    running each of its workgroups once; the calling thread's own share is worker 0 on the call's track."""
    import kiln.numpy as knp
    from kiln import Program

    x = np.ones((2048, 2048), np.float32)

    class Wide(Program, export_name="wide"):
        def run(self, x=Program.like(x)):
            return knp.exp(x) * 2.0 + knp.sin(x)

    path = tmp_path / "wide.vmfb"
    Program.get_compiled_artifact(Wide).save(path)
    trace = tmp_path / "trace.json"
    run(kiln_run, f"--module={path}", "--function=run", "--input=2048x2048xf32=0.5", "--workers=4",
        "--benchmark=5", f"--trace={trace}")
    events = json.loads(trace.read_text())["traceEvents"]
    calls = [e for e in events if e.get("cat") == "call"]
    dispatches = [e for e in events if e.get("cat") == "dispatch"]
    slices = [e for e in events if e.get("cat") == "workgroups"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert len(calls) == 5 and dispatches and all(d["args"]["workgroups"] > 1 for d in dispatches)
    assert {e["tid"] for e in events if e.get("ph") != "M"} <= set(names)
    for d in dispatches:
        mine = [s for s in slices if d["ts"] <= s["ts"] and s["ts"] + s["dur"] <= d["ts"] + d["dur"] + 1e-3]
        assert mine and all(s["name"] == d["name"] and s["ph"] == "X" for s in mine)
        assert sum(s["args"]["workgroups"] for s in mine) == d["args"]["workgroups"]
        assert len({s["tid"] for s in mine}) == len(mine) == len({s["args"]["worker"] for s in mine})
        for s in mine:
            assert 0 <= s["args"]["first_workgroup"] < d["args"]["workgroups"]
            assert 0 <= s["args"]["worker"] < 4
            if s["args"]["worker"] == 0:  # the calling thread's share, on its own track
                assert s["tid"] == d["tid"] and names[s["tid"]] == f"thread {s['tid']}"
            else:
                assert s["tid"] != d["tid"] and names[s["tid"]] == f"kiln worker {s['args']['worker']}"
    # every slice belongs to a dispatch, and the pool's threads took part
    assert len(slices) == sum(len([s for s in slices if d["ts"] <= s["ts"] <= d["ts"] + d["dur"]])
                              for d in dispatches)
    assert any(s["args"]["worker"] > 0 for s in slices)
