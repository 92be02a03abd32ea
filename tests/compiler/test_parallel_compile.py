"""Kernels compiled in forked workers: the same image byte for byte as in-process, a failing kernel's
error raised in the parent, the worker count's switches and its error."""
import os
import threading
import time

import numpy as np
import pytest

from conftest import Case, random_array
from kiln.compiler import parallel_compile
from kiln.compiler.compile import compile_plan, compile_plans
from kiln.compiler.target import Target
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
    pool = [n for n in others if n.startswith(parallel_compile.FORK_SAFE_THREAD_PREFIXES)]  # earlier dispatches'
    assert parallel_compile._unsafe_threads() == len(others) - others.count("kiln-ctrl-c") - len(pool)


def test_the_in_process_dispatch_pool_does_not_stop_forking(monkeypatch):
    """kiln.compiler.inprocess's dispatch threads (the compiler tests run kernels with them) stay alive, idle,
    after a dispatch of several workgroups: they do not count, so the rest of a test run compiles forked;
    another thread still does."""
    from kiln.compiler.inprocess import aligned_copy, aligned_empty, dispatch

    monkeypatch.undo()
    monkeypatch.setenv("KILN_COMPILE_JOBS", "2")
    calls = []
    kernel = lambda address, group: calls.append(group) or 0  # noqa: E731
    dispatch(kernel, [aligned_copy(X), aligned_empty((4,), np.float32)], 8)
    assert sorted(calls) == list(range(8))
    pool = [t.name for t in threading.enumerate() if t.name.startswith("kiln-inprocess-dispatch_")]
    assert pool, [t.name for t in threading.enumerate()]
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    assert parallel_compile._unsafe_threads() == len(others) - len(pool) - others.count("kiln-ctrl-c")
    if parallel_compile._unsafe_threads() == 0:
        assert parallel_compile.worker_count(100) == 2
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert parallel_compile.worker_count(100) == 1
    finally:
        stop.set()
        other.join()


def test_run_forked_reports_failed_and_dead_tasks_as_none():
    def task(i):
        if i == 1:
            raise ValueError("no")
        if i == 3:
            os._exit(9)  # the child dies: its share comes back as None
        return i * i

    results = parallel_compile.run_forked(6, 2, task)
    # 1 failed and 3's child died running it; every other result was sent as it was done, or taken from
    # the queue by the child that lived
    assert results == [0, None, 4, None, 16, 25]
    assert parallel_compile.run_forked(6, 2, task, order=[5, 4, 3, 2, 1, 0]) == [0, None, 4, None, 16, 25]
    with pytest.raises(ValueError, match="order must list each of the 3 tasks once"):
        parallel_compile.run_forked(3, 2, task, order=[0, 0, 1])


def test_run_forked_children_share_one_queue(tmp_path):
    """A child busy with a long task leaves the rest of the queue to the others (no fixed share): task 0
    waits until every other task is done, which only a shared queue lets happen."""
    count = 7

    def task(i):
        if i:
            (tmp_path / str(i)).touch()
            return os.getpid()
        deadline = time.monotonic() + 30
        while len(list(tmp_path.iterdir())) < count - 1:
            if time.monotonic() > deadline:
                return "the others were left waiting"
            time.sleep(0.01)
        return "all others done"

    results = parallel_compile.run_forked(count, 2, task)
    assert results[0] == "all others done"
    assert len(set(results[1:])) == 1 and results[1] != os.getpid()


def test_variants_compile_in_one_batch_to_the_images_of_separate_compiles(monkeypatch):
    """compile_plans over several targets: one batch of workers for all of them (the reductions, the
    likely longest, handed out first), and each target's image byte for byte compile_plan's."""
    targets = [Target.named("x86_64-unknown-linux-gnu", cpu) for cpu in ("x86-64-v3", "x86-64-v2")]
    monkeypatch.setenv("KILN_COMPILE_JOBS", "1")
    alone = [compile_plan(_plans(), t, cache=None) for t in targets]
    batches = []
    real = parallel_compile.run_forked

    def spy(count, workers, task, order=None):
        batches.append((count, workers, list(order)))
        return real(count, workers, task, order)

    monkeypatch.setattr(parallel_compile, "run_forked", spy)
    monkeypatch.setenv("KILN_COMPILE_JOBS", "2")
    with recording() as timings:
        both = compile_plans(_plans(), targets, cache=None)
    assert [b.image.code for b in both] == [a.image.code for a in alone]
    assert [b.image.relocs for b in both] == [a.image.relocs for a in alone]
    assert [b.workgroups for b in both] == [a.workgroups for a in alone]
    assert [[k.entry_offset for k in b.kernels] for b in both] == [[k.entry_offset for k in a.kernels] for a in alone]
    assert [(count, workers) for count, workers, _ in batches] == [(14, 2)]
    assert sorted(batches[0][2][:2]) == [6, 13]  # the reduction kernel (the 7th) of both targets first
    kernel_stages = [d for n, _, d in timings.stages if n == "kernel"]
    assert len(kernel_stages) == 14 and all(d.endswith("(compiled)") for d in kernel_stages)
