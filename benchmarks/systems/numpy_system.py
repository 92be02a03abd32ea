"""numpy: the workload's numpy implementation called directly (the baseline)."""
import numpy as np

from ..measure import time_calls
from ..workloads.base import as_tuple


def benchmark(workload, inputs, settings):
    if workload.numpy_fn is not None:
        fn = workload.numpy_fn
    else:
        from ..workloads.base import NUMPY_OPS

        def fn(*args):
            return workload.fn(NUMPY_OPS, *args)

    result = time_calls(lambda: as_tuple(fn(*inputs)), settings)
    outputs = tuple(np.asarray(r) for r in result.pop("results"))
    result["version"] = f"numpy {np.__version__}"
    return result, outputs
