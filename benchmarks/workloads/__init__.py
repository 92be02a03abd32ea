"""The registry of workloads: every module's WORKLOADS, in table order."""
from . import calls, conv, elementwise, linalg, linalg_spectral, matmul, mlp, reductions, residual_mlp, rnn
from .base import Ops, Size, Workload, check_outputs

ALL = [w for m in (calls, elementwise, reductions, conv, matmul, linalg, linalg_spectral, mlp, residual_mlp, rnn)
       for w in m.WORKLOADS]
BY_NAME = {w.name: w for w in ALL}

__all__ = ["ALL", "BY_NAME", "Ops", "Size", "Workload", "check_outputs"]
