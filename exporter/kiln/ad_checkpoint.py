"""jax.ad_checkpoint: checkpoint, checkpoint_name and checkpoint_policies (kiln.transforms.checkpoint; kiln
accepts the policies and does not rematerialize, docs/jax_compat.md), under the module name JAX programs import
them from."""
from kiln.transforms.checkpoint import checkpoint, checkpoint_name, checkpoint_policies

from typing import NamedTuple

remat = checkpoint


class _Marker:
    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return self._name


# What a JAX policy may return for a value (besides True/False); kiln accepts policies and does not consult them.
Saveable = _Marker("Saveable")
Recompute = _Marker("Recompute")


class Offloadable(NamedTuple):
    """A policy's answer "save, in memory space dst" (JAX moves the value from src to dst): kiln keeps values in
    host memory."""
    src: str
    dst: str


__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat", "Saveable", "Recompute", "Offloadable"]
