"""Bounding, cancelling and interrupting calls from Python: Context.set_limits (timeout, max_steps),
Context.cancel from another thread, kiln.jit(timeout=...), Program.get_context, and Ctrl-C
(SIGINT) during a never-ending kiln.lax.while_loop, in this process and in a subprocess."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.lax as lax
from kiln import Program
from kiln.vm.runtime import CANCELLED, DEADLINE_EXCEEDED, CallLimits, KilnRuntimeError

X = np.array([1.0, 2.0, 3.0], np.float32)


def _spin(x, go):
    """Loops while `go` > 0 (it never changes): go=0 returns at once, go=1 never returns."""
    def body(c):
        i, v, g = c
        return i + 1, v * np.float32(0.5) + np.float32(1.0), g

    i, v, _ = lax.while_loop(lambda c: c[2] > 0, body, (0, x, go))
    return i, v


def _count(x, n):
    """n iterations of the same loop body (a finite call whose step count grows with n)."""
    i, v = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * np.float32(0.5) + np.float32(1.0)),
                          (0, x))
    return i, v


def _count_reference(x, n):
    v = x.copy()
    for _ in range(n):
        v = v * np.float32(0.5) + np.float32(1.0)
    return v


class Spinner(Program):
    _calls = Program.export_global(np.int32(0), mutable=True)

    def spin(self, x=Program.like(X), go=Program.like(np.int32(0))):
        self._calls = self._calls + 1
        return _spin(x, go)

    def count(self, x=Program.like(X), n=Program.like(np.int32(0))):
        return _count(x, n)


@pytest.fixture(scope="module")
def spinner():
    return Spinner()


@pytest.fixture(scope="module")
def jitted_spin():
    f = kiln.jit(_spin)
    f(X, 0)  # compiles
    return f


def _context_of(jitted):
    (executable,) = jitted._executables.values()  # the context's prepared call of "main"
    return executable.context


class _SafetyNet:
    """Cancels `context`'s call after `seconds` so that a broken interrupt fails the test instead of hanging it."""

    def __init__(self, context, seconds=30.0):
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(context, seconds), daemon=True)
        self.fired = False

    def _run(self, context, seconds):
        if not self._done.wait(seconds):
            self.fired = True
            context.cancel()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


def _send_sigint_after(seconds):
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


