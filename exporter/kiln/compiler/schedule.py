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

KINDS = ("argument", "constant", "global", "result", "transient", "heap", "dest")


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
    dest: int | None = None  # dest: the output position whose buffer the enclosing step gives it

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
        if self.dest is not None:
            text += f" -> output {self.dest}'s buffer"
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
    spares: dict = field(default_factory=dict)  # loop carry position -> its spare buffer's arena offset
    placed: tuple = ()  # cond results written into their planned buffers by the branches
    invariant: tuple = ()  # loop carries handed back unchanged, copied into the result's planned buffer at the exit
    staged: dict = field(default_factory=dict)  # loop carry position -> its second spare's arena offset (LoopMemory.staged)


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
                op.spares = {k: o + delta for k, o in op.spares.items()}
                op.staged = {k: o + delta for k, o in op.staged.items()}
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
                params += f" (results {list(op.placed)} written in place by the branches)" if op.placed else ""
                params += f" (carries {list(op.invariant)} unchanged: copied at the exit)" if op.invariant else ""
                params += "".join(f" (carry {k}: spare @ {o}+{memory_plan.aligned(tensor_type(op.eqn.outvars[k].aval).byte_size)}"
                                  + (f", {op.staged[k]}: copied at the exit" if k in op.staged else "") + ")"
                                  for k, o in sorted(op.spares.items()))
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


@dataclass(frozen=True)
class LoopMemory:
    """How a scan or while (or, for `consumed` only, a cond) uses memory (`loop_memory`).

    `carried`: for a cond, the results every branch makes itself, written into the result's
    planned buffer (made before branching); for a loop, carry positions whose new value each iteration writes into one of two buffers the
    loop rotates: a spare in the arena and the buffer of the loop's result (its final location), so
    an iteration allocates nothing for it; at the exit `buffer.copy` puts the last value in the final
    location (nothing to copy when the last iteration wrote it there: a scan's iteration count is
    known, so the rotation starts where it ends there). `consumed`: operand positions whose value the
    step keeps nothing of once it is done (the body hands it only to kernels, and a carried operand
    is never the result: the exit copies it), so the operand may live in the arena. `dests` and
    `copied`: per body name, the output positions written into a buffer the loop gives (the carried
    ones) and the ones the loop copies as soon as the body returns (a scan's rows, a while
    condition's predicate). `invariant`: carries every iteration hands back as they came, whose value
    the loop's result takes by a copy at the exit (so the operand is consumed too). `rows`: a scan's
    stacked inputs whose rows go only into kernels: their memory is free once the scan is done, but
    `buffer.row` freezes the buffer, so they count as consumed for the step's own graph only, never
    for a buffer that is written again (a rotating carry, a destination); for a cond, the operands
    whose rows a scan in a branch takes and that the branches otherwise hand only to kernels.
    `staged`: carried carries whose value an inner scan takes rows of while the loop's result lies
    outside the arena (returned, an enclosing step's buffer, one a host step keeps): buffer.row
    would freeze that buffer, so they rotate through two arena spares instead and the exit copies
    the last value into it."""

    carried: frozenset = frozenset()
    consumed: frozenset = frozenset()
    dests: dict = field(default_factory=dict)
    copied: dict = field(default_factory=dict)
    invariant: frozenset = frozenset()  # carries the body hands back unchanged: the exit copies them
    rows: frozenset = frozenset()  # a scan's stacked inputs read by kernels only (buffer.row freezes them), a cond's operands an inner scan takes rows of
    staged: frozenset = frozenset()  # carried carries rotating through two arena spares, copied out at the exit


def _safe_reads(graph: Graph, steps: list, plan_for, memo: dict, rows: bool = False) -> frozenset:
    """(step index, value id) of the host reads in `graph` that keep nothing of the value past the
    step: the operands a control-flow step consumes (`LoopMemory.consumed`; with `rows`, also those
    it takes rows of, `LoopMemory.rows`, which buffer.row freezes unless they lie in the arena)."""
    found = set()
    for index, step in enumerate(steps):
        eqn = getattr(step, "eqn", None)
        if eqn is None or getattr(step, "region", None) is not None:
            continue
        mem = loop_memory(eqn, plan_for, memo, graph)
        ok = mem.consumed | mem.rows if rows else mem.consumed
        positions: dict[int, set[int]] = {}
        for p, a in enumerate(eqn.invars):
            if isinstance(a, Var):
                positions.setdefault(a.id, set()).add(p)
        found |= {(index, vid) for vid, ps in positions.items() if ps <= ok}
    return frozenset(found)


