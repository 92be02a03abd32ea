"""Lowering partitioned procedures to VM bytecode: registers, allocations, dispatches,
globals, and structured control flow (cond, while, scan) as branches and loops."""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from kiln.vm.isa import Instr, Label
from kiln.vm.module_spec import ConstantSpec, FunctionSpec, ValueInfo

from ..core.errors import CompileError
from ..debug import debug_callback_p, debug_print_p
from ..core.ir import Graph, Literal, Var
from ..lax.control_flow import cond_p, scan_p, while_p
from ..program.prims import global_load, global_store
from .complex_lowering import complex_from_parts_p, complex_parts_p
from .schedule import Dispatch, Schedule, build_schedule
from ..vm_types import tensor_type


@dataclass
class ConstantPool:
    """Module constants, deduplicated by dtype, shape and bytes."""

    constants: list[ConstantSpec] = field(default_factory=list)
    _index: dict[tuple, int] = field(default_factory=dict)

    def add(self, array: np.ndarray) -> int:
        arr = np.array(array, order="C")  # not ascontiguousarray: it turns 0-d arrays into 1-d ones
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        index = self._index.get(key)
        if index is None:
            index = self._index[key] = len(self.constants)
            self.constants.append(ConstantSpec(arr))
        return index


@dataclass
class LoweringContext:
    """What lowering needs from the rest of the compiler."""

    plan_for: Callable[[Graph], object]  # the partition of a (prepared) graph
    dispatch_info: Callable[[object], tuple[int, int]]  # DispatchStep -> (kernel index, workgroups)
    constants: ConstantPool


