"""The schedule: what a function does at run time, between fusion and bytecode.

Fusion gives each graph an ordered list of steps (dispatch regions and host steps). The schedule
states, for one function, every buffer it touches with its lifetime and where its memory comes from,
and every operation with the buffers it reads and writes:

- buffers: `argument` (the caller's, or a loop body's operands), `constant` (module data used in
  place), `global` (a global's current value), `result` (returned by the function; with a result
  slot, alloc.result may place it in the caller's destination), `transient` (only kernels write and
  read it: an offset in the function's arena), `heap` (anything else a call makes: its own buffer);
- ops: `Dispatch` (a kernel over a region: reads its inputs, writes its outputs) and `HostOp` (an
  equation the VM runs: global load/store, views, control flow, whose bodies are schedules of their
  own, nested).

Memory is planned here (`kiln.compiler.memory_plan` packs the lifetimes): a body's transients live in
a part of the arena that nothing alive across its control-flow step uses, so loop bodies and branches
allocate nothing per iteration either; an elementwise kernel whose output has an input's type and
layout and is that input's last reader writes over it in place (`Dispatch.inplace`, which code
generation reads so that the kernel reads the input through the output's pointer: the bindings stay
noalias). Bytecode is lowered from the schedule (`kiln.compiler.procedure`). `format()` prints it
(`kiln export --print schedule`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..core.ir import Graph, Literal, Var, subgraphs_of
from ..vm_types import tensor_type
from . import memory_plan
from .memory_plan import step_inputs

PLAN_BODIES = True  # loop bodies' and branches' intermediates in the arena too
IN_PLACE = True  # elementwise outputs written over a dead input

KINDS = ("argument", "constant", "global", "result", "transient", "heap")


@dataclass
class Buffer:
    """One value of the function: its kind, lifetime (step indices, both inclusive; -1 for a value
    that exists on entry) and, for a transient, its byte offset in the arena."""

    var: Var
    kind: str
    first: int
    last: int
    offset: int | None = None  # transient: byte offset in the function's arena
    result: int | None = None  # result: the result index alloc.result places it in (None: alloc)
    overwrites: int | None = None  # transient written in place over this value id's memory
    global_slot: int | None = None

    @property
    def type(self):
        return tensor_type(self.var.aval)

    def describe(self) -> str:
        text = f"%{self.var.id:<5} {self.kind:<9} {self.type}"
        if self.kind == "transient":
            text += f" @ {self.offset}+{memory_plan.aligned(self.type.byte_size)}"
        if self.result is not None:
            text += f" -> result {self.result}"
        if self.global_slot is not None:
            text += f" global {self.global_slot}"
        if self.overwrites is not None:
            text += f" (in place over %{self.overwrites})"
        span = "entry" if self.first < 0 else str(self.first)
        return text + f"  live {span}..{self.last}"


@dataclass
class Dispatch:
    """A kernel launch: the region's inputs are read, its outputs written."""

    step: object  # fusion.DispatchStep
    reads: list
    writes: list

    @property
    def inplace(self) -> dict[int, int]:
        """input position -> output position of the outputs written over their (dead) input."""
        return getattr(self.step, "inplace", None) or {}


@dataclass
class HostOp:
    """An equation the VM runs itself; control flow carries the schedules of its bodies."""

    eqn: object
    reads: list
    writes: list
    bodies: list = field(default_factory=list)  # [(name, Schedule)]
    take: bool = False  # a global_load lowered to global.take: the next dispatch updates the global in place


