"""One module per measured system. Each exposes ``benchmark(workload, inputs, settings)``
returning (result dict, tuple of numpy results) or raising ``Skip`` with a reason.

The systems are imported lazily by the worker, one per process, so a worker
for numpy or kiln never imports JAX or IREE and the reverse.
"""


class Skip(Exception):
    """The system cannot run this workload here; the message says why."""


MODULES = {
    "numpy": "numpy_system",
    "kiln": "kiln_system",
    "kiln-run": "kiln_run_system",
    "jax": "jax_system",
    "iree": "iree_system",
}
