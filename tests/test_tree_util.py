"""kiln.tree and kiln.tree_util: JAX's pytree names (expected values are those JAX 0.10 gives for the same calls),
and registered classes, dataclasses and Partial passed through kiln.jit and kiln.grad."""
import collections
import dataclasses
import functools
import operator

import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln import tree_util as tu

Pair = collections.namedtuple("Pair", "w b")
TREE = {"a": [1, (2, 3)], "b": Pair(4, None), "c": 5}


def test_flatten_unflatten_and_short_names():
    leaves, treedef = kiln.tree.flatten(TREE)
    assert leaves == [1, 2, 3, 4, 5]
    assert kiln.tree.unflatten(treedef, [10, 20, 30, 40, 50]) == {"a": [10, (20, 30)], "b": Pair(40, None), "c": 50}
    assert treedef.unflatten(leaves) == TREE
    assert treedef.num_leaves == 5 and treedef.num_nodes == 10
    assert kiln.tree.leaves(TREE) == leaves and tu.tree_leaves(TREE) == leaves
    assert kiln.tree.structure(TREE) == treedef == tu.tree_structure(TREE)
    assert kiln.tree.map(lambda x, y: x * y, TREE, TREE) == {"a": [1, (4, 9)], "b": Pair(16, None), "c": 25}
    assert kiln.tree.leaves([1, (2, 3)], is_leaf=lambda x: isinstance(x, tuple)) == [1, (2, 3)]


def test_reduce_all_and_associative():
    assert kiln.tree.reduce(operator.add, TREE) == 15
    assert kiln.tree.reduce(operator.add, TREE, 100) == 115
    assert kiln.tree.reduce_associative(operator.add, [1, 2, 3, 4, 5]) == 15
    assert kiln.tree.reduce_associative(operator.add, [], identity=0) == 0
    with pytest.raises(TypeError, match="tree_reduce_associative: the tree has no leaves"):
        kiln.tree.reduce_associative(operator.add, [])
    assert kiln.tree.all([True, (1, {"x": 2})]) and not kiln.tree.all([True, (0,)])
    assert tu.tree_all([]) is True


