"""Compiling several kernels at once in forked worker processes.

llvmlite runs every LLVM call under one process-wide lock, so threads cannot share LLVM's work; forked
children can. A child inherits the parent's memory (the regions, the target, any test hook), compiles
its share of the kernels and sends back each object and workgroup count. A kernel whose child failed
or died is reported as None, so the caller compiles it again in-process and any error surfaces there
with its own message.

Workers: `$KILN_COMPILE_JOBS` (a positive integer; 1 compiles in-process), else one per available core,
at most MAX_WORKERS. Compiling stays in-process where fork is missing or unsafe (another Python thread
is running, other than kiln's own Ctrl-C watcher: it might hold a lock the child needs), and for fewer than MIN_KERNELS kernels, where a fork
costs more than it saves.
"""
from __future__ import annotations

import os
import pickle
import sys
import threading
from typing import Callable

MAX_WORKERS = 8
MIN_KERNELS = 4
FORK_SAFE_THREADS = frozenset({"kiln-ctrl-c"})
"""Threads known to hold nothing a forked compile needs (kiln.vm's Ctrl-C watcher polls a pipe and is
reset in a child by its at-fork hook), so they do not keep compiling in-process."""


def _unsafe_threads() -> int:
    """Live Python threads besides the calling one that a fork could catch holding a lock."""
    me = threading.current_thread()
    return sum(1 for t in threading.enumerate() if t is not me and t.name not in FORK_SAFE_THREADS)


def worker_count(kernels: int) -> int:
    """How many processes should compile `kernels` kernels (1: in-process)."""
    text = os.environ.get("KILN_COMPILE_JOBS", "").strip()
    if text:
        try:
            wanted = int(text)
        except ValueError:
            wanted = 0
        if wanted < 1:
            raise ValueError(f"KILN_COMPILE_JOBS={text!r} must be a positive integer (1: compile in-process)")
    else:
        wanted = min(MAX_WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                     else os.cpu_count() or 1)
    if (kernels < MIN_KERNELS or not hasattr(os, "fork") or sys.platform != "linux"
            or _unsafe_threads()):
        return 1
    return max(1, min(wanted, kernels))


def run_forked(count: int, workers: int, task: Callable[[int], object]) -> list:
    """[task(i) for i in range(count)], the indices split round robin over `workers` forked children;
    None where a task raised or its child died. task's results must pickle."""
    children = []
    for w in range(workers):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code
            code = 0
            try:
                os.close(read_fd)
                done = []
                for i in range(w, count, workers):
                    try:
                        done.append((i, task(i)))
                    except BaseException:  # the parent compiles it again and reports the error
                        pass
                with os.fdopen(write_fd, "wb") as out:
                    out.write(pickle.dumps(done))
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(write_fd)
        children.append((pid, read_fd))
    results: list = [None] * count
    for pid, read_fd in children:  # a child blocked on a full pipe waits for its turn, no deadlock
        with os.fdopen(read_fd, "rb") as source:
            data = source.read()
        os.waitpid(pid, 0)
        try:
            for i, result in pickle.loads(data):
                results[i] = result
        except Exception:  # a child that died mid-write: its kernels are compiled again in-process
            pass
    return results
