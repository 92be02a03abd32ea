"""The linear-time fusion pass gives the partition of the quadratic algorithm it replaced.

`_QuadraticPartitioner` is the previous `avoid_expensive_duplicates`, kept here verbatim as the
reference: rebuild every kernel tree, count the kernels each equation is in, materialize the last
expensive equation in more than one, repeat. Both run on random graphs (elementwise chains of
cheap and expensive ops with fan-out, reductions, layout ops, matmuls, iotas and constants) and on
traced programs (a residual MLP training step, softmax, a gamma draw), and must give the same
roots in the same order and the same steps.
"""
import numpy as np
import pytest

import kiln
import kiln.numpy as knp
from kiln.compiler.compile import structural_key
from kiln.compiler.fusion import _DUPLICATION_LIMIT, Plan, _Partitioner, partition, strategy_passes
from kiln.compiler.pipeline import prepare_graph
from kiln.core.aval import ShapedArray
from kiln.core.ir import Equation, Var, verify_graph
from kiln.core.trace import trace_to_graph

F = ShapedArray((4, 6), np.float32)


class _QuadraticPartitioner(_Partitioner):
    """The algorithm before the linear sweep (O(roots x graph) per materialized value)."""

    def tree(self, start: list) -> list[Equation]:
        chosen: dict[int, Equation] = {}
        stack = [a for a in start if isinstance(a, Var)]
        while stack:
            var = stack.pop()
            eqn = self.producer.get(var.id)
            if eqn is None or id(eqn) in chosen:
                continue
            if var.id in self.materialized and not any(var is s for s in start):
                continue
            chosen[id(eqn)] = eqn
            stack.extend(a for a in eqn.invars if isinstance(a, Var))
        return [e for e in self.graph.eqns if id(e) in chosen]

    def kernel_trees(self) -> list[list[Equation]]:
        trees = [self.tree([self._var(r)]) for r in self.roots]
        for eqn in self.graph.eqns:
            if self.kind[id(eqn)] == "reduction":
                trees.append(self.tree(eqn.outvars))
        return trees

    def _var(self, var_id: int) -> Var:
        eqn = self.producer[var_id]
        return next(v for v in eqn.outvars if v.id == var_id)

    def avoid_expensive_duplicates(self) -> None:
        while True:
            users: dict[int, int] = {}
            for tree in self.kernel_trees():
                for eqn in tree:
                    users[id(eqn)] = users.get(id(eqn), 0) + 1
            candidates = [
                eqn for eqn in self.graph.eqns
                if self.kind[id(eqn)] == "elementwise" and users.get(id(eqn), 0) > 1
                and eqn.outvars[0].id not in self.materialized
                and self._cost(self.tree(eqn.outvars)) >= _DUPLICATION_LIMIT
            ]
            if not candidates:
                return
            self.add_root(candidates[-1].outvars[0])

    def _cost(self, eqns) -> int:
        return sum(e.primitive.traits.cost for e in eqns if self.kind[id(e)] == "elementwise")


def _run(cls, graph):
    p = cls(graph)
    p.find_required_roots()
    p.avoid_expensive_duplicates()
    return p.roots, Plan(p.steps())


def _signature(plan: Plan) -> list:
    return [
        ("dispatch", s.name, structural_key(s.region), [v.id for v in s.inputs], [v.id for v in s.outputs])
        if hasattr(s, "region") else ("host", id(s.eqn))
        for s in plan.steps
    ]


def _assert_same_partition(graph) -> int:
    verify_graph(graph)
    new_roots, new_plan = _run(_Partitioner, graph)
    old_roots, old_plan = _run(_QuadraticPartitioner, graph)
    assert new_roots == old_roots
    assert _signature(new_plan) == _signature(old_plan)
    # partition() then applies the kernel strategies' passes (row-fused reductions merge, large
    # reductions split): the same passes over the old steps
    assert _signature(partition(graph)) == _signature(Plan(strategy_passes(old_plan.steps, graph.outvars)))
    return len(old_roots)