@dataclass
class Schedule:
    """One graph's operations and buffers; `arena_size` bytes of transient memory (for a body: the
    part of its function's arena it uses, from `arena_base`)."""

    graph: Graph
    ops: list
    buffers: dict[int, Buffer]
    arena_size: int = 0
    arena_base: int = 0
    planned: bool = True

    def buffer(self, atom) -> Buffer | None:
        return None if isinstance(atom, Literal) else self.buffers.get(atom.id)

    def transient_size(self) -> int:
        return self.arena_size

    def _shift(self, delta: int) -> None:
        self.arena_base += delta
        for b in self.buffers.values():
            if b.offset is not None:
                b.offset += delta
        for op in self.ops:
            if isinstance(op, HostOp):
                for _, body in op.bodies:
                    body._shift(delta)

    def format(self, name: str = "", indent: int = 0) -> str:
        pad = " " * indent
        head = f"schedule {name}".rstrip()
        lines = [f"{pad}{head}: {len(self.ops)} ops, arena {self.arena_size} bytes"
                 + (f" from {self.arena_base}" if indent else "")
                 + ("" if self.planned else " (planning disabled)")]
        for b in sorted(self.buffers.values(), key=lambda b: (b.first, b.var.id)):
            lines.append(f"{pad}  buffer {b.describe()}")

        def names(atoms):
            return ", ".join(f"%{a.id}" if isinstance(a, Var) else repr(a.value) for a in atoms)

        for index, op in enumerate(self.ops):
            if isinstance(op, Dispatch):
                extra = "".join(f" (output {o} in place over input {i})" for i, o in sorted(op.inplace.items()))
                lines.append(f"{pad}  {index:>3} dispatch {op.step.name} reads ({names(op.reads)}) "
                             f"writes ({names(op.writes)}){extra}")
            else:
                params = ""
                if "slot" in op.eqn.params:
                    params = f"[slot={op.eqn.params['slot']}]"
                params += " (taken: updated in place)" if op.take else ""
                lines.append(f"{pad}  {index:>3} host {op.eqn.primitive.name}{params} reads ({names(op.reads)}) "
                             f"writes ({names(op.writes)})")
                for body_name, body in op.bodies:
                    lines.append(body.format(body_name, indent + 6))
        lines.append(f"{pad}  return ({names(self.graph.outvars)})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def _body_graphs(eqn) -> list[tuple[str, Graph]]:
    from ..lax.control_flow import cond_p, scan_p, while_p

    p = eqn.params
    if eqn.primitive is cond_p:
        return [(f"branch {k}", g) for k, g in enumerate(p["branches"])]
    if eqn.primitive is while_p:
        return [("cond", p["cond_graph"]), ("body", p["body_graph"])]
    if eqn.primitive is scan_p:
        return [("body", p["body"])]
    return [(f"graph {k}", g) for k, g in enumerate(subgraphs_of(eqn))]


def _touches_slot(eqn, slot: int) -> bool:
    """Whether an equation loads or stores global `slot`, itself or inside its bodies."""
    from ..program.prims import global_load, global_store

    if eqn.primitive in (global_load, global_store) and eqn.params.get("slot") == slot:
        return True
    return any(_touches_slot(e, slot) for g in subgraphs_of(eqn) for e in g.eqns)


def global_updates(graph: Graph, steps: list) -> tuple[list, dict[int, int]]:
    """A mutable global updated elementwise, updated in place: `v = global_load g` read only by kernels,
    the last of them an elementwise dispatch that may write an output `y` over it
    (memory_plan.inplace_pairs), `y` stored
    into `g` later, and nothing else loading or storing `g` in between. The load becomes global.take
    (the global's own buffer when nothing else holds it), the kernel writes `y` there, and the store
    moves to just after the dispatch, so no cancellation or limit check can fall between the write and
    the store. Returns the steps (reordered) and {v id: y id}."""
    from ..program.prims import global_load, global_store

    readers: dict[int, list[int]] = {}
    for index, step in enumerate(steps):
        for a in step_inputs(step):
            if isinstance(a, Var):
                readers.setdefault(a.id, []).append(index)
    returned = {a.id for a in graph.outvars if isinstance(a, Var)}
    steps = list(steps)
    takes: dict[int, int] = {}
    for load in [s for s in steps if getattr(s, "eqn", None) is not None and s.eqn.primitive is global_load]:
        load_index = next(k for k, s in enumerate(steps) if s is load)
        eqn = load.eqn
        v, slot = eqn.outvars[0], eqn.params["slot"]
        found = readers.get(v.id, [])
        if v.id in returned or not found or any(getattr(steps[k], "region", None) is None for k in found):
            continue
        d = max(found)  # the last reader; the kernels before it read the old value
        dispatch = steps[d]
        for i, j in memory_plan.inplace_pairs(dispatch):
            y = dispatch.outputs[j]
            if dispatch.inputs[i] is not v or y.id in takes.values():
                continue
            store = next((k for k in range(d + 1, len(steps)) if getattr(steps[k], "eqn", None) is not None
                          and steps[k].eqn.primitive is global_store and steps[k].eqn.params["slot"] == slot
                          and steps[k].eqn.invars[0] is y), None)
            if store is None or any(_touches_slot(steps[k].eqn, slot) for k in range(load_index + 1, store)
                                    if getattr(steps[k], "eqn", None) is not None):
                continue
            steps.insert(d + 1, steps.pop(store))
            takes[v.id] = y.id
            readers = {}
            for index, step in enumerate(steps):
                for a in step_inputs(step):
                    if isinstance(a, Var):
                        readers.setdefault(a.id, []).append(index)
            break
    return steps, takes


def build_schedule(graph: Graph, plan_for, top: bool = True) -> Schedule:
    """The schedule of `graph` given its partition (`plan_for(graph).steps`, and its bodies'),
    with memory planned unless inside `memory_plan.planning_disabled()`."""
    from ..program.prims import global_load

    steps = plan_for(graph).steps
    planned = memory_plan.planning_enabled() and (top or PLAN_BODIES)
    takes: dict[int, int] = {}  # global_load value id -> the dispatch output id updating it in place
    if planned and IN_PLACE:
        steps, takes = global_updates(graph, steps)
    ops: list = []
    body_need: dict[int, int] = {}
    for index, step in enumerate(steps):
        if getattr(step, "region", None) is not None:
            ops.append(Dispatch(step, list(step.inputs), list(step.outputs)))
        else:
            bodies = [(name, build_schedule(g, plan_for, top=False)) for name, g in _body_graphs(step.eqn)]
            ops.append(HostOp(step.eqn, list(step.eqn.invars), list(step.eqn.outvars), bodies,
                              take=step.eqn.primitive is global_load and step.eqn.outvars[0].id in takes))
            need = max((b.arena_size for _, b in bodies), default=0)
            if need:
                body_need[index] = need

    plan = (memory_plan.plan_steps(graph, steps, body_need, inplace=IN_PLACE) if planned
            else memory_plan.TransientPlan({}, 0, enabled=False))
    slots = memory_plan.result_slots(graph, steps) if planned and top else {}

    last: dict[int, int] = {}
    for index, step in enumerate(steps):
        for a in step_inputs(step):
            if isinstance(a, Var):
                last[a.id] = index
    end = len(steps)
    outs = {a.id for a in graph.outvars if isinstance(a, Var)}
    buffers: dict[int, Buffer] = {}

    def add(v: Var, kind: str, first: int, **kw) -> None:
        if v.id in outs and kind == "heap":
            kind = "result" if top else "heap"
        buffers[v.id] = Buffer(v, kind, first, end if v.id in outs else last.get(v.id, first), **kw)

    for v in graph.invars:
        add(v, "argument", -1)
    for v in graph.constvars:
        add(v, "constant", -1)
    updated = {y: v for v, y in takes.items()}
    for index, (step, op) in enumerate(zip(steps, ops)):
        if isinstance(op, Dispatch):
            for v in op.writes:
                if v.id in updated:
                    load = buffers[updated[v.id]]
                    add(v, "global", index, global_slot=load.global_slot, overwrites=load.var.id)
                elif v.id in plan.offsets:
                    add(v, "transient", index, offset=plan.offsets[v.id], overwrites=plan.overwrites.get(v.id))
                elif v.id in slots:
                    add(v, "result", index, result=slots[v.id])
                else:
                    add(v, "heap", index)
        else:
            for v in op.writes:
                if op.eqn.primitive is global_load:
                    add(v, "global", index, global_slot=op.eqn.params["slot"])
                else:
                    add(v, "heap", index)
    for index, base in plan.body_offsets.items():
        for _, body in ops[index].bodies:
            body._shift(base)
    # which input each in-place output overwrites, by position (code generation reads it)
    for op in ops:
        if isinstance(op, Dispatch):
            inplace = {}
            for j, v in enumerate(op.writes):
                src = plan.overwrites.get(v.id, updated.get(v.id))
                if src is not None:
                    inplace[[a.id if isinstance(a, Var) else None for a in op.reads].index(src)] = j
            op.step.inplace = inplace
    return Schedule(graph, ops, buffers, plan.size, 0, planned)
