"""kiln.tree: JAX's jax.tree short names (kiln.tree.map, kiln.tree.leaves, ...) for kiln.tree_util."""
from __future__ import annotations

import dataclasses

from .tree_util import tree_all as all  # noqa: A004
from .tree_util import tree_broadcast as broadcast
from .tree_util import tree_flatten as flatten
from .tree_util import tree_flatten_with_path as flatten_with_path
from .tree_util import tree_leaves as leaves
from .tree_util import tree_leaves_with_path as leaves_with_path
from .tree_util import tree_map as map  # noqa: A004
from .tree_util import tree_map_with_path as map_with_path
from .tree_util import tree_reduce as reduce
from .tree_util import tree_reduce_associative as reduce_associative
from .tree_util import tree_structure as structure
from .tree_util import tree_transpose as transpose
from .tree_util import tree_unflatten as unflatten

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map", "map_with_path",
           "reduce", "reduce_associative", "static", "structure", "transpose", "unflatten"]


def static(**kwargs):
    """dataclasses.field(**kwargs) marked static=True in its metadata: a static field for
    kiln.tree_util.register_dataclass."""
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata["static"] = True
    return dataclasses.field(metadata=metadata, **kwargs)
