"""kiln dump --dot: a module's dataflow read from its bytecode (kiln.vm.graph), for Graphviz."""
import re
import shutil
import subprocess

import numpy as np
import pytest

import kiln.numpy as knp
from kiln import Program
from kiln.vm.graph import function_graphs, module_dot
from kiln.vm.reader import ModuleFile
from kiln_tools import run_kiln_cli


def _module():
    x = np.ones((8, 16), np.float32)

    class Flow(Program, export_name="flow"):
        _scale = Program.export_global(np.float32(2.0))
        _count = Program.export_global(np.int32(0))

        def run(self, x=Program.like(x)):
            h = knp.tanh(x @ x.T) * self._scale
            self._count = self._count + 1
            return h, knp.sum(knp.cumsum(h, axis=1), axis=0)  # the cumsum: a transient in the arena

    return Program.get_compiled_artifact(Flow).bytes


def test_every_dispatch_reads_what_made_its_inputs():
    data = _module()
    (g,) = function_graphs(data)
    kinds = {n.id: n.kind for n in g.nodes}
    dispatches = [n for n in g.nodes if n.kind == "dispatch"]
    m = ModuleFile(data)
    assert len(dispatches) == sum(1 for i in m.functions[0].code if getattr(i, "op", "") == "dispatch")
    assert {n.label for n in g.nodes if n.kind == "arg"} == {"x: 8x16xf32"}
    assert {n.label for n in g.nodes if n.kind == "result"} == {"result 0: 8x8xf32", "result 1: 8xf32"}
    assert {n.label for n in g.nodes if n.kind == "global"} == {"global _scale", "global _count"}
    # the argument feeds a kernel; every result and the stored global come from kernels
    assert any(kinds[e.source] == "arg" and kinds[e.target] == "dispatch" for e in g.edges)
    for e in g.edges:
        if kinds[e.target] == "result":
            assert kinds[e.source] == "dispatch"
    stored = [e for e in g.edges if e.target.startswith("g") and kinds[e.source] == "dispatch"]
    assert stored and all(e.label == "i32" for e in stored)  # the counter, a 0-d int32
    # each node is reachable from an input: no dispatch floats free
    reached = {n.id for n in g.nodes if n.kind in ("arg", "global", "const")}
    for _ in range(len(g.nodes)):
        reached |= {e.target for e in g.edges if e.source in reached}
    assert {n.id for n in dispatches} <= reached


def test_dot_output_is_a_graphviz_digraph(tmp_path):
    data = _module()
    dot = module_dot(data)
    assert dot.startswith('digraph "flow" {') and dot.rstrip().endswith("}")
    assert 'subgraph cluster_0 {' in dot and 'label="run";' in dot
    assert re.search(r'"f0_d\d+" \[label="kiln_\w+ x\d+", shape=box\];', dot)
    path = tmp_path / "m.vmfb"
    path.write_bytes(data)
    assert run_kiln_cli("dump", "--dot", str(path)).stdout == dot
    if shutil.which("dot"):  # Graphviz, where installed, accepts it
        subprocess.run(["dot", "-Tsvg", "-o", str(tmp_path / "m.svg")], input=dot, text=True, check=True)


def test_dot_of_a_damaged_module_is_an_error(tmp_path):
    data = bytearray(_module())
    data[100] ^= 0xFF
    path = tmp_path / "bad.vmfb"
    path.write_bytes(bytes(data))
    proc = run_kiln_cli("dump", "--dot", str(path), check=False)
    assert proc.returncode != 0 and proc.stderr.startswith("kiln: error:") and "checksum" in proc.stderr


class _Page:
    """The elements of an HTML page that the test reads (parsed with the standard library)."""

    def __init__(self, text):
        from html.parser import HTMLParser

        self.tags, self.classes, self.text = [], [], []
        page = self

        class Parser(HTMLParser):
            def handle_starttag(self, tag, attrs):
                page.tags.append(tag)
                page.classes.extend(dict(attrs).get("class", "").split())

            def handle_data(self, data):
                page.text.append(data)

        Parser().feed(text)
        self.text = "".join(self.text)


def test_html_page_pictures_every_function_and_kernel(tmp_path):
    data = _module()
    path = tmp_path / "m.vmfb"
    path.write_bytes(data)
    out = tmp_path / "m.html"
    assert run_kiln_cli("dump", "--html", str(out), str(path)).stdout == f"wrote {out}\n"
    text = out.read_text()
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    page = _Page(text)
    (g,) = function_graphs(data)
    m = ModuleFile(data)
    assert page.tags.count("svg") == len(m.functions) and page.classes.count("bytecode") == len(m.functions)
    assert page.classes.count("node") == len(g.nodes) and page.classes.count("edge") == len(g.edges)
    assert page.classes.count("dispatch") == sum(n.kind == "dispatch" for n in g.nodes)
    assert page.classes.count("kernel") == len(m.kernels)
    for k in m.kernels:
        assert k.name in page.text
        # the declared flops per dispatch ('-' for the global counter's integer kernel)
        assert re.search(rf"<td>{re.escape(k.name)}</td>.*?<td>{k.flops or '-'}</td></tr>", text)
    assert any(k.flops for k in m.kernels)
    assert "run(x: 8x16xf32) -> (8x8xf32, 8xf32)" in page.text and "@arena+" in page.text
    assert f"producer" in page.text and "transient memory (planned arena)" in page.text


def test_html_page_renders_in_a_browser(tmp_path):
    """Headless Chromium loads the page and lays the picture out (where Chromium is installed)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from kiln.vm.html import module_html

    out = tmp_path / "m.html"
    out.write_text(module_html(_module()))
    dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", out.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = _Page(dom.stdout)
    assert page.tags.count("svg") == 1 and page.classes.count("dispatch") >= 3 and "kiln_" in page.text
    shot = tmp_path / "m.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1400,900", out.as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
