"""Helpers for compiler tests: trace small functions, compile many at once, run in-process."""
from __future__ import annotations

import numpy as np
import pytest

from kiln.compiler.compile import compile_plan
from kiln.compiler.fusion import partition
from kiln.compiler.inprocess import KernelRunner
from kiln.compiler.passes import optimize
from kiln.core.aval import ShapedArray
from kiln.core.ir import verify_graph
from kiln.core.trace import trace_to_graph


class Case:
    """One traced function and its arguments; `reference` evaluates the graph eagerly with the prims' impls."""

    def __init__(self, fn, args, *, passes: bool = False):
        self.args = [np.asarray(a) for a in args]
        graph = trace_to_graph(lambda *xs: list(fn(*xs)), [ShapedArray(a.shape, a.dtype) for a in self.args])
        if passes:
            graph = optimize(graph)
        verify_graph(graph)
        self.graph = graph
        self.plan = partition(graph)
        for step in self.plan.dispatches:
            verify_graph(step.region)

    def reference(self) -> list[np.ndarray]:
        env = {v.id: np.asarray(c) for v, c in zip(self.graph.constvars, self.graph.consts)}
        env.update({v.id: a for v, a in zip(self.graph.invars, self.args)})

        def read(atom):
            return env[atom.id] if hasattr(atom, "id") else np.asarray(atom.value)

        for eqn in self.graph.eqns:
            out = eqn.primitive.impl(*[read(a) for a in eqn.invars], **eqn.params)
            env[eqn.outvars[0].id] = np.asarray(out)
        return [read(a) for a in self.graph.outvars]


class Batch:
    """Cases compiled together into one kernel image."""

    def __init__(self, cases: dict[str, Case]):
        self.cases = cases
        self.compiled = compile_plan([c.plan for c in cases.values()])
        self.runner = KernelRunner(self.compiled)

    def run(self, name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
        case = self.cases[name]
        return self.runner.run_plan(case.plan, case.graph, case.args), case.reference()


def assert_matches(got, want, *, rtol=0.0, atol=0.0):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def random_array(rng, shape, dtype, *, low=-10, high=10):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 3).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(low, info.min), min(high, info.max) + 1, size=shape).astype(dtype)


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(0)