def _dispatch_only(graph: Graph, plan_for, memo: dict) -> set:
    """Ids of the values of `graph` that no host step but a global.store (which copies arena memory)
    reads and the graph does not return: a loop result among them gets an arena buffer
    (memory_plan._intervals, build_schedule's `ok_reads`)."""
    from ..program.prims import global_store

    key = ("dispatch_only", id(graph))
    if key not in memo:
        host = {a.id for step in plan_for(graph).steps if getattr(step, "region", None) is None
                and step.eqn.primitive is not global_store
                for a in step_inputs(step) if isinstance(a, Var)}
        returned = {a.id for a in graph.outvars if isinstance(a, Var)}
        memo[key] = {v.id for e in graph.eqns for v in e.outvars} - host - returned
    return memo[key]


def _kernel_only(graph: Graph, plan_for, memo: dict, rows: bool = False):
    """A test `ok(value id)`: every step of `graph` reading the value is a dispatch or a host step
    that keeps nothing of it (`_safe_reads`)."""
    key = ("reads", id(graph), rows)
    if key not in memo:
        steps = plan_for(graph).steps
        safe = _safe_reads(graph, steps, plan_for, memo, rows)
        bad = set()
        for index, step in enumerate(steps):
            if getattr(step, "region", None) is None:
                bad |= {a.id for a in step_inputs(step) if isinstance(a, Var) and (index, a.id) not in safe}
        memo[key] = bad
    bad = memo[key]
    return lambda vid: vid not in bad


