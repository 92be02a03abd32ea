"""Every compilation stage prints (kiln.compiler.stage_print, `kiln export --print STAGE`)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import kiln.nn
import kiln.numpy as knp
from kiln import Program, lax
from kiln.compiler.stage_print import STAGES, stage_text
from kiln.vm.reader import dump_text
from tests.kiln_tools import run_kiln_cli

X = np.zeros((64, 32), np.float32)
W = np.zeros((32, 16), np.float32)


class Staged(Program, export_name="staged"):
    _w = W

    def forward(self, x=Program.like(X)):
        return kiln.nn.softmax(self._dense(x, self._w), axis=-1)

    def looped(self, x=Program.like(X)):
        return lax.fori_loop(0, 3, lambda i, v: knp.tanh(v) + 1, x)

    @Program.kernel
    def _dense(x, w):
        return knp.tanh(x @ w)


@pytest.fixture(scope="module")
def result():
    return Staged._kiln_result_for("host")


def test_trace_shows_the_graphs_as_traced(result):
    text = stage_text(result, "trace")
    assert text.startswith("func forward: graph(")
    assert "kernel_call[name='dense']" in text  # before the passes inline it
    assert "func looped:" in text and "scan[" in text


def test_passes_show_the_optimized_graphs(result):
    text = stage_text(result, "passes")
    assert "kernel_call" not in text and "dot_general" in text and "tanh" in text
    assert text == "\n\n".join(f"func {n}: {g}" for n, g in result.optimized.items())


def test_fusion_shows_every_plan_control_flow_included(result):
    text = stage_text(result, "fusion")
    assert re.search(r"^func forward: \d+ dispatches$", text, re.M)
    # the loop body: the counter's increment and tanh(v) + 1 in one horizontal dispatch
    assert re.search(r"^func looped \(control flow graph 1\): 1 dispatches$", text, re.M)
    assert "dispatch dot_general_0" in text and "host " in text


def test_strategy_names_each_dispatchs_kernel_and_plan(result):
    text = stage_text(result, "strategy")
    lines = [ln.strip() for ln in text.splitlines() if "->" in ln]
    dispatches = sum(len(p.dispatches) for p in result.graph_plans.values())
    assert len(lines) == dispatches
    kernel_names = {k.name for k in result.spec.kernels}
    strategies = set()
    for ln in lines:
        m = re.fullmatch(r"(\w+) -> (\w+): (\w+)( \([\w ]+\))?, (\d+) items, work (\d+), (\d+) workgroups", ln)
        assert m, ln
        assert m.group(2) in kernel_names
        strategies.add(m.group(3))
    assert {"matmul", "row_fused", "horizontal"} <= strategies
    assert text.splitlines()[0].startswith("target ")


def test_schedule_shows_buffers_and_arena(result):
    text = stage_text(result, "schedule")
    assert text.startswith("schedule forward:") and "buffer" in text and "dispatch" in text


def test_llvm_and_asm_show_every_kernel(result):
    llvm, asm = stage_text(result, "llvm"), stage_text(result, "asm")
    for k in result.spec.kernels:
        assert f"; kernel {k.name}\n" in llvm and f"define " in llvm and f"@{k.name}(" in llvm
        assert re.search(rf"^{k.name}:$", asm, re.M), k.name


def test_module_is_kiln_dumps_text(result):
    text = stage_text(result, "module")
    assert text == dump_text(result.module_bytes).rstrip("\n")
    assert text.startswith("module 'staged'")


def test_every_stage_is_printed_and_an_unknown_one_refused(result):
    assert STAGES == ("trace", "passes", "fusion", "strategy", "schedule", "llvm", "asm", "module")
    for stage in STAGES:
        if stage not in ("llvm", "asm"):  # those two generate every kernel again: tested above
            assert stage_text(result, stage).strip()
    with pytest.raises(ValueError, match="unknown compilation stage 'kernels': expected one of trace, passes"):
        stage_text(result, "kernels")


def test_kiln_export_print(tmp_path):
    out = tmp_path / "linear.vmfb"
    proc = run_kiln_cli("export", "examples/linear.py:Linear", "--target", "host", "--print", "strategy",
                        "--print", "module", "-o", str(out))
    assert proc.stdout.index("=== strategy ===") < proc.stdout.index("=== module ===")
    assert re.search(r"dot_general_\d+ -> kiln_dot_general_\d+: matmul", proc.stdout)
    assert "module 'linear'" in proc.stdout and out.exists() and f"wrote {out}" in proc.stdout
    only = run_kiln_cli("export", "examples/linear.py:Linear", "--target", "host", "--print", "fusion")
    assert "=== fusion ===" in only.stdout and "wrote" not in only.stdout
    missing = run_kiln_cli("export", "examples/linear.py:Linear", check=False)
    assert missing.returncode == 2 and "Missing option '-o' / '--output' (or --print STAGE" in missing.stderr
    bad = run_kiln_cli("export", "examples/linear.py:Linear", "--print", "kernels", check=False)
    assert bad.returncode == 2 and "'kernels' is not one of 'trace'" in bad.stderr
