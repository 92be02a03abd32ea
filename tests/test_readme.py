"""README.md's code blocks run as written, in order, in one temporary folder holding the repository's
examples/: each ```python block as its own script (so each must be complete), each ```sh block's commands
through bash with `kiln`, `kiln-run` and `python` on PATH. A block that is deliberately not run carries
`<!-- not run: REASON -->` on the line before it; a shell block of other commands (make, cmake) must."""
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

from kiln_tools import ROOT, kiln_run_binary

README = os.path.join(ROOT, "README.md")
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*not run:(.*?)-->$")
SHELL_LANGUAGES = ("sh", "bash", "shell")
RUN_COMMANDS = ("kiln", "kiln-run", "python")


@dataclass
class Block:
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    not_run: str | None  # the marker's reason


def shell_commands(code: str) -> list[str]:
    """The block's commands: backslash continuations joined, blank and comment lines dropped."""
    commands, pending = [], ""
    for line in code.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def runnable(block: Block) -> bool:
    if block.language == "python":
        return True
    return block.language in SHELL_LANGUAGES and all(c.split()[0] in RUN_COMMANDS for c in shell_commands(block.code))


def readme_blocks(text: str, where: str = "README.md") -> list[Block]:
    """Every fenced block with its marker; ValueError for a marker without a reason or without a block, an
    unclosed fence, or a block that is neither run nor marked."""
    blocks, lines = [], text.splitlines()
    previous, i = "", 0
    while i < len(lines):
        line = lines[i].strip()
        fence = FENCE.match(line)
        if fence is None:
            if line.startswith("<!--") and "not run" in line:
                marker = MARKER.match(line)
                if marker is None or not marker.group(1).strip():
                    raise ValueError(f"{where}:{i + 1}: a not-run marker must read <!-- not run: REASON -->")
                following = next((s.strip() for s in lines[i + 1:] if s.strip()), "")
                if not FENCE.match(following):
                    raise ValueError(f"{where}:{i + 1}: a not-run marker must come right before a code block")
            if line:
                previous = line
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        if i == len(lines):
            raise ValueError(f"{where}:{start + 1}: the code block is never closed")
        marker = MARKER.match(previous)
        block = Block(start + 1, fence.group(1), "\n".join(lines[start + 1:i]) + "\n",
                      marker.group(1).strip() if marker else None)
        if block.not_run is None and not runnable(block):
            raise ValueError(f"{where}:{block.line}: a ```{block.language} block that is not run "
                             f"(only python, and shell blocks of {', '.join(RUN_COMMANDS)} commands, run) "
                             "needs <!-- not run: REASON --> on the line before it")
        blocks.append(block)
        previous = ""
        i += 1
    return blocks


def tool_path(folder) -> str:
    """A folder of `kiln`, `kiln-run` and `python` as this test run has them, for PATH."""
    os.makedirs(folder, exist_ok=True)
    tools = {"kiln": f'exec "{sys.executable}" -m kiln.cli.main "$@"', "kiln-run": f'exec "{kiln_run_binary()}" "$@"',
             "python": f'exec "{sys.executable}" "$@"'}
    for name, body in tools.items():
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\n{body}\n")
        os.chmod(path, 0o755)
    return str(folder)