def loop_memory(eqn, plan_for, memo: dict | None = None, graph: Graph | None = None) -> LoopMemory:
    """The `LoopMemory` of a control-flow equation (none for other host steps). A carry is carried
    in rotating buffers when its body makes the new value itself (a step of the body defines it;
    a value at several carry positions is carried at each, the body writing it into the first
    position's buffer and the rotation copying it into the others', or at none), and neither that
    value nor the carry parameter goes anywhere but into kernels (or into inner control flow that
    keeps nothing of it) and the scan's rows: then
    no reference to a buffer survives the iteration after the one that wrote it. A carry whose
    value an inner scan takes rows of is carried too when both its buffers lie in the arena (the
    loop's result is read only by kernels of `graph`, the graph holding `eqn`), which buffer.row
    does not freeze; its operand then counts among `rows`. When the loop's result lies elsewhere, the
    carry rotates through two arena spares and the exit copies it there (`LoopMemory.staged`)."""
    from ..debug import debug_callback_p, debug_print_p
    from ..lax.control_flow import cond_p, scan_p, while_p

    memo = {} if memo is None else memo
    if ("loop", id(eqn)) in memo:
        return memo[("loop", id(eqn))]
    p = eqn.params
    result = LoopMemory()
    if eqn.primitive in (debug_print_p, debug_callback_p):
        # debug.print and debug.callback (which copies) read their values at their step and keep nothing:
        # they may live in the arena
        return LoopMemory(consumed=frozenset(range(len(eqn.invars))))
    if eqn.primitive is cond_p:
        branches = p["branches"]
        # results written into their planned buffer, made before branching: each branch makes the
        # value itself (once among its outputs, read in it only by kernels), or hands over an operand
        # or a constant, which is copied there; at least one branch makes it
        # (a value a branch returns at several positions goes into the first one's buffer and is
        # copied into the others': placed at all of them, or at none)
        placed = set()
        for k in range(len(eqn.outvars)):
            makes = 0
            for g in branches:
                o = g.outvars[k]
                params = {v.id for v in g.invars} | {v.id for v in g.constvars}
                if not isinstance(o, Var) or o.id in params:
                    continue
                if _kernel_only(g, plan_for, memo)(o.id):
                    makes += 1
                else:
                    makes = -len(branches)
            if makes > 0:
                placed.add(k)
        changed = True
        while changed:
            changed = False
            for g in branches:
                for k in sorted(placed):
                    o = g.outvars[k]
                    if isinstance(o, Var) and any(a is o and j not in placed for j, a in enumerate(g.outvars)):
                        placed -= {j for j, a in enumerate(g.outvars) if a is o}
                        changed = True
        consumed = {0}  # the branch index: read by i.load
        rows = set()  # operands whose rows an inner scan takes, and otherwise only kernels read
        for k in range(1, len(eqn.invars)):
            kept = any(any(a is g.invars[k - 1] for j, a in enumerate(g.outvars) if j not in placed)
                       for g in branches)
            if not kept and all(_kernel_only(g, plan_for, memo)(g.invars[k - 1].id) for g in branches):
                consumed.add(k)
            elif not kept and all(_kernel_only(g, plan_for, memo, True)(g.invars[k - 1].id) for g in branches):
                rows.add(k)
        result = LoopMemory(carried=frozenset(placed), consumed=frozenset(consumed),
                            dests={f"branch {j}": frozenset(placed) for j in range(len(branches))},
                            rows=frozenset(rows))
    elif eqn.primitive in (scan_p, while_p):
        n_carry = p["n_carry"]
        if eqn.primitive is scan_p:
            body, conds = p["body"], []
            n_xs = p["n_xs"]
            body_of = list(range(len(eqn.invars)))  # operand position -> body parameter position
            cond_of = {}
        else:
            body, conds = p["body_graph"], [p["cond_graph"]]
            n_cond = len(p["cond_graph"].invars) - n_carry
            body_of = {k: k for k in range(n_carry)}
            body_of.update({n_carry + n_cond + j: n_carry + j for j in range(len(body.invars) - n_carry)})
            cond_of = {k: k for k in range(n_carry)}
            cond_of.update({n_carry + j: n_carry + j for j in range(n_cond)})
            n_xs = 0
        params = {v.id for v in body.invars} | {v.id for v in body.constvars}
        carry_outs = body.outvars[:n_carry]
        in_arena = _dispatch_only(graph, plan_for, memo) if graph is not None else set()

        def param_ok(position: int, back: int | None = None, rows: bool = False) -> bool:
            """The operand at `position` reaches kernels only, in the body and the condition (and the
            body's carry output `back`, for a carry handed back unchanged; with `rows`, also the
            rows an inner scan takes of it)."""
            ok_body = _kernel_only(body, plan_for, memo, rows)
            ok_conds = [_kernel_only(g, plan_for, memo, rows) for g in conds]
            if isinstance(body_of, dict):
                b = body_of.get(position)
            else:
                b = body_of[position]
            if b is not None:
                v = body.invars[b]
                if not ok_body(v.id) or any(a is v for j, a in enumerate(carry_outs) if j != back):
                    return False
            c = cond_of.get(position)
            if c is not None:
                v = conds[0].invars[c]
                if not ok_conds[0](v.id) or any(a is v for a in conds[0].outvars):
                    return False
            return True

        carried, invariant, rows, staged = set(), set(), set(), set()
        ok_body = _kernel_only(body, plan_for, memo)
        for k, o in enumerate(carry_outs):
            made = isinstance(o, Var) and o.id not in params and ok_body(o.id)
            if made and param_ok(k):
                carried.add(k)
            elif made and tensor_type(eqn.outvars[k].aval).byte_size and param_ok(k, rows=True):
                carried.add(k)
                rows.add(k)
                if eqn.outvars[k].id not in in_arena:  # buffer.row would freeze the result's buffer
                    staged.add(k)
            elif o is body.invars[k] and param_ok(k, back=k):
                invariant.add(k)
        for k in sorted(carried):  # a value at several carry positions: carried at all of them or none
            if any(a is carry_outs[k] and j not in carried for j, a in enumerate(carry_outs)):
                carried -= {j for j, a in enumerate(carry_outs) if a is carry_outs[k]}
        rows &= carried
        staged &= carried
        consumed = (carried - rows) | invariant
        # not a scan's stacked inputs: buffer.row freezes the buffer it takes rows of for good
        consumed |= {q for q in range(n_carry + n_xs, len(eqn.invars)) if param_ok(q)}
        rows |= {q for q in range(n_carry, n_carry + n_xs) if param_ok(q)}
        dests = {"body": frozenset(carried)}
        copied = {"body": frozenset(range(n_carry, len(body.outvars)))} if eqn.primitive is scan_p else {"cond": frozenset({0})}
        result = LoopMemory(frozenset(carried), frozenset(consumed), dests, copied, frozenset(invariant),
                            frozenset(rows), frozenset(staged))
    memo[("loop", id(eqn))] = result
    return result