def test_transpose_and_broadcast():
    got = kiln.tree.transpose(kiln.tree.structure([0, 0]), kiln.tree.structure((0, 0, 0)), [(1, 2, 3), (4, 5, 6)])
    assert got == ([1, 4], [2, 5], [3, 6])
    assert kiln.tree.transpose(kiln.tree.structure([0, 0]), None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    with pytest.raises(TypeError, match="tree_transpose: the tree has 5 leaves"):
        kiln.tree.transpose(kiln.tree.structure([0, 0]), kiln.tree.structure((0, 0, 0)), [(1, 2, 3), (4, 5)])
    assert kiln.tree.broadcast([1, 2], [(3, 4), {"x": 5}]) == [(1, 1), {"x": 2}]


def test_key_paths_as_jax():
    pairs = tu.tree_leaves_with_path(TREE)
    assert [tu.keystr(p) for p, _ in pairs] == ["['a'][0]", "['a'][1][0]", "['a'][1][1]", "['b'].w", "['c']"]
    assert [tu.keystr(p, simple=True, separator="/") for p, _ in pairs] == ["a/0", "a/1/0", "a/1/1", "b/w", "c"]
    assert [leaf for _, leaf in pairs] == [1, 2, 3, 4, 5]
    flat, treedef = kiln.tree.flatten_with_path(TREE)
    assert treedef == kiln.tree.structure(TREE) and flat == pairs
    assert kiln.tree.map_with_path(lambda p, x: f"{tu.keystr(p)}={x}", {"u": 1, "v": [2]}) == \
        {"u": "['u']=1", "v": ["['v'][0]=2"]}
    assert tu.tree_flatten_with_path(tu.Partial(lambda a, b: a, 1, b=2))[0] == [
        ((tu.FlattenedIndexKey(0), tu.SequenceKey(0)), 1), ((tu.FlattenedIndexKey(1), tu.DictKey("b")), 2)]


def test_treedef_helpers():
    assert tu.treedef_is_leaf(tu.tree_structure(None)) and tu.treedef_is_leaf(tu.tree_structure(()))
    assert tu.treedef_is_leaf(tu.tree_structure(1)) and not tu.treedef_is_leaf(tu.tree_structure((1,)))
    children = tu.treedef_children(tu.tree_structure((1, [2, 3])))
    assert children == [tu.tree_structure(0), tu.tree_structure([0, 0])]
    assert tu.tree_unflatten(tu.treedef_tuple(children), [7, 8, 9]) == (7, [8, 9])
    assert tu.all_leaves([1, 2]) and not tu.all_leaves([1, (2,)]) and not tu.all_leaves([None])
    assert tu.flatten_one_level({"b": 1, "a": 2}) == ([2, 1], ("a", "b"))
    with pytest.raises(ValueError, match="flatten_one_level: can't flatten int"):
        tu.flatten_one_level(3)
    assert tu.flatten_one_level_with_keys({"b": 1, "a": [2]}) == (
        [(tu.DictKey("a"), [2]), (tu.DictKey("b"), 1)], ("a", "b"))
    assert tu.flatten_one_level_with_keys(Pair(1, 2))[0] == [(tu.GetAttrKey("w"), 1), (tu.GetAttrKey("b"), 2)]
    assert tu.is_tree_node(dict) and tu.is_tree_node(type(None)) and tu.is_tree_node(Pair)
    assert not tu.is_tree_node(int) and not tu.is_tree_node({})
    assert tu.tree_structure({"x": 1}).flatten_up_to({"x": [1, 2]}) == [[1, 2]]


@tu.register_pytree_node_class
class Affine:
    def __init__(self, w, b, name="affine"):
        self.w, self.b, self.name = w, b, name

    def tree_flatten(self):
        return (self.w, self.b), self.name

    @classmethod
    def tree_unflatten(cls, name, children):
        return cls(*children, name=name)

    def __call__(self, x):
        return knp.tanh(x @ self.w + self.b)


@tu.register_dataclass
@dataclasses.dataclass
class Layer:
    w: object
    scale: float = dataclasses.field(metadata=dict(static=True), default=2.0)


def test_registered_class_through_jit_and_grad():
    rng = np.random.default_rng(0)
    w, b, x = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.standard_normal((4, 3))
    model = Affine(w, b)
    assert tu.tree_leaves(model)[0] is w
    want = np.tanh(x @ w + b)
    np.testing.assert_allclose(kiln.jit(lambda m, x: m(x))(model, x), want, rtol=1e-12)
    g = kiln.grad(lambda m: knp.sum(m(x)))(model)
    assert isinstance(g, Affine) and g.name == "affine"
    np.testing.assert_allclose(g.b, np.sum(1 - want ** 2, axis=0), rtol=1e-12)


def test_dataclass_fields_and_jit():
    layer = Layer(np.arange(3.0))
    assert tu.tree_leaves(layer)[0] is layer.w
    assert tu.keystr(tu.tree_leaves_with_path(layer)[0][0]) == ".w"
    out = kiln.jit(lambda l: l.w * l.scale)(layer)
    np.testing.assert_array_equal(out, np.arange(3.0) * 2.0)
    assert tu.tree_structure(Layer(1, 3.0)) != tu.tree_structure(Layer(1, 2.0))

    @functools.partial(tu.register_dataclass, data_fields=["x"], meta_fields=["op"])
    class Plain:
        def __init__(self, x, op):
            self.x, self.op = x, op

    assert tu.tree_unflatten(tu.tree_structure(Plain(1, "add")), [5]).x == 5
    with pytest.raises(TypeError, match="register_dataclass: Bare is not a dataclass"):
        tu.register_dataclass(type("Bare", (), {}))


def test_partial_is_a_pytree_under_jit():
    add_one = tu.Partial(knp.add, np.float32(1))
    assert tu.tree_leaves(add_one) == [np.float32(1)]
    call = kiln.jit(lambda f, x: f(x))
    np.testing.assert_array_equal(call(add_one, np.arange(3, dtype=np.float32)), np.arange(1, 4, dtype=np.float32))
    inner = functools.partial(knp.multiply, 3.0)
    nested = tu.Partial(inner, np.float64(2.0))
    assert tu.tree_leaves(nested) == [np.float64(2.0)] and nested() == 6.0
    assert tu.tree_structure(tu.Partial(inner, 1.0)) == tu.tree_structure(tu.Partial(inner, 2.0))


def test_register_static_and_with_keys():
    @tu.register_static
    class Config:
        def __init__(self, n):
            self.n = n

    assert tu.tree_leaves([Config(1), 2]) == [2]
    cfg = Config(3)
    assert tu.tree_unflatten(tu.tree_structure([cfg, 0]), [9])[0] is cfg

    @tu.register_pytree_with_keys_class
    class Box:
        def __init__(self, v):
            self.v = v

        def tree_flatten_with_keys(self):
            return [(tu.GetAttrKey("v"), self.v)], None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    assert tu.keystr(tu.tree_leaves_with_path(Box(1))[0][0]) == ".v"
    assert kiln.tree.map(lambda x: x + 1, Box(1)).v == 2


def test_tree_static_marks_a_dataclass_field_static():
    @tu.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: object
        op: str = kiln.tree.static(default="add")

    leaves, treedef = kiln.tree.flatten(Op(np.ones(3)))
    assert len(leaves) == 1 and kiln.tree.unflatten(treedef, leaves).op == "add"
    assert kiln.tree.structure(Op(1, "mul")) != treedef
    field = kiln.tree.static(default=1, metadata={"doc": "n"})
    assert field.metadata == {"doc": "n", "static": True} and field.default == 1


def test_unhashable_static_data_under_jit():
    """A registered class whose static data is a list (JAX's example optimizers keep lists of treedefs) is a jit
    argument as in JAX: equal data reuses the trace, different data retraces."""
    State = collections.namedtuple("State", ["value", "meta"])
    tu.register_pytree_node(State, lambda s: ((s.value,), s.meta), lambda meta, xs: State(xs[0], meta))
    f = kiln.jit(lambda s: s.value * len(s.meta))
    np.testing.assert_array_equal(f(State(np.ones(2), [1, 2])), np.full(2, 2.0))
    np.testing.assert_array_equal(f(State(np.ones(2), [1, 2])), np.full(2, 2.0))
    assert f.trace_count == 1
    np.testing.assert_array_equal(f(State(np.ones(2), [1, 2, 3])), np.full(2, 3.0))
    assert f.trace_count == 2
    inner = [kiln.tree.structure((1, 2))]
    a, b = tu.tree_structure(State(1, inner)), tu.tree_structure(State(5, list(inner)))
    assert a == b and hash(a) == hash(b)


def test_default_registry():
    from kiln.tree_util import default_registry as registry

    leaves, treedef = registry.flatten({"a": (1, 2), "b": None})
    assert leaves == [1, 2] and treedef == kiln.tree_util.tree_structure({"a": (1, 2), "b": None})
    assert registry.flatten([1, (2, 3)], lambda x: isinstance(x, tuple))[0] == [1, (2, 3)]
    assert registry.flatten_one_level((1, [2])) == ((1, [2]), None)
    assert registry.flatten_one_level({"b": 1, "a": 2}) == ((2, 1), ("a", "b"))
    assert registry.flatten_one_level(3.0) is None and registry.flatten_one_level_with_keys(3.0) is None
    assert registry.flatten_one_level_with_keys({"x": 1}) == ([(kiln.tree_util.DictKey("x"), 1)], ("x",))
    pairs, _ = registry.flatten_with_path({"x": [1, 2]})
    assert [kiln.tree_util.keystr(p) for p, _ in pairs] == ["['x'][0]", "['x'][1]"]
    assert registry.is_node([1]) and not registry.is_node(1.0)

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    registry.register_node(Pair, lambda p: ((p.a, p.b), None), lambda aux, children: Pair(*children))
    assert registry.is_node(Pair(1, 2))
    assert kiln.tree_util.tree_leaves([Pair(1, 2), 3]) == [1, 2, 3]  # one registry: tree functions see it
    doubled = kiln.tree_util.tree_map(lambda v: 2 * v, Pair(1, 2))
    assert (doubled.a, doubled.b) == (2, 4)
