"""`kiln dump --html`: one self-contained HTML page picturing a module (no script, no network fetch).

For each exported or internal function: its dataflow (kiln.vm.graph) drawn as inline SVG, nodes in
layers by the longest path from the inputs (arguments, globals, constants) with kernels as boxes and
buffers as labelled edges (type and planned memory), and its bytecode beside it; then the kernels with
their code sizes, the globals, and the module's provenance."""
from __future__ import annotations

import html

from kiln.vm.disassembler import disassemble
from kiln.vm.graph import FunctionGraph, function_graphs
from kiln.vm.reader import ModuleFile

_WIDTH, _HEIGHT, _GAP_X, _GAP_Y = 210, 34, 30, 56
_FILL = {"arg": "#dbeafe", "global": "#fef3c7", "const": "#f3f4f6", "dispatch": "#dcfce7", "op": "#fae8ff",
         "result": "#fee2e2"}


def _layers(g: FunctionGraph) -> dict[str, int]:
    """Each node's layer: one below the deepest node feeding it that was made before it (edges into
    earlier nodes, a global stored after it was loaded, do not push it down)."""
    order = {n.id: i for i, n in enumerate(g.nodes)}
    layer = {n.id: 0 for n in g.nodes}
    for n in g.nodes:
        for e in g.edges:
            if e.target == n.id and order[e.source] < order[n.id]:
                layer[n.id] = max(layer[n.id], layer[e.source] + 1)
    return layer


def _svg(g: FunctionGraph) -> str:
    layer = _layers(g)
    rows: dict[int, list[str]] = {}
    for n in g.nodes:
        rows.setdefault(layer[n.id], []).append(n.id)
    pos = {}
    for y, ids in rows.items():
        for x, nid in enumerate(ids):
            pos[nid] = (10 + x * (_WIDTH + _GAP_X), 10 + y * (_HEIGHT + _GAP_Y))
    width = 20 + max(len(ids) for ids in rows.values()) * (_WIDTH + _GAP_X) if rows else 100
    height = 20 + (max(rows) + 1) * (_HEIGHT + _GAP_Y) if rows else 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="dataflow" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>']
    for e in g.edges:
        (x1, y1), (x2, y2) = pos[e.source], pos[e.target]
        sx, sy, tx, ty = x1 + _WIDTH / 2, y1 + _HEIGHT, x2 + _WIDTH / 2, y2
        if y2 <= y1:  # an edge up (a global stored after a later load): from the side
            sx, sy, tx, ty = x1 + _WIDTH, y1 + _HEIGHT / 2, x2 + _WIDTH, y2 + _HEIGHT / 2
        out.append(f'<g class="edge"><line x1="{sx:.0f}" y1="{sy:.0f}" x2="{tx:.0f}" y2="{ty:.0f}" stroke="#555" '
                   f'marker-end="url(#arrow)"/><text x="{(sx + tx) / 2 + 4:.0f}" y="{(sy + ty) / 2:.0f}" '
                   f'font-size="9" fill="#333">{html.escape(e.label)}</text></g>')
    for n in g.nodes:
        x, y = pos[n.id]
        rx = 12 if n.kind in ("op", "arg", "result") else 3
        out.append(f'<g class="node {n.kind}"><rect x="{x}" y="{y}" width="{_WIDTH}" height="{_HEIGHT}" rx="{rx}" '
                   f'fill="{_FILL[n.kind]}" stroke="#333"/><text x="{x + 8}" y="{y + 21}" font-size="11" '
                   f'font-family="monospace">{html.escape(n.label[:32])}</text><title>{html.escape(n.label)}</title></g>')
    out.append("</svg>")
    return "\n".join(out)


def _kernel_sizes(m: ModuleFile) -> list[int]:
    """Each kernel's code bytes: from its entry to the next entry point of its image, or the text's end."""
    sizes = []
    for k in m.kernels:
        image = m.kernel_images[k.image]
        later = [e for e in image.entry_points if e > k.entry_offset]
        sizes.append((min(later) if later else image.text_size) - k.entry_offset)
    return sizes


def module_html(data: bytes) -> str:
    """The page: per function its dataflow picture and bytecode, then kernels, globals, provenance."""
    m = ModuleFile(data)
    names = m.names()
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>kiln module {html.escape(m.name)}</title>",
             "<style>body{font-family:sans-serif;margin:1.5em}.function{display:flex;gap:1.5em;align-items:flex-start;"
             "margin-bottom:2em}.picture{flex:1 1 auto;min-width:0;max-height:48em;overflow:auto;border:1px solid #ddd}"
             ".picture svg{display:block}pre{flex:0 0 auto;font-size:12px;background:#f8f8f8;padding:.8em;"
             "max-height:48em;overflow:auto;margin:0}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px}</style>",
             "</head><body>",
             f"<h1>module {html.escape(m.name)}</h1>",
             f"<p>format {m.version[0]}.{m.version[1]}, {m.size} bytes, {len(m.functions)} functions, "
             f"{len(m.kernels)} kernels, {len(m.globals)} globals</p>"]
    for f, words, g in zip(m.functions, m.code_words, function_graphs(data)):
        signature = f"{f.name}({', '.join(f'{a.name}: {a.type}' for a in f.args)}) -> " \
                    f"({', '.join(str(r.type) for r in f.results)})"
        parts.append(f'<h2 class="function-name">{html.escape(signature)}</h2>')
        parts.append(f"<p>transient memory (planned arena): {f.transient_size} bytes; registers: "
                     f"{f.ref_registers} ref, {f.i64_registers} i64</p>")
        parts.append('<div class="function">')
        parts.append(f'<div class="picture">{_svg(g)}</div>')
        parts.append(f'<pre class="bytecode">{html.escape(disassemble(words, names, indent=""))}</pre>')
        parts.append("</div>")
    parts.append("<h2>kernels</h2><table><tr><th>kernel</th><th>code bytes</th><th>bindings</th>"
                 "<th>max workgroups</th><th>flops per dispatch</th></tr>")
    for k, size in zip(m.kernels, _kernel_sizes(m)):
        binds = ", ".join(f"{'w' if b.writable else 'r'}{b.byte_size}" for b in k.bindings)
        parts.append(f'<tr class="kernel"><td>{html.escape(k.name)}</td><td>{size}</td><td>{binds}</td>'
                     f"<td>{k.max_workgroups}</td><td>{k.flops or '-'}</td></tr>")
    parts.append("</table><h2>globals</h2><table><tr><th>global</th><th>type</th><th></th></tr>")
    for name, t, mutable, _ in m.globals:
        parts.append(f"<tr><td>{html.escape(name)}</td><td>{t}</td><td>{'mutable' if mutable else 'immutable'}</td></tr>")
    parts.append("</table>")
    if m.provenance:
        parts.append("<h2>provenance</h2><table>")
        parts.extend(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in m.provenance.items())
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