def build_schedule(graph: Graph, plan_for, top: bool = True, dests: frozenset = frozenset(),
                   copied: frozenset = frozenset(), memo: dict | None = None) -> Schedule:
    """The schedule of `graph` given its partition (`plan_for(graph).steps`, and its bodies'),
    with memory planned unless inside `memory_plan.planning_disabled()`. For a body, `dests` are
    the output positions whose buffers the enclosing loop gives (a value a step of the body makes
    there is written into it: kind `dest`), `copied` those it copies as soon as the body returns."""
    from ..lax.control_flow import cond_p, scan_p, while_p
    from ..program.prims import global_load, global_store

    memo = {} if memo is None else memo
    steps = plan_for(graph).steps
    planned = memory_plan.planning_enabled() and (top or PLAN_BODIES)
    if not planned:
        dests, copied = frozenset(), frozenset()
    takes: dict[int, int] = {}  # global_load value id -> the dispatch output id updating it in place
    if planned and IN_PLACE:
        steps, takes = global_updates(graph, steps)
    ops: list = []
    body_need: dict[int, int] = {}
    host_defs: dict[int, tuple[int, object]] = {}  # value id -> (step, aval) a loop writes where the plan says
    ok_reads: set = set()
    spares: dict = {}
    mems: dict[int, LoopMemory] = {}
    for index, step in enumerate(steps):
        if getattr(step, "region", None) is not None:
            ops.append(Dispatch(step, list(step.inputs), list(step.outputs)))
            continue
        eqn = step.eqn
        if planned and eqn.primitive is global_store and isinstance(eqn.invars[0], Var) \
                and eqn.invars[0].id in host_defs:
            # a value a control-flow step writes where the plan says (a loop's final carry): in the
            # arena, global.store copies it, into the global's own buffer when nothing else holds it
            ok_reads.add((index, eqn.invars[0].id))
        mem = loop_memory(eqn, plan_for, memo, graph) if planned else LoopMemory()
        mems[index] = mem
        bodies = [(name, build_schedule(g, plan_for, top=False, dests=mem.dests.get(name, frozenset()),
                                        copied=mem.copied.get(name, frozenset()), memo=memo))
                  for name, g in _body_graphs(eqn)]
        ops.append(HostOp(eqn, list(eqn.invars), list(eqn.outvars), bodies,
                          take=eqn.primitive is global_load and eqn.outvars[0].id in takes))
        need = max((b.arena_size for _, b in bodies), default=0)
        if need:
            body_need[index] = need
        positions: dict[int, set[int]] = {}
        for q, a in enumerate(eqn.invars):
            if isinstance(a, Var):
                positions.setdefault(a.id, set()).add(q)
        ok_reads |= {(index, vid) for vid, qs in positions.items() if qs <= mem.consumed | mem.rows}
        for k in mem.invariant:
            host_defs[eqn.outvars[k].id] = (index, eqn.outvars[k].aval)
        if eqn.primitive is cond_p:
            for k in mem.carried:
                host_defs[eqn.outvars[k].id] = (index, eqn.outvars[k].aval)
        if eqn.primitive in (scan_p, while_p):
            for k in mem.carried:
                v = eqn.outvars[k]
                host_defs[v.id] = (index, v.aval)
                spares[(index, k)] = (index, tensor_type(v.aval).byte_size)
                if k in mem.staged:
                    spares[(index, k, "staged")] = (index, tensor_type(v.aval).byte_size)
            if eqn.primitive is scan_p:
                for v in eqn.outvars[eqn.params["n_carry"]:]:
                    host_defs[v.id] = (index, v.aval)

    # values written into the buffers the enclosing step gives: a dispatch's output, or a control-flow
    # step's (which copies into it what it does not write there itself); one position per value
    dest_of: dict[int, int] = {}
    makers = {v.id for op in ops if isinstance(op, Dispatch) for v in op.writes}
    makers |= {v.id for op in ops if isinstance(op, HostOp) and op.eqn.primitive in (scan_p, while_p)
               for v in op.writes}
    makers |= {op.eqn.outvars[k].id for index, op in enumerate(ops)
               if isinstance(op, HostOp) and op.eqn.primitive is cond_p for k in mems[index].carried}
    makers -= set(takes.values())
    for k in sorted(dests):
        a = graph.outvars[k]
        if isinstance(a, Var) and a.id in makers and a.id not in dest_of:
            dest_of[a.id] = k

    plan = (memory_plan.plan_steps(graph, steps, body_need, inplace=IN_PLACE, host_defs=host_defs,
                                   ok_reads=frozenset(ok_reads), copied=copied, spares=spares) if planned
            else memory_plan.TransientPlan({}, 0, enabled=False))
    slots = memory_plan.result_slots(graph, steps, host_defs) if planned and top else {}

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

    def place(v: Var, index: int) -> None:
        if v.id in dest_of:
            add(v, "dest", index, dest=dest_of[v.id])
        elif v.id in plan.offsets:
            add(v, "transient", index, offset=plan.offsets[v.id], overwrites=plan.overwrites.get(v.id))
        elif v.id in slots:
            add(v, "result", index, result=slots[v.id])
        else:
            add(v, "heap", index)

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
                else:
                    place(v, index)
        else:
            for v in op.writes:
                if op.eqn.primitive is global_load:
                    add(v, "global", index, global_slot=op.eqn.params["slot"])
                elif v.id in dest_of or v.id in host_defs:
                    place(v, index)
                else:
                    add(v, "heap", index)
            op.spares = {k: plan.spare_offsets[(index, k)] for k in sorted(mems[index].carried)} \
                if op.eqn.primitive in (scan_p, while_p) else {}
            op.staged = {k: plan.spare_offsets[(index, k, "staged")] for k in sorted(mems[index].staged)}
            op.placed = tuple(sorted(mems[index].carried)) if op.eqn.primitive is cond_p else ()
            op.invariant = tuple(sorted(mems[index].invariant))
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
