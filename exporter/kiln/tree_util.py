"""kiln.tree_util: JAX's jax.tree_util names over kiln's pytrees (kiln.core.pytree).

    from kiln.tree_util import tree_map, register_pytree_node_class

Containers are those of kiln.core.pytree: tuple, list, dict (keys sorted), namedtuple, None (a node without
leaves), and registered classes. Key paths name a leaf's place: SequenceKey (tuple/list index), DictKey,
GetAttrKey (namedtuple and dataclass fields) and FlattenedIndexKey (the children of other registered classes).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

from .core.pytree import LEAF, TreeDef, _registry, register_pytree_node, tree_flatten, tree_leaves, tree_map
from .core.pytree import tree_structure, tree_unflatten, treedef_flatten_up_to

__all__ = [
    "PyTreeDef", "Partial", "SequenceKey", "DictKey", "GetAttrKey", "FlattenedIndexKey", "KeyEntry", "KeyPath",
    "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
    "register_pytree_with_keys_class", "register_dataclass", "register_static", "tree_flatten", "tree_unflatten",
    "tree_leaves", "tree_structure", "tree_map", "tree_reduce", "tree_reduce_associative", "tree_all",
    "tree_transpose", "tree_broadcast", "tree_flatten_with_path", "tree_leaves_with_path", "tree_map_with_path",
    "treedef_is_leaf", "treedef_children", "treedef_tuple", "all_leaves", "flatten_one_level",
    "flatten_one_level_with_keys", "is_tree_node",
    "keystr",
]

PyTreeDef = TreeDef


class SequenceKey(NamedTuple):
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


class DictKey(NamedTuple):
    key: Any

    def __str__(self):
        return f"[{self.key!r}]"


class GetAttrKey(NamedTuple):
    name: str

    def __str__(self):
        return f".{self.name}"


class FlattenedIndexKey(NamedTuple):
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


KeyEntry = Any
KeyPath = tuple


# registered class -> function of the node giving one key per child (classes registered with keys)
_child_keys: dict[type, Callable[[Any], list]] = {}

_NO_INITIALIZER = object()


# ----------------------------------------------------------------------------- registration


def register_pytree_node_class(cls):
    """Registers cls by its methods: obj.tree_flatten() -> (children, aux), cls.tree_unflatten(aux, children).
    Returns cls, so that it works as a class decorator."""
    register_pytree_node(cls, lambda obj: obj.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys(nodetype, flatten_with_keys: Callable, unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """flatten_with_keys(obj) -> ([(key, child), ...], aux); the keys name the children in key paths."""

    def flatten(obj):
        if flatten_func is not None:
            return flatten_func(obj)
        pairs, aux = flatten_with_keys(obj)
        return [child for _, child in pairs], aux

    register_pytree_node(nodetype, flatten, unflatten_func)
    _child_keys[nodetype] = lambda obj: [key for key, _ in flatten_with_keys(obj)[0]]


def register_pytree_with_keys_class(cls):
    """Registers cls by obj.tree_flatten_with_keys() and cls.tree_unflatten(aux, children); returns cls."""
    flatten = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(cls, lambda obj: obj.tree_flatten_with_keys(), cls.tree_unflatten,
                              None if flatten is None else (lambda obj: obj.tree_flatten()))
    return cls


def register_dataclass(nodetype, data_fields=None, meta_fields=None, drop_fields=()):
    """Registers a dataclass: data_fields are children, meta_fields static (part of the tree structure).
    For a dataclasses.dataclass both default to its fields, a field with metadata static=True being a meta field.
    Returns nodetype, so that it works as a class decorator."""
    if data_fields is None or meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype.__name__} is not a dataclass; give data_fields and "
                            "meta_fields")
        fields = [f for f in dataclasses.fields(nodetype) if f.init and f.name not in drop_fields]
        if meta_fields is None:
            meta_fields = [f.name for f in fields if f.metadata.get("static", False)
                           and (data_fields is None or f.name not in data_fields)]
        if data_fields is None:
            data_fields = [f.name for f in fields if f.name not in meta_fields]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if set(data_fields) & set(meta_fields):
        raise ValueError(f"register_dataclass: fields {sorted(set(data_fields) & set(meta_fields))} are both data "
                         "and meta fields")

    def flatten(obj):
        return [getattr(obj, name) for name in data_fields], tuple(getattr(obj, name) for name in meta_fields)

    def unflatten(meta, children):
        return nodetype(**dict(zip(data_fields, children)), **dict(zip(meta_fields, meta)))

    register_pytree_node(nodetype, flatten, unflatten)
    _child_keys[nodetype] = lambda obj: [GetAttrKey(name) for name in data_fields]
    return nodetype


def register_static(cls):
    """Registers cls as a node without children: its instances are part of the tree structure (they must be
    hashable), as jit's static arguments are. Returns cls."""
    register_pytree_node(cls, lambda obj: ((), obj), lambda obj, _: obj)
    return cls


