"""Kernels compiled in forked workers: the same image byte for byte as in-process, a failing kernel's
error raised in the parent, the worker count's switches and its error."""
import os
import threading

import numpy as np
import pytest

from conftest import Case, random_array
from kiln.compiler import parallel_compile
from kiln.compiler.compile import compile_plan
from kiln.compiler.timing import recording
from kiln.lax import prims

RNG = np.random.default_rng(5)
X = random_array(RNG, (33, 7), np.float32)


@pytest.fixture(autouse=True)
def _no_other_thread(monkeypatch):
    """Earlier tests of a whole run may leave a Python thread alive, which keeps compiling in-process;
    these tests count the workers as in a single-threaded process."""
    monkeypatch.setattr(parallel_compile, "_unsafe_threads", lambda: 0)


def _plans():
    unary = (prims.tanh, prims.exp, prims.log, prims.sqrt, prims.abs, prims.neg)
    cases = [Case(lambda x, p=p: [prims.mul.bind(p.bind(x), x)], [X]) for p in unary]
    cases.append(Case(lambda x: [prims.reduce_sum.bind(prims.exp.bind(x), axes=(1,))], [X]))
    return [c.plan for c in cases]


def test_forked_compile_gives_the_in_process_image(monkeypatch):
    monkeypatch.setenv("KILN_COMPILE_JOBS", "1")
    serial = compile_plan(_plans(), cache=None)
    monkeypatch.setenv("KILN_COMPILE_JOBS", "3")
    assert parallel_compile.worker_count(7) == 3
    with recording() as timings:
        forked = compile_plan(_plans(), cache=None)
    assert forked.image.code == serial.image.code and forked.workgroups == serial.workgroups
    kernel_stages = [d for n, _, d in timings.stages if n == "kernel"]
    assert len(kernel_stages) == 7 and all(d.endswith("(compiled)") for d in kernel_stages)


def test_a_kernel_failing_in_a_worker_fails_in_the_parent_with_its_error(monkeypatch):
    from kiln.compiler import compile as compile_mod

    real = compile_mod._emitter_for

    def broken(region, target, strategy=None):
        if any(e.primitive is prims.log for e in region.eqns):
            raise RuntimeError("the log kernel cannot be generated")
        return real(region, target, strategy)

    monkeypatch.setattr(compile_mod, "_emitter_for", broken)
    monkeypatch.setenv("KILN_COMPILE_JOBS", "2")
    with pytest.raises(RuntimeError, match="the log kernel cannot be generated"):
        compile_plan(_plans(), cache=None)


def test_worker_count_switches(monkeypatch):
    monkeypatch.setenv("KILN_COMPILE_JOBS", "4")
    assert parallel_compile.worker_count(100) == 4
    assert parallel_compile.worker_count(parallel_compile.MIN_KERNELS) == 4
    assert parallel_compile.worker_count(parallel_compile.MIN_KERNELS - 1) == 1  # too few to fork for
    monkeypatch.setenv("KILN_COMPILE_JOBS", "1")
    assert parallel_compile.worker_count(100) == 1
    monkeypatch.delenv("KILN_COMPILE_JOBS")
    assert 1 <= parallel_compile.worker_count(100) <= parallel_compile.MAX_WORKERS
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("KILN_COMPILE_JOBS", bad)
        with pytest.raises(ValueError, match="KILN_COMPILE_JOBS"):
            parallel_compile.worker_count(100)


def test_no_fork_while_another_thread_runs(monkeypatch):
    monkeypatch.setenv("KILN_COMPILE_JOBS", "4")
    assert parallel_compile.worker_count(100) == 4
    monkeypatch.undo()
    monkeypatch.setenv("KILN_COMPILE_JOBS", "4")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert parallel_compile.worker_count(100) == 1
    finally:
        stop.set()
        other.join()


def test_kilns_ctrl_c_watcher_does_not_stop_forking(monkeypatch):
    """kiln.jit's calls start the Ctrl-C watcher thread, which is fork-safe: a compile after them still forks."""
    import kiln
    import kiln.numpy as knp

    monkeypatch.undo()
    kiln.jit(lambda x: knp.tanh(x) @ x)(np.ones((4, 4), np.float32))
    assert "kiln-ctrl-c" in [t.name for t in threading.enumerate()]
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    assert parallel_compile._unsafe_threads() == len(others) - others.count("kiln-ctrl-c")


def test_run_forked_reports_failed_and_dead_tasks_as_none():
    def task(i):
        if i == 1:
            raise ValueError("no")
        if i == 3:
            os._exit(9)  # the child dies: its share comes back as None
        return i * i

    results = parallel_compile.run_forked(6, 2, task)
    # child 0 ran 0, 2, 4; child 1 ran 1 (failed), 3 (died before sending 5's result)
    assert results == [0, None, 4, None, 16, None]