@pytest.fixture
def default_sigint():
    """Python's default SIGINT handler (a test run in the background may have SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


# ---- limits ------------------------------------------------------------------------

def test_timeout_stops_a_never_ending_call_and_the_context_keeps_working(spinner):
    ctx = Program.get_context(spinner)
    try:
        ctx.set_limits(timeout=0.2)
        assert ctx.limits == CallLimits(timeout=0.2)
        start = time.monotonic()
        with _SafetyNet(ctx), pytest.raises(KilnRuntimeError, match="timeout of 0.200 s") as e:
            spinner.spin(X, 1)
        assert e.value.code == DEADLINE_EXCEEDED and e.value.code_name == "DEADLINE_EXCEEDED"
        assert 0.2 <= time.monotonic() - start < 10
        i, v = spinner.spin(X, 0)  # within the limit: runs
        assert int(i) == 0
        np.testing.assert_array_equal(v, X)
        i, v = spinner.count(X, 7)
        assert int(i) == 7
        np.testing.assert_allclose(v, _count_reference(X, 7), rtol=1e-6)
    finally:
        ctx.set_limits()
    assert ctx.limits == CallLimits()


def test_max_steps_bound_is_deterministic(spinner):
    ctx = Program.get_context(spinner)
    try:
        ctx.set_limits(max_steps=200)
        for _ in range(2):  # the same call fails the same way each time
            with pytest.raises(KilnRuntimeError, match="limit of 200") as e:
                spinner.count(X, 1000)
            assert e.value.code == DEADLINE_EXCEEDED
        with _SafetyNet(ctx), pytest.raises(KilnRuntimeError) as e:
            spinner.spin(X, 1)
        assert e.value.code == DEADLINE_EXCEEDED
        i, v = spinner.count(X, 3)  # a few iterations fit in 200 steps
        assert int(i) == 3
        np.testing.assert_allclose(v, _count_reference(X, 3), rtol=1e-6)
    finally:
        ctx.set_limits()
    i, _ = spinner.count(X, 1000)  # no bound any more
    assert int(i) == 1000


@pytest.mark.parametrize("kwargs, pattern", [
    ({"timeout": 0}, "timeout must be a positive, finite number of seconds or None, got 0"),
    ({"timeout": -1.0}, "got -1.0"),
    ({"timeout": float("nan")}, "got nan"),
    ({"timeout": float("inf")}, "got inf"),
    ({"timeout": 1e12}, "got 1000000000000.0"),  # past 2**64 ns
    ({"timeout": "1"}, "got '1'"),
    ({"timeout": True}, "got True"),
    ({"max_steps": 0}, "max_steps must be an int from 1 to 2\\*\\*64-1 or None, got 0"),
    ({"max_steps": -5}, "got -5"),
    ({"max_steps": 2**64}, "got 18446744073709551616"),
    ({"max_steps": 1.5}, "got 1.5"),
    ({"max_steps": False}, "got False"),
])
def test_bad_limits_are_refused(spinner, kwargs, pattern):
    ctx = Program.get_context(spinner)
    with pytest.raises(ValueError, match=pattern):
        ctx.set_limits(**kwargs)
    assert ctx.limits == CallLimits()  # unchanged
    with pytest.raises(ValueError, match=pattern):
        kiln.jit(_spin, **kwargs)


def test_numpy_numbers_are_accepted_as_limits(spinner):
    ctx = Program.get_context(spinner)
    try:
        ctx.set_limits(timeout=np.float32(0.5), max_steps=np.int64(10**9))
        assert ctx.limits == CallLimits(timeout=0.5, max_steps=10**9)
        assert type(ctx.limits.timeout) is float and type(ctx.limits.max_steps) is int
        assert int(spinner.count(X, 4)[0]) == 4
    finally:
        ctx.set_limits()


def test_jit_timeout_and_max_steps_keywords():
    f = kiln.jit(_spin, timeout=0.2)
    assert int(f(X, 0)[0]) == 0
    with _SafetyNet(_context_of(f)), pytest.raises(KilnRuntimeError) as e:
        f(X, 1)
    assert e.value.code == DEADLINE_EXCEEDED
    np.testing.assert_array_equal(f(X, 0)[1], X)

    g = kiln.jit(max_steps=200)(_count)
    with pytest.raises(KilnRuntimeError, match="limit of 200") as e:
        g(X, 1000)
    assert e.value.code == DEADLINE_EXCEEDED
    assert int(g(X, 3)[0]) == 3
    # inside another traced function the bound does not apply (it is one kernel call there)
    outer = kiln.jit(lambda x: g(x, 1000)[0])
    assert int(outer(X)) == 1000


def test_get_context_needs_a_program_instance(spinner):
    assert Program.get_context(spinner) is spinner._kiln_context
    with pytest.raises(TypeError, match="expected a Program instance, got type"):
        Program.get_context(Spinner)


# ---- cancel --------------------------------------------------------------------------

def test_cancel_from_another_thread_stops_the_call(spinner):
    ctx = Program.get_context(spinner)
    ctx.cancel()  # no call running: does nothing, the next call is not affected
    assert int(spinner.count(X, 2)[0]) == 2
    calls = int(spinner._calls)
    timer = threading.Timer(0.3, ctx.cancel)
    timer.start()
    start = time.monotonic()
    try:
        with _SafetyNet(ctx, 60) as net, pytest.raises(KilnRuntimeError, match="cancelled") as e:
            spinner.spin(X, 1)
    finally:
        timer.join()
    assert not net.fired
    assert e.value.code == CANCELLED and e.value.code_name == "CANCELLED"
    assert time.monotonic() - start < 30
    assert int(spinner._calls) == calls + 1  # the store before the loop happened
    i, v = spinner.spin(X, 0)
    assert int(i) == 0 and int(spinner._calls) == calls + 2
    np.testing.assert_array_equal(v, X)


def test_cancel_stops_a_call_on_a_worker_thread(jitted_spin):
    ctx = _context_of(jitted_spin)
    errors = []

    def worker():
        try:
            jitted_spin(X, 1)
        except KilnRuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    time.sleep(0.3)
    deadline = time.monotonic() + 30
    while t.is_alive() and time.monotonic() < deadline:
        ctx.cancel()  # repeated: the call may not have started yet
        t.join(0.05)
    assert not t.is_alive()
    assert [e.code for e in errors] == [CANCELLED]
    assert int(jitted_spin(X, 0)[0]) == 0


# ---- Ctrl-C ----------------------------------------------------------------------------

def test_sigint_interrupts_a_call_on_the_main_thread(jitted_spin, default_sigint):
    ctx = _context_of(jitted_spin)
    for _ in range(2):  # and again: the context and the Ctrl-C handling stay usable
        timer = _send_sigint_after(0.3)
        start = time.monotonic()
        try:
            with _SafetyNet(ctx) as net, pytest.raises(KeyboardInterrupt):
                jitted_spin(X, 1)
        finally:
            timer.join()
        assert not net.fired
        assert time.monotonic() - start < 20
        i, v = jitted_spin(X, 0)
        assert int(i) == 0
        np.testing.assert_array_equal(v, X)
    assert signal.set_wakeup_fd(-1) == -1  # nothing left installed


def test_sigint_reaches_a_wakeup_fd_set_before_the_call(jitted_spin, default_sigint):
    """A wakeup fd set before the call (asyncio's, say) gets the signal's byte and is restored."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    previous = signal.set_wakeup_fd(write_fd)
    try:
        timer = _send_sigint_after(0.3)
        try:
            with _SafetyNet(_context_of(jitted_spin)) as net, pytest.raises(KeyboardInterrupt):
                jitted_spin(X, 1)
        finally:
            timer.join()
        assert not net.fired
        assert signal.set_wakeup_fd(write_fd) == write_fd  # restored after the call
        deadline = time.monotonic() + 5
        data = b""
        while signal.SIGINT not in data and time.monotonic() < deadline:
            try:
                data += os.read(read_fd, 64)
            except BlockingIOError:
                time.sleep(0.01)
        assert signal.SIGINT in data
    finally:
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)