class Partial(functools.partial):
    """functools.partial that is a pytree: the bound arguments are its children, the function its static data,
    so that a Partial can be passed into jit- or grad-transformed functions."""

    def __new__(cls, func, *args, **kwargs):
        if isinstance(func, functools.partial):  # not merged: only this Partial's own arguments are children
            func = _StaticPartial(func)
        return super().__new__(cls, func, *args, **kwargs)


class _StaticPartial:
    """A functools.partial kept whole inside a Partial (its arguments are static, as in JAX)."""

    def __init__(self, inner: functools.partial):
        self.inner = inner

    def __call__(self, *args, **kwargs):
        return self.inner(*args, **kwargs)

    def __eq__(self, other):
        return isinstance(other, _StaticPartial) and other.inner is self.inner

    def __hash__(self):
        return id(self.inner)


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]),
)


# ----------------------------------------------------------------------------- treedefs


def treedef_is_leaf(treedef: TreeDef) -> bool:
    """True for a structure of one node: a leaf, None, or an empty container (as JAX)."""
    return treedef.num_nodes == 1


def treedef_children(treedef: TreeDef) -> list[TreeDef]:
    return list(treedef.children)


def treedef_tuple(treedefs) -> TreeDef:
    """The structure of a tuple whose elements have the structures `treedefs`."""
    return TreeDef("tuple", None, tuple(treedefs))


def is_tree_node(typ: type) -> bool:
    """Whether instances of the type typ are containers that tree_flatten looks into (NoneType counts)."""
    if not isinstance(typ, type):
        return False
    namedtuple = issubclass(typ, tuple) and hasattr(typ, "_fields")
    return typ in (tuple, list, dict, type(None)) or typ in _registry or namedtuple


def all_leaves(iterable, is_leaf: Callable | None = None) -> bool:
    """Whether every element of iterable is a leaf."""
    return all(tree_structure(x, is_leaf=is_leaf) == LEAF for x in iterable)


def flatten_one_level(tree) -> tuple[list, Any]:
    """(children, the node's static data) of one container level; a leaf is an error (as JAX)."""
    children, treedef = tree_flatten(tree, is_leaf=lambda x: x is not tree)
    if treedef.kind == "leaf":
        raise ValueError(f"flatten_one_level: can't flatten {type(tree).__name__}: it is a leaf")
    return children, treedef.data


def flatten_one_level_with_keys(tree) -> tuple[list, Any]:
    """([(key, child), ...], the node's static data) of one container level; a leaf is an error."""
    _, data = flatten_one_level(tree)
    return _children_with_keys(tree, tree_structure(tree, is_leaf=lambda x: x is not tree)), data


# ----------------------------------------------------------------------------- whole-tree functions


