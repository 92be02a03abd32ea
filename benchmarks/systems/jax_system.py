"""JAX: jax.jit on the CPU backend, inputs already on the device, results blocked on and
brought to the host (np.asarray) each call, as kiln's results are."""
import os

import numpy as np

from . import Skip
from ..measure import time_calls
from ..workloads.base import Ops, as_tuple


def jax_ops():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise Skip(f"JAX is not installed ({e}); run benchmarks/setup_peers.sh")
    return jax, Ops("jax", jnp, scan=jax.lax.scan, value_and_grad=jax.value_and_grad, lax=jax.lax,
                    gelu=lambda x: jax.nn.gelu(x, approximate=True))


def benchmark(workload, inputs, settings):
    jax, ops = jax_ops()
    jitted = jax.jit(lambda *args: as_tuple(workload.fn(ops, *args)))
    device_inputs = [jax.device_put(a) for a in inputs]

    def call():
        return tuple(np.asarray(r) for r in jax.block_until_ready(jitted(*device_inputs)))

    result = time_calls(call, settings)
    outputs = result.pop("results")
    result["version"] = f"jax {jax.__version__} ({jax.devices()[0].platform})"
    return result, outputs
