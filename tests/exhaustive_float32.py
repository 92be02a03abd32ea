"""`make exhaustive-math`: float32 exp, log, log1p and tanh of kiln's math library, and kiln.nn.gelu (tanh form)
and its derivative, on EVERY float32 input.

Each function is compiled into one kernel per x86-64 build (x86-64-v4 by default: FMA, the bits of x86-64-v3,
aarch64 and riscv64; and x86-64-v2, without FMA, whose multiply-adds round twice: docs/targets.md) and run on
all 2^32 bit patterns in chunks, in process (kiln.compiler.inprocess). The reference is numpy's float64
result rounded to float32, computed once per chunk for every build. NaN must match NaN, infinities and signed
zeros exactly; the finite results must be within the bound of tests/compiler/test_mathlib.py (BOUNDS, the
numbers docs/accuracy.md states). Prints, per function and build, the worst error, where, and how many inputs
are at each ulp distance (the counts docs/accuracy.md quotes); exits 1 when a bound is exceeded.

gelu's reference is x sigmoid(z) in float64 (z = 2 sqrt(2/pi) (x + 0.044715 x^3), tests/test_nn_accuracy.py's
REF64) for 2^-20 <= |x| < 12.5 and its closed forms outside (_reference), its bound test_nn_accuracy's BOUNDS_F32. gelu_grad (kiln.grad of gelu, element by element) is measured
in ulp of the scale of its terms, s (1 + |x z' (1 - s)|) with s = sigmoid(z) (the derivative s + x z' s (1 - s)
cancels to 0 at x = -0.75), against test_nn_accuracy's GELU_GRAD_BOUND_F32.

About 2 minutes per function on 2 idle cores of a Zen 4 (10 minutes for the four; 30 on a loaded machine);
the tests (test_mathlib's dense sweeps) sample the same ranges. --step N takes every Nth bit pattern.

    .venv/bin/python tests/exhaustive_float32.py [--step N] [--cpu x86-64-v4,x86-64-v2] [exp log log1p tanh gelu gelu_grad]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "compiler"), str(HERE)]

from conftest import Case  # noqa: E402  (tests/compiler/conftest.py)
from references import ulps  # noqa: E402
from kiln.compiler.compile import compile_plan  # noqa: E402
from kiln.compiler.fusion import partition  # noqa: E402
from kiln.compiler.inprocess import KernelRunner  # noqa: E402
from kiln.compiler.target import Target  # noqa: E402
from kiln.lax import math_prims, prims  # noqa: E402

CHUNK = 1 << 23
FUNCTIONS = {"exp": (prims.exp, np.exp), "log": (prims.log, np.log), "log1p": (math_prims.P["log1p"], np.log1p),
             "tanh": (prims.tanh, np.tanh), "gelu": (None, None), "gelu_grad": (None, None)}


def bound(name: str) -> int:
    if name.startswith("gelu"):
        from test_nn_accuracy import BOUNDS_F32, GELU_GRAD_BOUND_F32

        return BOUNDS_F32["gelu_tanh"] if name == "gelu" else GELU_GRAD_BOUND_F32
    from test_mathlib import BOUNDS  # tests/compiler/test_mathlib.py: the bounds docs/accuracy.md states

    return BOUNDS["float32"][name]


def _case(name: str) -> Case:
    """The function as one traced graph over a chunk; kiln.nn.gelu's primitive inlined, as the compiler does."""
    if not name.startswith("gelu"):
        prim = FUNCTIONS[name][0]
        return Case(lambda a: [prim.bind(a)], [np.zeros(CHUNK, np.float32)])
    import kiln
    import kiln.nn as nn
    from kiln.compiler.inline import inline_calls
    from kiln.core.aval import ShapedArray
    from kiln.core.trace import trace_to_graph

    fn = nn.gelu if name == "gelu" else kiln.vmap(kiln.grad(nn.gelu))
    case = Case(lambda a: [a], [np.zeros(CHUNK, np.float32)])
    case.graph = inline_calls(trace_to_graph(lambda a: [fn(a)], [ShapedArray((CHUNK,), np.dtype(np.float32))]))
    case.plan = partition(case.graph)
    return case


