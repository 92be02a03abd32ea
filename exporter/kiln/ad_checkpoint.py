"""jax.ad_checkpoint: checkpoint, checkpoint_name and checkpoint_policies (kiln.transforms.checkpoint; kiln
accepts the policies and does not rematerialize, docs/jax_compat.md), under the module name JAX programs import
them from."""
from kiln.transforms.checkpoint import checkpoint, checkpoint_name, checkpoint_policies

remat = checkpoint

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat"]
