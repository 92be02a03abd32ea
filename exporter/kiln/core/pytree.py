"""Pytrees: nested containers of arrays, flattened to leaves and rebuilt.

Containers: tuple, list, dict (keys sorted), namedtuple, None (no leaves), and
classes registered with `register_pytree_node`; a registered class's own flatten wins over
the built-in handling (a registered namedtuple is not flattened field by field). A treedef can be written as
JSON so that a module file carries its functions' tree structure.
"""
from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from typing import Any, Callable

_registry: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(cls: type, flatten: Callable, unflatten: Callable) -> None:
    """flatten(obj) -> (children, aux); unflatten(aux, children) -> obj. aux must be hashable."""
    _registry[cls] = (flatten, unflatten)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


@dataclass(frozen=True)
class TreeDef:
    """The structure of a pytree: a node kind, its static data, and child treedefs."""

    kind: str  # "leaf", "none", "tuple", "list", "dict", "namedtuple", "custom"
    data: Any = None
    children: tuple["TreeDef", ...] = ()

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    @property
    def num_nodes(self) -> int:
        return 1 + sum(c.num_nodes for c in self.children)

    def __hash__(self):
        """Equal treedefs hash alike; a registered class's static data need not be hashable (a list, as in
        JAX's example optimizers): such nodes hash by their kind and class alone and compare with ==."""
        try:
            data = hash(self.data)
        except TypeError:
            data = hash(self.data[0]) if self.kind == "custom" else 0
        return hash((self.kind, data, self.children))

    def unflatten(self, leaves) -> Any:
        """The tree of this structure holding `leaves` (jax's PyTreeDef.unflatten)."""
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree) -> list:
        """The subtrees of `tree` at this structure's leaves (jax's PyTreeDef.flatten_up_to)."""
        return treedef_flatten_up_to(self, tree)

    def __str__(self):
        return treedef_to_json(self)


LEAF = TreeDef("leaf")


def tree_flatten(tree, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, TreeDef]:
    leaves: list = []

    def walk(node) -> TreeDef:
        if is_leaf is not None and is_leaf(node):
            leaves.append(node)
            return LEAF
        if node is None:
            return TreeDef("none")
        entry = _registry.get(type(node))
        if entry is not None:  # before the built-in kinds: a registered namedtuple flattens its own way
            children, aux = entry[0](node)
            return TreeDef("custom", (type(node), aux), tuple(walk(c) for c in children))
        if _is_namedtuple(node):
            t = type(node)
            return TreeDef("namedtuple", (t, t.__name__, tuple(t._fields)), tuple(walk(c) for c in node))
        if type(node) is tuple:
            return TreeDef("tuple", None, tuple(walk(c) for c in node))
        if type(node) is list:
            return TreeDef("list", None, tuple(walk(c) for c in node))
        if type(node) is dict:
            keys = sorted(node)
            return TreeDef("dict", tuple(keys), tuple(walk(node[k]) for k in keys))
        leaves.append(node)
        return LEAF

    treedef = walk(tree)
    return leaves, treedef


def tree_unflatten(treedef: TreeDef, leaves) -> Any:
    it = iter(leaves)

    def build(td: TreeDef):
        if td.kind == "leaf":
            return next(it)
        if td.kind == "none":
            return None
        children = [build(c) for c in td.children]
        if td.kind == "tuple":
            return tuple(children)
        if td.kind == "list":
            return children
        if td.kind == "dict":
            return dict(zip(td.data, children))
        if td.kind == "namedtuple":
            return td.data[0](*children)
        cls, aux = td.data
        return _registry[cls][1](aux, children)

    result = build(treedef)
    if next(it, _END) is not _END:
        raise ValueError("too many leaves for the tree structure")
    return result


_END = object()


def tree_leaves(tree, is_leaf=None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None) -> TreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(fn: Callable, tree, *rest, is_leaf=None):
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = [treedef_flatten_up_to(treedef, r) for r in rest]
    return tree_unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])


def treedef_flatten_up_to(treedef: TreeDef, tree) -> list:
    """Leaves of `tree` at the leaf positions of `treedef` (subtrees there are kept whole)."""
    out: list = []

    def walk(td: TreeDef, node):
        if td.kind == "leaf":
            out.append(node)
            return
        sub_leaves, sub_def = tree_flatten(node, is_leaf=lambda x: x is not node)
        if _shallow(sub_def) != _shallow(td):
            raise ValueError(f"tree structure mismatch: expected {_describe(td)}, got {_describe(sub_def)}")
        for c, child in zip(td.children, sub_leaves):
            walk(c, child)

    walk(treedef, tree)
    return out


def _shallow(td: TreeDef):
    data = td.data
    if td.kind == "namedtuple":
        data = data[1:]
    return td.kind, data, len(td.children)


def _describe(td: TreeDef) -> str:
    if td.kind == "dict":
        return f"dict with keys {list(td.data)}"
    if td.kind == "namedtuple":
        return f"{td.data[1]}{td.data[2]}"
    if td.kind in ("tuple", "list"):
        return f"{td.kind} of length {len(td.children)}"
    return td.kind


def treedef_to_json(treedef: TreeDef) -> str:
    """Canonical JSON of a treedef (custom classes by qualified name)."""

    def enc(td: TreeDef):
        if td.kind == "leaf":
            return "*"
        if td.kind == "none":
            return None
        node: dict[str, Any] = {"t": td.kind, "c": [enc(c) for c in td.children]}
        if td.kind == "dict":
            node["k"] = [str(k) for k in td.data]
        elif td.kind == "namedtuple":
            node["n"] = td.data[1]
            node["f"] = list(td.data[2])
        elif td.kind == "custom":
            cls = td.data[0]
            node["n"] = f"{cls.__module__}.{cls.__qualname__}"
        return node

    return json.dumps(enc(treedef), separators=(",", ":"), sort_keys=True)


def treedef_from_json(text: str) -> TreeDef:
    """Rebuilds a treedef; namedtuples become fresh namedtuple classes of the same name and fields.

    Custom classes cannot be rebuilt from their name alone and come back as tuples.
    """

    def dec(node) -> TreeDef:
        if node == "*":
            return LEAF
        if node is None:
            return TreeDef("none")
        children = tuple(dec(c) for c in node["c"])
        kind = node["t"]
        if kind == "dict":
            return TreeDef("dict", tuple(node["k"]), children)
        if kind == "namedtuple":
            cls = collections.namedtuple(node["n"], node["f"])
            return TreeDef("namedtuple", (cls, node["n"], tuple(node["f"])), children)
        if kind == "custom":
            return TreeDef("tuple", None, children)
        return TreeDef(kind, None, children)

    return dec(json.loads(text))
