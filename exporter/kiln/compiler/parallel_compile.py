"""Compiling several kernels at once in forked worker processes.

llvmlite runs every LLVM call under one process-wide lock, so threads cannot share LLVM's work; forked
children can. A child inherits the parent's memory (the regions, the targets, any test hook), takes the
kernels one at a time from a queue shared by all children (the caller's order: the longest first) and
sends back each object and workgroup count as soon as it is compiled. A kernel whose child failed or
died is reported as None, so the caller compiles it again in-process and any error surfaces there with
its own message.

Workers: `$KILN_COMPILE_JOBS` (a positive integer; 1 compiles in-process), else one per available core,
at most MAX_WORKERS. Compiling stays in-process where fork is missing or unsafe (another Python thread
is running, other than kiln's own Ctrl-C watcher: it might hold a lock the child needs), and for fewer than MIN_KERNELS kernels, where a fork
costs more than it saves.
"""
from __future__ import annotations

import os
import pickle
import struct
import sys
import threading
from typing import Callable

MAX_WORKERS = 8
MIN_KERNELS = 4
FORK_SAFE_THREADS = frozenset({"kiln-ctrl-c"})
"""Threads known to hold nothing a forked compile needs (kiln.vm's Ctrl-C watcher polls a pipe and is
reset in a child by its at-fork hook), so they do not keep compiling in-process."""
FORK_SAFE_THREAD_PREFIXES = ("kiln-inprocess-dispatch_",)
"""Thread names starting so are as safe: kiln.compiler.inprocess's dispatch pool (the compiler tests' way to
run kernels in the test process), whose threads live on idle, waiting on the pool's queue, once a dispatch
has used them, and run kernels only while the thread that called dispatch waits for them (so a compile
cannot start then, but from another thread, which counts). Counted as unsafe, they kept every later
compile of a test run in-process, on one core."""


def _unsafe_threads() -> int:
    """Live Python threads besides the calling one that a fork could catch holding a lock."""
    me = threading.current_thread()
    return sum(1 for t in threading.enumerate()
               if t is not me and t.name not in FORK_SAFE_THREADS and not t.name.startswith(FORK_SAFE_THREAD_PREFIXES))


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


def run_forked(count: int, workers: int, task: Callable[[int], object], order=None) -> list:
    """[task(i) for i in range(count)] in `workers` forked children; None where a task raised or its
    child died while running it. task's results must pickle.

    The children take the indices one at a time from a shared queue (a pipe that hands them out in
    `order`, default 0, 1, ...: put the longest tasks first), so a child that drew short tasks takes
    more of them, and each sends every result back as soon as it is done: a child that dies loses only
    the task it was running, and the others take the rest of the queue."""
    order = list(range(count)) if order is None else list(order)
    if sorted(order) != list(range(count)):
        raise ValueError(f"run_forked: order must list each of the {count} tasks once")
    queue_read, queue_write = os.pipe()
    os.set_blocking(queue_write, False)
    pending = memoryview(b"".join(_INDEX.pack(i) for i in order))
    pending = pending[_feed(queue_write, pending):]  # what the pipe holds now; the rest as the children read
    children = []
    try:
        for _ in range(max(1, min(workers, count))):
            read_fd, write_fd = os.pipe()
            try:
                pid = os.fork()
            except OSError:  # no more processes: the children there are take the whole queue
                os.close(read_fd)
                os.close(write_fd)
                break
            if pid == 0:  # the child: never returns into the caller's code
                code = 0
                try:
                    os.close(read_fd)
                    os.close(queue_write)
                    for _, other in children:
                        os.close(other)
                    _work(queue_read, write_fd, task)
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            os.close(write_fd)
            children.append((pid, read_fd))
    finally:
        os.close(queue_read)
    results: list = [None] * count
    if not children:  # every task comes back as None: the caller runs them in-process
        os.close(queue_write)
        return results
    _collect(children, queue_write, pending, results)
    return results


_INDEX = struct.Struct("<I")
_FRAME = struct.Struct("<IQ")  # task index, length of the pickled result that follows
_ATOMIC = 4096 // _INDEX.size * _INDEX.size
"""Bytes of the queue written at once: at most PIPE_BUF, so a write is whole or nothing and a child's
read of one index never sees part of one."""


def _feed(fd: int, pending: memoryview) -> int:
    """Writes what the non-blocking queue pipe takes of `pending`, in whole indices; returns the bytes
    written."""
    done = 0
    while done < len(pending):
        try:
            done += os.write(fd, pending[done:done + _ATOMIC])
        except BlockingIOError:
            break
    return done


def _work(queue_fd: int, out_fd: int, task) -> None:
    """A child's loop: take the next index from the queue (end of file: none left), run the task, send
    (index, pickled result); a task that raises sends nothing (None: the parent runs it again)."""
    while True:
        data = os.read(queue_fd, _INDEX.size)
        if len(data) < _INDEX.size:
            return
        (i,) = _INDEX.unpack(data)
        try:
            body = pickle.dumps(task(i), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            continue
        frame = memoryview(_FRAME.pack(i, len(body)) + body)
        while frame:
            frame = frame[os.write(out_fd, frame):]


def _collect(children: list, queue_fd: int, pending: memoryview, results: list) -> None:
    """Feeds the rest of the queue and reads every child's frames as they come (so no child waits on a
    full pipe) into results, then reaps the children. A frame cut short by a child's death is dropped."""
    import selectors

    buffers = {fd: bytearray() for _, fd in children}
    with selectors.DefaultSelector() as selector:
        for pid, fd in children:
            selector.register(fd, selectors.EVENT_READ, pid)
        if pending:
            selector.register(queue_fd, selectors.EVENT_WRITE)
        else:
            os.close(queue_fd)  # the children see the end of the queue once they have read it all
        while buffers:
            for key, _ in selector.select():
                fd = key.fd
                if fd == queue_fd:
                    try:
                        pending = pending[_feed(fd, pending):]
                    except BrokenPipeError:  # every child is gone: their tasks come back as None
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(fd)
                        os.close(fd)
                    continue
                chunk = os.read(fd, 1 << 20)
                if chunk:
                    buffers[fd] += chunk
                    _unframe(buffers[fd], results)
                    continue
                selector.unregister(fd)
                os.close(fd)
                del buffers[fd]
                os.waitpid(key.data, 0)
        if pending:  # no child left to read it
            selector.unregister(queue_fd)
            os.close(queue_fd)


def _unframe(buf: bytearray, results: list) -> None:
    """Moves every whole frame at the start of buf into results."""
    at = 0
    while len(buf) - at >= _FRAME.size:
        i, size = _FRAME.unpack_from(buf, at)
        end = at + _FRAME.size + size
        if len(buf) < end:
            break
        try:
            results[i] = pickle.loads(buf[at + _FRAME.size:end])
        except Exception:  # compiled again in-process
            results[i] = None
        at = end
    del buf[:at]
