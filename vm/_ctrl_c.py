"""Ctrl-C (SIGINT) during a runtime call made on the main thread cancels the call (_CtrlC)."""
from __future__ import annotations

import os
import select
import signal
import threading
import time

from kiln.vm import _clib
from kiln.vm._clib import CANCELLED, _Status

_MAIN_THREAD = threading.main_thread().ident


class _CtrlC:
    """Makes Ctrl-C (SIGINT) cancel a call that the main thread is making into the runtime.

    Python runs its SIGINT handler, which raises KeyboardInterrupt, in the main
    thread between bytecodes: a call blocked in C would notice only when it
    returns, which a never-ending loop never does. For the duration of a call
    on the main thread, the signal wakeup fd (signal.set_wakeup_fd) points
    Python's C-level signal handler at a pipe that a watcher thread reads. On
    SIGINT, when Python's handler for it is the default one, the watcher
    cancels the call (kiln_context_cancel, repeated every few milliseconds
    until the call returns, which also covers a SIGINT that lands just before
    the call starts); the call returns CANCELLED, having released what it
    allocated, and Python raises the KeyboardInterrupt as the call returns.
    A wakeup fd set before the call (asyncio's, for example) gets every byte
    forwarded and is restored afterwards.

    Why this scheme: the call stays on the calling thread and costs two
    wakeup fd swaps and a lock (about a microsecond) per call; running
    the call on a helper thread while the main thread waits interruptibly
    costs a thread hand-off per call (10 to 70 us measured, with the GIL).
    Calls from other threads are not touched (Python delivers
    KeyboardInterrupt to the main thread only); Context.cancel() and
    set_limits() bound those. kiln.jit skips this for a function that Ctrl-C
    could not stop before its end anyway: one with no loop, no call and at
    most one dispatch (kiln.vm.runtime._ctrl_c_stops_early).
    """

    def __init__(self):
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)

    def _reset(self) -> None:
        self._lock = threading.Lock()  # orders the watcher's cancel against a call's end
        self._read_fd = self._write_fd = -1
        self._poll = None
        self._active = None       # the main thread's call: [context pointer, cancelled by SIGINT]
        self._forward = -1        # the wakeup fd that was set before that call
        self._last_previous = -1  # the same, kept after the call

    def _start(self) -> None:
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)  # Python's handler must never block on it
        self._poll = select.poll()
        self._poll.register(read_fd, select.POLLIN)
        self._read_fd, self._write_fd = read_fd, write_fd
        try:
            threading.Thread(target=self._watch, args=(read_fd,), name="kiln-ctrl-c", daemon=True).start()
        except BaseException:
            self._forget()
            raise

    def _forget(self) -> None:
        """Closes the pipe and starts afresh on the next call (in a forked child, whose watcher
        thread is gone, or when the watcher could not start)."""
        fds = self._read_fd, self._write_fd
        self._reset()  # first: an old watcher then sees the pipe is no longer ours and stops
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def invoke(self, *call) -> _Status:
        """kiln_context_invoke(*call) made on the main thread, cancelled by SIGINT."""
        return self.call(_clib._lib_handle.kiln_context_invoke, call)

    def call(self, c_invoke, call: tuple) -> _Status:
        """c_invoke(*call), a call on the context call[0] (kiln_context_invoke or
        kiln_context_invoke_host) made on the main thread, cancelled by SIGINT."""
        write_fd = self._write_fd
        if write_fd < 0:
            try:
                self._start()
            except (OSError, RuntimeError):  # no pipe or thread to be had: an uninterruptible call
                return c_invoke(*call)
            write_fd = self._write_fd
        outer = self._active, self._forward  # a call from a signal handler nests
        try:
            previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except ValueError:  # not the main interpreter's main thread: no signals here
            return c_invoke(*call)
        except BaseException:  # a KeyboardInterrupt raised as it returned, its result lost
            self._restore(self._last_previous)
            raise
        try:
            if previous != write_fd:
                self._forward = self._last_previous = previous
            self._active = token = [call[0], False]
            status = c_invoke(*call)
        finally:
            try:
                signal.set_wakeup_fd(previous)
            except (ValueError, OSError):  # closed meanwhile
                self._restore(previous)
            with self._lock:
                if previous >= 0 and self._poll.poll(0):  # bytes the watcher has not passed on
                    self._pass_on(os.read(self._read_fd, 4096))
                self._active, self._forward = outer
        if token[1] and status.value and \
                _clib._lib_handle.kiln_status_code(status.value) == CANCELLED:
            # a SIGINT whose KeyboardInterrupt Python raised before this call began
            # reached the watcher only now: it interrupts this call instead
            raise KeyboardInterrupt
        return status

    @staticmethod
    def _restore(fd: int) -> None:
        try:
            signal.set_wakeup_fd(fd)
        except (ValueError, OSError):  # closed meanwhile
            signal.set_wakeup_fd(-1)

    def _pass_on(self, data: bytes) -> None:
        """Forwards signal bytes to the wakeup fd our pipe replaced (under the lock)."""
        if self._forward >= 0:
            try:
                os.write(self._forward, data)
            except OSError:  # full or closed: Python's own handler would drop them too
                pass

    def _watch(self, read_fd: int) -> None:
        while True:
            try:
                select.select([read_fd], [], [])
            except (OSError, ValueError):  # closed
                return
            with self._lock:
                if read_fd != self._read_fd:
                    return
                try:
                    data = os.read(read_fd, 4096)
                except BlockingIOError:  # the calling thread took them
                    continue
                except OSError:  # closed
                    return
                self._pass_on(data)
                call = self._active
            if call is None or signal.SIGINT not in data \
                    or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                continue
            call[1] = True
            while True:
                with self._lock:
                    if self._active is not call:
                        break
                    _clib._lib_handle.kiln_context_cancel(call[0])
                time.sleep(0.005)


_CTRL_C = _CtrlC()

