"""kiln's IR: typed SSA graphs of primitive applications, with a printer and a verifier."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .aval import ShapedArray
from .source_info import SourceInfo

_ids = itertools.count()


class Var:
    """An SSA value: defined once (graph input or equation output), typed by `aval`."""

    __slots__ = ("aval", "id", "hint")

    def __init__(self, aval: ShapedArray, hint: str = ""):
        self.aval = aval
        self.id = next(_ids)
        self.hint = hint

    def __repr__(self):
        return f"Var({self.id}: {self.aval})"


class Literal:
    """A scalar constant used directly as an operand."""

    __slots__ = ("value", "aval")

    def __init__(self, value, aval: ShapedArray):
        assert aval.shape == (), "literals are scalars; arrays are constvars"
        self.value = np.asarray(value, aval.dtype)
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.value!r})"


Atom = Var | Literal


@dataclass
class Equation:
    """outvars = primitive[params](invars)."""

    primitive: Any  # kiln.core.primitive.Primitive
    invars: list[Atom]
    outvars: list[Var]
    params: dict[str, Any]
    source_info: SourceInfo | None = None


@dataclass
class Graph:
    """A closed function: inputs, constants bound to concrete arrays, equations, outputs."""

    invars: list[Var]
    constvars: list[Var]
    consts: list[np.ndarray]
    eqns: list[Equation]
    outvars: list[Atom]
    effects: set = field(default_factory=set)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    def __str__(self):
        return print_graph(self)


class IRVerificationError(Exception):
    """A graph that breaks an IR invariant (a compiler bug, not a user error)."""


def subgraphs_of(eqn: Equation):
    """Graphs held in an equation's params (kernels, loop bodies, branches)."""
    for value in eqn.params.values():
        if isinstance(value, Graph):
            yield value
        elif isinstance(value, (tuple, list)):
            yield from (v for v in value if isinstance(v, Graph))


def verify_graph(graph: Graph) -> None:
    """Checks SSA form, operand types against abstract evaluation, and subgraphs."""
    defined: set[int] = set()

    def define(v: Var, where: str):
        if not isinstance(v, Var):
            raise IRVerificationError(f"{where}: expected a Var, got {v!r}")
        if v.id in defined:
            raise IRVerificationError(f"{where}: %{v.id} is defined twice")
        defined.add(v.id)

    def use(a: Atom, where: str):
        if isinstance(a, Var) and a.id not in defined:
            raise IRVerificationError(f"{where}: %{a.id} is used before it is defined")

    if len(graph.constvars) != len(graph.consts):
        raise IRVerificationError("constvars and consts differ in length")
    for v, c in zip(graph.constvars, graph.consts):
        define(v, "constvar")
        if tuple(np.shape(c)) != v.aval.shape or np.asarray(c).dtype != v.aval.dtype:
            raise IRVerificationError(f"constant %{v.id} is {np.shape(c)} {np.asarray(c).dtype}, typed {v.aval}")
    for v in graph.invars:
        define(v, "input")
    for i, eqn in enumerate(graph.eqns):
        where = f"equation {i} ({eqn.primitive.name})"
        for a in eqn.invars:
            use(a, where)
        expected = eqn.primitive.abstract_eval(*[a.aval for a in eqn.invars], **eqn.params)
        got = [v.aval for v in eqn.outvars]
        if [e.strip_weak() for e in expected] != [g.strip_weak() for g in got]:
            raise IRVerificationError(
                f"{where}: outputs typed {[str(g) for g in got]}, abstract evaluation gives {[str(e) for e in expected]}"
            )
        for v in eqn.outvars:
            define(v, where)
        for sub in subgraphs_of(eqn):
            verify_graph(sub)
    for a in graph.outvars:
        use(a, "output")


class _Namer:
    def __init__(self):
        self.names: dict[int, str] = {}

    def __call__(self, a: Atom) -> str:
        if isinstance(a, Literal):
            return _format_literal(a.value)
        name = self.names.get(a.id)
        if name is None:
            name = self.names[a.id] = f"%{len(self.names)}"
        return name


def _format_literal(value: np.ndarray) -> str:
    v = value.item()
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


def _format_param(value) -> str:
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, Graph):
        return "{...}"
    if isinstance(value, (tuple, list)) and any(isinstance(v, Graph) for v in value):
        return "(" + ", ".join("{...}" for _ in value) + ")"
    return repr(value)


def print_graph(graph: Graph, name: str = "graph", indent: int = 0, namer: _Namer | None = None) -> str:
    """Readable text of a graph; nested graphs are printed inline."""
    n = namer or _Namer()
    pad = " " * indent
    lines = []
    params = ", ".join(f"{n(v)}: {v.aval}" for v in graph.invars)
    results = ", ".join(str(a.aval) for a in graph.outvars)
    results = results if len(graph.outvars) == 1 else f"({results})"
    lines.append(f"{pad}{name}({params}) -> {results} {{")
    for v, c in zip(graph.constvars, graph.consts):
        lines.append(f"{pad}  {n(v)}: {v.aval} = constant {_summarize(np.asarray(c))}")
    for eqn in graph.eqns:
        outs = ", ".join(f"{n(v)}: {v.aval}" for v in eqn.outvars)
        shown = {k: v for k, v in eqn.params.items() if not isinstance(v, Graph) and not (isinstance(v, (tuple, list)) and any(isinstance(x, Graph) for x in v))}
        if eqn.primitive.format_params is not None:
            param_text = eqn.primitive.format_params(eqn.params)
        else:
            param_text = "[" + ", ".join(f"{k}={_format_param(v)}" for k, v in sorted(shown.items())) + "]" if shown else ""
        args = ", ".join(n(a) for a in eqn.invars)
        where = f"  # {eqn.source_info.filename.rsplit('/', 1)[-1]}:{eqn.source_info.lineno}" if eqn.source_info else ""
        lhs = f"{outs} = " if outs else ""
        lines.append(f"{pad}  {lhs}{eqn.primitive.name}{param_text} {args}{where}".rstrip())
        for key, value in sorted(eqn.params.items()):
            subs = [value] if isinstance(value, Graph) else [v for v in value if isinstance(v, Graph)] if isinstance(value, (tuple, list)) else []
            for j, sub in enumerate(subs):
                label = key if len(subs) == 1 else f"{key}[{j}]"
                lines.append(print_graph(sub, label, indent + 4, n))
    lines.append(f"{pad}  return " + ", ".join(n(a) for a in graph.outvars))
    lines.append(f"{pad}}}")
    return "\n".join(lines)


def _summarize(arr: np.ndarray) -> str:
    if arr.size <= 8:
        return np.array2string(arr.reshape(-1), separator=",").replace("\n", "")
    return f"<{arr.size} elements>"
