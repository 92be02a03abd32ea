"""A Program's globals: leaves of exported trees, deduplicated by identity so aliases share a slot."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import dtypes
from ..core.aval import ShapedArray
from ..core.pytree import TreeDef, tree_flatten


@dataclass
class GlobalSlot:
    """One global of the module: the first export of a leaf names it and fixes its properties."""

    index: int
    name: str
    aval: ShapedArray
    initial: np.ndarray | None
    mutable: bool


@dataclass
class ExportedTree:
    """A class attribute that exports a tree of globals: its structure and leaf slots."""

    attr: str
    treedef: TreeDef
    slots: list[int]


class ExportGlobal:
    """Marker returned by Program.export_global."""

    def __init__(self, tree, initialize: bool = True, mutable: bool = True):
        self.tree = tree
        self.initialize = initialize
        self.mutable = mutable


def _is_array_leaf(x) -> bool:
    return isinstance(x, (np.ndarray, np.generic, ShapedArray))


def looks_like_global(value) -> bool:
    """True for arrays and for trees whose leaves are all arrays."""
    if isinstance(value, ExportGlobal):
        return True
    if _is_array_leaf(value):
        return True
    if isinstance(value, (tuple, list, dict)):
        leaves, _ = tree_flatten(value)
        return bool(leaves) and all(_is_array_leaf(x) for x in leaves)
    return False


class GlobalTable:
    """Collects globals in class order; the same leaf object exported twice is one slot."""

    def __init__(self):
        self.slots: list[GlobalSlot] = []
        self.trees: dict[str, ExportedTree] = {}
        self._by_identity: dict[int, int] = {}
        self._keepalive: list = []

    def export(self, attr: str, value) -> None:
        spec = value if isinstance(value, ExportGlobal) else ExportGlobal(value)
        leaves, treedef = tree_flatten(spec.tree)
        paths = _leaf_paths(spec.tree)
        slots = []
        for leaf, path in zip(leaves, paths):
            key = id(leaf)
            if key in self._by_identity:
                slots.append(self._by_identity[key])
                continue
            name = attr + path
            if isinstance(leaf, ShapedArray):
                aval, initial = leaf, None
            elif _is_array_leaf(leaf):
                initial = np.asarray(leaf)
                aval = ShapedArray(initial.shape, dtypes.canonical(initial.dtype))
                if not spec.initialize:
                    initial = None
            else:
                raise TypeError(f"global {name}: leaves must be numpy arrays, got {type(leaf).__name__}")
            slot = GlobalSlot(len(self.slots), name, aval, initial, spec.mutable)
            self.slots.append(slot)
            self._by_identity[key] = slot.index
            self._keepalive.append(leaf)
            slots.append(slot.index)
        self.trees[attr] = ExportedTree(attr, treedef, slots)


def _leaf_paths(tree, prefix: str = "") -> list[str]:
    """Dotted paths of the leaves, in tree_flatten order."""
    if tree is None:
        return []
    if isinstance(tree, tuple) and hasattr(type(tree), "_fields"):
        return [p for f, c in zip(tree._fields, tree) for p in _leaf_paths(c, f"{prefix}.{f}")]
    if isinstance(tree, (tuple, list)):
        return [p for i, c in enumerate(tree) for p in _leaf_paths(c, f"{prefix}.{i}")]
    if isinstance(tree, dict):
        return [p for k in sorted(tree) for p in _leaf_paths(tree[k], f"{prefix}.{k}")]
    leaves, treedef = tree_flatten(tree)
    if treedef.kind == "custom":
        return [f"{prefix}.{i}" for i in range(len(leaves))]
    return [prefix]
