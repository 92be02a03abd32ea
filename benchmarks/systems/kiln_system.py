"""kiln through kiln.jit: traced, compiled and run in the C runtime from Python.

The first call compiles (in this process); later calls are what a user of
kiln.jit sees per call, Python argument handling included.
"""
import numpy as np

from ..measure import time_calls
from ..workloads.base import Ops, as_tuple


def kiln_ops() -> Ops:
    import kiln
    import kiln.numpy as knp

    return Ops("kiln", knp, scan=kiln.lax.scan, value_and_grad=kiln.value_and_grad, lax=kiln.lax,
               gelu=kiln.nn.gelu)


def benchmark(workload, inputs, settings):
    import kiln

    ops = kiln_ops()
    jitted = kiln.jit(lambda *args: workload.fn(ops, *args))
    result = time_calls(lambda: as_tuple(jitted(*inputs)), settings)
    outputs = tuple(np.asarray(r) for r in result.pop("results"))
    result["version"] = f"kiln {kiln.__version__}"
    return result, outputs