_UNARY = [knp.exp, knp.tanh, knp.log1p, knp.sin, knp.sqrt, knp.negative, knp.abs, lambda x: x * 2.0]
_BINARY = [knp.add, knp.multiply, knp.subtract, knp.divide, knp.maximum, knp.power]


def _random_program(seed: int):
    """A random DAG over (4, 6) f32 values: each step reads earlier values (so values fan out)."""
    rng = np.random.default_rng(seed)
    steps = int(rng.integers(4, 40))
    const = rng.standard_normal((4, 6)).astype(np.float32)

    def fn(x, y):
        values = [x, y]

        def pick():  # recent values more often: long chains as well as wide fan-out
            i = len(values) - 1 - int(min(rng.geometric(0.35) - 1, len(values) - 1))
            return values[i]

        for _ in range(steps):
            r = rng.random()
            if r < 0.35:
                v = _UNARY[rng.integers(len(_UNARY))](pick())
            elif r < 0.7:
                v = _BINARY[rng.integers(len(_BINARY))](pick(), pick())
            elif r < 0.78:
                reduce = knp.sum if rng.random() < 0.5 else knp.max
                v = reduce(pick(), axis=int(rng.integers(2)), keepdims=True) + pick()
            elif r < 0.84:
                v = pick() @ pick().T @ pick()
            elif r < 0.9:
                v = pick().T.reshape(4, 6)
            elif r < 0.95:
                v = pick() + knp.arange(6, dtype=np.float32)
            else:
                v = pick() * const
            values.append(v)
        outs = [values[-1]] + [values[int(i)] for i in rng.choice(len(values), size=int(rng.integers(0, 4)))]
        return outs

    return trace_to_graph(lambda *xs: fn(*xs), [F, F])


def test_random_graphs_partition_as_the_quadratic_algorithm():
    materialized = 0
    for seed in range(300):
        graph = _random_program(seed)
        materialized += _assert_same_partition(graph)
        materialized += _assert_same_partition(prepare_graph(graph))
    assert materialized > 300  # the graphs do exercise the materialization rule


def _residual_mlp_step(layers: int):
    d = 8

    def loss(params, x):
        h = x
        for w, g in params:
            mu = knp.mean(h, axis=-1, keepdims=True)
            z = (h - mu) / knp.sqrt(knp.var(h, axis=-1, keepdims=True) + 1e-5) * g
            h = h + kiln.nn.gelu(z @ w)
        return knp.mean(h ** 2)

    def step(*flat):
        params = [(flat[i], flat[i + 1]) for i in range(0, 2 * layers, 2)]
        value, grads = kiln.value_and_grad(loss)(params, flat[-1])
        return [value] + [p - 0.1 * gp for (w, g), (gw, gg) in zip(params, grads) for p, gp in ((w, gw), (g, gg))]

    avals = [ShapedArray((d, d), np.float32), ShapedArray((d,), np.float32)] * layers + [ShapedArray((3, d), np.float32)]
    return trace_to_graph(step, avals)


@pytest.mark.parametrize("layers", [1, 3])
def test_residual_mlp_training_step_partitions_as_the_quadratic_algorithm(layers):
    graph = prepare_graph(_residual_mlp_step(layers))
    assert _assert_same_partition(graph) > 0


def test_softmax_and_gamma_draw_partition_as_the_quadratic_algorithm():
    softmax = trace_to_graph(lambda x: [kiln.nn.softmax(x, axis=-1), kiln.nn.log_softmax(x, axis=0)], [F])
    _assert_same_partition(prepare_graph(softmax))
    key = kiln.random.key(0)
    gamma = trace_to_graph(lambda a: [kiln.random.gamma(key, a, (5,))], [ShapedArray((5,), np.float32)])
    graph = prepare_graph(gamma)
    for sub in _subgraphs(graph):
        _assert_same_partition(sub)


def _subgraphs(graph):
    from kiln.core.ir import subgraphs_of

    yield graph
    for eqn in graph.eqns:
        for sub in subgraphs_of(eqn):
            yield from _subgraphs(sub)
