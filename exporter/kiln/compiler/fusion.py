"""Partitioning a graph into host steps and dispatch regions (fused kernels).

Rules:
- Elementwise equations fuse with the layout ops (broadcast_in_dim, transpose,
  reshape) and iotas that feed them, as long as those layout ops are strided
  views of materialized values: index arithmetic, no intermediate buffers.
- A layout op applied to a computed value cuts: the value is materialized.
- Each reduction is a kernel of its own, with its operand's elementwise
  producers fused in; dot_general is a kernel of its own whose operands are
  strided views of materialized values.
- Cheap elementwise producers are recomputed in every kernel that needs them;
  an expensive one (transcendentals, division) needed by several kernels is
  materialized once instead.
- Consecutive elementwise kernels of one shape merge into one multi-output kernel.
- Then consecutive kernels over the same rows (a reduction over the last axis and the
  reductions and elementwise kernels on its rows that follow) merge into one row-fused
  reduction kernel (row_fusion.py); a large reduction with few outputs splits into
  partials and their combine (split_reduction.py); consecutive independent elementwise
  kernels of different shapes merge into one horizontal kernel (horizontal_fusion.py), after
  the elementwise kernel consuming a matrix product became the product's epilogue
  (epilogue_fusion.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.ir import Equation, Graph, Literal, Var, print_graph
from .layout import apply_layout, input_view, iota_view, splat_view

# A value whose tree costs _DUPLICATION_LIMIT or more (the primitives' OpTraits.cost, in simple-op units)
# is materialized once rather than recomputed by every user.
_DUPLICATION_LIMIT = 8
_MAX_MERGED_OUTPUTS = 8


@dataclass
class HostStep:
    """An equation the VM runs itself (global loads/stores, control flow)."""

    eqn: Equation


@dataclass
class DispatchStep:
    """A kernel launch: region's invars stand for `inputs`, its outvars for `outputs`."""

    name: str
    region: Graph
    inputs: list[Var]
    outputs: list[Var]

    @property
    def kind(self) -> str:
        return region_kind(self.region)


@dataclass
class Plan:
    steps: list = field(default_factory=list)

    @property
    def dispatches(self) -> list[DispatchStep]:
        return [s for s in self.steps if isinstance(s, DispatchStep)]

    def __str__(self):
        lines = []
        for step in self.steps:
            if isinstance(step, DispatchStep):
                ins = ", ".join(f"%{v.id}" for v in step.inputs)
                outs = ", ".join(f"%{v.id}" for v in step.outputs)
                lines.append(f"dispatch {step.name} ({ins}) -> ({outs})")
                lines.append(print_graph(step.region, step.name, indent=4))
            else:
                outs = ", ".join(f"%{v.id}" for v in step.eqn.outvars)
                ins = ", ".join(f"%{a.id}" if isinstance(a, Var) else repr(a) for a in step.eqn.invars)
                lines.append(f"host {outs} = {step.eqn.primitive.name} {ins}")
        return "\n".join(lines)


class FusionError(Exception):
    """A graph the partitioner cannot place (unknown in-kernel primitive)."""


def region_kind(region: Graph) -> str:
    """The name of the first primitive of a dispatch region that is a kernel of its own or a reduction
    ('dot_general', 'conv_general_dilated', 'reduce_<op>', ...), else 'elementwise'."""
    for eqn in region.eqns:
        if eqn.primitive.traits.fusion in ("kernel", "reduction"):
            return eqn.primitive.name
    return "elementwise"


# OpTraits.fusion -> the partitioner's kind of equation; a primitive that is a kernel of its own (matmul,
# conv, pooling, structural) is placed like dot_general, over strided views of materialized values.
_KINDS = {"host": "host", "layout": "layout", "iota": "iota", "elementwise": "elementwise",
          "reduction": "reduction", "kernel": "dot"}


def _classify(eqn: Equation) -> str:
    prim = eqn.primitive
    kind = _KINDS.get(prim.traits.fusion)
    if kind is not None:
        return kind
    where = f" (at {eqn.source_info})" if eqn.source_info else ""
    raise FusionError(f"primitive {prim.name} has no kernel code generation{where}")