def _reference(name: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(the float64 result rounded to float32, None) or, for gelu_grad, (that, the float64 scale of its terms)."""
    if not name.startswith("gelu"):
        return FUNCTIONS[name][1](x.astype(np.float64)).astype(np.float32), None
    from test_nn_accuracy import REF64, SQRT_2_OVER_PI, gelu_tanh_derivative64

    # The float64 formulas where gelu does its work, 2^-20 <= |x| < 12.5; outside, the same functions in closed form
    # (exp, the cost of a sweep, is not needed): below 2^-20, sigmoid(z) = 1/2 + z/4 to 2^-58 relative; from 12.5,
    # exp(-|z|) < 1e-64, so gelu is x (x > 0) or -0 and its derivative 1 or -0 (their limits at +-inf; gelu(-inf) is
    # -inf * 0 = NaN, as the formula).
    x64 = x.astype(np.float64)
    a = np.abs(x64)
    mid, tiny = (a >= 2.0 ** -20) & (a < 12.5), a < 2.0 ** -20
    want = np.where(x64 > 0, x64 if name == "gelu" else 1.0, x64 * 0.0 if name == "gelu" else -0.0)
    want[np.isnan(x64)] = np.nan
    terms = None if name == "gelu" else np.abs(want)
    t = x64[tiny]
    s = 0.5 + 2 * SQRT_2_OVER_PI * t * (1 + 0.044715 * t * t) / 4
    if name == "gelu":
        want[tiny] = t * s
        want[mid] = REF64["gelu_tanh"](x64[mid])
        return want.astype(np.float32), None
    product = t * 2 * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * t * t) * (1 - s)
    want[tiny], terms[tiny] = s * (1 + product), s * (1 + np.abs(product))
    want[mid], terms[mid] = gelu_tanh_derivative64(x64[mid])
    return want.astype(np.float32), terms


def sweep(name: str, cpus: list[str], step: int = 1) -> list[tuple[int, float | None, dict[int, int]]]:
    """Per build: (worst ulp error, an input where it occurs, {ulp distance: number of inputs})."""
    case = _case(name)
    runners = []
    for cpu in cpus:
        target = Target.host() if cpu == "host" else Target.named("x86_64-unknown-linux-gnu", cpu, variant=cpu)
        runners.append(KernelRunner(compile_plan([case.plan], target, cache=None)))
    counts = [np.zeros(64, np.int64) for _ in cpus]
    worst: list[tuple[int, float | None]] = [(0, None) for _ in cpus]
    for start in range(0, 1 << 32, CHUNK * step):
        bits = start + np.arange(CHUNK, dtype=np.uint64) * step
        x = bits[bits < (1 << 32)].astype(np.uint32).view(np.float32)
        with np.errstate(all="ignore"):
            want, terms = _reference(name, x)
        nan, inf = np.isnan(want), np.isinf(want)
        finite = ~nan & ~inf
        zero = finite & (want == 0)
        for j, runner in enumerate(runners):
            padded = np.concatenate([x, np.zeros(CHUNK - x.size, np.float32)]) if x.size < CHUNK else x
            (got,) = runner.run_plan(case.plan, case.graph, [padded])
            got = got[:x.size]
            label = f"{name} {cpus[j]}"
            if not np.array_equal(np.isnan(got), nan):
                raise AssertionError(f"{label}: NaN differs at {x[np.isnan(got) != nan][:5]}")
            if not np.array_equal(got[inf], want[inf]):
                raise AssertionError(f"{label}: infinities differ at {x[inf][got[inf] != want[inf]][:5]}")
            if terms is None and not np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])):
                raise AssertionError(f"{label}: the sign of a zero differs")
            differ = finite & (got.view(np.uint32) != want.view(np.uint32))  # most are equal: measure the rest
            if terms is None:
                d = ulps(got[differ], want[differ])
            else:  # ulp of the terms' scale, rounded up
                err = np.abs(got[differ].astype(np.float64) - want[differ].astype(np.float64))
                d = np.ceil(err / np.spacing(terms[differ].astype(np.float32)).astype(np.float64)).astype(np.int64)
            counts[j] += np.bincount(np.minimum(d, 63), minlength=64)
            counts[j][0] += int(np.count_nonzero(finite)) - d.size
            if d.size and d.max() > worst[j][0]:
                k = int(np.argmax(d))
                worst[j] = (int(d[k]), float(x[differ][k]))
    return [(w, at, {k: int(v) for k, v in enumerate(c) if v}) for (w, at), c in zip(worst, counts)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("functions", nargs="*", default=sorted(FUNCTIONS), choices=sorted(FUNCTIONS))
    parser.add_argument("--cpu", default="x86-64-v4,x86-64-v2", help="x86-64 builds, comma separated ('host': this one)")
    parser.add_argument("--step", type=int, default=1, help="take every STEP-th bit pattern (1: all of them)")
    args = parser.parse_args(argv)
    cpus = [c for c in args.cpu.split(",") if c]
    failed = False
    for name in args.functions:
        start = time.perf_counter()
        for cpu, (worst, at, counts) in zip(cpus, sweep(name, cpus, args.step)):
            ok = worst <= bound(name)
            failed |= not ok
            print(f"{name} float32 {cpu}: at most {worst} ulp (bound {bound(name)}){'' if ok else ' EXCEEDED'}"
                  f" at x={at!r}; inputs per ulp distance {counts}; {time.perf_counter() - start:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