def test_sigint_with_a_handler_of_its_own_does_not_cancel(jitted_spin):
    """A SIGINT handler other than Python's default runs after the call, as for any C call."""
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    ctx = _context_of(jitted_spin)
    try:
        timer = _send_sigint_after(0.2)
        try:
            with _SafetyNet(ctx, 1.5) as net, pytest.raises(KilnRuntimeError) as e:
                jitted_spin(X, 1)
        finally:
            timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert net.fired and e.value.code == CANCELLED  # stopped by the safety net's cancel()
    assert seen == [signal.SIGINT]


_SUBPROCESS = textwrap.dedent('''
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    sys.path.insert(0, {tests!r})
    from test_call_limits import X, Spinner, _spin
    import kiln

    f = kiln.jit(_spin)
    m = Spinner()
    assert int(f(X, 0)[0]) == 0 and int(m.spin(X, 0)[0]) == 0  # compiled
    for name, call in (("jit", f), ("program", m.spin)):
        print("started", name, flush=True)
        start = time.monotonic()
        try:
            call(X, 1)
        except KeyboardInterrupt:
            print("interrupted", name, round(time.monotonic() - start, 3), flush=True)
        i, v = call(X, 0)  # the same context again
        print("again", name, int(i), v.tolist(), flush=True)
    print("started uncaught", flush=True)
    f(X, 1)
''')


def test_sigint_to_a_subprocess_in_a_never_ending_loop():
    script = _SUBPROCESS.format(tests=str(Path(__file__).parent))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, restore_signals=True)
    lines = []
    try:
        for name in ("jit", "program", "uncaught"):
            line = proc.stdout.readline()
            lines.append(line)
            assert line.startswith("started"), (lines, proc.stderr.read() if proc.poll() is not None else "")
            time.sleep(0.5)  # well inside the C call
            proc.send_signal(signal.SIGINT)
            if name == "uncaught":
                break
            for _ in range(2):
                lines.append(proc.stdout.readline())
            assert lines[-2].startswith(f"interrupted {name}"), lines
            assert float(lines[-2].split()[2]) < 10, lines  # promptly: the signal came 0.5 s in
            assert lines[-1] == f"again {name} 0 {X.tolist()}\n", lines
        returncode = proc.wait(timeout=30)  # exits promptly with KeyboardInterrupt
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert returncode == -signal.SIGINT, (returncode, stderr)
    assert "KeyboardInterrupt" in stderr


