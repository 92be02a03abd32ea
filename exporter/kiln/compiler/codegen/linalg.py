"""Kernels of the native linear algebra primitives (kiln.lax._linalg_native): the `linalg` kernel
strategy's code. plan(region, target) -> (emit, parallel items, work, detail)."""
from __future__ import annotations

_EMITTERS: dict = {}


def plan(region, target):
    eqn = region.eqns[-1]
    return _EMITTERS[eqn.primitive.kernel_kind](region, target)
