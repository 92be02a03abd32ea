"""The native eigh kernel (the `eigh` kernel strategy). Filled in by the next commit."""
from __future__ import annotations


def plan(region, target):
    """(body emitter, parallel items, work) of an eigh_ql region."""
    raise NotImplementedError("linalg_eigh.plan: no primitive names the eigh strategy yet")
