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
    """Dotted paths of the leaves, in tree_flatten order (a registered class's leaves are numbered)."""
    children, node = tree_flatten(tree, is_leaf=lambda x: x is not tree)  # one level, as tree_flatten sees it
    if node.kind == "namedtuple":
        return [p for f, c in zip(node.data[2], children) for p in _leaf_paths(c, f"{prefix}.{f}")]
    if node.kind in ("tuple", "list"):
        return [p for i, c in enumerate(children) for p in _leaf_paths(c, f"{prefix}.{i}")]
    if node.kind == "dict":
        return [p for k, c in zip(node.data, children) for p in _leaf_paths(c, f"{prefix}.{k}")]
    if node.kind == "custom":
        return [f"{prefix}.{i}" for i in range(len(tree_flatten(tree)[0]))]
    return [] if node.kind == "none" else [prefix]
