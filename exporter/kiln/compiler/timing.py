"""Wall-clock time of each compilation stage, for `kiln --verbose export`.

Stages call `stage(name, detail)` around their work; nothing is kept unless a caller has opened
`recording()`, so the stages cost a context-variable read otherwise.
"""
from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Timings:
    """Stages in the order they ended: (name, seconds, detail)."""

    stages: list[tuple[str, float, str]] = field(default_factory=list)
    # called as each stage ends: (name, seconds, detail), e.g. a progress line on a terminal
    listener: Callable[[str, float, str], None] | None = None

    def total(self, name: str) -> float:
        return sum(s for n, s, _ in self.stages if n == name)

    def format(self) -> str:
        """One line per stage in order; the kernels as one line (count, cache hits) and one line each."""
        lines = []
        kernels = [(s, d) for n, s, d in self.stages if n == "kernel"]
        for name, seconds, detail in self.stages:
            if name != "kernel":
                lines.append(f"  {name:<10} {seconds * 1000:9.1f} ms  {detail}".rstrip())
            elif (seconds, detail) == kernels[0]:
                hits = sum(1 for _, d in kernels if d.endswith("(cached)"))
                total = sum(s for s, _ in kernels)
                lines.append(f"  {'kernels':<10} {total * 1000:9.1f} ms  {len(kernels)} kernels, {hits} from the cache")
                lines.extend(f"    {s * 1000:9.1f} ms  {d}" for s, d in kernels)
        return "\n".join(lines)


_current: contextvars.ContextVar[Timings | None] = contextvars.ContextVar("kiln_compile_timings", default=None)


@contextlib.contextmanager
def recording(listener: Callable[[str, float, str], None] | None = None):
    """Collects the stages run inside the block into the Timings it yields (telling `listener` of each
    as it ends)."""
    timings = Timings(listener=listener)
    token = _current.set(timings)
    try:
        yield timings
    finally:
        _current.reset(token)


class _Stage:
    __slots__ = ("name", "detail", "start")

    def __init__(self, name: str, detail: str):
        self.name, self.detail = name, detail

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        if self.name is not None:  # a stage whose name was set to None inside it is not recorded
            record_stage(self.name, time.perf_counter() - self.start, self.detail)
        return False


def record_stage(name: str, seconds: float, detail: str = "") -> None:
    """Records a stage timed elsewhere (e.g. a kernel compiled in a worker process)."""
    timings = _current.get()
    if timings is not None:
        timings.stages.append((name, seconds, detail))
        if timings.listener is not None:
            timings.listener(name, seconds, detail)


def stage(name: str, detail: str = "") -> _Stage:
    """Times the block as stage `name`; the detail may be changed inside it (stage.detail = ...), and a
    name set to None inside it drops the record."""
    return _Stage(name, detail)