class _Partitioner:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.producer: dict[int, Equation] = {}
        self.kind: dict[int, str] = {}
        for eqn in graph.eqns:
            self.kind[id(eqn)] = _classify(eqn)
            for v in eqn.outvars:
                self.producer[v.id] = eqn
        self.materialized: set[int] = {v.id for v in graph.invars} | {v.id for v in graph.constvars}
        for eqn in graph.eqns:
            if self.kind[id(eqn)] in ("host", "reduction", "dot"):
                self.materialized.update(v.id for v in eqn.outvars)
        self.roots: list[int] = []
        self.root_set: set[int] = set()
        self.position = {id(e): i for i, e in enumerate(graph.eqns)}
        self._views: dict[int, object] = {}

    def add_root(self, var: Var) -> None:
        if var.id not in self.materialized:
            self.materialized.add(var.id)
            self.roots.append(var.id)
            self.root_set.add(var.id)
            self._views.clear()

    def view(self, var: Var):
        """The strided view of var over a materialized value (None if it is computed)."""
        if var.id in self._views:
            return self._views[var.id]
        if var.id in self.materialized:
            result = input_view(var.id, var.aval)
        else:
            eqn = self.producer[var.id]
            kind = self.kind[id(eqn)]
            if kind == "iota":
                result = iota_view(eqn.params["shape"], eqn.params["dimension"], eqn.params["dtype"])
            elif kind == "layout":
                operand = eqn.invars[0]
                inner = self.view(operand) if isinstance(operand, Var) else splat_view(operand)
                result = None if inner is None else apply_layout(inner, eqn.primitive.name, eqn.params, var.aval.shape)
            else:
                result = None
        self._views[var.id] = result
        return result

    def require_view(self, atom) -> None:
        """Materializes what is needed for atom to be a strided view of materialized values."""
        if not isinstance(atom, Var) or self.view(atom) is not None:
            return
        eqn = self.producer[atom.id]
        if self.kind[id(eqn)] != "layout":
            self.add_root(atom)
            return
        operand = eqn.invars[0]
        self.require_view(operand)
        if self.view(atom) is None:
            self.add_root(operand if isinstance(operand, Var) else atom)

    def find_required_roots(self) -> None:
        for eqn in self.graph.eqns:
            kind = self.kind[id(eqn)]
            if kind == "host":
                for a in eqn.invars:
                    self._require_buffer(a)
            elif kind == "dot":
                for a in eqn.invars:
                    self.require_view(a)
                    view = self.view(a) if isinstance(a, Var) else None
                    if view is not None and not view.is_buffer:
                        self.add_root(a)
            elif kind in ("elementwise", "reduction"):
                for a in eqn.invars:
                    if isinstance(a, Var) and self.view(a) is None and self.kind.get(id(self.producer.get(a.id))) == "layout":
                        self.require_view(a)
        for a in self.graph.outvars:
            self._require_buffer(a)

    def _require_buffer(self, atom) -> None:
        if not isinstance(atom, Var) or atom.id in self.materialized:
            return
        eqn = self.producer[atom.id]
        if self.kind[id(eqn)] == "layout":
            self.require_view(atom)
        self.add_root(atom)

    def tree(self, start: list) -> list[Equation]:
        """Equations (in graph order) a kernel computing `start` contains: the producers of `start`
        and, upstream, every producer of a value that is not materialized."""
        chosen: dict[int, Equation] = {}
        start_ids = {a.id for a in start if isinstance(a, Var)}
        stack = [a for a in start if isinstance(a, Var)]
        while stack:
            var = stack.pop()
            eqn = self.producer.get(var.id)
            if eqn is None or id(eqn) in chosen:
                continue
            if var.id in self.materialized and var.id not in start_ids:
                continue
            chosen[id(eqn)] = eqn
            stack.extend(a for a in eqn.invars if isinstance(a, Var))
        return sorted(chosen.values(), key=lambda e: self.position[id(e)])

    def avoid_expensive_duplicates(self) -> None:
        """Materializes each elementwise value that two or more kernels would recompute at a cost of
        _DUPLICATION_LIMIT or more, in one sweep from the last equation to the first.

        A kernel is a root's tree or a reduction's; a value's users are the kernels whose trees hold
        its producer, i.e. the roots and reductions reachable downstream through values that are not
        materialized. Materializing a value only cuts paths, so no value becomes a candidate later;
        and every materialization happens downstream of the equations still to visit, so the
        candidate met first from the end is the last one in graph order. This is the result of
        repeatedly materializing the last candidate in graph order, in linear time.
        """
        consumers: dict[int, list[Equation]] = {}
        for eqn in self.graph.eqns:
            for a in eqn.invars:
                if isinstance(a, Var):
                    consumers.setdefault(a.id, []).append(eqn)
        reach: dict[int, tuple] = {}  # id(eqn) -> up to two kernels (root var ids, reduction eqn ids)

        def kernels_of(eqn: Equation) -> tuple:
            found: list = [("r", id(eqn))] if self.kind[id(eqn)] == "reduction" else []
            for v in eqn.outvars:
                if v.id in self.materialized:
                    if v.id in self.root_set:
                        _add_capped(found, v.id)
                    continue
                for user in consumers.get(v.id, ()):
                    for k in reach[id(user)]:
                        _add_capped(found, k)
            return tuple(found)

        for eqn in reversed(self.graph.eqns):
            if self.kind[id(eqn)] == "elementwise" and eqn.outvars[0].id not in self.materialized:
                if len(kernels_of(eqn)) > 1 and self._cost_reaches(eqn, _DUPLICATION_LIMIT):
                    self.add_root(eqn.outvars[0])
            reach[id(eqn)] = kernels_of(eqn)

    def _cost_reaches(self, eqn: Equation, limit: int) -> bool:
        """Whether the elementwise work of tree(eqn.outvars) costs `limit` or more (stops early)."""
        seen: set[int] = set()
        stack = [eqn]
        cost = 0
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if self.kind[id(e)] == "elementwise":
                cost += e.primitive.traits.cost
                if cost >= limit:
                    return True
            for a in e.invars:
                if isinstance(a, Var) and a.id not in self.materialized and a.id in self.producer:
                    stack.append(self.producer[a.id])
        return False

    def steps(self) -> list:
        root_set = self.root_set
        steps: list = []
        count = 0
        for eqn in self.graph.eqns:
            kind = self.kind[id(eqn)]
            if kind == "host":
                steps.append(HostStep(eqn))
                continue
            outputs = [v for v in eqn.outvars if v.id in root_set or kind in ("reduction", "dot")]
            if not outputs:
                continue
            eqns = self.tree(outputs)
            label = {"reduction": eqn.primitive.name, "dot": eqn.primitive.name}.get(kind, "fused")
            steps.append(_Pending(label, eqns, outputs))
        steps = _merge_elementwise(steps, self.position)
        result = []
        for s in steps:
            if isinstance(s, _Pending):
                result.append(_build_dispatch(f"{s.label}_{count}", s.eqns, s.outputs))
                count += 1
            else:
                result.append(s)
        return result


