"""IREE: the workload exported from JAX as StableHLO (jax.export), compiled by
iree-base-compiler for the local CPU (llvm-cpu, host CPU, O3, data tiling) and run
with iree-base-runtime's local-task driver (a thread pool, like kiln's).

Inputs are uploaded once as device arrays; each call's results are brought to
the host. The first call's time is the compile plus one call. A workload whose
StableHLO IREE cannot compile is skipped with the compiler's first error line.
"""
from importlib.metadata import version

import numpy as np

from . import Skip
from .jax_system import jax_ops
from ..measure import time_calls
from ..workloads.base import as_tuple

FLAGS = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
    "--iree-opt-level=O3",
    "--iree-opt-data-tiling",
]


def stablehlo_text(workload, inputs) -> str:
    """The workload as a StableHLO module (function @main over the flat inputs)."""
    jax, ops = jax_ops()
    from jax import export

    specs = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in inputs]
    exported = export.export(jax.jit(lambda *args: as_tuple(workload.fn(ops, *args))))(*specs)
    return exported.mlir_module()


def _first_error_line(text: str) -> str:
    for line in text.splitlines():
        if "error" in line:
            return line.strip()[:300]
    return text.strip().splitlines()[0][:300] if text.strip() else "no message"


def benchmark(workload, inputs, settings):
    try:
        import iree.compiler as ireec
        import iree.runtime as ireert
    except ImportError as e:
        raise Skip(f"IREE is not installed ({e}); run benchmarks/setup_peers.sh")
    text = stablehlo_text(workload, inputs)
    state = {}

    def compile_and_load():
        try:
            vmfb = ireec.compile_str(text, input_type="stablehlo", extra_args=FLAGS)
        except ireec.CompilerToolError as e:
            raise Skip(f"IREE could not compile the StableHLO: {_first_error_line(str(e))}")
        config = ireert.Config("local-task")
        context = ireert.SystemContext(config=config)
        module = ireert.VmModule.copy_buffer(context.instance, vmfb)
        context.add_vm_module(module)
        state["main"] = context.modules[module.name]["main"]
        state["args"] = [ireert.asdevicearray(config.device, np.asarray(a)) for a in inputs]

    def call():
        if "main" not in state:
            compile_and_load()
        results = state["main"](*state["args"])
        return tuple(np.asarray(r.to_host()) for r in as_tuple(results))

    result = time_calls(call, settings)
    outputs = result.pop("results")
    result["version"] = f"iree-base-runtime {version('iree-base-runtime')}"
    result["first_call_note"] = "compile + load + one call"
    return result, outputs