def tree_reduce(function: Callable, tree, initializer=_NO_INITIALIZER, is_leaf: Callable | None = None):
    """functools.reduce of function over the leaves (from initializer when given)."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation: Callable, tree, *, identity=_NO_INITIALIZER, is_leaf=None):
    """Reduces the leaves pairwise (a balanced tree of operation calls); operation must be associative."""
    items = tree_leaves(tree, is_leaf)
    if not items:
        if identity is _NO_INITIALIZER:
            raise TypeError("tree_reduce_associative: the tree has no leaves and no identity was given")
        return identity
    while len(items) > 1:
        pairs = [operation(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        items = pairs + (items[-1:] if len(items) % 2 else [])
    return items[0]


def tree_all(tree, *, is_leaf: Callable | None = None) -> bool:
    """all() of the leaves."""
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: TreeDef, inner_treedef: TreeDef | None, pytree_to_transpose):
    """An outer tree of inner trees turned into an inner tree of outer trees."""
    leaves, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(treedef_flatten_up_to(outer_treedef, pytree_to_transpose)[0])
    inner, outer = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != inner * outer:
        raise TypeError(f"tree_transpose: the tree has {treedef.num_leaves} leaves; an outer structure of {outer} "
                        f"leaves holding inner structures of {inner} leaves needs {inner * outer}")
    rows = [leaves[i * inner:(i + 1) * inner] for i in range(outer)]
    return tree_unflatten(inner_treedef, [tree_unflatten(outer_treedef, column) for column in zip(*rows)])


def tree_broadcast(prefix_tree, full_tree, is_leaf: Callable | None = None):
    """prefix_tree with each leaf repeated over the subtree of full_tree at its place."""
    prefix_leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    subtrees = treedef_flatten_up_to(prefix_def, full_tree)
    return tree_unflatten(prefix_def, [tree_map(lambda _, v=value: v, subtree, is_leaf=is_leaf)
                                       for value, subtree in zip(prefix_leaves, subtrees)])


# ----------------------------------------------------------------------------- key paths


def _children_with_keys(node, treedef: TreeDef) -> list:
    """(key, child) for each child of a container node."""
    children, _ = tree_flatten(node, is_leaf=lambda x: x is not node)
    if treedef.kind in ("tuple", "list"):
        keys = [SequenceKey(i) for i in range(len(children))]
    elif treedef.kind == "dict":
        keys = [DictKey(k) for k in treedef.data]
    elif treedef.kind == "namedtuple":
        keys = [GetAttrKey(name) for name in treedef.data[2]]
    elif type(node) in _child_keys:
        keys = _child_keys[type(node)](node)
    else:
        keys = [FlattenedIndexKey(i) for i in range(len(children))]
    return list(zip(keys, children))


def tree_flatten_with_path(tree, is_leaf: Callable | None = None) -> tuple[list, TreeDef]:
    """([(key path, leaf), ...], treedef): each leaf with the tuple of keys leading to it."""
    out: list = []

    def walk(node, path):
        if is_leaf is not None and is_leaf(node):
            out.append((path, node))
            return
        treedef = tree_structure(node, is_leaf=lambda x: x is not node)
        if treedef.kind == "leaf":
            out.append((path, node))
            return
        for key, child in _children_with_keys(node, treedef):
            walk(child, path + (key,))

    walk(tree, ())
    return out, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf: Callable | None = None) -> list:
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(f: Callable, tree, *rest, is_leaf: Callable | None = None):
    """tree_map where f also receives each leaf's key path first: f(path, leaf, *others)."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
    others = [treedef_flatten_up_to(treedef, r) for r in rest]
    return tree_unflatten(treedef, [f(path, leaf, *xs) for (path, leaf), *xs in zip(pairs, *others)])


def keystr(keys, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text: "['a'][0].b", or with simple=True the bare keys joined by separator."""
    if simple:
        return separator.join(str(k[0]) if isinstance(k, (SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey))
                              else str(k) for k in keys)
    return separator.join(str(k) for k in keys)


class PyTreeRegistry:
    """JAX's default_registry: the registry tree_flatten and the other functions here use (kiln has one, shared
    by every tree function; registering here registers everywhere), as methods."""

    def flatten(self, tree, leaf_predicate: Callable | None = None):
        """(leaves, treedef), as tree_flatten."""
        return tree_flatten(tree, leaf_predicate)

    def flatten_one_level(self, tree):
        """(children, static data) of one container level; None for a leaf (as JAX's registry method)."""
        if not is_tree_node(type(tree)):
            return None
        children, data = flatten_one_level(tree)
        return tuple(children), data

    def flatten_one_level_with_keys(self, tree):
        """([(key, child), ...], static data) of one container level; None for a leaf."""
        if not is_tree_node(type(tree)):
            return None
        return flatten_one_level_with_keys(tree)

    def flatten_with_path(self, tree, leaf_predicate: Callable | None = None):
        """([(key path, leaf), ...], treedef), as tree_flatten_with_path."""
        return tree_flatten_with_path(tree, leaf_predicate)

    def is_node(self, x) -> bool:
        return is_tree_node(type(x))

    def register_node(self, nodetype, flatten_func: Callable, unflatten_func: Callable,
                      flatten_with_keys_func: Callable | None = None) -> None:
        """As register_pytree_node (register_pytree_with_keys when flatten_with_keys_func is given)."""
        if flatten_with_keys_func is None:
            register_pytree_node(nodetype, flatten_func, unflatten_func)
        else:
            register_pytree_with_keys(nodetype, flatten_with_keys_func, unflatten_func, flatten_func)

    def register_dataclass_node(self, nodetype, data_fields, meta_fields) -> None:
        register_dataclass(nodetype, list(data_fields), list(meta_fields))


default_registry = PyTreeRegistry()
__all__ += ["default_registry", "PyTreeRegistry"]
