"""Export time of a residual MLP training step at several depths (issue 10: 24 layers under 5 s).

Each layer is h + gelu(layernorm(h) @ w + b); the step is value_and_grad of the mean squared
error and an SGD update, declared as a Program and exported (trace, passes, fusion, kernels,
link, lowering, serialization), as `kiln export` does. Every depth runs in a fresh process,
twice over one kernel cache folder: `cold` compiles every kernel, `warm` reads them all from the
persistent cache (kiln.compiler.cache). It prints the wall-clock and CPU time of each export (the
exporting process's, and its forked compile workers' apart), the whole process's wall-clock and CPU
time (Python's start and imports included, every child process counted), and the time of each
stage (kiln.compiler.timing); export time is measured here, never asserted in tests.

    python -m benchmarks.export_time                    # 6, 12, 24 layers
    python -m benchmarks.export_time --layers 6,12,24,48 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("trace", "passes", "fusion", "kernel", "link", "lower", "serialize")


def residual_mlp_program(layers: int, width: int = 128, batch: int = 64):
    """The Program class: one public function `step(params, x, y) -> (loss, new_params)`, the loss
    being benchmarks/workloads/residual_mlp.py's (the residual_mlp_train workload's)."""
    import numpy as np

    import kiln
    import kiln.numpy as knp
    from kiln import Program

    from benchmarks.workloads import residual_mlp

    params = [{"w": np.zeros((width, width), np.float32), "b": np.zeros(width, np.float32),
               "scale": np.ones(width, np.float32), "shift": np.zeros(width, np.float32)} for _ in range(layers)]
    x = np.zeros((batch, width), np.float32)

    def loss(params, x, y):
        return residual_mlp.loss(knp, kiln.nn.gelu, params, x, y)

    class ResidualMLP(Program):
        def step(self, params=Program.like(params), x=Program.like(x), y=Program.like(x)):
            value, grads = kiln.value_and_grad(loss)(params, x, y)
            return value, kiln.tree_util.tree_map(lambda p, g: p - residual_mlp.LEARNING_RATE * g, params, grads)

    return ResidualMLP


def measure_once(layers: int) -> dict:
    """Exports the program once in this process: times and module size."""
    from kiln import Program
    from kiln.compiler.timing import recording

    cls = residual_mlp_program(layers)
    wall, cpu, workers = time.perf_counter(), time.process_time(), _children_cpu()
    with recording() as timings:
        module = Program.get_compiled_artifact(cls).bytes
    wall, cpu, workers = time.perf_counter() - wall, time.process_time() - cpu, _children_cpu() - workers
    kernels = [d for n, _, d in timings.stages if n == "kernel"]
    return {"layers": layers, "wall_s": wall, "cpu_s": cpu, "workers_cpu_s": workers, "module_bytes": len(module),
            "stages_s": {s: timings.total(s) for s in STAGES},
            "kernels": len(kernels), "cached": sum(d.endswith("(cached)") for d in kernels)}


def _children_cpu() -> float:
    """User + system seconds of this process's children that have ended (the forked compile workers; in
    the runner, the measuring processes)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(layer_counts: list[int]) -> list[dict]:
    rows = []
    for layers in layer_counts:
        with tempfile.TemporaryDirectory(prefix="kiln-export-bench-") as cache:
            env = dict(os.environ, KILN_CACHE_DIR=cache, KILN_CACHE="1")
            for mode in ("cold", "warm"):
                wall, tree = time.perf_counter(), _children_cpu()
                proc = subprocess.run([sys.executable, "-m", "benchmarks.export_time", "--worker", str(layers)],
                                      cwd=ROOT, env=env, capture_output=True, text=True)
                wall, tree = time.perf_counter() - wall, _children_cpu() - tree
                if proc.returncode:
                    raise RuntimeError(f"export of {layers} layers failed:\n{proc.stderr}")
                row = json.loads(proc.stdout.splitlines()[-1])
                row.update(cache=mode, process_wall_s=wall, process_cpu_s=tree)
                rows.append(row)
                print(_format_row(row), flush=True)
    return rows


def _format_row(row: dict) -> str:
    stages = "  ".join(f"{s} {row['stages_s'][s]:.2f}" for s in STAGES)
    return (f"{row['layers']:>3} layers  {row['cache']:<4}  wall {row['wall_s']:6.2f} s  cpu {row['cpu_s']:5.2f} s "
            f"+ workers {row['workers_cpu_s']:5.2f} s  (process: wall {row['process_wall_s']:5.2f} s, "
            f"cpu {row['process_cpu_s']:5.2f} s)  kernels {row['kernels']} ({row['cached']} cached)  [{stages}]")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="6,12,24", help="comma-separated depths (default 6,12,24)")
    parser.add_argument("--json", help="write every measurement to this file")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(measure_once(args.worker)))
        return 0
    print("residual MLP train step export (stage times in s; kernel = codegen + LLVM per kernel, or the cache read)")
    rows = run([int(n) for n in args.layers.split(",")])
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