def run_block(block: Block, cwd, env) -> list[str]:
    """Runs one block; returns what failed (empty when it ran)."""
    if block.language == "python":
        script = os.path.join(cwd, f"readme_line{block.line}.py")
        with open(script, "w") as f:
            f.write(block.code)
        runs = [[sys.executable, script]]
    else:
        runs = [["bash", "-c", command] for command in shell_commands(block.code)]
    failures = []
    for argv in runs:
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            failures.append(f"README.md:{block.line} ({argv[-1]}) exited {proc.returncode}:\n"
                            f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
            break
    return failures


def test_readme_blocks_run_in_order(tmp_path):
    with open(README) as f:
        blocks = readme_blocks(f.read())
    run = [b for b in blocks if b.not_run is None]
    assert sum(b.language == "python" for b in run) >= 4 and any(b.language == "sh" for b in run)
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(os.path.join(ROOT, "examples"), work / "examples")
    env = dict(os.environ, PATH=tool_path(tmp_path / "bin") + os.pathsep + os.environ.get("PATH", ""))
    for block in run:
        failures = run_block(block, work, env)
        assert not failures, failures[0]
    # what the blocks say they write is there
    for name in ("linear.vmfb", "regression.vmfb", "state.npz", "y.npy"):
        assert (work / name).is_file(), name


def test_readme_training_resumes_in_kiln_run(tmp_path):
    """The training section's claim: kiln-run continues from the state Python saved (its step count goes on)."""
    import numpy as np

    with open(README) as f:
        blocks = readme_blocks(f.read())
    section = open(README).read().split("## Training and checkpoints")[1].split("\n## ")[0]
    training = [b for b in blocks if b.not_run is None and b.code in section]
    assert [b.language for b in training] == ["python", "sh"]
    env = dict(os.environ, PATH=tool_path(tmp_path / "bin") + os.pathsep + os.environ.get("PATH", ""))
    assert not run_block(training[0], tmp_path, env)
    saved = dict(np.load(tmp_path / "state.npz"))
    assert int(saved["_step"]) == 100
    assert not run_block(training[1], tmp_path, env)
    resumed = dict(np.load(tmp_path / "state.npz"))
    assert int(resumed["_step"]) == 101 and sorted(resumed) == sorted(saved)
    np.testing.assert_allclose(resumed["_params.w"], [1.0, -2.0, 0.5], atol=2e-2)  # it learned the line


def test_not_run_markers():
    good = "<!-- not run: needs a GPU driver -->\n\n```sh\nmake gpu\n```\n\n```python\nprint(1)\n```\n"
    blocks = readme_blocks(good)
    assert [(b.line, b.language, b.not_run) for b in blocks] == [(3, "sh", "needs a GPU driver"), (7, "python", None)]
    cases = [
        ("<!-- not run: -->\n```sh\nmake\n```\n", "README.md:1: a not-run marker must read <!-- not run: REASON -->"),
        ("<!-- not run -->\n```sh\nmake\n```\n", "README.md:1: a not-run marker must read"),
        ("<!-- not run: old -->\n\ntext\n```python\nx = 1\n```\n",
         "README.md:1: a not-run marker must come right before a code block"),
        ("text\n```python\nx = 1\n", "README.md:2: the code block is never closed"),
        ("```sh\nmake demo\n```\n", "README.md:1: a ```sh block that is not run"),
        ("```sh\nkiln dump m.vmfb\ncmake -S . -B b\n```\n", "README.md:1: a ```sh block that is not run"),
        ("```\nplain text\n```\n", "README.md:1: a ``` block that is not run"),
    ]
    for text, message in cases:
        with pytest.raises(ValueError) as e:
            readme_blocks(text)
        assert str(e.value).startswith(message), (text, str(e.value))
    # a marker applies to the next block only
    blocks = readme_blocks("<!-- not run: a sketch -->\n```python\n...\n```\n```python\nx = 1\n```\n")
    assert [b.not_run for b in blocks] == ["a sketch", None]


def test_shell_commands():
    code = "# comment\nkiln-run --module=m.vmfb \\\n         --list   # trailing\n\nkiln dump m.vmfb\n"
    assert shell_commands(code) == ["kiln-run --module=m.vmfb           --list   # trailing", "kiln dump m.vmfb"]


def test_a_failing_block_is_reported(tmp_path):
    env = dict(os.environ, PATH=tool_path(tmp_path / "bin") + os.pathsep + os.environ.get("PATH", ""))
    failures = run_block(Block(12, "python", "import numpy\nraise SystemExit('broken example')\n", None), tmp_path, env)
    assert len(failures) == 1 and failures[0].startswith("README.md:12 (") and "broken example" in failures[0]
    failures = run_block(Block(30, "sh", "kiln-run --module=missing.vmfb --list\n", None), tmp_path, env)
    assert len(failures) == 1 and "README.md:30 (kiln-run --module=missing.vmfb --list) exited 1" in failures[0]
    assert "missing.vmfb" in failures[0]