class _Frame:
    """Registers of one function: ref registers are reused after their value's last use."""

    def __init__(self, n_args: int):
        self.code: list = []
        self.ref_count = n_args
        self.i64_count = 0
        self._free: list[int] = []

    def take(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        self.ref_count += 1
        return self.ref_count - 1

    def give_back(self, reg: int) -> None:
        heapq.heappush(self._free, reg)  # take() reuses the lowest free register

    def take_i64(self) -> int:
        self.i64_count += 1
        return self.i64_count - 1

    def emit(self, op: str, *operands) -> None:
        self.code.append(Instr(op, *operands))


class _GraphLowering:
    """Lowers one graph's steps into a frame, given the registers holding its inputs."""

    def __init__(self, ctx: LoweringContext, frame: _Frame, schedule: Schedule, input_regs: list[int],
                 dest_regs: dict[int, int] | None = None):
        self.ctx = ctx
        self.frame = frame
        self.schedule = schedule
        self.graph = graph = schedule.graph
        self.reg_of: dict[int, int] = {v.id: r for v, r in zip(graph.invars, input_regs)}
        self.borrowed = set(input_regs)
        # output position -> the register holding the buffer the enclosing step gives that output
        self.dest_regs = dest_regs or {}
        self.borrowed |= set(self.dest_regs.values())
        self.const_value = {v.id: c for v, c in zip(graph.constvars, graph.consts)}
        self.dies_after: dict[int, list[int]] = {}
        for var_id, last in _last_uses(schedule).items():
            self.dies_after.setdefault(last, []).append(var_id)
        self._dying: list[int] = []

    def run(self) -> list[int]:
        """Emits every op; returns the registers holding the graph's outputs."""
        for index, op in enumerate(self.schedule.ops):
            if isinstance(op, Dispatch):
                self._dispatch(op.step)
            elif op.take:
                self.frame.emit("global.take", self.define(op.eqn.outvars[0]), op.eqn.params["slot"])
            else:
                self._host(op.eqn, [body for _, body in op.bodies], op)
            self._release_after(index)
        return [self.use(a, keep=True) for a in self.graph.outvars]

    # -- values ---------------------------------------------------------------------

    def use(self, atom, keep: bool = False) -> int:
        """The register holding atom, materializing constants on first use."""
        if isinstance(atom, Literal):
            reg = self.frame.take()
            self.frame.emit("const", reg, self.ctx.constants.add(np.asarray(atom.value, atom.aval.dtype)))
            if not keep:
                self._dying.append(reg)
            return reg
        reg = self.reg_of.get(atom.id)
        if reg is None:
            value = self.const_value.get(atom.id)
            if value is None:
                raise CompileError(f"internal: value %{atom.id} is used before any step defines it")
            reg = self.reg_of[atom.id] = self.frame.take()
            self.frame.emit("const", reg, self.ctx.constants.add(np.asarray(value)))
        return reg

    def define(self, var: Var) -> int:
        reg = self.reg_of[var.id] = self.frame.take()
        return reg

    def bind(self, var: Var, reg: int) -> None:
        self.reg_of[var.id] = reg

    def _release_after(self, index: int) -> None:
        for var_id in self.dies_after.get(index, ()):
            if var_id in self.reg_of:
                reg = self.reg_of.pop(var_id)
                if reg not in self.borrowed:
                    self.frame.give_back(reg)
        for reg in self._dying:
            self.frame.give_back(reg)
        self._dying = []

    # -- steps ----------------------------------------------------------------------

    def _dest(self, v: Var) -> int | None:
        """The register of the buffer the enclosing step gives v (a `dest` value), bound to v."""
        buffer = self.schedule.buffers.get(v.id)
        if buffer is None or buffer.kind != "dest":
            return None
        reg = self.reg_of[v.id] = self.dest_regs[buffer.dest]
        return reg

    def _placed(self, v: Var) -> int:
        """A register holding v's buffer as the schedule places it, made before the step that
        writes it: the enclosing step's buffer, an arena offset, the caller's result or a new one."""
        reg = self._dest(v)
        if reg is not None:
            return reg
        reg = self.define(v)
        self._alloc(reg, v, self.schedule.buffers[v.id])
        return reg

    def _alloc(self, reg: int, v: Var, buffer) -> None:
        """Allocates v's buffer in reg where the schedule places it: an arena offset, the caller's result
        or a new buffer."""
        if buffer.kind == "transient":
            self.frame.emit("alloc.transient", reg, tensor_type(v.aval), buffer.offset)
        elif buffer.result is not None:
            self.frame.emit("alloc.result", reg, tensor_type(v.aval), buffer.result)
        else:
            self.frame.emit("alloc", reg, tensor_type(v.aval))

    def _dispatch(self, step) -> None:
        kernel_index, workgroups = self.ctx.dispatch_info(step)
        bindings = [self.use(v) for v in step.inputs]
        for v in step.outputs:
            dest = self._dest(v)
            if dest is not None:
                bindings.append(dest)
                continue
            reg = self.define(v)
            buffer = self.schedule.buffers[v.id]
            if buffer.kind == "global" and buffer.overwrites is not None:
                # the global's buffer global.take gave: the kernel writes it in place (reads it through
                # this binding), and the register now holds the new value
                reg = self.reg_of.pop(buffer.overwrites)
                self.frame.give_back(self.reg_of.pop(v.id))
                self.reg_of[v.id] = reg
                bindings.append(reg)
                continue
            self._alloc(reg, v, buffer)
            bindings.append(reg)
        self.frame.emit("dispatch", kernel_index, workgroups, bindings, [])

    def _host(self, eqn, bodies: list[Schedule], op=None) -> None:
        prim = eqn.primitive
        if prim is global_load:
            self.frame.emit("global.load", self.define(eqn.outvars[0]), eqn.params["slot"])
        elif prim is global_store:
            reg = self.use(eqn.invars[0])
            buffer = self.schedule.buffer(eqn.invars[0])
            if buffer is not None and buffer.kind in ("transient", "argument"):
                # global.store copies arena and caller memory, into the global's own buffer when
                # nothing but the context holds it: dead registers may still hold the global's
                # earlier value (a global.load's, a loop operand's), so they hold this one instead
                for dead in sorted(self.frame._free):
                    self.frame.emit("mov", dead, reg)
            self.frame.emit("global.store", eqn.params["slot"], reg)
        elif prim is debug_print_p:
            # the template is a 1-d u8 constant; the values are read where they are (format 2.8)
            template = np.frombuffer(eqn.params["template"].encode("utf-8"), np.uint8)
            self.frame.emit("debug.print", self.ctx.constants.add(template), [self.use(a) for a in eqn.invars])
        elif prim is debug_callback_p:
            self.frame.emit("debug.callback", eqn.params["callback"], [self.use(a) for a in eqn.invars])
        elif prim is cond_p:
            self._cond(eqn, op, bodies)
        elif prim is while_p:
            self._while(eqn, op, *bodies)
        elif prim is scan_p:
            self._scan(eqn, op, *bodies)
        elif prim in (complex_parts_p, complex_from_parts_p):
            self.frame.emit("buffer.view", self.define(eqn.outvars[0]), self.use(eqn.invars[0]),
                            tensor_type(eqn.outvars[0].aval))
        else:
            where = f" (at {eqn.source_info})" if eqn.source_info else ""
            raise CompileError(f"primitive {prim.name} cannot run outside a kernel{where}")

    def _inline(self, schedule: Schedule, input_regs: list[int], dest_regs: dict[int, int] | None = None) -> list[int]:
        return _GraphLowering(self.ctx, self.frame, schedule, input_regs, dest_regs).run()

    def _rotation(self, eqn, op, iterations_odd: bool | None) -> dict[int, tuple[int, int, int]]:
        """For each carried carry k (`schedule.LoopMemory`): (final, next, other) registers. `final`
        holds the buffer of the loop's result k, `next` the buffer the next iteration writes its new
        value into, `other` the one it does not (the current value's, from the second iteration
        on). The spare is an arena buffer; the rotation starts so that the last iteration writes the
        final buffer when the iteration count's parity is known (`iterations_odd`). A staged carry
        (`LoopMemory.staged`) rotates through two arena spares; the exit copies it into `final`."""
        rotation = {}
        for k, offset in sorted(op.spares.items()):
            v = eqn.outvars[k]
            final = self._placed(v)
            spare = self.frame.take()
            self.frame.emit("alloc.transient", spare, tensor_type(v.aval), offset)
            nxt, other = self.frame.take(), self.frame.take()
            staged = None
            if k in op.staged:
                staged = self.frame.take()
                self.frame.emit("alloc.transient", staged, tensor_type(v.aval), op.staged[k])
                first, second = spare, staged
            else:
                first, second = (spare, final) if iterations_odd is False else (final, spare)
            self.frame.emit("mov", nxt, first)
            self.frame.emit("mov", other, second)
            self.frame.give_back(spare)
            if staged is not None:
                self.frame.give_back(staged)
            rotation[k] = (final, nxt, other)
        return rotation

    def _rotate(self, rotation: dict, outs: list[int], carry: list[int]) -> None:
        """After a body: the carried values into their `next` buffers (the body wrote them there
        unless a host step made them), the carry registers updated, `next` and `other` swapped."""
        outs = list(outs)
        for k, (_, nxt, _) in rotation.items():
            if outs[k] != nxt:
                self.frame.emit("buffer.copy", nxt, outs[k])
                outs[k] = nxt
        self._copy_into(carry, outs[:len(carry)])
        for k, (_, nxt, other) in rotation.items():
            self._copy_into([nxt, other], [other, nxt])

    def _exit(self, eqn, rotation: dict, carry: list[int], invariant=()) -> None:
        """Binds the loop's results: a carried one is copied into its final buffer (nothing is
        copied when the last iteration wrote it there); a result the enclosing step gives a buffer
        is copied into it."""
        for k, (v, reg) in enumerate(zip(eqn.outvars, carry)):
            if k in rotation:
                final = rotation[k][0]
                self.frame.emit("buffer.copy", final, reg)
                continue
            if k in invariant:  # a carry handed back unchanged: its operand may be arena memory
                self.frame.emit("buffer.copy", self._placed(v), reg)
                continue
            dest = self._dest(v)
            if dest is not None:
                self.frame.emit("buffer.copy", dest, reg)
            else:
                self.bind(v, reg)

    def _copy_into(self, targets: list[int], sources: list[int]) -> None:
        """Parallel move: targets[k] = sources[k], safe when the two lists overlap."""
        temps = []
        for s in sources:
            t = self.frame.take()
            self.frame.emit("mov", t, s)
            temps.append(t)
        for t, target in zip(temps, targets):
            self.frame.emit("mov", target, t)
            self.frame.give_back(t)

    def _fresh_copies(self, regs: list[int]) -> list[int]:
        out = []
        for r in regs:
            c = self.frame.take()
            self.frame.emit("mov", c, r)
            out.append(c)
        return out

    def _cond(self, eqn, op, branches: list[Schedule]) -> None:
        index_reg = self.use(eqn.invars[0])
        operands = [self.use(a) for a in eqn.invars[1:]]
        # the results every branch makes itself go into their planned buffers, made before branching
        placed = set(op.placed) if op is not None else set()
        results = [self._placed(v) if k in placed else self.define(v) for k, v in enumerate(eqn.outvars)]
        dest_regs = {k: results[k] for k in sorted(placed)}
        index = self.frame.take_i64()
        self.frame.emit("i.load", index, index_reg)
        end = Label("cond.end")
        labels = [Label(f"cond.branch{k}") for k in range(len(branches))]
        k_reg, test = self.frame.take_i64(), self.frame.take_i64()
        for k in range(len(branches) - 1):
            after = Label()
            self.frame.emit("i.const", k_reg, k)
            self.frame.emit("i.eq", test, index, k_reg)
            self.frame.emit("br.if", test, labels[k], after)
            self.frame.code.append(after)
        self.frame.emit("br", labels[-1])
        for label, branch in zip(labels, branches):
            self.frame.code.append(label)
            outs = self._inline(branch, operands, dest_regs)
            for k, reg in dest_regs.items():  # a result a host step made: copied into its buffer
                if outs[k] != reg:
                    self.frame.emit("buffer.copy", reg, outs[k])
            moved = [k for k in range(len(results)) if k not in dest_regs]
            self._copy_into([results[k] for k in moved], [outs[k] for k in moved])
            self.frame.emit("br", end)
        self.frame.code.append(end)

    def _while(self, eqn, op, cond_schedule: Schedule, body_schedule: Schedule) -> None:
        n_carry = eqn.params["n_carry"]
        cond_graph = cond_schedule.graph
        operands = [self.use(a) for a in eqn.invars]
        carry = self._fresh_copies(operands[:n_carry])
        rotation = self._rotation(eqn, op, None)
        n_cond = len(cond_graph.invars) - n_carry
        cond_consts = operands[n_carry:n_carry + n_cond]
        body_consts = operands[n_carry + n_cond:]
        head, body, end = Label("while.cond"), Label("while.body"), Label("while.end")
        pred = self.frame.take_i64()
        self.frame.code.append(head)
        (pred_reg,) = self._inline(cond_schedule, carry + cond_consts)
        self.frame.emit("i.load", pred, pred_reg)
        self.frame.emit("br.if", pred, body, end)
        self.frame.code.append(body)
        outs = self._inline(body_schedule, carry + body_consts, {k: r[1] for k, r in rotation.items()})
        self._rotate(rotation, outs, carry)
        self.frame.emit("br", head)
        self.frame.code.append(end)
        self._exit(eqn, rotation, carry, op.invariant)

    def _scan(self, eqn, op, body: Schedule) -> None:
        p = eqn.params
        length, n_carry, n_xs = p["length"], p["n_carry"], p["n_xs"]
        operands = [self.use(a) for a in eqn.invars]
        carry = self._fresh_copies(operands[:n_carry])
        xs = operands[n_carry:n_carry + n_xs]
        consts = operands[n_carry + n_xs:]
        rotation = self._rotation(eqn, op, length % 2 == 1)
        ys = [self._placed(v) for v in eqn.outvars[n_carry:]]
        i, bound, step, test = (self.frame.take_i64() for _ in range(4))
        if p["reverse"]:
            self.frame.emit("i.const", i, length - 1)
            self.frame.emit("i.const", bound, -1)
            self.frame.emit("i.const", step, -1)
        else:
            self.frame.emit("i.const", i, 0)
            self.frame.emit("i.const", bound, length)
            self.frame.emit("i.const", step, 1)
        head, loop, end = Label("scan.head"), Label("scan.body"), Label("scan.end")
        self.frame.code.append(head)
        if p["reverse"]:
            self.frame.emit("i.lt", test, bound, i)
        else:
            self.frame.emit("i.lt", test, i, bound)
        self.frame.emit("br.if", test, loop, end)
        self.frame.code.append(loop)
        rows = []
        for x in xs:
            r = self.frame.take()
            self.frame.emit("buffer.row", r, x, i)
            rows.append(r)
        outs = self._inline(body, carry + rows + consts, {k: r[1] for k, r in rotation.items()})
        for y, out in zip(ys, outs[n_carry:]):
            self.frame.emit("buffer.set_row", y, i, out)
        self._rotate(rotation, outs[:n_carry], carry)
        for r in rows:
            self.frame.give_back(r)
        self.frame.emit("i.add", i, i, step)
        self.frame.emit("br", head)
        self.frame.code.append(end)
        self._exit(eqn, rotation, carry, op.invariant)


def _last_uses(schedule: Schedule) -> dict[int, int]:
    """Op index of each value's last use; values the graph returns are never freed."""
    last: dict[int, int] = {}
    for i, op in enumerate(schedule.ops):
        for a in op.reads:
            if isinstance(a, Var):
                last[a.id] = i
    for a in schedule.graph.outvars:
        if isinstance(a, Var):
            last[a.id] = len(schedule.ops) + 1
    return last


def lower_procedure(ctx: LoweringContext, *, name: str, exported: bool, graph: Graph, arg_names: list[str],
                    result_names: list[str], arg_tree: str, result_tree: str,
                    schedule: Schedule | None = None) -> FunctionSpec:
    """The bytecode function for one traced procedure, lowered from its schedule (built here from
    the partition unless given: kiln.compiler.schedule)."""
    frame = _Frame(len(graph.invars))
    if schedule is None:
        schedule = build_schedule(graph, ctx.plan_for)
    results = _GraphLowering(ctx, frame, schedule, list(range(len(graph.invars)))).run()
    frame.emit("ret", results)
    return FunctionSpec(
        name=name,
        exported=exported,
        args=[ValueInfo(n, tensor_type(v.aval)) for n, v in zip(arg_names, graph.invars)],
        results=[ValueInfo(n, tensor_type(a.aval)) for n, a in zip(result_names, graph.outvars)],
        arg_tree=arg_tree,
        result_tree=result_tree,
        ref_registers=max(frame.ref_count, 1),
        i64_registers=frame.i64_count,
        code=frame.code,
        transient_size=schedule.arena_size,
    )