def test_a_late_sigint_interrupts_the_next_call(jitted_spin):
    """A SIGINT whose KeyboardInterrupt Python already raised, read by the watcher only once the next call
    runs, cancels that call: it raises KeyboardInterrupt too, not KilnRuntimeError CANCELLED."""
    from kiln.vm import runtime

    ctx = _context_of(jitted_spin)

    def late_watcher():
        time.sleep(0.3)
        with runtime._CTRL_C._lock:
            call = runtime._CTRL_C._active
            call[1] = True  # what the watcher records for a SIGINT
            ctx.cancel()

    t = threading.Thread(target=late_watcher)
    t.start()
    try:
        with _SafetyNet(ctx) as net, pytest.raises(KeyboardInterrupt):
            jitted_spin(X, 1)
    finally:
        t.join()
    assert not net.fired
    assert int(jitted_spin(X, 0)[0]) == 0


def test_calls_work_without_the_ctrl_c_watcher(jitted_spin, monkeypatch):
    """When no pipe can be made, or the wakeup fd cannot be set, calls still run (without Ctrl-C)."""
    from kiln.vm import runtime

    def no_pipe():
        raise OSError(24, "Too many open files")

    runtime._CTRL_C._forget()  # as in a forked child: starts afresh on the next call
    monkeypatch.setattr(os, "pipe", no_pipe)
    assert int(jitted_spin(X, 0)[0]) == 0
    assert runtime._CTRL_C._write_fd == -1
    monkeypatch.undo()

    def refuse(*args, **kwargs):
        raise ValueError("set_wakeup_fd only works in main thread of the main interpreter")

    monkeypatch.setattr(signal, "set_wakeup_fd", refuse)
    np.testing.assert_array_equal(jitted_spin(X, 0)[1], X)
    monkeypatch.undo()
    assert runtime._CTRL_C._write_fd >= 0  # started again
    assert signal.set_wakeup_fd(-1) == -1


def test_a_wakeup_fd_closed_during_a_call_is_not_restored():
    from kiln.vm import runtime

    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    os.close(write_fd)
    signal.set_wakeup_fd(-1)
    runtime._CtrlC._restore(write_fd)  # closed: leaves no wakeup fd rather than failing
    assert signal.set_wakeup_fd(-1) == -1


def test_python_floats_into_bfloat16_need_ml_dtypes(monkeypatch):
    from kiln.vm import runtime

    class Half(Program):
        def twice(self, x=Program.like(np.zeros(2, runtime.numpy_dtype("bf16")))):
            return x * 2

    m = Half()
    np.testing.assert_array_equal(m.twice([1.5, -2.0]).astype(np.float32), [3, -4])
    from kiln.vm import _convert

    monkeypatch.setattr(_convert, "_BF16", None)  # where the conversion looks for ml_dtypes
    with pytest.raises(KilnRuntimeError, match=r"twice: argument 0 'x': converting Python floats to bf16 needs "
                                               r"ml_dtypes; pass the raw bfloat16 bits as uint16"):
        m.twice([1.5, -2.0])


def test_ctrl_c_is_armed_only_where_it_can_stop_a_call_early(jitted_spin, monkeypatch):
    """A call checks for cancellation before each dispatch and call and at each backward branch: a function
    with no loop, no call and one dispatch checks once, as it starts, so kiln.jit skips the wakeup fd swaps
    for it (a SIGINT then raises KeyboardInterrupt as the call returns, as it would anyway); a loop, or
    more than one dispatch (a matmul and a reduction), keeps them."""
    import kiln.numpy as knp

    one = kiln.jit(lambda x, y: x + 2.0 * y)
    two = kiln.jit(lambda x: (x @ x.T, knp.sum(knp.tanh(x), axis=1)))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    one(X, X), two(x), jitted_spin(X, 0)  # compiled
    swaps = []
    real = signal.set_wakeup_fd
    monkeypatch.setattr(signal, "set_wakeup_fd", lambda fd, **kw: swaps.append(fd) or real(fd, **kw))
    np.testing.assert_array_equal(one(X, X), X * 3)
    assert swaps == []
    np.testing.assert_allclose(two(x)[0], x @ x.T)
    assert len(swaps) == 2  # set, then restored
    assert int(jitted_spin(X, 0)[0]) == 0
    assert len(swaps) == 4
