"""Native QR and SVD kernels (the `svd` kernel strategy). Filled in by the next commit."""
from __future__ import annotations


def plan(region, target):
    """(body emitter, parallel items, work, detail) of a qr/svd kernel region."""
    raise NotImplementedError("linalg_svd.plan: no primitive names the svd strategy yet")
