"""`make check-sweep`: `kiln check` (kiln.program.check) on the programs of tests/programs/.

For each program (exported as tests/test_programs.py exports it, on the same arguments):
1. the healthy module: every dispatch must be within tolerance (no false alarm);
2. each of its first KERNELS distinct elementwise (or horizontal) kernels compiled wrong on purpose
   (KILN_TEST_PERTURB_KERNEL): the first failure must be that kernel's first dispatch, unless the
   perturbation left that dispatch's outputs bit for bit as the healthy module's (inert: y (1 + 2^-7) + 2^-7
   of a constant -inf output is -inf), which no check can see and is counted apart.
Prints one line per program and exits 1 on a false alarm or a miss. 9 minutes on 2 cores loaded by other work
for the 36 programs (each perturbed module is compiled again; the other kernels come from the kernel cache).

    .venv/bin/python tests/check_sweep.py [PROGRAM ...]
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "programs")]

import kiln  # noqa: E402
from kiln import Program, random  # noqa: E402
from kiln.compiler.perturb import ENV  # noqa: E402
from kiln.program import check  # noqa: E402
from kiln.program.check import check_program  # noqa: E402
from test_programs import EXPORT_SEED, PROGRAMS  # noqa: E402

KERNELS = 6


def exported(name: str, tag: str):
    """A Program whose one function `run` is the program's export(key) function, and its arguments."""
    fn, args = importlib.import_module(name).export(random.PRNGKey(EXPORT_SEED))
    leaves, treedef = kiln.tree_util.tree_flatten(args)
    kfn = lambda *flat: fn(*kiln.tree_util.tree_unflatten(treedef, flat))  # noqa: E731
    names = [f"a{i}" for i in range(len(leaves))]
    namespace = {"Program": Program, "kfn": kfn, "args": leaves}
    params = ", ".join(f"{n}=Program.like(args[{i}])" for i, n in enumerate(names))
    exec(f"def run(self, {params}):\n    return kfn({', '.join(names)})", namespace)
    cls = type(f"Check_{name}_{tag}", (Program,), {"run": namespace["run"]}, export_name=name)
    return cls, [np.asarray(a) for a in leaves]


class _Enough(Exception):
    """Raised by the dispatch observer to end a perturbed call past the perturbed kernel's first dispatch."""


@contextlib.contextmanager
def first_outputs(into: dict, results: list | None = None, stop_after: int | None = None):
    """Keeps in `into` the output bytes of each kernel's first dispatch (kernel name -> list of bytes), and in
    `results` each dispatch's DispatchResult; with `stop_after`, ends the call (_Enough) once that dispatch
    is checked: what follows cannot change the verdict (a perturbed module whose wrong values change the
    iteration count of a loop, neural_ode's adaptive steps, may otherwise run thousands of dispatches more)."""
    original = check.check_dispatch

    def recording(index, record, input_bytes, output_bytes, step, rtol):
        into.setdefault(record.kernel_name, [bytes(b) for b in output_bytes])
        result = original(index, record, input_bytes, output_bytes, step, rtol)
        if results is not None:
            results.append(result)
        if stop_after is not None and index >= stop_after:
            raise _Enough
        return result

    check.check_dispatch = recording
    try:
        yield into
    finally:
        check.check_dispatch = original


def sweep(name: str) -> bool:
    cls, inputs = exported(name, "healthy")
    with first_outputs({}) as healthy_outputs:
        healthy = check_program(cls, "run", inputs)
    ok = healthy.passed
    if not ok:
        print(healthy.text())
    kernels = []
    for r in healthy.results:
        if r.kernel.startswith(("kiln_elementwise", "kiln_horizontal")) and r.kernel not in kernels:
            kernels.append(r.kernel)
    found = inert = 0
    for kernel in kernels[:KERNELS]:
        first = next(r.index for r in healthy.results if r.kernel == kernel)
        os.environ[ENV] = kernel
        results: list = []
        try:
            with first_outputs({}, results, stop_after=first) as outputs:
                check_program(exported(name, kernel)[0], "run", inputs)
        except _Enough:
            pass
        finally:
            del os.environ[ENV]
        bad = next((r for r in results if not r.passed), None)
        if bad is not None and (bad.index, bad.kernel) == (first, kernel):
            found += 1
        elif bad is None and outputs.get(kernel) == healthy_outputs[kernel]:
            inert += 1  # the same inputs (every dispatch before it is the healthy one) and the same outputs
            print(f"  {name}: {kernel} compiled wrong (first dispatched as #{first}) wrote the healthy kernel's "
                  f"bits there (the perturbation of its outputs is inert)")
        else:
            ok = False
            print(f"  {name}: {kernel} compiled wrong (first dispatched as #{first}), first failure: "
                  f"{'none' if bad is None else f'#{bad.index} {bad.kernel}'}")
    worst = max((r.max_rel for r in healthy.results), default=0.0)
    print(f"{name}: {len(healthy.results)} dispatches, {sum(not r.passed for r in healthy.results)} beyond "
          f"tolerance (largest relative error {worst:.2g}); {found} of {min(len(kernels), KERNELS) - inert} "
          f"perturbed kernels named at their first dispatch" + (f" ({inert} inert)" if inert else ""), flush=True)
    return ok


def main(names) -> int:
    results = [sweep(name) for name in names or PROGRAMS]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
