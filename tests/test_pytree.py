from collections import namedtuple

import pytest

from kiln.core.pytree import (
    register_pytree_node, tree_flatten, tree_map, tree_unflatten, treedef_flatten_up_to,
    treedef_from_json, treedef_to_json,
)

Point = namedtuple("Point", "x y")


class Box:
    def __init__(self, a, b):
        self.a, self.b = a, b


register_pytree_node(Box, lambda box: ((box.a, box.b), None), lambda aux, ch: Box(*ch))


def test_flatten_round_trip_all_containers():
    tree = {"b": [1, (2, None)], "a": Point(3, {"z": 4}), "c": Box(5, 6)}
    leaves, treedef = tree_flatten(tree)
    assert leaves == [3, 4, 1, 2, 5, 6]  # dict keys sorted
    rebuilt = tree_unflatten(treedef, leaves)
    assert rebuilt["a"] == Point(3, {"z": 4}) and rebuilt["b"] == [1, (2, None)]
    assert isinstance(rebuilt["c"], Box) and (rebuilt["c"].a, rebuilt["c"].b) == (5, 6)


def test_tree_map_and_flatten_up_to():
    assert tree_map(lambda a, b: a + b, (1, [2]), (10, [20])) == (11, [22])
    assert treedef_flatten_up_to(tree_flatten((0, 0))[1], ([1, 2], 3)) == [[1, 2], 3]
    with pytest.raises(ValueError, match="tuple of length 2"):
        treedef_flatten_up_to(tree_flatten((0, 0))[1], (1, 2, 3))


def test_json_round_trip_rebuilds_namedtuples():
    tree = (Point(1, 2), {"k": [3]}, None)
    leaves, treedef = tree_flatten(tree)
    text = treedef_to_json(treedef)
    back = tree_unflatten(treedef_from_json(text), leaves)
    assert back[0].x == 1 and back[0].y == 2 and type(back[0]).__name__ == "Point"
    assert back[1] == {"k": [3]} and back[2] is None
    assert treedef_to_json(treedef_from_json(text)) == text


def test_unflatten_rejects_extra_leaves():
    _, treedef = tree_flatten((1, 2))
    with pytest.raises(ValueError):
        tree_unflatten(treedef, [1, 2, 3])
