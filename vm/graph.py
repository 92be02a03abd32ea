"""The dataflow of a module's functions, read from their bytecode: which kernel reads which buffer
that which other kernel (or argument, global, constant) made, and where results go. `kiln dump --dot`
prints it for Graphviz; the same walk serves any picture of a module."""
from __future__ import annotations

from dataclasses import dataclass, field

from kiln.vm.isa import Instr
from kiln.vm.module_spec import TensorType
from kiln.vm.reader import ModuleFile


@dataclass
class Node:
    id: str
    kind: str  # "arg", "global", "const", "dispatch", "op", "result"
    label: str


@dataclass
class Edge:
    source: str
    target: str
    label: str


@dataclass
class FunctionGraph:
    name: str
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)


def _memory(op: str, operands) -> str:
    if op == "alloc.transient":
        return f" @arena+{operands[2]}"
    if op == "alloc.result":
        return f" @result{operands[2]}"
    return ""


def function_graphs(data: bytes) -> list[FunctionGraph]:
    """One dataflow graph per function of the module: arguments, globals, constants, kernel dispatches
    and host operations as nodes; buffers as edges from their producer to each reader."""
    m = ModuleFile(data)
    graphs = []
    for fi, f in enumerate(m.functions):
        g = FunctionGraph(f.name)
        producer: dict[int, str] = {}
        buffer: dict[int, str] = {}  # register -> its type (and planned memory)
        seen: set[str] = set()

        def node(nid: str, kind: str, label: str) -> str:
            if nid not in seen:
                seen.add(nid)
                g.nodes.append(Node(nid, kind, label))
            return nid

        def read(reg: int, target: str) -> None:
            source = producer.get(reg)
            if source is not None:
                g.edges.append(Edge(source, target, buffer.get(reg, "")))

        for i, a in enumerate(f.args):
            producer[i] = node(f"f{fi}_arg{i}", "arg", f"{a.name or f'arg{i}'}: {a.type}")
            buffer[i] = str(a.type)
        for k, ins in enumerate(x for x in f.code if isinstance(x, Instr)):
            op, ops = ins.op, ins.operands
            if op in ("alloc", "alloc.transient", "alloc.result"):
                buffer[ops[0]] = f"{ops[1]}{_memory(op, ops)}"
                producer.pop(ops[0], None)
            elif op == "const":
                producer[ops[0]] = node(f"f{fi}_const{ops[1]}", "const", f"constant #{ops[1]}")
                buffer[ops[0]] = ""
            elif op in ("global.load", "global.take"):  # take: the global's own buffer, updated in place
                name = m.globals[ops[1]][0]
                producer[ops[0]] = node(f"g{ops[1]}", "global", f"global {name}")
                buffer[ops[0]] = str(m.globals[ops[1]][1])
            elif op == "global.store":
                read(ops[1], node(f"g{ops[0]}", "global", f"global {m.globals[ops[0]][0]}"))
            elif op == "dispatch":
                kernel = m.kernels[ops[0]]
                d = node(f"f{fi}_d{k}", "dispatch", f"{kernel.name} x{ops[1]}")
                for reg, binding in zip(ops[2], kernel.bindings):
                    if binding.writable:
                        producer[reg] = d
                    else:
                        read(reg, d)
            elif op == "mov":
                if ops[1] in producer:
                    producer[ops[0]] = producer[ops[1]]
                    buffer[ops[0]] = buffer.get(ops[1], "")
            elif op == "ret":
                for j, reg in enumerate(ops[0]):
                    read(reg, node(f"f{fi}_result{j}", "result", f"result {j}: {f.results[j].type}"))
            elif op in ("buffer.row", "buffer.view", "buffer.set_row", "buffer.copy", "call", "i.store"):
                o = node(f"f{fi}_op{k}", "op", op)
                regs = {"buffer.row": [ops[1]], "buffer.view": [ops[1]], "buffer.set_row": [ops[2], ops[0]],
                        "buffer.copy": [ops[1]], "call": list(ops[1]), "i.store": []}[op]
                for reg in regs:
                    read(reg, o)
                outs = {"buffer.row": [ops[0]], "buffer.view": [ops[0]], "buffer.set_row": [ops[0]],
                        "buffer.copy": [ops[0]], "call": list(ops[2]), "i.store": [ops[0]]}[op]
                for reg in outs:
                    producer[reg] = o
                    if op == "buffer.view" or op == "i.store":
                        buffer[reg] = str(ops[2]) if isinstance(ops[2], TensorType) else ""
        graphs.append(g)
    return graphs


_SHAPES = {"arg": "invhouse", "global": "cylinder", "const": "note", "dispatch": "box", "op": "ellipse",
           "result": "house"}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def module_dot(data: bytes) -> str:
    """The module's dataflow as a Graphviz digraph, one cluster per function."""
    m = ModuleFile(data)
    lines = [f"digraph {_quote(m.name)} {{", "  rankdir=TB;", '  node [fontname="monospace", fontsize=10];',
             '  edge [fontname="monospace", fontsize=8];']
    for i, g in enumerate(function_graphs(data)):
        lines.append(f"  subgraph cluster_{i} {{")
        lines.append(f"    label={_quote(g.name)};")
        for n in g.nodes:
            lines.append(f"    {_quote(n.id)} [label={_quote(n.label)}, shape={_SHAPES[n.kind]}];")
        for e in g.edges:
            lines.append(f"    {_quote(e.source)} -> {_quote(e.target)} [label={_quote(e.label)}];")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