@dataclass
class _Pending:
    label: str
    eqns: list[Equation]
    outputs: list[Var]

    def inputs(self) -> list[Var]:
        return _region_inputs(self.eqns)


def _add_capped(found: list, kernel) -> None:
    """Adds `kernel` to `found` unless present or two are known (two decide 'more than one')."""
    if len(found) < 2 and kernel not in found:
        found.append(kernel)


def _region_inputs(eqns: list[Equation]) -> list[Var]:
    defined = {v.id for e in eqns for v in e.outvars}
    seen, inputs = set(), []
    for e in eqns:
        for a in e.invars:
            if isinstance(a, Var) and a.id not in defined and a.id not in seen:
                seen.add(a.id)
                inputs.append(a)
    return inputs


def _merge_elementwise(steps: list, position: dict[int, int]) -> list:
    merged: list = []
    for s in steps:
        prev = merged[-1] if merged else None
        if (
            isinstance(s, _Pending) and isinstance(prev, _Pending)
            and s.label == prev.label == "fused"
            and s.outputs[0].aval.shape == prev.outputs[0].aval.shape
            and len(prev.outputs) + len(s.outputs) <= _MAX_MERGED_OUTPUTS
            and not {v.id for v in prev.outputs} & {v.id for v in s.inputs()}
        ):
            eqns = {id(e): e for e in prev.eqns + s.eqns}
            ordered = sorted(eqns.values(), key=lambda e: position[id(e)])
            merged[-1] = _Pending("fused", ordered, prev.outputs + s.outputs)
        else:
            merged.append(s)
    return merged


def _build_dispatch(name: str, eqns: list[Equation], outputs: list[Var]) -> DispatchStep:
    inputs = _region_inputs(eqns)
    rename: dict[int, Var] = {}
    invars = []
    for v in inputs:
        fresh = Var(v.aval, v.hint)
        rename[v.id] = fresh
        invars.append(fresh)

    def read(atom):
        return atom if isinstance(atom, Literal) else rename[atom.id]

    new_eqns = []
    for e in eqns:
        ins = [read(a) for a in e.invars]
        outs = []
        for v in e.outvars:
            fresh = Var(v.aval, v.hint)
            rename[v.id] = fresh
            outs.append(fresh)
        new_eqns.append(Equation(e.primitive, ins, outs, dict(e.params), e.source_info))
    region = Graph(invars, [], [], new_eqns, [rename[v.id] for v in outputs])
    return DispatchStep(name, region, inputs, list(outputs))


def partition(graph: Graph) -> Plan:
    """Splits `graph` into an ordered list of HostStep and DispatchStep."""
    p = _Partitioner(graph)
    p.find_required_roots()
    p.avoid_expensive_duplicates()
    return Plan(strategy_passes(p.steps(), graph.outvars))


def strategy_passes(steps: list, graph_outvars) -> list:
    """What kernel strategies do to a partition: row-fused reductions merge (row_fusion.py), large
    reductions with few outputs split into partials and their combine (split_reduction.py), consecutive
    independent reductions and independent elementwise kernels merge into horizontal kernels
    (horizontal_fusion.py), after a matrix product's or a reduction's elementwise consumer became its epilogue
    (epilogue_fusion.py)."""
    from .epilogue_fusion import fuse_epilogues, fuse_reduction_epilogues
    from .horizontal_fusion import fuse_horizontal, fuse_reductions
    from .row_fusion import fuse_rows
    from .split_reduction import split_reductions

    steps = split_reductions(fuse_rows(steps, graph_outvars))
    steps = fuse_reductions(fuse_reduction_epilogues(steps, graph_outvars))
    return fuse_horizontal(fuse_epilogues(steps, graph_outvars))
