"""One measurement in its own process: a system running one workload at one size.

    python -m benchmarks.worker --system kiln --workload matmul --size 256x256x256 \
        --inputs in.npz --result out.json --outputs out.npz [--quick]

The run harness (benchmarks.run) starts one worker per (workload, size,
system), with kiln's Python for numpy/kiln/kiln-run and the peers' venv
Python for jax/iree, so that memory is measured in a fresh process and no
system's libraries (thread pools, allocators) disturb another's. The result
JSON holds status ("ok", "skipped" or "error"), the timings and memory, and a
reason when not ok; the results themselves go to an .npz for the check.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback

import numpy as np

from .measure import Settings
from .systems import MODULES, Skip
from .workloads import BY_NAME


def load_inputs(path: str) -> tuple:
    with np.load(path) as data:
        return tuple(data[f"arg{i}"] for i in range(len(data.files)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", required=True, choices=sorted(MODULES))
    parser.add_argument("--workload", required=True, choices=sorted(BY_NAME))
    parser.add_argument("--size", required=True)
    parser.add_argument("--inputs", required=True, help=".npz with arg0, arg1, ...")
    parser.add_argument("--result", required=True, help="where to write the result JSON")
    parser.add_argument("--outputs", required=True, help="where to write the results (.npz)")
    parser.add_argument("--quick", action="store_true", help="one warm-up and three timed calls")
    args = parser.parse_args(argv)

    settings = Settings.quick() if args.quick else Settings()
    workload = BY_NAME[args.workload]
    inputs = load_inputs(args.inputs)
    try:
        system = importlib.import_module(f".systems.{MODULES[args.system]}", __package__)
        result, outputs = system.benchmark(workload, inputs, settings)
        result["status"] = "ok"
        np.savez(args.outputs, **{f"out{i}": np.asarray(o) for i, o in enumerate(outputs)})
    except Skip as e:
        result = {"status": "skipped", "reason": str(e)}
    except Exception as e:  # reported in the table; the traceback goes to the result for --verbose
        result = {"status": "error", "reason": f"{type(e).__name__}: {_one_line(str(e))}",
                  "traceback": traceback.format_exc()}
    with open(args.result, "w") as f:
        json.dump(result, f)
    return 0


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


if __name__ == "__main__":
    sys.exit(main())
